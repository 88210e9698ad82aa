"""Preference pairs as packable items: a pair is ONE item, so it never splits.

`preference_examples` turns ``{"prompt", "chosen", "rejected"}`` pairs into
unpacked examples of the ``preference`` task (`tfpack.tasks.preference`).
Each pair is a single item of length ``2 * |prompt| + |chosen| + |rejected|``
(prompt sharing: ``|prompt| + 1 + |chosen| + |rejected|``): the planner
places that length, so both sequences of a pair land in the same pack by
construction, and a pair's loss never spans packs, batches or replicas.
`tfpack.models.PreferenceModel` splits the item back into its two sequences.

Worked example (prompt ``[1, 2]``, chosen ``[7]``, rejected ``[8, 9]``)::

    input_ids     [1, 2, 7, 1, 2, 8, 9]    prompt + chosen, prompt + rejected
    branch_ids    [1, 1, 1, 2, 2, 2, 2]    1: the chosen sequence, 2: the rejected one
    response_mask [0, 0, 1, 0, 0, 1, 1]    1 on response tokens

    share_prompt=True: the prompt but its last token once (branch 0), seen by
    both branches; each branch repeats the prompt's last token, whose output
    predicts the response's first token:
    input_ids     [1, 2, 7, 2, 8, 9]
    branch_ids    [0, 1, 1, 2, 2, 2]
    response_mask [0, 0, 1, 0, 1, 1]

>>> import tfpack
>>> ds = tfpack.builders.preference_examples(
...     [{"prompt": [1, 2], "chosen": [7], "rejected": [8, 9]}], max_length=8)
>>> x = next(iter(ds))
>>> x["input_ids"].numpy().tolist(), x["branch_ids"].numpy().tolist()
([1, 2, 7, 1, 2, 8, 9], [1, 1, 1, 2, 2, 2, 2])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from tfpack import _tensorflow
from tfpack.builders.causal_lm import _pair_ids, _tokenized_texts
from tfpack.builders.tokenizers import reject_vocab_path, text_tokenizer
from tfpack.errors import TfpackError
from tfpack.params import (Anything, Boolean, ExistingFile, Integer, Options, token_ids,
                           validate_params)

if TYPE_CHECKING:  # the annotations' `tf`; the functions import it (`tfpack._tensorflow`)
    import tensorflow as tf

__all__ = ["preference_examples", "preference_pair"]

TRUNCATIONS = ("prompt_start", "error")
_FIELDS = ("prompt", "chosen", "rejected")


@validate_params({"prompt": Anything("token ids, checked below"),
                  "chosen": Anything("token ids, checked below"),
                  "rejected": Anything("token ids, checked below"),
                  "share_prompt": Boolean()})
def preference_pair(prompt, chosen, rejected, *, share_prompt: bool = False
                    ) -> dict[str, np.ndarray]:
    """One pair's item: ``input_ids``, ``branch_ids``, ``response_mask`` (int32).

    >>> item = preference_pair([1, 2], [7], [8, 9], share_prompt=True)
    >>> {k: v.tolist() for k, v in item.items()}  # doctest: +NORMALIZE_WHITESPACE
    {'input_ids': [1, 2, 7, 2, 8, 9], 'branch_ids': [0, 1, 1, 2, 2, 2],
     'response_mask': [0, 0, 1, 0, 1, 1]}

    Args:
        prompt, chosen, rejected: token ids (prompt at least one, each
            response at least one).
        share_prompt: store the prompt once (see the module docstring).

    Returns:
        The unpacked example of the ``preference`` task.
    """
    prompt, chosen, rejected = (token_ids(s, n).tolist() for s, n in
                                ((prompt, "prompt"), (chosen, "chosen"), (rejected, "rejected")))
    if not prompt or not chosen or not rejected:
        raise TfpackError("A pair must have at least one prompt token and one token in each "
                          f"response. Received: lengths {len(prompt)}, {len(chosen)}, "
                          f"{len(rejected)}")
    if share_prompt:
        shared, last = prompt[:-1], prompt[-1:]
        pieces = [(shared, 0, 0), (last, 1, 0), (chosen, 1, 1), (last, 2, 0), (rejected, 2, 1)]
    else:
        pieces = [(prompt, 1, 0), (chosen, 1, 1), (prompt, 2, 0), (rejected, 2, 1)]
    return {
        "input_ids": np.array([t for ids, _, _ in pieces for t in ids], np.int32),
        "branch_ids": np.array([b for ids, b, _ in pieces for _ in ids], np.int32),
        "response_mask": np.array([r for ids, _, r in pieces for _ in ids], np.int32),
    }


def pair_length(prompt: int, chosen: int, rejected: int, share_prompt: bool = False) -> int:
    """Tokens of a pair's item (what the planner places)."""
    return (prompt + 1 if share_prompt else 2 * prompt) + chosen + rejected


