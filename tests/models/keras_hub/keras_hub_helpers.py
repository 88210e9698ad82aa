"""Tiny keras-hub backbones of every adapted family, and a per-sequence reference.

`FAMILIES` is the table the conformance suite (test_conformance.py) runs
over: adding a family is one adapter file and one line here.
"""

import dataclasses
from typing import Callable
from unittest import mock

import keras
import numpy as np

from tfpack.testing.exactness import keras_hub_batch, keras_hub_inputs

keras_hub = __import__("pytest").importorskip("keras_hub")

VOCAB = 50
LENGTHS = (5, 3, 7, 2, 6)
MAX_LENGTH = 16
WINDOW = 3  # Sliding windows shorter than the sequences, so they matter.

_DECODER = dict(vocabulary_size=VOCAB, num_layers=2, num_query_heads=4,
                num_key_value_heads=2, hidden_dim=16, intermediate_dim=32)
_ENCODER = dict(num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16,
                max_sequence_length=MAX_LENGTH)
_SMALL = dict(num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16)
_GEMMA = dict(_DECODER, head_dim=4, use_sliding_window_attention=True,
              sliding_window_size=WINDOW, use_post_ffw_norm=True,
              use_post_attention_norm=True)
_GEMMA4 = dict(_DECODER, head_dim=4, sliding_window_size=WINDOW)


@dataclasses.dataclass(frozen=True)
class Family:
    """One adapted keras-hub family of the conformance suite.

    Attributes:
        build: builds a tiny random backbone (after a seed is set).
        token_types: the examples carry `token_type_ids`.
        rotary: the adapter passes `position_ids` to keras-hub's
            `RotaryEmbedding` (checked by spying on it: rotary scores depend
            on position differences only, so outputs alone would not show
            positions that fail to restart).
        heavy: in the subset that also runs `fit(jit_compile=True)` and the
            SavedModel export (each costs an XLA compilation: one encoder,
            one Llama-style decoder with experts, and a 2-layer Gemma 4 (the
            4-layer one with experts and shared KV took 3 minutes of XLA
            compilation on the shared CPU; it passed); every family passed
            it when added).
    """

    build: Callable
    token_types: bool = False
    rotary: bool = False
    heavy: bool = False


