"""`tfpack train`: pre-train a BERT on packed (or unpacked) data with `tfpack.training`.

::

    tfpack train --input 'packed/part-*.tfrecord' --output runs/bert --steps 1000
    tfpack train --input 'wiki/*.tfrecord' --input-format google --pack optimal \\
        --max-length 128 --max-sequences-per-pack 3 --max-predictions 20 --output runs/bert
    tfpack train --config train.json --strategy mirrored --steps 2000

``--config`` reads a JSON object whose keys are the flag names (``max_length``
or ``max-length``); flags given on the command line win. Input is packed
TFRecords from ``tfpack pack`` (``--input-format packed``, the default) or
Google ``create_pretraining_data`` TFRecords (``--input-format google``),
packed on the fly with ``--pack ALGORITHM`` or trained unpacked with
``--pack none``.

``--batch-size`` and ``--accumulation-steps`` describe the *unpacked* recipe
(sequences per replica and micro-step). With packed data, ``--packing-adjustment
accumulation`` (default) cuts the accumulation count by the packing factor,
``batch`` cuts the micro-batch, ``beta`` keeps both and uses LAMB's
``beta ** p`` instead (seed 000, section 3.3).

``--per-host`` (Google records, ``--strategy multi-worker``): each worker
reads only its own files of ``--input`` (``files[w::W]``, at least one file a
worker) and packs them; the workers agree on one pack count and pad with empty
packs, so every example is trained on exactly once an epoch
(`tfpack.training.HostPacking`). The packing factor is then known only after
packing: pass ``--packing-factor`` to adjust the batch rule by it.

Before the first update the model is checked: one probe pack through the
packed model and each of its sequences alone must agree (outputs and
gradients); ``--no-check-exact`` skips it (docs/training.md).

The output directory gets ``train_config.json`` (the resolved settings, which
``tfpack export --run DIR`` reads), ``log.jsonl`` and the checkpoints; running
again with the same ``--output`` resumes: the settings in `RESUMABLE` (learning
rate, steps, ...) may change and are applied, any other change is refused
naming it. The last line on stdout is a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from tfpack.errors import TfpackError
from tfpack.params import (Boolean, ExistingFile, Integer, Options, OutputPath, Real, Text,
                           argument, check)

__all__ = ["add_parser", "run", "DEFAULTS", "RESUMABLE", "build_model"]

DEFAULTS = {
    "input": None, "input_format": "packed", "pack": "optimal", "output": None,
    "max_length": 128, "max_sequences_per_pack": 3, "max_predictions": 20,
    "vocab_size": 30522, "layers": 2, "hidden": 128, "heads": 2, "intermediate": 512,
    "dropout": 0.1, "steps": 100, "batch_size": 32, "accumulation_steps": 1,
    "packing_adjustment": "accumulation", "packing_factor": None,
    "learning_rate": 1e-3, "weight_decay": 0.01, "warmup_steps": 0,
    "strategy": "default", "tpu": None, "mixed_precision": "float32", "jit_compile": True,
    "log_every": 10, "checkpoint_every": 100, "seed": 0, "progress": False,
    "check_exact": True, "per_host": False,
}
# Keys renamed since (old name -> name): old --config files and train_config.json still load.
RENAMED = {"max_per_pack": "max_sequences_per_pack"}
# Settings a resumed run may change (applied; train_config.json records them).
RESUMABLE = frozenset({"steps", "learning_rate", "warmup_steps", "weight_decay", "dropout",
                       "log_every", "checkpoint_every", "progress", "jit_compile", "tpu",
                       "output", "config", "check_exact"})
_CHOICES = {
    "input_format": ("packed", "google"),
    "packing_adjustment": ("accumulation", "batch", "beta", "none"),
    "strategy": ("default", "mirrored", "multi-worker", "tpu"),
    "mixed_precision": ("float32", "mixed_float16", "mixed_bfloat16"),
}
_POSITIVE, _NON_NEGATIVE = Integer(1), Integer(0)
# Every setting's constraint (tfpack.params), declared once: it is the flag's argparse type
# and the check of a --config value alike.
SETTINGS = {
    "input": Text("a glob of TFRecords or a packed output directory (flag or config)"),
    "input_format": Options(*_CHOICES["input_format"]),
    "pack": Text("a planner name or 'none'"),
    "output": OutputPath("directory"),
    **dict.fromkeys(("max_length", "max_sequences_per_pack", "max_predictions", "vocab_size",
                     "layers", "hidden", "heads", "intermediate", "steps", "batch_size",
                     "accumulation_steps", "log_every", "checkpoint_every"), _POSITIVE),
    "warmup_steps": _NON_NEGATIVE, "seed": _NON_NEGATIVE,
    "dropout": Real(0, 1, closed="left"),
    "learning_rate": Real(0, closed="neither"),
    "weight_decay": Real(0),
    "packing_factor": [None, Real(1)],
    "packing_adjustment": Options(*_CHOICES["packing_adjustment"]),
    "strategy": Options(*_CHOICES["strategy"]),
    "tpu": [None, Text("a TPU name or address")],
    "mixed_precision": Options(*_CHOICES["mixed_precision"]),
    **dict.fromkeys(("jit_compile", "progress", "check_exact", "per_host"), Boolean()),
}
_HELP = {
    "input": "glob of TFRecords (packed from `tfpack pack`, or Google format)",
    "input_format": "(default packed)",
    "pack": "google input: planner name, or 'none' to train unpacked (default optimal)",
    "output": "run directory: config, log.jsonl, checkpoints (resumed if present)",
    "max_sequences_per_pack": "K (google input; old name: --max-per-pack)",
    "max_length": "L (google input)", "max_predictions": "M (google input)",
    "vocab_size": "BERT vocabulary", "layers": "encoder layers", "hidden": "hidden size",
    "heads": "attention heads", "intermediate": "feed-forward size",
    "steps": "optimizer updates", "batch_size": "unpacked sequences per replica per micro-step",
    "accumulation_steps": "unpacked micro-steps per update",
    "warmup_steps": "linear learning-rate warm-up",
    "log_every": "updates per log line (one host sync)",
    "checkpoint_every": "updates per checkpoint", "seed": "seed",
    "packing_factor": "override the packing factor (default: from the plan / stats.json)",
    "strategy": "tf.distribute strategy (default: default)",
    "tpu": "TPU name or address for --strategy tpu",
}


def _flag_type(constraint):
    """The argparse type of a declared setting (ints and numbers converted first)."""
    kinds = constraint if isinstance(constraint, list) else [constraint]
    convert = (int if any(isinstance(k, Integer) for k in kinds)
               else float if any(isinstance(k, Real) for k in kinds) else str)
    return argument([k for k in kinds if k is not None], convert=convert)


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``tfpack train`` and its flags (all default to the config file, then DEFAULTS)."""
    parser = subparsers.add_parser(
        "train", help="train a BERT on packed or unpacked TFRecords (tf.distribute, XLA)",
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--config", type=argument(ExistingFile()),
                        help="JSON file of settings (keys: flag names)")
    for name, constraint in SETTINGS.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(constraint, Boolean):
            continue  # switches, below
        aliases = ("--max-per-pack",) if name == "max_sequences_per_pack" else ()
        if name in _CHOICES:
            parser.add_argument(flag, choices=_CHOICES[name], help=_HELP.get(name))
        else:
            parser.add_argument(flag, *aliases, type=_flag_type(constraint), help=_HELP.get(name))
    add = parser.add_argument
    add("--no-jit", dest="jit_compile", action="store_const", const=False, default=None,
        help="do not compile the per-replica step with XLA")
    add("--progress", action="store_const", const=True, default=None, help="progress bar")
    add("--no-check-exact", dest="check_exact", action="store_const", const=False,
        default=None, help="skip the exactness check before the first update (a probe "
        "pack against each of its sequences alone; docs/training.md)")
    add("--per-host", action="store_const", const=True, default=None,
        help="google input: each worker reads and packs only its own files (one file per "
        "worker at least; docs/training.md)")
    parser.set_defaults(run=run)
    return parser


