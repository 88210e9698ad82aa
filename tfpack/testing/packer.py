"""A small pure-numpy packer for tests: unpacked examples -> packed features.

This is a reference, not the input pipeline (`tfpack.data` is): it places
examples into packs in a given or next-fit order and writes the DESIGN.md
features, so equivalence tests need nothing but numpy.

An *example* is a dict of one sequence's features, those of one registered
task declaration (`tfpack.tasks`, chosen by `tfpack.tasks.detect` from the
features' ranks) and the core ones:

- `input_ids` (required), optional `token_type_ids`: `[n]`;
- token features (causal-LM `labels`: `[n]` next-token targets, -100 =
  ignored, optional `loss_weights`): `[n]`;
- per-sequence features (`next_sentence_labels`, classification `labels`):
  a scalar; positions declared ``shift=True`` get the sequence's offset;
- prediction features (`masked_lm_positions` (indices inside the example,
  shifted), `masked_lm_ids`, optional `masked_lm_weights`): `[m]`.

Only the features the examples carry are packed, plus the core ones and,
with prediction features, those the packer fills (`masked_lm_weights` 1.0,
`masked_lm_sequence_ids`). Names, dtypes, shapes, padding values and how
each feature packs come from the declarations.

Worked example: examples of lengths 2 and 3 in one pack of length 6::

    input_ids    [a a b b b 0]
    sequence_ids [1 1 2 2 2 0]
    position_ids [0 1 0 1 2 0]
    cls_positions [0 2], sequence_mask [1 1], example_ids [0 1]

>>> import numpy as np
>>> packed = pack_examples([{"input_ids": [7, 8]}, {"input_ids": [9, 9, 9]}],
...                        max_length=6)
>>> packed["position_ids"].tolist()
[[0, 1, 0, 1, 2, 0]]
>>> packed["cls_positions"].tolist(), packed["sequence_mask"].tolist()
([[0, 2]], [[1.0, 1.0]])
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tfpack import features as contract
from tfpack import tasks
from tfpack.errors import TfpackError
from tfpack.features import IGNORE_LABEL
from tfpack.params import Anything, Integer, TokenIds, validate_params

# How a check's examples are grouped into rows (`next_fit`'s packs by default).
_PACKS = Anything("lists of example indices, one per row, checked below")


@validate_params({"input_ids": TokenIds()})
def next_token_labels(input_ids: Sequence[int]) -> np.ndarray:
    """Causal-LM targets of one sequence: the next token, -100 at the end.

    >>> next_token_labels([5, 6, 7]).tolist()
    [6, 7, -100]
    """
    ids = np.asarray(input_ids, np.int32)
    return np.concatenate([ids[1:], [IGNORE_LABEL]]).astype(np.int32)


@validate_params({"lengths": Anything("one length per example"), "max_length": Integer(1),
                  "max_sequences_per_pack": [None, Integer(1)]})
def next_fit(lengths: Sequence[int], max_length: int,
             max_sequences_per_pack: int | None = None) -> list[list[int]]:
    """Groups example indices into packs in input order (next fit).

    >>> next_fit([3, 2, 4, 1], max_length=5)
    [[0, 1], [2, 3]]
    """
    packs, current, used = [], [], 0
    for index, length in enumerate(lengths):
        full = (max_sequences_per_pack is not None
                and len(current) >= max_sequences_per_pack)
        if current and (used + length > max_length or full):
            packs.append(current)
            current, used = [], 0
        current.append(index)
        used += length
    if current:
        packs.append(current)
    return packs


def _packed_entries(examples: Sequence[dict]) -> tuple[str | None, list]:
    """``(prediction counter, contract entries)`` of the features to pack.

    Each feature an example carries is packed as its declaration says: the
    detected task's (`tfpack.tasks.detect`) when it declares the name, else
    another task's declaration of that name whose packing fits the value's
    rank (a scalar packs per sequence).
    """
    first = examples[0]
    ranks = {n: np.ndim(v) for n, v in first.items()}
    detected, _ = tasks.detect(ranks)
    entries = [f for f in tasks.CORE_FEATURES if f.source == "packer" or f.name in first]
    core = {f.name for f in tasks.CORE_FEATURES}
    for name in first:
        if name in core:
            continue
        for spec in (detected,) + tasks.specs():
            entry = next((f for f in spec.features if f.name == name and
                          (f.packing == "sequence") == (ranks[name] == 0)), None)
            if entry is not None:
                entries.append(entry)
                break
    counter = next((f for f in entries if f.packing == "prediction" and f.source == "read"),
                   None)
    if counter is not None:
        spec = tasks.get(counter.tasks[0])
        entries += [f for f in spec.features if f.packing == "prediction"
                    and f.source in ("ones", "slot") and f.name not in first]
    return counter and counter.name, entries


@validate_params({
    "examples": Anything("one dict of features per sequence, checked below"),
    "max_length": Integer(1), "packs": [None, _PACKS],
    "max_sequences_per_pack": [None, Integer(1)], "max_predictions": [None, Integer(0)],
})
def pack_examples(examples: Sequence[dict], max_length: int,
                  packs: Sequence[Sequence[int]] | None = None,
                  max_sequences_per_pack: int | None = None,
                  max_predictions: int | None = None) -> dict[str, np.ndarray]:
    """Packs `examples` into a batch of DESIGN.md features.

    Args:
        examples: one dict per sequence (see the module docstring).
        max_length: L, the length of every row.
        packs: lists of example indices, one list per row. Default: next fit
            in input order under `max_length` and `max_sequences_per_pack`.
            `[[0], [1], ...]` gives the unpacked batch (one example per row).
        max_sequences_per_pack: K; default the most examples of any pack.
        max_predictions: M; default the most predictions of any pack.

    Returns:
        dict of numpy arrays with a leading batch dimension; only features
        the examples carry (plus the structural ones) are present.
    """
    lengths = [len(e["input_ids"]) for e in examples]
    if not lengths or min(lengths) < 1 or max(lengths) > max_length:
        raise TfpackError(
            f"Every example must have 1..{max_length} tokens. "
            f"Received: lengths={lengths}")
    if packs is None:
        packs = next_fit(lengths, max_length, max_sequences_per_pack)
    packs = [list(p) for p in packs]
    for pack in packs:
        if sum(lengths[i] for i in pack) > max_length:
            raise TfpackError(f"A pack must fit in max_length={max_length}. "
                              f"Received: pack={pack}")
    k = max_sequences_per_pack or max(len(p) for p in packs)
    if max(len(p) for p in packs) > k:
        raise TfpackError("A pack must hold at most max_sequences_per_pack "
                          f"sequences. Received: max_sequences_per_pack={k}")
    contract.check_names(list(examples[0]), "the examples")
    counter, entries = _packed_entries(examples)
    m = max_predictions
    if counter is not None and m is None:
        m = max(sum(len(examples[i][counter]) for i in p) for p in packs)
    batch = len(packs)
    sizes = {"L": max_length, "K": k, "M": m}
    out = {f.name: np.full((batch, sizes[f.dimension]), f.padding, f.dtype) for f in entries}
    structural = {"sequence_ids", "position_ids", "cls_positions", "sequence_mask",
                  "example_ids"}

    for row, pack in enumerate(packs):
        start, prediction = 0, 0
        for slot, index in enumerate(pack):
            example, n = examples[index], lengths[index]
            span = slice(start, start + n)
            out["sequence_ids"][row, span] = slot + 1
            out["position_ids"][row, span] = np.arange(n)
            out["cls_positions"][row, slot] = start
            out["sequence_mask"][row, slot] = 1.0
            out["example_ids"][row, slot] = index
            count = len(example[counter]) if counter is not None else 0
            if prediction + count > (m or 0) and count:
                raise TfpackError(
                    "A pack must hold at most max_predictions masked "
                    f"tokens. Received: max_predictions={m}")
            p = slice(prediction, prediction + count)
            for entry in entries:
                name = entry.name
                if name in structural:
                    continue
                shift = start if entry.shift else 0
                if entry.packing == "token":
                    out[name][row, span] = example[name]
                elif entry.packing == "sequence":
                    out[name][row, slot] = np.asarray(example[name]) + shift
                elif entry.source == "slot":
                    out[name][row, p] = slot + 1
                else:
                    out[name][row, p] = np.asarray(example.get(name, np.ones(count))) + shift
            prediction += count
            start += n
    return out
