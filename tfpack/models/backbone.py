"""Backbones: packed features in, `{"sequence_output": [B, L, H]}` out.

As in keras-hub, a *backbone* is the transformer without heads or losses, and
a *task* (`tfpack.models.Task`) wraps one and adds heads and a loss. A task
accepts ANY object that follows this protocol, not only the tfpack backbones:

The backbone protocol:

- ``backbone(features, training=None)`` takes one dict of packed features
  (`tfpack.features`, batch first) and returns a dict with
  ``"sequence_output"``, float ``[B, L, hidden_dim]``; every sequence of a pack
  must be treated as if it were alone (positions from ``position_ids``,
  attention inside ``sequence_ids``).
- ``hidden_dim`` (int): the width of ``sequence_output``.
- ``vocabulary_size`` (int): needed by the language-model tasks.
- ``input_features`` (tuple of contract names): the features it reads;
  default ``("input_ids", "sequence_ids", "position_ids")``; optional
  ``optional_features``: those of them it reads only when present.
- optional ``token_embedding``: a `keras.layers.Embedding` (or keras-hub
  `ReversibleEmbedding`) of ``[vocabulary_size, hidden_dim]``, for output
  heads tied to the input embedding.
- optional ``max_sequence_length`` (int): the longest pack it can take
  (its position table), checked when training starts.
- optional hints for the heads a task builds: ``initializer_range``,
  ``activation``, ``layer_norm_epsilon`` (defaults 0.02, ``"gelu"``, 1e-12).

`Backbone` is a convenient base for it: it builds itself by calling on zeros
of the recorded feature shapes (so `.keras` files rebuild it) and declares
``sequence_output`` as a per-token output for `tfpack.testing`.

Example:

>>> from tfpack.models import BertEncoder, check_backbone
>>> encoder = BertEncoder(vocabulary_size=20, num_layers=1, hidden_dim=8,
...                       num_heads=2, intermediate_dim=16)
>>> check_backbone(encoder, requires=("vocabulary_size",), task="BertPretrainer")
>>> check_backbone(object(), task="BertClassifier")
Traceback (most recent call last):
...
tfpack.errors.TfpackError: BertClassifier's backbone must be callable on a dict of packed features and have `hidden_dim` (the backbone protocol, tfpack.models.backbone). Received: backbone of type object without ['__call__', 'hidden_dim']
"""

import keras
from keras import ops

from tfpack import features as contract
from tfpack.tasks import BACKBONE_OUTPUTS
from tfpack.errors import TfpackError
from tfpack.params import Anything, InstanceOf, Text, validate_params

DEFAULT_INPUT_FEATURES = ("input_ids", "sequence_ids", "position_ids")
# Defaults of the optional head hints of the protocol.
HEAD_DEFAULTS = {"initializer_range": 0.02, "activation": "gelu",
                 "layer_norm_epsilon": 1e-12}


@validate_params({"backbone": Anything("checked here"),
                  "requires": InstanceOf(tuple, list, description="a list of attribute names"),
                  "task": Text()})
def check_backbone(backbone, requires=(), task="The task"):
    """Raise `TfpackError` unless ``backbone`` follows the backbone protocol.

    Args:
        backbone: the object a task was given.
        requires: attributes the task needs beyond ``hidden_dim``.
        task: the task's name, for the message.
    """
    missing = [name for name in ("__call__", "hidden_dim") + tuple(requires)
               if not hasattr(backbone, name)]
    if missing:
        raise TfpackError(
            f"{task}'s backbone must be callable on a dict of packed features and "
            f"have `hidden_dim`{''.join(f', `{r}`' for r in requires)} (the backbone "
            "protocol, tfpack.models.backbone). Received: backbone of type "
            f"{type(backbone).__name__} without {missing}")


def backbone_input_features(backbone) -> tuple:
    """The contract features ``backbone`` reads."""
    return tuple(getattr(backbone, "input_features", DEFAULT_INPUT_FEATURES))


def head_hint(backbone, name):
    """An optional head hint of the protocol, or its default."""
    value = getattr(backbone, name, None)
    return HEAD_DEFAULTS[name] if value is None else value


def build_by_calling(model, inputs_shape):
    """Build a subclassed model by running it once on zeros (batch 1).

    Keras calls ``build`` with the recorded feature shapes when it loads a
    `.keras` file, so this is also how loading rebuilds the model before it
    restores the weights. Only ``model.input_features`` are fed, with their
    contract dtypes. On JAX the run is symbolic (shapes only): eager JAX
    compiles every op on its own, which made building a one-layer model
    take ~10 s.
    """
    symbolic = keras.backend.backend() == "jax"
    dummy = {}
    for name, shape in inputs_shape.items():
        if name in model.input_features:
            # Unknown sizes (`from_pretrained`): 2, so that no axis is trivial.
            shape = [1] + [2 if d is None else d for d in list(shape)[1:]]
            dtype = contract.dtype_of(name)
            dummy[name] = (keras.KerasTensor(shape, dtype) if symbolic
                           else ops.zeros(shape, dtype))
    if symbolic:
        model.compute_output_spec(dummy)
    else:
        model.call(dummy)
    if getattr(model, "_build_shapes_dict", None) is None:
        # Built by hand (e.g. `from_pretrained`): record the shapes so that
        # `.keras` files can rebuild the model.
        model._build_shapes_dict = {"inputs_shape": dict(inputs_shape)}
    model.built = True


class Backbone(keras.Model):
    """Base of the tfpack backbones (see the module docstring's protocol).

    Subclasses set ``hidden_dim`` and ``vocabulary_size`` and implement
    ``call(inputs, training=None) -> {"sequence_output": ...}``.

    Example:

    >>> from tfpack.models import Backbone, DecoderBackbone
    >>> decoder = DecoderBackbone(vocabulary_size=20, num_layers=1,
    ...                           hidden_dim=8, num_heads=2, intermediate_dim=16)
    >>> isinstance(decoder, Backbone), decoder.packed_outputs
    (True, {'sequence_output': 'token'})
    """

    packed_outputs = dict(BACKBONE_OUTPUTS)
    input_features = DEFAULT_INPUT_FEATURES

    def build(self, inputs_shape):
        build_by_calling(self, inputs_shape)

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        # Saved before the backbone/task split, a backbone carried an unused
        # `expected_counts` (always None: a backbone has no loss).
        if config.pop("expected_counts", None) is not None:
            raise TfpackError(
                f"A backbone has no loss, so `expected_counts` must be None; set it on "
                f"the task. Received: {cls.__name__} config with expected_counts")
        return cls(**config)