def _renamed(config: dict) -> dict:
    """``config`` with the keys in `RENAMED` under their current names."""
    return {RENAMED.get(key, key): value for key, value in config.items()}


def resolve(args: argparse.Namespace) -> dict:
    """Flags over ``--config`` over `DEFAULTS`; validated."""
    config = dict(DEFAULTS)
    if getattr(args, "config", None):
        try:
            with open(args.config) as f:
                loaded = json.load(f)
        except (OSError, ValueError) as error:
            raise TfpackError("`--config` must be a readable JSON file. "
                              f"Received: --config={args.config} ({error})") from None
        if not isinstance(loaded, dict):
            raise TfpackError("`--config` must hold a JSON object whose keys are flag names. "
                              f"Received: --config={args.config} (a {type(loaded).__name__})")
        unknown = sorted(k for k in loaded if k.replace("-", "_") not in {*DEFAULTS, *RENAMED})
        if unknown:
            raise TfpackError(f"`--config` keys must be flag names. Received: unknown keys {unknown}")
        config.update(_renamed({k.replace("-", "_"): v for k, v in loaded.items()}))
    config.update({k: v for k, v in vars(args).items() if k in DEFAULTS and v is not None})
    for key, constraint in SETTINGS.items():  # --config values: the flags' declarations
        check(key, config[key], constraint, label="--" + key.replace("_", "-"))
    if config["per_host"] and config["input_format"] != "google":
        raise TfpackError("`--per-host` packs Google records on each worker (a packed output "
                          "is already read by share). Received: --per-host with "
                          f"--input-format={config['input_format']}")
    if config["hidden"] % config["heads"]:
        raise TfpackError("`--hidden` must be a multiple of `--heads` (each head takes an "
                          f"equal share). Received: --hidden={config['hidden']} with "
                          f"--heads={config['heads']}")
    _check_run_directory(config["output"])
    return config


