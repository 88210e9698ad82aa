"""LAMB with the BERT/MLPerf recipe and the packing adjustment of the betas.

Built on `keras.optimizers.Lamb` (TensorFlow Addons, which used to provide the
BERT LAMB, is end of life). Three changes to the Keras update:

1. Weight decay goes *inside* the update, before the trust ratio (as the BERT
   and MLPerf reference LAMB): ``update = m_hat / (sqrt(v_hat) + eps) + wd * w``.
   Keras's own ``weight_decay`` is decoupled (applied to the weights outside
   the trust ratio), so the base class's decay step is switched off here.
2. Variables whose path matches ``exclude_from_weight_decay`` get no decay;
   those matching ``exclude_from_layer_adaptation`` use a trust ratio of 1
   (by default the same patterns: LayerNorm and biases).
3. Packing: with packing factor ``p`` (average sequences per pack) the decay
   rates become ``beta_1 ** p`` and ``beta_2 ** p``. One update with these
   betas leaves the momentum and velocity where ``p`` updates with the same
   gradient and the original betas would (seed 000, appendix D, theorem D.1);
   the bias corrections ``1 - beta ** t`` follow the same rule.

References:
    - You et al., "Large Batch Optimization for Deep Learning: Training BERT
      in 76 minutes", https://arxiv.org/abs/1904.00962
    - Krell et al., "Efficient Sequence Packing without Cross-contamination",
      section 3.3 and appendix D.
"""

from __future__ import annotations

import collections.abc
import re

import keras
from keras import ops

from tfpack.errors import TfpackError
from tfpack.params import InstanceOf, Real, Text, validate_params

__all__ = ["Lamb", "DEFAULT_EXCLUDE"]

# Variable-path patterns the BERT recipe leaves out of weight decay and layer
# adaptation: LayerNorm scales and offsets, and every bias.
DEFAULT_EXCLUDE = ("layer_norm", "LayerNorm", "layernorm", "bias")


def _patterns(name: str, value) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = (value,)
    value = tuple(value)
    for pattern in value:
        if not isinstance(pattern, str):
            raise TfpackError(
                f"`{name}` must be a list of regular-expression strings. "
                f"Received: {name}={value!r}")
        re.compile(pattern)
    return value


_DECAY = Real(0, 1, closed="left")
# Patterns: a string or a list of them (each checked by `_patterns`).
_PATTERNS = [None, InstanceOf(str, list, tuple,
                              description="a regular expression or a list of them")]


