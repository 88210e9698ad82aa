"""Fault injection, issue 33: the new surfaces off their path, refused by one declared check.

Each scenario failed before its fix: float/bool/digit-string/huge ids read by
`preference_examples` as ids; ``beta=inf`` a nan loss; a reference that is the
policy froze it; `pack --output` with a newline a traceback, ``""`` the working
directory; ``--plan FIFO`` and an ``--input`` matching a FIFO hung;
``--input GOOD,NOMATCH`` packed GOOD alone; a FIFO or /dev/zero as ``vocab_path``
hung; the Beam engine loaded any pickle planted in its staging folder, made with
the umask's mode.
"""

import os
import threading

import numpy as np
import pytest

import tfpack
from tests.faults.inprocess import run_cli_here
from tests.faults.outcomes import HELD, judge_call

PAIR = {"prompt": [1, 2], "chosen": [3], "rejected": [4, 5]}


@pytest.mark.parametrize("chosen, shown", [
    ([1.7, 2.9], "chosen=1.7 (a float)"), (np.array([1.0, 2.0]), "chosen=1.0 (a float)"),
    ([True, False], "chosen=True (a bool)"), (["5", "6"], "chosen='5' (a str)"),
    (["word", "strings"], "chosen='word' (a str)"), ([3, 2**31 + 5], "chosen=2147483653"),
], ids=["floats", "float64", "bools", "digit-strings", "words", "past-int32"])
def test_preference_ids_that_are_not_token_ids_are_refused_naming_them(chosen, shown):
    verdict = judge_call(
        lambda: tfpack.builders.preference_examples([dict(PAIR, chosen=chosen)], max_length=16),
        refuse=True, match=f"Received: {shown} in pair 0")
    assert verdict.evidence.startswith("`chosen` must be a list of integer token ids")
    assert verdict.outcome == HELD, verdict


def _policy():
    return tfpack.models.CausalLM(tfpack.models.DecoderBackbone(
        vocabulary_size=20, num_layers=1, hidden_dim=8, num_heads=2, intermediate_dim=16))


@pytest.mark.parametrize("kwargs", [dict(beta=float("inf")), dict(beta=float("nan")),
                                    dict(loss="simpo", simpo_gamma=float("nan")),
                                    dict(loss="orpo", orpo_lambda=float("inf")),
                                    dict(beta=True)])
def test_preference_model_non_finite_hyperparameters_are_refused(kwargs):
    name = next(k for k in kwargs if k != "loss")
    verdict = judge_call(lambda: tfpack.models.PreferenceModel(_policy(), **kwargs),
                         refuse=True, match=f"Received: {name}=")
    assert verdict.outcome == HELD, verdict
    assert verdict.evidence.startswith(f"`{name}` must be a finite number")


def test_a_reference_that_is_or_shares_the_policy_is_refused():
    policy = _policy()
    for reference in (policy, tfpack.models.CausalLM(policy.backbone)):
        verdict = judge_call(lambda: tfpack.models.PreferenceModel(policy, reference),
                             refuse=True, match="`reference` must be a distinct model")
        assert verdict.outcome == HELD, verdict
    assert policy.trainable  # not frozen by the refused call
    smaller = tfpack.models.CausalLM(tfpack.models.DecoderBackbone(
        vocabulary_size=12, num_layers=1, hidden_dim=8, num_heads=2, intermediate_dim=16))
    verdict = judge_call(lambda: tfpack.models.PreferenceModel(policy, smaller), refuse=True,
                         match="Received: vocabulary_size=12")
    assert verdict.outcome == HELD, verdict
    tfpack.models.PreferenceModel(policy, _policy())  # a distinct one is fine


# --- the command line ----------------------------------------------------------------------

def _records(tmp_path):
    from tfpack.formats.records import google_example
    import tensorflow as tf

    path = tmp_path / "good.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for n in (3, 5, 2):
            writer.write(google_example(list(range(1, n + 1)), [0] * n, [], [], 0,
                                        max_seq_length=8, max_predictions_per_seq=2))
    return path


def _watchdog(fifo):
    """Unblock a reader of ``fifo`` after 3 s, so a regression fails instead of hanging;
    ``timer.fired`` says whether a reader was waiting there (a hang averted)."""
    def release():
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO: nobody reads it
        except OSError:
            return
        timer.fired = True
        os.close(fd)
    timer = threading.Timer(3.0, release)
    timer.fired = False
    timer.start()
    return timer


