"""Tiny Qwen3.5, Qwen3.5-MoE and RWKV-7 backbones and packs straddling chunks.

Shared by test_keras_hub_recurrent.py and its JAX subprocess (which must not
import TensorFlow).
"""

import keras
import numpy as np

from keras_hub_helpers import built_with, randomize_zeros, right_padded
from tfpack.testing import pack_examples

keras_hub = __import__("pytest").importorskip("keras_hub")

VOCAB = 40
LENGTH = 130
PACKS = [[0, 1, 2, 3], [4, 5, 6]]
LENGTHS = (70, 1, 2, 50, 64, 3, 60)
# RWKV-7 has no chunks (a recurrence a token, a shift of one token): the
# TensorFlow tests pack its sequences in `PACKS` of rows of 16 (a one-token
# sequence, ones shorter than 4; the packs hold 14 tokens each), where its
# eager loop runs 8 times fewer steps than in rows of 130.
SHORT_LENGTHS, SHORT_LENGTH = (6, 1, 2, 5, 7, 3, 4), 16
_QWEN = dict(vocabulary_size=VOCAB, num_layers=2, num_query_heads=2,
             num_key_value_heads=1, head_dim=8, hidden_dim=16,
             linear_num_key_heads=1, linear_num_value_heads=2,
             linear_key_head_dim=4, linear_value_head_dim=4,
             layer_types=["linear_attention", "full_attention"])
FAMILIES = {
    # A sliding window of 5 on the full-attention layer (TensorFlow
    # applies it), shorter than the sequences.
    "qwen3_5": lambda: keras_hub.models.Qwen3_5Backbone(
        intermediate_dim=32, sliding_window_size=5, **_QWEN),
    "qwen3_5_moe": lambda: keras_hub.models.Qwen3_5MoeBackbone(
        moe_intermediate_dim=8, shared_expert_intermediate_size=16,
        num_experts=4, top_k=2, **_QWEN),
    "rwkv7": lambda: keras_hub.models.RWKV7Backbone(
        hidden_size=16, head_size=4, num_layers=2, vocabulary_size=VOCAB,
        intermediate_dim=32, gate_lora=4, mv_lora=4, aaa_lora=4,
        decay_lora=4),
}
IMPLEMENTATIONS = [dict(attention_implementation="dense"),
                   dict(attention_implementation="segmented",
                        max_sequences_per_pack=4, segment_length=LENGTH)]


def make(family, seed=0, **config):
    """The family's tiny backbone, zero-initialized variables made random
    (Qwen3.5's norm offsets and `A_log`) so every path carries gradients;
    built with `config`'s entries where given (`built_with`)."""
    keras.utils.set_random_seed(seed)
    return randomize_zeros(built_with(FAMILIES[family], **config), seed)


def examples(seed=0, family=None):
    """Random sequences of `LENGTHS` (`SHORT_LENGTHS` for RWKV-7 when
    `family` is given)."""
    lengths = SHORT_LENGTHS if family == "rwkv7" else LENGTHS
    rng = np.random.default_rng(seed)
    return [{"input_ids": rng.integers(1, VOCAB, n)} for n in lengths]


def packed_examples(family=None):
    """`examples(family=family)` in `PACKS`, rows of `LENGTH` (RWKV-7's of
    `SHORT_LENGTH`)."""
    length = SHORT_LENGTH if family == "rwkv7" else LENGTH
    return pack_examples(examples(family=family), length, packs=PACKS)


def spans(packed):
    """(row, token indices) of every example, in example order."""
    return [(row, np.flatnonzero(packed["sequence_ids"][row] == slot + 1))
            for row, pack in enumerate(PACKS) for slot, _ in enumerate(pack)]


def returns_logits(backbone):
    """keras-hub's RWKV-7 backbone returns logits, the others hidden states."""
    return type(backbone).__name__ == "RWKV7Backbone"


def alone_in_one_batch(backbone, sequences):
    """keras-hub's output on each of `sequences` alone, all in one call: each
    its own row, right padded to the longest (the models are causal:
    padding after a sequence's tokens never reaches them), so keras-hub's
    eager chunk loops run once rather than once a sequence."""
    ids, mask = right_padded(sequences)
    out = backbone({"token_ids": ids, "padding_mask": mask}, training=False)
    return [out[row, :len(sequence)] for row, sequence in enumerate(sequences)]


def packed_output(adapter, packed):
    """The adapter's output comparable with `alone_in_one_batch`."""
    out = adapter(packed, training=False)["sequence_output"]
    return adapter.logits(out) if returns_logits(adapter.backbone) else out


def implementations(family):
    # RWKV-7 has no attention to implement.
    return IMPLEMENTATIONS if family != "rwkv7" else IMPLEMENTATIONS[:1]
