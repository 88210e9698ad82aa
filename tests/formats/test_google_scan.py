"""The compiled scan of Google records (`validation.google_scan`) against TensorFlow's parse
and `validation.google_problems` on generated records, valid, invalid and damaged: where the
compiled scan decides a record, it decides it as TensorFlow does (code, lengths, values)."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.faults.damage import damaged
from tfpack.formats import validation
from tfpack.formats.records import _google_check, google_example

INT64 = st.integers(-2**63, 2**63 - 1)
NEAR_INT32 = st.sampled_from([-1, 0, 1, 2**31 - 1, 2**31, -2**31, -2**31 - 1, 2**40])


@st.composite
def google_features(draw):
    """``(features, kind)``: feature values of one record, mostly valid, with the rules' edges
    drawn in; ``kind``: a feature has the other kind (float/int), which TensorFlow refuses."""
    n = draw(st.integers(0, 12))
    tokens = draw(st.integers(0, n))
    ids = draw(st.lists(st.one_of(st.integers(0, 40000), NEAR_INT32), min_size=n, max_size=n))
    mask = [1] * tokens + [0] * (n - tokens)
    if draw(st.integers(0, 5)) == 0 and n:
        mask[draw(st.integers(0, n - 1))] = draw(st.sampled_from([0, 1, 2, -1]))
    segments = draw(st.lists(st.one_of(st.integers(0, 1), NEAR_INT32), min_size=n, max_size=n))
    m = draw(st.integers(0, 5))
    weights = draw(st.lists(st.one_of(st.just(1.0), st.just(0.0), st.sampled_from(
        [float("nan"), float("inf"), -float("inf"), -1.0, -0.0, 0.5, 1e-40])),
        min_size=m, max_size=m))
    positions = draw(st.lists(st.one_of(st.integers(0, tokens), NEAR_INT32),  # tokens: outside
                              min_size=m, max_size=m))
    masked = draw(st.lists(st.one_of(st.integers(0, 40000), NEAR_INT32), min_size=m,
                           max_size=m))
    features = {"input_ids": ids, "input_mask": mask, "segment_ids": segments,
                "masked_lm_positions": positions, "masked_lm_ids": masked,
                "masked_lm_weights": weights,
                "next_sentence_labels": draw(st.lists(st.one_of(st.integers(0, 1), NEAR_INT32),
                                                      min_size=1, max_size=1))}
    kind = False
    for name in draw(st.sets(st.sampled_from(sorted(features)), max_size=1)):
        change = draw(st.sampled_from(["drop", "resize", "kind"]))
        kind = change == "kind"
        if change == "drop":
            del features[name]
        elif change == "resize":
            features[name] = features[name] + features[name][:1] + [
                0.0 if name == "masked_lm_weights" else 0]
        else:
            features[name] = [float(v) for v in features[name]] if name != "masked_lm_weights" \
                else [int(v) for v in features[name] if np.isfinite(v)]
    return features, kind


def _record(features) -> bytes:
    feature = {n: tf.train.Feature(float_list=tf.train.FloatList(value=v))
               if v and isinstance(v[0], float) or (not v and n == "masked_lm_weights")
               else tf.train.Feature(int64_list=tf.train.Int64List(value=v))
               for n, v in features.items()}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _tensorflow(record: bytes):
    """TensorFlow's verdict: ``None`` when it cannot parse the record, else its results."""
    try:
        codes, lengths, predictions = _google_check(None)(tf.constant([record]))
    except (tf.errors.InvalidArgumentError, UnicodeDecodeError):  # a key not UTF-8: TF's message
        return None
    values = []
    if int(codes[0]) == 0:  # the values the scan keeps
        values = [v.numpy().tolist() for v in _google_check(None, values=True)(
            tf.constant([record]))[3:]]
    return int(codes[0]), int(lengths[0]), int(predictions[0]), values


def _compare(record: bytes) -> str:
    fast = validation.google_scan([record])
    expected = _tensorflow(record)
    if fast is None:
        return "left to TensorFlow"
    assert expected is not None, f"the compiled scan decided {record!r}, TensorFlow cannot parse it"
    codes, lengths, predictions, kept = fast
    code = int(codes[0])
    assert code == expected[0], (validation.RULES[code], validation.RULES[expected[0]])
    if code == 0:
        assert (int(lengths[0]), int(predictions[0])) == expected[1:3]
        assert [k.tolist() for k in kept] == expected[3]
    return "decided"


SUBNORMAL = 1e-40  # TensorFlow flushes it to zero: not a real prediction's weight.


@settings(max_examples=300, deadline=None)
@given(google_features())
@example(({"input_ids": [0, 0], "input_mask": [1, 0], "segment_ids": [0, 0],
           "masked_lm_positions": [0], "masked_lm_ids": [0], "masked_lm_weights": [SUBNORMAL],
           "next_sentence_labels": [0]}, False))
