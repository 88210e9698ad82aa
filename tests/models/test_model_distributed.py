"""Counts are global under tf.distribute: 2 replicas give the 1-device gradient."""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    # TensorFlow, Keras and tfpack imported with the cyclic garbage collector paused, then
    # frozen out of its scans, as `tfpack.cli` does for its commands: about a million
    # objects, none of them garbage, scanned over and over otherwise.
    import gc
    gc.disable()
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    from tfpack.models import BertEncoder, BertPretrainer
    from tfpack.testing import pack_examples
    gc.enable()
    gc.freeze()

    rng = np.random.default_rng(0)
    examples = []
    # Uneven counts per replica: replica 0 gets many predictions, replica 1
    # few, so per-replica means would weight them wrongly.
    for n, m in ((6, 4), (5, 3), (3, 1), (4, 1)):
        examples.append({"input_ids": rng.integers(1, 30, n),
                         "masked_lm_positions": np.arange(1, m + 1),
                         "masked_lm_ids": rng.integers(1, 30, m),
                         "next_sentence_labels": 1})
    features = pack_examples(examples, 8, packs=[[0], [1], [2, 3]],
                             max_sequences_per_pack=2, max_predictions=4)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = BertPretrainer(BertEncoder(
            vocabulary_size=30, num_layers=1, hidden_dim=8, num_heads=2,
            intermediate_dim=16, dropout=0.0, attention_dropout=0.0))
        model(features)

    def gradients(x):
        with tf.GradientTape() as tape:
            loss = model.compute_loss(x=x, training=True)
        return [tf.convert_to_tensor(g)
                for g in tape.gradient(loss, model.trainable_variables)]

    single = gradients({k: tf.constant(v) for k, v in features.items()})
    halves = [{k: tf.constant(v[:2]) for k, v in features.items()},
              {k: tf.constant(v[2:]) for k, v in features.items()}]
    per_replica = strategy.experimental_distribute_values_from_function(
        lambda context: halves[context.replica_id_in_sync_group])

    @tf.function
    def step(x):
        grads = strategy.run(gradients, args=(x,))
        return [strategy.reduce("SUM", g, axis=None) for g in grads]

    summed = step(per_replica)
    worst = max(float(tf.reduce_max(tf.abs(a - b)))
                for a, b in zip(single, summed))
    print("WORST", worst)
    assert worst < 1e-6, worst
""")


def test_two_replicas_sum_to_the_single_device_gradient():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
