"""Tiny keras-hub backbones of every supported family, and a per-sequence reference."""

import keras
import numpy as np

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

FAMILIES = {
    "bert": lambda: keras_hub.models.BertBackbone(vocabulary_size=VOCAB,
                                                  **_ENCODER),
    "electra": lambda: keras_hub.models.ElectraBackbone(
        vocab_size=VOCAB, embedding_dim=4, **_ENCODER),
    "roberta": lambda: keras_hub.models.RobertaBackbone(vocabulary_size=VOCAB,
                                                        **_ENCODER),
    "distil_bert": lambda: keras_hub.models.DistilBertBackbone(
        vocabulary_size=VOCAB, **_ENCODER),
    "llama": lambda: keras_hub.models.LlamaBackbone(**_DECODER),
    "mistral": lambda: keras_hub.models.MistralBackbone(
        sliding_window=WINDOW, **_DECODER),
    "qwen2": lambda: keras_hub.models.Qwen2Backbone(
        use_sliding_window_attention=True, sliding_window_size=WINDOW,
        tie_word_embeddings=False, **_DECODER),
    # Gemma 2 style: soft caps, local layer 0 and global layer 1.
    "gemma": lambda: keras_hub.models.GemmaBackbone(
        attention_logit_soft_cap=50.0, final_logit_soft_cap=30.0, **_GEMMA),
    "gemma3": lambda: keras_hub.models.Gemma3Backbone(image_size=16, **_GEMMA),
    "gemma3_bidirectional": lambda: keras_hub.models.Gemma3Backbone(
        image_size=16, use_bidirectional_attention=True, **_GEMMA),
    "xlm_roberta": lambda: keras_hub.models.XLMRobertaBackbone(
        vocabulary_size=VOCAB, **_ENCODER),
    # Two groups of shared layers, each called twice: g0, g0, g1, g1.
    "albert": lambda: keras_hub.models.AlbertBackbone(
        vocabulary_size=VOCAB, embedding_dim=4, num_groups=2,
        **dict(_ENCODER, num_layers=4)),
    # Buckets of 4: relative positions from 2 on are log-bucketed.
    "deberta_v3": lambda: keras_hub.models.DebertaV3Backbone(
        vocabulary_size=VOCAB, bucket_size=4, **_ENCODER),
    "roformer_v2": lambda: keras_hub.models.RoformerV2Backbone(
        vocabulary_size=VOCAB, head_size=4, **_SMALL),
    "gpt2": lambda: keras_hub.models.GPT2Backbone(
        vocabulary_size=VOCAB, max_sequence_length=MAX_LENGTH, **_SMALL),
    "opt": lambda: keras_hub.models.OPTBackbone(
        vocabulary_size=VOCAB, max_sequence_length=MAX_LENGTH, **_SMALL),
    "gpt_neo_x": lambda: keras_hub.models.GPTNeoXBackbone(
        vocabulary_size=VOCAB, rotary_percentage=0.5, **_SMALL),
    "bloom": lambda: keras_hub.models.BloomBackbone(
        vocabulary_size=VOCAB, **dict(_SMALL, num_heads=4)),
    # Three heads: ALiBi slopes of a head count that is not a power of 2.
    "falcon": lambda: keras_hub.models.FalconBackbone(
        vocabulary_size=VOCAB, num_layers=2, num_attention_heads=3,
        hidden_dim=12, intermediate_dim=24),
}
TOKEN_TYPES = ("bert", "electra", "albert", "roformer_v2")


def make_backbone(family, seed=0):
    keras.utils.set_random_seed(seed)
    return FAMILIES[family]()


def examples(family, seed=0):
    """Random sequences of `LENGTHS` (token types for BERT and ELECTRA)."""
    rng = np.random.default_rng(seed)
    result = []
    for n in LENGTHS:
        example = {"input_ids": rng.integers(1, VOCAB, n)}
        if family in TOKEN_TYPES:
            example["token_type_ids"] = (np.arange(n) >= n // 2).astype(int)
        result.append(example)
    return result


def keras_hub_alone(backbone, example):
    """The keras-hub backbone on one unpadded sequence: `[n, hidden]`."""
    ids = np.asarray(example["input_ids"], "int32")[None]
    inputs = {"token_ids": ids}
    if "padding_mask" in backbone.input:  # RoFormer-V2 has none.
        inputs["padding_mask"] = np.ones_like(ids)
    if "segment_ids" in backbone.input:
        inputs["segment_ids"] = np.asarray(
            example.get("token_type_ids", np.zeros_like(ids[0])), "int32")[None]
    outputs = backbone(inputs, training=False)
    if isinstance(outputs, dict):
        outputs = outputs["sequence_output"]
    return outputs[0]
