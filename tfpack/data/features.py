"""Feature roles: how each feature of an unpacked example enters a pack.

The roles are derived from a task's declaration (`tfpack.tasks`): every
feature packs one way (``packing``) from one source (``source``):

- token features (``input_ids``, ``token_type_ids``, the float
  ``loss_weights`` of supervised fine-tuning): shape ``[length]``;
  concatenated pack by pack into ``[L]`` and padded (contract padding).
- per-sequence features (``next_sentence_labels``, ``labels``): scalars;
  stacked into ``[K]`` and padded.
- prediction features (``masked_lm_positions``, ``masked_lm_ids``,
  ``masked_lm_weights``): shape ``[num_predictions]``; concatenated into
  ``[M]``.
- shifted features (``masked_lm_positions``): positions inside the example;
  the offset of their sequence in the pack is added.
- derived features, never read: causal-LM ``labels`` (the next token of the
  same sequence, -100 elsewhere), ``masked_lm_sequence_ids`` (the slot of
  each prediction).

The first token feature (``input_ids``) defines the length of an example.
Packs always also hold ``sequence_ids``, ``position_ids``, ``cls_positions``,
``sequence_mask`` and ``example_ids`` (each slot's index in the input). Every name, dtype, shape and padding value of a pack
comes from the feature contract, `tfpack.features`.

Example:

>>> import tensorflow as tf
>>> from tfpack.data import features
>>> roles = features.FeatureRoles.bert()
>>> roles.tokens, roles.sequence
(('input_ids', 'token_type_ids'), ('next_sentence_labels',))
>>> spec = {"input_ids": tf.TensorSpec([None], tf.int32)}
>>> features.FeatureRoles.infer(spec).name
'causal_lm'
"""

from __future__ import annotations

import tensorflow as tf

from tfpack import features as contract
from tfpack.features import FeatureRoles
from tfpack.params import InstanceOf, Integer, validate_params

__all__ = ["packed_feature_names", "packed_feature_spec"]


@validate_params({"roles": InstanceOf(FeatureRoles), "max_length": Integer(1),
                  "max_sequences_per_pack": Integer(1), "max_predictions": [None, Integer(0)]})
def packed_feature_spec(
    roles: FeatureRoles, max_length: int, max_sequences_per_pack: int, max_predictions: int | None
) -> dict[str, tf.TensorSpec]:
    """The contract features (`tfpack.features`) of one pack under ``roles``, unbatched.

    >>> spec = packed_feature_spec(FeatureRoles.causal_lm(), 8, 2, None)
    >>> sorted(spec)  # doctest: +NORMALIZE_WHITESPACE
    ['cls_positions', 'example_ids', 'input_ids', 'labels', 'position_ids', 'sequence_ids',
     'sequence_mask']
    """
    sizes = {"L": max_length, "K": max_sequences_per_pack, "M": max_predictions}
    entries = {n: contract.feature(n, roles.task) for n in packed_feature_names(roles)}
    return {n: tf.TensorSpec([sizes[e.dimension]], tf.as_dtype(e.dtype))
            for n, e in entries.items()}


def packed_feature_names(roles: FeatureRoles) -> list[str]:
    """The names of a pack's features under ``roles``, in pack order."""
    def derived(packing):
        return [n for n in roles.derived if contract.feature(n, roles.task).packing == packing]

    names = [*roles.tokens, "sequence_ids", "position_ids"]
    if roles.predictions:
        names += [*roles.predictions, *derived("prediction")]
    names += ["cls_positions", "sequence_mask", "example_ids", *roles.sequence,
              *derived("sequence")]
    return names + derived("token")
