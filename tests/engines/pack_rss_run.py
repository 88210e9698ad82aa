"""Subprocess entry for the pass 2 memory test: one `pack_records`, its file-backed RSS sampled.

    python pack_rss_run.py PATTERN OUTPUT MAX_LENGTH

Runs the local engine once in this fresh process while a thread reads
``RssFile`` (file-backed resident memory: mapped files) from
``/proc/self/status`` every millisecond. Prints one JSON line: the peak
growth above the value just before the job, in kB, and the job's stats.
"""

import json
import os
import sys
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# TensorFlow and tfpack imported before the baseline, so the sampled job is as it was (the
# garbage collector paused, then frozen, by the suite's site: tests/paused_imports.py).
import tensorflow as tf  # noqa: E402, F401  (its libraries belong to the baseline)

from tfpack.engines.local import pack_records  # noqa: E402


def rss_file_kb() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("RssFile:"))


def main(pattern: str, output: str, max_length: int) -> None:
    peak, done = [rss_file_kb()], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_file_kb())
            time.sleep(0.001)

    base = peak[0]
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stats = pack_records(pattern, output, max_length=max_length, max_sequences_per_pack=3,
                         algorithm="ffd", packs_per_shard=4096)
    done.set()
    sampler.join()
    print(json.dumps({"base_kb": base, "peak_growth_kb": peak[0] - base,
                      "tokens": stats["tokens"], "packs": stats["packs"],
                      "seconds": stats["seconds"]}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
