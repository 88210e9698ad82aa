"""Fault injection, today's one-line errors off their path (issue 23).

`builders.load_vocab` (``vocab_path=`` of the builders and `WordPiece.from_file`),
`plots.check_target` and ``tfpack analyze --plot``, handed what a careless or
hostile caller would.

Found here: ``vocab_path`` given as an int (or a bool) was a file *descriptor* to
`open`: ``vocab_path=True`` read standard output and closed it, an open
descriptor was read and closed under its owner, a closed one was a TypeError
traceback from the error message itself; a list or a path holding a NUL byte
was a TypeError/ValueError traceback.
"""

import os

import pytest

from tests.faults.outcomes import HELD, judge_call
from tfpack.builders.bert import load_vocab
from tfpack.builders.wordpiece import WordPiece


@pytest.mark.parametrize("vocab_path", [True, 99, "open-fd", ["vocab.txt"], "a\x00b", 3.5],
                         ids=["true", "closed-fd", "open-fd", "a-list", "nul", "float"])
@pytest.mark.parametrize("reader", [load_vocab, WordPiece.from_file],
                         ids=["load_vocab", "WordPiece.from_file"])
def test_a_vocab_path_that_is_not_a_path_is_one_line_and_touches_no_descriptor(tmp_path, reader,
                                                                             vocab_path):
    mine = tmp_path / "mine.txt"
    mine.write_text("[PAD]\n[UNK]\n")
    fd = os.open(mine, os.O_RDONLY)
    try:
        if vocab_path == "open-fd":
            vocab_path = fd
        spare = os.dup(1)  # vocab_path=True would close standard output: keep it to restore
        try:
            verdict = judge_call(lambda: reader(vocab_path), refuse=True,
                                 match=f"Received: vocab_path={vocab_path!r}")
        finally:
            os.dup2(spare, 1)
            os.close(spare)
        assert verdict.outcome == HELD, verdict
        assert os.read(fd, 5) == b"[PAD]"  # the descriptor still open, still at its start
    finally:
        os.close(fd)


# --- tfpack analyze --plot --------------------------------------------------------------------

def _histogram(tmp_path):
    path = tmp_path / "h.txt"
    path.write_text("3\n0\n2\n0\n1\n0\n0\n4\n")
    return path


def test_a_plot_onto_a_fifo_is_refused_at_once_not_a_hang(tmp_path):
    """``--plot`` naming a FIFO (a named pipe): the check of an earlier PNG opened it to read
    its first bytes and waited for a writer forever. A watchdog writer unblocks a hang
    after 3 s, so a regression fails on time instead of hanging the suite."""
    import threading
    import time

    from tests.faults.inprocess import run_cli_here
    from tests.faults.outcomes import judge_cli

    fifo = tmp_path / "plot.png"
    os.mkfifo(fifo)
    stop = threading.Event()

    def watchdog():
        if stop.wait(3.0):
            return
        while not stop.is_set():
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:  # no reader yet
                time.sleep(0.05)

    thread = threading.Thread(target=watchdog, daemon=True)
    thread.start()
    start = time.monotonic()
    try:
        result = run_cli_here("analyze", _histogram(tmp_path), "--max-length", 8,
                              "--algorithms", "spfhp", "--plot", fifo)
    finally:
        stop.set()
        thread.join()
    elapsed = time.monotonic() - start
    verdict = judge_cli(result, refuse=True, match=f"Received: --plot={fifo}")
    assert verdict.outcome == HELD, verdict
    assert elapsed < 2.5, f"--plot on a FIFO waited {elapsed:.1f} s for a writer"
    assert fifo.is_fifo()


def test_an_empty_plot_path_is_refused_not_skipped(tmp_path, monkeypatch):
    """``--plot ""`` (an unset shell variable): the run ended 0 with no plot and no word."""
    from tests.faults.inprocess import run_cli_here
    from tests.faults.outcomes import judge_cli

    monkeypatch.chdir(tmp_path)
    result = run_cli_here("analyze", _histogram(tmp_path), "--max-length", 8,
                          "--algorithms", "spfhp", "--plot", "")
    verdict = judge_cli(result, refuse=True, match="Received: --plot=",
                        check=lambda r: sorted(os.listdir(tmp_path)) == ["h.txt"])
    assert verdict.outcome == HELD, verdict


