"""Every record checked in one place: `tfpack pack`, the readers and `tfpack.data.pack`."""

import os
import tempfile

import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tfpack
from tfpack.cli import main
from tfpack.errors import TfpackError

from packed_checks import dataset_from_examples

SEQ, PRED = 16, 4


def example(n, m, seed):
    """A valid Google example: ``n`` tokens, ``m`` of ``PRED`` prediction slots used."""
    ids = [1000 + (seed * 7 + i) % 900 for i in range(n)]
    positions = list(range(1, m + 1))
    return tfpack.data.google_example(ids, [0] * n, positions, [ids[p] for p in positions],
                                      seed % 2, max_seq_length=SEQ, max_predictions_per_seq=PRED)


def set_values(feature, values, kind="int64_list"):
    feature.Clear()
    getattr(feature, kind).value.extend(values)


def corrupt(record: bytes, kind: str) -> bytes:
    """``record`` with one corruption of the issue's list (and the rules' others)."""
    ex = tf.train.Example.FromString(record)
    f = ex.features.feature
    ints = lambda name: list(f[name].int64_list.value)  # noqa: E731
    n = sum(ints("input_mask"))
    if kind == "missing input_ids":
        del f["input_ids"]
    elif kind == "input_ids shorter than input_mask":
        set_values(f["input_ids"], ints("input_ids")[:-1])
    elif kind == "missing next_sentence_labels":
        del f["next_sentence_labels"]
    elif kind == "empty next_sentence_labels":
        set_values(f["next_sentence_labels"], [])
    elif kind == "missing masked_lm_weights":
        del f["masked_lm_weights"]
    elif kind == "a 0-weight slot kept, a real one dropped":
        weights = list(f["masked_lm_weights"].float_list.value)
        set_values(f["masked_lm_weights"], [0.0] + weights[1:], "float_list")
    elif kind == "input_mask value 2":
        set_values(f["input_mask"], [2] + ints("input_mask")[1:])
    elif kind == "input_mask not a prefix":
        mask = ints("input_mask")
        mask[1] = 0
        set_values(f["input_mask"], mask)
    elif kind == "ids stored as floats":
        set_values(f["input_ids"], [float(v) for v in ints("input_ids")], "float_list")
    elif kind == "negative masked_lm_position":
        set_values(f["masked_lm_positions"], [-1] + ints("masked_lm_positions")[1:])
    elif kind == "masked_lm_position at the length":
        set_values(f["masked_lm_positions"], [n] + ints("masked_lm_positions")[1:])
    elif kind == "input_ids outside int32":
        set_values(f["input_ids"], [2**31] + ints("input_ids")[1:])
    else:
        raise AssertionError(kind)
    return ex.SerializeToString()


# What the one stderr line must say about each corruption.
SAYS = {
    "missing input_ids": r"input_ids",
    "input_ids shorter than input_mask": r"`input_mask` with one value per `input_ids` value",
    "missing next_sentence_labels": r"next_sentence_labels",
    "empty next_sentence_labels": r"`next_sentence_labels` with exactly one value",
    "missing masked_lm_weights": r"masked_lm_weights",
    "a 0-weight slot kept, a real one dropped": r"real predictions \(weight > 0\) before",
    "input_mask value 2": r"`input_mask` of 0s and 1s only",
    "input_mask not a prefix": r"`input_mask` a prefix of 1s",
    "ids stored as floats": r"`input_ids` stored as int64_list.* as float_list",
    "negative masked_lm_position": r"inside the example: 0 <= position < length",
    "masked_lm_position at the length": r"inside the example: 0 <= position < length",
    "input_ids outside int32": r"`input_ids` inside \[0, 2\*\*31\)",
}
FILES = {"a.tfrecord": 3, "b.tfrecord": 4}


@pytest.mark.slow
@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(file=st.sampled_from(sorted(FILES)), data=st.data(), kind=st.sampled_from(sorted(SAYS)))
def test_pack_names_the_file_and_record_of_any_corruption(capsys, file, data, kind):
    index = data.draw(st.integers(0, FILES[file] - 1), label="index")
    with tempfile.TemporaryDirectory() as folder:
        for name, count in FILES.items():
            with tf.io.TFRecordWriter(os.path.join(folder, name)) as writer:
                for i in range(count):
                    record = example(6 + i, 2 + i % 2, seed=i)
                    writer.write(corrupt(record, kind) if (name, i) == (file, index) else record)
        out = os.path.join(folder, "out")
        capsys.readouterr()
        status = main(["pack", "--input", os.path.join(folder, "*.tfrecord"), "--output", out,
                       "--max-length", "32", "--max-sequences-per-pack", "2", "--algorithm", "ffd"])
        lines = capsys.readouterr().err.strip().splitlines()
        assert status == 2
        assert len(lines) == 1, lines
        path = os.path.join(folder, file)
        assert f"file={path!r}, record {index}" in lines[0]
        assert __import__("re").search(SAYS[kind], lines[0]), lines[0]
        assert not os.path.exists(os.path.join(out, "manifest.json"))


def test_google_reader_checks_every_record_when_called(tmp_path):
    path = tmp_path / "x.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        writer.write(example(6, 2, 0))
        writer.write(corrupt(example(6, 2, 1), "masked_lm_position at the length"))
    with pytest.raises(TfpackError, match=rf"0 <= position < length \(rule masked_lm_positions_inside\)\. Received: file='.*x\.tfrecord', "
                                          r"record 1: input_mask=.*masked_lm_positions=\[6, 2, 0, 0\]"):
        tfpack.data.read_google_records(str(path))


