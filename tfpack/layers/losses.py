"""Per-sequence loss statistics for packed batches, without loops.

Every function returns *sums and counts* rather than means, as a dict of
scalar float32 tensors ``{f"{term}_loss_sum", f"{term}_count",
f"{term}_correct"}``. A mean over a packed batch must divide by the number of
real items (masked tokens, sequences, next-token targets) in the *global*
batch, not by the number of rows or of items on one replica: sums add up
across replicas and micro-batches, means do not. `loss_from_statistics` turns
the sums into the training loss, and `global_sum` makes a count global under
`tf.distribute`.

Worked example (per-sequence NSP, one pack of two sequences and an empty
slot)::

    logits  [[[2, 0], [0, 2], [0, 0]]], labels [[0, 1, 0]], mask [[1, 1, 0]]
    -> nsp_loss_sum = 2 * 0.127, nsp_count = 2, nsp_correct = 2

>>> import numpy as np
>>> stats = sequence_statistics(
...     np.array([[[2., 0.], [0., 2.], [0., 0.]]]), np.array([[0, 1, 0]]),
...     np.array([[1., 1., 0.]]), term="nsp")
>>> {k: round(float(v), 3) for k, v in stats.items()}
{'nsp_loss_sum': 0.254, 'nsp_count': 2.0, 'nsp_correct': 2.0}
"""

import keras
from keras import ops

from tfpack.errors import TfpackError
from tfpack.features import IGNORE_LABEL
from tfpack.params import Anything, InstanceOf, Integer, Options, Text, validate_params

AVERAGING = ("token", "sequence")
MLM_AVERAGING = AVERAGING

# The declarations (`tfpack.params`) of the public loss functions. The tasks' loss
# paths call the undeclared functions (``.__wrapped__``): checked here, never per step.
_TENSOR = Anything("a tensor")
_OPTIONAL = Anything("None or a tensor")
_AVERAGED = {"num_sequences": [None, Integer(1)], "averaging": Options(*AVERAGING)}


def _cross_entropy(logits, labels):
    logits = ops.cast(logits, "float32")
    labels = ops.cast(labels, "int32")
    loss = ops.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    correct = ops.cast(
        ops.equal(ops.cast(ops.argmax(logits, axis=-1), "int32"), labels),
        "float32")
    return loss, correct


def _result(term, loss_sum, count, correct):
    return {
        f"{term}_loss_sum": ops.cast(loss_sum, "float32"),
        f"{term}_count": ops.cast(count, "float32"),
        f"{term}_correct": ops.cast(correct, "float32"),
    }


@validate_params({"logits": _TENSOR, "masked_lm_ids": _TENSOR, "masked_lm_weights": _TENSOR,
                  "masked_lm_sequence_ids": _OPTIONAL, **_AVERAGED, "term": Text()})
def masked_lm_statistics(logits, masked_lm_ids, masked_lm_weights,
                         masked_lm_sequence_ids=None, num_sequences=None,
                         averaging="token", term="mlm"):
    """Sums of the masked-LM loss of a packed batch.

    Args:
        logits: `[B, M, V]` logits at the masked positions.
        masked_lm_ids: int `[B, M]` true tokens.
        masked_lm_weights: float `[B, M]`, 1 for real predictions.
        masked_lm_sequence_ids: int `[B, M]`, the sequence (1..K) of each
            prediction; needed for `averaging="sequence"`.
        num_sequences: K, the number of sequence slots per pack; needed for
            `averaging="sequence"`.
        averaging: `"token"`: BERT's mean over all masked tokens of the batch
            (count = real predictions). `"sequence"`: each sequence's loss is
            the mean over its own masked tokens and the batch loss the mean
            over sequences that have predictions (count = such sequences,
            correct = sum of per-sequence accuracies), which is what unpacked
            training with per-example means computes.
        term: name prefix of the returned keys.

    Returns:
        dict of scalar float32 `{term}_loss_sum`, `{term}_count`,
        `{term}_correct`.
    """
    loss, correct = _cross_entropy(logits, masked_lm_ids)
    weights = ops.cast(masked_lm_weights, "float32")
    if averaging == "token":
        return _result(term, ops.sum(loss * weights), ops.sum(weights),
                       ops.sum(correct * weights))
    if masked_lm_sequence_ids is None or num_sequences is None:
        raise TfpackError(
            "`averaging='sequence'` needs `masked_lm_sequence_ids` and "
            "`num_sequences`. Received: masked_lm_sequence_ids="
            f"{masked_lm_sequence_ids is not None}, num_sequences={num_sequences}")
    membership = _membership(masked_lm_sequence_ids, weights, num_sequences)
    tokens = ops.sum(membership, axis=1)  # [B, K]
    has_tokens = ops.cast(tokens > 0, "float32")
    denominator = ops.maximum(tokens, 1.0)
    per_sequence_loss = ops.einsum("bm,bmk->bk", loss, membership) / denominator
    per_sequence_correct = (
        ops.einsum("bm,bmk->bk", correct, membership) / denominator)
    return _result(term, ops.sum(per_sequence_loss), ops.sum(has_tokens),
                   ops.sum(per_sequence_correct))


