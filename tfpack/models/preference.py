"""Preference optimization (DPO, IPO, SimPO, ORPO) on packed pairs, exact per pair.

`PreferenceModel` wraps a causal LM (the policy, a `tfpack.models.CausalLM`
on any backbone: `DecoderBackbone`, `tfpack.models.from_keras_hub`) and
trains it on the packs of `tfpack.builders.preference_examples`. A pair is
one packed item (`tfpack.tasks.preference`); the model splits it back into
its two sequences before the backbone sees it: the chosen sequence of pair
``k`` becomes attention sequence ``2k + 1``, the rejected one ``2k + 2``,
each with positions from 0, so both run exactly as they would alone (the
backbone's causal block-diagonal mask). Each response's log-likelihood
given its prompt is the sum of ``log p(token | previous tokens of its own
sequence)`` over its tokens (the first response token is predicted from the
prompt's last token).

Per pair, with ``c``/``r`` the chosen/rejected log-likelihoods (sums over
response tokens), ``c0``/``r0`` the reference's, ``|c|``/``|r|`` the
response lengths (tokens), and ``sigma`` the logistic function:

============  =====================================================  ==========================
loss          per-pair loss                                          reward margin
============  =====================================================  ==========================
``sigmoid``   ``-log sigma(beta ((c - c0) - (r - r0)))``  (DPO)       ``beta ((c - c0) - (r - r0))``
``ipo``       ``((c - c0) - (r - r0) - 1 / (2 beta))^2``             ``beta ((c - c0) - (r - r0))``
``simpo``     ``-log sigma(beta c/|c| - beta r/|r| - gamma)``        ``beta c/|c| - beta r/|r|``
``orpo``      ``-c/|c| + lambda * -log sigma(odds(c/|c|) - odds(r/|r|))``  ``odds(c/|c|) - odds(r/|r|)``
============  =====================================================  ==========================

with ``odds(p) = p - log(1 - exp(p))`` (log odds of the mean log-probability
``p``). Normalization, following each paper: DPO (Rafailov et al., 2023)
and IPO (Azar et al., 2023) use the *sum* over response tokens (the
sequence's log-probability; TRL averages for IPO instead); SimPO (Meng et
al., 2024) and ORPO (Hong et al., 2024) the *mean* over response tokens,
and neither reads a reference. ORPO's SFT term is the chosen response's
mean negative log-likelihood, per pair. The loss of an update is the mean
over its pairs: the sum of the per-pair losses divided by the number of
pairs of the whole update, counted from the features before the forward
pass and summed over micro-batches and replicas (`tfpack.training.Trainer`,
``target_counts``), so gradients equal those of the unpacked update.

The reference's log-likelihoods (``sigmoid``, ``ipo``) come from one of:

- ``reference=None`` (the default): a frozen copy of the policy made when
  the model is constructed (`tfpack.models.frozen_copy`, TRL's
  ``ref_model=None``), run in the same step; the reference-free losses make
  none;
- a ``reference`` model: a distinct causal LM, frozen, run in the same step;
- ``reference="precomputed"``: the packs carry them
  (``reference_chosen_log_likelihood``, ``reference_rejected_log_likelihood``),
  computed once beforehand with `tfpack.inference.reference_log_likelihoods`
  (`tfpack.predict`) and passed to ``preference_examples(reference=)``: the
  same numbers, at half the compute per step.

Exactly one source is read: packs carrying the reference's log-likelihoods
are refused by a model that runs a reference, and packs without them by
``reference="precomputed"``.

Example:

>>> import numpy as np
>>> from tfpack.builders import preference_pair
>>> from tfpack.models import CausalLM, DecoderBackbone
>>> from tfpack.testing import pack_examples
>>> policy = CausalLM(DecoderBackbone(vocabulary_size=20, num_layers=1, hidden_dim=8,
...                                   num_heads=2, intermediate_dim=16))
>>> model = PreferenceModel(policy, loss="simpo")
>>> packs = pack_examples([preference_pair([1, 2], [3], [4, 5]),
...                        preference_pair([6], [7, 8], [9])], max_length=16)
>>> out = model(packs)
>>> out["chosen_log_likelihood"].shape, model.loss_terms
(TensorShape([1, 2]), ('preference',))
"""

