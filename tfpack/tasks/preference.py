"""Preference pairs (DPO, IPO, SimPO, ORPO): the declaration.

A pair ``(prompt, chosen, rejected)`` packs as ONE item, so its two
sequences always share a pack and a pair's loss never spans batches: in the
packed contract a "sequence" of this task is a whole pair (``sequence_ids``
1..K count pairs, ``example_ids`` name the pair, ``K`` = pairs per pack).
Inside the item, ``branch_ids`` say which tokens form the chosen sequence
(1) and which the rejected one (2); the model splits them into two
attention sequences, each with positions from 0 (`tfpack.models.PreferenceModel`).
With prompt sharing, the prompt's tokens but its last are stored once, as
branch 0, seen by both branches, and the branches' positions continue from
the prompt. ``response_mask`` marks response tokens, whose log-likelihoods
the losses compare. The reference model's log-likelihoods may travel in the
packs, computed once beforehand (`tfpack.builders.preference_examples`,
``reference=``; read by ``PreferenceModel(reference="precomputed")``).

Worked example, prompt ``[1, 2]``, chosen ``[7]``, rejected ``[8, 9]``::

    input_ids      [1, 2, 7, 1, 2, 8, 9]
    branch_ids     [1, 1, 1, 2, 2, 2, 2]
    response_mask  [0, 0, 1, 0, 0, 1, 1]
    shared prompt: input_ids [1, 2, 7, 2, 8, 9], branch_ids [0, 1, 1, 2, 2, 2],
                   response_mask [0, 0, 1, 0, 1, 1]

>>> from tfpack import tasks
>>> spec = tasks.get("preference")
>>> spec.feature("branch_ids").dimension, spec.feature("reference_chosen_log_likelihood").dimension
('L', 'K')
"""

from tfpack.tasks.base import Feature, TaskSpec, register

__all__ = ["PREFERENCE"]

PREFERENCE = register(TaskSpec(
    name="preference",
    doc="preference pairs (DPO, IPO, SimPO, ORPO): a pair packs as one item",
    features=(
        Feature("branch_ids", "int32", "token", "input", 0,
                "1: the pair's chosen sequence, 2: its rejected one, 0: a shared prompt"),
        Feature("response_mask", "int32", "token", "input", 0,
                "1 on response tokens (chosen or rejected), 0 on prompt tokens"),
        Feature("reference_chosen_log_likelihood", "float32", "sequence", "label", 0.0,
                "the reference model's log-likelihood of the chosen response",
                source="optional"),
        Feature("reference_rejected_log_likelihood", "float32", "sequence", "label", 0.0,
                "the reference model's log-likelihood of the rejected response",
                source="optional"),
    ),
    outputs={"chosen_log_likelihood": "sequence", "rejected_log_likelihood": "sequence",
             "reward_margin": "sequence", "loss": "sequence"},
    detect=(("branch_ids", 1),),
))
