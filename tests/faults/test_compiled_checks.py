"""Fault injection, issue 33: Keras `fit`, `evaluate` and `predict` of bad packs on TensorFlow,
compiled with XLA or not, refuse them in one `TfpackError` (as on JAX).

Each scenario failed before its fix: under ``jit_compile=True`` XLA dropped the named
assertions of `Task.compute_loss`, so a tag past the head trained to a NaN loss and pairs
sharing their prompt through a model without ``share_prompt`` trained without a word; a
position past the model's learned position table was clamped to its last row under XLA
(eagerly: a raw gather error); Keras on TensorFlow refused the others with an
``InvalidArgumentError`` where Keras on JAX says `TfpackError`. The checks now run on each
batch in the step's graph before the compiled step (outside XLA).
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfpack
from tests.faults.outcomes import HELD, judge_call

LABELS = "`labels` must be class ids in [0, 3) (num_classes of the model). Received: labels=5"
POSITIONS = ("`position_ids` must be inside [0, 8) (the rows of the model's position table). "
             "Received: position_ids=9")
SHARED = "Received: share_prompt=False"


def _held(verdict):
    assert verdict.outcome == HELD, verdict


@pytest.fixture(scope="module")
def tagger():
    """A token tagger of 3 classes with a learned position table of 8 rows, compiled with XLA."""
    keras.utils.set_random_seed(0)
    encoder = tfpack.models.BertEncoder(vocabulary_size=23, num_layers=1, hidden_dim=8,
                                        num_heads=2, intermediate_dim=16, max_sequence_length=8)
    model = tfpack.models.TokenClassifier(encoder, num_classes=3, dropout=0.0)
    model.compile(optimizer="sgd", jit_compile=True)
    return model


def _tags(label=2, position=7):
    """Two packs of 8 tokens; the second's token 4 gets ``label``, its last ``position``."""
    ids = np.array([[2, 5, 7, 9, 3, 4, 6, 8]] * 2, np.int32)
    x = {"input_ids": ids, "sequence_ids": np.ones_like(ids),
         "position_ids": np.tile(np.arange(8, dtype=np.int32), (2, 1)),
         "token_type_ids": np.zeros_like(ids),
         "labels": np.array([[0, 1, 2, -100, 1, 0, -100, 2]] * 2, np.int32)}
    x["labels"][1, 4], x["position_ids"][1, 7] = label, position
    return x


def _dataset(x):
    return tf.data.Dataset.from_tensor_slices(x).batch(2)


@pytest.mark.parametrize("call", ["fit", "evaluate", "predict"])
@pytest.mark.parametrize("source", ["numpy", "dataset"])
def test_xla_steps_refuse_a_tag_past_the_head(tagger, call, source):
    x = _tags(label=5)
    data = x if source == "numpy" else _dataset(x)
    kwargs = {"batch_size": 2} if source == "numpy" else {}
    weights = [w.copy() for w in tagger.get_weights()]
    _held(judge_call(lambda: getattr(tagger, call)(data, verbose=0, **kwargs), refuse=True,
                     match=LABELS))
    assert all(np.array_equal(a, b) for a, b in zip(weights, tagger.get_weights()))


@pytest.mark.parametrize("call", ["fit", "evaluate", "predict"])
def test_xla_steps_refuse_a_position_past_the_table(tagger, call):
    """XLA clamped position 9 to row 7 of a table of 8 rows: a plausible, wrong output."""
    _held(judge_call(lambda: getattr(tagger, call)(_dataset(_tags(position=9)), verbose=0),
                     refuse=True, match=POSITIONS))


@pytest.mark.slow  # one XLA compile of the tiny tagger's train step (~5-15 s on a shared CPU)
def test_xla_fit_of_good_packs_trains(tagger):
    history = tagger.fit(_dataset(_tags()), verbose=0)
    assert np.isfinite(history.history["loss"]).all()


def test_a_position_past_the_table_is_one_tfpack_error_without_xla_too():
    """Eagerly TensorFlow's gather raised `indices[1,7] = 9 is not in [0, 8)`; Keras on JAX
    says the same `TfpackError` (`carried_jax_run.py`)."""
    keras.utils.set_random_seed(0)
    encoder = tfpack.models.BertEncoder(vocabulary_size=23, num_layers=1, hidden_dim=8,
                                        num_heads=2, intermediate_dim=16, max_sequence_length=8)
    model = tfpack.models.TokenClassifier(encoder, num_classes=3, dropout=0.0)
    model.compile(optimizer="sgd", jit_compile=False)
    for call in (model.fit, model.predict):  # `evaluate` steps as `fit` does
        _held(judge_call(lambda: call(_tags(position=9), batch_size=2, verbose=0),
                         refuse=True, match=POSITIONS))


PAIRS = [{"prompt": [1, 2, 3], "chosen": [4, 5], "rejected": [6, 7, 8]},
         {"prompt": [9, 10], "chosen": [11], "rejected": [12]}]


