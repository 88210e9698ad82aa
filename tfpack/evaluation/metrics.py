"""Keras metrics over packed batches that equal the per-example scores.

Every metric accumulates counts of *examples* (sequences, words, entities,
targets) across batches, never per-pack ratios, so ``model.evaluate`` on
packs returns what the NumPy reference of `tfpack.evaluation.scores` gives on
the unpacked examples:

- `MacroF1`: per-class true positives and supports -> macro F1 over the
  classes that occur;
- `EntityF1`: entity-level micro F1 over IOB1/IOB2/IOBES tags, typed or
  bare, as seqeval's default mode reads them (`entity_counts` finds the
  entities of every sequence of a pack in the graph, from its words: the
  tokens whose label is not ``IGNORE_LABEL``);
- `Perplexity`: ``exp(sum of NLL / number of targets)``.

Example:

>>> import numpy as np
>>> metric = EntityF1(["O", "B-PER", "I-PER"])
>>> metric.update_state(np.array([[1, 2, -100, 0, 1]]), np.array([[1, 2, 0, 0, 0]]),
...                     np.array([[1, 1, 1, 2, 2]]))
>>> round(float(metric.result()), 4)
0.6667
"""

import keras
from keras import ops

from tfpack.errors import TfpackError
from tfpack.evaluation.scores import split_tag
from tfpack.layers.arguments import DTYPE, NAME, WIDTH
from tfpack.params import Anything, validate_params

_TAGS = Anything("tag names such as 'B-PER', checked by tag_tables")
from tfpack.features import IGNORE_LABEL
from tfpack.layers.statistic_ratio import StatisticRatio

__all__ = ["EntityF1", "MacroF1", "Perplexity", "entity_counts", "tag_tables"]

_PREFIXES = ("O", "B", "I", "E", "S")
_O, _B, _I, _E, _S = range(5)


def tag_tables(tags):
    """``(prefixes, kinds)``: per class, its prefix (0-4 for O/B/I/E/S) and type index.

    Tags are read as `tfpack.evaluation.scores.split_tag` reads them (seqeval's
    default mode: IOB1, IOB2, IOBES, typed or bare); ``O`` and bare tags share
    type 0, as they share seqeval's type ``"_"``.

    >>> tag_tables(["O", "B-PER", "I-PER", "B-LOC", "E", "S-PER"])
    ([0, 1, 2, 1, 3, 4], [0, 1, 1, 2, 0, 1])
    """
    if not isinstance(tags, (list, tuple)) or not tags or not all(
            isinstance(t, str) for t in tags):
        raise TfpackError("`tags` must be a non-empty list of tag names such as 'B-PER'. "
                          f"Received: tags={tags!r}")
    kinds, prefixes, indices = {"_": 0}, [], []
    for tag in tags:
        prefix, kind = split_tag(tag)
        prefixes.append(_PREFIXES.index(prefix))
        indices.append(kinds.setdefault(kind, len(kinds)))
    return prefixes, indices


def _shift(x, step, fill):
    # x[:, i - step] (step=1: previous word, -1: next word), `fill` off the ends.
    pad = ops.full_like(x[:, :1], fill)
    return (ops.concatenate([pad, x[:, :-1]], axis=1) if step == 1
            else ops.concatenate([x[:, 1:], pad], axis=1))


def _is(x, *values):
    result = ops.equal(x, values[0])
    for value in values[1:]:
        result = result | ops.equal(x, value)
    return result