@validate_params({
    "pairs": Anything("a list or dataset of pairs, checked pair by pair"),
    "max_length": Integer(3),
    "tokenizer": Anything("checked by text_tokenizer"),
    "share_prompt": Boolean(),
    "truncation": Options(*TRUNCATIONS),
    "reference": Anything("checked against the number of pairs"),
    "vocab_path": [None, ExistingFile()],
    "lower_case": Boolean(),
})
def preference_examples(
    pairs,
    max_length: int,
    *,
    tokenizer=None,
    share_prompt: bool = False,
    truncation: str = "prompt_start",
    reference: Mapping | None = None,
    vocab_path: str | None = None,
    lower_case: bool = True,
) -> tf.data.Dataset:
    """Preference pairs as unpacked examples of the ``preference`` task.

    Each pair becomes ONE example (module docstring): the pack planner sees
    the pair's whole length, so its chosen and rejected sequences always
    share a pack. Pack with ``tfpack.data.pack(...)`` (the ``preference``
    roles are inferred from ``branch_ids``) or pass the dataset to
    `tfpack.predict`; ``max_sequences_per_pack`` then counts pairs.

    With ``tokenizer=`` (the model's own, see `tfpack.builders.text_tokenizer`)
    the prompt is ``start + prompt`` and each response ``response + end``,
    the ids of `sft_examples` (the end token is scored: the model learns to
    stop). Token id lists are taken as they are.

    A pair longer than ``max_length`` (``2 * |prompt| + |chosen| + |rejected|``,
    or ``|prompt| + 1 + |chosen| + |rejected|`` with ``share_prompt``):

    - ``truncation="prompt_start"`` (default): the prompt loses tokens from
      its start (after its start ids: ``<bos>`` stays), keeping both
      responses whole and at least one prompt token; a pair whose responses
      alone do not fit is refused, naming it;
    - ``truncation="error"``: refused, naming the pair.

    Args:
        pairs: a list of ``{"prompt", "chosen", "rejected"}`` mappings (or a
            `tf.data.Dataset` of them), each value a string or a list of
            token ids. Strings without ``tokenizer`` use the bundled
            WordPiece `BertTokenizer` as `sft_examples` does.
        max_length: ``L``.
        tokenizer: the model's tokenizer (keras-hub `Tokenizer` or
            `Preprocessor`, a callable, or a `TextTokenizer`).
        share_prompt: store the prompt once, seen by both responses (needs a
            backbone with prompt-sharing attention: docs/model.md).
        truncation: ``"prompt_start"`` or ``"error"``.
        reference: the reference model's log-likelihoods, computed once
            beforehand: ``{"chosen_log_likelihood": [n],
            "rejected_log_likelihood": [n]}`` as `tfpack.predict` of a
            `tfpack.models.PreferenceModel` returns them; carried in the
            packs as ``reference_chosen_log_likelihood`` and
            ``reference_rejected_log_likelihood``, read by
            ``PreferenceModel(reference="precomputed")``.
        vocab_path, lower_case: the WordPiece vocabulary, without ``tokenizer``.

    Returns:
        A dataset of ``{"input_ids", "branch_ids", "response_mask"}`` (int32
        ``[n]``, ``n <= L``) and the two float32 reference scalars when
        ``reference`` is given, one example per pair, in input order.

    Raises:
        TfpackError: an empty prompt or response, a pair that cannot fit, a
            ``reference`` of the wrong size.
    """
    rows = _rows(pairs)
    prompts, chosen, rejected, keep = _token_ids(rows, tokenizer, vocab_path, lower_case)
    items = []
    for index, (p, c, r) in enumerate(zip(prompts, chosen, rejected)):
        for what, ids in (("prompt", p), ("chosen", c), ("rejected", r)):
            if not ids:
                raise TfpackError(f"Every {what} must have at least one token. "
                                  f"Received: pair {index} with an empty {what}")
        p = _fit_prompt(p, len(c), len(r), keep[index], max_length, share_prompt, truncation,
                        index)
        items.append(preference_pair(p, c, r, share_prompt=share_prompt))
    columns = {name: [item[name] for item in items] for name in items[0]}
    scalars = _reference_columns(reference, len(items))
    return _dataset(columns, scalars)