def _membership(masked_lm_sequence_ids, weights, num_sequences):
    # [B, M, K]: prediction m belongs to sequence k (id k + 1); padding
    # (id 0) falls off the one-hot, real predictions keep their weight.
    membership = ops.one_hot(ops.cast(masked_lm_sequence_ids, "int32") - 1,
                             num_sequences, dtype="float32")
    return membership * ops.expand_dims(ops.cast(weights, "float32"), -1)


@validate_params({"masked_lm_weights": _TENSOR, "masked_lm_sequence_ids": _OPTIONAL,
                  **_AVERAGED})
def masked_lm_count(masked_lm_weights, masked_lm_sequence_ids=None,
                    num_sequences=None, averaging="token"):
    """The `{term}_count` of `masked_lm_statistics`, from the features alone.

    >>> import numpy as np
    >>> float(masked_lm_count(np.array([[1., 1., 0.]]), np.array([[1, 1, 0]]),
    ...                       num_sequences=2, averaging="sequence"))
    1.0
    """
    weights = ops.cast(masked_lm_weights, "float32")
    if averaging == "token":
        return ops.sum(weights)
    tokens = ops.sum(_membership(masked_lm_sequence_ids, weights, num_sequences),
                     axis=1)
    return ops.sum(ops.cast(tokens > 0, "float32"))


@validate_params({"logits": _TENSOR, "labels": _TENSOR, "sequence_mask": _TENSOR,
                  "term": Text()})
def sequence_statistics(logits, labels, sequence_mask, term="classification"):
    """Sums of a per-sequence classification loss (NSP, fine-tuning).

    Args:
        logits: `[B, K, C]`.
        labels: int `[B, K]`.
        sequence_mask: float `[B, K]`, 1 where the sequence exists; absent
            slots add nothing.
        term: name prefix of the returned keys.

    Returns:
        dict of scalar float32 `{term}_loss_sum`, `{term}_count`,
        `{term}_correct`.
    """
    loss, correct = _cross_entropy(logits, labels)
    mask = ops.cast(sequence_mask, "float32")
    return _result(term, ops.sum(loss * mask), ops.sum(mask),
                   ops.sum(correct * mask))


def _causal_weights(labels, loss_weights, ignore_index):
    labels = ops.cast(labels, "int32")
    valid = ops.not_equal(labels, ignore_index)
    weights = ops.cast(valid, "float32")
    if loss_weights is not None:
        weights = weights * ops.cast(loss_weights, "float32")
    return ops.where(valid, labels, 0), weights


def _check_averaging(averaging, sequence_ids, num_sequences):
    if averaging == "sequence" and (sequence_ids is None or num_sequences is None):
        raise TfpackError(
            "`averaging='sequence'` needs `sequence_ids` and `num_sequences`. "
            f"Received: sequence_ids={sequence_ids is not None}, "
            f"num_sequences={num_sequences}")


def _sequence_totals(weights, sequence_ids, num_sequences):
    # [B, L, K]: the target at position l belongs to sequence k (id k + 1);
    # padding (id 0) falls off the one-hot. Totals: [B, K] weight per sequence.
    membership = ops.one_hot(ops.cast(sequence_ids, "int32") - 1, num_sequences,
                             dtype="float32") * ops.expand_dims(weights, -1)
    return membership, ops.sum(membership, axis=1)


@validate_params({"labels": _TENSOR, "loss_weights": _OPTIONAL, "sequence_ids": _OPTIONAL,
                  **_AVERAGED, "ignore_index": Integer()})
