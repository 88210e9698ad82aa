import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfpack.errors import TfpackError
from tfpack.models import BertClassifier
from tfpack.models import BertPretrainer
from tfpack.models import CausalLM
from tfpack.testing import assert_no_cross_contamination
from tfpack.testing import assert_packed_equals_unpacked
from tfpack.testing import pack_examples

from jax_env import jax_env
from model_helpers import MAX_LENGTH, VOCAB, bert_examples, causal_examples, tiny_encoder


def causal_lm(**kwargs):
    config = dict(vocabulary_size=VOCAB, num_layers=2, hidden_dim=16,
                  num_heads=2, intermediate_dim=32, max_sequence_length=16)
    config.update(kwargs)
    return CausalLM(**config)


MODELS = {
    "encoder": (lambda **kw: tiny_encoder(**kw), bert_examples),
    "pretrainer_token": (lambda **kw: BertPretrainer(tiny_encoder(**kw)),
                         bert_examples),
    "pretrainer_sequence": (lambda **kw: BertPretrainer(
        tiny_encoder(**kw), mlm_averaging="sequence"), bert_examples),
    "classifier": (lambda **kw: BertClassifier(tiny_encoder(**kw), 3),
                   bert_examples),
    "causal_rotary": (lambda **kw: causal_lm(**kw), causal_examples),
    "causal_learned": (lambda **kw: causal_lm(position_embedding="learned",
                                              **kw), causal_examples),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_packed_equals_unpacked(name):
    make, examples = MODELS[name]
    result = assert_packed_equals_unpacked(make(), examples(),
                                           max_length=MAX_LENGTH)
    assert result.sequences_checked >= 6
    if name != "encoder":
        assert result.max_gradient_difference is not None


@pytest.mark.parametrize("name", sorted(MODELS))
def test_no_cross_contamination(name):
    make, examples = MODELS[name]
    packed = pack_examples(examples(), MAX_LENGTH, max_sequences_per_pack=3)
    assert assert_no_cross_contamination(make(), packed).sequences_checked


@pytest.mark.parametrize("name", sorted(MODELS))
def test_mask_ablation_fails_both_checks(name):
    make, examples = MODELS[name]
    model = make(block_diagonal_mask=False)
    with pytest.raises(AssertionError, match="Packed and unpacked differ"):
        assert_packed_equals_unpacked(model, examples(), max_length=MAX_LENGTH)
    with pytest.raises(AssertionError, match="Cross-contamination"):
        assert_no_cross_contamination(
            model, pack_examples(examples(), MAX_LENGTH))


@pytest.mark.parametrize("name", ["encoder", "pretrainer_token",
                                  "classifier", "causal_learned"])
def test_position_ablation_fails_equivalence(name):
    make, examples = MODELS[name]
    with pytest.raises(AssertionError, match="Packed and unpacked differ"):
        assert_packed_equals_unpacked(make(reset_positions=False), examples(),
                                      max_length=MAX_LENGTH)


def test_rotary_needs_no_reset_under_block_diagonal_mask():
    # RoPE scores depend on relative positions only, so with the
    # block-diagonal mask a sequence shifted inside the pack sees the same
    # scores: resetting positions matters for learned/absolute positions,
    # while for RoPE it only removes float rounding of large angles.
    assert_packed_equals_unpacked(causal_lm(reset_positions=False),
                                  causal_examples(), max_length=MAX_LENGTH,
                                  atol=1e-4, check_gradients=False)


def _features(examples):
    return pack_examples(examples, MAX_LENGTH, max_sequences_per_pack=3)


def test_loss_statistics_contract_and_compute_loss():
    model = BertPretrainer(tiny_encoder())
    features = _features(bert_examples())
    y_pred = model(features)
    assert y_pred["mlm_logits"].shape[-1] == VOCAB
    stats = model.loss_statistics(features, y_pred)
    assert sorted(stats) == sorted(f"{t}_{s}" for t in model.loss_terms
                                   for s in ("loss_sum", "count", "correct"))
    assert all(v.dtype == "float32" and v.shape == () for v in stats.values())
    assert float(stats["mlm_count"]) == features["masked_lm_weights"].sum()
    assert float(stats["nsp_count"]) == len(bert_examples())
    loss = model.compute_loss(x=features, y=None, y_pred=y_pred)
    expected = sum(float(stats[f"{t}_loss_sum"]) / float(stats[f"{t}_count"])
                   for t in model.loss_terms)
    assert float(loss) == pytest.approx(expected, rel=1e-6)
    # Without y_pred the model runs itself.
    assert float(model.compute_loss(x=features, training=False)) == (
        pytest.approx(expected, rel=1e-6))


def test_loss_balancing_divides_by_expected_count():
    model = BertPretrainer(tiny_encoder(),
                           expected_counts={"mlm": 2.5, "nsp": 2.0})
    features = _features(bert_examples())
    y_pred = model(features)
    stats = model.loss_statistics(features, y_pred)
    packs = features["input_ids"].shape[0]
    expected = (float(stats["mlm_loss_sum"]) / (2.5 * packs)
                + float(stats["nsp_loss_sum"]) / (2.0 * packs))
    assert float(model.compute_loss(x=features, y_pred=y_pred)) == (
        pytest.approx(expected, rel=1e-6))
    restored = BertPretrainer.from_config(model.get_config())
    assert restored.expected_counts == {"mlm": 2.5, "nsp": 2.0}
    with pytest.raises(TfpackError, match=r"Received: expected_counts="):
        BertPretrainer(tiny_encoder(), expected_counts={"lm": 3.0})


def _fit(model, examples, jit_compile, epochs=2):
    # One full batch per epoch: a single trace / XLA compilation.
    features = _features(examples)
    dataset = tf.data.Dataset.from_tensor_slices(features).batch(
        len(features["input_ids"]))
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  jit_compile=jit_compile, run_eagerly=not jit_compile)
    return model.fit(dataset, epochs=epochs, verbose=0).history