def _rows(pairs) -> list[dict]:
    tf = _tensorflow.require("tfpack.builders.preference_examples")
    if isinstance(pairs, tf.data.Dataset):
        pairs = [{k: (v.decode() if isinstance(v, bytes) else v.tolist())
                  for k, v in row.items()} for row in pairs.as_numpy_iterator()]
    if isinstance(pairs, (str, bytes, Mapping)) or not hasattr(pairs, "__iter__"):
        raise TfpackError("`pairs` must be a list of {'prompt', 'chosen', 'rejected'} or a "
                          f"tf.data.Dataset of them. Received: {type(pairs).__name__}")
    rows = list(pairs)
    bad = [i for i, row in enumerate(rows)
           if not isinstance(row, Mapping) or any(k not in row for k in _FIELDS)]
    if not rows or bad:
        raise TfpackError(
            "`pairs` must be a non-empty list of mappings with 'prompt', 'chosen' and "
            "'rejected'. Received: " + (f"item {bad[0]}: {rows[bad[0]]!r}"[:200] if bad
                                        else "no pairs"))
    return rows


def _token_ids(rows, tokenizer, vocab_path, lower_case):
    """Prompts (with start ids), responses (with end ids), and each prompt's start ids' count."""
    columns = {k: [row[k] for row in rows] for k in _FIELDS}
    if tokenizer is None:
        prompts = _pair_ids(columns["prompt"], "prompt", vocab_path, lower_case)
        chosen = _pair_ids(columns["chosen"], "response", vocab_path, lower_case, "chosen")
        rejected = _pair_ids(columns["rejected"], "response", vocab_path, lower_case,
                             "rejected")
        # WordPiece text prompts start with [CLS]; id lists have no start ids.
        return prompts, chosen, rejected, [int(isinstance(p, str)) for p in columns["prompt"]]
    reject_vocab_path(vocab_path)
    tokenizer = text_tokenizer(tokenizer)
    start, end = list(tokenizer.start_ids), list(tokenizer.end_ids)
    prompts = [start + ids for ids in _tokenized_texts(columns["prompt"], tokenizer)]
    chosen = [ids + end for ids in _tokenized_texts(columns["chosen"], tokenizer)]
    rejected = [ids + end for ids in _tokenized_texts(columns["rejected"], tokenizer)]
    return prompts, chosen, rejected, [len(start)] * len(rows)


def _fit_prompt(prompt, chosen, rejected, keep, max_length, share_prompt, truncation, index):
    """The prompt, its start cut (after ``keep`` start ids) until the pair fits."""
    length = pair_length(len(prompt), chosen, rejected, share_prompt)
    if length <= max_length:
        return prompt
    room = max_length - pair_length(0, chosen, rejected, share_prompt)
    room = room if share_prompt else room // 2  # tokens the prompt may keep
    if truncation == "error" or room < max(1, min(keep, len(prompt)) + 1):
        raise TfpackError(
            f"Every pair must fit in max_length={max_length}"
            + (" with its responses whole" if truncation != "error" else "")
            + f". Received: pair {index} of {length} tokens (prompt {len(prompt)}, "
            f"chosen {chosen}, rejected {rejected}, share_prompt={share_prompt})")
    head = prompt[:min(keep, len(prompt) - 1)]
    return head + prompt[len(prompt) - (room - len(head)):]


def _reference_columns(reference, count) -> dict:
    if reference is None:
        return {}
    names = {"chosen_log_likelihood": "reference_chosen_log_likelihood",
             "rejected_log_likelihood": "reference_rejected_log_likelihood"}
    if not isinstance(reference, Mapping) or any(k not in reference for k in names):
        raise TfpackError("`reference` must map 'chosen_log_likelihood' and "
                          "'rejected_log_likelihood' to one value per pair (tfpack.predict of a "
                          f"PreferenceModel). Received: reference={type(reference).__name__}"
                          + (f" with keys {sorted(reference)}" if isinstance(reference, Mapping)
                             else ""))
    out = {}
    for key, name in names.items():
        values = np.asarray(reference[key], np.float32)
        if values.shape != (count,) or not np.isfinite(values).all():
            raise TfpackError(f"`reference[{key!r}]` must hold one finite value per pair "
                              f"({count}). Received: shape {values.shape}")
        out[name] = values
    return out


def _dataset(columns: dict, scalars: dict) -> tf.data.Dataset:
    tf = _tensorflow.require("tfpack.builders.preference_examples")
    ragged = {name: tf.RaggedTensor.from_row_lengths(
        np.concatenate(rows).astype(np.int32), [len(r) for r in rows])
        for name, rows in columns.items()}
    dense = {name: tf.constant(values) for name, values in scalars.items()}
    count = len(next(iter(columns.values())))

    def example(i):
        # Indexing a RaggedTensor row gives a dense tensor, which the packers expect.
        return {**{n: rows[i] for n, rows in ragged.items()},
                **{n: values[i] for n, values in dense.items()}}

    return tf.data.Dataset.range(count).map(example)
