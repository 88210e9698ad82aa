"""`Spill` and `SpillReader`: examples pass 2 reads back from the spill, one positioned read each.

Exact against the examples appended (any batches, ragged features of any
runs, empty ones included, int32 and float32, examples asked in any order,
repeated, adjacent ones that the compiled reader merges into one read); a
spill file cut short is one `TfpackError` naming it, never values read past
its end; a full disk is the OSError naming it; the compiled helpers refuse
what does not fit.
"""

import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tfpack.engines.spill import Spill
from tfpack.errors import TfpackError
from tfpack.formats.compiled import wire


@settings(max_examples=40, deadline=None)
@given(data=st.data(), count=st.integers(0, 40))
def test_read_gives_each_example_asked_exactly(tmp_path_factory, data, count):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    tokens = rng.integers(0, 6, count)
    preds = rng.integers(0, 3, count)
    examples = [{"ids": rng.integers(-2**31, 2**31, n).astype(np.int32),
                 "weights": rng.random(m).astype(np.float32),
                 "label": np.array([i], np.int32)} for i, (n, m) in enumerate(zip(tokens, preds))]
    spill = Spill(str(tmp_path_factory.mktemp("spill")))
    cuts = sorted(data.draw(st.lists(st.integers(0, count), max_size=3)))
    for a, b in zip([0] + cuts, cuts + [count]):  # batches as the scan hands them over
        if b > a or count == 0:
            batch = examples[a:b]
            spill.append({n: np.concatenate([e[n] for e in batch] or [np.zeros(0, e_type)])
                          for n, e_type in (("ids", np.int32), ("weights", np.float32),
                                            ("label", np.int32))},
                         runs={"ids": tokens[a:b], "weights": preds[a:b]})
    spill.close()
    asked = []
    for _ in range(data.draw(st.integers(0, 12)) if count else 0):
        i = data.draw(st.integers(0, count - 1))
        if asked and data.draw(st.booleans()):  # the next example in the file: one read
            i = min(count - 1, asked[-1] + 1)
        asked.append(i)
    asked = np.array(asked, np.int64)
    starts = {"ids": (np.cumsum(tokens) - tokens)[asked],
              "weights": (np.cumsum(preds) - preds)[asked], "label": asked}
    if count == 0:  # nothing appended: nothing spilled, nothing to read
        return
    with spill.reader() as reader:
        read = reader.read(starts, {"ids": tokens[asked], "weights": preds[asked]})
    runs = {"ids": tokens, "weights": preds, "label": np.ones(count, np.int64)}
    for name, (values, where) in read.items():
        assert values.dtype == (np.float32 if name == "weights" else np.int32)
        for j, i in enumerate(asked):
            got = values[where[j]:where[j] + runs[name][i]]
            assert got.tobytes() == examples[i][name].tobytes(), (name, i)


def _small(folder):
    spill = Spill(str(folder))
    spill.append({"ids": np.arange(10, 16, dtype=np.int32), "label": np.array([0, 1], np.int32)},
                 runs={"ids": np.array([4, 2])})
    spill.close()
    return spill


def test_examples_lie_together_in_the_file(tmp_path):
    _small(tmp_path)  # example 0: 4 ids then its label; example 1: 2 ids then its label
    assert np.fromfile(tmp_path / "examples.values", np.int32).tolist() == [
        10, 11, 12, 13, 0, 14, 15, 1]
    with Spill(str(tmp_path)).reader() as reader:
        assert "ids" not in reader  # a reader knows the features its spill was given


@pytest.mark.parametrize("kept", [0, 4, 17, 28])  # bytes left of 32: cut inside a value too
def test_a_spill_cut_short_is_one_error_naming_it(tmp_path, kept):
    spill = _small(tmp_path)
    os.truncate(tmp_path / "examples.values", kept)
    with spill.reader() as reader:
        if kept >= 20:  # example 0 (20 bytes) is whole
            values, where = reader.read({"ids": np.array([0]), "label": np.array([0])},
                                        {"ids": np.array([4])})["ids"]
            assert values[:4].tolist() == [10, 11, 12, 13]
        with pytest.raises(TfpackError, match=r"must stay whole.*Received: file=.*"
                                              r"examples\.values' ends before its examples "
                                              rf"\({kept} of 32 bytes read\)"):
            reader.read({"ids": np.array([0, 4]), "label": np.array([0, 1])},
                        {"ids": np.array([4, 2])})


def test_read_must_name_every_feature_and_spills_hold_4_byte_values(tmp_path):
    spill = _small(tmp_path)
    with spill.reader() as reader, pytest.raises(ValueError, match="must name every spilled"):
        reader.read({"ids": np.array([0])}, {"ids": np.array([4])})
    with pytest.raises(ValueError, match="4-byte values"):
        Spill(str(tmp_path)).append({"ids": np.arange(3, dtype=np.int64)})


def test_compiled_helpers_refuse_what_does_not_fit(tmp_path):
    path = tmp_path / "f"
    np.arange(6, dtype=np.int32).tofile(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        out = np.empty(2, np.int32)
        for starts, runs in (([0], [3]), ([-1], [1]), ([0], [-1])):
            with pytest.raises(ValueError, match="read_runs"):
                wire.read_runs(fd, 4, np.array(starts, np.int64), np.array(runs, np.int64), out)
        assert wire.read_runs(fd, 4, np.array([4], np.int64), np.array([2], np.int64), out) == 8
        assert out.tolist() == [4, 5]
    finally:
        os.close(fd)
    ids, labels = np.arange(3, dtype=np.int32), np.arange(2, dtype=np.int32)
    fd = os.open(tmp_path / "g", os.O_WRONLY | os.O_CREAT)
    try:
        for runs in ([1, 1], [2, 2], [1, -1], [2, 1, 0]):
            with pytest.raises(ValueError, match="write_interleaved"):
                wire.write_interleaved(fd, [ids, labels], [np.array(runs, np.int64), None])
        assert wire.write_interleaved(fd, [ids, labels], [np.array([2, 1], np.int64), None]) == 20
    finally:
        os.close(fd)
    assert np.fromfile(tmp_path / "g", np.int32).tolist() == [0, 1, 0, 2, 1]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_full_disk_is_the_oserror_naming_it(tmp_path):
    spill = Spill(str(tmp_path))
    spill.append({"ids": np.arange(3, dtype=np.int32)})  # opens the file, then: a full disk
    full = os.open("/dev/full", os.O_WRONLY)
    os.dup2(full, spill._fd)
    os.close(full)
    with pytest.raises(OSError, match="No space left"):
        spill.append({"ids": np.arange(3, dtype=np.int32)})
    spill.close()