def test_fit_with_jit_compile_reports_accuracies():
    history = _fit(BertPretrainer(tiny_encoder(num_layers=1)),
                   bert_examples(), jit_compile=True)
    assert set(history) == {"loss", "mlm_accuracy", "nsp_accuracy"}
    assert history["loss"][1] < history["loss"][0]


@pytest.mark.parametrize("make,examples,metric", [
    (lambda: BertClassifier(tiny_encoder(num_layers=1), 3), bert_examples,
     "classification_accuracy"),
    (lambda: causal_lm(num_layers=1), causal_examples, "lm_accuracy"),
])
def test_fit_other_models(make, examples, metric):
    history = _fit(make(), examples(), jit_compile=False)
    assert metric in history and np.isfinite(history["loss"]).all()


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_training(policy):
    keras.mixed_precision.set_global_policy(policy)
    for make, examples in ((lambda: BertPretrainer(tiny_encoder(num_layers=1)),
                            bert_examples),
                           (lambda: causal_lm(num_layers=1), causal_examples)):
        model = make()
        history = _fit(model, examples(), jit_compile=False, epochs=1)
        assert np.isfinite(history["loss"]).all()
        outputs = model(_features(examples()))
        assert all(v.dtype == "float32" for v in outputs.values())
        assert model.trainable_weights[0].dtype == "float32"


@pytest.mark.parametrize("make,examples", [
    (lambda: tiny_encoder(activation="gelu_tanh"), bert_examples),
    (lambda: BertPretrainer(tiny_encoder(), mlm_averaging="sequence",
                            expected_counts={"nsp": 2.0}), bert_examples),
    (lambda: BertClassifier(tiny_encoder(), 3, dropout=0.2), bert_examples),
    (lambda: causal_lm(position_embedding="learned", tie_embeddings=False),
     causal_examples),
    (lambda: causal_lm(), causal_examples),
])
def test_keras_file_round_trip(tmp_path, make, examples):
    model = make()
    features = _features(examples())
    before = model(features)
    path = str(tmp_path / "model.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert type(restored) is type(model)
    # Same config up to tuples becoming lists in JSON.
    assert json.loads(json.dumps(restored.get_config())) == json.loads(
        json.dumps(model.get_config()))
    after = restored(features)
    for key in before:
        np.testing.assert_array_equal(np.asarray(before[key]),
                                      np.asarray(after[key]))
    if isinstance(model, BertPretrainer):
        assert (restored.mlm_head.token_embedding
                is restored.encoder.token_embedding)
        assert len(restored.trainable_weights) == len(model.trainable_weights)


def test_constructor_errors():
    with pytest.raises(TfpackError, match=r"Received: mlm_averaging='pack'"):
        BertPretrainer(tiny_encoder(), mlm_averaging="pack")
    with pytest.raises(TfpackError, match=r"Received: position_embedding="
                                          r"'alibi'"):
        causal_lm(position_embedding="alibi")
    with pytest.raises(TfpackError, match=r"Received: activation='gelu_new'"):
        tiny_encoder(activation="gelu_new")


def test_jax_backend_smoke():
    pytest.importorskip("jax")
    import subprocess
    import sys

    # On JAX too: packed equals unpacked (outputs, losses) for a causal LM and
    # BERT, and no sequence of a pack leaks into another.
    code = (
        "import numpy as np, keras\n"
        "assert keras.backend.backend() == 'jax'\n"
        "from tfpack import models, testing\n"
        "rng = np.random.default_rng(0)\n"
        "lm_examples = [{'input_ids': rng.integers(1, 30, n), 'labels':"
        " testing.next_token_labels(rng.integers(1, 30, n))} for n in (3, 5, 2, 4)]\n"
        "lm = models.CausalLM(vocabulary_size=30, num_layers=1, hidden_dim=8,"
        " num_heads=2, intermediate_dim=16, max_sequence_length=16)\n"
        "testing.assert_packed_equals_unpacked(lm, lm_examples, max_length=8,"
        " check_gradients=False)\n"
        "bert_examples = [{'input_ids': rng.integers(5, 30, n), 'masked_lm_positions': [1],"
        " 'masked_lm_ids': [7], 'next_sentence_labels': 1, 'token_type_ids': [0] * n}"
        " for n in (5, 3, 6)]\n"
        "bert = models.BertPretrainer(models.BertEncoder(vocabulary_size=30, num_layers=1,"
        " hidden_dim=8, num_heads=2, intermediate_dim=16, max_sequence_length=16))\n"
        "testing.assert_packed_equals_unpacked(bert, bert_examples, max_length=12,"
        " check_gradients=False)\n"
        "testing.assert_no_cross_contamination(bert, testing.pack_examples("
        "bert_examples, max_length=12, max_sequences_per_pack=3))\n"
        "print('ok')\n")
    env = jax_env()
    done = subprocess.run([sys.executable, "-c", code], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("ok"), done.stdout