def test_a_count_past_int64_in_a_histogram_file_names_its_line(tmp_path):
    """A count of 23 digits in a histogram file was refused as "histogram of dtype object",
    naming neither the line nor the value."""
    from tests.faults.inprocess import run_cli_here
    from tests.faults.outcomes import judge_cli

    path = tmp_path / "h.txt"
    path.write_text("3\n0\n99999999999999999999999\n")
    result = run_cli_here("analyze", path, "--max-length", 8, "--algorithms", "spfhp")
    verdict = judge_cli(result, refuse=True, match="line 3 of")
    assert verdict.outcome == HELD, verdict
    assert "99999999999999999999999" in result.stderr, result.stderr


@pytest.mark.parametrize("length", [200, 255], ids=["200", "NAME_MAX"])
def test_a_long_file_name_the_system_takes_is_written(tmp_path, length):
    """A plot (or any atomic write) named with up to NAME_MAX bytes: the temporary name put
    ~30 bytes of its own before the user's name, so a name of 226-255 bytes, which the file
    system takes, failed with "File name too long" after the planning."""
    from tests.faults.inprocess import run_cli_here
    from tests.faults.outcomes import judge_cli
    from tfpack import atomic

    name = "p" * (length - 4) + ".png"
    result = run_cli_here("analyze", _histogram(tmp_path), "--max-length", 8,
                          "--algorithms", "spfhp", "--plot", tmp_path / name)
    verdict = judge_cli(result, refuse=False, check=lambda r: sorted(os.listdir(tmp_path)) == [
        "h.txt", name] and (tmp_path / name).read_bytes()[:4] == b"\x89PNG")
    assert verdict.outcome == HELD, verdict
    keras_like = tmp_path / ("k" * (length - 6) + ".keras")
    with atomic.atomic_path(str(keras_like)) as partial:
        assert partial.endswith(".keras")  # writers that check an extension still see it
        open(partial, "w").write("x")
    assert keras_like.read_text() == "x"


def test_an_output_named_near_name_max_packs_and_its_leftovers_go(tmp_path):
    """``tfpack pack --output`` a 240-byte name: the staging sibling put the whole name between
    ~50 bytes of its own, past 255, and the run was refused as "The folder of `output` must
    be writable". Now it packs; a killed run's staging sibling of that name is removed by the
    next run (the sibling's key is the same for the same name)."""
    import json

    import tensorflow as tf

    import tfpack
    from tests.faults.inprocess import run_cli_here
    from tests.faults.outcomes import judge_cli
    from tfpack.formats import outputs

    source = tmp_path / "in.tfrecord"
    with tf.io.TFRecordWriter(str(source)) as writer:
        for i in range(20):
            ids = list(range(1000 + i, 1010 + i))
            writer.write(tfpack.formats.google_example(ids, [0] * 10, [1], [ids[1]], 0,
                                                    max_seq_length=32, max_predictions_per_seq=4))
    out = tmp_path / ("o" * 240)
    args = ("pack", "--input", source, "--output", out, "--max-length", 32,
            "--max-sequences-per-pack", 3, "--algorithm", "ffd")
    verdict = judge_cli(run_cli_here(*args), refuse=False, check=lambda r: sorted(
        i for p in tfpack.formats.read_packed(str(out)).as_numpy_iterator()
        for i in p["example_ids"].tolist() if i >= 0) == list(range(20)))
    assert verdict.outcome == HELD, verdict
    assert all(len(n) <= 255 for n in (os.path.basename(outputs.sibling(str(out), kind))
                                       for kind in ("new", "old", "export-partial", "export-old")))
    token = "0123456789abcdef"
    dead = os.path.join(tmp_path, os.path.basename(outputs.sibling(str(out), "new")).rsplit(
        "-", 2)[0] + f"-999999999-{token}")  # a killed run's staging folder
    os.mkdir(dead)
    with open(os.path.join(dead, outputs.OWNER), "w") as f:
        json.dump({"pid": 999999999, "token": token}, f)
    verdict = judge_cli(run_cli_here(*args, "--overwrite"), refuse=False,
                        check=lambda r: sorted(os.listdir(tmp_path)) == ["in.tfrecord", out.name])
    assert verdict.outcome == HELD, verdict
