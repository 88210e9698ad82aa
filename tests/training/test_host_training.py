"""Packing per host while training (`tfpack.training.HostPacking`, ``tfpack train --per-host``):
two MultiWorkerMirroredStrategy workers (processes on 127.0.0.1) each pack only the Google
records of their own files; one epoch trains on every example exactly once across the
workers; a collective that disagrees with a worker's own count, or is not finite, is refused
on every worker; half an epoch resumed from its checkpoint trains what the uninterrupted epoch
does, and resuming on other files, another planner or one host is refused. The suite's one
worker pair runs every check (`multiworker.worker_pair`, `host_training_run.py`)."""

import json
import re

import numpy as np
import pytest

from multiworker import HOST_SIZES as SIZES
from multiworker import scenario, worker_pair
from multiworker import write_host_records as _write_records


@pytest.mark.slow  # one training: 16 s alone, 24 s on the loaded 2 cores
def test_one_process_packs_every_file_and_trains_each_example_once(tmp_path):
    """The default strategy: one worker, whose share is every file; a later `fit` must pass
    the same source (it continues its stream)."""
    import keras

    from tfpack.errors import TfpackError
    from tfpack.training import HostPacking, Lamb, Trainer
    from tinymodels import TinyPretrainer

    _write_records(tmp_path)
    source = HostPacking(str(tmp_path / "part-*.tfrecord"), max_length=32,
                         max_sequences_per_pack=3, max_predictions_per_pack=6, algorithm="ffd")
    keras.utils.set_random_seed(0)
    trainer = Trainer(TinyPretrainer(vocab_size=40, max_length=32, max_predictions_per_pack=6),
                      Lamb(learning_rate=0.01), micro_batch_size=2, log_every=50,
                      progress=False, jit_compile=False, check_exact=False)
    trainer.fit(source, 0)  # packs, trains nothing
    report = trainer.host_report
    assert report.sequences == sum(SIZES) and report.packs % 2 == 0
    result = trainer.fit(source, report.packs // 2)
    assert sum(r["sequences"] for r in result.history) == sum(SIZES)
    with pytest.raises(TfpackError, match="must pass it again"):
        trainer.fit(HostPacking(str(tmp_path / "part-*.tfrecord"), max_length=32,
                                max_sequences_per_pack=3), 9)
    with pytest.raises(TfpackError, match=r"`read` must be a callable or None\. "
                                          r"Received: read='x'"):
        HostPacking("x", "x", max_length=8, max_sequences_per_pack=2)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Each worker's results (`host_training_run.run`), from the suite's one worker pair."""
    folder = worker_pair(tmp_path_factory)
    scenario(folder, "hosts")
    return [json.loads((folder / "hosts" / f"out{i}.json").read_text()) for i in range(2)]


@pytest.mark.slow  # the worker pair (`multiworker.py`): its per-host part 137-254 s loaded
def test_a_collective_not_finite_or_disagreeing_is_refused_on_every_worker(results):
    for worker in results:
        not_finite, disagreeing = worker["refused"]
        assert not_finite and "`all_gather` must return a list of finite integer counts" \
            in not_finite, not_finite
        assert disagreeing and "`all_gather` must return every host's own count" \
            in disagreeing, disagreeing


@pytest.mark.slow
def test_each_worker_packs_its_own_files_and_one_epoch_trains_every_example_once(results):
    first, second = (r["trainer"] for r in results)
    assert first["own_sequences"] == SIZES[0] + SIZES[2]  # files 0 and 2, nothing else
    assert second["own_sequences"] == SIZES[1]
    assert first["host_packs"] == second["host_packs"] and first["host_packs"][0] > \
        first["host_packs"][1]  # uneven shares, padded to one count
    assert first["packs"] == second["packs"] and second["padding_packs"] > 0
    assert first["steps"] == second["steps"] == first["epoch_steps"] == first["packs"] // 2 > 0
    assert first["sequences"] == second["sequences"] == sum(SIZES)  # all workers, once each


@pytest.mark.slow
def test_tfpack_train_per_host_trains_every_example_once(results):
    chief, other = (r["cli"] for r in results)
    assert chief["code"] == other["code"] == 0
    assert chief["steps"] == results[0]["trainer"]["epoch_steps"]
    assert chief["sequences"] == sum(SIZES)


@pytest.mark.slow
def test_a_resumed_per_host_run_trains_every_example_once(results):
    """A new trainer resumes an epoch from its half-way checkpoint in the same folder: the
    same updates (losses and weights) as the uninterrupted epoch's second half, so no pack
    is trained twice or skipped, on either worker (restarting the stream instead: fails)."""
    for worker in results:
        resumed, epoch = worker["resumed"], worker["trainer"]
        half = epoch["epoch_steps"] // 2
        assert resumed["resumed_from"] == half > 0
        assert resumed["steps"] == epoch["steps"] == epoch["epoch_steps"]
        np.testing.assert_allclose(resumed["losses"], epoch["losses"][half:], rtol=1e-5)
        assert sum(epoch["step_sequences"][:half]) + resumed["sequences"] == sum(SIZES)
        assert resumed["max_weight_difference"] < 1e-5


@pytest.mark.slow
def test_resuming_a_per_host_run_on_other_files_planner_or_hosts_is_refused(results):
    """Other files, another planner, one host: refused by the stream the checkpoint records;
    a checkpoint folder each (the other worker's empty): refused on both (a collective failed
    with a traceback before)."""
    stream = "A run must resume on the input stream of its checkpoint"
    named = {"files": (stream, "files: checkpoint"),
             "algorithm": (stream, "algorithm: checkpoint 'ffd' vs now 'bfd'"),
             "hosts": (stream, "hosts: checkpoint 2 vs now 1"),
             "folders": ("Every worker must resume from the same checkpoint",
                         "Received: restored steps [{0}, None]")}
    assert set(results[0]["resumed"]["refused"]) == set(named)  # one host: the chief alone
    assert set(results[1]["resumed"]["refused"]) == set(named) - {"hosts"}
    for worker in results:
        steps = worker["trainer"]["epoch_steps"]
        for change, message in worker["resumed"]["refused"].items():
            assert message and all(m.format(steps) in message for m in named[change]), \
                (change, message)


def test_a_checkpoint_of_another_input_stream_is_refused_but_export_reads_it(tmp_path):
    """`Checkpointer(stream=...)`: the stream saved with the step must equal the resuming
    run's (a plain dataset's is none); a partial restore (the model alone, for export) reads
    any."""
    import keras
    import tensorflow as tf

    from tfpack.errors import TfpackError
    from tfpack.training.checkpoint import Checkpointer

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    step = tf.Variable(0, dtype="int64")
    Checkpointer(tmp_path, model=model, step=step, stream={"hosts": 2, "seed": 0}).save(3)
    assert Checkpointer(tmp_path, model=model, step=step,
                        stream={"hosts": 2, "seed": 0}).restore() == 3
    for other, named in (({"hosts": 1, "seed": 0}, "1 differ: hosts: checkpoint 2 vs now 1"),
                         (None, "2 differ: hosts: checkpoint 2 vs now None; seed")):
        with pytest.raises(TfpackError, match=r"A run must resume on the input stream of its "
                                              r"checkpoint .*" + re.escape(named)):
            Checkpointer(tmp_path, model=model, step=step, stream=other).restore()
    assert Checkpointer(tmp_path, model=model).restore(partial=True) == 3
