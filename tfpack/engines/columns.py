"""Packs serialized straight from examples: the local engine's pass 2 without dense packs.

`tfpack.data.assemble` is where packed features are defined: it builds the
dense ``[P, L]`` arrays of a batch of packs (TensorFlow), which
`tfpack.formats.protos.encode_examples` then serializes. For the local engine
(``tfpack pack``) that detour costs most of the job: the examples are
gathered from the spill into ragged tensors, scattered into dense packs,
then read again to write their bytes. `pack_columns` describes the same
packs as `tfpack.formats.protos.Column` s instead: each feature's row is
made of runs of the examples' own values (or counts, offsets, ids) and its
padding, which the compiled encoder writes directly. The bytes are the ones
`ShardBuilder` writes through `assemble` (tested equal, feature by feature,
on generated packs; `tests/data/test_pack_columns.py`).

Per member (an example in a pack: ``k``-th of its pack, starting at token
``offset`` of the pack), the features of the BERT roles
(`tfpack.features.FeatureRoles.bert`):

- tokens (``input_ids``, ``token_type_ids``): its values;
  ``sequence_ids``: ``k + 1`` per token; ``position_ids``: ``0, 1, ...``;
- predictions: its values, ``masked_lm_positions`` shifted by ``offset``;
  ``masked_lm_weights`` its own (``1.0`` when absent);
  ``masked_lm_sequence_ids``: ``k + 1`` per prediction;
- per sequence: ``cls_positions`` = ``offset``, ``sequence_mask`` = 1.0,
  ``example_ids`` = its index in the input, ``next_sentence_labels``.

Example:

>>> import numpy as np
>>> roles = FeatureRoles("tokens", tokens=("input_ids",))
>>> values = {"input_ids": np.array([5, 6, 7, 8, 9], np.int32)}
>>> columns = pack_columns(values, {"tokens": np.array([3, 2])}, members=np.array([1, 0]),
...                        splits=np.array([0, 2]), sizes={"L": 6, "K": 2, "M": 1},
...                        roles=roles)
>>> {c.name: c.runs.tolist() for c in columns if c.runs is not None}["input_ids"]
[2, 3]
"""

from __future__ import annotations

import numpy as np

from tfpack import features as contract
from tfpack.data.features import packed_feature_names
from tfpack.features import FeatureRoles
from tfpack.engines.spill import SpillReader
from tfpack.formats.protos import Column

__all__ = ["pack_columns", "starts_of"]


def pack_columns(values: dict[str, np.ndarray] | SpillReader, counts: dict[str, np.ndarray], *,
                 members: np.ndarray, splits: np.ndarray, sizes: dict[str, int],
                 roles: FeatureRoles | None = None,
                 starts: dict[str, np.ndarray] | None = None) -> list[Column]:
    """The `Column` s of packs, for `tfpack.formats.protos.encode` with ``splits``.

    Args:
        values: feature -> its flat values, every example's back to back in
            input order (ragged features) or one per example (sequence
            features); or a `tfpack.engines.spill.SpillReader` of them, from
            which only the members are read, one positioned read each (pass
            2 of the local engine: memory bounded by the packs, not the
            dataset).
        counts: ``"tokens"`` (and ``"predictions"`` when ``roles`` has
            predictions) -> int ``[N]`` per example.
        members: int ``[n]``, the examples (input indices) of the packs,
            pack after pack.
        splits: int ``[P + 1]``, pack ``p`` holds ``members[splits[p]:splits[p + 1]]``.
        sizes: ``{"L": ..., "K": ..., "M": ...}``.
        roles: default `FeatureRoles.bert` (the roles of Google's records).
        starts: ``counts``' exclusive cumulative sums (where each example's
            values start in ``values``; `starts_of`), computed when not
            given: pass them when packing a dataset in many calls, which
            then cost their own packs' size, not the dataset's.

    Returns:
        One `Column` per feature of `packed_feature_names` (``roles``).

    Raises:
        ValueError: ``roles`` has a feature this function cannot make (a
            ``next_token`` label); use `tfpack.data.assemble` there.
    """
    roles = roles or FeatureRoles.bert()
    members = np.asarray(members, np.int64)
    splits = np.asarray(splits, np.int64)
    per_pack = np.diff(splits)
    k = np.arange(len(members), dtype=np.int64) - np.repeat(splits[:-1], per_pack)
    starts = starts or starts_of(counts)
    token_runs = np.asarray(counts["tokens"], np.int64)[members]
    token_starts = starts["tokens"][members]
    ends = np.concatenate([[0], np.cumsum(token_runs)])
    offset = ends[:-1] - np.repeat(ends[splits[:-1]], per_pack)  # first token in its pack
    columns: list[Column] = []

    def add(name, **how):
        entry = contract.feature(name, roles.task)
        columns.append(Column(name, sizes[entry.dimension], is_float=entry.dtype == "float32",
                              padding=entry.padding, **how))

    # Each spilled feature's members: where their values start, how many each has.
    wanted = {name: (token_starts, token_runs) for name in roles.tokens}
    if roles.predictions:
        runs = np.asarray(counts["predictions"], np.int64)[members]
        first = starts["predictions"][members]
        wanted.update({name: (first, runs) for name in roles.predictions if name in values})
    wanted.update({name: (members, None) for name in roles.sequence})
    if isinstance(values, SpillReader):  # the members' values, read now: one read a member
        read = values.read({n: w[0] for n, w in wanted.items()},
                           {n: w[1] for n, w in wanted.items() if w[1] is not None})
    else:
        read = {name: (values[name], at) for name, (at, _) in wanted.items()}

    def runs_of(name):  # the members' values: `values=`, `starts=`
        return dict(zip(("values", "starts"), read[name]))

    for name in roles.tokens:
        add(name, runs=token_runs, **runs_of(name))
    add("sequence_ids", base=k + 1, runs=token_runs)
    add("position_ids", ramp=True, runs=token_runs)
    for name in roles.predictions:
        shift = offset if name in roles.shifted else None
        if name in values:
            add(name, runs=runs, base=shift, **runs_of(name))
        else:  # an absent optional prediction feature is 1.0 (`source="ones"`)
            add(name, constant=1.0, runs=runs)
    add("cls_positions", base=offset)
    add("sequence_mask", constant=1.0)
    add("example_ids", base=members)
    for name in roles.sequence:
        add(name, base=offset if name in roles.shifted else None, **runs_of(name))
    for name in roles.derived:
        if contract.feature(name, roles.task).packing != "prediction":
            raise ValueError(f"`pack_columns` makes no {name!r} (derived per "
                             f"{contract.feature(name, roles.task).packing}); use `assemble`")
        add(name, base=k + 1, runs=runs)  # `source="slot"`
    made = sorted(c.name for c in columns)
    if made != sorted(packed_feature_names(roles)):
        raise ValueError(f"`pack_columns` made {made}, the roles want "
                         f"{sorted(packed_feature_names(roles))}")
    return columns


def starts_of(counts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Where each example's values start in the flat values: ``counts``' exclusive cumsums.

    >>> starts_of({"tokens": np.array([3, 1, 2])})["tokens"].tolist()
    [0, 3, 4]
    """
    return {name: np.cumsum(c, dtype=np.int64) - c for name, c in counts.items()}
