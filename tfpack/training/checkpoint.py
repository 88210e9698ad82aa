"""Checkpoints that are never half-written and refuse another model's variables.

A checkpoint is a directory ``<root>/ckpt-<step>/`` holding a
`tf.train.Checkpoint` (model, optimizer, data-iterator position, step) and
``tfpack_checkpoint.json``: the step and the *signature* of the model, its
variable paths and shapes. It is written under a temporary name in the same
directory and renamed into place, so a crash leaves either the previous
checkpoint or the new one, never a partial one; ``latest`` is found by
listing complete ``ckpt-*`` directories, not from a pointer file that could
disagree.

Under `MultiWorkerMirroredStrategy` every worker must take part in the save
(variables may be gathered with collectives); only the chief keeps its copy.

Example:

>>> import keras, tensorflow as tf, tempfile
>>> from tfpack.training.checkpoint import Checkpointer
>>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
>>> ckpt = Checkpointer(tempfile.mkdtemp(), model=model, step=tf.Variable(0, dtype="int64"))
>>> path = ckpt.save(5)
>>> ckpt.latest_step()
5
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import uuid

import tensorflow as tf

from tfpack.errors import TfpackError

__all__ = ["Checkpointer", "model_signature"]

_META = "tfpack_checkpoint.json"
_PATTERN = re.compile(r"^ckpt-(\d+)$")


def model_signature(model) -> list[list]:
    """``[[path, shape], ...]`` of the model's variables: what a checkpoint must match.

    Paths are relative to the model (its own, auto-numbered name is dropped).
    """
    prefix = f"{model.name}/"
    return [[v.path[len(prefix):] if v.path.startswith(prefix) else v.path, list(v.shape)]
            for v in model.weights]


class Checkpointer:
    """Atomic save/restore of a training state.

    Args:
        directory: where ``ckpt-<step>`` directories go (created if missing).
        model: the Keras model; its signature is checked on restore.
        max_to_keep: complete checkpoints kept (oldest deleted first).
        is_chief: whether this process keeps what it writes (multi-worker).
        **objects: other trackables saved alongside (``optimizer=``,
            ``iterator=``, ``step=``).
    """

    def __init__(self, directory: str, *, model, max_to_keep: int = 3,
                 is_chief: bool = True, **objects):
        self.directory = os.fspath(directory)
        self.model = model
        self.max_to_keep = max_to_keep
        self.is_chief = is_chief
        self._checkpoint = tf.train.Checkpoint(model=model, **objects)
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as error:
            raise TfpackError(
                "The checkpoint directory must be creatable and writable. "
                f"Received: checkpoint_dir={self.directory!r} ({error.strerror})") from None

    def steps(self) -> list[int]:
        """Steps of the complete checkpoints, oldest first."""
        if not os.path.isdir(self.directory):
            return []
        found = []
        for name in os.listdir(self.directory):
            match = _PATTERN.match(name)
            if match and os.path.exists(os.path.join(self.directory, name, _META)):
                found.append(int(match.group(1)))
        return sorted(found)

    def latest_step(self) -> int | None:
        """The newest complete checkpoint's step, or `None`."""
        steps = self.steps()
        return steps[-1] if steps else None

    def save(self, step: int) -> str:
        """Write ``ckpt-<step>`` atomically; returns its path."""
        final = os.path.join(self.directory, f"ckpt-{step}")
        tmp = os.path.join(self.directory, f".tmp-ckpt-{step}-{uuid.uuid4().hex[:8]}")
        if not self.is_chief:  # Takes part in collectives; its copy is thrown away.
            tmp = tempfile.mkdtemp(prefix="tfpack-worker-ckpt-")
        try:
            self._checkpoint.write(os.path.join(tmp, "state"))
            if not self.is_chief:
                return final
            with open(os.path.join(tmp, _META), "w") as f:
                json.dump({"format": "tfpack-checkpoint", "version": 1, "step": int(step),
                           "signature": model_signature(self.model)}, f)
            if os.path.exists(final):  # Same step written twice: replace it whole.
                shutil.rmtree(final)
            os.rename(tmp, final)
        finally:
            if os.path.exists(tmp):
                shutil.rmtree(tmp, ignore_errors=True)
        for old in self.steps()[:-self.max_to_keep]:
            shutil.rmtree(os.path.join(self.directory, f"ckpt-{old}"), ignore_errors=True)
        return final

    def restore(self, step: int | None = None) -> int | None:
        """Restore ``ckpt-<step>`` (default: the latest); returns the step or `None`."""
        step = self.latest_step() if step is None else step
        if step is None:
            return None
        path = os.path.join(self.directory, f"ckpt-{step}")
        with open(os.path.join(path, _META)) as f:
            meta = json.load(f)
        expected = model_signature(self.model)
        saved = meta.get("signature")
        if saved != expected:
            saved_map = {p: s for p, s in saved or []}
            ours = {p: s for p, s in expected}
            diffs = [f"{p}: checkpoint {saved_map.get(p)} vs model {ours.get(p)}"
                     for p in sorted(set(saved_map) | set(ours))
                     if saved_map.get(p) != ours.get(p)]
            raise TfpackError(
                "The checkpoint must come from a model with the same configuration "
                f"(variable paths and shapes); {len(diffs)} differ: "
                + "; ".join(diffs[:5]) + ("; ..." if len(diffs) > 5 else "")
                + f". Received: checkpoint={path!r}")
        self._checkpoint.read(os.path.join(path, "state")).assert_existing_objects_matched()
        return step