import keras
from keras import ops

from tfpack.errors import TfpackError
from tfpack.layers.losses import sequence_log_likelihoods
from tfpack.layers.statistic_ratio import StatisticRatio
from tfpack.models.backbone import backbone_input_features
from tfpack.models.frozen_copy import frozen_copy
from tfpack.models.lm_scorer import next_token_targets
from tfpack.models.shared_prompt import assert_no_shared_prompts
from tfpack.models.shared_prompt import check_shared_prompt_policy
from tfpack.models.shared_prompt import refuse_shared_prompts
from tfpack.models.shared_prompt import shared_prompt_logits
from tfpack.models.task import Task
from tfpack.params import Anything, Boolean, Constraint, Options, Real, validate_params

__all__ = ["PreferenceModel", "LOSSES", "preference_losses"]

LOSSES = ("sigmoid", "ipo", "simpo", "orpo")
# `reference=PRECOMPUTED`: the reference's log-likelihoods travel in the packs.
PRECOMPUTED = "precomputed"
_REFERENCE_LOSSES = ("sigmoid", "ipo")
_REFERENCE_FEATURES = ("reference_chosen_log_likelihood", "reference_rejected_log_likelihood")


class _CausalLM(Constraint):
    """A causal LM: callable, with a ``backbone`` (`tfpack.params` declaration)."""

    description = ("a causal LM with a `backbone` returning `logits` (e.g. "
                   "tfpack.models.CausalLM)")

    def holds(self, value) -> bool:
        return callable(value) and getattr(value, "backbone", None) is not None

    def bad_values(self) -> list:
        return [object(), 1, "no-such-model"]


_CAUSAL_LM = _CausalLM()


def split_pairs(sequence_ids, branch_ids, position_ids, num_pairs):
    """``(sequence_ids, position_ids)`` of the pairs' sequences, for the backbone.

    Pair ``k`` (``sequence_ids`` k + 1) becomes sequence ``2k + 1`` (its
    chosen branch) and ``2k + 2`` (its rejected branch); the rejected
    branch's positions restart where the chosen branch's started: at 0, or,
    after a shared prompt (branch 0, id 0 here), where the prompt ends.

    >>> import numpy as np
    >>> s, p = split_pairs(np.array([[1, 1, 1, 1, 2, 2, 0]]), np.array([[1, 1, 2, 2, 1, 2, 0]]),
    ...                    np.array([[0, 1, 2, 3, 0, 1, 0]]), 2)
    >>> np.asarray(s).tolist(), np.asarray(p).tolist()
    ([[1, 1, 2, 2, 3, 4, 0]], [[0, 1, 0, 1, 0, 0, 0]])
    """
    pairs = ops.cast(sequence_ids, "int32")
    branches = ops.cast(branch_ids, "int32")
    positions = ops.cast(position_ids, "int32")
    real = pairs > 0
    # A shared prompt (branch 0) belongs to neither sequence alone.
    sequences = ops.where(real & (branches > 0), 2 * (pairs - 1) + branches, 0)
    # Tokens of each pair's chosen branch: the rejected branch starts after them.
    membership = ops.one_hot(pairs - 1, num_pairs, dtype="float32")  # [B, L, K]
    chosen = ops.cast(branches == 1, "float32")
    per_pair = ops.einsum("bl,blk->bk", chosen, membership)
    before = ops.cast(ops.einsum("blk,bk->bl", membership, per_pair), "int32")
    positions = ops.where(branches == 2, positions - before, positions)
    return sequences, ops.where(real, positions, 0)


def response_log_likelihoods(logits, input_ids, sequences, response_mask, num_pairs):
    """Per pair ``(chosen, rejected, chosen_tokens, rejected_tokens)``, each ``[B, K]``.

    ``sequences`` are the split ids of `split_pairs`; a response token's
    log-probability is read at the position before it, in its own sequence.
    """
    labels = next_token_targets(input_ids, sequences)
    # The target of position i is token i + 1: scored when that is a response token.
    following = ops.concatenate([response_mask[:, 1:], ops.zeros_like(response_mask[:, :1])],
                                axis=1)
    likelihood, targets = sequence_log_likelihoods(
        logits, labels, sequences, 2 * num_pairs, loss_weights=ops.cast(following, "float32"))
    shape = (-1, num_pairs, 2)
    likelihood, targets = ops.reshape(likelihood, shape), ops.reshape(targets, shape)
    return likelihood[..., 0], likelihood[..., 1], targets[..., 0], targets[..., 1]