# What `tfpack train` writes into its run directory (everything else there is the user's).
_RUN_FILES = ("train_config.json", "log.jsonl", "checkpoints")


def _check_run_directory(output: str) -> None:
    """A run directory is new, or tfpack's (its train_config.json): never a user's log replaced."""
    config_path = os.path.join(output, "train_config.json")
    if os.path.lexists(config_path):
        try:
            with open(config_path) as f:
                previous = json.load(f)
        except (OSError, ValueError) as error:
            raise TfpackError("A resumed run's train_config.json must be readable. "
                              f"Received: {config_path} ({error})") from None
        if not isinstance(previous, dict) or "element_spec" not in previous:
            raise TfpackError("`--output` must be a new directory or a `tfpack train` run. "
                              f"Received: --output={output} holding a train_config.json "
                              "tfpack did not write")
        return
    clash = [n for n in _RUN_FILES if os.path.lexists(os.path.join(output, n))]
    if clash:
        raise TfpackError("`--output` must be a new directory or a `tfpack train` run (with its "
                          f"train_config.json). Received: --output={output} holding "
                          f"{', '.join(clash)}, not written by tfpack (it would be replaced)")


def _strategy(config: dict):
    import tensorflow as tf

    name = config["strategy"]
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi-worker":  # Cluster from TF_CONFIG.
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=config["tpu"] or "")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    return tf.distribute.get_strategy()


def _dataset(config: dict):
    """(input, packing factor, element spec of one pack).

    One packed output (its directory, or a glob of its shards) comes back as its
    `PackedOutput` (metadata only): the trainer reads each worker's share of it.
    Several outputs and Google records come back as a dataset of unbatched
    packs, which every worker reads.
    """
    from tfpack import data, formats
    from tfpack.training import inputs

    if config["input_format"] == "packed":
        pattern = check_input_patterns(config["input"])
        if len({input_directory(part) for part in pattern.split(",")}) == 1:
            dataset = inputs.packed_output(pattern)  # One output: metadata only.
            spec = inputs.empty_packs(dataset, 1).element_spec
        else:
            dataset = formats.read_packed(pattern)
            spec = dataset.element_spec
        factor = config["packing_factor"]
        if factor is None:
            try:
                with open(os.path.join(input_directory(config["input"]), "stats.json")) as f:
                    factor = json.load(f)["packing_factor"]
            except (OSError, ValueError, KeyError, TypeError):
                factor = 1.0
        return dataset, float(factor), spec
    unpacked = config["pack"] == "none"
    if config["per_host"]:
        return _per_host(config, unpacked)
    examples = formats.read_google_records(check_input_patterns(config["input"]))
    packer = data.pack(
        max_length=config["max_length"],
        max_sequences_per_pack=1 if unpacked else config["max_sequences_per_pack"],
        max_predictions_per_pack=config["max_predictions"],
        algorithm="none" if unpacked else config["pack"], truncate=True, seed=config["seed"])
    dataset = examples.apply(packer)
    factor = config["packing_factor"] or packer.report.packing_factor or 1.0
    return dataset, float(factor), dataset.element_spec


