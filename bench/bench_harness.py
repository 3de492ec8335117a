"""How much time does `scenc run` add around the programs it measures?

Runs `scenc run` twice on the same scenario, with few and with many runs
(no warm-up, so every program run is in the result file), and compares its
wall time with the sum of the run times it saved:

* `duration_s`: each program's lifetime as the harness saw it (fork, exec,
  ld.so, the run, the report), so the rest is the harness's own cost;
* `wall_s`: the program's own timed section, for reference.

A line through the two points splits the harness's cost into a fixed
start-up (Python, imports, allocator look-up, build cache, machine facts,
statistics at the end) and a per-run part, given as a percentage of the run
times. Target: per-run overhead under 5 % and start-up under 1 s.

    /tmp/venv/bin/python bench/bench_harness.py [--scenario examples/loop.scn]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENC = [sys.executable, "-c", "import sys; from scenc.cli import main; sys.exit(main())"]


def one(scenario, allocators, runs, params, workdir):
    out = Path(workdir) / f"bench-{runs}.json"
    argv = [*SCENC, "run", str(scenario), "--allocators", allocators, "--runs", str(runs),
            "--warmup", "0", "-q", "-o", str(out), "--seed", "1"]
    for p in params:
        argv += ["--param", p]
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    total = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"scenc run failed ({done.returncode}):\n{done.stderr}")
    runs_saved = [json.loads(l) for l in out.read_text().splitlines()[1:]]
    return {
        "runs": len(runs_saved),
        "total_s": total,
        "lifetimes_s": sum(r["duration_s"] for r in runs_saved),
        "timed_s": sum(r["metrics"]["wall_s"] for r in runs_saved),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default=str(ROOT / "examples" / "loop.scn"))
    ap.add_argument("--allocators", default="glibc,jemalloc")
    ap.add_argument("--few", type=int, default=3, help="runs per allocator, first point")
    ap.add_argument("--many", type=int, default=15, help="runs per allocator, second point")
    ap.add_argument("--param", action="append", default=[])
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        # Once to fill the build cache, so neither point pays for gcc.
        one(args.scenario, args.allocators, 1, args.param, tmp)
        few = one(args.scenario, args.allocators, args.few, args.param, tmp)
        many = one(args.scenario, args.allocators, args.many, args.param, tmp)

    print(f"scenario {os.path.relpath(args.scenario)}, allocators {args.allocators}, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    print(f"{'runs':>5} {'scenc run':>10} {'lifetimes':>10} {'timed':>9} {'added':>8} {'added/run':>10}")
    for p in (few, many):
        added = p["total_s"] - p["lifetimes_s"]
        print(f"{p['runs']:>5} {p['total_s']:>9.3f}s {p['lifetimes_s']:>9.3f}s {p['timed_s']:>8.3f}s "
              f"{added:>7.3f}s {added / p['runs'] * 1000:>8.2f}ms")
    slope = (many["total_s"] - few["total_s"]) / (many["lifetimes_s"] - few["lifetimes_s"])
    per_run = slope - 1.0
    fixed = few["total_s"] - slope * few["lifetimes_s"]
    timed_share = many["timed_s"] / many["lifetimes_s"]
    print(f"per-run overhead: {per_run:+.1%} of the programs' lifetimes (target < 5%)")
    print(f"fixed start-up:   {fixed:.2f} s (target < 1 s)")
    print(f"for reference: the programs' own timed sections are {timed_share:.0%} of their lifetimes "
          f"(the rest is exec, ld.so, thread start and the report)")
    ok = per_run < 0.05 and fixed < 1.0
    print("target met" if ok else "target MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
