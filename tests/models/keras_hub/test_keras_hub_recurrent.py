"""Qwen3.5, Qwen3.5-MoE and RWKV-7 packed: each sequence as keras-hub computes it alone.

Rows of 130 tokens hold sequences that straddle keras-hub's chunk of 64
(70 and 64 tokens), a one-token sequence and sequences shorter than the
convolution's kernel of 4 (1, 2, 3 tokens); RWKV-7, which has no chunks,
the same packs in rows of 16 in the first two tests and the NaN test
(`SHORT_LENGTHS`).
For every family: each sequence's outputs are the keras-hub backbone's on
that sequence alone, and the gradient of a loss summed over the packs'
sequences is the sum of the per-sequence gradients (TensorFlow here; on
JAX in one subprocess for the three families, `recurrent_jax_run.py`); the
causal LM trains a step and `tfpack.predict` scores.
"""

import functools
import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from jax_env import jax_env
from recurrent_helpers import FAMILIES, VOCAB, alone_in_one_batch, examples
from recurrent_helpers import IMPLEMENTATIONS, LENGTH, PACKS, SHORT_LENGTH
from recurrent_helpers import implementations, make, packed_examples
from recurrent_helpers import packed_output, returns_logits, spans
from tfpack import models, predict
from tfpack.errors import TfpackError
from tfpack.testing import assert_no_cross_contamination, next_token_labels
from tfpack.testing import PackingNotExactError, check_packing_exact, pack_examples


def _numpy(gradients):
    return [None if g is None else np.asarray(tf.convert_to_tensor(g))
            for g in gradients]


@pytest.fixture(scope="module")
def backbones():
    """Each family's backbone, built once for the tests that leave it as it
    is (the causal-LM test trains its own, the NaN test poisons an embedding
    row of its own, the vision-encoder test sets an attribute on its own)."""
    return functools.cache(make)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_packed_equals_each_sequence_alone_with_gradients(family, backbones):
    backbone = backbones(family)
    data, packed = examples(family=family), packed_examples(family)
    variables = backbone.trainable_variables
    rng = np.random.default_rng(1)
    with tf.GradientTape() as tape:
        # The rows of one batch never meet: its gradient is the sum of the
        # sequences' own.
        references = alone_in_one_batch(backbone, [e["input_ids"] for e in data])
        weights = [rng.normal(size=r.shape).astype("float32")
                   for r in references]
        loss = sum(tf.reduce_sum(r * w) for r, w in zip(references, weights))
    expected_grads = _numpy(tape.gradient(loss, variables))
    for options in implementations(family):
        # The run-time exactness check of each adapter: in
        # test_the_run_time_check_passes_against_keras_hub (half this CPU).
        adapter = models.from_keras_hub(backbone, check_exact=False, **options)
        with tf.GradientTape() as tape:
            output = packed_output(adapter, packed)
            outputs = [tf.gather(output[row], tokens)
                       for row, tokens in spans(packed)]
            loss = sum(tf.reduce_sum(o * w) for o, w in zip(outputs, weights))
        grads = _numpy(tape.gradient(loss, variables))
        for got, reference in zip(outputs, references):
            reference = np.asarray(reference)
            np.testing.assert_allclose(
                got, reference, rtol=0, err_msg=str(options),
                atol=1e-4 * max(1.0, np.abs(reference).max()))
        for variable, got, reference in zip(variables, grads, expected_grads):
            assert (got is None) == (reference is None), variable.path
            if got is None:  # Off the output's path (the output head).
                continue
            np.testing.assert_allclose(
                got, reference, rtol=0,
                atol=1e-4 * max(1.0, np.abs(reference).max()),
                err_msg=f"{options} {variable.path}")


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_no_cross_contamination(family, backbones):
    backbone = backbones(family)
    for options in implementations(family):
        # The exactness check: in test_the_run_time_check_passes_against_keras_hub.
        adapter = models.from_keras_hub(backbone, check_exact=False, **options)
        result = assert_no_cross_contamination(adapter,
                                               packed_examples(family))
        assert result.max_output_difference["sequence_output"] == 0.0


# RWKV-7's blocks run one code (`rwkv_block`, its bounded loop over the
# row); layer 0 differs only by handing its values on (`v_first`), which
# later layers mix in elementwise: the causal LM trains one block under XLA
# (its trace and compilation are most of this test's CPU; two blocks: the
# tests above, and on JAX under jit). Qwen3.5's layers differ (a gated
# DeltaNet and an attention layer): both train.
CAUSAL_LM_CONFIG = {"rwkv7": dict(num_layers=1)}


