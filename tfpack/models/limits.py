"""The ranges a model's embedding tables give its input features.

An id at or past a table's size has no row: TensorFlow's CPU gather raises,
but XLA (``jit_compile``, TPUs, GPUs) clamps it to the last row and returns
a plausible, wrong output; a negative id wraps. `input_limits` says, for the
features a model looks up in a table, how many rows the table has, so
`tfpack.predict` and the exported signatures (`tfpack.export`) can refuse an
id outside ``[0, limit)`` before the model runs.

- ``input_ids``: the token vocabulary (``vocabulary_size``);
- ``token_type_ids``: the token-type table (``type_vocabulary_size``), where
  the model has one;
- ``position_ids``: the rows of a learned position table
  (`tfpack.layers.PackedPositionEmbedding`, or a keras-hub adapter's
  ``max_sequence_length``); rotary positions have no table and no limit.

Example:

>>> from tfpack import models
>>> encoder = models.BertEncoder(vocabulary_size=30, num_layers=1, hidden_dim=8, num_heads=2,
...                              intermediate_dim=16, max_sequence_length=64)
>>> input_limits(encoder)
{'input_ids': 30, 'token_type_ids': 2, 'position_ids': 64}
>>> decoder = models.DecoderBackbone(vocabulary_size=30, num_layers=1, hidden_dim=8, num_heads=2,
...                                  intermediate_dim=16)
>>> input_limits(decoder)
{'input_ids': 30}
"""

from __future__ import annotations

__all__ = ["input_limits"]


def _owners(model) -> list:
    """The model and the backbones it wraps (tasks hold theirs as ``backbone``/``encoder``)."""
    owners, seen = [], set()
    stack = [model]
    while stack:
        owner = stack.pop(0)
        if owner is None or id(owner) in seen:
            continue
        seen.add(id(owner))
        owners.append(owner)
        stack += [getattr(owner, "encoder", None), getattr(owner, "backbone", None)]
    return owners


def _integer(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _position_rows(owners) -> int | None:
    from tfpack.layers.position_embedding import PackedPositionEmbedding
    from tfpack.models.trunk import TransformerBackbone

    for owner in owners:
        flatten = getattr(owner, "_flatten_layers", None)
        layers = list(flatten(include_self=True, recursive=True)) if flatten else [owner]
        for layer in layers:
            if isinstance(layer, PackedPositionEmbedding):
                return _integer(layer.max_length)
        if any(isinstance(layer, TransformerBackbone) for layer in layers):
            return None  # tfpack's own backbone without a position table: rotary.
    for owner in owners:  # keras-hub adapters: the rows of their table, None if rotary.
        # The nearest owner saying decides: an adapter's None (rotary or relative positions)
        # stands over its keras-hub backbone's `max_sequence_length`, which sizes no table.
        if hasattr(owner, "max_sequence_length"):
            return _integer(owner.max_sequence_length)
    return None


def input_limits(model) -> dict[str, int]:
    """Feature name -> rows of the table ``model`` looks it up in (those it has).

    Args:
        model: a tfpack task or backbone (including `tfpack.models.from_keras_hub`
            adapters); any object with ``vocabulary_size`` works.

    Returns:
        ``{"input_ids": ..., "token_type_ids": ..., "position_ids": ...}``,
        each present only where the model has that table.
    """
    owners = _owners(model)
    limits = {}
    for name, attribute in (("input_ids", "vocabulary_size"),
                            ("token_type_ids", "type_vocabulary_size")):
        found = next((v for v in (_integer(getattr(o, attribute, None)) for o in owners)
                      if v is not None), None)
        if found is not None:
            limits[name] = found
    rows = _position_rows(owners)
    if rows is not None:
        limits["position_ids"] = rows
    return limits
