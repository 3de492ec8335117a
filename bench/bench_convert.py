#!/usr/bin/env python3
"""Throughput and memory of `scenc convert` (ltrace parser + exact replay converter, scenc.trace.replay).

    .venv/bin/python bench/bench_convert.py                       # 1M- and 10M-line logs
    .venv/bin/python bench/bench_convert.py --short 200000 --long 2000000 --keep /tmp/tr

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
    events = parse_file(path)
    out = {}
    if parse_only:
        out["events"] = sum(1 for _ in events)
    else:
        with tempfile.TemporaryDirectory(prefix="scenc-bench-convert-", dir=os.path.dirname(path)) as d:
            report = write_replay(events, Path(d) / "bench.scn", os.path.basename(path))
            out.update(events=report.calls, slots=report.slots, threads=report.threads,
                       waits=report.cross_thread_waits, degraded=sum(report.degraded.values()),
                       ops_bytes=os.path.getsize(Path(d) / "bench.ops"))
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    lines = events.report.lines
    out.update(lines=lines, seconds=dt, lines_per_s=lines / dt, cpu_seconds=cpu, lines_per_cpu_s=lines / cpu,
               maxrss_kb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, rss_before_kb=rss0)
    return out


def _run(path: str, parse_only: bool = False) -> dict:
    argv = [sys.executable, os.path.abspath(__file__), "--measure", path] + (["--parse-only"] if parse_only else [])
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"measuring {path} failed:\n{proc.stderr}")
    return json.loads(proc.stdout)


def main(argv=None) -> int:
    logs = _trace_bench()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    logs.add_log_options(ap)
    ap.add_argument("--parse-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure, args.parse_only)))
        return 0

    results = {}
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
    ok = ratio <= TARGET_MEMORY_RATIO and slowest >= TARGET_LINES_PER_S
    print("targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
