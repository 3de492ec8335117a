"""What a preload capture costs on big programs: log size and time, another version's tracer beside this one.

Two programs, compiled here from bench/programs:
  alloc_heavy   one thread, about 2.45 calls per iteration (default 21M iterations: about 51M calls)
  thread_churn  200 threads one after another, two alive at a time (default 15000 objects each)

Methods, in interleaved rounds (each round runs every method once, in random order), medians:
  plain    the program alone
  before   the tracer of git ref --before (runtime/tracer.c and the headers beside it, built here with
           the same flags), then the capture's summary of its log in a fresh Python
           (scenc.trace.tracerlog.PreloadLog(log).info). main by default: this tree beside main's. The
           version 2 tracer, whose 64-byte records this bench was made to replace, is --before 0d7f898~1
           (`scenc capture` of that version made the summary in one Python pass over every record)
  after    `scenc capture --method preload` of this tree, as a user runs it: the traced program, then the
           summary it prints (chunk headers and censuses, read in C)
Printed per program and method: the program's wall time under the tracer, the whole capture's wall and
CPU time (program + summary), each as a ratio to plain, the calls, the log's size and bytes per call;
the machine's load (uptime) before and after. The issue's targets: at most 8 bytes per call, and the
whole capture at most 1.5x the plain program on the single-threaded one.

    .venv/bin/python bench/bench_trace_size.py                  # about 10 minutes (the 'before' logs: GBs)
    .venv/bin/python bench/bench_trace_size.py --quick          # 5M iterations, 2 rounds: about 2 minutes
        [--iterations N] [--objects N] [--rounds N] [--before REF] [--json FILE]
"""

import argparse
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scenc.trace.native import TRACER_FLAGS, tracelog_library, tracer_library

ROOT = Path(__file__).resolve().parent.parent
SCENC = str(Path(sys.executable).with_name("scenc"))
SUMMARY = "import sys; from scenc.trace.tracerlog import PreloadLog; print(PreloadLog(sys.argv[1]).info.records)"


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed(argv, env=None, stream: str = "stdout") -> tuple:
    """(wall s, CPU s, what it wrote to `stream`) of one run."""
    cpu, start = children_cpu(), time.perf_counter()
    out = subprocess.run(argv, env=env, check=True, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    return time.perf_counter() - start, children_cpu() - cpu, getattr(out, stream)


def build_before(ref: str, folder: Path):
    """The tracer of a git ref, built from that ref's runtime/ (the tracer was runtime/tracer.c with its
    parts beside it before the runtime/tracer/ folder; the parts it includes have changed over time); None
    when git cannot give it."""
    folder.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "runtime"], capture_output=True)
    if archive.returncode:
        print(f"no 'before': git archive {ref} runtime failed: {archive.stderr.decode().strip()}", file=sys.stderr)
        return None
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    source = next(p for p in (folder / "runtime" / "tracer" / "tracer.c", folder / "runtime" / "tracer.c")
                  if p.exists())
    lib = folder / "libscntrace.so"
    subprocess.run(["gcc", *TRACER_FLAGS, "-o", str(lib), str(source), "-ldl"], check=True)
    return lib


def run_before(argv, lib: Path, log: Path) -> dict:
    env = dict(os.environ, LD_PRELOAD=str(lib), SCENC_TRACE_OUT=str(log))
    wall, cpu, _ = timed(argv, env)
    s_wall, s_cpu, out = timed([sys.executable, "-c", SUMMARY, str(log)])
    return {"program": wall, "wall": wall + s_wall, "cpu": cpu + s_cpu, "calls": int(out), "bytes": log.stat().st_size}


def run_after(argv, log: Path) -> dict:
    wall, cpu, out = timed([SCENC, "capture", "-o", str(log), "--method", "preload", "--", *argv], stream="stderr")
    m = re.search(r": (\d+) allocator calls .* in ([0-9.]+) s;", out)
    return {"program": float(m.group(2)), "wall": wall, "cpu": cpu, "calls": int(m.group(1)),
            "bytes": log.stat().st_size}


def run_plain(argv) -> dict:
    wall, cpu, _ = timed(argv)
    return {"program": wall, "wall": wall, "cpu": cpu, "calls": None, "bytes": 0}