@pytest.mark.slow  # XLA compiles the training step (RWKV-7's loop).
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_causal_lm_trains_a_step_and_predict_scores(family):
    # Short rows (the long ones are above): XLA compiles RWKV-7's loop
    # over the row.
    backbone = make(family, **CAUSAL_LM_CONFIG.get(family, {}))
    # The exactness probe of the dense adapter: in
    # test_the_run_time_check_passes_against_keras_hub (a tenth of this CPU).
    model = models.CausalLM(models.from_keras_hub(backbone, check_exact=False))
    rng = np.random.default_rng(3)
    data = [{"input_ids": rng.integers(1, VOCAB, n)} for n in (5, 1, 2, 4, 3)]
    scored = predict(model, [e["input_ids"] for e in data], max_length=8,
                     max_sequences_per_pack=3, batch_size=2,
                     jit_compile=False)
    references = alone_in_one_batch(backbone, [e["input_ids"] for e in data])
    for got, reference in zip(scored, references):
        got = got["logits"] if isinstance(got, dict) else got
        if not returns_logits(backbone):
            reference = backbone.token_embedding(reference, reverse=True)
        np.testing.assert_allclose(got, reference, rtol=0, atol=1e-4)
    for e in data:
        e["labels"] = next_token_labels(e["input_ids"])
    packed = pack_examples(data, 8, packs=[[0, 1, 2], [3, 4]])
    before = [np.array(v) for v in backbone.trainable_variables]
    model.compile(optimizer=keras.optimizers.Adam(1e-2), jit_compile=True)
    history = model.fit(tf.data.Dataset.from_tensor_slices(packed).batch(2),
                        epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    moved = [np.abs(np.asarray(v) - b).max() > 0
             for v, b in zip(backbone.trainable_variables, before)]
    assert sum(moved) >= len(moved) - 2


@pytest.mark.parametrize("family", ["qwen3_5", "rwkv7"])
def test_keras_file_round_trip(family, tmp_path, backbones):
    # The exactness check: in test_the_run_time_check_passes_against_keras_hub.
    adapter = models.from_keras_hub(backbones(family), check_exact=False)
    # RWKV-7 (its eager loop a token) in its short rows.
    packed = pack_examples(examples(family=family)[1:4],
                           SHORT_LENGTH if family == "rwkv7" else 64)
    path = str(tmp_path / f"{family}.keras")
    adapter.save(path)
    loaded = keras.saving.load_model(path)
    assert type(loaded) is type(adapter)
    np.testing.assert_array_equal(loaded(packed)["sequence_output"],
                                  adapter(packed)["sequence_output"])


def test_a_qwen3_5_with_a_vision_encoder_is_refused():
    backbone = make("qwen3_5")
    backbone.vision_encoder = object()  # Stands in for a vision encoder.
    with pytest.raises(TfpackError, match="Only text Qwen3.5.*vision"):
        models.from_keras_hub(backbone)


@pytest.mark.slow  # ~40 s of CPU: XLA compiles keras-hub's unrolled chunks.
def test_packed_equals_each_sequence_alone_on_jax_under_jit():
    pytest.importorskip("jax")
    here = pathlib.Path(__file__).resolve().parent
    path = os.pathsep.join(str(p) for p in (here.parents[2], here, here.parent))
    done = subprocess.run(
        [sys.executable, str(here / "recurrent_jax_run.py"), *sorted(FAMILIES)],
        env=jax_env(PYTHONPATH=path), cwd=here, capture_output=True,
        text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip().endswith("ok"), done.stdout


@pytest.mark.parametrize("family,implementation", [
    ("qwen3_5", "segmented"), ("qwen3_5", "dense"), ("rwkv7", "segmented")])
def test_a_nan_in_one_sequence_never_reaches_the_others(family, implementation):
    # Token VOCAB - 1 (its embedding row NaN) only at token 10 of the first
    # sequence (70 tokens, across the chunk of 64): the recurrences multiply
    # other sequences' values by zero weights, and 0 * NaN is NaN. RWKV-7
    # (no chunks: its eager loop a token) in its short rows, at token 2 of
    # the first sequence (6 tokens).
    backbone = make(family)
    options = dict(IMPLEMENTATIONS[0 if implementation == "dense" else 1])
    adapter = models.from_keras_hub(backbone, check_exact=False, **options)
    data = examples(family=family)
    for e in data:
        e["input_ids"] = np.where(e["input_ids"] == VOCAB - 1, 1, e["input_ids"])
    length, bad = (SHORT_LENGTH, 2) if family == "rwkv7" else (LENGTH, 10)
    packed = pack_examples(data, length, packs=PACKS)
    clean = np.asarray(adapter(packed)["sequence_output"])
    packed["input_ids"][0, bad] = VOCAB - 1
    table = backbone.token_embedding.embeddings
    table.assign(np.where(np.arange(VOCAB)[:, None] == VOCAB - 1, np.nan,
                          np.asarray(table)))
    out = np.asarray(adapter(packed)["sequence_output"])
    first = np.zeros(out.shape[:2], bool)
    first[0, bad:len(data[0]["input_ids"])] = True  # Its sequence from the bad token on.
    assert np.isnan(out[first]).all()
    np.testing.assert_array_equal(out[~first], clean[~first])


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_run_time_check_passes_against_keras_hub(family, backbones):
    backbone = backbones(family)
    for options in implementations(family):
        adapter = models.from_keras_hub(backbone, check_exact=False, **options)
        result = check_packing_exact(adapter)
        assert result.reference == "keras-hub backbone", (family, options)
        assert result.worst[1] < 0.5, (family, options, result.worst)
        layers = [n for n in result.differences if n.startswith("layer ")]
        assert len(layers) == 2, (family, layers)  # Each block compared.


@pytest.mark.parametrize("family,where", [
    ("qwen3_5", r"layer '\w+_0'"),
    # RWKV-7's tiny random time mixing moves the block outputs by less than
    # the tolerance; the gradients show the leak (1.4x the tolerance).
    ("rwkv7", "gradient of 'rwkv_layer_0/")])
def test_the_run_time_check_refuses_the_recurrence_without_resets(
        family, where, backbones):
    adapter = models.from_keras_hub(backbones(family), check_exact=False)
    extras = adapter.extras  # One segment a row: states run across sequences.
    adapter.extras = lambda context, x: dict(
        extras(context, x), segments=keras.ops.ones_like(context.sequence_ids))
    with pytest.raises(PackingNotExactError, match=f"Received: {where}"):
        check_packing_exact(adapter)
