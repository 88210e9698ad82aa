"""`SpillReader.take`: the runs pass 2 reads back from the spill, with positioned reads.

Exact against slices of the values written (any runs: empty, repeated,
overlapping, adjacent ones that the compiled reader merges into one read),
and a spill file cut short is one `TfpackError` naming it, never values
read past its end.
"""

import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tfpack.engines.spill import Spill
from tfpack.errors import TfpackError


def _spill(folder, batches):
    spill = Spill(str(folder))
    for batch in batches:
        spill.append(batch)
    spill.close()
    return spill


@settings(max_examples=40, deadline=None)
@given(data=st.data(), size=st.integers(0, 300), dtype=st.sampled_from([np.int32, np.float32]))
def test_take_is_the_runs_sliced_back_to_back(tmp_path_factory, data, size, dtype):
    values = np.arange(size, dtype=np.int64).astype(dtype) * 3 + 1
    parts = data.draw(st.integers(1, 4))  # appended in batches, as the scan hands them over
    cuts = sorted(data.draw(st.lists(st.integers(0, size), min_size=parts - 1,
                                     max_size=parts - 1)))
    spill = _spill(tmp_path_factory.mktemp("spill"),
                   [{"f": part} for part in np.split(values, cuts)])
    runs = []
    for _ in range(data.draw(st.integers(0, 12))):
        start = data.draw(st.integers(0, size))
        if runs and data.draw(st.booleans()):  # adjacent to the previous run: one read
            start = min(size, runs[-1][0] + runs[-1][1])
        runs.append((start, data.draw(st.integers(0, size - start))))
    starts = np.array([s for s, _ in runs], np.int64)
    lengths = np.array([n for _, n in runs], np.int64)
    expected = (np.concatenate([values[s:s + n] for s, n in runs]) if runs
                else np.zeros(0, dtype))
    with spill.reader() as reader:
        taken = reader.take("f", starts, lengths)
        assert taken.dtype == dtype and taken.tolist() == expected.tolist()
        ones = [s for s, _ in runs if s < size]  # one value each (runs=None)
        assert reader.take("f", np.array(ones, np.int64)).tolist() == values[ones].tolist()


def test_take_of_adjacent_runs_reads_them_in_order(tmp_path):
    spill = _spill(tmp_path, [{"f": np.array([10, 11, 12, 13, 14, 15], np.int32)}])
    with spill.reader() as reader:
        assert reader.take("f", [1, 3, 4, 0, 1], [2, 1, 2, 1, 0]).tolist() == [
            11, 12, 13, 14, 15, 10]
        assert reader.take("f", [5, 2], None).tolist() == [15, 12]
        assert "f" in reader and "g" not in reader


@pytest.mark.parametrize("kept", [0, 1, 9, 23])  # bytes left of 24: cut inside a value too
def test_a_spill_file_cut_short_is_one_error_naming_it(tmp_path, kept):
    spill = _spill(tmp_path, [{"f": np.arange(6, dtype=np.int32)}])
    os.truncate(tmp_path / "f.values", kept)
    with spill.reader() as reader:
        assert reader.take("f", [0], [kept // 4]).tolist() == list(range(kept // 4))
        with pytest.raises(TfpackError, match=r"must stay whole.*Received: file=.*f\.values' "
                                              rf"ends before its runs \({kept} of 24 bytes"):
            reader.take("f", [0], [6])


def test_runs_outside_the_output_or_negative_are_refused(tmp_path):
    from tfpack.formats.compiled import wire

    spill = _spill(tmp_path, [{"f": np.arange(6, dtype=np.int32)}])
    fd = os.open(tmp_path / "f.values", os.O_RDONLY)
    try:
        out = np.empty(2, np.int32)
        for starts, runs in (([0], [3]), ([-1], [1]), ([0], [-1])):
            with pytest.raises(ValueError, match="read_runs"):
                wire.read_runs(fd, 4, np.array(starts, np.int64), np.array(runs, np.int64), out)
        assert wire.read_runs(fd, 4, np.array([4], np.int64), np.array([2], np.int64), out) == 8
        assert out.tolist() == [4, 5]
    finally:
        os.close(fd)
    with spill.reader() as reader:
        assert reader.take("f", [], []).size == 0
