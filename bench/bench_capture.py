"""What a capture costs: the same programs run plain, under the preload tracer and under ltrace.

Two workloads, compiled here:
  loop   one thread: a pool of 256 blocks, each iteration frees one and mallocs
         another (sizes 16..1015), so 2 calls per iteration
  mt     tests/fixtures/trace/mt_handoff.c: THREADS threads in a ring handing
         blocks to the next one (malloc, calloc, realloc, 2 cross-thread frees
         per round), mutex and condition variable handoffs between calls

Methods: plain (no tracing), preload (runtime/tracer/tracer.c through
scenc.trace.capture.preload.capture_preload), ltrace -e and ltrace -L -x with the
options scenc.trace.capture.ltrace uses (-f -tt -T -o LOG, every allocation function).
Each method runs the workload with N iterations and with 0 iterations, in
interleaved rounds (a round runs every method once, in random order); times
are the wall clock of the process, medians over rounds.

Printed per method, for wall time and for CPU time (user + system of the
program, and of ltrace, which waits for it; the mt workload's wall time is
mostly scheduling and varies 2-5x between runs, its CPU time much less):
the median, the slowdown (traced / plain) and the cost per call in
microseconds -- ((traced(N) - traced(0)) - (plain(N) - plain(0))) / calls,
start-up (loading the tracer, ltrace attaching) taken out, calls being those
the tracer saw -- then the calls each capture saw, the log's size and bytes per
call, and how many captures were complete (ltrace 0.7.3 crashes threaded
programs, and sometimes hangs them: a crashed run is shown, its time is kept,
but no per-call cost is given when no run completed; a hung one is stopped
after 60 s). Larger loops, with 1 and 2 threads
(`loop-big`, `loop-big-2t`, preload only), give the tracer's per-call cost
with less noise; the mt workload's per-call figures mostly measure how the
tracer shifts the threads' handoffs (context switches), not the tracer.

    .venv/bin/python bench/bench_capture.py            # about 1 to 2 minutes
    .venv/bin/python bench/bench_capture.py --quick    # about 20 seconds
        [--iterations N] [--rounds N] [--threads N] [--json FILE]

Real programs, not shipped (mimalloc-bench's espresso and cfrac, built by the user), beside the tracer of
another git ref (`--before`, main by default; built here from that ref's runtime/, as bench_trace_size.py
does), in interleaved rounds (each round runs plain, before and after once each, shuffled; medians of
`--real-rounds`, 5):

    .venv/bin/python bench/bench_capture.py --real-only --espresso BUILD/espresso \
        --espresso-input mimalloc-bench/bench/espresso/largest.espresso --cfrac BUILD/cfrac

For each: the program's wall and CPU time plain; under each tracer the traced program's (LD_PRELOAD and
SCENC_TRACE_OUT, as `scenc capture` sets them) and the whole capture's (the traced program, then the
summary `scenc capture` prints, PreloadLog(log).info, in a fresh Python), as ratios to plain; the calls,
bytes per call, and the load average (1 min) around each method's runs. cfrac's argument is mimalloc-bench's
(`--cfrac-arg`). Issue 30's target: the capture at most 1.2x the program.
"""

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scenc.trace.capture.ltrace import DEFAULT_FUNCTIONS
from scenc.trace.ltrace import TraceFormatError, parse_file
from scenc.trace.capture.preload import capture_preload
from scenc.trace.tracerlog import parse_preload_log
from scenc.trace.native import tracer_library

ROOT = Path(__file__).resolve().parent.parent

# THREADS threads (1 by default) each running the pool loop on its own pool.
LOOP_C = r"""
#include <pthread.h>
#include <stdlib.h>
static long n;
static void *loop(void *arg) {
    (void)arg;
    void *pool[256] = {0};
    for (long i = 0; i < n; i++) {
        unsigned k = (unsigned)((unsigned long)i * 2654435761u) % 256;
        free(pool[k]);
        pool[k] = malloc(16 + (size_t)(i * 37) % 1000);
    }
    for (int k = 0; k < 256; k++) free(pool[k]);
    return NULL;
}
int main(int argc, char **argv) {
    n = argc > 1 ? atol(argv[1]) : 10000;
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    if (threads <= 1) return loop(NULL) != NULL;
    pthread_t t[64];
    for (int i = 0; i < threads && i < 64; i++) pthread_create(&t[i], NULL, loop, NULL);
    for (int i = 0; i < threads && i < 64; i++) pthread_join(t[i], NULL);
    return 0;
}
"""


