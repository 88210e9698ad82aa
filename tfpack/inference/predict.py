"""`tfpack.predict`: pack unpacked examples, run the model, get outputs per example.

The examples are packed as they stream in (`tfpack.data.pack` with
``window=``: memory bounded by the window, not the corpus), batched to one
fixed shape ``[batch_size, L]`` (the last batch is filled with empty packs;
fewer packs than ``batch_size`` in all give one call of just those), checked
against the model's tables (`tfpack.models.limits`: an id outside the
vocabulary, a position past the position table is refused, naming the
example, before the compiled step, where XLA would clamp it),
run through the model compiled once (``jit_compile``), and every output is
cut back into its examples by the packs' ``example_ids``
(`tfpack.inference.unpack`). Which output is per sequence and which per token
comes from the task contract: the model's task declaration
(`tfpack.tasks`, ``outputs``), or a backbone's ``sequence_output`` (per
token).

Results, in input order:

- a ``"sequence"`` output: one array ``[n, ...]`` (row ``i`` = example ``i``);
- a ``"token"`` (or ``"prediction"``) output: a list of ``n`` arrays
  ``[n_i, ...]``;
- one output: that value; several: a dict of them.

Example:

>>> import tfpack
>>> backbone = tfpack.models.BertEncoder(vocabulary_size=20, num_layers=1, hidden_dim=8,
...                                      num_heads=2, intermediate_dim=16)
>>> hidden = tfpack.predict(backbone, [[2, 5, 6], [7, 3], [4]], max_length=8,
...                         max_sequences_per_pack=2, batch_size=2)
>>> [h.shape for h in hidden]
[(3, 8), (2, 8), (1, 8)]
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence

import numpy as np
import tensorflow as tf
from tqdm import tqdm

from tfpack import features as contract
from tfpack.data.boundary import raising_tfpack_errors
from tfpack.features import FeatureRoles
from tfpack.data.pack import pack
from tfpack.errors import TfpackError
from tfpack.inference.layouts import positions_per_sequence
from tfpack.models.limits import input_limits
from tfpack.training.layouts import check_pair_layout
from tfpack.inference.pairs import predict_pairs
from tfpack.inference.unpack import Collector
from tfpack.params import (Anything, Boolean, InstanceOf, Integer, IntegerPair, token_ids,
                           validate_params)
from tfpack.tasks import PACKINGS

__all__ = ["predict", "output_kinds"]

_DEFAULT_WINDOW = 8192
# model -> {jit_compile: its tf.function}: calls at the same shapes reuse one
# compiled program (XLA compiles a 6-layer encoder in seconds, on every new function).
_COMPILED = weakref.WeakKeyDictionary()


@validate_params({"model": Anything("a tfpack task or backbone, checked below"),
                  "declared": [None, InstanceOf(Mapping, description="a dict of output -> kind")]})
def output_kinds(model, declared: Mapping[str, str] | None = None) -> dict[str, str]:
    """Output name -> ``"sequence"``, ``"token"`` or ``"prediction"`` of ``model``.

    From ``declared`` when given, else the contract: the declaration of
    ``model.task`` (`tfpack.tasks`), or a backbone's ``packed_outputs``
    (``{"sequence_output": "token"}``).
    """
    if declared is not None:
        kinds = dict(declared)
    elif isinstance(getattr(model, "task", None), str):
        kinds = contract.outputs(model.task)
    else:
        kinds = dict(getattr(model, "packed_outputs", None) or {})
    if not kinds:
        raise TfpackError(
            "`model` must be a tfpack task or backbone (its outputs are declared in the task "
            "contract, tfpack.tasks), or `output_kinds` must say where each output lives. "
            f"Received: a {type(model).__name__} without `task` or `packed_outputs`")
    bad = {k: v for k, v in kinds.items() if v not in PACKINGS}
    if bad:
        raise TfpackError(f"Output kinds must be one of {sorted(PACKINGS)}. "
                          f"Received: output_kinds={bad}")
    return kinds


def _as_dataset(examples, vocabulary_size: int | None) -> tuple[tf.data.Dataset, int | None]:
    """``(dataset of {"input_ids": [n], ...}, number of examples if known)``."""
    if isinstance(examples, tf.data.Dataset):
        spec = examples.element_spec
        if not isinstance(spec, dict) or "input_ids" not in spec:
            raise TfpackError("`examples` must be a tf.data.Dataset of dicts with `input_ids` "
                              f"or a list of token id lists. Received: element_spec={spec!r}")
        not_integer = {n: s.dtype.name for n, s in spec.items() if n in contract.names()
                       and contract.dtype_of(n) == "int32" and not s.dtype.is_integer}
        if not_integer:
            raise TfpackError("`examples` must hold integer ids (int32 or int64), never "
                              f"floats or strings. Received: dtypes {not_integer}")
        count = int(tf.data.experimental.cardinality(examples))
        return examples, count if count >= 0 else None
    if isinstance(examples, Sequence) and not isinstance(examples, (str, bytes)):
        rows = list(examples)
        if not rows or any(np.ndim(r) != 1 or len(r) == 0 for r in rows):
            raise TfpackError("`examples` must be a non-empty list of non-empty token id lists. "
                              f"Received: {len(rows)} rows"
                              + (f", row shapes {sorted({np.shape(r) for r in rows})[:4]}"
                                 if rows else ""))
        rows = [token_ids(r, "input_ids", vocabulary_size=vocabulary_size,
                          where=f"in example {i}") for i, r in enumerate(rows)]
        dataset = tf.data.Dataset.from_generator(
            lambda: ({"input_ids": np.asarray(r, np.int32)} for r in rows),
            output_signature={"input_ids": tf.TensorSpec([None], tf.int32)})
        return dataset.apply(tf.data.experimental.assert_cardinality(len(rows))), len(rows)
    raise TfpackError("`examples` must be a tf.data.Dataset of dicts with `input_ids` or a "
                      f"list of token id lists. Received: {type(examples).__name__}")


_LIMIT_NAMES = {"input_ids": "the model's vocabulary_size",
                "token_type_ids": "the model's type_vocabulary_size",
                "position_ids": "the rows of the model's position table",
                "branch_ids": "0: a shared prompt, 1: the chosen sequence, 2: the rejected one",
                "response_mask": "0 or 1"}
# Features whose values are a closed set whatever the model (the preference task's): a
# hand-made example with `branch_ids` 3 would mix two pairs.
_VALUE_LIMITS = {"branch_ids": 3, "response_mask": 2}


def _check_inputs(batch: dict, limits: Mapping[str, int]) -> None:
    """Refuse ids the model has no table row for, naming the example (XLA would clamp them).

    Checked on the packs, so the position of a token inside its example (its
    ``position_ids``) is checked against the model's position table too.
    """
    real = batch["sequence_ids"] > 0
    for name, limit in limits.items():
        if name not in batch:
            continue
        values = batch[name]
        if name == "position_ids" and "branch_ids" in batch:  # A pair: two sequences.
            values = positions_per_sequence(batch)
        bad = real & ((values < 0) | (values >= limit))
        if not bad.any():
            continue
        row, column = (int(i) for i in np.argwhere(bad)[0])
        slot = int(batch["sequence_ids"][row, column]) - 1
        example = int(batch["example_ids"][row, slot])
        token = int(batch["position_ids"][row, column])
        hint = ("; cut longer examples, e.g. `truncate=True` with `max_length` at most "
                f"{limit}" if name == "position_ids" else "")
        raise TfpackError(f"`{name}` must be inside [0, {limit}) ({_LIMIT_NAMES[name]}{hint}). "
                          f"Received: {name}={values[row, column].item()} in example "
                          f"{example} at token {token}")


def _model_inputs(model, element_spec) -> tuple[str, ...]:
    names = getattr(model, "input_features", None)
    if names is None:
        from tfpack.models.backbone import backbone_input_features

        names = backbone_input_features(model)
    optional = set(getattr(model, "optional_features", ()) or ()) | set(
        getattr(getattr(model, "backbone", None), "optional_features", ()) or ())
    return tuple(n for n in names if n not in optional or n in element_spec)


@validate_params({
    "model": Anything("a Keras model, checked by its outputs"),
    "examples": Anything("a dataset or token id lists, checked example by example"),
    # (Le, Ld) for an encoder-decoder's pairs (`tfpack.builders.seq2seq_examples`).
    "max_length": [Integer(1), IntegerPair(1)], "max_sequences_per_pack": Integer(1),
    "batch_size": Integer(1),
    "max_predictions_per_pack": [None, Integer(1)], "window": Integer(1),
    "algorithm": InstanceOf(str, description="a planner name (tfpack.packing)"),
    "output_kinds": [None, InstanceOf(Mapping)], "roles": [None, InstanceOf(str, FeatureRoles)],
    "truncate": Boolean(), "jit_compile": Boolean(), "progress": Boolean(),
})
def predict(
    model,
    examples,
    *,
    max_length: int,
    max_sequences_per_pack: int,
    batch_size: int = 32,
    max_predictions_per_pack: int | None = None,
    window: int = _DEFAULT_WINDOW,
    algorithm: str = "lpfhp",
    output_kinds: Mapping[str, str] | None = None,
    roles: FeatureRoles | str | None = None,
    truncate: bool = False,
    jit_compile: bool = True,
    progress: bool = False,
):
    """Outputs of ``model`` for every example, in input order, computed on packs.

    Args:
        model: a tfpack task or backbone (`tfpack.models`, including
            `tfpack.models.from_keras_hub` backbones), or any Keras model of
            packed features with ``output_kinds``.
        examples: a `tf.data.Dataset` of dicts ``{"input_ids": [n], ...}``
            (``token_type_ids`` too when the model reads them), or a list of
            token id lists.
        max_length: ``L``, tokens per pack (longer examples fail, or are cut
            with ``truncate=True``); ``(Le, Ld)`` for an encoder-decoder,
            whose examples are ``(encoder_ids, decoder_ids)`` pairs packed
            whole into pair packs (`tfpack.inference.pairs`).
        max_sequences_per_pack: ``K``; ``1`` runs one example per row (the
            padded baseline).
        batch_size: packs per model call; every call has the shape
            ``[batch_size, L]`` (``[P, L]`` when the examples make only
            ``P < batch_size`` packs: nothing is allocated beyond the data).
        max_predictions_per_pack: ``M``, for models with prediction-slot
            inputs (``roles="bert"``).
        window: examples planned and packed at a time (memory is bounded by
            it; larger windows pack a little better).
        algorithm: the planner of each window (`tfpack.packing`).
        output_kinds: where each output lives, for models outside the task
            contract (the contract's declaration otherwise).
        roles: how to pack the examples' features (default: the model's
            ``packing_roles`` where it has them, e.g. ``"preference"``; else
            ``input_ids`` and the ``token_type_ids`` the model reads).
        truncate: cut examples longer than ``L`` instead of failing.
        jit_compile: compile the model call with XLA.
        progress: show a tqdm progress bar (examples) on stderr.

    Returns:
        Per example, in input order: see the module docstring.
    """
    kinds = output_kinds_of(model, output_kinds)
    if isinstance(max_length, (tuple, list)):  # (Le, Ld): an encoder-decoder's pairs.
        return predict_pairs(model, examples, max_length=tuple(max_length),
                             max_sequences_per_pack=max_sequences_per_pack,
                             batch_size=batch_size, kinds=kinds,
                             call=_compiled(model, jit_compile))
    limits = {**input_limits(model), **_VALUE_LIMITS}
    dataset, count = _as_dataset(examples, limits.get("input_ids"))
    inputs = _model_inputs(model, dataset.element_spec)
    if roles is None:  # A model whose packs carry task features says how to pack them.
        roles = getattr(model, "packing_roles", None)
    if roles is None:
        tokens = ("input_ids",) + tuple(
            n for n in ("token_type_ids",) if n in inputs and n in dataset.element_spec)
        roles = FeatureRoles(name="predict", tokens=tokens)
    roles = FeatureRoles.get(roles)
    if truncate and "branch_ids" in dataset.element_spec:
        # A pair is one item: cut like one sequence, its rejected branch would vanish.
        raise TfpackError("`truncate=True` cannot cut preference pairs (a pair is one item; "
                          "its rejected branch would be lost): build them with "
                          "`preference_examples(max_length=L)`, which cuts prompts. "
                          "Received: truncate=True")
    packer = pack(max_length=max_length, max_sequences_per_pack=max_sequences_per_pack,
                  max_predictions_per_pack=max_predictions_per_pack, window=window,
                  algorithm=algorithm, roles=roles, shuffle=False, truncate=truncate)
    # Batched here, so the one-line `TfpackError` of a bad example is unwrapped again.
    packed = raising_tfpack_errors(dataset.apply(packer).batch(batch_size).prefetch(2))
    missing = [n for n in inputs if n not in packed.element_spec]
    if missing:
        raise TfpackError(f"The packs must hold every feature the model reads. Received: "
                          f"missing {missing} (pass `roles` that pack them)")
    call = _compiled(model, jit_compile)
    collector = Collector(kinds)
    with tqdm(total=count, desc="predict", unit=" examples", disable=not progress) as bar:
        pending, rows = None, None
        for batch in packed.as_numpy_iterator():
            # Checked before the compiled step: under XLA an id past its table is clamped.
            _check_inputs(batch, limits)
            if "branch_ids" in inputs:
                check_pair_layout(batch, share_prompt=bool(getattr(model, "share_prompt", False)))
            # One shape for every call: the first batch's. It is smaller than
            # `batch_size` only when it is the only one, so nothing is allocated
            # beyond what the data needs, however large `batch_size` is.
            rows = rows or len(batch["input_ids"])
            batch = _fill(batch, rows, roles.task)
            outputs = call({n: batch[n] for n in inputs})  # Dispatched; runs while we unpack.
            if pending is not None:
                bar.update(_collect(collector, *pending, kinds))
            pending = (batch, outputs)
        if pending is not None:
            bar.update(_collect(collector, *pending, kinds))
    result = collector.result(expected=count)
    return next(iter(result.values())) if len(result) == 1 else result


# The public argument is `output_kinds`; the function of that name is reached here.
output_kinds_of = output_kinds


def _compiled(model, jit_compile: bool):
    """The model's inference function, one per model and ``jit_compile``."""
    def make(owner):
        # Through a weak reference: the cache must not keep the model alive.
        return tf.function(lambda x: owner()(x, training=False), jit_compile=jit_compile)

    try:
        functions = _COMPILED.setdefault(model, {})
        owner = weakref.ref(model)
    except TypeError:  # Not weakly referenceable or hashable: no reuse.
        return make(lambda: model)
    if jit_compile not in functions:
        functions[jit_compile] = make(owner)
    return functions[jit_compile]


def _collect(collector, batch, outputs, kinds) -> int:
    missing = sorted(set(kinds) - set(outputs))
    if missing:
        raise TfpackError(f"The model's outputs must include its declared outputs. Received: "
                          f"outputs {sorted(outputs)}, missing {missing}")
    return collector.add(batch, {n: np.asarray(outputs[n]) for n in kinds})


def _fill(batch: dict, batch_size: int, task) -> dict:
    """The last, partial batch filled up with empty packs (one shape, one compile)."""
    rows = len(batch["input_ids"])
    if rows == batch_size:
        return batch
    return {n: np.concatenate([v, np.full((batch_size - rows,) + v.shape[1:],
                                          contract.padding_value(n, task), v.dtype)])
            for n, v in batch.items()}
