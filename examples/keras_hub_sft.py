"""Supervised fine-tuning of a keras-hub decoder on packed prompt/response pairs.

Task (real English, offline): given a standard-library function's signature,
answer with the first sentence of its docstring::

    prompt:   what does json.dumps(obj, *, skipkeys=False, ...) do?
    response: Serialize ``obj`` to a JSON formatted ``str``.

Pairs are read from the Python standard library's source with `ast` (never
imported) and tokenized with the bundled WordPiece vocabulary
(`tfpack.data.sft_examples`): each becomes ``[CLS] prompt [SEP] response
[SEP]`` with per-token ``loss_weights`` 0.0 on prompt targets and 1.0 on
response targets (the "assistant-only loss"). Several pairs share each packed
row; `tfpack.models.from_keras_hub` runs a keras-hub `LlamaBackbone` on the
packs (rotary positions restarting per pair, causal block-diagonal
attention), `tfpack.models.CausalLM` weighs its loss with ``loss_weights``,
and the `tfpack.training.Trainer` trains it. The keras-hub backbone's own
variables are trained, so keras-hub's `LlamaCausalLM.generate` answers a
held-out prompt with them at the end.

No pretrained decoder ships offline, so the Llama starts from random weights.
Measured here (1,400 pairs packed 3.5 per row by the `optimal` plan, 150
updates of 8 packs, about 5 minutes on 2 shared CPU cores): the held-out
response loss falls from 10.33 (uniform over 30,522 tokens) to 5.19, and the
answers start with the right first word ("Return ...").

    python examples/keras_hub_sft.py [--full]
"""

import argparse
import ast
import importlib.util
import random
import sys

import keras
import keras_hub
import numpy as np
import tensorflow as tf

from tfpack import data, models, packing, training

# Modules without prose worth learning, or whose parsing is slow.
_SKIP = {"this", "antigravity", "test", "idlelib", "lib2to3", "tkinter", "turtledemo"}


def docstring_pairs(max_pairs: int, seed: int) -> list[tuple[str, str]]:
    """(question about a function's signature, first sentence of its docstring)."""
    pairs = []
    for module in sorted(sys.stdlib_module_names):
        if module.startswith("_") or module in _SKIP:
            continue
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            continue
        if spec is None or not (spec.origin or "").endswith(".py"):
            continue
        with open(spec.origin, encoding="utf-8", errors="replace") as f:
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


def answer(llama: keras_hub.models.LlamaBackbone, prompt_ids: list[int], sep: int,
           max_new_tokens: int = 24) -> list[int]:
    """keras-hub's own greedy generation with the (packed-trained) backbone."""
    generator = keras_hub.models.LlamaCausalLM(backbone=llama, preprocessor=None)
    length = len(prompt_ids) + max_new_tokens
    token_ids = np.zeros((1, length), "int32")
    token_ids[0, :len(prompt_ids)] = prompt_ids
    padding_mask = np.zeros((1, length), "int32")
    padding_mask[0, :len(prompt_ids)] = 1
    out = generator.generate({"token_ids": token_ids, "padding_mask": padding_mask},
                             stop_token_ids=[sep])
    ids = np.asarray(out["token_ids"])[0]
    mask = np.asarray(out["padding_mask"])[0].astype(bool)
    return ids[mask][len(prompt_ids):].tolist()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full", action="store_true", help="all pairs, larger model")
    args = parser.parse_args()
    num_pairs, steps, hidden, layers = (None, 3000, 256, 4) if args.full else (1500, 150, 64, 2)
    L, K = 128, 8

    keras.utils.set_random_seed(0)
    pairs = docstring_pairs(num_pairs or 10**9, seed=0)
    held_out, pairs = pairs[:100], pairs[100:]
    examples = data.sft_examples(pairs, max_length=L).cache()
    lengths = np.array([len(x["input_ids"]) for x in examples.as_numpy_iterator()])
    plan = packing.plan(packing.histogram(lengths, L), max_length=L,
                        max_sequences_per_pack=K, algorithm="optimal")
    print(f"{len(pairs)} pairs, mean length {lengths.mean():.1f} tokens")
    print(plan.summary())
    packs = examples.apply(data.pack(max_length=L, max_sequences_per_pack=K, plan=plan,
                                     seed=0))
    test = data.sft_examples(held_out, max_length=L).apply(
        data.pack(max_length=L, max_sequences_per_pack=K, algorithm="optimal",
                  shuffle=False))

    vocab = data.load_vocab()
    llama = keras_hub.models.LlamaBackbone(
        vocabulary_size=len(vocab), num_layers=layers, num_query_heads=4,
        num_key_value_heads=2, hidden_dim=hidden, intermediate_dim=4 * hidden,
        tie_word_embeddings=True)
    model = models.CausalLM(models.from_keras_hub(llama))
    model.compile(jit_compile=True)
    before = model.evaluate(test.batch(8), return_dict=True, verbose=0)
    trainer = training.Trainer(model, keras.optimizers.AdamW(learning_rate=2e-3),
                               micro_batch_size=8, log_every=25)
    result = trainer.fit(packs.shuffle(512, seed=0).repeat(), num_steps=steps)
    for record in result.history:
        print({k: round(v, 4) if isinstance(v, float) else v for k, v in record.items()})
    after = model.evaluate(test.batch(8), return_dict=True, verbose=0)
    print("held-out response loss (per response token): "
          f"{before['loss']:.3f} before, {after['loss']:.3f} after training")

    prompt, response = held_out[0]
    prompt_ids = [int(t) for t in next(iter(data.sft_examples(
        [(prompt, response)], max_length=L)))["input_ids"].numpy()]
    sep = vocab.index("[SEP]")
    prompt_ids = prompt_ids[:prompt_ids.index(sep) + 1]
    generated = answer(llama, prompt_ids, sep)
    print(f"prompt:    {prompt}\nreference: {response}\n"
          f"generated: {' '.join(vocab[t] for t in generated).replace(' ##', '')}")


if __name__ == "__main__":
    tf.get_logger().setLevel("ERROR")
    main()