def causal_lm_count(labels, loss_weights=None, sequence_ids=None,
                    num_sequences=None, averaging="token",
                    ignore_index=IGNORE_LABEL):
    """The `{term}_count` of `causal_lm_statistics`, from the features alone.

    >>> import numpy as np
    >>> labels = np.array([[6, 7, -100, 9, -100, -100]])
    >>> weights = np.array([[0., 1., 1., 1., 0., 0.]])
    >>> float(causal_lm_count(labels, weights))
    2.0
    >>> float(causal_lm_count(labels, weights, np.array([[1, 1, 1, 2, 2, 0]]),
    ...                       num_sequences=2, averaging="sequence"))
    2.0
    """
    _check_averaging(averaging, sequence_ids, num_sequences)
    _, weights = _causal_weights(labels, loss_weights, ignore_index)
    if averaging == "token":
        return ops.sum(weights)
    _, totals = _sequence_totals(weights, sequence_ids, num_sequences)
    return ops.sum(ops.cast(totals > 0, "float32"))


@validate_params({"logits": _TENSOR, "labels": _TENSOR, "ignore_index": Integer(),
                  "term": Text(), "loss_weights": _OPTIONAL, "sequence_ids": _OPTIONAL,
                  **_AVERAGED})
def causal_lm_statistics(logits, labels, ignore_index=IGNORE_LABEL, term="lm", *,
                         loss_weights=None, sequence_ids=None, num_sequences=None,
                         averaging="token"):
    """Sums of the (weighted) next-token loss over targets not `ignore_index`.

    With `loss_weights` (supervised fine-tuning: 0.0 on prompt targets, the
    "assistant-only loss"), each target counts with its weight.

    Args:
        logits: `[B, L, V]`.
        labels: int `[B, L]` next-token targets; `ignore_index` on padding and
            on the last token of every packed sequence.
        ignore_index: label value that is not a target.
        term: name prefix of the returned keys.
        loss_weights: optional float `[B, L]`, the weight of each target.
        sequence_ids: int `[B, L]` (1..K, 0 = padding); needed for
            `averaging="sequence"`.
        num_sequences: K; needed for `averaging="sequence"`.
        averaging: `"token"`: the weighted mean over all targets of the batch
            (count = sum of the weights of real targets). `"sequence"`: each
            sequence's loss is the weighted mean over its own targets and the
            batch loss the mean over sequences that have targets (count =
            such sequences), as unpacked training with per-example means.

    Returns:
        dict of scalar float32 `{term}_loss_sum`, `{term}_count`,
        `{term}_correct`.
    """
    _check_averaging(averaging, sequence_ids, num_sequences)
    labels, weights = _causal_weights(labels, loss_weights, ignore_index)
    loss, correct = _cross_entropy(logits, labels)
    if averaging == "token":
        return _result(term, ops.sum(loss * weights), ops.sum(weights),
                       ops.sum(correct * weights))
    membership, totals = _sequence_totals(weights, sequence_ids, num_sequences)
    denominator = ops.where(totals > 0, totals, 1.0)
    per_sequence_loss = ops.einsum("bl,blk->bk", loss, membership) / denominator
    per_sequence_correct = ops.einsum("bl,blk->bk", correct, membership) / denominator
    return _result(term, ops.sum(per_sequence_loss),
                   ops.sum(ops.cast(totals > 0, "float32")),
                   ops.sum(per_sequence_correct))


@validate_params({"value": _TENSOR})
def global_sum(value):
    """Sums `value` over the replicas of a `tf.distribute` strategy.

    Identity outside a multi-replica replica context and on other backends.
    Counts summed this way make every replica divide its local loss sum by
    the *global* count; the optimizer then sums the replicas' gradients, which
    gives exactly the gradient of the global mean.
    """
    if keras.backend.backend() != "tensorflow":
        return value
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


def num_replicas() -> int:
    """Replicas in sync of the current `tf.distribute` strategy (1 on other backends)."""
    if keras.backend.backend() != "tensorflow":
        return 1
    import tensorflow as tf

    return tf.distribute.get_strategy().num_replicas_in_sync


