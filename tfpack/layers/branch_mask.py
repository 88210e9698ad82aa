"""The causal attention mask of packed pairs with a shared prompt (not block-diagonal).

A pair packed with its prompt shared (`tfpack.builders.preference_examples`,
``share_prompt=True``) is one sequence of the pack holding three branches:
the prompt but its last token (branch 0), then the chosen branch (1: the
prompt's last token and the chosen response), then the rejected branch (2:
the prompt's last token again and the rejected response). Query ``q`` may
attend to key ``k`` when both are real tokens of the same pair, ``k`` is not
after ``q``, and ``k`` is in the shared prompt or in ``q``'s own branch: the
rejected response sees the prompt but never the chosen one. Without branch 0
this is the causal block-diagonal mask of the pair's two sequences.

Worked example (one pair: shared ``a``; chosen ``b c``; rejected ``b' d``)::

    branch_ids  [0, 1, 1, 2, 2]
    allowed     a  b  c  b' d     (rows: queries)
           a    1  .  .  .  .
           b    1  1  .  .  .
           c    1  1  1  .  .
           b'   1  .  .  1  .
           d    1  .  .  1  1

>>> import numpy as np
>>> mask = branch_attention_mask(np.array([[1, 1, 1, 1, 1, 0]]),
...                              np.array([[0, 1, 1, 2, 2, 0]]), "bool")
>>> np.asarray(mask)[0].astype(int).tolist()[4]
[1, 0, 0, 1, 1, 0]
"""

from keras import ops

from tfpack.layers.attention_mask import large_negative_number

def branch_attention_mask(sequence_ids, branch_ids, dtype="float32"):
    """``[B, L, L]`` booleans (``dtype="bool"``) or the additive ``[B, 1, L, L]`` mask.

    Args:
        sequence_ids: int ``[B, L]``, the pair of each token (1..K, 0 = padding).
        branch_ids: int ``[B, L]``, 0 (shared prompt), 1 (chosen), 2 (rejected).
        dtype: ``"bool"``, or the float dtype of the additive mask (0 where
            allowed, a large negative number elsewhere) that dense attention adds.
    """
    pairs = ops.cast(sequence_ids, "int32")
    branches = ops.cast(branch_ids, "int32")
    query_pair, key_pair = ops.expand_dims(pairs, 2), ops.expand_dims(pairs, 1)
    query_branch, key_branch = ops.expand_dims(branches, 2), ops.expand_dims(branches, 1)
    index = ops.arange(ops.shape(pairs)[1], dtype="int32")
    causal = ops.expand_dims(ops.expand_dims(index, 1) >= ops.expand_dims(index, 0), 0)
    allowed = (query_pair > 0) & (query_pair == key_pair) & causal & (
        (key_branch == 0) | (key_branch == query_branch))
    if dtype == "bool":
        return allowed
    blocked = ops.cast(large_negative_number(dtype), dtype)
    return ops.expand_dims(ops.where(allowed, ops.zeros((), dtype), blocked), 1)
