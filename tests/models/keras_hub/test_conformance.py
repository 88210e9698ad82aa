"""The conformance suite of `from_keras_hub`: every adapted family, one table.

Each family of `keras_hub_helpers.FAMILIES` (a tiny random config with
sliding windows shorter than the sequences) must give, packed:

- each sequence's outputs, and the gradients of every variable, of the
  keras-hub backbone run on that sequence alone, with dense and with
  segmented attention (so segmented == dense), rotary angles from
  `position_ids`;
- no cross-contamination (`tfpack.testing.assert_no_cross_contamination`);
- `.keras` files that load in a fresh process and give the same outputs.

One family per adapter code path (`Family.heavy`) also trains with
`fit(jit_compile=True)` and exports a SavedModel that serves what it
computes. Adding a family is one adapter file and one line in `FAMILIES`.
"""

import functools
import os
import pathlib
import subprocess
import sys
from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_hub_helpers import FAMILIES, MAX_LENGTH, examples
from keras_hub_helpers import keras_hub_alone, keras_hub_alone_in_one_batch
from keras_hub_helpers import make_backbone, make_backbone_one_layer
from keras_hub.src.layers.modeling.rotary_embedding import RotaryEmbedding
from tfpack import export, models
from tfpack.testing import assert_no_cross_contamination, next_fit
from tfpack.testing import next_token_labels, pack_examples
from tfpack.testing.exactness import padded_batch_reason
from unused_imports import with_site

PACKS = [[0, 1, 2], [3, 4]]  # 15 and 8 tokens in rows of 16.
IMPLEMENTATIONS = {
    "dense": dict(attention_implementation="dense"),
    "segmented": dict(attention_implementation="segmented",
                      max_sequences_per_pack=3, segment_length=8),
}
HEAVY = sorted(name for name, family in FAMILIES.items() if family.heavy)


def _implementations(family):
    """(name, `from_keras_hub` options) of the family's attentions: every
    family runs both."""
    return list(IMPLEMENTATIONS.items())


def _packed(family):
    data = examples(family)
    assert next_fit([len(e["input_ids"]) for e in data], MAX_LENGTH) == PACKS
    return data, pack_examples(data, MAX_LENGTH, packs=PACKS)


def _where(packed):
    """(row, token indices) of every example, in example order."""
    return [(row, np.flatnonzero(packed["sequence_ids"][row] == slot + 1))
            for row, pack in enumerate(PACKS) for slot, _ in enumerate(pack)]


def _tolerance(reference):
    # float32 rounding relative to the outputs' scale (Gemma's embeddings are
    # scaled by sqrt(hidden_dim)).
    return 1e-5 * max(1.0, float(np.max(np.abs(reference))))


def _numpy(gradients):
    return [None if g is None else np.asarray(tf.convert_to_tensor(g))
            for g in gradients]


class _RotarySpy:
    """Records the `positions` every keras-hub rotary embedding receives."""

    def __init__(self, backbone):
        self.classes = {type(layer) for layer in backbone._flatten_layers()
                        if isinstance(layer, RotaryEmbedding)}
        self.seen = []

    def __enter__(self):
        self.patches = []
        for cls in self.classes:
            call = cls.call

            def spy(layer, inputs, *args, call=call, **kwargs):
                self.seen.append(kwargs.get("positions"))
                return call(layer, inputs, *args, **kwargs)

            self.patches.append(mock.patch.object(cls, "call", spy))
        for patch in self.patches:
            patch.start()
        return self

    def __exit__(self, *exc):
        for patch in self.patches:
            patch.stop()


@pytest.fixture(scope="module")
def backbones():
    """Each family's backbone, built once for the tests that leave its
    weights as they are (`test_fit_under_xla_and_saved_model` trains its
    own)."""
    return functools.cache(make_backbone)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_packed_equals_each_sequence_alone(family, backbones):
    """Outputs and gradients of every variable (through a fixed random linear
    function of the outputs), dense and segmented. The sequences run alone
    in one right-padded batch (causal tokens never see the padding after
    them; the padding mask keeps it from the others' tokens), except where
    the library's `padded_batch_reason` says why not (Phi-3's LongRoPE reads
    the row's length, XLNet's mask is right for one row only, ESM and
    RoFormer-V2 take no padding mask): one call each. Were that rule to miss
    a family, its batched reference would differ here."""
    backbone = backbones(family)
    data, packed = _packed(family)
    rng = np.random.default_rng(1)
    weights = [rng.normal(size=(len(e["input_ids"]), backbone.hidden_dim))
               .astype("float32") for e in data]
    variables = backbone.trainable_variables
    # Compared with keras-hub alone below (every output and gradient); the
    # run-time check passing, dense and segmented, on every family:
    # test_keras_hub_exactness.py.
    adapters = {name: models.from_keras_hub(backbone, check_exact=False,
                                            **options)
                for name, options in _implementations(family)}
    with tf.GradientTape() as tape:
        if padded_batch_reason(backbone) is None:
            alone = keras_hub_alone_in_one_batch(backbone, data)
        else:
            alone = [keras_hub_alone(backbone, e) for e in data]
        loss = sum(tf.reduce_sum(o * w) for o, w in zip(alone, weights))
    alone_gradients = _numpy(tape.gradient(loss, variables))
    alone = [np.asarray(a) for a in alone]
    for implementation, adapter in adapters.items():
        with _RotarySpy(backbone) as rotary, tf.GradientTape() as tape:
            output = adapter(packed, training=False)["sequence_output"]
            outputs = [tf.gather(output[row], tokens)
                       for row, tokens in _where(packed)]
            loss = sum(tf.reduce_sum(o * w) for o, w in zip(outputs, weights))
        gradients = _numpy(tape.gradient(loss, variables))
        for a, b in zip(outputs, alone):
            np.testing.assert_allclose(a, b, rtol=0, atol=_tolerance(b),
                                       err_msg=implementation)
        compared = 0
        for variable, a, b in zip(variables, gradients, alone_gradients):
            assert (a is None) == (b is None), variable.path
            if a is None:  # e.g. BERT's pooler, which sequence_output skips.
                continue
            np.testing.assert_allclose(a, b, rtol=0, atol=_tolerance(b) * 10,
                                       err_msg=f"{implementation} "
                                               f"{variable.path}")
            compared += 1
        assert compared >= 10
        if FAMILIES[family].rotary:
            assert rotary.seen, "no rotary embedding was called"
            for positions in rotary.seen:
                np.testing.assert_array_equal(positions,
                                              packed["position_ids"])


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_no_cross_contamination(family, backbones):
    backbone = backbones(family)
    _, packed = _packed(family)
    for _, options in _implementations(family):
        # The exactness check of every family, dense and segmented:
        # test_keras_hub_exactness.py (half this test's time): skipped here.
        adapter = models.from_keras_hub(backbone, check_exact=False, **options)
        result = assert_no_cross_contamination(adapter, packed)
        assert result.max_output_difference["sequence_output"] == 0.0