@validate_params({
    "statistics": InstanceOf(dict, description="a dict of loss statistics"),
    "loss_terms": InstanceOf(tuple, list, description="a tuple of loss term names"),
    "expected_counts": [None, InstanceOf(dict, description="a dict of loss term -> count")],
    "num_packs": Anything("None or the number of packs (a tensor)"),
})
def loss_from_statistics(statistics, loss_terms, expected_counts=None,
                         num_packs=None):
    """The training loss `sum_t loss_sum_t / max(count_t, 1)`.

    With loss balancing (seed 000, appendix T.6) a term listed in
    `expected_counts` is divided by the constant
    `expected_counts[t] * num_packs` instead of its varying actual count: the
    mean becomes a sum times a constant weight, so a masked token or a
    sequence gets the same weight whatever else shares its batch.

    Args:
        statistics: dict from the `*_statistics` functions (already summed
            over replicas when training is distributed).
        loss_terms: names `t` to add up.
        expected_counts: optional dict `{t: expected count per pack}`, e.g.
            `{"mlm": 76 * efficiency, "nsp": packing_factor}`.
        num_packs: number of packs (rows) the statistics cover; required with
            `expected_counts`.

    Returns:
        scalar float32 loss.
    """
    total = ops.zeros((), "float32")
    for term in loss_terms:
        loss_sum = statistics[f"{term}_loss_sum"]
        if expected_counts and term in expected_counts:
            if num_packs is None:
                raise TfpackError(
                    "Loss balancing needs the number of packs. "
                    "Received: num_packs=None")
            denominator = ops.cast(num_packs, "float32") * float(
                expected_counts[term])
        else:
            denominator = ops.maximum(statistics[f"{term}_count"], 1.0)
        total = total + loss_sum / denominator
    return total


def span_statistics(start_logits, end_logits, start_positions, end_positions,
                    sequence_ids, sequence_mask, term="qa"):
    """Sums of the extractive-QA loss: start and end classified per sequence.

    Each sequence's start (end) distribution is a softmax over its own tokens
    only, as in unpacked QA (the other sequences of the pack and padding are
    masked out); the loss of a sequence is the mean of its start and end
    cross-entropies, and it is correct when both arg-maxes are right.

    Args:
        start_logits, end_logits: float ``[B, L]``.
        start_positions, end_positions: int ``[B, K]``, indices into the pack
            (shifted by the sequence's offset: the ``[CLS]`` of an unanswerable
            window is its `cls_positions`).
        sequence_ids: int ``[B, L]``, 1..K, 0 for padding.
        sequence_mask: float ``[B, K]``, 1 where the sequence exists.
        term: name prefix of the returned keys.

    Returns:
        dict of scalar float32 ``{term}_loss_sum``, ``{term}_count``,
        ``{term}_correct``.

    >>> import numpy as np
    >>> stats = span_statistics(
    ...     np.array([[0., 9., 0., 0.]]), np.array([[0., 9., 0., 9.]]),
    ...     np.array([[1, 3]]), np.array([[1, 3]]), np.array([[1, 1, 2, 2]]),
    ...     np.array([[1., 1.]]))
    >>> float(stats["qa_count"]), float(stats["qa_correct"])
    (2.0, 1.0)
    """
    num_sequences = sequence_mask.shape[-1]
    membership = ops.transpose(ops.one_hot(ops.cast(sequence_ids, "int32") - 1,
                                           num_sequences, dtype="float32"), (0, 2, 1))

    def per_sequence(logits, positions):
        # [B, K, L]: sequence k sees only its own tokens.
        logits = ops.expand_dims(ops.cast(logits, "float32"), 1)
        logits = ops.where(membership > 0, logits, -1e9)
        return _cross_entropy(logits, positions)

    start_loss, start_correct = per_sequence(start_logits, start_positions)
    end_loss, end_correct = per_sequence(end_logits, end_positions)
    mask = ops.cast(sequence_mask, "float32")
    return _result(term, ops.sum(0.5 * (start_loss + end_loss) * mask), ops.sum(mask),
                   ops.sum(start_correct * end_correct * mask))


