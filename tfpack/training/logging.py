"""JSON-lines training logs and the progress bar.

One line per logged step::

    {"step": 100, "loss": 7.21, "mlm_loss": 6.55, "mlm_accuracy": 0.061,
     "nsp_loss": 0.66, "nsp_accuracy": 0.6, "sequences": 1996.0, "real_tokens": 482110.0,
     "real_tokens_per_second": 48211.0, "sequences_per_second": 199.6,
     "packs_per_second": 101.3, "seconds": 10.0}

``sequences`` and ``real_tokens`` count what the interval since the previous
line processed (all replicas).

Losses and accuracies are over every target seen since the previous line
(global sums divided by global counts), not means of per-batch means.

Example:

>>> import io
>>> from tfpack.training.logging import JsonLinesLogger
>>> stream = io.StringIO()
>>> JsonLinesLogger(stream).write({"step": 1, "loss": 0.5})
>>> stream.getvalue()
'{"step": 1, "loss": 0.5}\\n'
"""

from __future__ import annotations

import json
import math
import os
from typing import IO

from tfpack import atomic

__all__ = ["JsonLinesLogger", "ProgressBar", "truncate_log"]


def truncate_log(path: str | os.PathLike, step: int) -> None:
    """Keep the lines of a JSON-lines log up to ``step`` (resume from that checkpoint).

    Lines past the restored step (written after the last checkpoint) and a
    line cut short by a crash are dropped, so a resumed run appends without
    repeating steps. The file is replaced atomically.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        return
    kept = []
    with open(path) as f:
        for line in f:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if line.endswith("\n") and isinstance(record, dict) and record.get("step", 0) <= step:
                kept.append(line)
    atomic.write_atomic(path, "".join(kept))  # a random temporary name, never a user's file


class JsonLinesLogger:
    """Appends one JSON object per line to a path or an open text stream."""

    def __init__(self, target: str | os.PathLike | IO[str] | None):
        self._stream = None
        self._owned = False
        if target is None:
            return
        if hasattr(target, "write"):
            self._stream = target
        else:
            os.makedirs(os.path.dirname(os.fspath(target)) or ".", exist_ok=True)
            self._stream = open(target, "a", buffering=1)
            self._owned = True

    def write(self, record: dict) -> None:
        if self._stream is None:
            return
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                 for k, v in record.items()}
        self._stream.write(json.dumps(clean) + "\n")
        self._stream.flush()

    def close(self) -> None:
        if self._owned and self._stream is not None:
            self._stream.close()
        self._stream = None


class ProgressBar:
    """A tqdm bar over optimizer steps (silent when ``enabled`` is false)."""

    def __init__(self, total: int, initial: int = 0, enabled: bool = True):
        self._bar = None
        if enabled:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, initial=initial, unit="step", dynamic_ncols=True)

    def update(self, steps: int, record: dict) -> None:
        if self._bar is None:
            return
        self._bar.update(steps)
        shown = {k: f"{v:.4g}" for k, v in record.items()
                 if k in ("loss", "real_tokens_per_second") and isinstance(v, float)}
        self._bar.set_postfix(shown, refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
