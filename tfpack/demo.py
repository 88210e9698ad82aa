"""The main job, end to end, on real English available offline: `tfpack demo`.

Python standard-library docstrings -> tensorflow-text WordPiece tokenizer (ids
renumbered to the tokens the corpus uses) ->
BERT pre-training examples (NSP + 15% MLM) -> length histogram and packing
plan -> packed `tf.data` pipeline -> the same small BERT trained packed and
unpacked on the same number of sequences -> efficiency, realized speed-up,
loss curves, PNG plots and a SavedModel of the packed model.

The two runs start from identical weights. The unpacked run feeds one sequence
per row, padded to ``max_length``; the packed run feeds packs of up to
``max_sequences_per_pack`` sequences with the batch cut by the packing factor
(`tfpack.training.for_packing`), so both see the same number of sequences per
update and their loss curves against sequences seen line up (paper,
section 4.2). The realized speed-up is then measured apart from those runs:
after them (warm-up: both are compiled), a few short timed rounds of each,
interleaved, give the median ratio of real tokens per second and its spread
(`tfpack.training.speed`); a median above the plan's upper bound is labelled as
timing noise and not reported as a result. The timed rounds keep training the
two models on their streams.

Example:

>>> from tfpack import demo
>>> config = demo.DemoConfig(documents=20, max_length=128, steps=4, log_every=2)
>>> result = demo.run(config, output_dir="/tmp/tfpack_demo")  # doctest: +SKIP
>>> result.summary()["realized_speedup"]  # doctest: +SKIP
1.1...
"""

from __future__ import annotations

import dataclasses
import os
import time

import numpy as np

from tfpack.errors import TfpackError

__all__ = ["DemoConfig", "DemoResult", "run"]


@dataclasses.dataclass(frozen=True)
class DemoConfig:
    """Settings of the demo; the defaults run in a few minutes on 2 CPU cores.

    Attributes:
        documents: standard-library modules whose docstrings form the corpus.
        max_length: ``L``, tokens per row (512 is BERT's phase 2, where the
            paper's Wikipedia data is 50% padding).
        max_sequences_per_pack: ``K``.
        max_predictions_per_sequence: masked-LM predictions per sequence.
        algorithm: the packing planner.
        batch_size: sequences per update of the unpacked run.
        steps: updates of the unpacked run; the packed run gets as many
            updates as it needs to see the same number of sequences.
        hidden_dim, num_layers, num_heads, intermediate_dim: the BERT size.
        learning_rate: LAMB learning rate.
        log_every: updates between two points of the loss curves.
        timing_rounds: interleaved timed rounds (one update of each run)
            for the realized speed-up.
        seed: seeds data generation, packing and initialization.
    """

    documents: int = 300
    max_length: int = 512
    max_sequences_per_pack: int = 3
    max_predictions_per_sequence: int = 20
    algorithm: str = "optimal"
    batch_size: int = 32
    steps: int = 40
    hidden_dim: int = 64
    num_layers: int = 2
    num_heads: int = 2
    intermediate_dim: int = 256
    learning_rate: float = 1e-2
    log_every: int = 5
    timing_rounds: int = 5
    seed: int = 0

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name in ("algorithm",):
                continue
            if field.name == "learning_rate":
                if not value > 0:
                    raise TfpackError(
                        f"`learning_rate` must be positive. Received: learning_rate={value!r}")
            elif field.name == "seed":
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise TfpackError(
                        f"`seed` must be a non-negative integer. Received: seed={value!r}")
            elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise TfpackError(
                    f"`{field.name}` must be a positive integer. "
                    f"Received: {field.name}={value!r}")
        if self.max_length < 8:
            raise TfpackError(
                f"`max_length` must be at least 8. Received: max_length={self.max_length}")
        if self.hidden_dim % self.num_heads:
            raise TfpackError(
                "`hidden_dim` must be a multiple of `num_heads`. Received: "
                f"hidden_dim={self.hidden_dim}, num_heads={self.num_heads}")


