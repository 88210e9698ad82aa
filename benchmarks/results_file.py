"""Writing a benchmark's results file: whole or not at all.

`collect.py` pastes every `benchmarks/results/NAME.md` into BENCHMARKS.md,
so a run stopped while writing must leave the previous file, never half of
a new one: the text goes to a temporary file beside it, then takes its name.

    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> write_results(folder / "new" / "x.md", "| a |\\n")
    >>> (folder / "new" / "x.md").read_text(), sorted(p.name for p in (folder / "new").iterdir())
    ('| a |\\n', ['x.md'])
"""

import os
import pathlib
import tempfile

__all__ = ["write_results"]


def write_results(path, text):
    """Writes `text` to `path` (parents made) through a temporary file and a
    rename."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "w") as f:
            f.write(text)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
