"""How much time does `scenc run` add around the programs it measures?

Runs `scenc run` on a scenario (no warm-up, so every program run is in the
result file) and compares its wall time with the run times it saved:

* `duration_s`: each program's lifetime as the harness saw it (fork, exec,
  ld.so, the run, the report), so whatever is left is the harness's own cost;
* `wall_s`: the program's own timed section, for reference.

The harness's cost splits into
* a per-run part (spawning, saving with fsync, bookkeeping): the span from
  the first run's start to the last run's end, minus the lifetimes, per run,
  as a percentage of a program's lifetime;
* a fixed start-up (Python, imports, allocator look-up, build cache, machine
  facts, statistics and table at the end): the total minus that span (and
  minus the warm-up runs, estimated from the measured ones, with --warmup).

Each figure is the best of a few invocations, as the machine may be shared.
Target: per-run overhead under 5 % and start-up under 1 s.

    /tmp/venv/bin/python bench/bench_harness.py [--scenario examples/loop.scn] [--runs 15]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENC = [sys.executable, "-c", "import sys; from scenc.cli import main; sys.exit(main())"]


def one(scenario, allocators, runs, params, workdir, warmup=0):
    out = Path(tempfile.mkdtemp(dir=workdir)) / "bench.json"
    argv = [*SCENC, "run", str(scenario), "--allocators", allocators, "--runs", str(runs),
            "--warmup", str(warmup), "-q", "-o", str(out), "--seed", "1"]
    for p in params:
        argv += ["--param", p]
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    total = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"scenc run failed ({done.returncode}):\n{done.stderr}")
    runs_saved = [json.loads(line) for line in out.read_text().splitlines()[1:]]
    first = datetime.fromisoformat(runs_saved[0]["started"]).timestamp()
    last = runs_saved[-1]
    span = datetime.fromisoformat(last["started"]).timestamp() + last["duration_s"] - first
    lifetimes = sum(r["duration_s"] for r in runs_saved)
    # Successful warm-ups are not saved; count each as long as its allocator's mean run.
    by_allocator = {}
    for r in runs_saved:
        by_allocator.setdefault(r["allocator"], []).append(r["duration_s"])
    warmups = warmup * sum(sum(d) / len(d) for d in by_allocator.values())
    return {
        "runs": len(runs_saved),
        "total_s": total,
        "span_s": span,
        "lifetimes_s": lifetimes,
        "timed_s": sum(r["metrics"]["wall_s"] for r in runs_saved),
        "per_run_s": (span - lifetimes) / len(runs_saved),
        "warmups_s": warmups,
        "fixed_s": total - span - warmups,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default=str(ROOT / "examples" / "loop.scn"))
    ap.add_argument("--allocators", default="glibc,jemalloc")
    ap.add_argument("--runs", type=int, default=15, help="runs per allocator")
    ap.add_argument("--repeats", type=int, default=3, help="invocations; the best figure of each counts")
    ap.add_argument("--warmup", type=int, default=0,
                    help="warm-up runs per allocator (default 0: every run is saved, and the "
                         "statistics import cannot hide behind the warm-up: the worst case)")
    ap.add_argument("--param", action="append", default=[])
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        one(args.scenario, args.allocators, 1, args.param, tmp)  # fill the build cache
        points = [one(args.scenario, args.allocators, args.runs, args.param, tmp, args.warmup)
                  for _ in range(args.repeats)]

    print(f"scenario {os.path.relpath(args.scenario)}, allocators {args.allocators}, "
          f"{args.warmup} warm-up(s) each, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    print(f"{'runs':>5} {'scenc run':>10} {'run span':>9} {'lifetimes':>10} {'timed':>8} "
          f"{'per run':>8} {'start-up':>9}")
    for p in points:
        print(f"{p['runs']:>5} {p['total_s']:>9.3f}s {p['span_s']:>8.3f}s {p['lifetimes_s']:>9.3f}s "
              f"{p['timed_s']:>7.3f}s {p['per_run_s'] * 1000:>6.2f}ms {p['fixed_s']:>8.3f}s")
    per_run_s = min(p["per_run_s"] for p in points)
    fixed = min(p["fixed_s"] for p in points)
    lifetime = sum(p["lifetimes_s"] for p in points) / sum(p["runs"] for p in points)
    timed_share = sum(p["timed_s"] for p in points) / sum(p["lifetimes_s"] for p in points)
    per_run = per_run_s / lifetime
    print(f"per-run overhead: {per_run_s * 1000:.2f} ms per run = {per_run:.1%} of a "
          f"{lifetime * 1000:.0f} ms program lifetime (target < 5%)")
    print(f"fixed start-up:   {fixed:.2f} s (target < 1 s)")
    print(f"for reference: the programs' own timed sections are {timed_share:.0%} of their "
          f"lifetimes (the rest is fork, exec, ld.so, thread start and the report)")
    ok = per_run < 0.05 and fixed < 1.0
    print("target met" if ok else "target MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
