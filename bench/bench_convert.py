#!/usr/bin/env python3
"""Throughput and memory of `scenc convert` (ltrace parser + exact replay converter, runtime/tools/convert.c).

    .venv/bin/python bench/bench_convert.py                       # 1M- and 10M-line logs, a 50M-call tracer log
    .venv/bin/python bench/bench_convert.py --short 200000 --long 2000000 --keep /tmp/tr
    .venv/bin/python bench/bench_convert.py --preload-calls 50000000 --baseline /work/main/.venv/bin/scenc
    .venv/bin/python bench/bench_convert.py --model 5000000 [--baseline /work/main/.venv/bin/scenc]
    .venv/bin/python bench/bench_convert.py --model-log cfrac.trace [--baseline /work/main/.venv/bin/scenc]

--model CALLS: the same capture of alloc_heavy (one thread), about CALLS calls, converted by
`scenc convert --model --no-measure` (the fitted model, without its calibration and measurement runs,
which build and run the model) and by the exact `scenc convert` beside it, each in a child whose wall
time, CPU time and peak RSS are measured; with --baseline, the baseline's model too, and whether the two
models (the .scn and its histogram files) are identical. Target: >= 2,000,000 calls/s (wall clock).
--model-log LOG: the same on a capture of your own (e.g. mimalloc-bench's cfrac, captured with
`scenc capture -o cfrac.trace -- BUILD/cfrac 17545186520507317056371138836327483792789528`), or on its
first bytes (`head -c 105000000 cfrac.trace`: a log cut short converts, with exit status 4).

Tracer logs: bench/programs/alloc_heavy.c (one thread, allocation-heavy) is
captured with scenc's tracer until its log holds --preload-calls calls, then
`scenc convert` turns it into a replay in a subprocess whose wall time, CPU
time (with its children: the converter) and peak RSS are measured. With
--baseline, another checkout's `scenc` (e.g. one whose converter was Python)
converts the same log side by side, and the two ops files are compared byte
for byte. Target: >= 5,000,000 calls/s (wall clock) end to end.

ltrace logs:
The synthetic ltrace logs come from bench/bench_trace_parse.py's generator
(threads, unfinished/resumed pairs, realloc chains, cross-thread frees, a
bounded number of live objects). Each log is converted to a .scn + .ops in a
fresh subprocess that reports wall and CPU time and its peak RSS (ru_maxrss).
The short log is also parsed alone, to show how the time splits between the
parser and the converter. Targets: >= 300,000 lines/s (wall clock); peak
RSS(long) <= 1.2 x RSS(short): the conversion streams, its memory follows the
live objects, not the length of the trace. Exit status 1 when a target is
missed. The machine is shared: CPU-time throughput is printed beside wall
clock, since a busy neighbour slows the wall clock but not the CPU time.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_LINES_PER_S = 300_000
TARGET_CALLS_PER_S = 5_000_000
TARGET_MODEL_CALLS_PER_S = 2_000_000
CALLS_PER_ITERATION = 2.5          # alloc_heavy's allocator calls per iteration (measured: 249,699 per 100,000)
TARGET_MEMORY_RATIO = 1.2
HERE = Path(__file__).resolve().parent


def _trace_bench():
    """bench_trace_parse.py (its log generator and options), loaded from its file (bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location("bench_trace_parse", HERE / "bench_trace_parse.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(path: str, parse_only: bool) -> dict:
    """Parse (and convert) ``path`` in this process: times, peak RSS, what the replay holds."""
    from scenc.trace.ltrace import parse_file
    from scenc.trace.replay import write_replay
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0, c0 = time.perf_counter(), time.process_time()
    events = parse_file(path, extra_events=True, times=False)    # as `scenc convert` reads it
    out = {}
    if parse_only:
        out["events"] = sum(1 for _ in events)
    else:
        with tempfile.TemporaryDirectory(prefix="scenc-bench-convert-", dir=os.path.dirname(path)) as d:
            report = write_replay(events, Path(d) / "bench.scn", os.path.basename(path))
            out.update(events=report.calls, slots=report.slots, threads=report.threads,
                       waits=report.cross_thread_waits, degraded=sum(report.degraded.values()),
                       ops_bytes=os.path.getsize(Path(d) / "bench.ops"))
    dt = time.perf_counter() - t0
    children = resource.getrusage(resource.RUSAGE_CHILDREN)     # the converter runs in a child process
    cpu = time.process_time() - c0 + children.ru_utime + children.ru_stime
    lines = events.report.lines
    out.update(lines=lines, seconds=dt, lines_per_s=lines / dt, cpu_seconds=cpu, lines_per_cpu_s=lines / cpu,
               maxrss_kb=max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, children.ru_maxrss),
               rss_before_kb=rss0)
    return out


def _run(path: str, parse_only: bool = False) -> dict:
    argv = [sys.executable, os.path.abspath(__file__), "--measure", path] + (["--parse-only"] if parse_only else [])
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"measuring {path} failed:\n{proc.stderr}")
    return json.loads(proc.stdout)


