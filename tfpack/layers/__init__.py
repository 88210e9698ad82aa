"""Keras 3 layers for packed sequences (`keras.ops` only, any backend).

A pack holds several sequences back to back (see DESIGN.md for the
features). These layers make a transformer treat each of them as if it were
alone: positions restart per sequence, attention stays inside a sequence,
heads gather each sequence's own tokens and losses count real items only.

Example:

>>> import numpy as np
>>> from tfpack.layers import PackedAttentionMask
>>> PackedAttentionMask()(np.array([[1, 2, 0]])).shape
TensorShape([1, 3, 3])
"""

from tfpack.layers.attention_mask import PackedAttentionMask
from tfpack.layers.attention_mask import pair_attention_mask
from tfpack.layers.losses import causal_lm_count
from tfpack.layers.losses import causal_lm_statistics
from tfpack.layers.losses import global_sum
from tfpack.layers.losses import loss_from_statistics
from tfpack.layers.losses import masked_lm_count
from tfpack.layers.losses import masked_lm_statistics
from tfpack.layers.losses import sequence_statistics
from tfpack.layers.masked_lm_head import PackedMaskedLMHead
from tfpack.layers.position_embedding import PackedPositionEmbedding
from tfpack.layers.rotary_embedding import PackedRotaryEmbedding
from tfpack.layers.self_attention import PackedSelfAttention
from tfpack.layers.sequence_head import PackedSequenceHead
from tfpack.layers.statistic_ratio import StatisticRatio
from tfpack.layers.step_loss import StepLoss
from tfpack.layers.transformer_block import PackedTransformerBlock

__all__ = [
    "PackedAttentionMask",
    "PackedMaskedLMHead",
    "PackedPositionEmbedding",
    "PackedRotaryEmbedding",
    "PackedSelfAttention",
    "PackedSequenceHead",
    "PackedTransformerBlock",
    "StatisticRatio",
    "StepLoss",
    "causal_lm_count",
    "causal_lm_statistics",
    "global_sum",
    "loss_from_statistics",
    "masked_lm_count",
    "masked_lm_statistics",
    "pair_attention_mask",
    "sequence_statistics",
]