def build(folder: Path) -> dict:
    (folder / "loop.c").write_text(LOOP_C)
    out = {}
    for name, src, flags in (("loop", folder / "loop.c", ["-pthread"]),
                             ("mt", ROOT / "tests" / "fixtures" / "trace" / "mt_handoff.c", ["-pthread"])):
        subprocess.run(["gcc", "-O2", "-fno-builtin", *flags, "-o", str(folder / name), str(src)], check=True)
        out[name] = str(folder / name)
    return out


def children_cpu() -> float:
    """CPU seconds (user + system) of every child this process has waited for: the bench's only children
    are the measured programs (and ltrace, which waits for its tracee)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_plain(argv) -> dict:
    cpu = children_cpu()
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL)
    return {"wall": time.perf_counter() - start, "cpu": children_cpu() - cpu, "calls": None, "bytes": 0,
            "complete": True}


def run_preload(argv, log: Path) -> dict:
    cpu = children_cpu()
    r = capture_preload(argv, log)
    return {"wall": r.wall_s, "cpu": children_cpu() - cpu, "calls": r.events,
            "bytes": log.stat().st_size if log.exists() else 0, "complete": r.ok}


LTRACE_TIMEOUT = 60


def run_ltrace(argv, log: Path, mode: str) -> dict:
    pattern = "+".join(DEFAULT_FUNCTIONS)
    cmd = ["ltrace", "-f", "-tt", "-T", *(["-L", "-x", pattern] if mode == "x" else ["-e", pattern]),
           "-o", str(log), "--", *argv]
    cpu = children_cpu()
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=LTRACE_TIMEOUT, start_new_session=True)
    except subprocess.TimeoutExpired:                  # a hung ltrace (and tracee): counted, incomplete
        return {"wall": time.perf_counter() - start, "cpu": children_cpu() - cpu, "calls": 0, "bytes": 0,
                "complete": False, "hung": True}
    wall, cpu = time.perf_counter() - start, children_cpu() - cpu
    calls, complete = 0, False
    try:
        events = parse_file(log)
        calls = sum(1 for _ in events)
        rep = events.report
        complete = proc.returncode == 0 and not rep.incomplete and rep.exit_status == 0
    except (OSError, TraceFormatError):
        pass
    return {"wall": wall, "cpu": cpu, "calls": calls, "bytes": log.stat().st_size if log.exists() else 0,
            "complete": complete}


def measure(workloads: dict, methods: list, rounds: int, tmp: Path) -> dict:
    """{(workload, method, 'N' or '0'): [run dicts]} over interleaved rounds."""
    runs: dict = {}
    jobs = [(w, m, size) for w in workloads for m in methods if m in workloads[w]["methods"] for size in ("N", "0")]
    for r in range(rounds):
        random.shuffle(jobs)
        for w, m, size in jobs:
            argv = workloads[w]["argv"] if size == "N" else workloads[w]["argv0"]
            log = tmp / f"{w}-{m}-{size}.log"
            if m == "plain":
                res = run_plain(argv)
            elif m == "preload":
                res = run_preload(argv, log)
            else:
                res = run_ltrace(argv, log, m[-1])
            runs.setdefault((w, m, size), []).append(res)
        print(f"  round {r + 1}/{rounds} done", file=sys.stderr)
    return runs


def summarise(workloads: dict, runs: dict) -> list:
    rows = []
    for w, spec in workloads.items():
        med = {(m, size, what): statistics.median(x[what] for x in runs[(w, m, size)])
               for m in spec["methods"] for size in ("N", "0") for what in ("wall", "cpu")}
        calls = max(x["calls"] for x in runs[(w, "preload", "N")])     # the tracer sees every call
        for m in spec["methods"]:
            n_runs = runs[(w, m, "N")]
            seen = max((x["calls"] or 0) for x in n_runs)
            row = {"workload": w, "method": m, "calls": calls, "calls_seen": seen if m != "plain" else None,
                   "log_bytes": max(x["bytes"] for x in n_runs),
                   "complete": f"{sum(x['complete'] for x in n_runs)}/{len(n_runs)}",
                   "hung": sum(x.get("hung", False) for x in n_runs)}
            for what in ("wall", "cpu"):
                row[f"{what}_ms"] = med[(m, "N", what)] * 1e3
                row[f"{what}_start_ms"] = med[(m, "0", what)] * 1e3
                row[f"{what}_slowdown"] = med[(m, "N", what)] / max(med[("plain", "N", what)], 1e-9)
                extra = ((med[(m, "N", what)] - med[(m, "0", what)])
                         - (med[("plain", "N", what)] - med[("plain", "0", what)]))
                # a capture that never completed stopped early: its time says nothing per call
                done = any(x["complete"] for x in n_runs)
                row[f"{what}_us_per_call"] = extra / calls * 1e6 if m != "plain" and done else None
            row["bytes_per_call"] = row["log_bytes"] / seen if seen and m != "plain" else None
            rows.append(row)
    return rows


def print_rows(rows: list, workloads: dict) -> None:
    def fmt(v, f):
        return "" if v is None else format(v, f)
    for w, spec in workloads.items():
        print(f"\n{w}: {spec['what']}")
        print(f"{'method':9} {'wall ms':>9} {'x':>7} {'us/call':>8} | {'cpu ms':>9} {'x':>7} {'us/call':>8} | "
              f"{'calls seen':>10} {'log':>10} {'B/call':>6} {'complete':>8}")
        for r in rows:
            if r["workload"] != w:
                continue
            size = f"{r['log_bytes'] / 1024:.0f} KiB" if r["log_bytes"] else ""
            print(f"{r['method']:9} {r['wall_ms']:9.1f} {r['wall_slowdown']:6.1f}x "
                  f"{fmt(r['wall_us_per_call'], '8.3f'):>8}"
                  f" | {r['cpu_ms']:9.1f} {r['cpu_slowdown']:6.1f}x {fmt(r['cpu_us_per_call'], '8.3f'):>8} | "
                  f"{fmt(r['calls_seen'], 'd'):>10} {size:>10} {fmt(r['bytes_per_call'], '6.1f'):>6} "
                  f"{r['complete'] if r['method'] != 'plain' else '':>8}"
                  + (f" ({r['hung']} hung, stopped after {LTRACE_TIMEOUT} s)" if r["hung"] else ""))


# --------------------------------------------------------------------------- real programs, before and after
CFRAC_ARG = "17545186520507317056371138836327483792789528"       # mimalloc-bench's (bench.sh)
SUMMARY = "import sys; from scenc.trace.tracerlog import PreloadLog; i = PreloadLog(sys.argv[1]).info; " \
          "print(i.records, i.missing)"


def _load() -> float:
    return os.getloadavg()[0]


def _timed(argv, env=None, cwd=None) -> tuple:
    """(wall s, CPU s) of one run; its output is dropped."""
    cpu, start = children_cpu(), time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start, children_cpu() - cpu


def run_traced(argv, lib: Path, log: Path, cwd) -> dict:
    """The program under a tracer library, then the capture's summary in a fresh Python, as scenc capture
    does them (LD_PRELOAD, SCENC_TRACE_OUT; PreloadLog(log).info)."""
    for old in log.parent.glob(log.name + "*"):
        old.unlink()
    load = _load()
    env = dict(os.environ, LD_PRELOAD=str(lib), SCENC_TRACE_OUT=str(log))
    wall, cpu = _timed(argv, env, cwd)
    s_wall, s_cpu = time.perf_counter(), children_cpu()
    out = subprocess.run([sys.executable, "-c", SUMMARY, str(log)], check=True, capture_output=True, text=True)
    s_wall, s_cpu = time.perf_counter() - s_wall, children_cpu() - s_cpu
    records, missing = map(int, out.stdout.split())
    size = log.stat().st_size
    for old in log.parent.glob(log.name + "*"):     # the logs take GBs
        old.unlink()
    return {"program": wall, "program_cpu": cpu, "capture": wall + s_wall, "capture_cpu": cpu + s_cpu,
            "calls": records, "missing": missing, "bytes": size, "load": load}


def run_real(programs: dict, libs: dict, rounds: int, tmp: Path) -> dict:
    runs: dict = {}
    for r in range(rounds):
        jobs = [(p, m) for p in programs for m in ["plain", *libs]]
        random.shuffle(jobs)
        for p, m in jobs:
            spec = programs[p]
            if m == "plain":
                load = _load()
                wall, cpu = _timed(spec["argv"], cwd=spec["cwd"])
                res = {"program": wall, "program_cpu": cpu, "capture": wall, "capture_cpu": cpu, "calls": None,
                       "missing": 0, "bytes": 0, "load": load}
            else:
                res = run_traced(spec["argv"], libs[m], tmp / f"{p}-{m}.trace", spec["cwd"])
            runs.setdefault((p, m), []).append(res)
        print(f"  round {r + 1}/{rounds} done (load {_load():.2f})", file=sys.stderr)
    return runs


def report_real(programs: dict, libs: dict, runs: dict, before: str) -> list:
    rows = []
    for p, spec in programs.items():
        med = {m: {k: statistics.median(x[k] for x in runs[(p, m)]) for k in
                   ("program", "program_cpu", "capture", "capture_cpu", "load")} for m in ["plain", *libs]}
        plain = med["plain"]
        print(f"\n{p}: {spec['what']}")
        print(f"{'tracer':18} {'program s':>9} {'x':>6} {'cpu x':>6} | {'capture s':>9} {'x':>6} {'cpu x':>6} | "
              f"{'calls':>10} {'log MB':>8} {'B/call':>6} {'load':>5}")
        for m in ["plain", *libs]:
            x = med[m]
            calls = max((r["calls"] or 0) for r in runs[(p, m)])
            size = max(r["bytes"] for r in runs[(p, m)])
            row = {"program": p, "tracer": m, **x, "calls": calls, "bytes": size,
                   "program_ratio": x["program"] / plain["program"], "capture_ratio": x["capture"] / plain["program"],
                   "program_cpu_ratio": x["program_cpu"] / plain["program_cpu"],
                   "capture_cpu_ratio": x["capture_cpu"] / plain["program_cpu"],
                   "missing": max(r["missing"] for r in runs[(p, m)])}
            rows.append(row)
            name = {"before": f"before ({before})", "after": "after (this tree)"}.get(m, m)
            tail = f"{calls:10d} {size / 1e6:8.1f} {size / calls:6.2f}" if calls else f"{'':10} {'':8} {'':6}"
            print(f"{name:18} {x['program']:9.2f} {row['program_ratio']:5.2f}x {row['program_cpu_ratio']:5.2f}x | "
                  f"{x['capture']:9.2f} {row['capture_ratio']:5.2f}x {row['capture_cpu_ratio']:5.2f}x | "
                  f"{tail} {x['load']:5.2f}")
    return rows


def real_programs(args, tmp: Path) -> list:
    from bench_trace_size import build_before       # bench/bench_trace_size.py, beside this file
    programs = {}
    if args.espresso:
        inp = Path(args.espresso_input or Path(args.espresso).with_name("largest.espresso")).resolve()
        programs["espresso"] = {"argv": [str(Path(args.espresso).resolve()), str(inp)], "cwd": None,
                                "what": f"mimalloc-bench's espresso {inp.name}"}
    if args.cfrac:
        programs["cfrac"] = {"argv": [str(Path(args.cfrac).resolve()), args.cfrac_arg], "cwd": None,
                             "what": f"mimalloc-bench's cfrac {args.cfrac_arg}"}
    if not programs:
        return []
    libs = {}
    before = build_before(args.before, tmp / "before")
    if before is not None:
        libs["before"] = before
    libs["after"] = tracer_library()
    rounds = args.real_rounds
    started, load = time.perf_counter(), _load()
    runs = run_real(programs, libs, rounds, tmp)
    print(f"\nbench_capture, real programs: {rounds} interleaved rounds in {time.perf_counter() - started:.0f} s; "
          f"medians; load average (1 min) {load:.2f} before, {_load():.2f} after, on {os.cpu_count()} CPUs; "
          f"'load' is the median at the start of that method's runs")
    print(f"program: the traced program alone; capture: it and the summary scenc capture prints (a fresh Python); "
          f"x: ratio to the plain program's wall (cpu x: CPU time)")
    return report_real(programs, libs, runs, args.before)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer iterations and rounds")
    ap.add_argument("--iterations", type=int, help="loop iterations (2 calls each) for every method")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--threads", type=int, default=4, help="threads of the mt workload")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--espresso", help="mimalloc-bench's espresso, built (not shipped)")
    ap.add_argument("--espresso-input", help="its input (default: largest.espresso beside it)")
    ap.add_argument("--cfrac", help="mimalloc-bench's cfrac, built (not shipped)")
    ap.add_argument("--cfrac-arg", default=CFRAC_ARG, help="its argument (default: mimalloc-bench's)")
    ap.add_argument("--before", default="main", help="git ref of the tracer beside this one (default main)")
    ap.add_argument("--real-rounds", type=int, default=5, help="rounds of the real programs (medians)")
    ap.add_argument("--real-only", action="store_true", help="only the real programs")
    args = ap.parse_args(argv)
    if shutil.which("gcc") is None:
        print("gcc is required", file=sys.stderr)
        return 2
    if args.real_only:
        tracer_library()
        with tempfile.TemporaryDirectory(prefix="bench-capture-") as d:
            rows = real_programs(args, Path(d))
        if args.json:
            Path(args.json).write_text(json.dumps({"real": rows}, indent=2))
        return 0
    iterations = args.iterations or (5000 if args.quick else 20000)
    rounds = args.rounds or (3 if args.quick else 5)
    mt_rounds = max(1, iterations // (5 * args.threads))
    big = 100 * iterations
    ltrace = ["ltrace-e", "ltrace-x"] if shutil.which("ltrace") else []
    tracer_library()                                   # built before timing
    with tempfile.TemporaryDirectory(prefix="bench-capture-") as d:
        tmp = Path(d)
        bins = build(tmp)
        workloads = {
            "loop": {"argv": [bins["loop"], str(iterations)], "argv0": [bins["loop"], "0"],
                     "calls": 2 * iterations + 256, "methods": ["plain", "preload", *ltrace],
                     "what": f"1 thread, {iterations} x (free + malloc)"},
            "mt": {"argv": [bins["mt"], str(args.threads), str(mt_rounds)],
                   "argv0": [bins["mt"], str(args.threads), "0"],
                   "calls": 5 * args.threads * mt_rounds + 5, "methods": ["plain", "preload", *ltrace],
                   "what": f"{args.threads} threads x {mt_rounds} rounds of malloc, calloc, realloc and 2 "
                           f"cross-thread frees (ltrace 0.7.3 crashes threaded programs: see 'complete')"},
            "loop-big": {"argv": [bins["loop"], str(big)], "argv0": [bins["loop"], "0"], "calls": 2 * big + 256,
                         "methods": ["plain", "preload"], "what": f"1 thread, {big} x (free + malloc), preload only"},
            "loop-big-2t": {"argv": [bins["loop"], str(big // 2), "2"], "argv0": [bins["loop"], "0", "2"],
                            "calls": big + 512, "methods": ["plain", "preload"],
                            "what": f"2 threads (this machine's cores), {big // 2} x (free + malloc) each, no "
                                    f"handoffs: what the shared sequence counter costs, preload only"},
        }
        started = time.perf_counter()
        runs = measure(workloads, ["plain", "preload", *ltrace], rounds, tmp)
        rows = summarise(workloads, runs)
        check = list(parse_preload_log(tmp / "loop-preload-N.log"))   # the last loop capture, read back
        print(f"bench_capture: {rounds} rounds in {time.perf_counter() - started:.0f} s; tracer "
              f"{tracer_library()}; the last 'loop' capture read back: {len(check)} events")
        print_rows(rows, workloads)
        real = real_programs(args, tmp)
    if args.json:
        Path(args.json).write_text(json.dumps({"iterations": iterations, "rounds": rounds, "rows": rows,
                                               "real": real}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
