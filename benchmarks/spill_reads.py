"""Pass 2's reads of the spill: positioned reads against memory maps (issue 23 item 3).

`tfpack pack` (local engine) spills pass 1's parsed examples to flat files
(`tfpack.engines.spill`) and pass 2 reads them back in the plan's random
order. It used to read them through memory maps of the whole files, which
left every touched page mapped (file-backed RSS about the spill's size); it
now reads each chunk's runs with ``pread`` into the chunk's own arrays
(`SpillReader.read`). This measures what that costs: for each case of
`pack_suite`'s generated suite, the spill is written once (the real scan),
the plan made once (``optimal``, K=3, M=80), then pass 2's work on every
chunk (`pack_columns` + the compiled encoder, as `tfpack.engines.local`
runs it, one thread, nothing written) timed in interleaved rounds with both
reads: memory maps of one flat file per feature (the old spill and its read,
`_FeatureFiles`) and the reader of today's spill (one file, each example's
features together, one ``pread`` an example). Reported: the median ratio maps
seconds / reads seconds (>= 1: positioned reads as fast or faster) with its
spread, and each read's file-backed RSS growth at the end of a round
(``/proc/self/status``; the maps are still open there, as in the old pass 2).

Run:

    .venv/bin/python benchmarks/spill_reads.py                  # 7 families x 2 layouts
    .venv/bin/python benchmarks/spill_reads.py --records 20000 --rounds 3 --families lognormal

Writes ``benchmarks/results/spill_reads.md``; inputs are `pack_suite`'s (cached in
``benchmarks/output/``).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pack_suite  # noqa: E402  (the suite's generated inputs)
from results_file import write_results  # noqa: E402


def _rss_file_kb() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("RssFile:"))


class _FeatureFiles:
    """The old spill (before issue 23 item 3): one flat file per feature, read through maps."""

    def __init__(self, folder: str):
        self.folder, self.files, self.dtypes = folder, {}, {}

    def append(self, features: dict, runs=None) -> None:
        for name, values in features.items():
            if name not in self.files:
                self.files[name] = open(os.path.join(self.folder, f"{name}.values"), "wb")
                self.dtypes[name] = values.dtype
            self.files[name].write(np.ascontiguousarray(values).data)

    def close(self) -> None:
        for file in self.files.values():
            file.close()

    def maps(self) -> dict:
        return {n: np.memmap(os.path.join(self.folder, f"{n}.values"), d, "r")
                for n, d in self.dtypes.items()}


def pass_2(values, chunks, order, splits, counts, starts, sizes) -> int:
    """Every chunk's packs encoded from ``values`` (maps or a reader); bytes encoded."""
    from tfpack.engines.columns import pack_columns
    from tfpack.formats.protos import encode

    total = 0
    for start, end in chunks:
        local = splits[start:end + 1] - splits[start]
        members = order[splits[start]:splits[end]]
        data, _ = encode(local, pack_columns(values, counts, members=members, splits=local,
                                             sizes=sizes, starts=starts), framed=True)
        total += len(data)
    return total


