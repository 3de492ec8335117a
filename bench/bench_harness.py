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

    .venv/bin/python bench/bench_harness.py [--scenario examples/loop.scn] [--runs 15]

Before/after on a busy machine: `--against DIR` also runs the scenc found in
DIR (a directory holding a `scenc` package, e.g. a clone of an older commit
checked out into DIR/scenc), interleaved with this one, so both see the same
load. `--exec-count` runs one start-up under strace and counts the helper
programs it starts (ldconfig, dpkg-query, gcc ...). With PYTHONDONTWRITEBYTECODE
set, as in some CI shells, every start-up compiles scenc's modules anew;
`--bytecode` measures with a bytecode cache instead, as a normal install has.
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


def environment(tree=None, bytecode_dir=None):
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))
    if bytecode_dir:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(bytecode_dir)
    return env


def one(scenario, allocators, runs, params, workdir, warmup=0, env=None):
    out = Path(tempfile.mkdtemp(dir=workdir)) / "bench.json"
    argv = [*SCENC, "run", str(scenario), "--allocators", allocators, "--runs", str(runs),
            "--warmup", str(warmup), "-q", "-o", str(out), "--seed", "1"]
    for p in params:
        argv += ["--param", p]
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
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


def exec_count(scenario, allocators, params, workdir, env):
    """Programs one `scenc run --runs 1` starts, by name, without the scenario program itself."""
    import shutil
    if shutil.which("strace") is None:
        return None
    trace = Path(workdir) / "strace.txt"
    argv = ["strace", "-f", "-qq", "-e", "trace=execve", "-e", "signal=none", "-o", str(trace),
            *SCENC, "run", str(scenario), "--allocators", allocators, "--runs", "1", "--warmup", "0",
            "-q", "-o", str(Path(tempfile.mkdtemp(dir=workdir)) / "x.json")]
    for p in params:
        argv += ["--param", p]
    subprocess.run(argv, capture_output=True, text=True, env=env)
    counts = {}
    for line in trace.read_text().splitlines():
        if "execve(" in line and "= 0" in line.rsplit(")", 1)[-1]:
            name = os.path.basename(line.split('"', 2)[1])
            if name not in ("scenario", os.path.basename(sys.executable)) and not name.startswith("python"):
                counts[name] = counts.get(name, 0) + 1
    return counts


def summarize(label, points):
    per_run_s = min(p["per_run_s"] for p in points)
    fixed = min(p["fixed_s"] for p in points)
    lifetime = sum(p["lifetimes_s"] for p in points) / sum(p["runs"] for p in points)
    timed_share = sum(p["timed_s"] for p in points) / sum(p["lifetimes_s"] for p in points)
    per_run = per_run_s / lifetime
    print(f"{label}per-run overhead: {per_run_s * 1000:.2f} ms per run = {per_run:.1%} of a "
          f"{lifetime * 1000:.0f} ms program lifetime (target < 5%)")
    print(f"{label}fixed start-up:   {fixed:.2f} s (target < 1 s); every invocation: "
          + ", ".join(f"{p['fixed_s']:.2f}" for p in points))
    return per_run, fixed, timed_share


def table(points):
    print(f"{'runs':>5} {'scenc run':>10} {'run span':>9} {'lifetimes':>10} {'timed':>8} "
          f"{'per run':>8} {'start-up':>9}")
    for p in points:
        print(f"{p['runs']:>5} {p['total_s']:>9.3f}s {p['span_s']:>8.3f}s {p['lifetimes_s']:>9.3f}s "
              f"{p['timed_s']:>7.3f}s {p['per_run_s'] * 1000:>6.2f}ms {p['fixed_s']:>8.3f}s")


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
    ap.add_argument("--against", metavar="DIR",
                    help="also measure the scenc package in DIR/scenc (an older checkout), interleaved")
    ap.add_argument("--exec-count", action="store_true",
                    help="count the helper programs one start-up runs (needs strace)")
    ap.add_argument("--bytecode", action="store_true",
                    help="let Python cache bytecode (in a temporary directory) even if "
                         "PYTHONDONTWRITEBYTECODE is set")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        pyc = Path(tmp) / "pycache" if args.bytecode else None
        trees = [("", None)] + ([("before: ", Path(args.against).resolve())] if args.against else [])
        envs = {label: environment(tree, pyc and pyc / str(i)) for i, (label, tree) in enumerate(trees)}
        for label, _ in trees:  # fill the build cache (and the bytecode cache)
            one(args.scenario, args.allocators, 1, args.param, tmp, env=envs[label])
        points = {label: [] for label, _ in trees}
        for _ in range(args.repeats):
            for label, _ in trees:
                points[label].append(one(args.scenario, args.allocators, args.runs, args.param, tmp,
                                         args.warmup, env=envs[label]))
        counts = {label: exec_count(args.scenario, args.allocators, args.param, tmp, envs[label])
                  for label, _ in trees} if args.exec_count else {}

    print(f"scenario {os.path.relpath(args.scenario)}, allocators {args.allocators}, "
          f"{args.warmup} warm-up(s) each, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    if os.environ.get("PYTHONDONTWRITEBYTECODE") and not args.bytecode:
        print("note: PYTHONDONTWRITEBYTECODE is set: each start-up compiles scenc's modules "
              "(--bytecode measures with a bytecode cache)")
    results = {}
    for label, tree in trees:
        if label:
            print(f"{label}{tree}")
        table(points[label])
        results[label] = summarize(label, points[label])
        if label in counts:
            found = counts[label]
            print(f"{label}helper programs at start-up: " + (
                "strace not found" if found is None else
                (", ".join(f"{n} x{c}" for n, c in sorted(found.items())) or "none")))
    per_run, fixed, timed_share = results[""]
    print(f"for reference: the programs' own timed sections are {timed_share:.0%} of their "
          f"lifetimes (the rest is fork, exec, ld.so, thread start and the report)")
    ok = per_run < 0.05 and fixed < 1.0
    print("target met" if ok else "target MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
