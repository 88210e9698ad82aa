"""Convert `.keras` files saved before the backbone/task split.

Before the split, `BertPretrainer` and `BertClassifier` held their encoder as
``encoder`` and `CausalLM` was backbone, head and loss in one class with a
flat config. Those files fail to load with a message that points here;
`upgrade_keras_file` rewrites one into the current layout (config and weight
paths), after which `keras.saving.load_model` reads it. `BertEncoder` files
load as they are.

Example (not run: needs an old file):

>>> from tfpack.models import upgrade_keras_file
>>> upgrade_keras_file("old_lm.keras", "lm.keras")  # doctest: +SKIP
'lm.keras'
>>> model = keras.saving.load_model("lm.keras")  # doctest: +SKIP
"""

from __future__ import annotations

import io
import json
import os
import uuid
import zipfile

from tfpack.errors import TfpackError
from tfpack.params import ExistingFile, OutputPath, validate_params

__all__ = ["upgrade_keras_file"]

_CONFIG, _WEIGHTS = "config.json", "model.weights.h5"
_TASKS = ("BertPretrainer", "BertClassifier", "CausalLM")
# Keys of the old flat `CausalLM` config that stay on the task.
_CAUSAL_LM_TASK_KEYS = ("name", "trainable", "dtype", "expected_counts",
                        "tie_embeddings")


@validate_params({"path": ExistingFile(), "new_path": OutputPath("file")})
def upgrade_keras_file(path: str | os.PathLike, new_path: str | os.PathLike) -> str:
    """Rewrite an old tfpack `.keras` file for the backbone/task classes.

    Args:
        path: a `.keras` file of `BertPretrainer`, `BertClassifier`,
            `CausalLM` or `BertEncoder` saved before the split.
        new_path: where the converted file goes (written under a temporary
            name, then renamed).

    Returns:
        ``new_path``.

    Raises:
        TfpackError: ``path`` is not a `.keras` file of one of these classes.
    """
    import h5py

    path, new_path = os.fspath(path), os.fspath(new_path)
    try:
        with zipfile.ZipFile(path) as archive:
            files = {name: archive.read(name) for name in archive.namelist()}
        config = json.loads(files[_CONFIG])
    except (OSError, KeyError, zipfile.BadZipFile, ValueError) as error:
        raise TfpackError("`path` must be a `.keras` file. "
                          f"Received: path={path!r} ({error})") from None
    name = config.get("class_name")
    inner = config.get("config", {})
    if name in ("BertPretrainer", "BertClassifier") and "encoder" in inner:
        inner["backbone"] = inner.pop("encoder")
        inner["backbone"]["config"].pop("expected_counts", None)
        move = {"encoder": "backbone"}
    elif name == "CausalLM" and "backbone" not in inner:
        config["config"] = _split_causal_lm(inner)
        move = None  # Everything but the output projection into the backbone.
    elif name == "BertEncoder":
        inner.pop("expected_counts", None)
        move = {}
    else:
        raise TfpackError(
            "`path` must be a `.keras` file of a tfpack model saved before the "
            "backbone/task split. Received: path="
            f"{path!r} holding {name!r}{' (already converted)' if name in _TASKS else ''}")
    files[_CONFIG] = json.dumps(config).encode()
    source, target = io.BytesIO(files[_WEIGHTS]), io.BytesIO()
    with h5py.File(source, "r") as old, h5py.File(target, "w") as new:
        old.visititems(lambda key, item: _copy(key, item, new, move))
    files[_WEIGHTS] = target.getvalue()
    temporary = f"{new_path}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        with zipfile.ZipFile(temporary, "w") as archive:
            for key, data in files.items():
                archive.writestr(key, data)
        os.replace(temporary, new_path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
    return new_path


def _split_causal_lm(flat: dict) -> dict:
    task = {k: flat[k] for k in _CAUSAL_LM_TASK_KEYS if k in flat}
    backbone = {k: v for k, v in flat.items() if k not in _CAUSAL_LM_TASK_KEYS}
    backbone.update(name="decoder_backbone", trainable=flat.get("trainable", True),
                    dtype=flat.get("dtype"))
    task["backbone"] = {"module": "tfpack.models.decoder",
                        "class_name": "DecoderBackbone", "config": backbone,
                        "registered_name": "tfpack>DecoderBackbone"}
    return task


def _new_key(key: str, move: dict | None) -> str:
    if move is None:  # Old CausalLM: its untied output projection stays on the task.
        keep = key == "vars" or key.startswith("vars/") or key.startswith("layers/dense")
        return key if keep else f"backbone/{key}"
    first, _, rest = key.partition("/")
    return "/".join(p for p in (move.get(first, first), rest) if p)


def _copy(key, item, new, move):
    import h5py

    target = _new_key(key, move)
    if isinstance(item, h5py.Dataset):
        copied = new.create_dataset(target, data=item[()])
    else:
        copied = new.require_group(target)
    copied.attrs.update(item.attrs)