@example(({"input_ids": [0, 0], "input_mask": [1, 0], "segment_ids": [0, 0],
           "masked_lm_positions": [0, 0, 1], "masked_lm_ids": [0, 0, 0],
           "masked_lm_weights": [1.0, 1.0, SUBNORMAL], "next_sentence_labels": [0]}, False))
def test_compiled_scan_decides_records_as_tensorflow(drawn):
    features, kind = drawn
    verdict = _compare(_record(features))
    # Every well-formed record is decided here (packed values, no unknown fields), except
    # a feature of the wrong kind, which TensorFlow refuses with its own error.
    assert verdict == ("left to TensorFlow" if kind and any(features.values()) else "decided") \
        or kind


@settings(max_examples=200, deadline=None)
@given(google_features(), st.data())
def test_compiled_scan_on_damaged_bytes_decides_as_tensorflow_or_defers(drawn, data):
    _compare(data.draw(damaged(_record(drawn[0]))))


def test_real_records_are_decided_and_a_batch_with_a_deferred_one_is_left_whole():
    good = google_example([101, 7, 102], [0, 0, 0], [1], [8], 0, max_seq_length=8,
                          max_predictions_per_seq=2)
    assert _compare(good) == "decided"
    unpacked = tf.train.Example()
    unpacked.ParseFromString(good)
    # Values not packed: valid protobuf, which this scanner leaves to TensorFlow.
    values = list(unpacked.features.feature["input_ids"].int64_list.value)
    raw = b"".join(bytes([0x08]) + bytes([v]) if v < 128 else b"" for v in values)
    assert validation.google_scan([good, good[:-3]]) is None
    assert validation.google_scan([good, good])[0].tolist() == [0, 0]
    assert raw  # the unpacked encoding exists for these values
    with pytest.raises(TypeError, match="bytes"):
        validation.google_scan(["not bytes"])


_VALID = {"input_ids": [101, 7, 8, 102, 0], "input_mask": [1, 1, 1, 1, 0],
          "segment_ids": [0, 0, 1, 1, 0], "masked_lm_positions": [1, 3, 0],
          "masked_lm_ids": [7, 102, 0], "masked_lm_weights": [1.0, 1.0, 0.0],
          "next_sentence_labels": [1]}


@pytest.mark.parametrize("change, rule", [
    ({}, None),
    ({"input_ids": [], "input_mask": [], "segment_ids": []}, "input_ids_present"),
    ({"input_mask": [1, 1, 1, 1]}, "input_mask_length"),
    ({"segment_ids": [0, 0, 1, 1]}, "segment_ids_length"),
    ({"input_mask": [1, 1, 2, 1, 0]}, "input_mask_binary"),
    ({"input_mask": [1, 0, 1, 1, 0]}, "input_mask_prefix"),
    ({"input_mask": [0, 0, 0, 0, 0]}, "input_mask_prefix"),
    ({"input_ids": [101, -7, 8, 102, 0]}, "input_ids_int32"),
    ({"input_ids": [101, 2**31, 8, 102, 0]}, "input_ids_int32"),
    ({"segment_ids": [0, 0, 1, 1, 2**31]}, "segment_ids_int32"),
    ({"masked_lm_ids": [7, 102]}, "masked_lm_lengths"),
    ({"masked_lm_weights": [1.0, float("nan"), 0.0]}, "masked_lm_weights_valid"),
    ({"masked_lm_weights": [1.0, -0.5, 0.0]}, "masked_lm_weights_valid"),
    ({"masked_lm_weights": [1.0, 0.0, 1.0]}, "real_predictions_first"),
    ({"masked_lm_ids": [7, 2**31, 0]}, "masked_lm_ids_int32"),
    ({"masked_lm_ids": [7, 102, -1]}, None),  # a padding slot's id is not checked
    ({"next_sentence_labels": [1, 0]}, "next_sentence_label_single"),
    ({"next_sentence_labels": [-2**31 - 1]}, "next_sentence_label_single"),
    ({"masked_lm_positions": [1, 4, 0]}, "masked_lm_positions_inside"),  # 4 = length
    ({"masked_lm_positions": [1, -1, 0]}, "masked_lm_positions_inside"),
    ({"masked_lm_positions": [1, 3, 9]}, None),  # a padding slot's position is not checked
])
def test_each_rule_by_hand(change, rule):
    features = {**_VALID, **change}
    codes, lengths, predictions, kept = validation.google_scan([_record(features)])
    assert validation.RULES[int(codes[0])] == (rule and validation.RULES[validation.CODE[rule]])
    if rule is None:
        assert (lengths.tolist(), predictions.tolist()) == ([4], [2])
        assert [k.tolist() for k in kept] == [[101, 7, 8, 102], [0, 0, 1, 1], [1, 3], [7, 102],
                                              [1.0, 1.0], [1]]
    assert _compare(_record(features)) == "decided"
