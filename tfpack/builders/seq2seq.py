"""Encoder-decoder pairs to pair packs: `seq2seq_examples` and `pack_pairs`.

A pair ``{"inputs", "targets"}`` becomes an encoder sequence and a decoder
sequence framed as the model's keras-hub ``Seq2SeqLMPreprocessor`` frames
them (``tokenizer=``), or taken as given (ids). `pack_pairs` then puts
whole pairs into pair packs (`tfpack.tasks.seq2seq`): first fit in input
order, a pack taking a pair only when its encoder row still has room for the
input AND its decoder row for the target (and it holds fewer than ``K``
pairs). A pair never spans two packs.

Framing with a keras-hub preprocessor (its ``encoder_packer`` and
``decoder_packer`` start and end values)::

    T5        inputs </s>           <pad> targets </s>
    BART      <s> inputs </s>       </s> <s> targets </s>
    T5Gemma   inputs <eos>          <bos> targets <eos>

With another tokenizer (`tfpack.builders.text_tokenizer`): ``inputs + end``
and ``start + targets + end``.

A pair longer than ``max_encoder_length`` or ``max_decoder_length`` is
refused (`TfpackError` naming it), or with ``truncate=True`` cut as
keras-hub's ``StartEndPacker`` cuts it: the text loses its end, the special
tokens stay.

>>> packs = pack_pairs([([5, 6, 7], [1, 8, 9]), ([4], [1, 3])],
...                    max_encoder_length=5, max_decoder_length=6)
>>> packs["encoder_input_ids"].tolist(), packs["decoder_sequence_ids"].tolist()
([[5, 6, 7, 4, 0]], [[1, 1, 1, 2, 2, 0]])
>>> packs["decoder_labels"].tolist(), packs["example_ids"].tolist()
([[8, 9, -100, 3, -100, -100]], [[0, 1]])
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tfpack import tasks
from tfpack.builders.tokenizers import text_tokenizer
from tfpack.errors import TfpackError
from tfpack.params import Anything, Boolean, Integer, validate_params
from tfpack.params import token_ids
from tfpack.tasks.seq2seq import DECODER_FEATURES, ENCODER_FEATURES

__all__ = ["pack_pairs", "seq2seq_examples"]


def _pairs(pairs) -> list:
    """`pairs` as a list of 2-tuples, or one `TfpackError` naming the first other."""
    if isinstance(pairs, (str, bytes, dict)) or not hasattr(pairs, "__iter__"):
        raise TfpackError("`pairs` must be (encoder_ids, decoder_ids) pairs. "
                          f"Received: pairs={pairs!r}"[:300])
    pairs = list(pairs)
    for i, pair in enumerate(pairs):
        if isinstance(pair, (str, bytes, dict)) or not hasattr(pair, "__len__") or len(pair) != 2:
            raise TfpackError("`pairs` must be (encoder_ids, decoder_ids) pairs. "
                              f"Received: pair {i}={pair!r}"[:300])
    return pairs


def _first_fit(lengths, max_encoder_length, max_decoder_length, max_pairs) -> list[list[int]]:
    """Pairs (indices) of each pack: first fit in input order on both rows."""
    packs, room = [], []
    for i, (n, m) in enumerate(lengths):
        for p, (free_n, free_m) in enumerate(room):
            if n <= free_n and m <= free_m and len(packs[p]) < max_pairs:
                packs[p].append(i)
                room[p] = (free_n - n, free_m - m)
                break
        else:
            packs.append([i])
            room.append((max_encoder_length - n, max_decoder_length - m))
    return packs


_LENGTHS = {"max_encoder_length": Integer(1), "max_decoder_length": Integer(1),
            "max_pairs_per_pack": [None, Integer(1)]}


@validate_params({"pairs": Anything("(encoder_ids, decoder_ids) pairs, checked below"),
                  **_LENGTHS})
def pack_pairs(pairs: Sequence, *, max_encoder_length: int, max_decoder_length: int,
               max_pairs_per_pack: int | None = None) -> dict[str, np.ndarray]:
    """Whole ``(encoder_ids, decoder_ids)`` pairs into pair packs, first fit.

    Args:
        pairs: ``(encoder_ids, decoder_ids)`` lists of ints, each non-empty;
            a decoder sequence is what the decoder reads (``[start] +
            target``); its labels are derived (the next token of the same
            sequence).
        max_encoder_length, max_decoder_length: ``Le`` and ``Ld``.
        max_pairs_per_pack: ``K``; None: the most pairs a pack got.

    Returns:
        The pair-pack features of `tfpack.tasks.seq2seq` as numpy arrays,
        ``[P, Le]``, ``[P, Ld]`` and ``[P, K]`` (``sequence_mask``,
        ``example_ids``: each pair's index in ``pairs``).
    """
    pairs = [(token_ids(e, "encoder_ids", where=f"in pair {i}"),
              token_ids(d, "decoder_ids", where=f"in pair {i}"))
             for i, (e, d) in enumerate(_pairs(pairs))]
    for i, (e, d) in enumerate(pairs):
        if not (0 < e.size <= max_encoder_length and 0 < d.size <= max_decoder_length):
            raise TfpackError(
                f"Every pair must have 1..max_encoder_length={max_encoder_length} input and "
                f"1..max_decoder_length={max_decoder_length} decoder tokens. Received: pair "
                f"{i} with {e.size} and {d.size}")
    if not pairs:
        raise TfpackError("`pairs` must hold at least one pair. Received: pairs=[]")
    groups = _first_fit([(e.size, d.size) for e, d in pairs], max_encoder_length,
                        max_decoder_length, max_pairs_per_pack or len(pairs))
    K = max_pairs_per_pack or max(len(g) for g in groups)
    spec = tasks.get("seq2seq_lm")
    sizes = {"Le": max_encoder_length, "Ld": max_decoder_length, "K": K}
    names = ENCODER_FEATURES + DECODER_FEATURES + (
        "decoder_labels", "decoder_loss_weights", "sequence_mask", "example_ids")
    out = {n: np.full((len(groups), sizes[spec.feature(n).dimension]),
                      spec.feature(n).padding, spec.feature(n).dtype) for n in names}
    for p, group in enumerate(groups):
        for side, row in ((ENCODER_FEATURES, 0), (DECODER_FEATURES, 1)):
            start = 0
            for slot, i in enumerate(group):
                ids = pairs[i][row]
                span = slice(start, start + ids.size)
                out[side[0]][p, span] = ids
                out[side[1]][p, span] = slot + 1
                out[side[2]][p, span] = np.arange(ids.size)
                if row == 1:
                    out["decoder_labels"][p, start:start + ids.size - 1] = ids[1:]
                    out["decoder_loss_weights"][p, start:start + ids.size - 1] = 1.0
                start += ids.size
        out["sequence_mask"][p, :len(group)] = 1.0
        out["example_ids"][p, :len(group)] = group
    return out


def _framing(tokenizer):
    """``(tokenize, (encoder start, end), (decoder start, end))`` of ``tokenizer``."""
    packers = [getattr(tokenizer, n, None) for n in ("encoder_packer", "decoder_packer")]
    if hasattr(tokenizer, "encoder_sequence_length") and None in packers:
        tokenizer.build(None)  # keras-hub preprocessors make their packers in build().
        packers = [getattr(tokenizer, n, None) for n in ("encoder_packer", "decoder_packer")]
    if None not in packers:
        tokenize = text_tokenizer(tokenizer.tokenizer)
        return tokenize, *[(_ids(p.start_value), _ids(p.end_value)) for p in packers]
    tokenize = text_tokenizer(tokenizer)
    return tokenize, ((), tokenize.end_ids), (tokenize.start_ids, tokenize.end_ids)


def _ids(value) -> tuple[int, ...]:
    if value is None:
        return ()
    return tuple(int(v) for v in np.ravel(value))


def _framed(ids, start, end, length, truncate, what):
    room = length - len(start) - len(end)
    if len(ids) > room:
        if not truncate or room < 1:
            raise TfpackError(
                f"{what} must fit its row with its special tokens, or pass truncate=True. "
                f"Received: {len(ids)} tokens + {len(start) + len(end)} special, "
                f"max length {length}")
        ids = ids[:room]
    return list(start) + list(ids) + list(end)


@validate_params({"pairs": Anything("{'inputs', 'targets'} dicts, checked below"),
                  "tokenizer": Anything("a keras-hub Seq2SeqLMPreprocessor or a text "
                                        "tokenizer, checked when used"),
                  "truncate": Boolean(), **_LENGTHS})
def seq2seq_examples(pairs: Sequence, *, max_encoder_length: int, max_decoder_length: int,
                     tokenizer=None, max_pairs_per_pack: int | None = None,
                     truncate: bool = False) -> dict[str, np.ndarray]:
    """``{"inputs", "targets"}`` pairs as pair packs for an encoder-decoder.

    >>> words = {"a": 5, "b": 6, "c": 7}
    >>> tok = text_tokenizer(lambda s: [words[w] for w in s.split()],
    ...                      start_ids=1, end_ids=2)
    >>> packs = seq2seq_examples([{"inputs": "a b", "targets": "c"}],
    ...                          max_encoder_length=4, max_decoder_length=4,
    ...                          tokenizer=tok)
    >>> packs["encoder_input_ids"].tolist(), packs["decoder_input_ids"].tolist()
    ([[5, 6, 2, 0]], [[1, 7, 2, 0]])

    Args:
        pairs: dicts with ``"inputs"`` and ``"targets"``, each a string (with
            ``tokenizer``) or a list of ids taken as they are (the decoder's
            ids starting with its start token).
        max_encoder_length, max_decoder_length: ``Le`` and ``Ld``.
        tokenizer: the model's keras-hub ``Seq2SeqLMPreprocessor`` (its
            tokenizer and framing, e.g. ``T5Seq2SeqLMPreprocessor``), or
            anything `tfpack.builders.text_tokenizer` takes (``inputs +
            end``, ``start + targets + end``).
        max_pairs_per_pack: ``K``; None: the most pairs a pack got.
        truncate: cut a pair that does not fit (its text's end) instead of
            refusing it.

    Returns:
        The pair packs (`pack_pairs`); ``example_ids`` index ``pairs``.

    Raises:
        TfpackError: a pair without ``inputs``/``targets``, text without
            ``tokenizer``, or a pair too long without ``truncate``.
    """
    pairs = list(pairs)
    bad = [i for i, p in enumerate(pairs)
           if not isinstance(p, dict) or not {"inputs", "targets"} <= set(p)]
    if bad:
        raise TfpackError("`pairs` must be dicts with 'inputs' and 'targets'. "
                          f"Received: pairs at {bad[:5]}")
    texts = [isinstance(p[k], str) for p in pairs for k in ("inputs", "targets")]
    if any(texts) and tokenizer is None:
        raise TfpackError("Text pairs need the model's tokenizer. Received: tokenizer=None")
    if tokenizer is None:
        return pack_pairs([(p["inputs"], p["targets"]) for p in pairs],
                          max_encoder_length=max_encoder_length,
                          max_decoder_length=max_decoder_length,
                          max_pairs_per_pack=max_pairs_per_pack)
    tokenize, (e_start, e_end), (d_start, d_end) = _framing(tokenizer)
    inputs = tokenize([p["inputs"] for p in pairs])
    targets = tokenize([p["targets"] for p in pairs])
    framed = [(_framed(x, e_start, e_end, max_encoder_length, truncate, f"The inputs of pair {i}"),
               _framed(y, d_start, d_end, max_decoder_length, truncate, f"The targets of pair {i}"))
              for i, (x, y) in enumerate(zip(inputs, targets))]
    return pack_pairs(framed, max_encoder_length=max_encoder_length,
                      max_decoder_length=max_decoder_length,
                      max_pairs_per_pack=max_pairs_per_pack)