# --------------------------------------------------------------------------- tracer logs
def tracer_log(d: str, calls: int) -> str:
    """A capture of alloc_heavy holding about ``calls`` calls (made unless already in ``d``)."""
    from scenc.trace.native import tracer_library
    iterations = int(calls / CALLS_PER_ITERATION) + 1
    path = os.path.join(d, f"alloc_heavy_{iterations}.trace")
    if os.path.exists(path):
        return path
    binary = os.path.join(d, "alloc_heavy")
    subprocess.run(["gcc", "-O2", "-o", binary, str(HERE / "programs" / "alloc_heavy.c")], check=True)
    env = dict(os.environ, LD_PRELOAD=str(tracer_library()), SCENC_TRACE_OUT=path + ".part")
    t0 = time.perf_counter()
    subprocess.run([binary, str(iterations)], env=env, check=True, stdout=subprocess.DEVNULL)
    os.replace(path + ".part", path)
    print(f"captured alloc_heavy {iterations} with the tracer: {os.path.getsize(path) / 1e9:.2f} GB in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    return path


def timed_convert(scenc: str, log: str, scn: str, model: bool = False) -> dict:
    """`scenc convert LOG -o SCN` (with model: `--model --no-measure`) in a child: wall time, and the CPU time
    and peak RSS of it and its children (RUSAGE_CHILDREN: call it in a fresh process, see _isolated)."""
    t0 = time.perf_counter()
    proc = subprocess.run([scenc, "convert", log, "-o", scn] + (["--model", "--no-measure"] if model else []),
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 4):       # 4: converted, the log was cut short (a prefix of a capture)
        raise SystemExit(f"{scenc} convert {log} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    if model:
        return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_kb": usage.ru_maxrss}
    calls = int(proc.stdout.split(" calls, ")[0].rsplit("(", 1)[1])
    return {"calls": calls, "wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_kb": usage.ru_maxrss,
            "ops": scn[:-4] + ".ops"}


def bench_tracer_log(args) -> bool:
    logs = _trace_bench()
    me = str(Path(sys.executable).with_name("scenc"))
    with logs.log_dir(args.keep, "scenc-bench-convert-") as d:
        log = tracer_log(d, args.preload_calls)
        rows = [("this checkout", me)] + ([("baseline", args.baseline)] if args.baseline else [])
        results = {}
        for label, scenc in rows:
            # one child measured at a time: RUSAGE_CHILDREN then holds it alone
            r = results[label] = _isolated(scenc, log, os.path.join(d, f"{label.split()[0]}.scn"))
            print(f"{label:>14}: {r['calls']:,} calls in {r['wall']:.1f} s wall, {r['cpu']:.1f} s CPU: "
                  f"{r['calls'] / r['wall']:,.0f} calls/s (wall), {r['calls'] / r['cpu']:,.0f} calls/s (CPU), "
                  f"peak RSS {r['rss_kb'] / 1024:.1f} MB, ops file {os.path.getsize(r['ops']) / 1e9:.2f} GB",
                  flush=True)
        mine = results["this checkout"]
        if args.baseline:
            base = results["baseline"]
            same = _same_file(mine["ops"], base["ops"])
            print(f"speed-up (wall) {base['wall'] / mine['wall']:.1f}x, (CPU) {base['cpu'] / mine['cpu']:.1f}x; "
                  f"ops files {'identical' if same else 'DIFFERENT'}")
        rate = mine["calls"] / mine["wall"]
        print(f"tracer log: {rate:,.0f} calls/s wall clock (target >= {TARGET_CALLS_PER_S:,}); load average "
              f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
        return rate >= TARGET_CALLS_PER_S


def bench_model(args) -> bool:
    """convert --model beside the exact convert, on one capture of alloc_heavy (see the module's docstring)."""
    logs = _trace_bench()
    me = str(Path(sys.executable).with_name("scenc"))
    with logs.log_dir(args.keep, "scenc-bench-convert-") as d:
        log = args.model_log or tracer_log(d, args.model)
        load = os.getloadavg()
        exact = _isolated(me, log, os.path.join(d, "exact.scn"))
        calls = exact["calls"]
        rows = [("model, this checkout", me)] + ([("model, baseline", args.baseline)] if args.baseline else [])
        results = {}
        for label, scenc in rows:
            os.makedirs(os.path.join(d, label.split()[-1]), exist_ok=True)
            out = os.path.join(d, label.split()[-1], "model.scn")       # one name: the models compare byte for byte
            results[label] = r = _isolated(scenc, log, out, model=True)
            r["scn"] = out
        print(f"capture: {log}, {calls:,} calls ({os.path.getsize(log) / 1e6:.0f} MB)")
        for label, r in [("exact convert", exact)] + list(results.items()):
            print(f"{label:>21}: {r['wall']:7.2f} s wall, {r['cpu']:7.2f} s CPU: {calls / r['wall']:>11,.0f} calls/s "
                  f"(wall), {calls / r['cpu']:>11,.0f} calls/s (CPU), peak RSS {r['rss_kb'] / 1024:6.1f} MB",
                  flush=True)
        mine = results["model, this checkout"]
        if args.baseline:
            base = results["model, baseline"]
            same = _same_models(mine["scn"], base["scn"])
            print(f"speed-up of convert --model over the baseline: {base['wall'] / mine['wall']:.2f}x wall, "
                  f"{base['cpu'] / mine['cpu']:.2f}x CPU; models {'identical' if same else 'DIFFERENT'}")
        rate = calls / mine["wall"]
        print(f"convert --model: {rate:,.0f} calls/s wall clock (target >= {TARGET_MODEL_CALLS_PER_S:,}), "
              f"{exact['wall'] / mine['wall'] * 100:.1f}% of the exact convert's speed; load average "
              f"{' '.join(f'{x:.1f}' for x in load)} before, {' '.join(f'{x:.1f}' for x in os.getloadavg())} "
              f"after, on {os.cpu_count()} CPUs")
        return rate >= TARGET_MODEL_CALLS_PER_S


def _same_models(a: str, b: str) -> bool:
    """Two models (of one name, in two folders) alike: the scenarios and their histogram files."""
    pa, pb = Path(a), Path(b)
    files_a = sorted(p.name for p in pa.parent.glob(pa.stem + "*"))
    files_b = sorted(p.name for p in pb.parent.glob(pb.stem + "*"))
    return files_a == files_b and all(_same_file(str(pa.parent / n), str(pb.parent / n)) for n in files_a)


def side_by_side(baseline: str, log: str, lines: int, d: str, rounds: int) -> None:
    """`scenc convert LOG` by this checkout and by `baseline`, alternating `rounds` times: the best wall and CPU
    time of each (a busy neighbour only ever adds time), their ratio, and whether the ops files are identical."""
    me = str(Path(sys.executable).with_name("scenc"))
    best = {"this checkout": [], "baseline": []}
    for _ in range(rounds):
        for label, scenc in (("this checkout", me), ("baseline", baseline)):
            best[label].append(_isolated(scenc, log, os.path.join(d, f"{label.split()[0]}.scn")))
    rows = {label: (min(r["wall"] for r in runs), min(r["cpu"] for r in runs)) for label, runs in best.items()}
    for label, (wall, cpu) in rows.items():
        print(f"  `scenc convert`, {label:>13}: best of {rounds}: {wall:6.2f} s wall, {cpu:6.2f} s CPU: "
              f"{lines / wall:>9,.0f} lines/s (wall), {lines / cpu:>9,.0f} lines/s (CPU)", flush=True)
    (mw, mc), (bw, bc) = rows["this checkout"], rows["baseline"]
    same = _same_file(best["this checkout"][-1]["ops"], best["baseline"][-1]["ops"])
    print(f"  speed-up over the baseline: {bw / mw:.2f}x wall, {bc / mc:.2f}x CPU; ops files "
          f"{'identical' if same else 'DIFFERENT'}; load average {os.getloadavg()[0]:.1f}", flush=True)


def _isolated(scenc: str, log: str, scn: str, model: bool = False) -> dict:
    """timed_convert in a fresh Python, so that its RUSAGE_CHILDREN holds that one conversion."""
    code = (f"import json, sys; sys.path.insert(0, {str(HERE)!r}); import bench_convert as b; "
            f"print(json.dumps(b.timed_convert({scenc!r}, {log!r}, {scn!r}, {model!r})))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(proc.stderr[-3000:])
    return json.loads(proc.stdout)


def _same_file(a: str, b: str) -> bool:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 24), fb.read(1 << 24)
            if x != y:
                return False
            if not x:
                return True


def main(argv=None) -> int:
    logs = _trace_bench()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    logs.add_log_options(ap)
    ap.add_argument("--parse-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--preload-calls", type=int, default=50_000_000,
                    help="calls of the tracer log case (0: skip it)")
    ap.add_argument("--baseline", metavar="SCENC",
                    help="another checkout's scenc, converting the same logs side by side (`scenc convert`)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="with --baseline: conversions of each ltrace log by each scenc, alternating (best kept)")
    ap.add_argument("--no-ltrace", action="store_true", help="only the tracer log case")
    ap.add_argument("--model", type=int, metavar="CALLS",
                    help="only `convert --model` (beside the exact convert) on a capture of about CALLS calls")
    ap.add_argument("--model-log", metavar="LOG",
                    help="as --model, on this tracer capture (e.g. cfrac's) instead of one of alloc_heavy")
    args = ap.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure, args.parse_only)))
        return 0
    if args.model or args.model_log:
        ok = bench_model(args)
        print("targets met" if ok else "TARGET MISSED")
        return 0 if ok else 1
    ok = True
    if args.preload_calls:
        ok = bench_tracer_log(args)
    if args.no_ltrace:
        print("targets met" if ok else "TARGET MISSED")
        return 0 if ok else 1

    from scenc.trace.native import converter_program
    converter_program()          # built (or found in the cache) before any timing: its compilation is not conversion
    results, paths = {}, {}
    with logs.log_dir(args.keep, "scenc-bench-convert-") as d:
        for label, n in (("short", args.short), ("long", args.long)):
            path = logs.synthetic_log(d, n, args.threads)
            if label == "short":
                p = _run(path, parse_only=True)
                print(f"parse alone ({label}): {p['lines_per_s']:>9,.0f} lines/s (wall), "
                      f"{p['lines_per_cpu_s']:>9,.0f} lines/s (CPU), peak RSS {p['maxrss_kb'] / 1024:.1f} MB",
                      flush=True)
                results["parse"] = p
            r = results[label] = _run(path)
            print(f"{label:>5}: {r['lines']:>10} lines {r['events']:>10} calls  {r['seconds']:7.2f} s  "
                  f"{r['lines_per_s']:>9,.0f} lines/s (wall), {r['lines_per_cpu_s']:>9,.0f} lines/s (CPU)  "
                  f"peak RSS {r['maxrss_kb'] / 1024:6.1f} MB (at start {r['rss_before_kb'] / 1024:.1f} MB)  "
                  f"{r['threads']} threads, {r['slots']} slots, {r['waits']} cross-thread waits, "
                  f"ops file {r['ops_bytes'] / 1e6:.0f} MB", flush=True)
            paths[label] = path
        if args.baseline:           # after the measurements above, which they must not disturb
            for label, path in paths.items():
                print(f"{label} log, side by side:", flush=True)
                side_by_side(args.baseline, path, results[label]["lines"], d, args.rounds)
    short, long_, parse = results["short"], results["long"], results["parse"]
    ratio = long_["maxrss_kb"] / short["maxrss_kb"]
    convert_cpu = short["cpu_seconds"] - parse["cpu_seconds"]
    print(f"CPU time of the short log: parser {parse['cpu_seconds']:.2f} s, converter {convert_cpu:.2f} s "
          f"({100 * convert_cpu / short['cpu_seconds']:.0f}% of the conversion)")
    print(f"memory ratio long/short (peak RSS): {ratio:.3f}  (target <= {TARGET_MEMORY_RATIO}); "
          f"slots (live objects at once, plus a few reusable per thread): short {short['slots']}, "
          f"long {long_['slots']}")
    slowest = min(short["lines_per_s"], long_["lines_per_s"])
    slowest_cpu = min(short["lines_per_cpu_s"], long_["lines_per_cpu_s"])
    print(f"slowest throughput: {slowest:,.0f} lines/s wall clock, {slowest_cpu:,.0f} lines/s of CPU time "
          f"(target >= {TARGET_LINES_PER_S:,}, judged on wall clock; the CPU figure shows what a busy machine hides; "
          f"load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    ok = ok and ratio <= TARGET_MEMORY_RATIO and slowest >= TARGET_LINES_PER_S
    print("targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
