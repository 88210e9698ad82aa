"""Reading Hugging Face BERT checkpoints (`config.json` + `model.safetensors`).

Only the `safetensors` package's numpy API is used: no torch, no network.
Hugging Face stores dense kernels as `[out, in]`; Keras as `[in, out]`.
"""

import json
import os

import numpy as np

from tfpack.errors import TfpackError

# Hugging Face `hidden_act` -> tfpack activation name.
_ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "relu": "relu",
}


def _require(path, name):
    file = os.path.join(os.fspath(path), name)
    if not os.path.isfile(file):
        raise TfpackError(
            f"A Hugging Face BERT directory must contain `{name}`. "
            f"Received: path={os.fspath(path)!r}")
    return file


def encoder_config(path) -> dict:
    """`BertEncoder` constructor arguments from `path/config.json`."""
    with open(_require(path, "config.json")) as f:
        hf = json.load(f)
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise TfpackError(
            "Only absolute position embeddings can be loaded. Received: "
            f"position_embedding_type={hf['position_embedding_type']!r}")
    act = hf.get("hidden_act", "gelu")
    if act not in _ACTIVATIONS:
        raise TfpackError(f"`hidden_act` must be one of {sorted(_ACTIVATIONS)}."
                          f" Received: hidden_act={act!r}")
    return {
        "vocabulary_size": hf["vocab_size"],
        "num_layers": hf["num_hidden_layers"],
        "hidden_dim": hf["hidden_size"],
        "num_heads": hf["num_attention_heads"],
        "intermediate_dim": hf["intermediate_size"],
        "activation": _ACTIVATIONS[act],
        "max_sequence_length": hf.get("max_position_embeddings", 512),
        "type_vocabulary_size": hf.get("type_vocab_size", 2),
        "layer_norm_epsilon": hf.get("layer_norm_eps", 1e-12),
        "dropout": hf.get("hidden_dropout_prob", 0.1),
        "attention_dropout": hf.get("attention_probs_dropout_prob", 0.1),
        "initializer_range": hf.get("initializer_range", 0.02),
    }


def read_weights(path) -> dict:
    """All tensors of `path/model.safetensors`, without a `bert.` prefix."""
    from safetensors.numpy import load_file

    tensors = load_file(_require(path, "model.safetensors"))
    return {(k[len("bert."):] if k.startswith("bert.") else k): v
            for k, v in tensors.items()}


def _norm(tensors, prefix):
    gamma = tensors.get(f"{prefix}.weight", tensors.get(f"{prefix}.gamma"))
    beta = tensors.get(f"{prefix}.bias", tensors.get(f"{prefix}.beta"))
    return [gamma, beta]


def _dense(tensors, prefix):
    return [tensors[f"{prefix}.weight"].T, tensors[f"{prefix}.bias"]]


def _assign(layer, values, name):
    expected = [tuple(w.shape) for w in layer.weights]
    received = [tuple(np.shape(v)) for v in values]
    if expected != received:
        raise TfpackError(
            f"Checkpoint tensors for `{name}` must have shapes {expected}. "
            f"Received: shapes={received}")
    layer.set_weights(values)


def load_encoder_weights(encoder, path) -> None:
    """Copies a Hugging Face BERT checkpoint into a built-or-not encoder."""
    tensors = read_weights(path)
    if not encoder.built:
        # Unknown L: no toy shape is recorded as the encoder's build shape.
        encoder.build({"input_ids": (None, None), "sequence_ids": (None, None),
                       "position_ids": (None, None),
                       "token_type_ids": (None, None)})
    e = "embeddings"
    _assign(encoder.token_embedding, [tensors[f"{e}.word_embeddings.weight"]],
            "token_embedding")
    _assign(encoder.position_embedding,
            [tensors[f"{e}.position_embeddings.weight"]], "position_embedding")
    _assign(encoder.token_type_embedding,
            [tensors[f"{e}.token_type_embeddings.weight"]],
            "token_type_embedding")
    _assign(encoder.embeddings_norm, _norm(tensors, f"{e}.LayerNorm"),
            "embeddings_norm")
    for i, layer in enumerate(encoder.transformer_layers):
        p = f"encoder.layer.{i}"
        attention = layer.attention
        for dense, name in ((attention.query_dense, "query"),
                            (attention.key_dense, "key"),
                            (attention.value_dense, "value")):
            _assign(dense, _dense(tensors, f"{p}.attention.self.{name}"),
                    f"{p}.{name}")
        _assign(attention.output_dense,
                _dense(tensors, f"{p}.attention.output.dense"), f"{p}.output")
        _assign(layer.attention_norm,
                _norm(tensors, f"{p}.attention.output.LayerNorm"),
                f"{p}.attention_norm")
        _assign(layer.intermediate_dense,
                _dense(tensors, f"{p}.intermediate.dense"),
                f"{p}.intermediate")
        _assign(layer.output_dense, _dense(tensors, f"{p}.output.dense"),
                f"{p}.output")
        _assign(layer.output_norm, _norm(tensors, f"{p}.output.LayerNorm"),
                f"{p}.output_norm")


def load_pooler_weights(sequence_head, path) -> bool:
    """Copies BERT's pooler into a built `PackedSequenceHead` if present."""
    tensors = read_weights(path)
    if "pooler.dense.weight" not in tensors or not sequence_head.pooler:
        return False
    _assign(sequence_head.pooler_dense, _dense(tensors, "pooler.dense"),
            "pooler")
    return True
