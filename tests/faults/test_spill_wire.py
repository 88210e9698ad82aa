"""The spill's compiled calls (`_wire.write_interleaved`, `_wire.read_runs`) handed what a
Python caller could: each answers exactly or raises one Python exception, never a
segfault, a hang or a read of other bytes than the ones asked for.

Found here: a start past ``2**63 / itemsize`` wrapped ``start * itemsize`` and
`read_runs` silently read the file's front (start ``2**62``, 4-byte items: offset 0).
"""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tfpack.formats.compiled import wire

INT64_MAX = 2**63 - 1
_FILE = bytes(range(251)) * 2  # 502 bytes, no two 4-byte items alike


@pytest.fixture(scope="module")
def spill_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("wire") / "examples.values"
    path.write_bytes(_FILE)
    fd = os.open(path, os.O_RDONLY)
    yield fd
    os.close(fd)


def _expected(starts, runs, itemsize, out_len):
    """What `read_runs` must do: ValueError, or the bytes of the runs up to the file's end."""
    if any(s < 0 or r < 0 or (s + r) * itemsize > INT64_MAX for s, r in zip(starts, runs)):
        return ValueError
    if sum(runs) * itemsize > out_len:
        return ValueError
    data = b""
    for s, r in zip(starts, runs):
        piece = _FILE[s * itemsize:(s + r) * itemsize]
        data += piece
        if len(piece) < r * itemsize:
            break
    return data


