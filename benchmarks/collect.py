"""Write BENCHMARKS.md: the summary of targets, then every results file verbatim.

Each `benchmarks/NAME.py` writes `benchmarks/results/NAME.md` with its numbers
and the command that produced them; this script gathers them so BENCHMARKS.md
never drifts from what the scripts measured.

    python benchmarks/collect.py
"""

import pathlib

HERE = pathlib.Path(__file__).resolve().parent
ORDER = ["planners", "optimal", "planners_long", "planners_suite", "planners_unseen", "planner_kernels", "pricing_vectors", "planner_collector", "settle_index",
         "planners_long_context", "pair_planner", "pair_planner_unlimited", "balance", "balance_replicas", "pipeline", "engines", "engines_dask", "pack_suite", "spill_reads", "model",
         "training", "accumulation", "predict", "qa", "preference", "seq2seq", "seq2seq_attention", "backbones", "attention", "keras_hub_attention",
         "keras_hub_dense", "keras_hub_families", "recurrent", "attention_isolation",
         "accelerator", "accelerator_flash",
         "integrity", "reading", "worker_reads", "suite_cpu"]


def main() -> None:
    summary = (HERE / "summary.md").read_text()
    parts = [summary.rstrip(), ""]
    for name in ORDER:
        path = HERE / "results" / f"{name}.md"
        if path.exists():
            text = path.read_text().rstrip()
            # Demote the results' headings one level under BENCHMARKS.md's.
            text = "\n".join("#" + line if line.startswith("#") else line
                             for line in text.splitlines())
            parts += [text, ""]
    (HERE.parent / "BENCHMARKS.md").write_text("\n".join(parts))


if __name__ == "__main__":
    main()