BAD_POSITIONS = [
    [{"input_ids": [1, 2, 3], "masked_lm_positions": [1], "masked_lm_ids": [2],
      "next_sentence_labels": 0},
     {"input_ids": [4, 5], "masked_lm_positions": [2], "masked_lm_ids": [9],
      "next_sentence_labels": 1}],
    [{"input_ids": [4, 5], "masked_lm_positions": [0], "masked_lm_ids": [9],
      "next_sentence_labels": 1},
     {"input_ids": [1, 2, 3], "masked_lm_positions": [-1], "masked_lm_ids": [2],
      "next_sentence_labels": 0}],
]


@pytest.mark.parametrize("window", [None, 2])
@pytest.mark.parametrize("examples", BAD_POSITIONS)
def test_masked_lm_positions_outside_their_example_are_refused(window, examples):
    packer = tfpack.data.pack(max_length=8, max_sequences_per_pack=2, max_predictions_per_pack=2,
                              window=window, algorithm="ffd")
    with pytest.raises(TfpackError) as error:
        list(dataset_from_examples(examples).apply(packer))
    message = str(error.value)
    assert __import__("re").fullmatch(
        r"Every record must have real `masked_lm_positions` inside the example: "
        r"0 <= position < length \(rule masked_lm_positions_inside\)\. Received: example 1.*",
        message), message
    assert "\n" not in message and "Traceback" not in message


def test_ids_outside_int32_are_refused_not_wrapped():
    ds = tf.data.Dataset.from_tensors({"input_ids": tf.constant([1, 2**31], tf.int64)})
    with pytest.raises(TfpackError, match=r"inside int32 .* Received: example 0"):
        list(ds.apply(tfpack.data.pack(max_length=8, max_sequences_per_pack=2)))


@pytest.mark.parametrize("kwargs, match", [
    ({"max_length": 2_000_000_000}, r"`max_length` must be at most 1,048,576 tokens"),
    ({"max_sequences_per_pack": 10**12}, r"`max_sequences_per_pack` must be at most max_length=8"),
    ({"max_predictions_per_pack": 9}, r"`max_predictions_per_pack` must be at most max_length=8"),
])
def test_absurd_sizes_fail_fast(kwargs, match):
    with pytest.raises(TfpackError, match=match):
        tfpack.data.pack(**{"max_length": 8, "max_sequences_per_pack": 2, **kwargs})


def test_streaming_pack_with_too_many_predictions_names_its_examples():
    examples = [{"input_ids": [1, 2, 3], "masked_lm_positions": [0, 1], "masked_lm_ids": [5, 6],
                 "next_sentence_labels": 0}] * 4
    packer = tfpack.data.pack(max_length=8, max_sequences_per_pack=2, max_predictions_per_pack=3,
                              window=2, algorithm="ffd", shuffle=False)
    with pytest.raises(TfpackError, match=r"^Every pack must hold at most "
                                          r"max_predictions_per_pack=3 .* \(examples \[[01], [01]\]\)"):
        list(dataset_from_examples(examples).apply(packer))



def test_pass_one_and_the_shard_builder_trace_once_not_per_file_or_shard(tmp_path, monkeypatch):
    """Tracing costs about 0.5 s a graph: per input file or per shard it would dominate.

    Each Python call of a wrapped function below is one trace.
    """
    import numpy as np

    from tfpack.formats import records, validation
    from tfpack.engines import shards

    traces = {"check": 0, "parse": 0, "assemble": 0}

    def counted(name, function):
        def traced(*args, **kwargs):
            traces[name] += 1
            return function(*args, **kwargs)
        return traced

    monkeypatch.setattr(validation, "google_problems",
                        counted("check", validation.google_problems))
    monkeypatch.setattr(shards, "parse_google_batch", counted("parse", shards.parse_google_batch))
    monkeypatch.setattr(shards, "assemble", counted("assemble", shards.assemble))
    # Traced again, counted, from here; these graphs are shared by a process's builders.
    for cached in (records._google_check, shards._parser, shards._assemble_function):
        cached.cache_clear()
    files = []
    for f, count in enumerate([3, 5, 1, 4]):  # other batch sizes, same graph
        files.append(str(tmp_path / f"in-{f}.tfrecord"))
        with tf.io.TFRecordWriter(files[-1]) as writer:
            for i in range(count):
                writer.write(example(3 + (f + i) % 10, 1 + i % 3, seed=f * 10 + i))
    try:
        compiled, _ = records.scan_google_records(files)  # decided by the compiled scan
        assert traces["check"] == 0
        # Every batch left to TensorFlow (as a batch with an undecided record is): one trace.
        monkeypatch.setattr(validation, "google_scan", lambda batch: None)
        lengths, _ = records.scan_google_records(files)
        records.scan_google_records(files[1:])
    finally:
        records._google_check.cache_clear()  # later tests trace the unwrapped check
    assert len(lengths) == 13 and lengths.tolist() == compiled.tolist()
    builder = shards.ShardBuilder(max_length=SEQ, max_sequences_per_pack=2, max_predictions=2 * PRED)
    again = shards.ShardBuilder(max_length=SEQ, max_sequences_per_pack=2,
                                max_predictions=2 * PRED)  # a second `tfpack pack` in a process
    try:
        for path in files:  # each file one shard of single-example packs
            n = sum(1 for _ in tf.data.TFRecordDataset(path))
            for each in (builder, again):
                assert sum(len(p["input_ids"]) for p in each.packs(
                    tf.data.TFRecordDataset(path), np.arange(n), np.arange(n + 1))) == n
    finally:  # later tests trace the unwrapped functions
        shards._parser.cache_clear()
        shards._assemble_function.cache_clear()
    assert traces == {"check": 1, "parse": 1, "assemble": 1}
