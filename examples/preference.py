"""SFT then DPO on packed preference pairs: a keras-hub Llama 3 with its own tokenizer.

Task (real English, offline): given a standard-library function's signature,
answer with the first sentence of its docstring. A preference pair holds the
question, the true sentence (chosen) and the same words in a seeded random
order (rejected)::

    prompt:   what does json.dumps(obj, *, skipkeys=False, ...) do?
    chosen:   Serialize ``obj`` to a JSON formatted ``str``.
    rejected: formatted to ``obj`` JSON ``str``. Serialize a

Steps: a byte-level BPE vocabulary is trained on the pairs (`tokenizers`,
offline) and loaded into keras-hub's `Llama3Tokenizer`; a small random
`Llama3Backbone` runs on packs through `tfpack.models.from_keras_hub`;
supervised fine-tuning on ``(prompt, chosen)`` (`tfpack.builders.sft_examples`);
then the SFT model's log-likelihoods of every pair are computed once
(`tfpack.inference.reference_log_likelihoods`, through `tfpack.predict`) and
carried in the packs (`tfpack.builders.preference_examples(reference=)`),
and `tfpack.models.PreferenceModel(reference="precomputed", loss="sigmoid")`
(DPO) trains the same model on packed pairs: a pair is one packed item, so its
chosen and rejected sequences share a pack. Held-out pairs measure, before and after: how often
the model gives the chosen response the higher log-likelihood, and DPO's
reward accuracy (a positive implicit reward margin against the SFT
reference; near 0 before DPO, when policy and reference agree) and mean
margin (`model.evaluate`).

Measured here (default setting: 1,296 training pairs, 3.51 pairs per packed
row of 256 tokens, 150 SFT and 150 DPO updates of 8 packs, a 2,000-token
vocabulary, hidden 64, 2 layers; about 10 minutes on 2 heavily shared CPU
cores): on 200 held-out pairs the chosen response has the higher
log-likelihood for 37% at random init, 99.5% after SFT and 99.5% after DPO;
DPO's reward accuracy goes from 16.5% (margins ~0: policy = reference) to
99%, the mean reward margin from 0.0 to 10.4, the held-out DPO loss from 0.693
to 0.056. ``--tiny`` (200 pairs, 6 + 6 updates): 30% / 62% / 62%, reward
accuracy 0% -> 97.5%, DPO loss 0.693 -> 0.641.

    python examples/preference.py [--tiny]

The last stdout line is one JSON object of the results.
"""

import argparse
import json
import os
import random
import sys

import keras
import keras_hub
import numpy as np
import tensorflow as tf

from tfpack import builders, data, inference, models, training

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from keras_hub_sft import docstring_pairs  # noqa: E402  (the same real pairs)

LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                   "<|end_header_id|>", "<|eot_id|>"]


def preference_pairs(max_pairs: int, seed: int) -> list[dict]:
    """``{"prompt", "chosen", "rejected"}``: the true sentence against its words shuffled."""
    rng = random.Random(seed)
    out = []
    for prompt, response in docstring_pairs(max_pairs, seed=seed):
        words = response.split()
        shuffled = words[:]
        while shuffled == words:
            rng.shuffle(shuffled)
        out.append({"prompt": prompt, "chosen": response, "rejected": " ".join(shuffled)})
    return out


