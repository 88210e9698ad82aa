"""Real English text available offline: docstrings of Python's standard library.

`stdlib_documents` turns every standard-library module's docstrings into one
document (a list of sentences), like the articles of a Wikipedia dump, for
demos and tests of BERT pre-training data on a fresh machine without network
access. Source files are parsed with `ast`, never imported, and walked in
sorted order, so the result depends only on the Python version.

Example:

>>> from tfpack import datasets
>>> documents = datasets.stdlib_documents(max_documents=3)
>>> len(documents), all(len(d) >= 2 for d in documents)
(3, True)
>>> isinstance(documents[0][0], str)
True
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import re
import sys

from tfpack.params import Integer, validate_params

__all__ = ["stdlib_documents", "stdlib_modules", "bert_vocab_path"]

# Modules with side effects on parse-free discovery are fine, but these hold
# no prose or are test suites.
_SKIP = {"this", "antigravity", "test", "idlelib", "lib2to3", "tkinter", "turtledemo",
         "ensurepip", "pydoc_data", "unittest"}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'])")


def bert_vocab_path() -> str:
    """Path of the bundled bert-base-uncased WordPiece vocabulary (30,522 lines)."""
    return os.path.join(os.path.dirname(__file__), "vocab", "bert_uncased_vocab.txt")


@validate_params({"max_documents": [None, Integer(1)], "min_sentences": Integer(0)})
def stdlib_documents(max_documents: int | None = None, min_sentences: int = 2
                     ) -> list[list[str]]:
    """Documents (lists of sentences) from the standard library's docstrings.

    Args:
        max_documents: stop after this many documents (``None``: all, a few
            thousand).
        min_sentences: skip modules with fewer sentences.

    Returns:
        One list of sentences per module, in sorted module order.
    """
    documents = []
    for path in _source_files():
        sentences = _sentences(path)
        if len(sentences) >= min_sentences:
            documents.append(sentences)
            if max_documents is not None and len(documents) >= max_documents:
                break
    return documents


@validate_params({})
def stdlib_modules() -> list[tuple[str, str, bool]]:
    """``(name, path, is_package)`` of each public standard-library module with
    Python source, in sorted order (test suites and modules without prose
    skipped); a package's path is its ``__init__.py``.

    >>> name, path, is_package = stdlib_modules()[0]
    >>> path.endswith(".py"), isinstance(is_package, bool)
    (True, True)
    """
    modules = []
    for name in sorted(sys.stdlib_module_names):
        if name.startswith("_") or name in _SKIP:
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.origin and spec.origin.endswith(".py"):
            modules.append((name, spec.origin, bool(spec.submodule_search_locations)))
    return modules


def _source_files() -> list[str]:
    files = []
    for _, origin, is_package in stdlib_modules():
        if is_package:
            package = os.path.dirname(origin)
            for root, dirs, names in os.walk(package):
                dirs[:] = sorted(d for d in dirs if not d.startswith(("test", "_")))
                files += [os.path.join(root, n) for n in sorted(names)
                          if n.endswith(".py") and not n.startswith("test")]
        else:
            files.append(origin)
    return files


def _sentences(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return []
    nodes = [tree] + [n for n in ast.walk(tree)
                      if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    sentences = []
    for node in nodes:
        doc = ast.get_docstring(node, clean=True)
        if doc:
            sentences += _split(doc)
    return sentences


def _split(doc: str) -> list[str]:
    """Prose sentences of a docstring; code, tables and short fragments dropped."""
    paragraphs, current = [], []
    for line in inspect.cleandoc(doc).splitlines():
        stripped = line.strip()
        prose = (stripped and not line.startswith((" ", "\t"))
                 and not stripped.startswith((">>>", "...", "-", "*", "|", "=", ":")))
        if prose:
            current.append(stripped)
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    if current:
        paragraphs.append(" ".join(current))
    sentences = []
    for paragraph in paragraphs:
        for sentence in _SENTENCE_END.split(paragraph):
            words = sentence.split()
            if len(words) >= 4 and sum(c.isalpha() for c in sentence) > len(sentence) // 2:
                sentences.append(sentence)
    return sentences
