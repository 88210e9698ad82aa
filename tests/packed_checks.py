"""Helpers for the tfpack.data tests: build datasets from lists, unpack packs."""

from __future__ import annotations

import collections

import numpy as np
import tensorflow as tf

RAGGED = ("input_ids", "token_type_ids", "masked_lm_positions", "masked_lm_ids",
          "masked_lm_weights")


def dataset_from_examples(examples: list[dict]) -> tf.data.Dataset:
    """A dataset of dense rank-1 / scalar tensors from a list of dicts of lists."""
    names = list(examples[0])
    tensors = {}
    for name in names:
        rows = [e[name] for e in examples]
        if np.ndim(rows[0]) == 0:
            tensors[name] = tf.constant(np.asarray(rows, np.int32))
        else:
            dtype = np.float32 if name == "masked_lm_weights" else np.int32
            tensors[name] = tf.RaggedTensor.from_row_lengths(
                np.asarray([v for r in rows for v in r], dtype).reshape(-1),
                np.asarray([len(r) for r in rows], np.int64))
    return tf.data.Dataset.range(len(examples)).map(
        lambda i: {n: t[i] for n, t in tensors.items()})


def unpack(pack: dict) -> list[dict]:
    """The examples of one pack, recovered through `sequence_ids`.

    Asserts the layout invariants on the way: sequences contiguous and in
    order, position_ids restarting at 0, cls_positions at the first token,
    padding all 0, masked-LM predictions inside their own sequence.
    """
    pack = {k: np.asarray(v) for k, v in pack.items()}
    seq = pack["sequence_ids"]
    L = len(seq)
    used = int((seq > 0).sum())
    assert (seq[used:] == 0).all() and (seq[:used] > 0).all(), seq
    assert (np.diff(seq[:used]) >= 0).all() and (np.diff(seq[:used]) <= 1).all(), seq
    assert (pack["input_ids"][used:] == 0).all() and (pack["position_ids"][used:] == 0).all()
    mask = pack["sequence_mask"]
    count = int(mask.sum())
    assert (mask[:count] == 1).all() and (mask[count:] == 0).all(), mask
    assert used == 0 or seq[used - 1] == count
    out = []
    for k in range(1, count + 1):
        where = np.flatnonzero(seq == k)
        start, n = int(where[0]), len(where)
        assert (where == np.arange(start, start + n)).all()
        assert pack["cls_positions"][k - 1] == start
        assert (pack["position_ids"][where] == np.arange(n)).all()
        example = {"input_ids": pack["input_ids"][where].tolist()}
        if "token_type_ids" in pack:
            example["token_type_ids"] = pack["token_type_ids"][where].tolist()
        if "masked_lm_positions" in pack:
            m = np.flatnonzero(pack["masked_lm_sequence_ids"] == k)
            positions = pack["masked_lm_positions"][m]
            assert ((positions >= start) & (positions < start + n)).all()
            example["masked_lm_positions"] = (positions - start).tolist()
            example["masked_lm_ids"] = pack["masked_lm_ids"][m].tolist()
            example["masked_lm_weights"] = pack["masked_lm_weights"][m].tolist()
        for name in ("next_sentence_labels",):
            if name in pack:
                example[name] = int(pack[name][k - 1])
        if "labels" in pack and pack["labels"].shape == mask.shape:
            example["labels"] = int(pack["labels"][k - 1])
        if "labels" in pack and pack["labels"].shape == (L,):
            want = example["input_ids"][1:] + [-100]
            assert pack["labels"][where].tolist() == want
        out.append(example)
    if "labels" in pack and pack["labels"].shape == (L,):
        assert (pack["labels"][used:] == -100).all()
    if "masked_lm_sequence_ids" in pack:
        real = pack["masked_lm_weights"] > 0
        assert (pack["masked_lm_positions"][pack["masked_lm_sequence_ids"] == 0] == 0).all()
        assert (pack["masked_lm_sequence_ids"][real] > 0).all()
    for name in ("next_sentence_labels",):
        if name in pack:
            assert (pack[name][count:] == 0).all()
    return out


def canonical(example: dict) -> tuple:
    return tuple(sorted(
        (k, tuple(np.asarray(v).tolist()) if np.ndim(v) else int(v))
        for k, v in example.items()))


def unpack_all(packs) -> list[dict]:
    return [e for p in packs for e in unpack(p)]


def assert_same_examples(inputs: list[dict], packs) -> None:
    """Unpacking gives back exactly the inputs, each once (any order); with
    ``example_ids``, each slot names its own input and the ids over all packs
    are a permutation of ``range(len(inputs))`` (-1 in empty slots)."""
    packs = list(packs)
    got = collections.Counter(canonical(e) for e in unpack_all(packs))
    want = collections.Counter(canonical(e) for e in inputs)
    assert got == want
    if packs and all("example_ids" in p for p in packs):
        assert_example_ids(inputs, packs)


def assert_example_ids(inputs: list[dict], packs) -> None:
    """Every slot's ``example_ids`` is the index of its input; -1 in empty slots."""
    ids = []
    for pack in packs:
        examples = unpack(pack)
        index = np.asarray(pack["example_ids"])
        assert (index[len(examples):] == -1).all(), index
        for example, i in zip(examples, index[:len(examples)].tolist()):
            common = [k for k in example if k in inputs[i]]
            assert canonical({k: example[k] for k in common}) == canonical(
                {k: inputs[i][k] for k in common}), (i, example)
            ids.append(i)
    assert sorted(ids) == list(range(len(inputs)))
