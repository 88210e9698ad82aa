"""Gradient accumulation: what one update costs to trace, compile and run.

A tiny pre-trainer (the tests' `TinyPretrainer`, hidden 8, L=16) is trained
for one update and then one more with ``accumulation_steps`` in
``--acc`` (each in a fresh process, so peak memory is that config's alone),
one pack per micro-batch, XLA on. Reported per config:

- ``graph nodes``: nodes of the traced training loop, its nested functions
  (while-loop bodies, conds) included, not counting the compiled step's own
  function (one per replica whatever the accumulation);
- ``first update s``: the first `fit` call (trace, XLA compile, one update);
- ``next update s``: a second `fit` call (one update, traced already);
- ``peak RSS MB``: the process's peak resident memory, and its growth over
  the RSS just before the first `fit`.

Usage:
    python benchmarks/accumulation.py --acc 64 1024 [--output benchmarks/results/accumulation.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time

from results_file import write_results

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def graph_nodes(function) -> int:
    """Nodes of a concrete function's graph and of every function it calls,
    except XLA-compiled ones (the per-micro-batch step)."""
    graph = function.graph.as_graph_def()
    compiled = {f.signature.name for f in graph.library.function
                if f.attr.get("_XlaMustCompile") and f.attr["_XlaMustCompile"].b}
    return len(graph.node) + sum(len(f.node_def) for f in graph.library.function
                                 if f.signature.name not in compiled)


def one(acc: int) -> dict:
    """One config in this process."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "training")]  # this checkout's tfpack
    import keras
    import tensorflow as tf

    import tfpack
    from tfpack.training import Trainer
    from tinymodels import TinyPretrainer, dataset

    keras.utils.set_random_seed(0)
    trainer = Trainer(TinyPretrainer(), keras.optimizers.SGD(0.1), micro_batch_size=1,
                      accumulation_steps=acc, jit_compile=True, progress=False,
                      log_every=1, check_exact=False)
    data = dataset(64).repeat()
    before = _rss_mb()
    tic = time.perf_counter()
    trainer.fit(data, 1)
    first = time.perf_counter() - tic
    tic = time.perf_counter()
    trainer.fit(data, 2)
    second = time.perf_counter() - tic
    nodes = graph_nodes(trainer._loop.get_concrete_function(
        trainer._iterator, tf.constant(1, tf.int64)))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert tfpack.__file__.startswith(ROOT), tfpack.__file__
    return {"acc": acc, "graph_nodes": nodes, "first_update_s": round(first, 2),
            "next_update_s": round(second, 2), "peak_rss_mb": round(peak),
            "rss_growth_mb": round(peak - before)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--acc", type=int, nargs="+", default=[64, 1024])
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--output")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one)))
        return
    rows = []
    for acc in args.acc:
        out = subprocess.run([sys.executable, __file__, "--one", str(acc)], check=True,
                             capture_output=True, text=True, cwd=ROOT)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    lines = ["# Gradient accumulation: trace and memory per update", "",
             f"`python benchmarks/accumulation.py --acc {' '.join(map(str, args.acc))}` "
             f"on {platform.machine()} ({os.cpu_count()} cores), tiny pre-trainer, "
             "1 pack per micro-batch, XLA on.", "",
             "| accumulation | graph nodes | first update s | next update s | "
             "peak RSS MB | RSS growth MB |", "|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['acc']} | {r['graph_nodes']} | {r['first_update_s']} | "
              f"{r['next_update_s']} | {r['peak_rss_mb']} | {r['rss_growth_mb']} |"
              for r in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        write_results(args.output, text)


if __name__ == "__main__":
    main()