def run_case(pattern: str, rounds: int, seed: int) -> dict:
    """Spill and plan once, then interleaved rounds of pass 2 with both reads."""
    from tfpack.engines import local
    from tfpack.engines.columns import starts_of
    from tfpack.engines.spill import Spill
    from tfpack.formats.records import GOOGLE_FEATURES, list_files, scan_google_records
    from tfpack.packing.flow import offline_packs

    folder = tempfile.mkdtemp(prefix="spill-reads-")
    try:
        os.makedirs(os.path.join(folder, "old"))
        spill, old = Spill(folder), _FeatureFiles(os.path.join(folder, "old"))
        lengths, predictions = scan_google_records(
            list_files(pattern, required=GOOGLE_FEATURES),
            keep=lambda values, runs: (spill.append(values, runs), old.append(values)))
        spill.close()
        old.close()
        packs = offline_packs(lengths, predictions, max_length=pack_suite.L,
                              max_sequences_per_pack=pack_suite.K,
                              max_predictions_per_pack=pack_suite.M_PACK, algorithm="optimal",
                              seed=seed, shuffle=True)
        order, splits = packs.order, packs.splits
        counts = {"tokens": lengths, "predictions": predictions}
        starts = starts_of(counts)
        sizes = {"L": pack_suite.L, "K": packs.max_sequences_per_pack,
                 "M": packs.max_predictions_per_pack}
        chunk = max(1, local._CHUNK_TOKENS // pack_suite.L)
        chunks = [(s, min(s + chunk, len(splits) - 1)) for s in range(0, len(splits) - 1, chunk)]
        spill_mb = os.path.getsize(os.path.join(folder, "examples.values")) / 2**20

        seconds = {"maps": [], "reads": []}
        growth = {"maps": [], "reads": []}
        encoded = set()
        for r in range(rounds):
            for kind in (("maps", "reads") if r % 2 == 0 else ("reads", "maps")):
                before = _rss_file_kb()
                values = old.maps() if kind == "maps" else spill.reader()
                started = time.perf_counter()
                encoded.add(pass_2(values, chunks, order, splits, counts, starts, sizes))
                seconds[kind].append(time.perf_counter() - started)
                growth[kind].append((_rss_file_kb() - before) / 1024)
                if kind == "reads":
                    values.close()
                del values
        assert len(encoded) == 1, "both reads must encode the same bytes"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    ratios = np.array(seconds["maps"]) / np.array(seconds["reads"])
    return {"spill_mb": spill_mb, "maps_s": float(np.median(seconds["maps"])),
            "reads_s": float(np.median(seconds["reads"])), "ratio": float(np.median(ratios)),
            "low": float(ratios.min()), "high": float(ratios.max()),
            "maps_file_mb": float(max(growth["maps"])),
            "reads_file_mb": float(max(growth["reads"]))}


def report(rows: list[dict], args, load: tuple) -> str:
    worst = min(rows, key=lambda r: r["ratio"])
    lines = [
        "# Pass 2's reads of the spill: positioned reads vs memory maps "
        "(`benchmarks/spill_reads.py`)", "",
        f"Command: `.venv/bin/python benchmarks/spill_reads.py --records {args.records} "
        f"--rounds {args.rounds} --families {','.join(args.families)}`",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, shared (load average "
        f"{load[0]:.1f} at the start, {load[1]:.1f} at the end). Per case: the spill written "
        "once by the real scan, the plan made once (optimal, K=3, M=80), then pass 2's work on "
        "every chunk (`pack_columns` + the compiled encoder, one thread, nothing written) in "
        "interleaved rounds, reading the examples through memory maps of one file per feature "
        "(the old spill and read) or from today's spill, each example's features together, "
        "with one positioned read an example (`SpillReader.read`). Ratio: maps seconds / reads "
        "seconds, median (min-max); >= 1.00x: positioned reads as fast or faster. File MB: "
        "growth of the process's file-backed RSS over a round (largest of the rounds).", "",
        f"**Worst case: {worst['ratio']:.2f}x** ({worst['family']}, {worst['layout']}); median "
        f"over the suite {np.median([r['ratio'] for r in rows]):.2f}x.", "",
        "| family | layout | spill MB | maps s | reads s | maps / reads | maps file MB | "
        "reads file MB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(f"| {r['family']} | {r['layout']} | {r['spill_mb']:.0f} | {r['maps_s']:.2f} | "
                     f"{r['reads_s']:.2f} | {r['ratio']:.2f}x ({r['low']:.2f}-{r['high']:.2f}) | "
                     f"{r['maps_file_mb']:.0f} | {r['reads_file_mb']:.0f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--families", type=lambda s: s.split(","),
                        default=list(pack_suite.FAMILIES))
    parser.add_argument("--layouts", type=lambda s: s.split(","), default=["padded", "unpadded"])
    parser.add_argument("--output", default=os.path.join(HERE, "results", "spill_reads.md"))
    parser.add_argument("--workdir", default=os.path.join(HERE, "output"))
    args = parser.parse_args(argv)
    start_load = os.getloadavg()[0]
    rows = []
    for family in args.families:
        for layout in args.layouts:
            pattern, _ = pack_suite.case_input(family, layout, args.records, 0, args.workdir)
            row = run_case(pattern, args.rounds, 0)
            rows.append({"family": family, "layout": layout, **row})
            print(f"{family:10s} {layout:9s}: {row['ratio']:.2f}x ({row['low']:.2f}-"
                  f"{row['high']:.2f}), file MB maps {row['maps_file_mb']:.0f} reads "
                  f"{row['reads_file_mb']:.0f}", file=sys.stderr, flush=True)
    text = report(rows, args, (start_load, os.getloadavg()[0]))
    write_results(args.output, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