def _pairs(pairs, share_prompt=False):
    from tfpack.builders import preference_pair
    from tfpack.testing import pack_examples

    return pack_examples([preference_pair(**p, share_prompt=share_prompt) for p in pairs],
                         max_length=16, max_sequences_per_pack=2)


@pytest.fixture(scope="module")
def pair_model():
    """A `PreferenceModel` without ``share_prompt`` on a learned position table of 8 rows,
    compiled with XLA (its steps traced once for every scenario: the packs share shapes)."""
    keras.utils.set_random_seed(0)
    policy = tfpack.models.CausalLM(tfpack.models.DecoderBackbone(
        vocabulary_size=20, num_layers=1, hidden_dim=8, num_heads=2, intermediate_dim=16,
        position_embedding="learned", max_sequence_length=8))
    model = tfpack.models.PreferenceModel(policy, loss="simpo")
    model.compile(optimizer="sgd", jit_compile=True)
    return model


def test_xla_fit_refuses_shared_prompt_packs_for_a_model_without_it(pair_model):
    _held(judge_call(lambda: pair_model.fit(_pairs(PAIRS, share_prompt=True), batch_size=1,
                                            verbose=0), refuse=True, match=SHARED))


def test_keras_steps_bound_each_sequence_of_a_pair_by_the_position_table(pair_model):
    """A table of 8 rows reads pairs of two 6-token sequences (12 tokens a pair) and
    refuses a 9-token chosen sequence, on the positions each sequence is read at."""
    from tfpack.models.batch_checks import graph_checked, refusing

    nine = _pairs([{"prompt": [1, 2, 3], "chosen": [4, 5, 6, 7, 8, 9], "rejected": [7]}])
    _held(judge_call(lambda: pair_model.fit(nine, batch_size=1, verbose=0), refuse=True,
                     match="Received: position_ids=8"))
    # The same checks around a step that returns its positions, without tracing a model.
    step = refusing(tf.function(graph_checked(pair_model, lambda x: x["position_ids"])))
    six = _pairs([{"prompt": [1, 2, 3], "chosen": [4, 5, 6], "rejected": [7, 8, 9]}])
    assert step(six).numpy().max() == 11  # the pack's positions; each sequence ends at 5
    _held(judge_call(lambda: step(nine), refuse=True, match="Received: position_ids=8"))


def test_an_adapter_without_a_position_table_bounds_no_position():
    """A keras-hub adapter saying ``max_sequence_length=None`` (rotary GPT-NeoX and ESM-2,
    relative DeBERTa-v3) has no table, whatever its keras-hub backbone's number: Keras
    steps, `predict` and the export read 512 there and would refuse longer packs."""
    from tfpack.models.limits import input_limits

    class KerasHubBackbone:
        max_sequence_length = 512

    class Adapter:
        max_sequence_length, backbone = None, KerasHubBackbone()

    class Task:
        vocabulary_size, backbone = 20, Adapter()

    assert input_limits(Task()) == {"input_ids": 20}
    Adapter.max_sequence_length = 16  # a learned table of its own
    assert input_limits(Task()) == {"input_ids": 20, "position_ids": 16}


@pytest.fixture(scope="module")
def bart():
    """A `Seq2SeqLM` on BART's learned tables of 8 rows, compiled with XLA (its train step
    traced once for both rows: the packs share shapes)."""
    import keras_hub

    from tfpack.models import Seq2SeqLM, from_keras_hub

    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BartBackbone(vocabulary_size=30, num_layers=1, num_heads=2,
                                             hidden_dim=8, intermediate_dim=16,
                                             max_sequence_length=8)
    model = Seq2SeqLM(from_keras_hub(backbone, check_exact=False))
    model.compile(optimizer="sgd", jit_compile=True)
    return model


@pytest.mark.parametrize("row", ["encoder", "decoder"])
def test_xla_fit_refuses_a_pair_position_past_bart_s_table(bart, row):
    """Encoder-decoder pair packs: BART's learned tables of 8 rows, a position 9 in one row.
    XLA clamped it to the last row and trained without a word."""
    from tfpack.builders import pack_pairs

    assert bart.position_table_rows == 8
    packs = pack_pairs([([0, 5, 2], [2, 0, 7, 2]), ([0, 6, 2], [2, 0, 2])],
                       max_encoder_length=8, max_decoder_length=8)
    x = {name: np.asarray(value) for name, value in packs.items()}
    x[f"{row}_position_ids"][0, 1] = 9
    weights = [w.copy() for w in bart.get_weights()]
    _held(judge_call(lambda: bart.fit(x, batch_size=1, verbose=0), refuse=True,
                     match=f"Received: {row}_position_ids=9"))
    assert all(np.array_equal(a, b) for a, b in zip(weights, bart.get_weights()))
