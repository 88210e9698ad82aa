"""Pass 2 of ``tfpack pack`` keeps no page of the spill mapped (issue 23 item 3).

The local engine's pass 2 reads the examples its scan spilled to disk in the
plan's random order (`tfpack.engines.spill`). Read through memory maps, every
page a pack touched stayed resident in the process: file-backed RSS grew to the
spill's size (3.5 GB at 800,000 records of ~470 tokens), which a container's
memory limit counts. Read with positioned reads into each chunk's arrays, the
process maps none of it: here a spill of ~95 MB, 24 times pass 2's read window
of 512k tokens (4 MB of token values), must not raise the packing process's
``RssFile`` by more than a tenth of it (libraries loaded during the job: a few
MB). A pass 2 back on memory maps fails this (its growth is the spill's size).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tfpack.formats.protos import encode_examples, frame
from unused_imports import with_site

L, M_SEQ, RECORDS = 512, 20, 24_000


def _write_padded(path, count, seed=0, batch=4000):
    """Google records padded to ``L``, lengths near ``L`` (the scan's fixed-width path)."""
    rng = np.random.default_rng(seed)
    lengths = L - rng.integers(0, 32, count)
    with open(path, "wb") as f:
        for first in range(0, count, batch):
            n = lengths[first:first + batch]
            real = np.arange(L) < n[:, None]
            ids = np.where(real, rng.integers(1000, 30000, (len(n), L)), 0)
            positions = np.tile(np.arange(1, M_SEQ + 1), (len(n), 1))
            f.write(frame(encode_examples({
                "input_ids": ids, "input_mask": real.astype(np.int64),
                "segment_ids": (real & (np.arange(L) >= n[:, None] // 2)).astype(np.int64),
                "masked_lm_positions": positions,
                "masked_lm_ids": np.take_along_axis(ids, positions, 1),
                "masked_lm_weights": np.ones((len(n), M_SEQ), np.float32),
                "next_sentence_labels": rng.integers(0, 2, (len(n), 1))})))
    return lengths


@pytest.mark.slow  # a fresh process importing TensorFlow, ~70 MB of input: about 20 s
def test_pass_2_keeps_no_page_of_the_spill_mapped(tmp_path):
    lengths = _write_padded(tmp_path / "in.tfrecord", RECORDS)
    # The spill: input_ids and segment_ids (int32 a token), three prediction
    # features (4 bytes a prediction), one label per record.
    spill_kb = (8 * int(lengths.sum()) + 12 * M_SEQ * RECORDS + 4 * RECORDS) / 1024
    run = subprocess.run(
        [sys.executable, os.path.join(os.path.dirname(__file__), "pack_rss_run.py"),
         str(tmp_path / "in.tfrecord"), str(tmp_path / "packed"), str(L)],
        capture_output=True, text=True, timeout=300,
        # The suite's site first (tests/unused_imports.py): the child imports TensorFlow
        # without JAX, scikit-learn and matplotlib (before its baseline; ~2.5 CPU s).
        env=dict(os.environ, PYTHONPATH=with_site(os.pathsep.join(p for p in sys.path if p))))
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["tokens"] == int(lengths.sum()) and result["packs"] == RECORDS
    assert spill_kb > 90_000
    assert result["peak_growth_kb"] < spill_kb / 10, (
        f"file-backed RSS grew by {result['peak_growth_kb']} kB while packing a spill of "
        f"{spill_kb:.0f} kB: pass 2 keeps the spill's pages mapped ({result})")