@keras.saving.register_keras_serializable(package="tfpack")
class Lamb(keras.optimizers.Lamb):
    """LAMB for BERT pre-training on packed data.

    Example:

    >>> import keras, numpy as np
    >>> from tfpack.training import Lamb
    >>> optimizer = Lamb(learning_rate=1e-3, weight_decay=0.01, packing_factor=2.0)
    >>> round(optimizer.effective_beta_1, 4)  # 0.9 ** 2
    0.81
    >>> w = keras.Variable(np.ones(3, "float32"), name="kernel")
    >>> optimizer.apply([np.ones(3, "float32")], [w])
    >>> [round(float(x), 4) for x in w.numpy()]
    [0.999, 0.999, 0.999]

    Args:
        learning_rate: float, schedule or callable. Defaults to `1e-3`.
        beta_1: decay rate of the first moment *for unpacked data*.
            Defaults to `0.9`.
        beta_2: decay rate of the second moment for unpacked data.
            Defaults to `0.999`.
        epsilon: added to ``sqrt(v_hat)``. Defaults to `1e-6` (BERT).
        weight_decay: decay rate applied inside the update before the trust
            ratio. Defaults to `0.01`; `0` or `None` turns it off.
        exclude_from_weight_decay: regular expressions; a variable whose path
            (``variable.path``, e.g. ``"encoder/layer_norm/gamma"``) matches
            one gets no weight decay. `None` means `DEFAULT_EXCLUDE`; `()`
            excludes nothing.
        exclude_from_layer_adaptation: regular expressions; matching variables
            use a trust ratio of 1. `None` means the same patterns as
            `exclude_from_weight_decay` (as TensorFlow Addons).
        packing_factor: average number of sequences per pack ``p >= 1``; the
            update uses ``beta_1 ** p`` and ``beta_2 ** p``. Defaults to `1`.
        **kwargs: the other `keras.optimizers.Optimizer` arguments
            (``clipnorm``, ``global_clipnorm``, ``loss_scale_factor``, ...).

    The user-facing attributes ``beta_1``/``beta_2`` keep the unpacked values
    (so ``get_config`` round-trips); ``effective_beta_1``/``effective_beta_2``
    are the ones the update uses. The patterns are stored as
    ``weight_decay_exclusions`` and ``layer_adaptation_exclusions``
    (``exclude_from_weight_decay`` stays the Keras method).
    """

    @validate_params({
        "learning_rate": [Real(0), InstanceOf(keras.optimizers.schedules.LearningRateSchedule,
                                              keras.Variable, collections.abc.Callable,
                                              description="a schedule or a callable")],
        "beta_1": _DECAY, "beta_2": _DECAY, "epsilon": Real(0),
        "weight_decay": [None, Real(0)],
        "exclude_from_weight_decay": _PATTERNS, "exclude_from_layer_adaptation": _PATTERNS,
        "packing_factor": Real(1), "name": Text(),
    })
    def __init__(
        self,
        learning_rate=1e-3,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-6,
        weight_decay: float | None = 0.01,
        exclude_from_weight_decay=None,
        exclude_from_layer_adaptation=None,
        packing_factor: float = 1.0,
        name: str = "lamb",
        **kwargs,
    ):
        super().__init__(
            learning_rate=learning_rate,
            beta_1=float(beta_1),
            beta_2=float(beta_2),
            epsilon=epsilon,
            weight_decay=float(weight_decay) if weight_decay else None,
            name=name,
            **kwargs,
        )
        if exclude_from_weight_decay is None:
            exclude_from_weight_decay = DEFAULT_EXCLUDE
        self.weight_decay_exclusions = _patterns(
            "exclude_from_weight_decay", exclude_from_weight_decay)
        if exclude_from_layer_adaptation is None:
            exclude_from_layer_adaptation = self.weight_decay_exclusions
        self.layer_adaptation_exclusions = _patterns(
            "exclude_from_layer_adaptation", exclude_from_layer_adaptation)
        self.packing_factor = float(packing_factor)

    @property
    def effective_beta_1(self) -> float:
        """``beta_1 ** packing_factor``: the first-moment decay the update uses."""
        return self.beta_1 ** self.packing_factor

    @property
    def effective_beta_2(self) -> float:
        """``beta_2 ** packing_factor``: the second-moment decay the update uses."""
        return self.beta_2 ** self.packing_factor

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        # Decided once from the Keras paths (e.g. "encoder/layer_norm/gamma"):
        # inside a tf.distribute update the variable is a bare per-replica
        # tf.Variable whose name no longer carries the layer path.
        self._decay_flags = [self._decays(v) for v in var_list]
        self._adapt_flags = [
            not _matches(self.layer_adaptation_exclusions, v) for v in var_list]

    def _decays(self, variable) -> bool:
        return (bool(self.weight_decay)
                and not _matches(self.weight_decay_exclusions, variable)
                # Honour Keras's `exclude_from_weight_decay(...)` method too.
                and self._use_weight_decay(variable))

    def _apply_weight_decay(self, variables):
        # Decay is part of `update_step` (before the trust ratio), never the
        # decoupled Keras step.
        return

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        # One apply: the scalars every variable's update shares (the learning rate, the
        # decays, their bias corrections) are made once, not once per variable (fewer
        # ops to trace; the same values).
        self._shared = _Shared()
        try:
            super()._backend_update_step(grads, trainable_variables, learning_rate)
        finally:
            self._shared = None

    def _scalars(self, learning_rate, dtype):
        """``(lr, 1 - beta_1, 1 - beta_2, 1 - beta_1 ** step, 1 - beta_2 ** step)`` in
        ``dtype``, made once an apply (`_backend_update_step`)."""
        shared = getattr(self, "_shared", None)
        key = str(dtype)
        if shared is not None and key in shared.values:
            return shared.values[key]
        beta_1 = ops.cast(self.effective_beta_1, dtype)
        beta_2 = ops.cast(self.effective_beta_2, dtype)
        step = ops.cast(self.iterations + 1, dtype)
        values = (ops.cast(learning_rate, dtype), 1.0 - beta_1, 1.0 - beta_2,
                  1.0 - ops.power(beta_1, step), 1.0 - ops.power(beta_2, step))
        if shared is not None:
            shared.values[key] = values
        return values

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        dtype = variable.dtype
        lr, decay_1, decay_2, correction_1, correction_2 = self._scalars(learning_rate, dtype)
        gradient = ops.cast(gradient, dtype)

        m = self._momentums[index]
        v = self._velocities[index]
        self.assign_add(m, ops.multiply(ops.subtract(gradient, m), decay_1))
        self.assign_add(
            v, ops.multiply(ops.subtract(ops.square(gradient), v), decay_2))
        m_hat = ops.divide(m, correction_1)
        v_hat = ops.divide(v, correction_2)
        update = ops.divide(m_hat, ops.add(ops.sqrt(v_hat), self.epsilon))
        if self._decay_flags[index]:
            update = ops.add(update, ops.multiply(
                ops.cast(self.weight_decay, dtype), variable))
        if self._adapt_flags[index]:
            w_norm = ops.sqrt(ops.sum(ops.square(variable)))
            u_norm = ops.sqrt(ops.sum(ops.square(update)))
            ratio = ops.where(
                ops.logical_and(ops.greater(w_norm, 0), ops.greater(u_norm, 0)),
                ops.divide(w_norm, ops.maximum(u_norm, 1e-30)),
                ops.ones_like(w_norm))
            update = ops.multiply(ratio, update)
        self.assign_sub(variable, ops.multiply(lr, update))

    def get_config(self):
        config = super().get_config()
        config.update({
            "exclude_from_weight_decay": list(self.weight_decay_exclusions),
            "exclude_from_layer_adaptation": list(self.layer_adaptation_exclusions),
            "packing_factor": self.packing_factor,
        })
        return config


def _matches(patterns: tuple[str, ...], variable) -> bool:
    path = getattr(variable, "path", None) or variable.name
    return any(re.search(p, path) for p in patterns)


class _Shared:
    """The scalars one apply's updates share, by dtype (a plain object: never tracked)."""

    def __init__(self):
        self.values = {}
