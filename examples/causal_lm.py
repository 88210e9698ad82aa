"""A packed causal language model on real text, with positions reset per sequence.

Standard-library docstrings are tokenized and split into pieces of at most
``L`` tokens, packed with the `optimal` planner, and a small decoder
(`tfpack.models.CausalLM`, rotary positions restarting at every sequence,
causal block-diagonal attention) is trained on the packs with the
`tfpack.training.Trainer`. No label crosses a sequence boundary.

    python examples/causal_lm.py [--full] [--positions rotary|learned]
"""

import argparse

import numpy as np
import tensorflow as tf

import tfpack
from tfpack import builders, data, models, packing, training


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full", action="store_true", help="all modules, larger model")
    parser.add_argument("--positions", choices=["rotary", "learned"], default="rotary")
    args = parser.parse_args()
    documents, steps, L, K = (None, 2000, 512, 8) if args.full else (150, 40, 256, 8)

    pieces = builders.causal_lm_examples(
        tfpack.datasets.stdlib_documents(max_documents=documents), max_length=L,
        min_length=2).cache()
    lengths = np.concatenate(list(pieces.map(lambda x: tf.shape(x["input_ids"])[0])
                                  .batch(4096).as_numpy_iterator()))
    plan = packing.plan(packing.histogram(lengths, L), max_length=L,
                        max_sequences_per_pack=K, algorithm="optimal")
    print(plan.summary())
    packs = pieces.apply(data.pack(max_length=L, max_sequences_per_pack=K, plan=plan, seed=0))

    model = models.CausalLM(vocabulary_size=30522, num_layers=4 if args.full else 2,
                            hidden_dim=256 if args.full else 64, num_heads=4 if args.full else 2,
                            intermediate_dim=1024 if args.full else 256, max_sequence_length=L,
                            position_embedding=args.positions)
    trainer = training.Trainer(model, training.Lamb(learning_rate=5e-3),
                               micro_batch_size=8, log_every=10)
    result = trainer.fit(packs.repeat(), num_steps=steps)
    for record in result.history:
        print({k: round(v, 4) if isinstance(v, float) else v for k, v in record.items()})


if __name__ == "__main__":
    main()
