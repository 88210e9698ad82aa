"""Supervised fine-tuning of a keras-hub decoder on packed prompt/response pairs.

Task (real English, offline): given a standard-library function's signature,
answer with the first sentence of its docstring::

    prompt:   what does json.dumps(obj, *, skipkeys=False, ...) do?
    response: Serialize ``obj`` to a JSON formatted ``str``.

Pairs are read from the Python standard library's source with `ast` (never
imported) and tokenized with the model's own tokenizer, a keras-hub
`LlamaTokenizer` (`tfpack.builders.sft_examples(..., tokenizer=)`): each becomes
``<s> prompt response </s>``, the ids keras-hub's preprocessors give, with
per-token ``loss_weights`` 0.0 on prompt targets and 1.0 on response targets
(the "assistant-only loss"). Several pairs share each packed row;
`tfpack.models.from_keras_hub` runs a keras-hub `LlamaBackbone` on the packs
(rotary positions restarting per pair, causal block-diagonal attention),
`tfpack.models.CausalLM` weighs its loss with ``loss_weights``, and the
`tfpack.training.Trainer` trains it. The keras-hub backbone's own variables
are trained, so keras-hub's `LlamaCausalLM.generate`, with the same
tokenizer in its preprocessor, answers a held-out prompt at the end.

No pretrained decoder or tokenizer ships offline, so the Llama starts from
random weights and its SentencePiece vocabulary is trained on the pairs
(`keras_hub.tokenizers.compute_sentence_piece_proto`); with a preset, use
``LlamaTokenizer.from_preset(...)`` and ``LlamaBackbone.from_preset(...)``.
Measured here (1,400 pairs packed 3.6 per row by the `optimal` plan, 150
updates of 8 packs, a 2,000-piece vocabulary, 1.5 minutes on 2 shared CPU
cores): the held-out response loss falls from 7.61 (uniform over 2,000
pieces: 7.60) to 4.67, and the answers start with the right first word
("Return ..."). Causal-LM scoring (`tfpack.models.CausalLMScorer` through
`tfpack.predict`, per example): each held-out response's log-likelihood
given its prompt beats that of its own words shuffled for 59% of the 100
prompts before training (ties count as misses) and for 100% after.

    python examples/keras_hub_sft.py [--full]
"""

import argparse
import ast
import random

import keras
import keras_hub
import numpy as np
import tensorflow as tf

import tfpack
from tfpack import builders, data, datasets, models, packing, training

def docstring_pairs(max_pairs: int, seed: int) -> list[tuple[str, str]]:
    """(question about a function's signature, first sentence of its docstring)."""
    pairs = []
    for module, path, _ in datasets.stdlib_modules():
        with open(path, encoding="utf-8", errors="replace") as f:
            try:
                tree = ast.parse(f.read())
            except SyntaxError:
                continue
        functions = [(f"{module}.", node) for node in tree.body]
        functions += [(f"{module}.{c.name}.", node) for c in tree.body
                      if isinstance(c, ast.ClassDef) and not c.name.startswith("_")
                      for node in c.body]
        for prefix, node in functions:
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
                continue
            doc = ast.get_docstring(node)
            if not doc:
                continue
            sentence = " ".join(doc.split("\n\n")[0].split()).split(". ")[0].rstrip(".")
            if 3 <= len(sentence.split()) <= 30:
                signature = f"{prefix}{node.name}({ast.unparse(node.args)})"
                pairs.append((f"what does {signature[:120]} do?", sentence + "."))
    random.Random(seed).shuffle(pairs)
    return pairs[:max_pairs]


def train_tokenizer(pairs: list[tuple[str, str]], vocabulary_size: int
                    ) -> keras_hub.models.LlamaTokenizer:
    """A SentencePiece `LlamaTokenizer` trained on the pairs (a preset's, offline)."""
    text = tf.data.Dataset.from_tensor_slices([f"{p} {r}" for p, r in pairs])
    proto = keras_hub.tokenizers.compute_sentence_piece_proto(
        text, vocabulary_size=vocabulary_size)
    return keras_hub.models.LlamaTokenizer(proto=proto)


