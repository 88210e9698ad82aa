"""Checkpoints that are never half-written and refuse another model's variables.

A checkpoint is a directory ``<root>/ckpt-<step>/`` holding a
`tf.train.Checkpoint` (model, optimizer, data-iterator position, step) and
``tfpack_checkpoint.json``: the step and the *signature* of the model, its
variable paths and shapes, and, where the data position is not in the state
(per-host packing, `tfpack.training.HostPacking`), the *stream* it counts in:
the files, hosts and packing settings, which a resumed run must share. It is written under a temporary name in the same
directory and renamed into place, so a crash leaves either the previous
checkpoint or the new one, never a partial one; ``latest`` is found by
listing complete ``ckpt-*`` directories, not from a pointer file that could
disagree. Temporary directories left by an interrupted save (or deletion) are
removed when the next `Checkpointer` opens the directory (only those named
and filled as tfpack writes them; a checkpoint is deleted file by file, so
anything else put in its folder stays); a damaged latest
checkpoint (unreadable metadata or state) is skipped with a warning in favour
of the newest intact one.

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

import itertools
import json
import os
import re
import shutil
import tempfile
import uuid
import warnings

import keras

from tfpack import _tensorflow
from tfpack.errors import TfpackError

tf = _tensorflow.require("tfpack.training.checkpoint (the Trainer's checkpoints)")

__all__ = ["Checkpointer", "agreed_step", "learning_rate_variable", "model_signature",
           "random_state"]

_META = "tfpack_checkpoint.json"
_PATTERN = re.compile(r"^ckpt-(\d+)$")
# What an interrupted save or deletion leaves: removed only with exactly such a name and
# nothing inside but checkpoint files (anything else there is someone else's).
_TEMPORARY = re.compile(r"^\.(tmp|deleting)-ckpt-\d+-[0-9a-f]{8,32}$")
_AUTO_NUMBER = re.compile(r"_\d+$")


def _is_checkpoint_file(name: str) -> bool:
    """Names a `tf.train.Checkpoint` write (prefix ``state``; ``state_temp``, the
    folder of its shards before they are merged, where a write was killed) and the
    metadata file."""
    return (name == _META or name == "checkpoint" or name.startswith("state.")
            or name == "state_temp")


def model_signature(model) -> list[list]:
    """``[[path, shape], ...]`` of the model's variables: what a checkpoint must match.

    Paths are relative to the model and drop Keras's auto-numbering
    (``bert_encoder_1`` -> ``bert_encoder``), which depends on how many models
    the process built before; the order of the list still tells layers apart.
    """
    prefix = f"{model.name}/"
    signature = []
    for v in model.weights:
        path = v.path[len(prefix):] if v.path.startswith(prefix) else v.path
        path = "/".join(_AUTO_NUMBER.sub("", part) for part in path.split("/"))
        signature.append([path, list(v.shape)])
    return signature


class Checkpointer:
    """Atomic save/restore of a training state.

    Args:
        directory: where ``ckpt-<step>`` directories go (created if missing).
        model: the Keras model; its signature is checked on restore.
        max_to_keep: complete checkpoints kept (oldest deleted first).
        is_chief: whether this process keeps what it writes (multi-worker).
        stream: a JSON-able description of the input the saved step counts
            in (`None`: a dataset, or its iterator is saved); a checkpoint of
            another stream is refused on restore.
        **objects: other trackables saved alongside (``optimizer=``,
            ``iterator=``, ``step=``).
    """

    def __init__(self, directory: str, *, model, max_to_keep: int = 3,
                 is_chief: bool = True, stream: dict | None = None, **objects):
        self.directory = os.fspath(directory)
        self.model = model
        self.stream = stream
        self.max_to_keep = max_to_keep
        self.is_chief = is_chief
        self._checkpoint = tf.train.Checkpoint(model=model, **objects)
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as error:
            raise TfpackError(
                "The checkpoint directory must be creatable and writable. "
                f"Received: checkpoint_dir={self.directory!r} ({error.strerror})") from None
        if is_chief:  # What an interrupted save or deletion left behind.
            for name in os.listdir(self.directory):
                path = os.path.join(self.directory, name)
                if (_TEMPORARY.match(name) and os.path.isdir(path) and not os.path.islink(path)
                        and all(_is_checkpoint_file(n) for n in os.listdir(path))):
                    shutil.rmtree(path, ignore_errors=True)

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
                           "signature": model_signature(self.model),
                           **({"stream": self.stream} if self.stream is not None else {})}, f)
            if os.path.lexists(final):  # Same step written twice: replace it whole.
                self._delete(final, f"ckpt-{step}")
                if os.path.lexists(final):
                    raise TfpackError(
                        "A checkpoint directory must hold only tfpack's checkpoints. Received: "
                        f"{final!r} holding files tfpack did not write (move them away)")
            os.rename(tmp, final)
        finally:
            if os.path.exists(tmp):
                shutil.rmtree(tmp, ignore_errors=True)
        for old in self.steps()[:-self.max_to_keep]:
            self._delete(os.path.join(self.directory, f"ckpt-{old}"), f"ckpt-{old}")
        return final

    def _delete(self, path: str, name: str) -> None:
        """Delete the checkpoint files of ``path``; what else it holds stays, at ``path``."""
        if os.path.islink(path) or not os.path.isdir(path):
            return
        # Renamed first: a half-deleted checkpoint must not look complete.
        doomed = os.path.join(self.directory, f".deleting-ckpt-{name[5:]}-{uuid.uuid4().hex[:8]}")
        os.rename(path, doomed)
        others = False
        for entry in os.listdir(doomed):
            if _is_checkpoint_file(entry):
                os.remove(os.path.join(doomed, entry))
            else:
                others = True
        if others:  # the user's files: kept, no longer a checkpoint (no metadata)
            os.rename(doomed, path)
        else:
            os.rmdir(doomed)

    def restore(self, step: int | None = None, *, partial: bool = False) -> int | None:
        """Restore ``ckpt-<step>`` (default: the newest intact one); returns the step or `None`.

        Without ``step``, a damaged checkpoint (unreadable metadata or state)
        is skipped with a warning and the next older one is tried.
        ``partial=True`` restores only the objects this `Checkpointer` tracks
        (e.g. the model alone, for export) and ignores the rest.

        Raises:
            TfpackError: the checkpoint comes from another model, or ``step``
                names a damaged checkpoint, or every checkpoint is damaged.
        """
        candidates = list(reversed(self.steps())) if step is None else [step]
        problems = []
        for candidate in candidates:
            try:
                self._restore_one(candidate, partial)
            except _Damaged as damage:
                problems.append(str(damage))
                if step is None:
                    warnings.warn(f"tfpack: skipping damaged checkpoint {damage}; trying the "
                                  "previous one", RuntimeWarning, stacklevel=2)
                continue
            return candidate
        if problems:
            raise TfpackError("A checkpoint must be intact to resume from. Received: "
                              + "; ".join(problems))
        return None

    def _restore_one(self, step: int, partial: bool) -> None:
        path = os.path.join(self.directory, f"ckpt-{step}")
        try:
            with open(os.path.join(path, _META)) as f:
                meta = json.load(f)
            if not isinstance(meta, dict) or meta.get("step") != step:
                raise ValueError("metadata does not describe this step")
        except (OSError, ValueError) as error:
            raise _Damaged(f"{path} ({error})") from None
        expected = model_signature(self.model)
        saved = meta.get("signature")
        if saved != expected:
            saved = saved if isinstance(saved, list) else []
            diffs = [f"{a[0] if a else b[0]}: checkpoint {a[1] if a else None} vs model "
                     f"{b[1] if b else None}"
                     for a, b in itertools.zip_longest(saved, expected) if a != b]
            raise TfpackError(
                "The checkpoint must come from a model with the same configuration "
                f"(variable paths and shapes); {len(diffs)} differ: "
                + "; ".join(diffs[:5]) + ("; ..." if len(diffs) > 5 else "")
                + f". Received: checkpoint={path!r}")
        if not partial:
            _check_stream(meta.get("stream"), self.stream, path)
        try:
            status = self._checkpoint.read(os.path.join(path, "state"))
            if partial:
                status.expect_partial()
            else:
                status.assert_existing_objects_matched()
        except (tf.errors.OpError, ValueError, AssertionError, IndexError) as error:
            message = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
            raise _Damaged(f"{path} ({type(error).__name__}: {message})") from None


def _check_stream(saved, current, path: str) -> None:
    """Refuse a checkpoint whose step counts in another input stream: resumed, the
    run would skip the packs of that stream in this one (some twice, some never)."""
    saved, current = saved if isinstance(saved, dict) else {}, current or {}
    diffs = [f"{key}: checkpoint {saved.get(key)!r:.200} vs now {current.get(key)!r:.200}"
             for key in sorted(set(saved) | set(current)) if saved.get(key) != current.get(key)]
    if diffs:
        raise TfpackError(
            "A run must resume on the input stream of its checkpoint (per-host packing: the "
            "same files, hosts and packing settings; start a new checkpoint_dir for new "
            f"ones); {len(diffs)} differ: " + "; ".join(diffs) + f". Received: checkpoint={path!r}")


def agreed_step(strategy: tf.distribute.Strategy, restored: int | None) -> int | None:
    """``restored``, once every replica restored the same step (one collective).

    Workers that restored different steps (a ``checkpoint_dir`` that is not one
    folder all of them see) would run different numbers of updates, one's
    resumed update all-reduced with another's first, until a collective fails;
    they are refused instead, every one of them.

    >>> agreed_step(tf.distribute.get_strategy(), 7)
    7
    """
    if strategy.num_replicas_in_sync == 1:
        return restored
    from tfpack.data import strategy_all_gather

    steps = strategy_all_gather(strategy)(-1 if restored is None else restored)
    if len(set(steps)) > 1:
        raise TfpackError(
            "Every worker must resume from the same checkpoint: `checkpoint_dir` must be one "
            "folder that all workers see (a shared file system). Received: restored steps "
            f"{[None if s < 0 else s for s in steps]} (one a replica)")
    return restored


class _Damaged(Exception):
    """A checkpoint whose files cannot be read (internal: restore skips it)."""


def random_state(model) -> list:
    """The seed generators' state variables (in ``model.variables``, not ``weights``).

    Checkpointed with the model so that a resumed run draws the same dropout.

    >>> import keras
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dropout(0.5, seed=1)])
    >>> [v.name for v in random_state(model)], model.weights
    (['seed_generator_state'], [])
    """
    weights = {id(v) for v in model.weights}
    return [v for v in model.variables if id(v) not in weights]


def learning_rate_variable(optimizer):
    """The optimizer's learning-rate variable (inside a loss-scale wrapper), or None.

    None when the rate is a schedule or a plain number.

    >>> import keras
    >>> learning_rate_variable(keras.optimizers.SGD(0.1)).numpy().item()
    0.10000000149011612
    """
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    value = getattr(inner, "_learning_rate", None)
    return value if isinstance(value, keras.Variable) else None