@dataclasses.dataclass(frozen=True)
class DemoResult:
    """What `run` measured.

    Attributes:
        config: the `DemoConfig` used.
        plan: the `tfpack.packing.PackingPlan` of the examples.
        histories: ``{"packed": [...], "unpacked": [...]}``, the trainer's log
            records, each with ``sequences_seen`` added.
        speedup: the `tfpack.training.speed.SpeedupResult` (median of
            interleaved rounds, spread, noise label).
        saved_model: path of the packed model's SavedModel.
        plots: ``{"lengths": path, "losses": path}``.
        seconds: wall time of the whole job.
    """

    config: DemoConfig
    plan: object
    histories: dict
    speedup: object
    saved_model: str
    plots: dict
    seconds: float

    def summary(self) -> dict:
        """The figures worth printing, as a JSON-serializable dict."""
        metrics = self.plan.metrics
        return {
            "sequences": int(metrics["sequences"]),
            "packs": int(metrics["packs"]),
            "efficiency": float(metrics["efficiency"]),
            "packing_factor": float(metrics["packing_factor"]),
            "speedup_upper_bound": float(metrics["speedup_upper_bound"]),
            # None when the measurement is noise (above the upper bound).
            "realized_speedup": self.speedup.value,
            "realized_speedup_median": self.speedup.median,
            "realized_speedup_spread": list(self.speedup.spread),
            "realized_speedup_label": self.speedup.label,
            "final_loss_packed": self.histories["packed"][-1]["loss"],
            "final_loss_unpacked": self.histories["unpacked"][-1]["loss"],
            "sequences_seen_packed": self.histories["packed"][-1]["sequences_seen"],
            "sequences_seen_unpacked": self.histories["unpacked"][-1]["sequences_seen"],
            "saved_model": self.saved_model,
            "plots": dict(self.plots),
            "seconds": round(self.seconds, 1),
        }


def run(config: DemoConfig = DemoConfig(), *, output_dir: str = "demo_output",
        saved_model_dir: str = os.path.join("saved_models", "tfpack_demo"),
        progress: bool = False, log=None) -> DemoResult:
    """Run the demo; see the module docstring for what it does.

    Args:
        config: a `DemoConfig`.
        output_dir: where the plots and the training logs go.
        saved_model_dir: where the packed model's SavedModel goes.
        progress: show progress bars while training.
        log: a callable taking one line of text about each stage (e.g.
            ``print``), or ``None`` for silence.

    Returns:
        A `DemoResult`.
    """
    from tfpack import data, datasets, packing, plots

    say = log or (lambda line: None)
    start = time.perf_counter()
    try:
        os.makedirs(output_dir, exist_ok=True)
    except OSError as error:
        raise TfpackError(
            f"`output_dir` must be a writable directory. Received: output_dir={output_dir!r} "
            f"({error})") from None
    L, K = config.max_length, config.max_sequences_per_pack

    documents = datasets.stdlib_documents(max_documents=config.documents)
    examples, lengths, vocabulary_size = _corpus_examples(documents, config)
    say(f"corpus: {len(documents)} standard-library modules -> {lengths.size} BERT "
        f"examples, {int(lengths.sum())} tokens, max length {L}, "
        f"{vocabulary_size} WordPiece tokens in use")

    counts = packing.histogram(lengths, L)
    plan = packing.plan(counts, max_length=L, max_sequences_per_pack=K,
                        algorithm=config.algorithm, seed=config.seed)
    say(plan.summary())
    lengths_png = os.path.join(output_dir, "lengths.png")
    plots.length_histogram(counts, lengths_png, title=f"stdlib docstrings, BERT L={L}",
                           name="output_dir")

    packed = examples.apply(data.pack(max_length=L, max_sequences_per_pack=K, plan=plan,
                                      seed=config.seed)).cache()
    unpacked = examples.apply(data.pack(
        max_length=L, max_sequences_per_pack=1,
        max_predictions_per_pack=config.max_predictions_per_sequence, algorithm="none",
        seed=config.seed)).cache()

    factor = float(plan.metrics["packing_factor"])
    packed_batch = max(1, round(config.batch_size / factor))
    packed_steps = max(1, round(config.steps * config.batch_size / (packed_batch * factor)))
    models = _twin_models(config, vocabulary_size, packed.element_spec,
                          unpacked.element_spec)
    histories, trainers = {}, {}
    datasets = {"unpacked": unpacked.repeat(), "packed": packed.repeat()}
    for name, batch, steps in (("unpacked", config.batch_size, config.steps),
                               ("packed", packed_batch, packed_steps)):
        say(f"training {name}: {steps} updates of {batch} "
            f"{'packs' if name == 'packed' else 'sequences'}")
        trainers[name], histories[name] = _train(
            models[name], datasets[name], batch, steps, config,
            os.path.join(output_dir, f"{name}.jsonl"), progress)

    from tfpack.training.speed import measure_speedup

    speedup = measure_speedup(trainers["packed"], trainers["unpacked"], datasets,
                              rounds=config.timing_rounds, steps_per_round=1,
                              upper_bound=float(plan.metrics["speedup_upper_bound"]))
    losses_png = os.path.join(output_dir, "losses.png")
    plots.loss_curves(
        {name: ([r["sequences_seen"] for r in h], [r["loss"] for r in h])
         for name, h in histories.items()},
        losses_png, ylabel="MLM + NSP loss", name="output_dir",
        title=f"packed (factor {factor:.2f}) vs unpacked BERT, L={L}")

    from tfpack import export

    saved_model = export.export_saved_model(models["packed"], saved_model_dir)
    return DemoResult(config=config, plan=plan, histories=histories, speedup=speedup,
                      saved_model=str(saved_model),
                      plots={"lengths": lengths_png, "losses": losses_png},
                      seconds=time.perf_counter() - start)