def train_tokenizer(texts: list[str], vocabulary_size: int) -> keras_hub.models.Llama3Tokenizer:
    """A byte-level BPE vocabulary trained here, in keras-hub's `Llama3Tokenizer`."""
    from tokenizers import Tokenizer
    from tokenizers import models as bpe_models
    from tokenizers import pre_tokenizers, trainers

    bpe = Tokenizer(bpe_models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocabulary_size, special_tokens=LLAMA3_SPECIALS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    model = json.loads(bpe.to_str())["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return keras_hub.models.Llama3Tokenizer(vocabulary=model["vocab"], merges=merges)


def fitting(pairs: list[dict], tokenizer, L: int) -> list[dict]:
    """The pairs whose two sequences fit in one pack of ``L`` tokens, uncut."""
    def length(text):
        return len(tokenizer(text))

    # <|begin_of_text|> prompt response <|end_of_text|>, twice.
    return [p for p in pairs if 2 * (length(p["prompt"]) + 2) + length(p["chosen"])
            + length(p["rejected"]) <= L]


def log_likelihoods(lm, examples, L: int, K: int) -> dict:
    """The chosen and rejected responses' log-likelihoods under ``lm``, pair by pair."""
    return inference.reference_log_likelihoods(lm, examples, max_length=L,
                                            max_sequences_per_pack=K, batch_size=8)


def likelihood_accuracy(scores: dict) -> float:
    """Share of pairs whose chosen response has the higher log-likelihood (ties miss)."""
    return float(np.mean(scores["chosen_log_likelihood"] > scores["rejected_log_likelihood"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tiny", action="store_true", help="a seconds-long smoke run")
    args = parser.parse_args()
    (num_pairs, held, sft_steps, dpo_steps, hidden, layers, vocabulary) = (
        (240, 40, 6, 6, 32, 1, 1000) if args.tiny else (1500, 200, 150, 150, 64, 2, 2000))
    L, K, batch = 256, 8, 8

    keras.utils.set_random_seed(0)
    pairs = preference_pairs(num_pairs, seed=0)
    held_out, pairs = pairs[:held], pairs[held:]
    tokenizer = train_tokenizer([f"{p['prompt']} {p['chosen']}" for p in pairs], vocabulary)
    held_out, pairs = fitting(held_out, tokenizer, L), fitting(pairs, tokenizer, L)

    llama = keras_hub.models.Llama3Backbone(
        vocabulary_size=tokenizer.vocabulary_size(), num_layers=layers, num_query_heads=4,
        num_key_value_heads=2, hidden_dim=hidden, intermediate_dim=4 * hidden,
        tie_word_embeddings=True)
    lm = models.CausalLM(models.from_keras_hub(llama))
    test = builders.preference_examples(held_out, max_length=L, tokenizer=tokenizer).cache()
    initial = likelihood_accuracy(log_likelihoods(lm, test, L, K))

    # 1. Supervised fine-tuning on (prompt, chosen).
    sft = builders.sft_examples([(p["prompt"], p["chosen"]) for p in pairs], max_length=L,
                            tokenizer=tokenizer)
    sft_packs = sft.apply(data.pack(max_length=L, max_sequences_per_pack=2 * K, seed=0))
    training.Trainer(lm, keras.optimizers.AdamW(2e-3), micro_batch_size=batch, log_every=10,
                     progress=False).fit(sft_packs.repeat(), num_steps=sft_steps)
    # The SFT model's held-out scores: its accuracy, and DPO's reference on held-out pairs.
    test_reference = log_likelihoods(lm, test, L, K)
    after_sft = likelihood_accuracy(test_reference)

    # 2. DPO against the SFT model, its log-likelihoods computed once and carried in the packs.
    train = builders.preference_examples(pairs, max_length=L, tokenizer=tokenizer)
    reference = log_likelihoods(lm, train, L, K)
    packer = data.pack(max_length=L, max_sequences_per_pack=K, seed=0)
    dpo_packs = builders.preference_examples(pairs, max_length=L, tokenizer=tokenizer,
                                         reference=reference).apply(packer)
    test_packs = builders.preference_examples(
        held_out, max_length=L, tokenizer=tokenizer, reference=test_reference).apply(
        data.pack(max_length=L, max_sequences_per_pack=K, shuffle=False)).batch(batch)
    dpo = models.PreferenceModel(lm, "precomputed", loss="sigmoid", beta=0.1)
    dpo.compile(jit_compile=True)
    before = dpo.evaluate(test_packs, return_dict=True, verbose=0)
    result = training.Trainer(dpo, keras.optimizers.AdamW(1e-3), micro_batch_size=batch,
                              log_every=10, progress=False).fit(dpo_packs.repeat(),
                                                                num_steps=dpo_steps)
    after = dpo.evaluate(test_packs, return_dict=True, verbose=0)
    after_dpo = likelihood_accuracy(log_likelihoods(lm, test, L, K))

    summary = {
        "pairs": len(pairs), "held_out": len(held_out), "tokens_per_pack": L,
        "pairs_per_pack": round(packer.report.packing_factor, 2),
        "likelihood_accuracy": {"initial": initial, "sft": after_sft, "dpo": after_dpo},
        "reward_accuracy": {"before_dpo": round(before["reward_accuracy"], 4),
                            "after_dpo": round(after["reward_accuracy"], 4)},
        "reward_margin": {"before_dpo": round(before["reward_margin"], 4),
                          "after_dpo": round(after["reward_margin"], 4)},
        "dpo_loss": {"before": round(before["loss"], 4), "after": round(after["loss"], 4),
                     "last_train": round(result.history[-1]["loss"], 4)},
    }
    print(f"{len(pairs)} training pairs, {packer.report.packing_factor:.2f} pairs per pack of "
          f"{L} tokens; held-out chosen-over-rejected by log-likelihood: {initial:.2f} at "
          f"random init, {after_sft:.2f} after SFT, {after_dpo:.2f} after DPO")
    print(json.dumps(summary))


if __name__ == "__main__":
    tf.get_logger().setLevel("ERROR")
    main()