def measure(programs: dict, lib_before, rounds: int, tmp: Path) -> dict:
    runs = {}
    methods = ["plain", "after"] + (["before"] if lib_before else [])
    for r in range(rounds):
        jobs = [(p, m) for p in programs for m in methods]
        random.shuffle(jobs)
        for p, m in jobs:
            log = tmp / f"{p}-{m}.trace"
            for old in tmp.glob(log.name + "*"):
                old.unlink()
            argv = programs[p]["argv"]
            res = run_plain(argv) if m == "plain" else run_after(argv, log) if m == "after" else \
                run_before(argv, lib_before, log)
            runs.setdefault((p, m), []).append(res)
            for old in tmp.glob(log.name + "*"):    # the before logs take GBs
                old.unlink()
        print(f"  round {r + 1}/{rounds} done", file=sys.stderr)
    return runs


def load() -> str:
    return Path("/proc/loadavg").read_text().split(" ")[0] if Path("/proc/loadavg").exists() else "?"


def report(programs: dict, runs: dict) -> list:
    rows = []
    for p, spec in programs.items():
        plain = {k: statistics.median(x[k] for x in runs[(p, "plain")]) for k in ("wall", "cpu")}
        print(f"\n{p}: {spec['what']}")
        print(f"{'method':7} {'program s':>9} {'x':>6} | {'capture s':>9} {'x':>6} | {'cpu s':>7} {'x':>6} | "
              f"{'calls':>10} {'log MB':>9} {'B/call':>7}")
        for m in ("plain", "before", "after"):
            if (p, m) not in runs:
                continue
            med = {k: statistics.median(x[k] for x in runs[(p, m)]) for k in ("program", "wall", "cpu")}
            calls = max((x["calls"] or 0) for x in runs[(p, m)])
            size = max(x["bytes"] for x in runs[(p, m)])
            row = {"program": p, "method": m, **med, "calls": calls, "bytes": size,
                   "program_ratio": med["program"] / plain["wall"], "capture_ratio": med["wall"] / plain["wall"],
                   "cpu_ratio": med["cpu"] / plain["cpu"], "bytes_per_call": size / calls if calls else None}
            rows.append(row)
            print(f"{m:7} {med['program']:9.2f} {row['program_ratio']:5.2f}x | {med['wall']:9.2f} "
                  f"{row['capture_ratio']:5.2f}x | {med['cpu']:7.2f} {row['cpu_ratio']:5.2f}x | "
                  + (f"{calls:10d} {size / 1e6:9.1f} {row['bytes_per_call']:7.2f}" if calls else ""))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="5M iterations, 3000 objects, 2 rounds")
    ap.add_argument("--iterations", type=int, help="alloc_heavy iterations (about 2.45 calls each)")
    ap.add_argument("--objects", type=int, help="thread_churn objects per thread")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--before", default="main", help="git ref of the tracer to compare with (default main; the version 2 tracer: 0d7f898~1)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    if shutil.which("gcc") is None:
        print("gcc is required", file=sys.stderr)
        return 2
    iterations = args.iterations or (5_000_000 if args.quick else 21_000_000)
    objects = args.objects or (3000 if args.quick else 15000)
    rounds = args.rounds or (2 if args.quick else 3)
    tracer_library()
    tracelog_library()                                 # both built before timing
    with tempfile.TemporaryDirectory(prefix="bench-trace-size-") as d:
        tmp = Path(d)
        bins = {}
        for name, flags in (("alloc_heavy", []), ("thread_churn", ["-pthread"])):
            bins[name] = str(tmp / name)
            subprocess.run(["gcc", "-O2", *flags, "-o", bins[name], str(ROOT / "bench" / "programs" / f"{name}.c")],
                           check=True)
        programs = {
            "alloc_heavy": {"argv": [bins["alloc_heavy"], str(iterations)],
                            "what": f"1 thread, {iterations} iterations of pools of short, medium and long-lived "
                                    f"blocks"},
            "thread_churn": {"argv": [bins["thread_churn"], "200", str(objects)],
                             "what": f"200 threads one after another, {objects} objects each"},
        }
        lib_before = build_before(args.before, tmp / "before")
        before_load, started = load(), time.perf_counter()
        runs = measure(programs, lib_before, rounds, tmp)
        print(f"bench_trace_size: {rounds} rounds in {time.perf_counter() - started:.0f} s; load average "
              f"(1 min) {before_load} before, {load()} after, on {os.cpu_count()} CPUs")
    rows = report(programs, runs)
    if args.json:
        Path(args.json).write_text(json.dumps({"iterations": iterations, "objects": objects, "rounds": rounds,
                                               "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