FAMILIES = {
    "bert": Family(lambda: keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB, **_ENCODER), token_types=True, heavy=True),
    "electra": Family(lambda: keras_hub.models.ElectraBackbone(
        vocab_size=VOCAB, embedding_dim=4, **_ENCODER), token_types=True),
    "roberta": Family(lambda: keras_hub.models.RobertaBackbone(
        vocabulary_size=VOCAB, **_ENCODER)),
    "distil_bert": Family(lambda: keras_hub.models.DistilBertBackbone(
        vocabulary_size=VOCAB, **_ENCODER)),
    "llama": Family(lambda: keras_hub.models.LlamaBackbone(**_DECODER),
                    rotary=True),
    "mistral": Family(lambda: keras_hub.models.MistralBackbone(
        sliding_window=WINDOW, **_DECODER), rotary=True),
    "qwen2": Family(lambda: keras_hub.models.Qwen2Backbone(
        use_sliding_window_attention=True, sliding_window_size=WINDOW,
        tie_word_embeddings=False, **_DECODER), rotary=True),
    "llama3": Family(lambda: keras_hub.models.Llama3Backbone(**_DECODER),
                     rotary=True),
    "qwen3": Family(lambda: keras_hub.models.Qwen3Backbone(
        head_dim=4, sliding_window_size=WINDOW, tie_word_embeddings=False,
        **_DECODER), rotary=True),
    # Mixtures of experts: every expert used, router loss coefficients set.
    "mixtral": Family(lambda: keras_hub.models.MixtralBackbone(
        num_experts=4, top_k=2, sliding_window=WINDOW, **_DECODER),
        rotary=True, heavy=True),
    "qwen_moe": Family(lambda: keras_hub.models.QwenMoeBackbone(
        moe_intermediate_dim=8, shared_expert_intermediate_dim=16,
        num_experts=4, top_k=2, use_sliding_window_attention=True,
        sliding_window_size=WINDOW, mlp_only_layers=[1], **_DECODER),
        rotary=True),
    "qwen3_moe": Family(lambda: keras_hub.models.Qwen3MoeBackbone(
        head_dim=4, moe_intermediate_dim=8, num_experts=4, top_k=2,
        norm_top_k_prob=True, sliding_window_size=WINDOW, **_DECODER),
        rotary=True),
    # Qwen3.5 hybrids: a gated DeltaNet layer (convolution and state reset
    # per sequence) and a full-attention layer with a window; more in
    # test_keras_hub_recurrent.py (rows straddling its chunks, RWKV-7).
    "qwen3_5": Family(lambda: keras_hub.models.Qwen3_5Backbone(
        head_dim=8, sliding_window_size=WINDOW, linear_num_key_heads=1,
        linear_num_value_heads=2, linear_key_head_dim=4,
        linear_value_head_dim=4,
        layer_types=["linear_attention", "full_attention"], **_DECODER),
        rotary=True),
    "qwen3_5_moe": Family(lambda: keras_hub.models.Qwen3_5MoeBackbone(
        head_dim=8, moe_intermediate_dim=8,
        shared_expert_intermediate_size=16, num_experts=4, top_k=2,
        linear_num_key_heads=1, linear_num_value_heads=2,
        linear_key_head_dim=4, linear_value_head_dim=4,
        layer_types=["linear_attention", "full_attention"],
        **{k: v for k, v in _DECODER.items() if k != "intermediate_dim"}),
        rotary=True),
    "phi3": Family(lambda: keras_hub.models.Phi3Backbone(
        vocabulary_size=VOCAB, num_layers=2, hidden_dim=16,
        intermediate_dim=32, num_query_heads=4, num_key_value_heads=2),
        rotary=True),
    # LongRoPE: sequences over 4 tokens take the long factor, the others
    # the short one (`test_phi3_su_angles_are_each_sequences_own`).
    "phi3_su": Family(lambda: keras_hub.models.Phi3Backbone(
        vocabulary_size=VOCAB, num_layers=2, hidden_dim=16,
        intermediate_dim=32, num_query_heads=4, num_key_value_heads=2,
        max_sequence_length=64, pretraining_sequence_length=4,
        rope_scaling_type="su", rope_scaling_short_factor=[1.0, 1.5],
        rope_scaling_long_factor=[2.0, 3.0])),
    # Sliding window on layer 1, sinks, odd head_dim (partial rotary).
    "gpt_oss": Family(lambda: keras_hub.models.GptOssBackbone(
        num_experts=4, top_k=2, sliding_window=WINDOW, head_dim=5,
        **_DECODER), rotary=True),
    # Layer 0 rotary, layer 1 without positions (NoPE); its own rotary
    # tables: `test_smollm3_angles_are_each_sequences_own`.
    "smollm3": Family(lambda: keras_hub.models.SmolLM3Backbone(
        vocabulary_size=VOCAB, hidden_dim=16, intermediate_dim=32,
        num_layers=2, num_attention_heads=4, num_key_value_heads=2,
        attention_bias=False, attention_dropout=0.0,
        rope_layer_enabled_list=[True, False], layer_types=["attention"] * 2,
        mlp_bias=False, layer_norm_epsilon=1e-6, max_position_embeddings=64,
        rope_theta=10000.0, partial_rotary_factor=1.0)),
    # Gemma 4: local layers 0, 2 and global 1, 3 (wider global heads, one
    # key-and-value head, partial rotation), soft caps, per-layer inputs;
    # layers 2 and 3 reuse the keys and values of 0 and 1; experts.
    "gemma4": Family(lambda: keras_hub.models.Gemma4Backbone(
        image_size=16, sliding_window_pattern=2,
        global_head_dim=8, num_global_key_value_heads=1,
        global_rope_partial_rotary_factor=0.5, num_kv_shared_layers=2,
        hidden_size_per_layer_input=4, enable_moe_block=True, num_experts=4,
        expert_intermediate_dim=8, num_experts_per_token=2,
        attention_logit_soft_cap=50.0, final_logit_soft_cap=30.0,
        **dict(_GEMMA4, num_layers=4)), rotary=True),
    "gemma4_bidirectional": Family(lambda: keras_hub.models.Gemma4Backbone(
        image_size=16, sliding_window_pattern=2,
        use_bidirectional_attention=True, **_GEMMA4), rotary=True,
        heavy=True),
    # Gemma 2 style: soft caps, local layer 0 and global layer 1.
    "gemma": Family(lambda: keras_hub.models.GemmaBackbone(
        attention_logit_soft_cap=50.0, final_logit_soft_cap=30.0, **_GEMMA),
        rotary=True),
    "gemma3": Family(lambda: keras_hub.models.Gemma3Backbone(
        image_size=16, **_GEMMA), rotary=True),
    "gemma3_bidirectional": Family(lambda: keras_hub.models.Gemma3Backbone(
        image_size=16, use_bidirectional_attention=True, **_GEMMA),
        rotary=True),
    "xlm_roberta": Family(lambda: keras_hub.models.XLMRobertaBackbone(
        vocabulary_size=VOCAB, **_ENCODER)),
    # Two groups of shared layers, each called twice: g0, g0, g1, g1.
    "albert": Family(lambda: keras_hub.models.AlbertBackbone(
        vocabulary_size=VOCAB, embedding_dim=4, num_groups=2,
        **dict(_ENCODER, num_layers=4)), token_types=True),
    # Buckets of 4: relative positions from 2 on are log-bucketed.
    "deberta_v3": Family(lambda: keras_hub.models.DebertaV3Backbone(
        vocabulary_size=VOCAB, bucket_size=4, **_ENCODER)),
    "roformer_v2": Family(lambda: keras_hub.models.RoformerV2Backbone(
        vocabulary_size=VOCAB, head_size=4, **_SMALL), token_types=True),
    "xlnet": Family(lambda: keras_hub.models.XLNetBackbone(
        vocabulary_size=VOCAB, **_SMALL), token_types=True),
    "esm": Family(lambda: keras_hub.models.ESMBackbone(
        vocabulary_size=VOCAB, **_SMALL)),
    # ESM-1: learned positions counted from pad_token_id (an id the
    # examples never hold), pre-norm embeddings.
    "esm_absolute": Family(lambda: keras_hub.models.ESMBackbone(
        vocabulary_size=VOCAB + 1, pad_token_id=VOCAB,
        position_embedding_type="absolute", use_pre_layer_norm=True,
        max_sequence_length=VOCAB + MAX_LENGTH, **_SMALL)),
    "gpt2": Family(lambda: keras_hub.models.GPT2Backbone(
        vocabulary_size=VOCAB, max_sequence_length=MAX_LENGTH, **_SMALL)),
    "opt": Family(lambda: keras_hub.models.OPTBackbone(
        vocabulary_size=VOCAB, max_sequence_length=MAX_LENGTH, **_SMALL)),
    "gpt_neo_x": Family(lambda: keras_hub.models.GPTNeoXBackbone(
        vocabulary_size=VOCAB, rotary_percentage=0.5, **_SMALL), rotary=True),
    "bloom": Family(lambda: keras_hub.models.BloomBackbone(
        vocabulary_size=VOCAB, **dict(_SMALL, num_heads=4))),
    # Three heads: ALiBi slopes of a head count that is not a power of 2.
    "falcon": Family(lambda: keras_hub.models.FalconBackbone(
        vocabulary_size=VOCAB, num_layers=2, num_attention_heads=3,
        hidden_dim=12, intermediate_dim=24), heavy=True),
}


