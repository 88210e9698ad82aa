"""What each keras-hub adapter family reads of keras-hub's private names.

`FAMILIES` is the table `tfpack.models.keras_hub.internals` checks and
reads through: for each family (the `family` of its adapter class), the
keras-hub classes (by module; matched by name along a layer's class
hierarchy) whose private attributes and methods its module reads, and the
private module functions it calls. A name an adapter reads is declared
here first (`internals.private` refuses an undeclared one), so this table
is the whole of tfpack's reliance on keras-hub's internals: a release that
renames one of them fails `internals.check` in one line naming the family.

>>> FAMILIES["decoders"].label
'Llama-style decoder'
>>> FAMILIES["decoders"].classes["LlamaAttention"].methods
{'_compute_attention': ('query', 'key', 'value', 'attention_mask')}
"""

import dataclasses

# The keras-hub releases the conformance suite
# (tests/models/keras_hub/test_conformance.py) passed on; setup.py's
# `keras-hub` pin and the door's refusal (`internals.check`) read it here.
TESTED_KERAS_HUB_VERSIONS = ("0.32.0",)


@dataclasses.dataclass(frozen=True)
class Hub:
    """One keras-hub class an adapter reads: its module, the private
    attributes its built instances have (`"a|b"`: one of the two, as
    layers of two kinds have), and its private methods with the arguments
    tfpack passes (names ending in `=` are passed by keyword)."""

    module: str
    attributes: tuple = ()
    methods: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Family:
    """The private names one adapter family reads: `label` names it in
    errors; `classes` maps keras-hub class names to their `Hub`;
    `functions` maps keras-hub modules to their private functions."""

    label: str
    classes: dict = dataclasses.field(default_factory=dict)
    functions: dict = dataclasses.field(default_factory=dict)


# Names shared by several classes.
_ATTENTION = ("query", "key", "value", "attention_mask")
_COMPUTE = {"_compute_attention": _ATTENTION}
_COMPUTE_TRAINING = {"_compute_attention": _ATTENTION + ("training=",)}
_QKV = ("_key_dense", "_output_dense", "_query_dense", "_value_dense")
_KERAS_MHA = _QKV + ("_attention_axes", "_dropout", "_dropout_layer",
                     "_inverse_sqrt_key_dim")
_TRANSFORMER_BLOCK = (
    "_feedforward_dropout", "_feedforward_intermediate_dense",
    "_feedforward_layer_norm", "_feedforward_output_dense",
    "_self_attention_dropout", "_self_attention_layer",
    "_self_attention_layer_norm")
_DECODER_ATTENTION = ("_self_attention_dropout", "_self_attention_layer",
                      "_self_attention_layernorm", "_feedforward_layernorm")
_LLAMA_BLOCK = _DECODER_ATTENTION + (
    "_feedforward_gate_dense", "_feedforward_intermediate_dense",
    "_feedforward_output_dense")
_LLAMA_ATTENTION = _QKV + ("_dropout_layer", "_inv_norm_factor")
_QWEN3_ATTENTION = _LLAMA_ATTENTION + ("_key_dense_layer_norm",
                                       "_query_dense_layer_norm")
_QWEN3_5_DECODER = ("_input_layernorm", "_linear_attn|_self_attention_layer",
                    "_post_attention_layernorm", "_self_attention_dropout")
_ROPE = {"_apply_rope": ("x", "start_index", "positions=")}


def _models(path):
    return f"keras_hub.src.models.{path}"


