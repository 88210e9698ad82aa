"""The packing-per-host run across JAX processes (JAX_PLATFORMS=cpu): `run`, which the
per-host test's workers call after their MultiWorkerMirroredStrategy run
(``host_packing_run.py --jax``: one TensorFlow start a process for both), or alone:

    python host_packing_jax_run.py PATTERN COORDINATOR NUM_PROCESSES PROCESS_ID

The process joins `jax.distributed`, packs only its files (`tfpack.data.host_files`) with
``input_sharded=True`` and `tfpack.data.jax_all_gather`, then runs one cross-process
all-gather a batch until its packs end (unequal counts would hang). What it reports (alone:
its last stdout line, JSON): the files it was given, its steps, the example ids it packed,
`host_packs`.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402

import tfpack  # noqa: E402


def run(pattern, coordinator, processes, process):
    """Join `jax.distributed`, pack this process's files, step through them; the report."""
    jax.distributed.initialize(coordinator, num_processes=int(processes),
                               process_id=int(process))
    context = tf.distribute.InputContext(num_input_pipelines=jax.process_count(),
                                         input_pipeline_id=jax.process_index(),
                                         num_replicas_in_sync=jax.process_count())
    files = tfpack.data.host_files(pattern, context)
    examples = tf.data.TFRecordDataset(files).map(
        lambda r: {"input_ids": tf.ensure_shape(tf.io.parse_tensor(r, tf.int32), [None])})
    packer = tfpack.data.pack(max_length=16, max_sequences_per_pack=3, algorithm="ffd",
                              input_context=context, input_sharded=True, batch_size=2,
                              all_gather=tfpack.data.jax_all_gather())
    steps, ids = 0, []
    for batch in examples.apply(packer).as_numpy_iterator():
        multihost_utils.process_allgather(np.asarray(batch["sequence_mask"].sum()))
        for input_ids, cls, mask in zip(batch["input_ids"], batch["cls_positions"],
                                        batch["sequence_mask"]):
            ids += [int(input_ids[c]) for c, m in zip(cls, mask) if m > 0]
        steps += 1
    return {"files": [os.path.basename(f) for f in files], "steps": steps, "ids": ids,
            "host_packs": packer.report.host_packs}


def main():
    print(json.dumps(run(*sys.argv[1:])))


if __name__ == "__main__":
    main()
