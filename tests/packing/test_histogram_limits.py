"""Counts that would overflow int64 metrics are refused, not wrapped."""

import pytest

from tfpack.errors import TfpackError
from tfpack.packing.histograms import validate_histogram


@pytest.mark.parametrize("counts, match", [
    ([10**19, 1], r"counts must fit int64 .* Received: a count of"),
    ([2**62, 2**62, 1], r"must count at most 3074457345618258602 sequences for max_length=3, "
                        r"so that token counts fit int64. Received: 9223372036854775809"),
])
def test_counts_that_would_wrap_int64_are_refused(counts, match):
    with pytest.raises(TfpackError, match=match):
        validate_histogram(counts)


def test_the_largest_representable_histogram_is_accepted():
    assert validate_histogram([2**62 - 2, 1]).tolist() == [2**62 - 2, 1]  # 2 * (2**62 - 1) tokens
