"""A plan run whole, then as N shards (one after another, on this machine), then merged.

Prints, side by side in one run: the whole run's wall time; each shard's wall time
and its share of the measured work (sum of its runs' durations) against the share
its dealing estimated; the makespan N machines would see (the slowest shard); the
cost of weighing (each shard runs every block's program once); and the merge's time.

    SCENC_CACHE=/tmp/scenc-cache python bench/bench_shards.py [--shards 3] [--runs 10]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCENC = [sys.executable, "-c", "import sys; from scenc.cli import main; sys.exit(main())"]
SCENARIO = Path(__file__).resolve().parent.parent / "examples" / "loop.scn"


def timed(*args):
    t0 = time.perf_counter()
    done = subprocess.run([*SCENC, *map(str, args)], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"scenc {' '.join(map(str, args))} failed:\n{done.stderr}")
    return time.perf_counter() - t0


def lines(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--allocators", default="glibc,jemalloc")
    args = parser.parse_args()
    plan = ["--allocators", args.allocators, "--param", "threads=1,2", "--param",
            "iterations=100000,300000,1000000", "--runs", args.runs, "--seed", 1, "-q"]
    with tempfile.TemporaryDirectory() as tmp:
        timed("run", SCENARIO, *plan, "-o", f"{tmp}/warm.json")  # builds into the cache
        whole = timed("run", SCENARIO, *plan, "-o", f"{tmp}/whole.json")
        walls, parts = [], []
        for k in range(1, args.shards + 1):
            parts.append(f"{tmp}/s{k}.json")
            walls.append(timed("run", SCENARIO, *plan, "--shard", f"{k}/{args.shards}", "-o", parts[-1]))
        merge = timed("merge", *parts, "-o", f"{tmp}/all.json")
        work = [sum(r["duration_s"] for r in lines(p)[1:]) for p in parts]
        shard = lines(parts[0])[0]["shard"]
        total_weight = sum(shard["weights"].values())
        estimated = [sum(shard["weights"][b] for b in hand) / total_weight for hand in shard["dealing"]]
        with open("/proc/loadavg") as f:
            load = f.read().split()[0]
        print(f"plan: 6 blocks x {len(args.allocators.split(','))} allocators x {args.runs} runs; "
              f"load average {load}")
        print(f"whole run:              {whole:6.2f} s")
        for k, (wall, done, share) in enumerate(zip(walls, work, estimated), start=1):
            print(f"shard {k}/{args.shards}: {wall:6.2f} s wall, measured work {done:5.2f} s "
                  f"= {done / sum(work):4.0%} (estimated {share:4.0%})")
        print(f"slowest shard (makespan on {args.shards} machines): {max(walls):6.2f} s "
              f"= {max(walls) / whole:.2f} x the whole run")
        print(f"sum of shards:          {sum(walls):6.2f} s = {sum(walls) / whole:.2f} x the whole run "
              f"(each shard builds/looks up every program and weighs every block)")
        print(f"merge:                  {merge:6.2f} s")


if __name__ == "__main__":
    main()
