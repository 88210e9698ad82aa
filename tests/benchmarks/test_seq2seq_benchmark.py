"""`benchmarks/seq2seq.py`'s cases, without timing: every case gives pairs that
fit their rows, packed and padded layouts hold the same pairs, and the packing
factor it divides by is pairs per packed row."""

import pathlib
import sys

import numpy as np
import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import seq2seq as bench  # noqa: E402

from tfpack.builders import pack_pairs  # noqa: E402

LE, LD = 48, 16


@pytest.mark.parametrize("case", sorted(bench.GENERATED))
def test_generated_cases_fit_their_rows_and_both_layouts_hold_every_pair(case):
    lengths = bench.lengths(case, 40, seed=0)
    assert lengths.shape == (40, 2) and lengths.min() >= 1
    pairs = bench.pairs_of(lengths, LE, LD, seed=0)
    assert all(1 <= len(e) <= LE and 1 <= len(d) <= LD and d[0] == 0 for e, d in pairs)
    packed = pack_pairs(pairs, max_encoder_length=LE, max_decoder_length=LD,
                        max_pairs_per_pack=16)
    padded = pack_pairs(pairs, max_encoder_length=LE, max_decoder_length=LD,
                        max_pairs_per_pack=1)
    assert len(padded["example_ids"]) == len(pairs)
    for side in ("encoder", "decoder"):
        assert (np.sum(packed[f"{side}_sequence_ids"] > 0)
                == np.sum(padded[f"{side}_sequence_ids"] > 0))
    batches = bench._batches(packed, 2)
    assert sum(real for _, real in batches) <= np.sum(packed["encoder_sequence_ids"] > 0) + \
        np.sum(packed["decoder_sequence_ids"] > 0)
