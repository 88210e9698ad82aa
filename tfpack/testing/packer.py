"""A small pure-numpy packer for tests: unpacked examples -> packed features.

This is a reference, not the input pipeline (`tfpack.data` is): it places
examples into packs in a given or next-fit order and writes the DESIGN.md
features, so equivalence tests need nothing but numpy.

An *example* is a dict of one sequence's features:

- `input_ids` (required), optional `token_type_ids`: `[n]`;
- optional masked-LM features `masked_lm_positions` (indices inside the
  example), `masked_lm_ids`, optional `masked_lm_weights`: `[m]`;
- optional per-sequence label `next_sentence_labels` or `labels`: a scalar;
- optional causal-LM `labels`: `[n]` next-token targets, -100 = ignored,
  and optional `loss_weights`: `[n]` float weight of each target.

Names, dtypes, shapes and padding values come from the feature contract
(`tfpack.features`).

Worked example: examples of lengths 2 and 3 in one pack of length 6::

    input_ids    [a a b b b 0]
    sequence_ids [1 1 2 2 2 0]
    position_ids [0 1 0 1 2 0]
    cls_positions [0 2], sequence_mask [1 1]

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
from tfpack.errors import TfpackError
from tfpack.features import IGNORE_LABEL


def next_token_labels(input_ids: Sequence[int]) -> np.ndarray:
    """Causal-LM targets of one sequence: the next token, -100 at the end.

    >>> next_token_labels([5, 6, 7]).tolist()
    [6, 7, -100]
    """
    ids = np.asarray(input_ids, np.int32)
    return np.concatenate([ids[1:], [IGNORE_LABEL]]).astype(np.int32)


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


def _is_token_labels(example) -> bool:
    labels = example.get("labels")
    return labels is not None and np.ndim(labels) == 1


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
    has_mlm = "masked_lm_positions" in examples[0]
    m = max_predictions
    if has_mlm and m is None:
        m = max(sum(len(examples[i]["masked_lm_positions"]) for i in p)
                for p in packs)
    batch = len(packs)
    token_labels = _is_token_labels(examples[0])
    # `labels` is [L] for a causal LM and [K] (one class per sequence) else.
    labels_task = "causal_lm" if token_labels else "classification"
    sizes = {"L": max_length, "K": k, "M": m}
    names = ["input_ids", "sequence_ids", "position_ids", "cls_positions",
             "sequence_mask"]
    names += [n for n in ("token_type_ids", "next_sentence_labels", "labels",
                          "loss_weights") if n in examples[0]]
    if has_mlm:
        names += ["masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
                  "masked_lm_sequence_ids"]
    contract.check_names(list(examples[0]), "the examples")
    out = {}
    for name in names:
        entry = contract.feature(name, labels_task if name == "labels" else None)
        out[name] = np.full((batch, sizes[entry.dimension]), entry.padding,
                            entry.dtype)

    for row, pack in enumerate(packs):
        start, prediction = 0, 0
        for slot, index in enumerate(pack):
            example, n = examples[index], lengths[index]
            span = slice(start, start + n)
            out["input_ids"][row, span] = example["input_ids"]
            out["sequence_ids"][row, span] = slot + 1
            out["position_ids"][row, span] = np.arange(n)
            out["cls_positions"][row, slot] = start
            out["sequence_mask"][row, slot] = 1.0
            if "token_type_ids" in out:
                out["token_type_ids"][row, span] = example["token_type_ids"]
            if token_labels:
                out["labels"][row, span] = example["labels"]
                if "loss_weights" in out:
                    out["loss_weights"][row, span] = example["loss_weights"]
            for name in ("next_sentence_labels", "labels"):
                if name in out and not token_labels:
                    out[name][row, slot] = example[name]
            if has_mlm:
                positions = np.asarray(example["masked_lm_positions"])
                count = len(positions)
                if prediction + count > m:
                    raise TfpackError(
                        "A pack must hold at most max_predictions masked "
                        f"tokens. Received: max_predictions={m}")
                p = slice(prediction, prediction + count)
                out["masked_lm_positions"][row, p] = positions + start
                out["masked_lm_ids"][row, p] = example["masked_lm_ids"]
                out["masked_lm_weights"][row, p] = example.get(
                    "masked_lm_weights", np.ones(count))
                out["masked_lm_sequence_ids"][row, p] = slot + 1
                prediction += count
            start += n
    return out