def make_backbone(family, seed=0):
    """The family's tiny backbone, with its zero-initialized trainable
    variables (biases, Gemma 4's expert projections) made random so that
    every path carries gradients."""
    keras.utils.set_random_seed(seed)
    return randomize_zeros(FAMILIES[family].build(), seed)


def make_backbone_one_layer(family, seed=0):
    """`make_backbone`'s backbone with one layer (and weights of its own):
    for families whose layers are all alike, where a second layer compiles
    and checks the same code again."""
    keras.utils.set_random_seed(seed)
    return randomize_zeros(built_with(FAMILIES[family].build, num_layers=1), seed)


def built_with(build, **config):
    """`build()` (a function calling one `keras_hub.models` backbone class)
    with `config`'s entries replacing or adding to the class's arguments:
    the backbone ``type(b).from_config(dict(b.get_config(), **config))``
    gives (same configuration, and the same weights after the same seed),
    without building ``b`` first (a tiny backbone's build is most of its
    cost: 0.3-0.5 s of CPU).

    >>> keras.utils.set_random_seed(0)
    >>> one = built_with(FAMILIES["llama"].build, num_layers=1)
    >>> one.num_layers, len(one.transformer_layers)
    (1, 1)
    """
    models = keras_hub.models

    class Models:
        def __getattr__(self, name):
            cls = getattr(models, name)
            return lambda *args, **kwargs: cls(*args, **{**kwargs, **config})

    with mock.patch.object(keras_hub, "models", Models()):
        return build()


