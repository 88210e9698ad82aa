"""Real sequence lengths for the attention benchmarks (numpy only, no TF).

- `wikipedia_512`: the bundled PackedBERT histogram (`tfpack.datasets`).
- `stdlib_lengths()`: long-document lengths from real text, the Python
  standard library: the number of Python tokens (`tokenize`) of each
  top-level function and class of each module `Lib/*.py`. Cached in
  `benchmarks/data/stdlib_lengths.txt` (one length per line; its header says
  which Python produced it) so both benchmarks read the same numbers fast;
  delete the file to regenerate it.
"""

from __future__ import annotations

import ast
import io
import pathlib
import platform
import sysconfig
import tokenize

import numpy as np
from results_file import write_results

CACHE = pathlib.Path(__file__).resolve().parent / "data" / "stdlib_lengths.txt"


def _count_stdlib() -> list[int]:
    lengths = []
    for path in sorted(pathlib.Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        source = path.read_text(encoding="utf-8", errors="replace")
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                 ast.ClassDef)):
                segment = ast.get_source_segment(source, node) or ""
                try:
                    tokens = list(tokenize.generate_tokens(
                        io.StringIO(segment).readline))
                except (tokenize.TokenError, IndentationError, SyntaxError):
                    continue
                lengths.append(sum(t.string.strip() != "" for t in tokens))
    return lengths


def stdlib_lengths() -> np.ndarray:
    """Tokens per top-level definition of the Python standard library."""
    if not CACHE.exists():
        lengths = _count_stdlib()
        CACHE.parent.mkdir(exist_ok=True)
        header = (f"# Python tokens per top-level function/class of Lib/*.py, "
                  f"Python {platform.python_version()}; benchmarks/lengths.py\n")
        write_results(CACHE, header + "\n".join(map(str, lengths)) + "\n")
    lines = CACHE.read_text().splitlines()
    return np.array([int(x) for x in lines if x and not x.startswith("#")])


def windowed_histogram(lengths, max_length: int, window: int | None = None):
    """Histogram (DESIGN.md layout, lengths 1..max_length) after splitting
    each length into windows of at most `window` (default `max_length`)."""
    window = min(window or max_length, max_length)
    pieces = []
    for n in lengths:
        full, rest = divmod(int(n), window)
        pieces += [window] * full + ([rest] if rest else [])
    return np.bincount(pieces, minlength=max_length + 1)[1:max_length + 1]


def sequence_ids_from_plan(packing, batch: int, rng) -> np.ndarray:
    """`[batch, L]` sequence ids of packs drawn from a plan (by its counts)."""
    weights = packing.counts / packing.counts.sum()
    rows = np.zeros((batch, packing.max_length), "int32")
    for row, strategy in zip(rows, rng.choice(len(weights), batch, p=weights)):
        ends = np.cumsum(packing.strategies[strategy])
        for i, (start, end) in enumerate(zip(np.r_[0, ends[:-1]], ends)):
            row[start:end] = i + 1
    return rows


def position_ids(sequence_ids: np.ndarray) -> np.ndarray:
    """Positions restarting at 0 for each sequence; 0 on padding."""
    positions = np.zeros_like(sequence_ids)
    for row, ids in zip(positions, sequence_ids):
        starts = np.r_[0, np.flatnonzero(np.diff(ids)) + 1]
        for start, end in zip(starts, np.r_[starts[1:], len(ids)]):
            row[start:end] = np.arange(end - start)
    return positions * (sequence_ids > 0)
