"""`benchmarks/pack_suite.py` on its smallest cases, as a regression test (issue 23).

No timing is asserted (performance lives in `benchmarks/`): the script runs
end to end on two generated length families in both layouts, and its table
reports every case with finite ratios; the local engine's output on each case
holds every input example exactly once.
"""

import pathlib
import sys

import numpy as np
import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import pack_suite  # noqa: E402
from unused_imports import SITE  # noqa: E402


MEMORY = "## Memory against input size\n\nearlier numbers\n"


def test_pack_suite_runs_and_packs_every_example_once(tmp_path):
    output = tmp_path / "pack_suite.md"
    output.write_text("# old ratios\n\n" + MEMORY)  # a --memory section stays
    assert pack_suite.main(["--records", "600", "--rounds", "1", "--families", "lognormal,spikes",
                            "--workdir", str(tmp_path), "--output", str(output)]) == 0
    rows = [line for line in output.read_text().splitlines()
            if line.startswith("| lognormal") or line.startswith("| spikes")]
    assert len(rows) == 4
    assert output.read_text().startswith("# `tfpack pack` on a generated suite")
    assert output.read_text().endswith("\n" + MEMORY) and "old ratios" not in output.read_text()
    for row in rows:
        ratio = float(row.split("|")[7].split("x")[0])
        assert np.isfinite(ratio) and ratio > 0
    import tfpack

    from tfpack.engines.local import pack_records

    pattern, _ = pack_suite.case_input("spikes", "unpadded", 600, 0, str(tmp_path))
    pack_records(pattern, str(tmp_path / "packed"), max_length=pack_suite.L,
                 max_sequences_per_pack=pack_suite.K, max_predictions_per_pack=pack_suite.M_PACK)
    ids = [i for pack in tfpack.formats.read_packed(str(tmp_path / "packed")).as_numpy_iterator()
           for i in pack["example_ids"].tolist() if i >= 0]
    assert sorted(ids) == list(range(600))


@pytest.mark.slow  # two fresh processes, each importing TensorFlow
def test_memory_rows_are_measured_in_their_own_section(tmp_path, monkeypatch):
    # The memory children get `PYTHONPATH` from this process's `sys.path`
    # (`pack_suite.measure_memory`), not from the environment conftest.py sets:
    # the suite's site first there too, or each child imports JAX, scikit-learn
    # and matplotlib with TensorFlow (tests/unused_imports.py; 5.1 -> 2.5 CPU s
    # a child, imported before the baseline the rows subtract).
    monkeypatch.syspath_prepend(str(SITE))
    output = tmp_path / "pack_suite.md"
    output.write_text("# ratios\n\nkept\n\n" + MEMORY + "\n## Later\n\nkept too\n")
    assert pack_suite.main(["--memory", "300,600", "--memory-cases", "lognormal:unpadded",
                            "--workdir", str(tmp_path), "--output", str(output)]) == 0
    text = output.read_text()
    assert text.startswith("# ratios\n\nkept\n\n## Later\n\nkept too\n\n## Memory against")
    assert "earlier numbers" not in text and text.count("## Memory against") == 1
    rows = [line.split("|")[1:-1] for line in text.splitlines()
            if line.startswith("| lognormal | unpadded |")]
    assert [r[2].strip() for r in rows] == ["300", "600"]
    for row in rows:
        assert int(row[4].replace(",", "")) > 0  # packs
        values = [float(v) for v in row[5:11]]  # seconds, anon by phase, file, peak RSS
        assert all(np.isfinite(values)) and values[0] > 0 and values[5] >= 0
    assert rows[0][11].strip() == "-" and rows[1][11].strip().endswith(" B")
