"""The README's tour runs as written: its Python blocks, in order, in one namespace."""

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_the_two_commands_and_a_tour():
    text = README.read_text()
    assert "make demo" in text and "make test" in text
    assert len(python_blocks()) >= 4


def test_readme_tour_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in python_blocks():
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102
    out = capsys.readouterr().out
    assert "99.88" in out  # the optimal plan's efficiency on Wikipedia-512, depth 3
    assert (tmp_path / "plan.json").is_file()
    assert namespace["result"].step == 4
    assert (tmp_path / "saved_models" / "tour" / "saved_model.pb").is_file()
