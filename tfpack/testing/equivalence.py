"""Packed-vs-unpacked equivalence checks (seed 000, appendix T.5).

"The ultimate approach to test the correctness of the implementation is to
check, if packed and unpacked sequence provide the same values and
gradients." Both checks run the model with `training=False` (no dropout) and
find each sequence's outputs through the model's `packed_outputs`:
`"token"` outputs `[B, L, ...]` are read at the sequence's tokens,
`"prediction"` outputs `[B, M, ...]` at its masked-LM predictions and
`"sequence"` outputs `[B, K, ...]` at its slot.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import keras
import numpy as np

from tfpack.errors import TfpackError
from tfpack.params import (Anything, Boolean, InstanceOf, Integer, Real, declare_fields,
                           validate_params)
from tfpack.testing._comparison import backend_function, backend_gradients
from tfpack.testing.packer import next_fit
from tfpack.testing.packer import pack_examples

_MODEL = Anything("a tfpack model, or one with its calling convention")
_KINDS = [None, InstanceOf(Mapping, description="a dict of output name -> packing")]
_TOLERANCE = Real(0)

OUTPUT_KINDS = ("token", "prediction", "sequence")


@declare_fields({
    "sequences_checked": Integer(0),
    "max_output_difference": InstanceOf(dict, description="a dict of output -> difference"),
    "max_loss_difference": [None, Real(0)], "max_gradient_difference": [None, Real(0)],
})
@dataclasses.dataclass(frozen=True)
class EquivalenceResult:
    """What an equivalence check compared.

    Attributes:
        sequences_checked: number of (sequence, output) comparisons made.
        max_output_difference: largest absolute difference per output name.
        max_loss_difference: largest difference of the loss and of every
            loss statistic, or None when the model has no loss.
        max_gradient_difference: largest absolute gradient difference, or
            None when gradients were not compared.
    """

    sequences_checked: int
    max_output_difference: dict
    max_loss_difference: float | None = None
    max_gradient_difference: float | None = None


def _tolerances(outputs: Mapping, atol: float, rtol: float) -> dict:
    """Per output: ``min(atol, rtol * largest |value|)``.

    A correct packed model matches to float32 rounding (relative ~1e-7), so a
    tolerance relative to the output's scale catches leaks in models with
    small outputs (an untrained classifier's logits are ~1e-2 and a leak moves
    them by ~1e-6), while ``atol`` stays the promise for large ones.
    """
    return {name: min(atol, rtol * float(np.max(np.abs(np.asarray(value, np.float64)))))
            for name, value in outputs.items()}


def _inference(model, features):
    """``features -> {output name: numpy}``: `model` with ``training=False``,
    one compiled program on JAX (built first from the shapes of `features`
    without running it: eager JAX compiles every op on its own)."""
    if keras.backend.backend() == "jax" and not model.built:
        model({name: keras.KerasTensor(np.shape(value), np.asarray(value).dtype.name)
               for name, value in features.items()}, training=False)

    def forward(inputs):
        outputs = model(inputs, training=False)
        return dict(outputs) if isinstance(outputs, Mapping) else {"output": outputs}

    return backend_function(forward, model.variables)


def _output_kinds(model, outputs, features, output_kinds):
    kinds = dict(getattr(model, "packed_outputs", {}) or {})
    kinds.update(output_kinds or {})
    length = features["input_ids"].shape[1]
    for name, value in outputs.items():
        if name in kinds:
            continue
        # Infer from the second dimension; refuse to guess when ambiguous.
        candidates = [kind for kind, key in (
            ("token", "input_ids"), ("prediction", "masked_lm_positions"),
            ("sequence", "cls_positions"))
            if key in features and features[key].shape[1] == value.shape[1]]
        if len(candidates) != 1:
            raise TfpackError(
                "Each output needs a kind in "
                f"{OUTPUT_KINDS}: pass `output_kinds`. Received: output "
                f"{name!r} of shape {value.shape} with length={length}")
        kinds[name] = candidates[0]
    for name, kind in kinds.items():
        if kind not in OUTPUT_KINDS:
            raise TfpackError(f"Output kinds must be in {OUTPUT_KINDS}. "
                              f"Received: output_kinds[{name!r}]={kind!r}")
    return kinds


def _sequence_outputs(outputs, features, kinds, row, slot):
    """Outputs of sequence `slot` (1-based) of pack `row`, per output name."""
    result = {}
    for name, value in outputs.items():
        kind = kinds[name]
        if kind == "token":
            result[name] = value[row][features["sequence_ids"][row] == slot]
        elif kind == "prediction":
            keep = (features["masked_lm_sequence_ids"][row] == slot) & (
                features["masked_lm_weights"][row] > 0)
            result[name] = value[row][keep]
        else:
            result[name] = value[row, slot - 1]
    return result


def _slots(features, row):
    ids = features["sequence_ids"][row]
    return [int(s) for s in np.unique(ids[ids > 0])]


def _max_difference(a, b):
    if a.shape != b.shape:
        return np.inf
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))


def _vocabulary_size(model, features, vocabulary_size):
    if vocabulary_size is None:
        vocabulary_size = getattr(model, "vocabulary_size", None)
    if vocabulary_size is None:
        vocabulary_size = int(features["input_ids"].max()) + 1
    if vocabulary_size < 3:
        raise TfpackError("Perturbing tokens needs a vocabulary of at least 3."
                          f" Received: vocabulary_size={vocabulary_size}")
    return int(vocabulary_size)


# Rows of one call of `assert_no_cross_contamination`: the packs and their
# perturbed copies go through the model together, as many copies a call as
# fit (at least one), so a batch of a few packs costs one call, not one per
# sequence slot, and a large batch is not copied more than it holds.
_ROWS_PER_CALL = 64


def _runs_in_batches(call, features, variants):
    """Yields ``(reference, None)``, then ``(reference, outputs)`` for each
    of `variants` (``input_ids`` arrays replacing ``features["input_ids"]``):
    each ``{output name: numpy}`` of `call`.

    The copies are stacked along the batch, each call holding the packs
    themselves first (its own reference: the other sequences of a pack are
    compared within one call) and at most `_ROWS_PER_CALL` rows; every call
    has the same shape (one compilation on JAX), the last filled with more
    copies of the packs. A batch of more than half `_ROWS_PER_CALL` rows runs
    alone, once and once a variant.

    >>> calls = []
    >>> def call(f):
    ...     calls.append(len(f["input_ids"]))
    ...     return {"out": f["input_ids"] * 10}
    >>> features = {"input_ids": np.array([[1, 2]])}
    >>> runs = list(_runs_in_batches(call, features, [np.array([[3, 2]]), np.array([[1, 4]])]))
    >>> calls, [o["out"].tolist() for _, o in runs[1:]]
    ([3], [[[30, 20]], [[10, 40]]])
    """
    rows = len(features["input_ids"])
    per_call = _ROWS_PER_CALL // rows - 1
    if per_call < 1:
        reference = call(features)
        yield reference, None
        for ids in variants:
            yield reference, call(dict(features, input_ids=ids))
        return
    for start in range(0, max(len(variants), 1), per_call):
        chunk = variants[start:start + per_call]
        copies = [features["input_ids"]] * (1 + per_call - len(chunk) if start else 1)
        batch = {name: np.concatenate([value] * len(copies + chunk))
                 for name, value in features.items()}
        batch["input_ids"] = np.concatenate(copies + chunk)
        outputs = {name: np.asarray(value) for name, value in call(batch).items()}
        reference = {name: value[:rows] for name, value in outputs.items()}
        if not start:
            yield reference, None
        for k in range(len(chunk)):
            at = (len(copies) + k) * rows
            yield reference, {name: value[at:at + rows] for name, value in outputs.items()}


@validate_params({
    "model": _MODEL,
    "packed_inputs": InstanceOf(Mapping, description="a dict of packed features"),
    "atol": _TOLERANCE, "rtol": _TOLERANCE, "seed": Integer(0),
    "vocabulary_size": [None, Integer(1)], "output_kinds": _KINDS,
})
def assert_no_cross_contamination(model, packed_inputs, *, atol=1e-5,
                                  rtol=1e-5, seed=0, vocabulary_size=None,
                                  output_kinds=None):
    """Asserts that no sequence of a pack influences another one.

    For every sequence slot k, replaces the tokens of sequence k in every
    pack by other random tokens (never 0) and checks that the outputs of all
    *other* sequences of those packs stay the same. It also checks that the
    perturbed sequences' own outputs did change somewhere: a model that
    ignores its tokens proves nothing. The perturbed copies of the batch go
    through `model` stacked along the batch, with the packs themselves, a
    few calls in all.

    The tolerance of each output is ``min(atol, rtol * its largest |value|)``:
    a correctly masked model leaves the other sequences' outputs bit-identical
    (masked attention weights are exactly zero in float32), while a leak in an
    untrained model with small outputs (logits of order 1e-2) can move them by
    only ~1e-6, which a fixed 1e-5 would miss.

    Example:

    >>> from tfpack.models import BertEncoder
    >>> from tfpack.testing import pack_examples
    >>> model = BertEncoder(vocabulary_size=30, num_layers=1, hidden_dim=8,
    ...                     num_heads=2, intermediate_dim=16)
    >>> packed = pack_examples([{"input_ids": [3, 4, 5]},
    ...                         {"input_ids": [6, 7]}], max_length=6)
    >>> assert_no_cross_contamination(model, packed).sequences_checked
    2

    Args:
        model: a callable on a dict of features returning a dict of outputs
            (or a tensor); the tfpack models, or a user model with
            `packed_outputs` or `output_kinds`.
        packed_inputs: dict of packed features with a batch dimension; at
            least one pack must hold two sequences.
        atol: largest allowed change of an unperturbed output.
        rtol: the same, relative to the largest magnitude of that output
            over the batch; the smaller of the two applies.
        seed: seed of the replacement tokens.
        vocabulary_size: range of replacement tokens; default
            `model.vocabulary_size`.
        output_kinds: `{output name: "token" | "prediction" | "sequence"}`
            overriding `model.packed_outputs`.

    Returns:
        `EquivalenceResult` (`max_output_difference` over unperturbed
        sequences).

    Raises:
        AssertionError: an unperturbed sequence's output changed, or no
            perturbation changed anything.
    """
    features = {k: np.asarray(v) for k, v in packed_inputs.items()}
    if not any(len(_slots(features, r)) > 1
               for r in range(features["input_ids"].shape[0])):
        raise TfpackError(
            "`packed_inputs` must contain a pack of at least two sequences. "
            f"Received: sequence_ids={features['sequence_ids'].tolist()}")
    vocabulary = _vocabulary_size(model, features, vocabulary_size)
    rng = np.random.default_rng(seed)
    ids = features["input_ids"]
    max_slot = int(features["sequence_ids"].max())
    variants = []
    for slot in range(1, max_slot + 1):
        shift = rng.integers(1, vocabulary - 1, size=ids.shape)
        # (id - 1 + shift) mod (V - 1) + 1 is a different non-zero token.
        replaced = (ids - 1 + shift) % (vocabulary - 1) + 1
        variants.append(np.where(features["sequence_ids"] == slot, replaced,
                                 ids).astype(ids.dtype))
    runs = _runs_in_batches(_inference(model, features), features, variants)
    reference, _ = next(runs)
    kinds = _output_kinds(model, reference, features, output_kinds)
    largest = {name: 0.0 for name in reference}
    tolerance = _tolerances(reference, atol, rtol)
    checked, effect, changed = 0, 0.0, False
    for slot in range(1, max_slot + 1):
        reference, outputs = next(runs)
        for row in range(ids.shape[0]):
            slots = _slots(features, row)
            if slot not in slots:
                continue
            before = _sequence_outputs(reference, features, kinds, row, slot)
            after = _sequence_outputs(outputs, features, kinds, row, slot)
            for n in before:
                own = _max_difference(before[n], after[n])
                effect = max(effect, own)
                changed = changed or own > tolerance[n]
            for other in slots:
                if other == slot:
                    continue
                before = _sequence_outputs(reference, features, kinds, row,
                                           other)
                after = _sequence_outputs(outputs, features, kinds, row, other)
                for name in before:
                    difference = _max_difference(before[name], after[name])
                    largest[name] = max(largest[name], difference)
                    checked += 1
                    if not difference <= tolerance[name]:
                        raise AssertionError(
                            "Cross-contamination: changing the tokens of "
                            f"sequence {slot} of pack {row} changed output "
                            f"{name!r} of sequence {other} by {difference:.3g}"
                            f" (tolerance {tolerance[name]:.3g}).")
    if not changed:
        raise AssertionError(
            "Inconclusive: changing a sequence's tokens never changed its own "
            f"outputs beyond the tolerance (largest change {effect:.3g}, "
            f"tolerances {tolerance}).")
    return EquivalenceResult(checked, largest)


def _loss_and_gradients(model, features, check_gradients):
    """``({statistic or "loss": float}, gradients or None)`` of `model` on
    `features` (on JAX one compiled program each)."""

    def loss_values(inputs):
        y_pred = model(inputs, training=False)
        values = dict(model.loss_statistics(inputs, y_pred))
        values["loss"] = model.compute_loss(x=inputs, y_pred=y_pred, training=False)
        return values

    if not check_gradients:
        values = backend_function(loss_values, model.variables)(features)
        return {name: float(value) for name, value in values.items()}, None
    tensors = {name: keras.ops.convert_to_tensor(value) for name, value in features.items()}

    def fn():
        values = loss_values(tensors)
        return values["loss"], sorted(values.items())

    values, gradients = backend_gradients(fn, model.trainable_variables)
    return {name: float(value) for name, value in values}, gradients


@validate_params({
    "model": _MODEL, "examples": Anything("one dict of features per sequence"),
    "max_length": [None, Integer(1)], "packs": Anything("None or lists of example indices"),
    "max_sequences_per_pack": [None, Integer(1)], "atol": _TOLERANCE, "rtol": _TOLERANCE,
    "check_gradients": Boolean(), "output_kinds": _KINDS,
})
def assert_packed_equals_unpacked(model, examples: Sequence[dict], *,
                                  max_length: int | None = None,
                                  packs: Sequence[Sequence[int]] | None = None,
                                  max_sequences_per_pack: int | None = None,
                                  atol: float = 1e-5,
                                  rtol: float = 1e-5,
                                  check_gradients: bool = True,
                                  output_kinds: dict | None = None):
    """Asserts that packing does not change outputs, losses or gradients.

    Runs `examples` unpacked (one per row, padded to `max_length`) and packed
    (`packs`, default next fit), then compares every sequence's outputs,
    every loss statistic and the loss of `model.compute_loss`, and the
    gradients of that loss with respect to every trainable variable
    (TensorFlow and JAX backends), all to `atol` (outputs to the smaller of `atol`
    and `rtol` times their largest magnitude; losses and each variable's
    gradient to `atol` times their largest magnitude where it exceeds 1).
    Run it in float32.

    Example:

    >>> from tfpack.models import CausalLM
    >>> from tfpack.testing import next_token_labels
    >>> model = CausalLM(vocabulary_size=30, num_layers=1, hidden_dim=8,
    ...                  num_heads=2, intermediate_dim=16)
    >>> examples = [{"input_ids": ids, "labels": next_token_labels(ids)}
    ...             for ids in ([3, 4, 5], [6, 7], [8, 9, 10, 11])]
    >>> result = assert_packed_equals_unpacked(model, examples, max_length=6)
    >>> result.max_gradient_difference < 1e-5
    True

    Args:
        model: a tfpack model, or any model with the same calling convention
            (`loss_statistics` and `compute_loss` for the loss checks).
        examples: unpacked examples (see `tfpack.testing.pack_examples`).
        max_length: row length of both batches; default twice the longest
            example.
        packs: example indices per pack; default next fit.
        max_sequences_per_pack: K of the packed batch.
        atol: tolerance of every comparison.
        rtol: outputs also agree to this fraction of their largest
            magnitude (see `assert_no_cross_contamination`).
        check_gradients: also compare gradients.
        output_kinds: see `assert_no_cross_contamination`.

    Returns:
        `EquivalenceResult`.

    Raises:
        AssertionError: naming the first output, loss statistic or variable
            that differs.
    """
    lengths = [len(e["input_ids"]) for e in examples]
    max_length = max_length or 2 * max(lengths)
    predictions = [len(e.get("masked_lm_positions", ())) for e in examples]
    unpacked = pack_examples(examples, max_length,
                             packs=[[i] for i in range(len(examples))],
                             max_sequences_per_pack=1,
                             max_predictions=max(predictions) or None)
    packed = pack_examples(examples, max_length, packs=packs,
                           max_sequences_per_pack=max_sequences_per_pack)
    # Where each example landed: (row, 1-based slot) of the packed batch.
    if packs is None:
        packs = next_fit(lengths, max_length, max_sequences_per_pack)
    where = {index: (row, slot + 1) for row, pack in enumerate(packs)
             for slot, index in enumerate(pack)}

    call = _inference(model, unpacked)
    out_unpacked = call(unpacked)
    out_packed = call(packed)
    kinds = _output_kinds(model, out_packed, packed, output_kinds)
    largest = {name: 0.0 for name in out_packed}
    tolerance = _tolerances(out_unpacked, atol, rtol)
    checked = 0
    for index in range(len(examples)):
        a = _sequence_outputs(out_unpacked, unpacked, kinds, index, 1)
        b = _sequence_outputs(out_packed, packed, kinds, *where[index])
        for name in a:
            difference = _max_difference(a[name], b[name])
            largest[name] = max(largest[name], difference)
            checked += 1
            if not difference <= tolerance[name]:
                raise AssertionError(
                    f"Packed and unpacked differ: output {name!r} of example "
                    f"{index} by {difference:.3g} (tolerance {tolerance[name]:.3g}).")

    loss_difference = gradient_difference = None
    if getattr(model, "loss_terms", ()):
        values_a, gradients_a = _loss_and_gradients(model, unpacked,
                                                    check_gradients)
        values_b, gradients_b = _loss_and_gradients(model, packed,
                                                    check_gradients)
        loss_difference = 0.0
        for key in values_a:
            difference = abs(values_a[key] - values_b[key])
            loss_difference = max(loss_difference, difference)
            if not difference <= atol * max(1.0, abs(values_a[key])):
                raise AssertionError(
                    f"Packed and unpacked differ: {key} is {values_a[key]!r} "
                    f"unpacked and {values_b[key]!r} packed (atol={atol}).")
        if check_gradients:
            gradient_difference = 0.0
            for variable, g_a, g_b in zip(model.trainable_variables,
                                          gradients_a, gradients_b):
                if g_a is None and g_b is None:
                    continue
                g_a = np.zeros(variable.shape) if g_a is None else g_a
                g_b = np.zeros(variable.shape) if g_b is None else g_b
                difference = _max_difference(g_a, g_b)
                gradient_difference = max(gradient_difference, difference)
                # As the losses: atol, relative beyond magnitude 1 (float32
                # sums of large gradients round in the 6th digit).
                scale = max(1.0, float(np.abs(g_a).max(initial=0.0)))
                if not difference <= atol * scale:
                    raise AssertionError(
                        "Packed and unpacked differ: gradient of "
                        f"{variable.path} by {difference:.3g} (atol={atol}, "
                        f"largest gradient {scale:.3g}).")
    return EquivalenceResult(checked, largest, loss_difference,
                             gradient_difference)
