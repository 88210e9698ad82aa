"""`tfpack export`: a SavedModel from a training run or a `.keras` file.

::

    tfpack export --run runs/bert                    # -> saved_models/bert
    tfpack export --run runs/bert --output serving/bert --step 1000
    tfpack export --model classifier.keras --output saved_models/classifier/1 \
        --max-length 128 --max-sequences-per-pack 4 --padding-id 0

The SavedModel has the signatures ``serving_default`` (packed features),
``serve_sequences`` (token ids and lengths, packed inside the graph) and, with
``--padding-id``, ``serve_padded_sequences``; see `tfpack.export`. The served
L/K/M come from the flags, else from the run's data (``--run``) or the shapes
the model was trained at (recorded in the ``.keras`` file); never guessed.
``--output`` must be new, empty or a previous tfpack export (replaced
atomically). Prints the SavedModel's path (``--json``: a JSON object).
"""

from __future__ import annotations

import argparse
import json
import os

from tfpack.cli import types
from tfpack.errors import TfpackError

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``tfpack export`` and its flags."""
    parser = subparsers.add_parser(
        "export", help="export a trained model as a SavedModel (packed + unpacked serving)",
        description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", dest="run_dir", type=types.input_directory, help="run directory of `tfpack train` (latest checkpoint)")
    source.add_argument("--model", type=types.input_file, help="a .keras file of a tfpack model")
    parser.add_argument("--step", type=types.index, help="--run: checkpoint step (default: latest)")
    parser.add_argument("--output", type=types.output_directory, help="SavedModel directory (default: saved_models/<name>)")
    parser.add_argument("--max-length", type=types.count, help="L: tokens per pack served")
    parser.add_argument("--max-sequences-per-pack", "--max-per-pack", type=types.count,
                        help="K: sequences per pack served (old name: --max-per-pack)")
    parser.add_argument("--max-predictions", type=types.count,
                        help="M: masked-LM predictions per pack served")
    parser.add_argument("--padding-id", type=types.index,
                        help="the id padding input_ids rows (adds serve_padded_sequences)")
    parser.add_argument("--json", action="store_true", help="print a JSON object on stdout")
    parser.set_defaults(run=run)
    return parser


def _from_run(run_dir: str, step: int | None):
    import tensorflow as tf

    from tfpack.cli.train import build_model
    from tfpack.training.checkpoint import Checkpointer

    try:
        with open(os.path.join(run_dir, "train_config.json")) as f:
            config = json.load(f)
    except (OSError, ValueError) as error:
        raise TfpackError("`--run` must be a `tfpack train` output directory with "
                          f"train_config.json. Received: --run={run_dir} ({error})") from None
    try:  # a config edited or cut short: one line naming what is missing or wrong
        spec = {k: tf.TensorSpec(shape, dtype)
                for k, (shape, dtype) in config["element_spec"].items()}
        config = {**config, "mixed_precision": "float32"}  # Serve in float32.
        model = build_model(config, spec)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        if isinstance(error, TfpackError):
            raise
        what = f"no {error}" if isinstance(error, KeyError) else (
            f"{type(error).__name__}: {' '.join(str(error).split())[:200]}")
        raise TfpackError("`--run` must hold the complete train_config.json `tfpack train` "
                          f"wrote. Received: --run={run_dir} ({what})") from None
    checkpointer = Checkpointer(os.path.join(run_dir, "checkpoints"), model=model)
    if step is not None and step not in checkpointer.steps():
        raise TfpackError(f"`--step` must name a checkpoint of the run {checkpointer.steps()}. "
                          f"Received: --step={step}")
    restored = checkpointer.restore(step, partial=True)
    if restored is None:
        raise TfpackError(f"`--run` must hold a checkpoint. Received: --run={run_dir}")
    name = os.path.basename(os.path.normpath(run_dir))
    return model, spec, name, restored


def run(args: argparse.Namespace) -> int:
    """Run ``tfpack export``; returns the exit status."""
    from tfpack.export import DEFAULT_EXPORT_DIR, export_saved_model

    step = None
    if args.run_dir:
        model, spec, name, step = _from_run(args.run_dir, args.step)
    else:
        import keras

        import tfpack.models  # noqa: F401  (registers the classes)

        try:
            model = keras.saving.load_model(args.model)
        except (OSError, ValueError) as error:
            raise TfpackError("`--model` must be a readable .keras file of a tfpack model. "
                              f"Received: --model={args.model} ({error})") from None
        spec, name = None, os.path.splitext(os.path.basename(args.model))[0]
    path = export_saved_model(model, args.output or os.path.join(DEFAULT_EXPORT_DIR, name),
                              element_spec=spec, max_length=args.max_length,
                              max_sequences_per_pack=args.max_sequences_per_pack,
                              max_predictions_per_pack=args.max_predictions,
                              padding_id=args.padding_id)
    if args.json:
        print(json.dumps({"saved_model": path, "step": step}))
    else:
        print(path)
    return 0