@pytest.mark.parametrize("case", ["newline-output", "empty-output", "plan-fifo", "input-fifo",
                                  "input-nomatch"])
def test_pack_refuses_bad_paths_in_one_line_and_writes_nothing(tmp_path, monkeypatch, case):
    monkeypatch.chdir(tmp_path)
    good = _records(tmp_path)
    fifo = tmp_path / "fifo.tfrecord"
    os.mkfifo(fifo)
    args = {"--input": str(good), "--output": str(tmp_path / "out"), "--max-length": "8",
            "--max-sequences-per-pack": "2", "--algorithm": "ffd"}
    if case == "newline-output":
        args["--output"] = str(tmp_path / "out\nx")
    elif case == "empty-output":  # from an empty working directory, which it would fill
        args["--output"] = ""
        (tmp_path / "cwd").mkdir()
        monkeypatch.chdir(tmp_path / "cwd")
    elif case == "plan-fifo":
        del args["--algorithm"]
        args["--plan"] = str(fifo)
    elif case == "input-fifo":
        args["--input"] = str(tmp_path / "*.tfrecord")
    else:
        args["--input"] = f"{good},{tmp_path / 'nomatch*.tfrecord'}"
    before = sorted(os.listdir(tmp_path))
    timer = _watchdog(fifo)
    try:
        result = run_cli_here("pack", *[f"{k}={v}" for k, v in args.items()])
    finally:
        timer.cancel()
        timer.join()
    lines = result.stderr.splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr, result
    assert not timer.fired, "a read of the FIFO hung until the watchdog wrote"
    assert sorted(os.listdir(tmp_path)) == before
    assert case != "empty-output" or os.listdir(tmp_path / "cwd") == []


def test_export_refuses_an_empty_output(tmp_path, monkeypatch, keras_file):
    monkeypatch.chdir(tmp_path)
    result = run_cli_here("export", "--model", keras_file, "--output=")
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result
    assert os.listdir(tmp_path) == []


def test_a_plot_into_an_unwritable_folder_is_refused_before_planning(tmp_path, monkeypatch):
    import tfpack.packing

    def planned(*args, **kwargs):
        raise AssertionError("planned before refusing --plot")

    monkeypatch.setattr(tfpack.packing, "plan", planned)
    histogram = tmp_path / "h.txt"
    histogram.write_text("3\n0\n2\n")
    result = run_cli_here("analyze", histogram, "--max-length", "3", "--plot",
                          "/proc/tfpack-plot.png")
    assert result.returncode == 2 and "--plot" in result.stderr, result
    assert result.stdout == ""


