"""A frozen copy of a causal LM: the reference `PreferenceModel(reference=None)` makes.

DPO and IPO compare the policy with a reference, usually the policy as it was
before preference training (TRL's ``ref_model=None``). `frozen_copy` makes it
when it is called, which `tfpack.models.PreferenceModel` does in its
constructor, before any update: the copy is the policy's architecture (from
its Keras config, so it is saved and loaded as the policy is) with the
policy's weights of that moment, non-trainable, sharing no layer or variable
with the policy. An unbuilt policy is built first, eagerly, by one call on a
two-token pack of zeros (its weights do not depend on the length), so the
copy never waits for a first call that Keras may trace (`fit` builds a model
symbolically, with its variables' values deferred) and never reads weights
after an update.

Example:

>>> from tfpack.models import CausalLM, DecoderBackbone
>>> policy = CausalLM(DecoderBackbone(vocabulary_size=20, num_layers=1, hidden_dim=8,
...                                   num_heads=2, intermediate_dim=16))
>>> reference = frozen_copy(policy)
>>> reference.trainable, len(reference.weights) == len(policy.weights) > 0
(False, True)
>>> bool(all((a == b).all() for a, b in zip(reference.get_weights(), policy.get_weights())))
True
"""

import keras
from keras import ops

from tfpack import features as contract
from tfpack.errors import TfpackError
from tfpack.models.backbone import backbone_input_features

__all__ = ["frozen_copy"]


def _built(lm) -> bool:
    return bool(getattr(lm, "built", True)) and bool(lm.weights)


def _build(lm, names) -> None:
    """Build ``lm`` eagerly: one call on a pack of zeros (batch 1, two tokens)."""
    if not _built(lm):
        lm({name: ops.zeros((1, 2), contract.dtype_of(name)) for name in names}, training=False)


def _architecture(lm):
    """A new model of ``lm``'s class and config (its own layers and variables)."""
    config = dict(keras.saving.serialize_keras_object(lm))
    config.pop("compile_config", None)  # a reference is never trained
    config["config"] = dict(config["config"])
    if "name" in config["config"]:
        config["config"]["name"] = f"{config['config']['name']}_reference"
    try:
        return keras.saving.deserialize_keras_object(config)
    except Exception as error:  # any failure of a user's from_config
        raise TfpackError(
            "`reference=None` copies the policy through its Keras config (get_config / "
            "from_config); pass a `reference` model instead. Received: a policy of type "
            f"{type(lm).__name__} whose config does not rebuild it ({error})"[:400]) from None


def frozen_copy(lm):
    """``lm``'s architecture with its current weights, non-trainable, sharing nothing.

    Args:
        lm: a causal LM (a `tfpack.models.CausalLM` or a Keras model with a
            ``backbone``), built or not; it is built here if it is not.

    Returns:
        The copy, a Keras model of ``lm``'s class, ``trainable=False``.
    """
    names = backbone_input_features(lm.backbone)
    _build(lm, names)
    copy = _architecture(lm)
    _build(copy, names)
    mine, theirs = lm.weights, copy.weights
    if [tuple(v.shape) for v in mine] != [tuple(v.shape) for v in theirs]:
        raise TfpackError(
            "`reference=None` needs a policy whose Keras config rebuilds the same weights; "
            f"pass a `reference` model instead. Received: {len(mine)} weights, rebuilt as "
            f"{len(theirs)} of other shapes")
    copy.set_weights(lm.get_weights())
    copy.trainable = False
    return copy
