"""Damaged bytes, drawn: the campaign's one way to break a record (hypothesis).

Example:

>>> from hypothesis import given
>>> @given(damaged(b"abcdef"))
... def test_it(record):
...     assert isinstance(record, bytes)
>>> test_it()
"""

from __future__ import annotations

from hypothesis import strategies as st

__all__ = ["damaged"]


@st.composite
def damaged(draw, record: bytes, *, most: int = 3) -> bytes:
    """``record`` with 1 to ``most`` damages: a bit flipped, the rest cut, or a byte inserted."""
    record = bytearray(record)
    for _ in range(draw(st.integers(1, most))):
        how = draw(st.sampled_from(["flip", "cut", "insert"]))
        at = draw(st.integers(0, max(len(record) - 1, 0)))
        if how == "flip" and record:
            record[at] ^= 1 << draw(st.integers(0, 7))
        elif how == "cut":
            del record[at:]
        else:
            record[at:at] = bytes([draw(st.integers(0, 255))])
    return bytes(record)