def _log1m_exp(x):
    """``log(1 - exp(x))`` for ``x < 0``, accurate on both sides of ``-log 2``."""
    x = ops.minimum(x, -1e-7)
    return ops.where(x > -0.6931472, ops.log(-ops.expm1(x)), ops.log1p(-ops.exp(x)))


def preference_losses(loss, chosen, rejected, chosen_tokens, rejected_tokens,
                      reference_chosen=None, reference_rejected=None, *, beta=0.1,
                      simpo_gamma=0.5, orpo_lambda=0.1):
    """Per-pair ``(loss, reward_margin)`` of the module docstring's table.

    >>> import numpy as np
    >>> l, m = preference_losses("sigmoid", np.array([-2.0]), np.array([-3.0]),
    ...                          np.array([1.0]), np.array([1.0]), np.array([-2.5]),
    ...                          np.array([-2.5]), beta=1.0)
    >>> round(float(l[0]), 4), float(m[0])   # -log sigma(0.5 + 0.5)
    (0.3133, 1.0)
    """
    chosen, rejected = ops.cast(chosen, "float32"), ops.cast(rejected, "float32")
    if loss in _REFERENCE_LOSSES:
        h = (chosen - ops.cast(reference_chosen, "float32")) - (
            rejected - ops.cast(reference_rejected, "float32"))
        if loss == "sigmoid":
            return -ops.log_sigmoid(beta * h), beta * h
        return ops.square(h - 1.0 / (2.0 * beta)), beta * h
    # Mean log-probability per response token (a response has at least one).
    mean_chosen = chosen / ops.maximum(ops.cast(chosen_tokens, "float32"), 1.0)
    mean_rejected = rejected / ops.maximum(ops.cast(rejected_tokens, "float32"), 1.0)
    if loss == "simpo":
        margin = beta * mean_chosen - beta * mean_rejected
        return -ops.log_sigmoid(margin - simpo_gamma), margin
    margin = (mean_chosen - _log1m_exp(mean_chosen)) - (
        mean_rejected - _log1m_exp(mean_rejected))
    return -mean_chosen - orpo_lambda * ops.log_sigmoid(margin), margin


def _check_distinct(policy, reference) -> None:
    """The reference is frozen: one sharing the policy (itself, its backbone or any
    weight) would freeze the policy too, and `fit` would change nothing."""
    shared = reference is policy or reference.backbone is policy.backbone
    if not shared:
        mine = {id(v) for v in getattr(policy, "weights", [])}
        shared = any(id(v) in mine for v in getattr(reference, "weights", []))
    if shared:
        raise TfpackError(
            "`reference` must be a distinct model sharing no layer or weight with the policy "
            "(it is frozen: a shared one freezes the policy), None for a frozen copy of the "
            f"policy, or {PRECOMPUTED!r} to read the reference's log-likelihoods from the "
            "packs. Received: reference="
            + ("the policy itself" if reference is policy else "a model sharing the policy's "
               "backbone or weights"))
    sizes = [getattr(lm, "vocabulary_size", None) or getattr(lm.backbone, "vocabulary_size", None)
             for lm in (policy, reference)]
    if None not in sizes and sizes[0] != sizes[1]:  # under XLA an id past a table is clamped
        raise TfpackError("`reference` must have the policy's vocabulary "
                          f"(vocabulary_size={sizes[0]}). Received: vocabulary_size={sizes[1]}")


