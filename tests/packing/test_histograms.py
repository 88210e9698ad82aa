import numpy as np
import pytest

from tfpack import datasets
from tfpack.errors import TfpackError
from tfpack.packing import histogram, read_histogram
from tfpack.packing.histograms import MAX_LENGTH_LIMIT, validate_max_length


def test_histogram_counts_each_length():
    counts = histogram(np.array([3, 1, 3, 4]), max_length=4)
    assert counts.dtype == np.int64
    assert counts.tolist() == [1, 0, 2, 1]


def test_histogram_of_no_lengths_is_all_zero():
    assert histogram([], max_length=3).tolist() == [0, 0, 0]


@pytest.mark.parametrize(
    "lengths, pattern",
    [
        ([1, 5], r"between 1 and max_length=4.*Received: lengths\[1\]=5"),
        ([2, 0], r"between 1 and max_length=4.*Received: lengths\[1\]=0"),
        ([-3], r"Received: lengths\[0\]=-3"),
        ([1.5], r"must hold integers"),
        ([[1, 2]], r"1-D.*shape \(1, 2\)"),
    ],
)
def test_histogram_rejects_bad_lengths(lengths, pattern):
    with pytest.raises(TfpackError, match=pattern):
        histogram(lengths, max_length=4)


@pytest.mark.parametrize("max_length", [0, -1, 2.5, True])
def test_histogram_rejects_bad_max_length(max_length):
    with pytest.raises(TfpackError, match=r"`max_length` must be a positive integer. Received: max_length="):
        histogram([1], max_length=max_length)


@pytest.mark.parametrize("max_length", [MAX_LENGTH_LIMIT + 1, 2**40, 99999999999999999999])
def test_a_max_length_no_histogram_can_hold_is_refused(max_length):
    with pytest.raises(TfpackError, match=r"`max_length` must be at most 1,048,576 tokens"):
        histogram([1], max_length=max_length)
    assert validate_max_length(MAX_LENGTH_LIMIT) == MAX_LENGTH_LIMIT


def test_read_text_histogram_skips_comments_and_blank_lines(tmp_path):
    path = tmp_path / "h.txt"
    path.write_text("# header\n0\n\n2  # twos\n1\n")
    assert read_histogram(path).tolist() == [0, 2, 1]


def test_read_text_histogram_from_a_windows_editor(tmp_path):
    # A UTF-8 byte-order mark first, CRLF line ends, a no-break space after a count.
    path = tmp_path / "lengths.txt"
    path.write_bytes(b"\xef\xbb\xbf0\r\n2\xc2\xa0\r\n1\r\n")
    assert read_histogram(path).tolist() == [0, 2, 1]


def test_read_npy_histogram(tmp_path):
    path = tmp_path / "h.npy"
    np.save(path, np.array([4, 0, 1]))
    counts = read_histogram(str(path))
    assert counts.dtype == np.int64 and counts.tolist() == [4, 0, 1]


@pytest.mark.parametrize(
    "text, pattern",
    [
        ("1\nabc\n", r"one integer count.*line 2 .*'abc'"),
        ("# nothing\n", r"at least one count"),
        ("1\n-2\n", r"non-negative. Received: histogram\[1\]=-2"),
    ],
)
def test_read_histogram_rejects_corrupt_text(tmp_path, text, pattern):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(TfpackError, match=pattern):
        read_histogram(path)


def test_read_histogram_rejects_bad_npy(tmp_path):
    path = tmp_path / "bad.npy"
    np.save(path, np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(TfpackError, match=r"1-D array of counts.*shape \(2, 2\)"):
        read_histogram(path)
    path.write_bytes(b"not numpy")
    with pytest.raises(TfpackError, match=r"\.npy histogram file"):
        read_histogram(path)


def test_read_histogram_missing_file(tmp_path):
    with pytest.raises(TfpackError, match=r"`path` must be a path to an existing regular file.*Received: path=.*missing.txt"):
        read_histogram(tmp_path / "missing.txt")


def test_bundled_wikipedia_histogram_is_read_by_the_same_reader():
    counts = datasets.histogram("wikipedia_512")
    assert counts.shape == (512,) and counts.dtype == np.int64
    assert int(counts.sum()) == 16_279_552
    assert np.array_equal(counts, read_histogram(datasets.histogram_path("wikipedia_512")))


def test_read_histogram_rejects_binary_text(tmp_path):
    path = tmp_path / "h.txt"
    path.write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(TfpackError, match=r"readable text \(or .npy\). Received: path="):
        read_histogram(path)