def randomize_zeros(backbone, seed=0):
    """`backbone` with its all-zero trainable variables made random."""
    rng = np.random.default_rng(seed)
    for variable in backbone.trainable_variables:
        value = np.asarray(variable)
        if not value.any():
            variable.assign(rng.normal(0, 0.1, value.shape).astype(value.dtype))
    return backbone


def examples(family, seed=0):
    """Random sequences of `LENGTHS` (token types where the family has them)."""
    rng = np.random.default_rng(seed)
    result = []
    for n in LENGTHS:
        example = {"input_ids": rng.integers(1, VOCAB, n)}
        if FAMILIES[family].token_types:
            example["token_type_ids"] = (np.arange(n) >= n // 2).astype(int)
        result.append(example)
    return result


def keras_hub_alone(backbone, example):
    """The keras-hub backbone on one unpadded sequence: `[n, hidden]` (its
    inputs as the run-time exactness check builds them)."""
    outputs = backbone(keras_hub_inputs(backbone, example), training=False)
    if isinstance(outputs, dict):
        outputs = outputs["sequence_output"]
    return outputs[0]


def keras_hub_alone_in_one_batch(backbone, examples):
    """The keras-hub `backbone` on each of `examples` alone, all in one call:
    `[n, hidden]` each. Each example is its own row, right padded to the
    longest with a zero padding mask (the library's `keras_hub_batch`): the
    mask keeps the padding out of every real token, and the rows of a batch
    never meet, where `padded_batch_reason` finds nothing against it. One
    eager call instead of one an example (each costs as much as the batch: a
    fifth of the forward pass and of its gradient in test_conformance.py)."""
    inputs = keras_hub_batch(backbone, examples)
    outputs = backbone(inputs, training=False)
    if isinstance(outputs, dict):
        outputs = outputs["sequence_output"]
    return [outputs[row, :int(real.sum())]
            for row, real in enumerate(inputs["padding_mask"])]


def right_padded(sequences):
    """Token ids and padding mask `[len(sequences), longest]`: each sequence its
    own row, right padded with 0 (for references computed on every sequence
    alone in one batch; rows of a batch never meet)."""
    ids = np.zeros((len(sequences), max(len(s) for s in sequences)), "int32")
    mask = np.zeros_like(ids)
    for row, sequence in enumerate(sequences):
        ids[row, :len(sequence)], mask[row, :len(sequence)] = sequence, 1
    return ids, mask
