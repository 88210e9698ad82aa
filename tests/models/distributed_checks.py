"""Checks under MirroredStrategy over two logical CPUs, run in `replicas_run.py`'s
subprocess beside the `Trainer` updates (logical devices must be set before
TensorFlow starts, and TensorFlow starts once for all of them).

Each check takes the two-replica strategy and returns ``{name: array}`` (saved
to a ``.npz`` by the runner); the tests in ``test_replicas.py`` judge them.
"""

import numpy as np


def bert_gradients(strategy):
    """``{"single", "summed"}``: a BertPretrainer's gradients (flattened,
    concatenated) on three packs on one device, and summed over two replicas
    holding 2 and 1 of them. Uneven counts per replica: replica 0 gets many
    masked-LM predictions, replica 1 few, so per-replica means would weigh
    them wrongly."""
    import tensorflow as tf

    from tfpack.models import BertEncoder, BertPretrainer
    from tfpack.testing import pack_examples

    rng = np.random.default_rng(0)
    examples = []
    for n, m in ((6, 4), (5, 3), (3, 1), (4, 1)):
        examples.append({"input_ids": rng.integers(1, 30, n),
                         "masked_lm_positions": np.arange(1, m + 1),
                         "masked_lm_ids": rng.integers(1, 30, m),
                         "next_sentence_labels": 1})
    features = pack_examples(examples, 8, packs=[[0], [1], [2, 3]],
                             max_sequences_per_pack=2, max_predictions=4)
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

    def flat(grads):
        return np.concatenate([np.ravel(g.numpy()) for g in grads])

    return {"single": flat(single), "summed": flat(summed)}


def fit_loss(strategy):
    """``{"one", "two"}``: the ``(fit, evaluate)`` losses `fit` and `evaluate`
    report on one device and on two replicas (SGD at learning rate 0: the
    weights stay), 27 packs of 1 or 2 sequences in batches of 16 (8 + 8 packs,
    then an uneven 6 + 5)."""
    import keras
    import tensorflow as tf

    from tfpack.models import CausalLM, DecoderBackbone
    from tfpack.testing import pack_examples
    from tfpack.testing.packer import next_token_labels

    rng = np.random.default_rng(0)
    examples = [{"input_ids": ids, "labels": next_token_labels(ids)}
                for ids in (rng.integers(1, 30, int(n)) for n in rng.integers(2, 9, 36))]
    packs = [[i] for i in range(18)] + [[18 + 2 * i, 19 + 2 * i] for i in range(9)]
    order = rng.permutation(27)
    features = pack_examples(examples, 16, packs=[packs[i] for i in order],
                             max_sequences_per_pack=2)

    def dataset():
        return tf.data.Dataset.from_tensor_slices(features).batch(16)

    def run(within):
        keras.utils.set_random_seed(1)
        with within.scope():
            model = CausalLM(DecoderBackbone(vocabulary_size=30, num_layers=1, hidden_dim=8,
                                             num_heads=2, intermediate_dim=16))
            model.compile(optimizer=keras.optimizers.SGD(0.0))
        fit = model.fit(dataset(), epochs=1, verbose=0).history["loss"][0]
        return [fit, model.evaluate(dataset(), verbose=0, return_dict=True)["loss"]]

    return {"one": np.array(run(tf.distribute.get_strategy()), np.float64),
            "two": np.array(run(strategy), np.float64)}


CHECKS = {"bert_gradients": bert_gradients, "fit_loss": fit_loss}
