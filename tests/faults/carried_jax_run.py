"""Run under KERAS_BACKEND=jax by test_carried.py: Keras `fit`, `evaluate` and
`predict` (jitted, as Keras compiles on JAX) of packs that disagree with the model.

Prints one JSON object: scenario -> ``"refused: <message>"`` (a `TfpackError`),
``"accepted"`` or ``"<ErrorType>: <message>"``. The scenarios:

- ``labels_fit`` / ``labels_evaluate``: a token tag 5 for a head of 3 classes
  (next to ``-100`` tags, which are ignored: the first label named must be 5);
  ``labels_fit_second_batch``: in the second batch of a two-step execution;
  ``weights_kept``: the refused calls left the model's weights as they were
  (Keras takes them out of the variables for its jitted loop);
- ``sequence_labels_evaluate``: a sequence label 2 for 2 classes where
  ``sequence_mask`` is set; ``empty_slot_label_evaluate``: a label 9 in an
  empty slot (read by no loss: accepted);
- ``shared_prompt_fit`` / ``_evaluate`` / ``_predict``: pairs that share their
  prompt through a `PreferenceModel` without ``share_prompt``;
  ``shared_prompt_model_fit``: the same packs through one with it (accepted);
- ``positions_fit`` / ``_evaluate`` / ``_predict``: a position 9 for a learned
  position table of 8 rows (JAX's lookup filled it without a word; TensorFlow's
  gather raised); ``pair_positions_fit``: a pair whose rejected sequence reaches
  position 8 of its own (9 in the pack) for a table of 8 rows.
"""

import json

# Keras (on JAX) is imported with the garbage collector paused, then frozen, by the JAX
# subprocesses' site (tests/paused_imports.py).
import keras
import numpy as np

import tfpack
import tfpack.models  # noqa: F401  (tfpack.models.* below)
from tfpack.builders import preference_pair
from tfpack.errors import TfpackError
from tfpack.testing import pack_examples

assert keras.backend.backend() == "jax"
PAIRS = [{"prompt": [1, 2, 3], "chosen": [4, 5], "rejected": [6, 7, 8]},
         {"prompt": [9, 10], "chosen": [11], "rejected": [12]}]


def outcome(call):
    try:
        call()
    except TfpackError as error:
        return f"refused: {error}"
    except Exception as error:  # noqa: BLE001 - reported to the test, which names it
        return f"{type(error).__name__}: {str(error)[:300]}"
    return "accepted"


def encoder():
    keras.utils.set_random_seed(0)
    return tfpack.models.BertEncoder(vocabulary_size=23, num_layers=1, hidden_dim=8,
                                     num_heads=2, intermediate_dim=16, max_sequence_length=8)


def token_tags():
    model = tfpack.models.TokenClassifier(encoder(), num_classes=3, dropout=0.0)
    ids = np.array([[2, 5, 7, 9, 3, 4, 0, 0]] * 2, np.int32)
    x = {"input_ids": ids, "sequence_ids": (ids > 0).astype(np.int32),
         "position_ids": np.tile(np.arange(8, dtype=np.int32), (2, 1)) * (ids > 0),
         "token_type_ids": np.zeros_like(ids),
         "labels": np.array([[0, 1, 2, -100, 1, 0, -100, -100]] * 2, np.int32)}
    x["labels"][1, 4] = 5
    model.compile(optimizer="sgd", steps_per_execution=2)
    before = [w.copy() for w in model.get_weights()]
    results = {"labels_fit": outcome(lambda: model.fit(x, batch_size=2, verbose=0)),
               # Two steps an execution: the second batch is refused before the first trains.
               "labels_fit_second_batch": outcome(lambda: model.fit(x, batch_size=1,
                                                                    verbose=0)),
               "labels_evaluate": outcome(lambda: model.evaluate(x, batch_size=2, verbose=0))}
    results["weights_kept"] = all(np.array_equal(a, b)
                                  for a, b in zip(before, model.get_weights()))
    return results


