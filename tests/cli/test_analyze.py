import json
import re

import pytest

from tfpack.cli import analyze

from cli_helpers import tfpack


def test_analyze_prints_table_1(histogram_file, capsys):
    assert tfpack("analyze", histogram_file, "--max-length", 8, "--max-sequences-per-pack", "2,none",
                  "--algorithms", "none,spfhp,lpfhp") == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "9 sequences, 32 tokens" in lines[0] and "theoretical speed-up 2.2500" in lines[0]
    header = lines[1]
    for title in ("strategies", "packs", "tokens", "padding tokens", "efficiency %", "packing factor",
                  "speed-up bound", "time s"):
        assert title in header
    rows = [line for line in lines[3:] if line.startswith("|")]
    assert len(rows) == 6  # 3 algorithms x 2 depths
    lpfhp_none = next(r for r in rows if "lpfhp" in r and "none" in r)
    assert re.search(r"\|\s+4 \|.*\|\s+100\.000 \|\s+2\.2500 \|", lpfhp_none)


def test_analyze_repeated_max_sequences_per_pack_and_json(histogram_file, capsys):
    assert tfpack("analyze", histogram_file, "--max-length", 8, "--max-sequences-per-pack", 1, "--max-sequences-per-pack", 3,
                  "--algorithms", "ffd", "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["sequences"] == 9 and data["tokens"] == 32 and data["max_length"] == 8
    assert [(r["algorithm"], r["max_sequences_per_pack"]) for r in data["results"]] == [("ffd", 1), ("ffd", 3)]
    assert data["results"][0]["metrics"]["packs"] == 9
    assert data["results"][1]["metrics"]["efficiency"] == 1.0


def test_analyze_default_algorithms_run(histogram_file, capsys):
    assert tfpack("analyze", histogram_file, "--max-length", 8, "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert {r["algorithm"] for r in data["results"]} == set(analyze.DEFAULT_ALGORITHMS)
    assert {r["max_sequences_per_pack"] for r in data["results"]} == {3, None}


def test_analyze_plot_writes_png(histogram_file, tmp_path, capsys):
    png = tmp_path / "h.png"
    assert tfpack("analyze", histogram_file, "--max-length", 8, "--algorithms", "spfhp", "--plot", png) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert str(png) in capsys.readouterr().out


@pytest.mark.parametrize("target", ["a-text-file", "no-such-folder/h.png"])
def test_analyze_refuses_a_plot_path_before_planning(histogram_file, tmp_path, capsys,
                                                      monkeypatch, target):
    from tfpack import packing

    (tmp_path / "a-text-file").write_text("keep me\n")
    planned = []
    monkeypatch.setattr(packing, "plan", lambda *a, **k: planned.append(a))
    assert tfpack("analyze", histogram_file, "--max-length", 8, "--algorithms", "spfhp",
                  "--plot", tmp_path / target) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--plot={tmp_path / target}" in err, err
    assert planned == []  # refused up front, not after the planning
    assert (tmp_path / "a-text-file").read_text() == "keep me\n"


def test_plot_title_has_the_theoretical_speedup(tmp_path, monkeypatch):
    import matplotlib.figure
    import numpy as np

    titles = []
    original = matplotlib.figure.Figure.savefig
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig",
                        lambda self, *a, **k: (titles.append(self.axes[0].get_title()), original(self, *a, **k)))
    from tfpack import plots

    plots.length_histogram(np.array([0, 4, 0, 3, 0, 2, 0, 0]), str(tmp_path / "p.png"), "tiny")
    assert titles == ["tiny: theoretical speed-up 2.250x"]


@pytest.mark.parametrize(
    "argv, pattern",
    [
        (["--max-sequences-per-pack", "0"], r"Received: --max-sequences-per-pack=0"),
        (["--max-sequences-per-pack", "3,abc"], r"Received: --max-sequences-per-pack=abc"),
        (["--algorithms", "spfhp,magic"], r"--algorithms must list some of .*Received: --algorithms=spfhp,magic"),
        (["--max-length", "5"], r"max_length=5, but 2 are longer"),
    ],
)
def test_analyze_bad_input_exits_2(histogram_file, capsys, argv, pattern):
    flags = {"--max-length": "8", "--algorithms": "spfhp"}
    flags.update(dict(zip(argv[::2], argv[1::2])))
    assert tfpack("analyze", histogram_file, *[x for item in flags.items() for x in item]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and re.search(pattern, captured.err), captured.err


def test_analyze_missing_file_exits_2(tmp_path, capsys):
    assert tfpack("analyze", tmp_path / "nope.txt", "--max-length", 8) == 2
    assert "HISTOGRAM must be a histogram file or one of the bundled" in capsys.readouterr().err


def test_default_algorithms_skip_what_cannot_handle_the_input(tmp_path, capsys):
    source = tmp_path / "long.txt"
    source.write_text("\n".join(["0"] * 2047 + ["3"]))  # three sequences of 2048 tokens
    assert tfpack("analyze", source, "--max-length", 2048, "--max-sequences-per-pack", 3, "--json") == 0
    captured = capsys.readouterr()
    names = {r["algorithm"] for r in json.loads(captured.out)["results"]}
    assert "nnlshp" not in names and "spfhp" in names
    assert "skipped nnlshp: " in captured.err
    # Asked for explicitly, it is an error.
    assert tfpack("analyze", source, "--max-length", 2048, "--algorithms", "nnlshp") == 2
    assert "max_length=2048" in capsys.readouterr().err


def test_depth_capped_algorithms_are_not_run_twice(histogram_file, capsys):
    assert tfpack("analyze", histogram_file, "--max-length", 8, "--max-sequences-per-pack", "3,4,none",
                  "--algorithms", "nnlshp,spfhp", "--json") == 0
    captured = capsys.readouterr()
    rows = [(r["algorithm"], r["max_sequences_per_pack"]) for r in json.loads(captured.out)["results"]]
    assert rows == [("nnlshp", 3), ("spfhp", 3), ("spfhp", 4), ("spfhp", None)]
    assert "nnlshp puts at most 3 sequences in a pack" in captured.err


def test_analyze_empty_dataset_exits_2(tmp_path, capsys):
    source = tmp_path / "empty.txt"
    source.write_text("0\n0\n0\n")
    assert tfpack("analyze", source, "--max-length", 3) == 2
    assert "the dataset is empty" in capsys.readouterr().err