FAMILIES = {
    "encoders": Family("BERT-style encoder", classes={
        "TransformerEncoder": Hub(
            "keras_hub.src.layers.modeling.transformer_encoder",
            _TRANSFORMER_BLOCK),
        "MultiHeadAttention": Hub(
            "keras.src.layers.attention.multi_head_attention", _KERAS_MHA,
            {"_masked_softmax": ("scores", "mask")}),
    }),
    "gpt": Family("GPT-2 and OPT", classes={
        "TransformerDecoder": Hub(
            "keras_hub.src.layers.modeling.transformer_decoder",
            _TRANSFORMER_BLOCK),
        "CachedMultiHeadAttention": Hub(
            "keras_hub.src.layers.modeling.cached_multi_head_attention",
            _KERAS_MHA, {"_masked_softmax": ("scores", "mask")}),
    }),
    "deberta": Family("DeBERTa-v3", classes={
        "DisentangledAttentionEncoder": Hub(
            _models("deberta_v3.disentangled_attention_encoder"),
            _TRANSFORMER_BLOCK),
        "DisentangledSelfAttention": Hub(
            _models("deberta_v3.disentangled_self_attention"),
            _QKV + ("_attn_dropout_layer", "_position_dropout_layer"),
            {"_make_log_bucket_position": ("relative_positions",),
             "_masked_softmax": ("scores", "mask")}),
    }),
    "roformer": Family("RoFormer-V2"),
    "esm": Family("ESM"),
    "xlnet": Family("XLNet", classes={
        "TwoStreamRelativeAttention": Hub(
            _models("xlnet.relative_attention"),
            _QKV + ("_dropout_layer", "_encoding_dense", "_key_dim")),
    }, functions={_models("xlnet.relative_attention"): ("_rel_shift",)}),
    "decoders": Family("Llama-style decoder", classes={
        "LlamaTransformerDecoder": Hub(_models("llama.llama_decoder"),
                                       _LLAMA_BLOCK),
        "LlamaAttention": Hub(_models("llama.llama_attention"),
                              _LLAMA_ATTENTION, _COMPUTE),
        "MistralTransformerDecoder": Hub(
            _models("mistral.mistral_transformer_decoder"), _LLAMA_BLOCK),
        "CachedMistralAttention": Hub(
            _models("mistral.mistral_attention"),
            _LLAMA_ATTENTION + ("_num_key_value_groups",), _COMPUTE),
        "QwenTransformerDecoder": Hub(_models("qwen.qwen_decoder"),
                                      _LLAMA_BLOCK),
        "QwenAttention": Hub(_models("qwen.qwen_attention"),
                             _LLAMA_ATTENTION, _COMPUTE),
        "Qwen3TransformerDecoder": Hub(_models("qwen3.qwen3_decoder"),
                                       _LLAMA_BLOCK),
        "Qwen3Attention": Hub(_models("qwen3.qwen3_attention"),
                              _QWEN3_ATTENTION, _COMPUTE),
        "MixtralTransformerDecoder": Hub(
            _models("mixtral.mixtral_decoder"),
            _DECODER_ATTENTION + ("_sparse_moe_block",)),
        "CachedMixtralAttention": Hub(_models("mixtral.mixtral_attention"),
                                      ("_inv_norm_factor",), _COMPUTE),
        "QwenMoeTransformerDecoder": Hub(_models("qwen_moe.qwen_moe_decoder"),
                                         _DECODER_ATTENTION),
        "QwenMoeAttention": Hub(
            _models("qwen_moe.qwen_moe_attention"),
            ("_dropout_layer", "_inv_norm_factor", "_output_dense"),
            _COMPUTE),
        "Qwen3MoeTransformerDecoder": Hub(
            _models("qwen3_moe.qwen3_moe_decoder"), _DECODER_ATTENTION),
        "Qwen3MoeAttention": Hub(_models("qwen3_moe.qwen3_moe_attention"),
                                 _QWEN3_ATTENTION, _COMPUTE),
    }),
    "phi3": Family("Phi-3", classes={
        "Phi3Attention": Hub(_models("phi3.phi3_attention"),
                             ("_inv_norm_factor",), _COMPUTE),
        "Phi3SuScaledRotaryEmbedding": Hub(
            _models("phi3.phi3_rotary_embedding"),
            methods={"_get_inverse_freq": ("rotary_dim",)}),
    }),
    "gpt_oss": Family("GPT-OSS", classes={
        "GptOssAttention": Hub(_models("gpt_oss.gpt_oss_attention"),
                               ("_inv_norm_factor", "_rotary_dim"),
                               _COMPUTE),
    }),
    "smollm3": Family("SmolLM3", classes={
        "SmolLM3Attention": Hub(_models("smollm3.smollm3_layers"),
                                ("_inv_norm_factor",), _COMPUTE),
    }),
    "gemma": Family("Gemma", classes={
        "CachedGemmaAttention": Hub(_models("gemma.gemma_attention"),
                                    methods={**_ROPE, **_COMPUTE_TRAINING}),
        "CachedGemma3Attention": Hub(_models("gemma3.gemma3_attention"),
                                     methods=_COMPUTE_TRAINING),
    }),
    "gemma4": Family("Gemma 4", classes={
        "Gemma4TextAttention": Hub(
            _models("gemma4.gemma4_attention"),
            methods={"_mask_sliding_window": ("attention_mask",), **_ROPE}),
    }),
    "gpt_neo_x": Family("GPT-NeoX", classes={
        "GPTNeoXDecoder": Hub(
            _models("gpt_neo_x.gpt_neo_x_decoder"),
            tuple(name for name in _TRANSFORMER_BLOCK
                  if name != "_feedforward_dropout")),
        "GPTNeoXAttention": Hub(
            _models("gpt_neo_x.gpt_neo_x_attention"),
            ("_attn_dropout_layer", "_inv_norm_factor", "_output_dense",
             "_qkv_dense"),
            {"_masked_softmax": ("scores", "mask"), **_COMPUTE_TRAINING}),
    }, functions={"keras_hub.src.utils.keras_utils": (
        "fused_attention_op_available",)}),
    "alibi": Family("ALiBi (BLOOM, Falcon)", classes={
        "BloomDecoder": Hub(
            _models("bloom.bloom_decoder"),
            ("_dropout_layer", "_mlp_intermediate_dense", "_mlp_output_dense",
             "_post_attention_layernorm", "_pre_attention_layernorm",
             "_self_attention_layer")),
        "BloomAttention": Hub(
            _models("bloom.bloom_attention"),
            _QKV + ("_alibi_layer", "_dropout_layer", "_softmax")),
        "AlibiBias": Hub("keras_hub.src.layers.modeling.alibi_bias",
                         methods={"_get_slopes": ("num_heads",)}),
        "FalconTransformerDecoder": Hub(
            _models("falcon.falcon_transformer_decoder"),
            methods={"_get_slopes": ("num_heads",)}),
    }),
    # Encoder-decoders (pair packs, `seq2seq.py`).
    "t5": Family("T5", classes={
        # A staticmethod: `relative_position` binds where `self` would.
        "T5MultiHeadAttention": Hub(
            _models("t5.t5_multi_head_attention"),
            methods={"_relative_position_bucket": (
                "bidirectional=", "num_buckets=", "max_distance=")}),
    }),
    # Segmented attention runs each block's steps on its sublayers and the
    # Keras attention layers' projections.
    "bart": Family("BART", classes={
        "TransformerEncoder": Hub(
            "keras_hub.src.layers.modeling.transformer_encoder", _TRANSFORMER_BLOCK),
        "TransformerDecoder": Hub(
            "keras_hub.src.layers.modeling.transformer_decoder",
            _TRANSFORMER_BLOCK + ("_cross_attention_dropout", "_cross_attention_layer",
                                  "_cross_attention_layer_norm")),
        "MultiHeadAttention": Hub(
            "keras.src.layers.attention.multi_head_attention", _KERAS_MHA),
    }),
    "t5gemma": Family("T5Gemma", classes={
        "T5GemmaAttention": Hub(_models("t5gemma.t5gemma_attention"),
                                methods=_COMPUTE_TRAINING),
    }, functions={_models("t5gemma.t5gemma_attention"): ("repeat_kv",)}),
    "edrec": Family("EdRec", classes={
        "MultiHeadAttention": Hub(
            "keras.src.layers.attention.multi_head_attention", _KERAS_MHA),
    }),
    "t5gemma2": Family("T5Gemma 2", classes={
        cls: Hub(_models("t5gemma2.t5gemma2_attention"), methods={"_compute_attention": (
            "query_states", "key_states", "value_states", "attention_mask", "training=")})
        for cls in ("T5Gemma2Attention", "T5Gemma2MergedAttention")
    }, functions={_models("t5gemma2.t5gemma2_attention"): ("repeat_kv",)}),
    "qwen3_5": Family("Qwen3.5", classes={
        # A layer holds a gated DeltaNet or an attention layer (`layer_type`).
        "Qwen3_5TransformerDecoder": Hub(
            _models("qwen3_5.qwen3_5_decoder"),
            ("_feedforward_gate_dense", "_feedforward_intermediate_dense",
             "_feedforward_output_dense") + _QWEN3_5_DECODER),
        "Qwen3_5MoeTransformerDecoder": Hub(
            _models("qwen3_5_moe.qwen3_5_moe_decoder"), _QWEN3_5_DECODER),
        "Qwen3_5Attention": Hub(
            _models("qwen3_5.qwen3_5_attention"),
            _QKV + ("_dropout_layer", "_inv_norm_factor", "_key_norm",
                    "_query_norm"), _COMPUTE),
    }, functions={"keras_hub.src.utils.keras_utils": (
        "fused_attention_op_available",)}),
}


__all__ = ["FAMILIES", "Family", "Hub", "TESTED_KERAS_HUB_VERSIONS"]