# The heavy families whose layers are all alike fit with one layer: the same
# code compiles and trains (every layer's variables move), at about 60% of the
# XLA compilation of two. Gemma 4 keeps its two: a local and a global layer.
ONE_LAYER_FIT = ("bert", "falcon", "mixtral")


def _fit_backbone(family):
    """The family's backbone for the fit; one layer where all are alike."""
    return (make_backbone_one_layer(family) if family in ONE_LAYER_FIT
            else make_backbone(family))


def _task(family):
    """A tfpack task on the family's adapter and a dataset of its packs."""
    # A backbone of its own (the fit trains it); its adapter's exactness
    # check: in test_keras_hub_exactness.py.
    adapter = models.from_keras_hub(_fit_backbone(family), check_exact=False)
    rng = np.random.default_rng(2)
    data = examples(family)
    if adapter.causal:
        model = models.CausalLM(adapter)
        for e in data:
            e["labels"] = next_token_labels(e["input_ids"])
    else:
        model = models.BertClassifier(adapter, num_classes=3)
        for e in data:
            e["labels"] = int(rng.integers(0, 3))
    packed = pack_examples(data, MAX_LENGTH, packs=PACKS)
    return model, packed, tf.data.Dataset.from_tensor_slices(packed).batch(2)


# BERT's pooler is not on the path of the tfpack heads: Keras warns it has no
# gradient.
@pytest.mark.filterwarnings("ignore:Gradients do not exist")
@pytest.mark.parametrize("family", HEAVY)
def test_fit_under_xla_and_saved_model(family, tmp_path):
    model, packed, dataset = _task(family)
    variables = model.backbone.backbone.trainable_variables
    before = [np.array(v) for v in variables]
    model.compile(optimizer=keras.optimizers.Adam(1e-2), jit_compile=True)
    history = model.fit(dataset, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    moved = [np.abs(np.asarray(v) - b).max() > 0
             for v, b in zip(variables, before)]
    assert sum(moved) >= len(moved) - 4, family  # All but BERT's pooler.
    assert len(model.backbone.layers()) == (
        1 if family in ONE_LAYER_FIT else 2), family
    path = export.export_saved_model(model, str(tmp_path / family))
    served = tf.saved_model.load(path).signatures["serving_default"]
    inputs = {k: tf.constant(packed[k])
              for k in served.structured_input_signature[1]}
    outputs = model(packed)
    for name, value in served(**inputs).items():
        if name in outputs:
            np.testing.assert_allclose(value, outputs[name], atol=1e-5,
                                       err_msg=name)


_LOAD_IN_FRESH_PROCESS = """
import sys, numpy as np, keras
import tfpack.models  # registers the adapters; keras-hub loads on demand
for path in sys.argv[1:]:
    packed = dict(np.load(path + ".npz"))
    expected = packed.pop("sequence_output")
    model = keras.saving.load_model(path)
    np.testing.assert_array_equal(model(packed)["sequence_output"], expected,
                                  err_msg=path)
print("loaded", len(sys.argv) - 1)
"""


@pytest.mark.slow
def test_keras_files_load_in_a_fresh_process(tmp_path, backbones):
    paths = []
    for family in sorted(FAMILIES):
        # What the file holds and gives after loading is checked here; the
        # adapters' exactness, in test_packed_equals_each_sequence_alone and
        # test_keras_hub_exactness.py (the probe was half this test's CPU).
        adapter = models.from_keras_hub(backbones(family), check_exact=False,
                                        **_implementations(family)[-1][1])
        _, packed = _packed(family)
        path = str(tmp_path / f"{family}.keras")
        adapter.save(path)
        np.savez(path + ".npz", sequence_output=adapter(packed)[
            "sequence_output"], **packed)
        paths.append(path)
    root = str(pathlib.Path(__file__).parents[3])
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_IN_FRESH_PROCESS, *paths],
        env=dict(os.environ, PYTHONPATH=with_site(root)), capture_output=True,
        text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-2:] == ["loaded", str(len(FAMILIES))]
