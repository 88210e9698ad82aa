"""The reference model's log-likelihoods of preference pairs, computed once.

A `tfpack.models.PreferenceModel` with a frozen reference model (its own
copy of the policy, or a model given) runs that reference on every step;
`reference_log_likelihoods` runs it once, through `predict`, so the packs
carry its numbers instead, read by ``PreferenceModel(reference="precomputed")``.
"""

from tfpack.inference.predict import predict
from tfpack.models.preference import PreferenceModel
from tfpack.params import Anything, Boolean, Integer, validate_params

__all__ = ["reference_log_likelihoods"]


@validate_params({"reference": Anything("a causal LM, checked by PreferenceModel"),
                  "examples": Anything("preference pairs, checked by tfpack.predict"),
                  "max_length": Integer(1), "max_sequences_per_pack": Integer(1),
                  "share_prompt": Boolean()})
def reference_log_likelihoods(reference, examples, *, max_length, max_sequences_per_pack,
                              share_prompt=False, **predict_arguments):
    """The reference's log-likelihoods of every pair, computed once (`tfpack.predict`).

    Pass the result to `tfpack.builders.preference_examples` as
    ``reference=``: the packs then carry them and a
    ``PreferenceModel(policy, reference="precomputed")`` reads them (half the
    compute per step).

    >>> import tfpack
    >>> from tfpack.models import CausalLM, DecoderBackbone
    >>> reference = CausalLM(DecoderBackbone(vocabulary_size=20, num_layers=1, hidden_dim=8,
    ...                                      num_heads=2, intermediate_dim=16))
    >>> pairs = [{"prompt": [1, 2], "chosen": [3], "rejected": [4, 5]}]
    >>> scores = reference_log_likelihoods(
    ...     reference, tfpack.builders.preference_examples(pairs, max_length=8),
    ...     max_length=8, max_sequences_per_pack=2, jit_compile=False)
    >>> sorted(scores), scores["chosen_log_likelihood"].shape
    (['chosen_log_likelihood', 'rejected_log_likelihood'], (1,))

    Args:
        reference: the reference causal LM.
        examples: a dataset of `tfpack.builders.preference_examples`.
        max_length, max_sequences_per_pack, **predict_arguments: as
            `tfpack.predict` (``max_sequences_per_pack`` counts pairs).
        share_prompt: the pairs were built with
            ``preference_examples(share_prompt=True)``; packs that share
            their prompts are refused without it (each response would be
            scored without its prompt).

    Returns:
        ``{"chosen_log_likelihood": [n], "rejected_log_likelihood": [n]}``,
        float32 numpy arrays in input order.
    """
    # Reference-free, so that the packs need no reference features; the
    # log-likelihoods do not depend on the loss.
    scorer = PreferenceModel(reference, loss="simpo", share_prompt=share_prompt)
    out = predict(scorer, examples, max_length=max_length,
                  max_sequences_per_pack=max_sequences_per_pack, **predict_arguments)
    return {k: out[k] for k in ("chosen_log_likelihood", "rejected_log_likelihood")}