def _per_host(config: dict, unpacked: bool):
    """Google records each worker packs from its own files (`tfpack.training.HostPacking`):
    the packing factor is known only after packing, so it is ``--packing-factor`` (1: no
    adjustment of the batch rule); the packs' features are the BERT ones."""
    from tfpack.data import packed_feature_spec
    from tfpack.features import FeatureRoles
    from tfpack.training import HostPacking

    K = 1 if unpacked else config["max_sequences_per_pack"]
    source = HostPacking(
        check_input_patterns(config["input"]).split(","), max_length=config["max_length"],
        max_sequences_per_pack=K, max_predictions_per_pack=config["max_predictions"],
        algorithm="none" if unpacked else config["pack"], truncate=True, seed=config["seed"])
    spec = packed_feature_spec(FeatureRoles.bert(), config["max_length"], K,
                               config["max_predictions"])
    return source, float(config["packing_factor"] or 1.0), spec


def input_directory(pattern: str) -> str:
    """The directory of ``--input``'s first part: itself when it names a directory
    (``DIR`` and ``DIR/`` alike), else the directory of the glob."""
    first = pattern.split(",")[0].strip()
    return first if os.path.isdir(first) else os.path.dirname(first)


def check_input_patterns(pattern: str) -> str:
    """``pattern`` without blanks around its parts; every comma-separated part must name
    a directory or match a file: a part matching nothing is refused, never silently left
    out of training."""
    import tensorflow as tf  # gfile: cloud paths (gs://) too.

    for part in pattern.split(","):
        part = part.strip()
        if not part or not (tf.io.gfile.isdir(part) or tf.io.gfile.glob(part)):
            raise TfpackError(
                "Every comma-separated part of `--input` must name a packed output directory "
                f"or match at least one file. Received: --input={pattern} (part {part!r} "
                "matches nothing)")
    return ",".join(part.strip() for part in pattern.split(","))


def _plan_beside(config: dict, factor: float):
    """The `PackingPlan` of a packed input (its depth spread), if it matches ``factor``."""
    if config["input_format"] != "packed" or config["packing_factor"] is not None:
        return factor
    from tfpack.packing import PackingPlan

    try:
        plan = PackingPlan.load(os.path.join(input_directory(config["input"]), "plan.json"))
    except (TfpackError, OSError):
        return factor
    return plan if abs(plan.metrics["packing_factor"] - factor) < 1e-6 else factor


def build_model(config: dict, element_spec: dict):
    """The BERT pre-trainer of a run config, built on ``element_spec``'s shapes."""
    import tensorflow as tf

    from tfpack import models

    L = int(element_spec["input_ids"].shape[0])
    encoder = models.BertEncoder(
        vocabulary_size=config["vocab_size"], num_layers=config["layers"],
        hidden_dim=config["hidden"], num_heads=config["heads"],
        intermediate_dim=config["intermediate"], max_sequence_length=L,
        dropout=config["dropout"], attention_dropout=config["dropout"],
        dtype=config["mixed_precision"])
    model = models.BertPretrainer(encoder, dtype=config["mixed_precision"])
    model({k: tf.zeros([1] + s.shape.as_list(), s.dtype) for k, s in element_spec.items()})
    return model


