"""Real (input, target) length pairs for `pair_planner.py`, counted offline on this machine.

Each corpus is a list of pairs of token counts (WordPiece, bert-base-uncased,
[CLS]/[SEP] included: `planners_corpora._count_tokens`), the input a long text
and the target its one-line summary, as a summarising encoder-decoder sees them:

- ``debian``: every installed Debian package's description (``/var/lib/dpkg/status``):
  the long description (input) and its synopsis, the first line (target);
- ``docstrings``: every docstring of the Python standard library (modules,
  classes, functions; ``Lib/**/*.py``, tests skipped) with a body: the body
  (input) and its first line (target);
- ``squad_like``: generated, not real: SQuAD-like question answering, the input
  a question and its paragraph, the target the answer (log-normal lengths with
  the medians of SQuAD 1.1 in WordPiece tokens: paragraph 140, question 12,
  answer 3).

Pairs are cached in ``benchmarks/data/pairs_<name>.txt`` (``input target`` a
line, under a header saying where they came from); delete a file to count again.
A corpus whose source is missing is skipped, not faked.
"""

from __future__ import annotations

import ast
import pathlib
import sysconfig

import numpy as np

from planners_corpora import DATA, _count_tokens
from results_file import write_results


def _debian() -> list[tuple[str, str]] | None:
    status = pathlib.Path("/var/lib/dpkg/status")
    if not status.exists():
        return None
    pairs = []
    for stanza in status.read_text(encoding="utf-8", errors="replace").split("\n\n"):
        lines = stanza.splitlines()
        for i, line in enumerate(lines):
            if line.startswith("Description:"):
                body = []
                for more in lines[i + 1:]:
                    if not more.startswith(" "):
                        break
                    body.append("" if more.strip() == "." else more.strip())
                if any(body):
                    pairs.append(("\n".join(body), line[len("Description:"):].strip()))
    return pairs


def _docstrings() -> list[tuple[str, str]]:
    pairs = []
    for path in sorted(pathlib.Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
        if "site-packages" in path.parts or "test" in path.parts:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc and "\n" in doc.strip():
                    first, body = doc.strip().split("\n", 1)
                    if body.strip():
                        pairs.append((body, first))
    return pairs


SOURCES = {"debian": _debian, "docstrings": _docstrings}


def pairs(name: str, seed: int = 0) -> np.ndarray | None:
    """int64 ``[n, 2]`` (input, target) tokens of corpus ``name`` (cached), or ``None`` if absent."""
    if name == "squad_like":
        rng = np.random.default_rng(seed)
        n = 100_000
        paragraph = np.exp(rng.normal(np.log(140), 0.45, n)).astype(np.int64) + 1
        question = np.exp(rng.normal(np.log(12), 0.35, n)).astype(np.int64) + 1
        answer = np.exp(rng.normal(np.log(3), 0.7, n)).astype(np.int64) + 1
        return np.stack([paragraph + question + 3, answer + 2], axis=1)
    cache = DATA / f"pairs_{name}.txt"
    if not cache.exists():
        texts = SOURCES[name]()
        if not texts:
            return None
        inputs = _count_tokens([x for x, _ in texts])
        targets = _count_tokens([y for _, y in texts])
        write_results(cache, f"# WordPiece (bert-base-uncased) tokens of (input, target) pairs of {name}; "
                         "benchmarks/pair_corpora.py\n" + "".join(f"{x} {y}\n" for x, y in zip(inputs, targets)))
    rows = [line.split() for line in cache.read_text().splitlines() if line and not line.startswith("#")]
    return np.array(rows, dtype=np.int64).reshape(-1, 2)