@pytest.mark.parametrize("start, itemsize", [
    (2**62, 4), (2**62 + 5, 4), (2**61 + 1, 8), (INT64_MAX // 4, 4), (INT64_MAX, 1),
    (INT64_MAX // 4 + 1, 4),
], ids=["2**62", "2**62+5", "2**61+1-of-8", "last-item", "last-byte", "past-the-last-item"])
def test_a_start_past_a_file_offset_is_refused_not_read_from_the_front(spill_file, start, itemsize):
    out = np.zeros(16, np.uint8)
    expected = _expected([start], [1], itemsize, out.nbytes)
    if expected is ValueError:
        with pytest.raises(ValueError, match="past a file offset"):
            wire.read_runs(spill_file, itemsize, np.array([start], np.int64), None, out)
        assert not out.any()
    else:
        assert wire.read_runs(spill_file, itemsize, np.array([start], np.int64), None, out) == 0


_starts = st.one_of(st.integers(0, 140), st.integers(-3, -1), st.integers(2**60, INT64_MAX),
                    st.sampled_from([2**62, 2**62 + 1, INT64_MAX // 4, INT64_MAX // 8 + 1]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(itemsize=st.sampled_from([1, 2, 4, 8, 3]),
       runs=st.lists(st.tuples(_starts, st.one_of(st.integers(0, 9), st.integers(2**61, INT64_MAX),
                                                  st.just(-1))), max_size=6),
       with_runs=st.booleans(), spare=st.integers(-8, 8))
def test_read_runs_reads_exactly_the_runs_or_raises(spill_file, itemsize, runs, with_runs, spare):
    starts = [s for s, _ in runs]
    counts = [r for _, r in runs] if with_runs else [1] * len(runs)
    total = sum(max(r, 0) for r in counts) if all(r < 2**40 for r in counts) else 64
    out = np.zeros(max(total * itemsize + spare, 0), np.uint8)
    expected = _expected(starts, counts, itemsize, out.nbytes)
    call = lambda: wire.read_runs(spill_file, itemsize, np.array(starts, np.int64).reshape(-1),
                                  np.array(counts, np.int64) if with_runs else None, out)
    if expected is ValueError:
        with pytest.raises(ValueError):
            call()
    else:
        got = call()
        assert bytes(out[:got]) == expected and got == len(expected)


def test_read_runs_refuses_what_is_not_a_spill_read(spill_file, tmp_path):
    out = np.zeros(8, np.int32)
    one = np.array([0], np.int64)
    for args, error in [
        ((12345, 4, one, None, out), OSError),                     # a closed descriptor
        ((-1, 4, one, None, out), OSError),
        ((spill_file, 0, one, None, out), ValueError),             # itemsize 0
        ((spill_file, 4, np.array([1.0]), None, out), ValueError),  # float starts: bits, refused
        ((spill_file, 4, np.array([0], np.int32), None, out), ValueError),
        ((spill_file, 4, np.arange(4)[::2], None, out), ValueError),  # not contiguous
        ((spill_file, 4, np.array([0, 1]), np.array([1]), out), ValueError),  # runs short
        ((spill_file, 4, one, None, b"read-only"), TypeError),
    ]:
        with pytest.raises(error):
            wire.read_runs(*args)
    r, w = os.pipe()
    try:
        with pytest.raises(OSError):  # a pipe: ESPIPE, not a wait for bytes that never come
            wire.read_runs(r, 4, one, None, out)
    finally:
        os.close(r), os.close(w)
    folder = os.open(tmp_path, os.O_RDONLY)
    try:
        with pytest.raises(OSError):
            wire.read_runs(folder, 4, one, None, out)
    finally:
        os.close(folder)


def test_write_interleaved_refuses_bad_runs_and_names_a_failed_write(tmp_path):
    src = np.arange(1, dtype=np.int32)
    fd = os.open(tmp_path / "w", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for runs in ([2**62, 2**62, 2**62, 2**62 + 1], [INT64_MAX, INT64_MAX, 3], [-1, 2]):
            with pytest.raises(ValueError):  # runs whose sum wraps to the source's items
                wire.write_interleaved(fd, [src], [np.array(runs, np.int64)])
        for sources, runs in [([src], [np.array([1.0])]), ([src], [np.array([1], np.int8)]),
                              ([b"abcde"], [None]), ([src, src], [None]),
                              ([src, np.arange(2, dtype=np.int32)], [None, None])]:
            with pytest.raises(ValueError):
                wire.write_interleaved(fd, sources, runs)
        with pytest.raises(TypeError):
            wire.write_interleaved(fd, (src,), [None])
        assert os.fstat(fd).st_size == 0  # nothing written by a refused call
        assert wire.write_interleaved(fd, [], []) == 0
    finally:
        os.close(fd)
    with pytest.raises(OSError):
        wire.write_interleaved(12345, [src], [None])
    full = os.open("/dev/full", os.O_WRONLY)
    try:
        with pytest.raises(OSError, match="No space"):
            wire.write_interleaved(full, [np.arange(5000, dtype=np.int32)], [None])
    finally:
        os.close(full)


def test_spill_reader_refuses_starts_whose_sum_wraps(tmp_path):
    """`SpillReader.read` adds every feature's start to find an example: starts of 2**62
    for four features summed to 2**64, wrapped in int64 to 0, and read example 0's values
    for an example that is not in the spill."""
    from tfpack.engines.spill import Spill

    spill = Spill(str(tmp_path))
    names = ["a", "b", "c", "d"]
    spill.append({name: np.arange(3, dtype=np.int32) + 10 * i for i, name in enumerate(names)})
    spill.close()
    with spill.reader() as reader:
        exact = reader.read({name: np.array([2]) for name in names}, {})
        assert [exact[name][0].tolist() for name in names][0] == [2, 12, 22, 32]
        with pytest.raises(ValueError, match="starts"):
            reader.read({name: np.array([2 ** 62]) for name in names}, {})
        with pytest.raises(ValueError, match="starts"):
            reader.read({name: np.array([-1, 0][i % 2:][:1]) for i, name in enumerate(names)}, {})


def test_float_starts_and_runs_are_refused_not_read_as_their_bits(spill_file, tmp_path):
    """float64 has int64's itemsize: [0.0] read item 0, [5e-324] (bits 1) item 1, silently."""
    out = np.zeros(8, np.int32)
    for starts, runs in [(np.array([0.0]), None), (np.array([5e-324]), None),
                         (np.array([0]), np.array([1.0]))]:
        with pytest.raises(ValueError, match="int64"):
            wire.read_runs(spill_file, 4, starts, runs, out)
    assert not out.any()
    fd = os.open(tmp_path / "w", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with pytest.raises(ValueError, match="int64"):
            wire.write_interleaved(fd, [np.arange(1, dtype=np.int32)], [np.array([5e-324])])
        assert os.fstat(fd).st_size == 0
    finally:
        os.close(fd)
    for ints in (np.array([1], np.int64), np.array([1], np.longlong), np.array([1], np.uint64)):
        assert wire.read_runs(spill_file, 4, ints, None, out) == 4  # every 8-byte integer