def _chunks(classes, sequences, prefixes, kinds):
    """Per word: a chunk starts there, a chunk ends there, its type (seqeval's rules)."""
    word = sequences > 0
    prefix = ops.where(word, ops.take(prefixes, classes), _O)
    kind = ops.where(word, ops.take(kinds, classes), 0)
    same_previous = ops.equal(_shift(sequences, 1, 0), sequences)
    same_next = ops.equal(_shift(sequences, -1, 0), sequences)
    # Another sequence (or none) reads as the "O" seqeval puts between sentences.
    previous = ops.where(same_previous, _shift(prefix, 1, _O), _O)
    previous_kind = ops.where(same_previous, _shift(kind, 1, 0), 0)
    following = ops.where(same_next, _shift(prefix, -1, _O), _O)
    following_kind = ops.where(same_next, _shift(kind, -1, 0), 0)
    start = (_is(prefix, _B, _S) | (_is(previous, _E, _S, _O) & _is(prefix, _E, _I))
             | ((prefix != _O) & (previous_kind != kind)))
    end = (_is(prefix, _E, _S) | (_is(prefix, _B, _I) & _is(following, _B, _S, _O))
           | ((prefix != _O) & (kind != following_kind)))
    return start, end, kind


def _last_start(start, index, length):
    """Per word, the index of the last chunk start at or before it."""
    chunk = ops.cumsum(ops.cast(start, "int32"), axis=1)
    starts = ops.argsort(ops.where(start, index, index + length), axis=1)
    return ops.take_along_axis(starts, ops.maximum(chunk - 1, 0), axis=1)


@validate_params({"labels": Anything("int [B, L] labels"),
                  "predictions": Anything("int [B, L] classes"),
                  "sequence_ids": Anything("int [B, L]"), "tags": _TAGS})
def entity_counts(labels, predictions, sequence_ids, tags):
    """In-graph ``(true_positives, gold, predicted)`` entity counts of a packed batch.

    The words of a sequence are its tokens whose label is not
    ``IGNORE_LABEL`` (the first sub-token of every word); entities never
    cross sequences. Equal to `tfpack.evaluation.entity_f1`'s counts (and so
    to seqeval's default mode) on the words of each sequence.

    Args:
        labels: int ``[B, L]`` true classes, ``IGNORE_LABEL`` where no word starts.
        predictions: int ``[B, L]`` predicted classes.
        sequence_ids: int ``[B, L]``, 1..K, 0 for padding.
        tags: the tag name of every class.

    Returns:
        three float32 scalars.
    """
    prefixes, kinds = (ops.convert_to_tensor(t, "int32") for t in tag_tables(tags))
    labels = ops.cast(labels, "int32")
    words = (labels != IGNORE_LABEL) & (ops.cast(sequence_ids, "int32") > 0)
    length = ops.shape(labels)[1]
    index = ops.expand_dims(ops.arange(length, dtype="int32"), 0)
    # Words first, in order: compaction by sorting on unique keys.
    order = ops.argsort(ops.where(words, index, index + length), axis=1)

    def compact(x):
        return ops.take_along_axis(ops.where(words, ops.cast(x, "int32"), 0), order, axis=1)

    sequences = compact(sequence_ids)
    gold_start, gold_end, gold_kind = _chunks(compact(labels), sequences, prefixes, kinds)
    predicted_start, predicted_end, predicted_kind = _chunks(
        compact(predictions), sequences, prefixes, kinds)
    # An entity is (type, last start, end) at each chunk end: a gold one is
    # found iff the prediction ends one of the same type there, begun at the same word.
    found = (gold_end & predicted_end & (gold_kind == predicted_kind)
             & (_last_start(gold_start, index, length)
                == _last_start(predicted_start, index, length)))

    def count(x):
        return ops.sum(ops.cast(x, "float32"))

    return count(found), count(gold_end), count(predicted_end)


