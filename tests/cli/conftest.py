"""Fixtures shared by the command-line tests."""

import pytest


@pytest.fixture
def histogram_file(tmp_path):
    path = tmp_path / "lengths.txt"
    # Max length 8: two 6s, three 4s, four 2s.
    path.write_text("# tiny\n0\n4\n0\n3\n0\n2\n0\n0\n")
    return path
