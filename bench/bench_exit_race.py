"""Threads that allocate while the process exits, captured many times: is every call in the log or counted?

    .venv/bin/python bench/bench_exit_race.py            # 20 runs of each workload and tracer, about a minute
        [--runs N] [--before REF] [--threads N] [--no-pc]

Two workloads, each run --runs times under the preload tracer of this tree and of --before (main by default,
built from that ref's runtime/ as bench_trace_size.py does), interleaved:

  exit_race  tests/fixtures/trace/exit_race.c: THREADS threads in malloc/free loops, half of them ending, while
             main calls exit(); each counts the calls that returned in a file mapped shared
  pc         bench/programs/pc.py under /usr/bin/python3: CPython's join returns before its worker threads have
             ended, so their last frees race the interpreter's exit

Printed per workload and tracer: runs with calls missing by the tracer's counters (the capture reports them),
runs where a thread's returned calls are not all in the log and not counted (exit_race only: silently lost),
and the distribution of what the log holds: records and thread records (pc), records minus returned calls
summed over the workers (exit_race: 0 when no thread was inside a call at the end, more when ending threads'
teardown frees or the calls they were inside are recorded). The test
tests/trace/test_trace_preload.py::test_threads_allocating_while_the_process_exits_lose_no_call runs exit_race once.
"""

import argparse
import collections
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scenc.trace.native import tracer_library
from scenc.trace.tracerlog import PreloadLog

ROOT = Path(__file__).resolve().parent.parent
EXIT_RACE = ROOT / "tests" / "fixtures" / "trace" / "exit_race.c"
PC = ROOT / "bench" / "programs" / "pc.py"


def run_exit_race(binary: Path, lib: Path, tmp: Path, threads: int) -> dict:
    log, counts = tmp / "race.trace", tmp / "race.counts"
    env = dict(os.environ, LD_PRELOAD=str(lib), SCENC_TRACE_OUT=str(log))
    start = time.perf_counter()
    subprocess.run([str(binary), str(counts), str(threads), "2000"], env=env, check=True)
    wall = time.perf_counter() - start
    info = PreloadLog(log).info
    data = counts.read_bytes()
    extra = silent = 0
    for slot in range(threads):
        tid, returned = struct.unpack_from("<QQ", data, 16 * slot)
        recorded = sum(info.calls_by_thread.get(tid, {}).values())
        extra += recorded - returned
        silent += max(0, returned - recorded)
    _remove(log)
    return {"missing": info.missing, "ended": info.ended, "silent": silent > info.missing, "shape": extra,
            "wall": wall}


def run_pc(lib: Path, tmp: Path) -> dict:
    log = tmp / "pc.trace"
    env = dict(os.environ, LD_PRELOAD=str(lib), SCENC_TRACE_OUT=str(log))
    start = time.perf_counter()
    subprocess.run(["/usr/bin/python3", str(PC)], env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    info = PreloadLog(log).info
    _remove(log)
    return {"missing": info.missing, "ended": info.ended, "silent": False,
            "shape": (info.records, info.thread_records), "wall": wall}


def _remove(log: Path) -> None:
    for f in log.parent.glob(log.name + "*"):
        f.unlink()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--before", default="main", help="git ref of the tracer beside this one (default main)")
    ap.add_argument("--threads", type=int, default=8, help="exit_race's threads")
    ap.add_argument("--no-pc", action="store_true", help="skip bench/programs/pc.py")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_trace_size import build_before
    with tempfile.TemporaryDirectory(prefix="bench-exit-race-") as d:
        tmp = Path(d)
        binary = tmp / "exit_race"
        subprocess.run(["gcc", "-O2", "-pthread", "-o", str(binary), str(EXIT_RACE)], check=True)
        libs = {"after (this tree)": tracer_library()}
        before = build_before(args.before, tmp / "before")
        if before is not None:
            libs[f"before ({args.before})"] = before
        workloads = {"exit_race": lambda lib: run_exit_race(binary, lib, tmp, args.threads)}
        if not args.no_pc and shutil.which("python3") and Path("/usr/bin/python3").exists():
            workloads["pc"] = lambda lib: run_pc(lib, tmp)
        load = os.getloadavg()[0]
        runs = collections.defaultdict(list)
        jobs = [(w, name) for w in workloads for name in libs]
        for r in range(args.runs):
            random.shuffle(jobs)
            for w, name in jobs:
                runs[(w, name)].append(workloads[w](libs[name]))
        print(f"bench_exit_race: {args.runs} runs of each, interleaved; load average (1 min) {load:.2f} before, "
              f"{os.getloadavg()[0]:.2f} after, on {os.cpu_count()} CPUs")
        for w in workloads:
            what = ("records - returned calls, over the workers" if w == "exit_race"
                    else "(records, thread records)")
            print(f"\n{w}: {what}")
            print(f"{'tracer':20} {'runs':>4} {'missing':>7} {'silent':>6} {'no end':>6} {'median s':>8}  distribution")
            for name in libs:
                rs = runs[(w, name)]
                shapes = collections.Counter(x["shape"] for x in rs)
                dist = ", ".join(f"{k}: {n}" for k, n in sorted(shapes.items()))
                wall = sorted(x["wall"] for x in rs)[len(rs) // 2]
                print(f"{name:20} {len(rs):4d} {sum(x['missing'] > 0 for x in rs):7d} {sum(x['silent'] for x in rs):6d} "
                      f"{sum(not x['ended'] for x in rs):6d} {wall:8.3f}  {dist}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