@keras.saving.register_keras_serializable(package="tfpack")
class EntityF1(keras.metrics.Metric):
    """Entity-level micro F1 (seqeval's default mode), accumulated over batches.

    Example: see the module docstring.

    Args:
        tags: the tag name of every class (``"O"``, ``"B-PER"``, ``"I-PER"``,
            ``"E-PER"``, ``"S-PER"``, or bare ``"B"``, ``"I"`` ...).
        name: metric name.
        dtype: dtype of the accumulators.

    Call arguments of `update_state`:
        labels: int ``[B, L]``, ``IGNORE_LABEL`` where no word starts.
        predictions: int ``[B, L]`` predicted classes.
        sequence_ids: int ``[B, L]``.
    """

    @validate_params({"tags": _TAGS, "name": NAME, "dtype": DTYPE})
    def __init__(self, tags, name="entity_f1", dtype="float32"):
        super().__init__(name=name, dtype=dtype)
        tag_tables(tags)  # Validates.
        self.tags = list(tags)
        self.counts = self.add_variable(shape=(3,), initializer="zeros", dtype=self.dtype,
                                        name="counts")

    def update_state(self, labels, predictions, sequence_ids):
        # The tags were checked in __init__: no declaration is checked per step.
        self.counts.assign_add(ops.cast(ops.stack(entity_counts.__wrapped__(
            labels, predictions, sequence_ids, self.tags)), self.dtype))

    def result(self):
        return 2.0 * self.counts[0] / ops.maximum(self.counts[1] + self.counts[2], 1.0)

    def reset_state(self):
        self.counts.assign(ops.zeros((3,), self.dtype))

    def get_config(self):
        return {"tags": self.tags, "name": self.name, "dtype": self.dtype}


@keras.saving.register_keras_serializable(package="tfpack")
class MacroF1(keras.metrics.Metric):
    """Macro F1 over the classes that occur, accumulated over batches.

    Example:

    >>> import numpy as np
    >>> metric = MacroF1(num_classes=3)
    >>> metric.update_state(np.array([[0, 0, 1]]), np.array([[0, 1, 1]]),
    ...                     np.array([[1., 1., 1.]]))
    >>> metric.update_state(np.array([[2, 0]]), np.array([[2, 0]]), np.array([[1., 0.]]))
    >>> round(float(metric.result()), 4)
    0.7778

    Args:
        num_classes: number of classes.
        name: metric name.
        dtype: dtype of the accumulators.

    Call arguments of `update_state`:
        labels: int ``[...]`` true classes.
        predictions: int ``[...]`` predicted classes.
        mask: float ``[...]``, 1 for real examples (``sequence_mask``).
    """

    @validate_params({"num_classes": WIDTH, "name": NAME, "dtype": DTYPE})
    def __init__(self, num_classes, name="macro_f1", dtype="float32"):
        super().__init__(name=name, dtype=dtype)
        self.num_classes = num_classes
        self.counts = self.add_variable(shape=(3, num_classes), initializer="zeros",
                                        dtype=self.dtype, name="counts")

    def update_state(self, labels, predictions, mask):
        mask = ops.expand_dims(ops.reshape(ops.cast(mask, self.dtype), (-1,)), -1)
        gold = ops.one_hot(ops.reshape(ops.cast(labels, "int32"), (-1,)),
                           self.num_classes, dtype=self.dtype) * mask
        predicted = ops.one_hot(ops.reshape(ops.cast(predictions, "int32"), (-1,)),
                                self.num_classes, dtype=self.dtype) * mask
        self.counts.assign_add(ops.stack([ops.sum(gold * predicted, 0), ops.sum(gold, 0),
                                          ops.sum(predicted, 0)]))

    def result(self):
        support = self.counts[1] + self.counts[2]
        present = ops.cast(support > 0, self.dtype)
        f1 = 2.0 * self.counts[0] / ops.maximum(support, 1.0)
        return ops.sum(f1 * present) / ops.maximum(ops.sum(present), 1.0)

    def reset_state(self):
        self.counts.assign(ops.zeros((3, self.num_classes), self.dtype))

    def get_config(self):
        return {"num_classes": self.num_classes, "name": self.name, "dtype": self.dtype}


@keras.saving.register_keras_serializable(package="tfpack")
class Perplexity(StatisticRatio):
    """``exp(sum of negative log-likelihoods / number of targets)`` over batches.

    >>> import math
    >>> metric = Perplexity()
    >>> metric.update_state(2 * math.log(4.0), 2.0)
    >>> round(float(metric.result()), 4)
    4.0
    """

    @validate_params({"name": NAME, "dtype": DTYPE})
    def __init__(self, name="perplexity", dtype="float32"):
        super().__init__(name=name, dtype=dtype)

    def result(self):
        return ops.exp(super().result())
