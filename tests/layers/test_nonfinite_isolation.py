"""A non-finite value in one sequence never reaches another sequence of its pack.

With masks only added to the scores, one NaN key made every query of the pack NaN
(NaN + -1e9 is NaN) and a probability of 0 times a NaN value is NaN: packed outputs differed
from unpacked ones exactly when a run went wrong. Each test puts a NaN / inf / overflowing
value into one sequence (A) and checks that the other sequences equal their unpacked outputs,
while A's outputs are still non-finite (nothing hidden): for the layer and for whole models,
with dense and segmented attention (segmented rows gather padding slots from the
neighbouring tokens, so they need the same care).
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack import models
from tfpack.layers import PackedSelfAttention
from tfpack.layers.pooling import PackedSequencePooling
from tfpack.testing import pack_examples

IMPLEMENTATIONS = ("dense", "segmented")
L, K = 12, 3


def _layer(implementation, causal=False):
    keras.utils.set_random_seed(0)
    layer = PackedSelfAttention(num_heads=2, hidden_dim=8, causal=causal,
                                attention_implementation=implementation,
                                max_sequences_per_pack=K)
    layer.build((None, L, 8))
    return layer


def _run(layer, x, sequence_ids):
    return np.asarray(layer(tf.constant(x), sequence_ids=tf.constant(sequence_ids)))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_bad_hidden_state_stays_in_its_sequence(implementation, causal, bad):
    """Pack A (4 tokens, token 2 bad), B (3 tokens), C (2 tokens); B and C alone are the
    reference; A is non-finite where it may see its bad token, finite before it if causal."""
    layer = _layer(implementation, causal)
    x = np.random.default_rng(1).normal(size=(1, L, 8)).astype("float32")
    sequence_ids = np.array([[1, 1, 1, 1, 2, 2, 2, 3, 3, 0, 0, 0]])
    x[0, 2, 3] = bad
    packed = _run(layer, x, sequence_ids)
    for start, stop in ((4, 7), (7, 9)):
        alone_ids = np.zeros((1, L), np.int64)
        alone_ids[0, :stop - start] = 1
        alone_x = np.zeros((1, L, 8), "float32")
        alone_x[0, :stop - start] = x[0, start:stop]
        alone = _run(layer, alone_x, alone_ids)
        assert np.isfinite(packed[0, start:stop]).all()
        np.testing.assert_allclose(packed[0, start:stop], alone[0, :stop - start], atol=1e-5)
    seen = slice(2, 4) if causal else slice(0, 4)
    assert not np.isfinite(packed[0, seen]).any(axis=-1).any(), "A's NaN was hidden"
    if causal:  # Tokens before the bad one do not see it, packed as unpacked.
        assert np.isfinite(packed[0, :2]).all()


@settings(max_examples=12, deadline=None)
@given(lengths=st.lists(st.integers(1, 4), min_size=2, max_size=K),
       bad_sequence=st.integers(0, K - 1), bad_token=st.integers(0, 3),
       implementation=st.sampled_from(IMPLEMENTATIONS),
       value=st.sampled_from([np.nan, np.inf, -np.inf, 3e38]))
def test_any_bad_token_leaves_every_other_sequence_as_unpacked(
        lengths, bad_sequence, bad_token, implementation, value):
    layer = _layers()[implementation]
    bad_sequence %= len(lengths)
    bad_token %= lengths[bad_sequence]
    sequence_ids = np.zeros((1, L), np.int64)
    starts = np.cumsum([0] + lengths[:-1])
    for k, (start, n) in enumerate(zip(starts, lengths)):
        sequence_ids[0, start:start + n] = k + 1
    x = np.random.default_rng(len(lengths)).normal(size=(1, L, 8)).astype("float32")
    x[0, starts[bad_sequence] + bad_token] = value
    packed = _run(layer, x, sequence_ids)
    for k, (start, n) in enumerate(zip(starts, lengths)):
        if k == bad_sequence:
            continue
        alone_x = np.zeros((1, L, 8), "float32")
        alone_x[0, :n] = x[0, start:start + n]
        alone_ids = (np.arange(L) < n).astype(np.int64)[None]
        np.testing.assert_allclose(packed[0, start:start + n],
                                   _run(layer, alone_x, alone_ids)[0, :n], atol=1e-5)


_LAYERS = {}


def _layers():
    if not _LAYERS:
        _LAYERS.update({name: _layer(name) for name in IMPLEMENTATIONS})
    return _LAYERS


SEQUENCES = [[3, 7, 5, 4], [2, 6, 9], [8, 1]]  # Token 7 gets a bad embedding row.


def _poisoned(model, value):
    """`model` (built) with the embedding row of token 7 set to `value` (NaN, inf, or an
    overflow)."""
    _outputs(model, pack_examples([{"input_ids": SEQUENCES[0]}], L,
                                  max_sequences_per_pack=K), None)
    table = model.backbone.token_embedding if hasattr(model, "backbone") else (
        model.token_embedding)
    weights = np.asarray(table.embeddings).copy()
    weights[7] = value
    table.embeddings.assign(weights)
    return model


def _outputs(model, features, name):
    outputs = model({k: tf.constant(v) for k, v in features.items()}, training=False)
    return None if name is None else np.asarray(outputs[name])


_ENCODERS = {}


def _encoder(implementation):
    """One BERT encoder and classifier an implementation, built (seed 0) for the three bad
    values: each test sets token 7's embedding row to its own value (`_poisoned`), the
    only weight any of them changes (a build each was 0.2-0.3 CPU s of a 0.3-0.5 s test)."""
    if implementation not in _ENCODERS:
        keras.utils.set_random_seed(0)
        encoder = models.BertEncoder(vocabulary_size=12, num_layers=2, hidden_dim=8,
                                     num_heads=2, intermediate_dim=16, max_sequence_length=L,
                                     dropout=0.0, attention_dropout=0.0,
                                     attention_implementation=implementation,
                                     max_sequences_per_pack=K)
        _ENCODERS[implementation] = encoder, models.BertClassifier(encoder, 2, dropout=0.0)
    return _ENCODERS[implementation]


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("value", [np.nan, np.inf, 1e38])
def test_encoder_with_a_bad_embedding_row(implementation, value):
    """BERT: the pack [A, B, C] with A holding token 7; B and C equal their unpacked outputs
    (per token and per sequence), A's outputs are NaN."""
    encoder, classifier = _encoder(implementation)
    classifier = _poisoned(classifier, value)
    examples = [{"input_ids": s} for s in SEQUENCES]
    packed = pack_examples(examples, L, packs=[[0, 1, 2]], max_sequences_per_pack=K)
    alone = pack_examples(examples, L, packs=[[0], [1], [2]], max_sequences_per_pack=K)
    hidden = _outputs(encoder, packed, "sequence_output")
    hidden_alone = _outputs(encoder, alone, "sequence_output")
    logits = _outputs(classifier, packed, "logits")
    logits_alone = _outputs(classifier, alone, "logits")
    start = 4
    for k in (1, 2):
        n = len(SEQUENCES[k])
        np.testing.assert_allclose(hidden[0, start:start + n], hidden_alone[k, :n], atol=1e-5)
        np.testing.assert_allclose(logits[0, k], logits_alone[k, 0], atol=1e-5)
        start += n
    assert np.isnan(hidden[0, :4]).all() and np.isnan(logits[0, 0]).all()


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_decoder_with_a_bad_embedding_row(implementation):
    """A decoder: the other sequences as unpacked, and A's token before token 7 too (causal:
    it never sees it)."""
    keras.utils.set_random_seed(0)
    model = _poisoned(models.DecoderBackbone(vocabulary_size=12, num_layers=2, hidden_dim=8,
                                             num_heads=2, intermediate_dim=16,
                                             attention_implementation=implementation,
                                             max_sequences_per_pack=K), np.nan)
    examples = [{"input_ids": s} for s in SEQUENCES]
    packed = _outputs(model, pack_examples(examples, L, packs=[[0, 1, 2]],
                                           max_sequences_per_pack=K), "sequence_output")
    alone = _outputs(model, pack_examples(examples, L, packs=[[0], [1], [2]],
                                          max_sequences_per_pack=K), "sequence_output")
    np.testing.assert_allclose(packed[0, 4:7], alone[1, :3], atol=1e-5)
    np.testing.assert_allclose(packed[0, 7:9], alone[2, :2], atol=1e-5)
    np.testing.assert_allclose(packed[0, :1], alone[0, :1], atol=1e-5)  # Before token 7.
    assert np.isfinite(packed[0, :1]).all() and np.isfinite(packed[0, 4:9]).all()
    assert np.isnan(packed[0, 1:4]).all()


@pytest.mark.parametrize("pooling", ["mean", "cls", "last"])
def test_pooling_keeps_a_bad_token_in_its_sequence(pooling):
    """Mean pooling sums tokens by a membership matmul: a NaN token of A must not make B's
    mean NaN (0 x NaN), and A's mean is NaN."""
    layer = PackedSequencePooling(pooling, normalize=True)
    hidden = np.random.default_rng(2).normal(size=(1, 6, 4)).astype("float32")
    hidden[0, 1] = np.nan
    sequence_ids = np.array([[1, 1, 1, 2, 2, 0]])
    pooled = np.asarray(layer(hidden, sequence_ids, np.array([[0, 3]]),
                              np.array([[1.0, 1.0]], "float32")))
    alone = np.asarray(layer(hidden[:, 3:], np.array([[1, 1, 0]]), np.array([[0, 0]]),
                             np.array([[1.0, 0.0]], "float32")))
    np.testing.assert_allclose(pooled[0, 1], alone[0, 0], atol=1e-6)
    assert np.isnan(pooled[0, 0]).all() == (pooling == "mean")
