"""BERT pre-training packed vs unpacked on real text (the paper's Figure 3, small).

Trains the same BERT from the same initial weights on the same sequences, once
padded one sequence per row and once packed with the batch cut by the packing
factor, and plots MLM + NSP loss against sequences seen. Runs in a few minutes
on CPU; ``--full`` uses every standard-library module, a larger model and more
steps (hours on CPU, minutes on an accelerator).

    python examples/bert_pretraining.py [--full] [--output-dir DIR]
"""

import argparse
import json

from tfpack import demo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full", action="store_true", help="full-size run")
    parser.add_argument("--output-dir", default="demo_output/bert_pretraining")
    args = parser.parse_args()
    if args.full:
        config = demo.DemoConfig(documents=100_000, steps=3000, hidden_dim=256, num_layers=4,
                                 num_heads=4, intermediate_dim=1024, learning_rate=2e-3,
                                 log_every=50)
    else:
        config = demo.DemoConfig(documents=150, steps=30)
    result = demo.run(config, output_dir=args.output_dir,
                      saved_model_dir=f"saved_models/bert_pretraining{'_full' if args.full else ''}",
                      progress=True, log=print)
    print(json.dumps(result.summary()))


if __name__ == "__main__":
    main()