def contrastive_statistics(embeddings, labels, sequence_mask, temperature=0.05,
                           term="contrastive"):
    """Sums of a supervised contrastive loss over every sequence of the batch.

    Each present sequence is an anchor; the other sequences of the whole batch
    (in any pack) with the same label are its positives, all other present
    sequences its negatives. The anchor's loss is
    ``-log(sum_pos exp(s / t) / sum_other exp(s / t))`` with ``s`` the dot
    product of the embeddings (cosines when they are normalized); anchors
    without a positive do not count. The loss depends only on the set of
    sequences in the batch, not on how they are packed.

    Args:
        embeddings: float ``[B, K, H]``.
        labels: int ``[B, K]``, a group id per sequence.
        sequence_mask: float ``[B, K]``.
        temperature: the softmax temperature ``t``.
        term: name prefix of the returned keys.

    Returns:
        dict of scalar float32 ``{term}_loss_sum``, ``{term}_count``,
        ``{term}_correct`` (the nearest other sequence is a positive).

    >>> import numpy as np
    >>> e = np.array([[[1., 0.], [1., 0.]], [[0., 1.], [0., 0.]]])
    >>> stats = contrastive_statistics(e, np.array([[3, 3], [5, 0]]),
    ...                                np.array([[1., 1.], [1., 0.]]), temperature=1.0)
    >>> float(stats["contrastive_count"]), float(stats["contrastive_correct"])
    (2.0, 2.0)
    """
    hidden = ops.shape(embeddings)[-1]
    flat = ops.reshape(ops.cast(embeddings, "float32"), (-1, hidden))
    other, positive = _contrastive_pairs(labels, sequence_mask)
    scores = ops.matmul(flat, ops.transpose(flat)) / temperature
    all_scores = ops.where(other, scores, -1e9)
    everything = ops.logsumexp(all_scores, axis=-1)
    positives = ops.logsumexp(ops.where(positive, scores, -1e9), axis=-1)
    anchors = ops.cast(ops.any(positive, axis=-1), "float32")
    nearest = ops.argmax(all_scores, axis=-1)
    correct = ops.cast(ops.take_along_axis(positive, nearest[:, None], axis=1)[:, 0],
                       "float32")
    return _result(term, ops.sum((everything - positives) * anchors), ops.sum(anchors),
                   ops.sum(correct * anchors))


def _contrastive_pairs(labels, sequence_mask):
    # [N, N] over the batch's N = B * K slots: both present and distinct;
    # and of the same group.
    groups = ops.reshape(ops.cast(labels, "int32"), (-1,))
    present = ops.reshape(ops.cast(sequence_mask, "float32"), (-1,)) > 0
    n = ops.shape(groups)[0]
    other = present[None, :] & present[:, None] & ~ops.cast(ops.eye(n), "bool")
    return other, other & ops.equal(groups[None, :], groups[:, None])


def contrastive_count(labels, sequence_mask):
    """The ``{term}_count`` of `contrastive_statistics`: anchors with a positive.

    >>> import numpy as np
    >>> float(contrastive_count(np.array([[3, 3, 4]]), np.array([[1., 1., 1.]])))
    2.0
    """
    _, positive = _contrastive_pairs(labels, sequence_mask)
    return ops.sum(ops.cast(ops.any(positive, axis=-1), "float32"))


def sequence_log_likelihoods(logits, labels, sequence_ids, num_sequences,
                             loss_weights=None, ignore_index=IGNORE_LABEL):
    """Per-sequence ``(log_likelihood, targets)`` of a packed causal-LM batch.

    The log-likelihood of sequence ``k`` is the weighted sum of the log
    probabilities of its next-token targets: with ``loss_weights`` 0.0 on the
    prompt (`tfpack.builders.sft_examples`) it is the log-likelihood of the
    continuation given the prompt.

    Args:
        logits: float ``[B, L, V]``.
        labels: int ``[B, L]`` next-token targets, ``ignore_index`` elsewhere.
        sequence_ids: int ``[B, L]``.
        num_sequences: K.
        loss_weights: optional float ``[B, L]``.
        ignore_index: label value that is not a target.

    Returns:
        two float32 ``[B, K]``: the log-likelihoods and the (weighted) target
        counts.

    >>> import numpy as np
    >>> logits = np.log(np.array([[[.5, .5], [.25, .75], [.5, .5]]]))
    >>> ll, n = sequence_log_likelihoods(logits, np.array([[1, -100, -100]]),
    ...                                  np.array([[1, 1, 2]]), 2)
    >>> np.round(np.exp(ll), 4).tolist(), np.asarray(n).tolist()
    ([[0.5, 1.0]], [[1.0, 0.0]])
    """
    labels, weights = _causal_weights(labels, loss_weights, ignore_index)
    loss, _ = _cross_entropy(logits, labels)
    membership, totals = _sequence_totals(weights, sequence_ids, num_sequences)
    return -ops.einsum("bl,blk->bk", loss, membership), totals