def _corpus_examples(documents: list, config: DemoConfig):
    """BERT examples over the corpus's own vocabulary: ``(dataset, lengths, size)``.

    The text is tokenized with the bundled bert-base-uncased WordPiece
    vocabulary, then `tfpack.builders.compact_vocabulary` renumbers the ids to the
    tokens the corpus uses: a small model with a 30,522-way output layer would
    spend as much time in the masked-LM head as in the encoder, unlike BERT at
    real sizes, where the head is a few percent of a step.
    """
    from tfpack import builders

    documents, vocab = builders.compact_vocabulary(builders.tokenize_documents(documents),
                                                   builders.load_vocab())
    examples = builders.create_bert_examples(
        documents, vocab, max_seq_length=config.max_length,
        max_predictions_per_seq=config.max_predictions_per_sequence, seed=config.seed)
    lengths = np.array([len(e.input_ids) for e in examples], dtype=np.int64)
    return builders.examples_to_dataset(examples).cache(), lengths, len(vocab)


def _twin_models(config: DemoConfig, vocabulary_size: int, packed_spec: dict,
                 unpacked_spec: dict) -> dict:
    """The packed and unpacked models, built with identical initial weights."""
    import keras
    import tensorflow as tf

    from tfpack import models

    def build(spec):
        keras.utils.set_random_seed(config.seed)
        encoder = models.BertEncoder(
            vocabulary_size=vocabulary_size, num_layers=config.num_layers,
            hidden_dim=config.hidden_dim,
            num_heads=config.num_heads, intermediate_dim=config.intermediate_dim,
            max_sequence_length=config.max_length, dropout=0.0, attention_dropout=0.0)
        model = models.BertPretrainer(encoder)
        model({k: tf.zeros([1] + s.shape.as_list(), s.dtype) for k, s in spec.items()})
        return model

    unpacked = build(unpacked_spec)
    packed = build(packed_spec)
    packed.set_weights(unpacked.get_weights())
    return {"packed": packed, "unpacked": unpacked}


def _train(model, dataset, batch_size: int, steps: int, config: DemoConfig, log_path: str,
           progress: bool) -> list[dict]:
    from tfpack import training

    trainer = training.Trainer(
        model, training.Lamb(learning_rate=config.learning_rate), micro_batch_size=batch_size,
        log_every=config.log_every, log_path=log_path, progress=progress)
    history = trainer.fit(dataset, num_steps=steps).history
    seen = 0
    for record in history:
        seen += int(record["sequences"])
        record["sequences_seen"] = seen
    return trainer, history