def sequence_labels():
    model = tfpack.models.BertClassifier(encoder(), 2, dropout=0.0)
    ids = np.array([[2, 5, 3, 2, 7, 3, 0, 0]], np.int32)
    x = {"input_ids": ids, "sequence_ids": np.array([[1, 1, 1, 2, 2, 2, 0, 0]], np.int32),
         "position_ids": np.array([[0, 1, 2, 0, 1, 2, 0, 0]], np.int32),
         "token_type_ids": np.zeros_like(ids), "cls_positions": np.array([[0, 3, 0]], np.int32),
         "sequence_mask": np.array([[1.0, 1.0, 0.0]], np.float32),
         "labels": np.array([[1, 0, 9]], np.int32)}
    model.compile(optimizer="sgd")
    results = {"empty_slot_label_evaluate": outcome(lambda: model.evaluate(x, verbose=0))}
    x["labels"] = np.array([[1, 2, 0]], np.int32)
    results["sequence_labels_evaluate"] = outcome(lambda: model.evaluate(x, verbose=0))
    return results


def shared_prompts():
    keras.utils.set_random_seed(0)
    policy = tfpack.models.CausalLM(tfpack.models.DecoderBackbone(
        vocabulary_size=20, num_layers=1, hidden_dim=8, num_heads=2, intermediate_dim=16))
    packs = pack_examples([preference_pair(**p, share_prompt=True) for p in PAIRS],
                          max_length=16, max_sequences_per_pack=2)
    plain = tfpack.models.PreferenceModel(policy, loss="simpo")
    plain.compile(optimizer="sgd")
    results = {f"shared_prompt_{name}": outcome(lambda call=call: call(packs, batch_size=1,
                                                                       verbose=0))
               for name, call in (("fit", plain.fit), ("evaluate", plain.evaluate),
                                  ("predict", plain.predict))}
    shared = tfpack.models.PreferenceModel(policy, loss="simpo", share_prompt=True)
    shared.compile(optimizer="sgd")
    results["shared_prompt_model_fit"] = outcome(lambda: shared.fit(packs, batch_size=1,
                                                                    verbose=0))
    return results


def positions():
    model = tfpack.models.TokenClassifier(encoder(), num_classes=3, dropout=0.0)
    ids = np.array([[2, 5, 7, 9, 3, 4, 6, 8]] * 2, np.int32)
    x = {"input_ids": ids, "sequence_ids": np.ones_like(ids),
         "position_ids": np.tile(np.arange(8, dtype=np.int32), (2, 1)),
         "token_type_ids": np.zeros_like(ids), "labels": np.zeros_like(ids)}
    x["position_ids"][1, 7] = 9
    model.compile(optimizer="sgd")
    results = {f"positions_{name}": outcome(lambda call=call: call(x, batch_size=2, verbose=0))
               for name, call in (("fit", model.fit), ("evaluate", model.evaluate),
                                  ("predict", model.predict))}
    keras.utils.set_random_seed(0)
    policy = tfpack.models.CausalLM(tfpack.models.DecoderBackbone(
        vocabulary_size=20, num_layers=1, hidden_dim=8, num_heads=2, intermediate_dim=16,
        position_embedding="learned", max_sequence_length=8))
    pairs = tfpack.models.PreferenceModel(policy, loss="simpo")
    pairs.compile(optimizer="sgd")
    packs = pack_examples([preference_pair([1, 2, 3], [4], [5, 6, 7, 8, 9, 10])],
                          max_length=16, max_sequences_per_pack=2)
    results["pair_positions_fit"] = outcome(lambda: pairs.fit(packs, batch_size=1, verbose=0))
    return results


if __name__ == "__main__":
    print(json.dumps({**token_tags(), **sequence_labels(), **shared_prompts(), **positions()}))
