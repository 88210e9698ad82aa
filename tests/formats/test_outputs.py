"""The one directory swap behind `tfpack pack` and `tfpack export` (`outputs.swap_in`)."""

import os

import pytest

from tfpack.formats import outputs


def _folder(path, name):
    os.makedirs(path)
    (path / name).write_text(name)
    return str(path)


@pytest.mark.parametrize("exchange", [True, False])
def test_swap_in_replaces_a_directory_whole_with_or_without_the_atomic_exchange(
        tmp_path, monkeypatch, exchange):
    if not exchange:  # the two-rename fallback, old one aside until the new one is in
        monkeypatch.setattr(outputs, "_exchange", lambda a, b: False)
    old, new = _folder(tmp_path / "out", "old.txt"), _folder(tmp_path / "new", "new.txt")
    outputs.swap_in(new, old, aside=str(tmp_path / ".aside"))
    assert os.listdir(old) == ["new.txt"] and os.listdir(tmp_path) == ["out"]
    # Onto a missing or an empty directory: one rename.
    empty = tmp_path / "empty"
    empty.mkdir()
    outputs.swap_in(_folder(tmp_path / "n2", "x"), str(empty), aside=str(tmp_path / ".a"))
    assert os.listdir(empty) == ["x"]