@pytest.mark.parametrize("vocab_path", ["/dev/zero", "fifo"])
def test_a_vocab_path_that_is_not_a_regular_file_is_refused_not_read(tmp_path, vocab_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    vocab_path = str(fifo) if vocab_path == "fifo" else vocab_path
    import signal

    def hung(*_):
        raise TimeoutError("load_vocab hung reading a FIFO or a device")

    previous = signal.signal(signal.SIGALRM, hung)  # a regression fails in 10 s, not never
    signal.alarm(10)
    try:
        verdict = judge_call(lambda: tfpack.builders.load_vocab(vocab_path), refuse=True,
                             match="not a regular file")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert verdict.outcome == HELD, verdict


# --- the Beam engine's run state -------------------------------------------------------------

class _Planted:
    """A pickle that would make a file when loaded (code run as the packing user)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_beam_decide_never_loads_a_pickle_planted_in_staging(tmp_path):
    import pickle

    from tfpack.engines import base
    from tfpack.engines.beam import steps

    marker = tmp_path / "ran"
    for name in ("decision.pkl", "plan.pkl"):
        with open(tmp_path / f"{steps.CACHE_PREFIX}{name}", "wb") as f:
            pickle.dump(_Planted(str(marker)), f)
    lengths = np.array([3, 5, 2, 8], np.int64)
    scan = steps.FileScan(0, "f", lengths, np.zeros_like(lengths))
    job = base.Job("f", max_length=8, max_sequences_per_pack=2, algorithm="ffd")
    decision = steps.decide([steps.summary(scan, 8)], files=["f"], job=job,
                            cache_dir=str(tmp_path))
    assert not marker.exists()
    assert decision["error"] is None and decision["sequences"] == 4
    again = steps.decide([steps.summary(scan, 8)], files=["f"], job=job,
                         cache_dir=str(tmp_path))  # the kept plan, read back as JSON
    assert again["plan"].to_json() == decision["plan"].to_json()
    assert np.array_equal(again["histogram"], decision["histogram"])


def test_staging_folders_are_private_while_built(tmp_path):
    from tfpack.formats import outputs

    old = os.umask(0o002)  # a group-writable umask
    try:
        with outputs.replacing_output(str(tmp_path / "out")) as staging:
            assert os.stat(staging).st_mode & 0o777 == 0o700
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "out").st_mode & 0o777 == 0o775  # opened as usual when done


# --- packing per host ------------------------------------------------------------------------

def _two_hosts():
    import tensorflow as tf

    return tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=0)


@pytest.mark.parametrize("returned", [[float("inf"), 3], [float("nan"), 3], [1e300, 3]])
def test_a_gathered_count_that_is_not_a_finite_integer_is_refused(returned):
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices({"input_ids": [[1, 2]] * 4})
    packer = tfpack.data.pack(max_length=4, max_sequences_per_pack=2, input_context=_two_hosts(),
                              input_sharded=True, all_gather=lambda count: returned)
    verdict = judge_call(lambda: dataset.apply(packer), refuse=True, match="all_gather")
    assert verdict.outcome == HELD, verdict


def test_an_under_reporting_collective_is_refused_not_a_silent_cut():
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices({"input_ids": [[1, 2, 3]] * 60})
    packer = tfpack.data.pack(max_length=4, max_sequences_per_pack=2, input_context=_two_hosts(),
                              input_sharded=True, remainder="pad", algorithm="ffd",
                              all_gather=lambda count: [6, 6])
    verdict = judge_call(lambda: list(dataset.apply(packer)), refuse=True,
                         match="host 0 packed 60 packs")
    assert verdict.outcome == HELD, verdict


@pytest.mark.parametrize("alias", ["dot", "double-slash", "symlink"])
def test_one_file_named_twice_by_another_path_is_refused(tmp_path, alias):
    for name in ("a.rec", "b.rec"):
        (tmp_path / name).write_bytes(b"x")
    first = str(tmp_path / "a.rec")
    if alias == "dot":
        second = str(tmp_path) + "/./a.rec"
    elif alias == "double-slash":
        second = str(tmp_path) + "//a.rec"
    else:
        second = str(tmp_path / "link.rec")
        os.symlink(first, second)
    verdict = judge_call(lambda: tfpack.data.host_files([first, str(tmp_path / "b.rec"), second],
                                                        _two_hosts()),
                         refuse=True, match="must not name a file twice")
    assert verdict.outcome == HELD, verdict


# --- predict on preference pairs -------------------------------------------------------------

def test_predict_refuses_to_truncate_pairs():
    model = tfpack.models.PreferenceModel(_policy(), loss="simpo")
    pairs = tfpack.builders.preference_examples(
        [{"prompt": [1, 2, 3], "chosen": [4, 5, 6], "rejected": [7, 8, 9]}], max_length=16)
    verdict = judge_call(lambda: tfpack.predict(model, pairs, max_length=8,
                                                max_sequences_per_pack=2, truncate=True,
                                                jit_compile=False),
                         refuse=True, match="`truncate=True` cannot cut preference pairs")
    assert verdict.outcome == HELD, verdict


def test_predict_refuses_a_branch_id_outside_its_set():
    import tensorflow as tf

    model = tfpack.models.PreferenceModel(_policy(), loss="simpo")
    item = {"input_ids": [1, 2, 7, 1, 2, 8], "branch_ids": [1, 1, 1, 3, 3, 3],
            "response_mask": [0, 0, 1, 0, 0, 1]}
    dataset = tf.data.Dataset.from_tensors({k: tf.constant(v, tf.int32) for k, v in item.items()})
    verdict = judge_call(lambda: tfpack.predict(model, dataset, max_length=8,
                                                max_sequences_per_pack=2, jit_compile=False),
                         refuse=True, match="Received: branch_ids=3 in example 0")
    assert verdict.outcome == HELD, verdict
