"""`tfpack pack --engine beam` from the command line."""

import filecmp
import json
import os
import sys

import tensorflow as tf

from tfpack.data import read_packed

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cli"))
from cli_helpers import tfpack  # noqa: E402
from google_records import google_examples, write_google  # noqa: E402

IN_PROCESS = "--direct_running_mode=in_memory"


def _inputs(tmp_path):
    examples = google_examples(60, seed=4)
    for i in range(2):
        write_google(tmp_path / f"wiki-{i}.tfrecord", examples[i * 30:(i + 1) * 30])
    return str(tmp_path / "wiki-*.tfrecord")


def test_engine_beam_writes_the_local_output(tmp_path, capsys):
    pattern = _inputs(tmp_path)
    common = ["pack", "--input", pattern, "--max-length", "64", "--max-sequences-per-pack", "3",
              "--algorithm", "lpfhp", "--packs-per-shard", "8", "--json"]
    assert tfpack(*common, "--output", tmp_path / "local") == 0
    local = json.loads(capsys.readouterr().out)
    assert tfpack(*common, "--output", tmp_path / "beam", "--engine", "beam",
                  f"--beam-options={IN_PROCESS}") == 0
    beam = json.loads(capsys.readouterr().out)
    assert beam["output_files"] == local["output_files"] and len(local["output_files"]) >= 3
    for name in local["output_files"]:
        assert filecmp.cmp(tmp_path / "local" / name, tmp_path / "beam" / name, shallow=False)
    plans = [json.loads((tmp_path / e / "plan.json").read_text()) for e in ("local", "beam")]
    assert [(p["strategies"], p["counts"]) for p in plans][0] == \
        [(p["strategies"], p["counts"]) for p in plans][1]  # solve times differ
    manifest = json.loads((tmp_path / "beam" / "manifest.json").read_text())
    assert manifest["created_by"] == "tfpack pack --engine beam"
    assert manifest["packs"] == local["packs"]
    assert sum(1 for _ in read_packed(str(tmp_path / "beam"))) == local["packs"]


def test_engine_beam_refuses_a_bad_record_with_one_line(tmp_path, capsys):
    pattern = _inputs(tmp_path)
    write_google(tmp_path / "wiki-9.tfrecord", google_examples(3, seed=5))
    with open(tmp_path / "wiki-9.tfrecord", "ab") as f:  # record 3: not a tf.train.Example
        with tf.io.TFRecordWriter(str(tmp_path / "bad.bin")) as writer:
            writer.write(b"\x0a\x03bad")
        f.write((tmp_path / "bad.bin").read_bytes())
    status = tfpack("pack", "--input", pattern, "--output", tmp_path / "out", "--max-length",
                    "64", "--max-sequences-per-pack", "3", "--engine", "beam", f"--beam-options={IN_PROCESS}")
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2
    assert len(err) == 1 and "wiki-9.tfrecord', record 3" in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "out").exists()


def test_beam_options_need_the_beam_engine(tmp_path, capsys):
    status = tfpack("pack", "--input", _inputs(tmp_path), "--output", tmp_path / "out",
                    "--max-length", "64", "--max-sequences-per-pack", "3", f"--beam-options={IN_PROCESS}")
    assert status == 2
    assert "`--beam-options` needs `--engine beam`. Received: --engine local" in \
        capsys.readouterr().err