@keras.saving.register_keras_serializable(package="tfpack")
class PreferenceModel(Task):
    """Preference optimization of a causal LM on packed pairs (module docstring).

    Example (DPO against a frozen copy of the policy, made here: at first
    the policy equals its reference, and every pair's loss is log 2):

    >>> import numpy as np
    >>> from tfpack.builders import preference_pair
    >>> from tfpack.models import CausalLM, DecoderBackbone
    >>> from tfpack.testing import pack_examples
    >>> policy = CausalLM(DecoderBackbone(vocabulary_size=20, num_layers=1, hidden_dim=8,
    ...                                   num_heads=2, intermediate_dim=16))
    >>> model = PreferenceModel(policy, loss="sigmoid", beta=0.1)
    >>> packs = pack_examples([preference_pair([1, 2], [3], [4, 5])], max_length=8)
    >>> round(float(model(packs)["loss"][0, 0]), 4)  # log 2
    0.6931
    >>> model.reference.trainable, len(model.trainable_weights) == len(policy.trainable_weights)
    (False, True)

    Args:
        policy: the causal LM trained (a `tfpack.models.CausalLM` or a model
            with a ``backbone`` returning ``{"logits": [B, L, V]}``). For
            segmented attention, build its backbone with
            ``max_sequences_per_pack=2 * K`` (two sequences a pair).
        reference: where the reference's log-likelihoods of ``sigmoid`` and
            ``ipo`` come from. None (default): a frozen copy of the policy,
            made here (`tfpack.models.frozen_copy`: the policy's weights now,
            so load pretrained weights into the policy first), run in the
            same step. A causal LM: that model, distinct from the policy
            (sharing no layer or weight), made non-trainable, run in the same
            step. ``"precomputed"``: read from the packs
            (``reference_chosen_log_likelihood``,
            ``reference_rejected_log_likelihood``, from
            `tfpack.inference.reference_log_likelihoods` and
            ``preference_examples(reference=)``); packs without them are
            refused. ``simpo`` and ``orpo`` read no reference: None makes no
            copy for them.
        loss: ``"sigmoid"`` (DPO), ``"ipo"``, ``"simpo"`` or ``"orpo"``.
        beta: DPO's and SimPO's beta; IPO's tau (the target margin is
            ``1 / (2 beta)``); unused by ORPO.
        simpo_gamma: SimPO's target reward margin gamma.
        orpo_lambda: ORPO's weight lambda of the odds-ratio term.
        share_prompt: the packs store each prompt once
            (`tfpack.builders.preference_examples(share_prompt=True)`); the
            policy (and reference) must be a `CausalLM` on a dense
            `DecoderBackbone` (`tfpack.models.shared_prompt`). Without it,
            packs that share their prompts are refused (each response would
            be scored without its prompt).
        **kwargs: passed on to `keras.Model`.

    Call arguments:
        inputs: the packed features: ``input_ids``, ``sequence_ids``,
            ``position_ids``, ``branch_ids``, ``response_mask``,
            ``sequence_mask`` and, with ``reference="precomputed"``, the
            reference's log-likelihoods for ``sigmoid`` and ``ipo``.
        training: whether dropout is active.

    Returns:
        Per pair, float32 ``[B, K]`` (0 in empty slots):
        ``chosen_log_likelihood``, ``rejected_log_likelihood``,
        ``reward_margin`` and ``loss``.
    """

    task = "preference"
    loss_terms = ("preference",)
    head_features = ("branch_ids", "response_mask", "sequence_mask") + _REFERENCE_FEATURES
    # How `tfpack.predict` packs this model's examples (a preset of tfpack.data.pack).
    packing_roles = "preference"

    @validate_params({
        # Checked in the body, so that the common API test can make one (an object).
        "policy": Anything("a causal LM, checked below"),
        "reference": [None, Options(PRECOMPUTED), _CAUSAL_LM],
        "loss": Options(*LOSSES),
        "beta": Real(0, None, closed="neither"),
        "simpo_gamma": Real(),
        "orpo_lambda": Real(0, None, closed="neither"),
        "share_prompt": Boolean(),
    })
    def __init__(self, policy, reference=None, *, loss="sigmoid", beta=0.1, simpo_gamma=0.5,
                 orpo_lambda=0.1, share_prompt=False, **kwargs):
        if not _CAUSAL_LM.holds(policy):
            raise TfpackError(f"`policy` must be {_CAUSAL_LM.description}. "
                              f"Received: policy={policy!r}"[:300])
        model = reference if _CAUSAL_LM.holds(reference) else None
        if model is not None:
            _check_distinct(policy, model)
        if share_prompt:
            check_shared_prompt_policy(policy)
            if model is not None:
                check_shared_prompt_policy(model, "reference")
        copies = reference is None and loss in _REFERENCE_LOSSES
        if copies:
            # Made before any update (and before Keras traces a first call):
            # the policy's weights of this moment.
            model = frozen_copy(policy)
        super().__init__(policy.backbone, **kwargs)
        self.policy = policy
        self.reference = model
        if model is not None:
            model.trainable = False
        # How `reference` was given (`get_config`): a copy is made again from the policy.
        self.copies_policy = copies
        self.precomputed = isinstance(reference, str)  # PRECOMPUTED, the one string accepted
        self.loss = loss
        self.beta = float(beta)
        self.simpo_gamma = float(simpo_gamma)
        self.orpo_lambda = float(orpo_lambda)
        self.share_prompt = bool(share_prompt)
        self.vocabulary_size = getattr(policy, "vocabulary_size", None)
        # `evaluate` reports the reward accuracy (share of pairs with a
        # positive margin) and the mean margin, both exact means over pairs.
        replaced = self._preference_accuracy  # Task's `preference_accuracy`: the same ratio.
        self._preference_accuracy = StatisticRatio(name="reward_accuracy")
        if replaced in self._metrics:
            self._metrics.remove(replaced)
        self._reward_margin = keras.metrics.Mean(name="reward_margin")

    @property
    def optional_features(self):
        # Required (so `tfpack.predict` and the `Trainer` refuse packs without
        # them before tracing) when the loss reads them from the packs.
        needed = self.loss in _REFERENCE_LOSSES and self.precomputed
        return () if needed else _REFERENCE_FEATURES

    @property
    def losses(self):
        # A frozen reference's own losses (a mixture of experts' router loss)
        # train nothing: only the policy's count.
        own = super().losses
        if self.reference is None:
            return own
        skip = {id(t) for t in self.reference.losses}
        return [t for t in own if id(t) not in skip]

    def _sequences(self, inputs):
        num_pairs = inputs["sequence_mask"].shape[-1]
        sequences, positions = split_pairs(inputs["sequence_ids"], inputs["branch_ids"],
                                           inputs["position_ids"], num_pairs)
        features = {name: inputs[name] for name in backbone_input_features(self.backbone)
                    if name in inputs}
        features.update(sequence_ids=sequences, position_ids=positions)
        return features, sequences, num_pairs

    def sequence_positions(self, inputs):
        """Each token's position inside its own sequence (a pair's chosen or rejected one):
        the row of the position table it reads (checked by
        `tfpack.training.validation.position_checks`)."""
        return split_pairs(inputs["sequence_ids"], inputs["branch_ids"], inputs["position_ids"],
                           inputs["sequence_mask"].shape[-1])[1]

    def _scores(self, lm, features, inputs, sequences, num_pairs, training):
        if self.share_prompt:
            logits = shared_prompt_logits(lm, inputs, features["position_ids"], training)
        else:
            logits = lm(features, training=training)["logits"]
        return response_log_likelihoods(logits, inputs["input_ids"], sequences,
                                        ops.cast(inputs["response_mask"], "int32"), num_pairs)

    def call(self, inputs, training=None):
        features, sequences, num_pairs = self._sequences(inputs)
        chosen, rejected, chosen_tokens, rejected_tokens = self._scores(
            self.policy, features, inputs, sequences, num_pairs, training)
        mask = ops.cast(inputs["sequence_mask"], "float32")
        reference_chosen = reference_rejected = None
        if self.loss in _REFERENCE_LOSSES:
            reference_chosen, reference_rejected = self._reference(
                features, inputs, sequences, num_pairs)
        loss, margin = preference_losses(
            self.loss, chosen, rejected, chosen_tokens, rejected_tokens, reference_chosen,
            reference_rejected, beta=self.beta, simpo_gamma=self.simpo_gamma,
            orpo_lambda=self.orpo_lambda)
        outputs = {"chosen_log_likelihood": chosen * mask,
                   "rejected_log_likelihood": rejected * mask,
                   "reward_margin": margin * mask, "loss": loss * mask}
        if self.share_prompt:
            return outputs
        return assert_no_shared_prompts(self, inputs, outputs)

    def __call__(self, inputs, *args, **kwargs):
        # Checked before Keras's call wrapper, which would add lines to a refusal.
        if isinstance(inputs, dict):
            self._check_reference_source(inputs)
            if not self.share_prompt:  # Each response would be scored without its prompt.
                refuse_shared_prompts(inputs)
        return super().__call__(inputs, *args, **kwargs)

    def _check_reference_source(self, inputs):
        """Exactly one source of the reference's log-likelihoods: the packs or a model."""
        if self.loss not in _REFERENCE_LOSSES:
            return
        carried = [n for n in _REFERENCE_FEATURES if n in inputs]
        if self.reference is not None and carried:  # Which one was meant cannot be told.
            made = ("a frozen copy of the policy (reference=None)" if self.copies_policy
                    else "its `reference` model")
            raise TfpackError(
                f"`PreferenceModel(loss={self.loss!r})` reads the reference's log-likelihoods "
                f"from one source; this one computes them with {made}, so packs must not "
                f"carry them: pass reference={PRECOMPUTED!r} to read them from the packs, or "
                "build the packs without preference_examples(reference=). "
                f"Received: packs carrying {carried}")
        missing = [n for n in _REFERENCE_FEATURES if n not in inputs]
        if self.reference is None and missing:
            raise TfpackError(
                f"`PreferenceModel(loss={self.loss!r}, reference={PRECOMPUTED!r})` reads the "
                "reference's log-likelihoods from the packs: build them with "
                "preference_examples(..., reference=reference_log_likelihoods(...)), or pass "
                "reference=None (a frozen copy of the policy) or a reference model. "
                f"Received: packs without {missing}")

    def _reference(self, features, inputs, sequences, num_pairs):
        self._check_reference_source(inputs)  # Again: `build` runs `call` itself.
        if self.reference is not None:
            chosen, rejected, _, _ = self._scores(self.reference, features, inputs, sequences,
                                                  num_pairs, False)
            return ops.stop_gradient(chosen), ops.stop_gradient(rejected)
        return tuple(ops.cast(inputs[n], "float32") for n in _REFERENCE_FEATURES)

    def loss_statistics(self, x, y_pred):
        mask = ops.cast(x["sequence_mask"], "float32")
        wins = ops.cast(y_pred["reward_margin"] > 0, "float32") * mask
        return {"preference_loss_sum": ops.sum(y_pred["loss"] * mask),
                "preference_count": ops.sum(mask),
                "preference_correct": ops.sum(wins)}

    def target_counts(self, x):
        return {"preference": ops.sum(ops.cast(x["sequence_mask"], "float32"))}

    def update_task_metrics(self, x, y_pred, statistics):
        self._reward_margin.update_state(y_pred["reward_margin"],
                                         sample_weight=ops.cast(x["sequence_mask"], "float32"))

    def get_config(self):
        config = super().get_config()
        del config["backbone"]  # The policy's: serialized with it.
        if self.precomputed:
            reference = PRECOMPUTED
        elif self.reference is None or self.copies_policy:
            reference = None  # A copy is made from the policy again (its weights then load).
        else:
            reference = keras.saving.serialize_keras_object(self.reference)
        if self.copies_policy:
            config["reference_copied"] = True  # Not a config of before: see `from_config`.
        config.update(
            policy=keras.saving.serialize_keras_object(self.policy), reference=reference,
            loss=self.loss, beta=self.beta, simpo_gamma=self.simpo_gamma,
            orpo_lambda=self.orpo_lambda, share_prompt=self.share_prompt)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        copied = config.pop("reference_copied", False)
        if (config.get("reference") is None and not copied
                and config.get("loss", "sigmoid") in _REFERENCE_LOSSES):
            # Written when reference=None meant what PRECOMPUTED means now (its file
            # holds no reference weights): read as it was written.
            config["reference"] = PRECOMPUTED
        config["policy"] = keras.saving.deserialize_keras_object(config["policy"])
        if isinstance(config.get("reference"), dict):
            config["reference"] = keras.saving.deserialize_keras_object(config["reference"])
        return cls(**config)
