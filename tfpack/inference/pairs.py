"""`tfpack.predict` on pairs: an encoder-decoder's outputs per pair, in input order.

``tfpack.predict(model, pairs, max_length=(Le, Ld), max_sequences_per_pack=K)``
packs whole pairs (`tfpack.builders.pack_pairs`: first fit on both rows),
runs the model on batches of one shape (the last filled with empty packs),
and cuts every output back into its pairs by ``example_ids``: per-pair
outputs (``Seq2SeqLM``'s ``log_likelihood``) as one array, per-token ones
(``logits``, a backbone's ``encoder_sequence_output`` and
``decoder_sequence_output``) as one array per pair.

>>> import keras_hub, tfpack
>>> backbone = keras_hub.models.BartBackbone(
...     vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
...     intermediate_dim=16, max_sequence_length=16)
>>> model = tfpack.models.Seq2SeqLM(tfpack.models.from_keras_hub(backbone))
>>> scores = tfpack.predict(model, [([0, 5, 2], [2, 0, 7, 2]), ([0, 6, 2], [2, 0, 2])],
...                         max_length=(8, 8), max_sequences_per_pack=2)
>>> scores["log_likelihood"].shape, [p.shape for p in scores["logits"]]
((2,), [(4, 30), (3, 30)])
"""

from __future__ import annotations

import numpy as np

from tfpack import features as contract
from tfpack.builders.seq2seq import pack_pairs
from tfpack.errors import TfpackError
from tfpack.inference.unpack import Collector

__all__ = ["predict_pairs"]


def _pairs(examples) -> list:
    pairs = []
    for i, example in enumerate(examples):
        if isinstance(example, dict) and {"inputs", "targets"} <= set(example):
            example = (example["inputs"], example["targets"])
        if not isinstance(example, (tuple, list)) or len(example) != 2 or any(
                isinstance(side, str) for side in example):
            raise TfpackError(
                "Pairs must be (encoder_ids, decoder_ids) or {'inputs', 'targets'} of ids "
                f"(text: `tfpack.builders.seq2seq_examples`). Received: pair {i}={example!r}")
        pairs.append(example)
    return pairs


def predict_pairs(model, examples, *, max_length: tuple[int, int],
                  max_sequences_per_pack: int, batch_size: int, kinds: dict,
                  call) -> object:
    """`tfpack.predict` for pair packs (`max_length=(Le, Ld)`); see the module docstring.

    ``kinds`` are the model's output kinds and ``call`` its compiled call.
    """
    if len(max_length) != 2:
        raise TfpackError("`max_length` of pairs must be (max_encoder_length, "
                          f"max_decoder_length). Received: max_length={max_length!r}")
    pairs = _pairs(examples)
    packs = pack_pairs(pairs, max_encoder_length=max_length[0],
                       max_decoder_length=max_length[1],
                       max_pairs_per_pack=max_sequences_per_pack)
    inputs = tuple(getattr(model, "input_features", ()))
    missing = [n for n in inputs if n not in packs]
    if missing:
        raise TfpackError(f"Pair packs must hold every feature the model reads. Received: "
                          f"missing {missing}")
    rows = min(batch_size, len(packs["example_ids"]))
    collector = Collector(kinds)
    for start in range(0, len(packs["example_ids"]), rows):
        batch = {n: v[start:start + rows] for n, v in packs.items()}
        batch = {n: np.concatenate([v, np.full((rows - len(v),) + v.shape[1:],
                                               contract.padding_value(n, "seq2seq_lm"),
                                               v.dtype)])
                 for n, v in batch.items()}
        outputs = call({n: batch[n] for n in inputs})
        collector.add(batch, {n: np.asarray(outputs[n]) for n in kinds})
    result = collector.result(expected=len(pairs))
    return next(iter(result.values())) if len(result) == 1 else result