def answer(llama: keras_hub.models.LlamaBackbone, tokenizer, prompt: str,
           max_new_tokens: int = 24) -> str:
    """keras-hub's own greedy generation with the (packed-trained) backbone."""
    generator = keras_hub.models.LlamaCausalLM(
        backbone=llama, preprocessor=keras_hub.models.LlamaCausalLMPreprocessor(tokenizer))
    generator.compile(sampler="greedy")
    length = 1 + len(tokenizer(prompt)) + max_new_tokens  # <s>, the prompt, the answer
    return generator.generate(prompt, max_length=length, strip_prompt=True)


def choice_accuracy(model: models.CausalLM, tokenizer, held_out, L: int, K: int) -> float:
    """How often a response outscores its own words shuffled (causal-LM scoring).

    `tfpack.models.CausalLMScorer` with `tfpack.predict(..., roles="sft")`: the
    log-likelihood of each response given its prompt, per example, packed.
    Each held-out prompt is scored with its response and with the same words
    in a seeded random order; a model that learned English prefers the first
    (chance: 0.5).
    """
    rng = random.Random(1)
    shuffled = [(p, " ".join(rng.sample(r.split(), len(r.split())))) for p, r in held_out]
    examples = builders.sft_examples(held_out + shuffled, max_length=L, tokenizer=tokenizer)
    scores = tfpack.predict(models.CausalLMScorer(model), examples, max_length=L,
                            max_sequences_per_pack=K, batch_size=8, roles="sft")
    own, other = np.split(scores["log_likelihood"], 2)
    return float(np.mean(own > other))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full", action="store_true", help="all pairs, larger model")
    args = parser.parse_args()
    num_pairs, steps, hidden, layers, vocabulary = (
        (None, 3000, 256, 4, 8000) if args.full else (1500, 150, 64, 2, 2000))
    L, K = 128, 8

    keras.utils.set_random_seed(0)
    pairs = docstring_pairs(num_pairs or 10**9, seed=0)
    held_out, pairs = pairs[:100], pairs[100:]
    tokenizer = train_tokenizer(pairs, vocabulary)
    examples = builders.sft_examples(pairs, max_length=L, tokenizer=tokenizer).cache()
    lengths = np.array([len(x["input_ids"]) for x in examples.as_numpy_iterator()])
    plan = packing.plan(packing.histogram(lengths, L), max_length=L,
                        max_sequences_per_pack=K, algorithm="optimal")
    print(f"{len(pairs)} pairs, mean length {lengths.mean():.1f} tokens")
    print(plan.summary())
    packs = examples.apply(data.pack(max_length=L, max_sequences_per_pack=K, plan=plan,
                                     seed=0))
    test = builders.sft_examples(held_out, max_length=L, tokenizer=tokenizer).apply(
        data.pack(max_length=L, max_sequences_per_pack=K, algorithm="optimal",
                  shuffle=False))

    llama = keras_hub.models.LlamaBackbone(
        vocabulary_size=tokenizer.vocabulary_size(), num_layers=layers, num_query_heads=4,
        num_key_value_heads=2, hidden_dim=hidden, intermediate_dim=4 * hidden,
        tie_word_embeddings=True)
    model = models.CausalLM(models.from_keras_hub(llama))
    model.compile(jit_compile=True)
    before = model.evaluate(test.batch(8), return_dict=True, verbose=0)
    chosen_before = choice_accuracy(model, tokenizer, held_out, L, K)
    trainer = training.Trainer(model, keras.optimizers.AdamW(learning_rate=2e-3),
                               micro_batch_size=8, log_every=25)
    result = trainer.fit(packs.shuffle(512, seed=0).repeat(), num_steps=steps)
    for record in result.history:
        print({k: round(v, 4) if isinstance(v, float) else v for k, v in record.items()})
    after = model.evaluate(test.batch(8), return_dict=True, verbose=0)
    print("held-out response loss (per response token): "
          f"{before['loss']:.3f} before, {after['loss']:.3f} after training")
    print("held-out responses scored above their own words shuffled (tfpack.predict + "
          f"CausalLMScorer): {chosen_before:.2f} before, "
          f"{choice_accuracy(model, tokenizer, held_out, L, K):.2f} after training")

    prompt, response = held_out[0]
    print(f"prompt:    {prompt}\nreference: {response}\n"
          f"generated: {answer(llama, tokenizer, prompt)}")


if __name__ == "__main__":
    tf.get_logger().setLevel("ERROR")
    main()
