"""Every input record checked in one place, before anything is packed.

Two kinds of records enter tfpack:

- Google ``create_pretraining_data`` records (`tfpack pack`,
  `tfpack.data.read_google_records`), padded to ``max_seq_length`` and
  ``max_predictions_per_seq``: `google_problems` checks a batch of them
  (TensorFlow); `google_scan` checks the same rules on the records' bytes,
  compiled, for the scan of `tfpack pack` (tested equal).
- unpacked examples of a `tf.data.Dataset` (`tfpack.data.pack`, offline and
  streaming): `example_problems` checks a batch of them under their
  `FeatureRoles`.

Both return one code per record, 0 when it is valid, else the first rule of
`RULES` it breaks (a `Rule`: a name, what must hold, the features to show;
code ``CODE[name]``); `describe` turns a code into the message of the one
`TfpackError` that names the record and the rule. The rules:

- every feature present with the right dtype; ids inside int32 (never wrapped);
- ``input_mask``: 0s and 1s only, a prefix of 1s (at least one) then 0s;
  ``input_ids`` and ``segment_ids`` one value per ``input_mask`` value;
- masked LM: positions, ids and weights of one length; weights finite and
  >= 0, the real predictions (weight > 0) before the padding slots (so
  stripping the padding never drops a real prediction); every real position
  inside its example: ``0 <= position < length``;
- ``next_sentence_labels``: exactly one value.

Example:

>>> import tensorflow as tf
>>> from tfpack.formats import validation
>>> from tfpack.features import FeatureRoles
>>> batch = {"input_ids": tf.ragged.constant([[5, 6, 7], [8]]),
...          "masked_lm_positions": tf.ragged.constant([[2], [1]]),
...          "masked_lm_ids": tf.ragged.constant([[7], [9]]),
...          "next_sentence_labels": tf.constant([0, 1])}
>>> codes = validation.example_problems(batch, FeatureRoles.bert().present(batch))
>>> codes.numpy().tolist(), validation.RULES[int(codes[1])].name
([0, 13], 'masked_lm_positions_inside')
>>> validation.CODE["masked_lm_positions_inside"]
13
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import tensorflow as tf

from tfpack.errors import TfpackError
from tfpack.packing.histograms import MAX_LENGTH_LIMIT, validate_max_length
from tfpack.formats.compiled import wire

__all__ = ["GOOGLE_FEATURES", "Rule", "RULES", "CODE", "INT32_MAX", "MAX_LENGTH",
           "google_widths", "google_rows", "dense_first", "google_scan", "google_problems",
           "example_problems", "describe", "check_sizes", "check_example_codes"]

GOOGLE_FEATURES = {
    "input_ids": tf.int64, "input_mask": tf.int64, "segment_ids": tf.int64,
    "masked_lm_positions": tf.int64, "masked_lm_ids": tf.int64,
    "masked_lm_weights": tf.float32, "next_sentence_labels": tf.int64,
}
INT32_MAX = 2**31 - 1
MAX_LENGTH = MAX_LENGTH_LIMIT  # the largest `max_length` (L): one definition, in tfpack.packing



class Rule(NamedTuple):
    """One check every record must pass: its name, what must hold, the features shown."""

    name: str
    requirement: str
    shown: tuple[str, ...] = ()


# Code -> rule (code 0: valid). Order matters: a record reports the first rule
# it breaks, and later rules may assume the earlier ones. Code refers to rules
# by name (`CODE`); the numbers exist only inside the per-record code tensors.
RULES = (
    None,
    Rule("input_ids_present", "`input_ids` present and not empty", ("input_ids",)),
    Rule("input_mask_length", "`input_mask` with one value per `input_ids` value",
         ("input_ids", "input_mask")),
    Rule("segment_ids_length", "`segment_ids` with one value per `input_ids` value",
         ("input_mask", "segment_ids")),
    Rule("input_mask_binary", "`input_mask` of 0s and 1s only", ("input_mask",)),
    Rule("input_mask_prefix", "`input_mask` a prefix of 1s (at least one) then 0s only",
         ("input_mask",)),
    Rule("input_ids_int32", "`input_ids` inside [0, 2**31)", ("input_ids",)),
    Rule("segment_ids_int32", "`segment_ids` inside [0, 2**31)", ("segment_ids",)),
    Rule("masked_lm_lengths",
         "`masked_lm_positions`, `masked_lm_ids` and `masked_lm_weights` of one length",
         ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")),
    Rule("masked_lm_weights_valid", "`masked_lm_weights` finite and >= 0",
         ("masked_lm_weights",)),
    Rule("real_predictions_first",
         "real predictions (weight > 0) before the padding slots (weight 0)",
         ("masked_lm_weights",)),
    Rule("masked_lm_ids_int32", "`masked_lm_ids` of real predictions inside [0, 2**31)",
         ("masked_lm_ids", "masked_lm_weights")),
    Rule("next_sentence_label_single", "`next_sentence_labels` with exactly one value inside "
         "int32", ("next_sentence_labels",)),
    Rule("masked_lm_positions_inside",
         "real `masked_lm_positions` inside the example: 0 <= position < length",
         ("input_mask", "masked_lm_positions", "masked_lm_weights")),
    Rule("token_feature_lengths", "token features with one value per `input_ids` value"),
    Rule("int_features_int32", "int features inside int32 [-2**31, 2**31)"),
)
CODE = {rule.name: code for code, rule in enumerate(RULES) if rule is not None}


def _first_broken(checks: list[tuple[str, tf.Tensor]]) -> tf.Tensor:
    """Per record, the code of the first rule (by name) whose check is False (0 if all hold)."""
    checks = [(CODE[name], ok) for name, ok in checks]
    codes = tf.zeros_like(checks[0][1], tf.int32)
    for code, ok in sorted(checks, key=lambda c: -c[0]):
        codes = tf.where(ok, codes, tf.constant(code, tf.int32))
    return codes


class _Rows:
    """A batch of variable-length rows as dense ``values`` ``[B, W]`` + ``lengths`` ``[B]``.

    Dense ops trace and run much faster than ragged ones; ``all`` ignores the
    padding past each row's length.
    """

    def __init__(self, values, lengths, sparse=None):
        self.values = values
        self.lengths = tf.cast(lengths, tf.int64)
        self.index = tf.range(tf.shape(values, out_type=tf.int64)[1])[None, :]
        self._sparse = sparse

    @classmethod
    def of(cls, tensor):
        if isinstance(tensor, tf.SparseTensor):  # from VarLenFeature: rows left-aligned
            rows = tf.shape(tensor, out_type=tf.int64)[0]
            lengths = tf.math.unsorted_segment_sum(
                tf.ones_like(tensor.indices[:, 0]), tensor.indices[:, 0], rows)
            return cls(tf.sparse.to_dense(tensor), lengths, tensor)
        return cls(tensor.to_tensor(), tensor.row_lengths())

    def first(self, count):
        """The first ``count`` values of each row, back to back (flat, rows in order)."""
        if self._sparse is not None:  # only the values the records hold, not the dense padding
            row, column = self._sparse.indices[:, 0], self._sparse.indices[:, 1]
            return tf.boolean_mask(self._sparse.values, column < tf.gather(count, row))
        return tf.boolean_mask(self.values, self.index < count[:, None])

    def all(self, condition, first=None):
        """Per row: ``condition`` holds on its values (only the ``first`` ones)."""
        stop = self.lengths if first is None else tf.minimum(first, self.lengths)
        return tf.reduce_all(condition | (self.index >= stop[:, None]), axis=1)

    def in_range(self, low, high, first=None):
        return self.all((self.values >= low) & (self.values <= high), first)

    def prefix(self, condition, count):
        """Per row: ``condition`` holds exactly on its first ``count`` values."""
        return self.all(tf.equal(condition, self.index < count[:, None]))


def google_widths(record: bytes) -> dict[str, int] | None:
    """Values of each Google feature in one serialized record (``None``: not all there).

    Google's ``create_pretraining_data`` pads every record of a file to the
    same widths (``max_seq_length``, ``max_predictions_per_seq``, 1): the
    widths of a file's first record let `google_rows` parse the others
    dense, several times faster than as variable-length features.

    >>> from tfpack.formats.records import google_example
    >>> google_widths(google_example([101, 7, 102], [0, 0, 0], [1], [8], 0,
    ...                              max_seq_length=8, max_predictions_per_seq=2))["input_ids"]
    8
    """
    try:
        features = tf.train.Example.FromString(record).features.feature
    except Exception:  # noqa: BLE001 - any decoding failure: no widths, the slow path says why
        return None
    widths = {}
    for name, dtype in GOOGLE_FEATURES.items():
        kind = "float_list" if dtype == tf.float32 else "int64_list"
        if name not in features or features[name].WhichOneof("kind") != kind:
            return None
        widths[name] = len(getattr(features[name], kind).value)
    return widths


def google_rows(serialized: tf.Tensor, widths: dict[str, int] | None = None
                ) -> dict[str, "_Rows"]:
    """Parse a batch of Google records into dense rows, one `_Rows` per feature.

    With ``widths`` (`google_widths`), every record must have exactly these
    numbers of values, else `tf.errors.InvalidArgumentError`: callers then
    parse that batch again without them (variable-length, any widths). Both
    give the same rows for the same records.

    >>> from tfpack.formats.records import google_example
    >>> record = google_example([101, 7, 102], [0, 0, 0], [1], [8], 0,
    ...                         max_seq_length=8, max_predictions_per_seq=2)
    >>> rows = google_rows(tf.constant([record]), google_widths(record))
    >>> rows["input_mask"].values.numpy().tolist(), rows["masked_lm_ids"].lengths.numpy()
    ([[1, 1, 1, 0, 0, 0, 0, 0]], array([2]))
    """
    if widths is None:
        parsed = tf.io.parse_example(
            serialized, {n: tf.io.VarLenFeature(d) for n, d in GOOGLE_FEATURES.items()})
        return {name: _Rows.of(t) for name, t in parsed.items()}
    parsed = tf.io.parse_example(
        serialized, {n: tf.io.FixedLenFeature([widths[n]], d) for n, d in GOOGLE_FEATURES.items()})
    count = tf.shape(serialized, out_type=tf.int64)[:1]
    return {name: _Rows(t, tf.fill(count, tf.constant(widths[name], tf.int64)))
            for name, t in parsed.items()}


def dense_first(parser_for, batch: tf.Tensor, widths: dict[str, int] | None):
    """``(parser_for(widths)(batch), widths)``; ``parser_for(None)(batch)`` if that fails.

    ``parser_for``: widths as a tuple of items (or ``None``) -> a function
    built on `google_rows`, e.g. traced once per widths. The dense parse
    fails when a record of ``batch`` has other widths (or is bad): the
    variable-length parse then gives the same result, or the error. The
    widths returned are ``None`` after such a failure: callers parse the
    rest of the file variable-length, since a file of unpadded records (one
    width per record) fails every dense try, each failure costing a
    discarded parse and an error.

    >>> from tfpack.formats.records import google_example
    >>> record = google_example([101, 7, 102], [0, 0, 0], [1], [8], 0,
    ...                         max_seq_length=8, max_predictions_per_seq=2)
    >>> parser_for = lambda widths: lambda batch: google_rows(
    ...     batch, widths and dict(widths))["input_mask"].values.shape
    >>> dense_first(parser_for, tf.constant([record]), {**google_widths(record), "input_ids": 9})
    (TensorShape([1, 8]), None)
    """
    if widths is not None:
        try:
            return parser_for(tuple(widths.items()))(batch), widths
        except tf.errors.InvalidArgumentError:
            pass  # some record has other widths: parse them as variable-length
    return parser_for(None)(batch), None


def google_scan(records: list[bytes]) -> tuple | None:
    """`google_problems` of serialized records, compiled: parse and checks in one pass.

    The rules of `google_problems`, checked by `tfpack.formats._wire` on the
    records' bytes (tested equal on generated and damaged records), several
    times faster than parsing with TensorFlow. Records it does not decide
    (malformed, values not packed, a feature repeated or of another kind)
    are left to `google_problems`.

    Returns:
        ``None`` when some record is left to `google_problems`; else
        ``(codes, lengths, predictions, kept)`` as numpy, ``kept`` the
        values `tfpack.formats.records.scan_google_records` keeps (when
        every record is valid, else ``None``): ``input_ids``,
        ``segment_ids`` (int32, ``lengths`` each), ``masked_lm_positions``,
        ``masked_lm_ids`` (int32), ``masked_lm_weights`` (float32,
        ``predictions`` each), ``next_sentence_labels`` (int32, one each).

    >>> from tfpack.formats.records import google_example
    >>> record = google_example([101, 7, 102], [0, 0, 0], [1], [8], 0,
    ...                         max_seq_length=8, max_predictions_per_seq=2)
    >>> codes, lengths, predictions, kept = google_scan([record])
    >>> codes.tolist(), lengths.tolist(), kept[0].tolist()
    ([0], [3], [101, 7, 102])
    """
    codes, lengths, predictions, kept, counts = wire.scan_google(records)
    codes = np.frombuffer(codes, np.int32)
    if (codes < 0).any():
        return None
    if kept is not None:
        kept = tuple(np.frombuffer(k, np.float32 if i == 4 else np.int32, count=n)
                     for i, (k, n) in enumerate(zip(kept, counts)))
    return codes, np.frombuffer(lengths, np.int64), np.frombuffer(predictions, np.int64), kept


def google_problems(serialized: tf.Tensor | None = None, widths: dict[str, int] | None = None,
                    *, rows: dict | None = None):
    """Check a batch of serialized Google records.

    Returns ``(codes, lengths, predictions)``, each ``[B]``: the `RULES` code
    of each record (0: valid), its tokens and its real predictions. Raises
    `tf.errors.InvalidArgumentError` when a record cannot be parsed at all
    (not a `tf.train.Example`, or a feature of the wrong dtype), or, with
    ``widths`` (see `google_rows`), has other widths. ``rows``: the batch
    already parsed by `google_rows` (then ``serialized`` is not needed).
    """
    r = google_rows(serialized, widths) if rows is None else rows
    n = {name: rows.lengths for name, rows in r.items()}
    mask, weights = r["input_mask"], r["masked_lm_weights"]
    lengths = tf.reduce_sum(mask.values, axis=1)
    real = weights.values > 0
    predictions = tf.reduce_sum(tf.cast(real & (weights.index < n["masked_lm_weights"][:, None]),
                                        tf.int64), axis=1)
    positions = r["masked_lm_positions"].values
    checks = [
        ("input_ids_present", n["input_ids"] > 0),
        ("input_mask_length", n["input_mask"] == n["input_ids"]),
        ("segment_ids_length", n["segment_ids"] == n["input_ids"]),
        ("input_mask_binary", mask.all((mask.values == 0) | (mask.values == 1))),
        ("input_mask_prefix", mask.prefix(mask.values == 1, lengths) & (lengths > 0)),
        ("input_ids_int32", r["input_ids"].in_range(0, INT32_MAX)),
        ("segment_ids_int32", r["segment_ids"].in_range(0, INT32_MAX)),
        ("masked_lm_lengths", (n["masked_lm_positions"] == n["masked_lm_ids"])
            & (n["masked_lm_ids"] == n["masked_lm_weights"])),
        ("masked_lm_weights_valid",
         weights.all(tf.math.is_finite(weights.values) & (weights.values >= 0))),
        ("real_predictions_first", weights.prefix(real, predictions)),
        ("masked_lm_ids_int32", r["masked_lm_ids"].in_range(0, INT32_MAX, first=predictions)),
        ("next_sentence_label_single", (n["next_sentence_labels"] == 1)
             & r["next_sentence_labels"].in_range(-INT32_MAX - 1, INT32_MAX)),
        ("masked_lm_positions_inside", r["masked_lm_positions"].all(
            (positions >= 0) & (positions < lengths[:, None]), first=predictions)),
    ]
    return _first_broken(checks), lengths, predictions


def example_problems(batch: dict, roles) -> tf.Tensor:
    """`RULES` code of each unpacked example of a batch (0: valid).

    Args:
        batch: feature -> `tf.RaggedTensor` ``[B, None]`` (token and masked-LM
            features) or `tf.Tensor` ``[B]`` (per-sequence features).
        roles: the `FeatureRoles`, restricted to the features present.
    """
    rows = {n: _Rows.of(t) for n, t in batch.items() if isinstance(t, tf.RaggedTensor)}
    lengths = rows[roles.length_feature].lengths
    checks = [("token_feature_lengths", rows[n].lengths == lengths)
              for n in roles.tokens if n in rows]
    for name, values in batch.items():
        if values.dtype == tf.int64:
            checks.append(("int_features_int32",
                           rows[name].in_range(-INT32_MAX - 1, INT32_MAX) if name in rows
                           else (values >= -INT32_MAX - 1) & (values <= INT32_MAX)))
    if roles.predictions:
        count = rows[roles.predictions[0]].lengths
        same = tf.ones_like(count, tf.bool)
        for name in roles.predictions[1:]:
            if name not in rows:
                continue
            same &= rows[name].lengths == count
            if rows[name].values.dtype.is_floating:
                values = rows[name].values
                checks.append(("masked_lm_weights_valid",
                               rows[name].all(tf.math.is_finite(values) & (values >= 0))))
        checks.append(("masked_lm_lengths", same))
        for name in roles.predictions:
            if name in roles.shifted:
                positions = rows[name]
                inside = (positions.values >= 0) & (
                    positions.values < tf.cast(lengths, positions.values.dtype)[:, None])
                checks.append(("masked_lm_positions_inside", positions.all(inside)))
    return _first_broken(checks)


def describe(code: int, where: str, values: dict | None = None) -> str:
    """The one-line message for a record breaking rule ``code``, naming the rule.

    ``values``: feature -> list of the record's values, shown (shortened)
    for the features the rule is about.
    """
    rule = RULES[code]
    shown = ""
    if values:
        names = rule.shown or tuple(values)
        parts = [f"{n}={_short(values[n])}" for n in names if n in values]
        missing = [n for n in names if n not in values]
        shown = ": " + ", ".join(parts + [f"{n} missing" for n in missing])
    return (f"Every record must have {rule.requirement} (rule {rule.name}). "
            f"Received: {where}{shown}")


def _short(values, limit=12) -> str:
    values = [v.item() if hasattr(v, "item") else v for v in np.asarray(values).ravel()]
    if len(values) <= limit:
        return str(values)
    return f"[{', '.join(map(str, values[:limit]))}, ...] ({len(values)} values)"


def check_example_codes(codes: np.ndarray, first_index: int = 0, values_of=None) -> None:
    """Raise the `TfpackError` of the first invalid example of a batch, if any.

    ``values_of(i)``: the feature values of example ``i`` of the batch, for
    the message.
    """
    bad = np.flatnonzero(np.asarray(codes))
    if bad.size:
        i = int(bad[0])
        raise TfpackError(describe(int(codes[i]), f"example {first_index + i}",
                                   values_of(i) if values_of else None))


def check_sizes(max_length: int, max_sequences_per_pack: int | None = None,
                max_predictions_per_pack: int | None = None) -> None:
    """Refuse absurd ``L``, ``K``, ``M`` before anything is allocated.

    ``L`` at most `MAX_LENGTH`; a pack cannot hold more sequences or
    predictions than tokens, so ``K`` and ``M`` at most ``L``.

    >>> check_sizes(2_000_000_000)
    Traceback (most recent call last):
    ...
    tfpack.errors.TfpackError: `max_length` must be at most 1,048,576 tokens (a histogram holds one count per length). Received: max_length=2000000000
    """
    validate_max_length(max_length)
    for name, value in (("max_sequences_per_pack", max_sequences_per_pack),
                        ("max_predictions_per_pack", max_predictions_per_pack)):
        if value is not None and value > max_length:
            raise TfpackError(f"`{name}` must be at most max_length={max_length} (a pack "
                              f"holds at most one per token). Received: {name}={value}")
