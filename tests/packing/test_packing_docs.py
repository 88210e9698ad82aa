"""The Python snippets of docs/packing.md run as written."""

import pathlib
import re

import pytest

from tfpack.packing.algorithms import base

GUIDE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "packing.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.S) if GUIDE.exists() else []


@pytest.mark.skipif(not SNIPPETS, reason="docs/packing.md not found")
def test_guide_snippets_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = dict(base._REGISTRY)
    try:
        for number, snippet in enumerate(SNIPPETS):
            exec(compile(snippet.replace("/tmp/", f"{tmp_path}/"), f"docs/packing.md snippet {number}", "exec"), {})
    finally:
        base._REGISTRY.clear()
        base._REGISTRY.update(before)