def run(args: argparse.Namespace) -> int:
    """Run ``tfpack train``; returns the exit status."""
    config = resolve(args)
    import keras

    from tfpack import training
    from tfpack.training import inputs
    from tfpack.training.validation import lengths_of

    keras.utils.set_random_seed(config["seed"])
    strategy = _strategy(config)
    dataset, factor, spec = _dataset(config)
    adjustment = config["packing_adjustment"]
    rule = training.for_packing(
        config["batch_size"], config["accumulation_steps"],
        _plan_beside(config, factor) if adjustment in ("accumulation", "batch") else 1.0,
        num_replicas=strategy.num_replicas_in_sync,
        cut="batch" if adjustment == "batch" else "accumulation")
    if rule.note:  # The sequences per update never change silently.
        print(f"tfpack train: note: {rule.note}", file=sys.stderr)
    lengths = lengths_of(spec)
    try:
        os.makedirs(config["output"], exist_ok=True)
    except OSError as error:
        raise TfpackError("`--output` must be a writable directory. "
                          f"Received: --output={config['output']} ({error.strerror})") from None
    resolved = {**config, "packing_factor": factor, "micro_batch_size": rule.micro_batch_size,
                "batch_cut": rule.cut, "batch_rule_note": rule.note,
                "effective_accumulation_steps": rule.accumulation_steps,
                "element_spec": {k: [s.shape.as_list(), s.dtype.name] for k, s in spec.items()},
                **{k: v for k, v in lengths.items()}}
    config_path = os.path.join(config["output"], "train_config.json")
    if os.path.exists(config_path):
        try:
            with open(config_path) as f:
                previous = _renamed(json.load(f))
        except (OSError, ValueError) as error:
            raise TfpackError("A resumed run's train_config.json must be readable. "
                              f"Received: {config_path} ({error})") from None
        changed = sorted(k for k in previous if k not in RESUMABLE
                         and previous[k] != resolved.get(k))
        if changed:
            raise TfpackError(
                "A resumed run must keep the settings its checkpoints depend on (only "
                f"{', '.join(sorted(RESUMABLE - {'output', 'config'}))} may change). "
                f"Received: changed settings {changed} for --output={config['output']}")
    from tfpack.formats.manifest import write_atomic

    write_atomic(config_path, json.dumps(resolved, indent=1))
    # What each update holds, and how much it swings (balance=True evens it).
    print(f"tfpack train: {rule.describe()}", file=sys.stderr)

    schedule = config["learning_rate"]
    if config["warmup_steps"]:  # Linear warm-up, then cosine decay to 0.
        schedule = keras.optimizers.schedules.CosineDecay(
            0.0, max(config["steps"] - config["warmup_steps"], 1),
            warmup_target=config["learning_rate"], warmup_steps=config["warmup_steps"])
    with strategy.scope():
        model = build_model(config, spec)
        optimizer = training.Lamb(
            learning_rate=schedule, weight_decay=config["weight_decay"],
            packing_factor=factor if adjustment == "beta" else 1.0)
    trainer = training.Trainer(
        model, optimizer, micro_batch_size=rule.micro_batch_size,
        accumulation_steps=rule.accumulation_steps, strategy=strategy,
        jit_compile=config["jit_compile"], checkpoint_dir=os.path.join(config["output"],
                                                                       "checkpoints"),
        checkpoint_every=config["checkpoint_every"],
        log_path=os.path.join(config["output"], "log.jsonl"), log_every=config["log_every"],
        progress=config["progress"], check_exact=config["check_exact"])
    # A packed output: each worker reads its share, epoch after epoch; per host: each
    # worker packs its own files.
    by_worker = isinstance(dataset, (inputs.PackedOutput, training.HostPacking))
    result = trainer.fit(dataset if by_worker else dataset.repeat(), config["steps"])
    if trainer.exactness is not None:
        print(f"tfpack train: {trainer.exactness.describe()}", file=sys.stderr)
    last = result.history[-1] if result.history else {}
    print(json.dumps({"step": result.step, "loss": last.get("loss"),
                      "checkpoint": result.checkpoint, "resumed_from": result.resumed_from,
                      "packing_factor": factor, "micro_batch_size": rule.micro_batch_size,
                      "accumulation_steps": rule.accumulation_steps,
                      "batch_cut": rule.cut, "batch_rule_note": rule.note,
                      "replicas": strategy.num_replicas_in_sync,
                      "real_tokens_per_second": last.get("real_tokens_per_second")}))
    return 0
