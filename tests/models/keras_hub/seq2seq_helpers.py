"""The encoder-decoder families and pairs of the seq2seq suites (issue 35),
without TensorFlow: `seq2seq_jax_run.py` imports them under Keras on JAX with
TensorFlow blocked (`tests/jax_env.py`), the TensorFlow tests import them
too."""

import keras_hub
import numpy as np

VOCAB = 40
# (encoder ids, decoder ids): lengths chosen so the first-fit packs below hold
# 3 and 2 pairs, with padding in both rows.
PAIRS = [([3, 4, 5, 6, 7], [1, 8, 9]), ([10, 11], [1, 12, 13, 14]),
         ([15, 16, 17], [1, 18]), ([19, 20, 21, 22, 23, 24], [1, 25, 26, 27, 28]),
         ([29], [1, 30, 31])]
LE, LD = 12, 10
# The families checked on JAX (outputs and gradients, `seq2seq_jax_run.py`):
# all dense, and segmented the three code paths of segmented pairs (T5's bias
# per row and cross rows; T5Gemma 2's merged rows with windows, soft caps and
# grouped queries; BART's Keras attention layers, which EdRec shares). Every
# family runs segmented on TensorFlow (test_keras_hub_seq2seq_segmented.py).
# Segmented EdRec on JAX misses this run's float32 bounds by rounding: a
# random EdRec without a final norm (outputs up to 16.6, gradients up to
# 66,128) had its second target 3.3e-4 off (2.0e-5 of the scale; the dense
# adapter's eager call is 2.9e-4 off there) and one embedding gradient entry
# of 320 1.09e-4 of the largest off; with float64 weights, packed and alone
# agree to 6e-6 (the float32 softmax).
JAX_FAMILIES = ("t5", "bart", "t5gemma", "t5gemma2", "edrec")
JAX_RUNS = JAX_FAMILIES + ("t5:segmented", "t5gemma2:segmented", "bart:segmented")

# T5Gemma and T5Gemma 2: both sides two layers (windowed, then full), hidden 8,
# grouped queries (2 heads, 1 key-value head).
_GEMMA_SIDES = dict(vocabulary_size=VOCAB, **{
    f"{side}_{name}": value for side in ("encoder", "decoder") for name, value in (
        ("hidden_dim", 8), ("intermediate_dim", 16), ("num_layers", 2),
        ("num_attention_heads", 2), ("num_key_value_heads", 1), ("head_dim", 4),
        ("layer_types", ["sliding_attention", "full_attention"]))})

FAMILIES = {
    "t5": lambda: keras_hub.models.T5Backbone(
        vocabulary_size=VOCAB, num_layers=2, num_heads=2, hidden_dim=8,
        intermediate_dim=16, dropout=0.0),
    "t5_untied_relu": lambda: keras_hub.models.T5Backbone(
        vocabulary_size=VOCAB, num_layers=1, num_heads=2, hidden_dim=8,
        intermediate_dim=16, dropout=0.0, use_gated_activation=False,
        tie_embedding_weights=False),
    "bart": lambda: keras_hub.models.BartBackbone(
        vocabulary_size=VOCAB, num_layers=2, num_heads=2, hidden_dim=8,
        intermediate_dim=16, dropout=0.0, max_sequence_length=LE),
    # Sliding windows (2) shorter than the targets, grouped queries, soft caps.
    "t5gemma": lambda: keras_hub.models.T5GemmaBackbone(
        **_GEMMA_SIDES, sliding_window=2, dropout_rate=0.0, attention_dropout=0.0,
        attn_logit_softcapping=5.0, final_logit_softcapping=3.0),
    # Text only; windows of 3 (encoder: 1 back, 1 ahead; decoder: 2 back),
    # merged self- and cross-attention, query-key norms.
    "t5gemma2": lambda: keras_hub.models.T5Gemma2Backbone(
        **_GEMMA_SIDES, sliding_window=3, attn_logit_softcapping=5.0,
        final_logit_softcapping=3.0),
    # No positions at all: the masks alone keep the pairs apart.
    "edrec": lambda: keras_hub.models.EdRecBackbone(
        vocab_size=VOCAB, num_layers_enc=2, num_layers_dec=2, hidden_dim=8,
        intermediate_dim=16, num_heads=2),
}


def pair_positions(packs):
    """Per pair: (row, encoder token indices, decoder token indices)."""
    positions = {}
    for row, ids in enumerate(packs["example_ids"]):
        for slot, pair in enumerate(ids):
            if pair >= 0:
                positions[int(pair)] = (
                    row, np.flatnonzero(packs["encoder_sequence_ids"][row] == slot + 1),
                    np.flatnonzero(packs["decoder_sequence_ids"][row] == slot + 1))
    return positions


def tolerance(reference):
    # float32 rounding relative to the outputs' scale, as the conformance suite.
    return 1e-5 * max(1.0, float(np.max(np.abs(reference))))
