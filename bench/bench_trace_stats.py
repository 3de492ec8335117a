#!/usr/bin/env python3
"""Speed and memory of `scenc trace-stats` on a tracer log: the C pass (runtime/tools/tracestats.c) beside the
Python pass (profile.py over the Python reader's events, SCENC_TRACE_STATS=python), in one run.

    .venv/bin/python bench/bench_trace_stats.py --log cfrac.trace              # both passes, --json
    .venv/bin/python bench/bench_trace_stats.py --log cfrac.trace --c-only     # the C pass alone (a long log)
    .venv/bin/python bench/bench_trace_stats.py --program /tmp/cheap/mbench/cfrac 1000000000000000000001

--program PROG ARGS...: PROG captured first (`scenc capture --method preload`) into a temporary log.
Each pass runs `scenc trace-stats --json LOG` (then the text report, unless --json-only) in a child whose wall
time, CPU time (with its children: the C pass) and peak RSS are measured; the outputs of the two passes are
compared byte for byte (SAME / DIFFERENT). Prints the load (`uptime`) before and after. Target: >= 10,000,000
records/s (wall clock) by the C pass. Exit status 1 when the target is missed or the outputs differ.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from server_session import uptime

TARGET_RECORDS_PER_S = 10_000_000
SCENC = [sys.executable, "-m", "scenc.cli"]


def run_pass(log: Path, python: bool, text: bool) -> dict:
    """`scenc trace-stats [--json] LOG` by one pass, in a child: its output, wall and CPU time, peak RSS."""
    env = {**os.environ}
    env.pop("SCENC_TRACE_STATS", None)
    if python:
        env["SCENC_TRACE_STATS"] = "python"
    cmd = SCENC + ["trace-stats"] + ([] if text else ["--json"]) + [str(log)]
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)       # this child's own usage (its C pass included)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        return {"out": out.read(), "status": proc.returncode, "wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
                "rss_mb": usage.ru_maxrss / 1024}


def records(log: Path) -> int:
    import json
    out = subprocess.run(SCENC + ["trace-stats", "--json", str(log)], capture_output=True).stdout
    return json.loads(out)["preload"]["records"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log", type=Path, help="a tracer log")
    ap.add_argument("--program", nargs=argparse.REMAINDER, help="a program (and its arguments) to capture first")
    ap.add_argument("--c-only", action="store_true", help="the C pass alone")
    ap.add_argument("--json-only", action="store_true", help="--json only, not the text report too")
    args = ap.parse_args(argv)
    if not args.log and not args.program:
        ap.error("--log LOG or --program PROG ARGS...")
    print("load before:", uptime())
    with tempfile.TemporaryDirectory(prefix="scenc-bench-stats-") as tmp:
        log = args.log
        if args.program:
            log = Path(tmp) / "capture.trace"
            t0 = time.perf_counter()
            subprocess.run(SCENC + ["capture", "--method", "preload", "-o", str(log), "--", *args.program],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            print(f"capture: {time.perf_counter() - t0:.2f} s wall, {log.stat().st_size / 1e6:.1f} MB")
        n = records(log)
        print(f"log {log}: {n} records, {log.stat().st_size / 1e6:.1f} MB")
        ok = True
        for text in ([False] if args.json_only else [False, True]):
            what = "text" if text else "--json"
            passes = [("C", run_pass(log, False, text))]
            if not args.c_only:
                passes.append(("Python", run_pass(log, True, text)))
            for name, r in passes:
                print(f"  {what:<6} {name:<6} wall {r['wall']:8.2f} s  cpu {r['cpu']:8.2f} s  peak RSS "
                      f"{r['rss_mb']:7.1f} MB  {n / r['wall'] / 1e6:7.2f}M records/s (wall)  "
                      f"{n / r['cpu'] / 1e6:7.2f}M/s (cpu)  exit {r['status']}")
            c = passes[0][1]
            ok &= n / c["wall"] >= TARGET_RECORDS_PER_S
            if len(passes) == 2:
                py = passes[1][1]
                same = c["out"] == py["out"] and c["status"] == py["status"]
                ok &= same
                print(f"  {what:<6} outputs {'SAME' if same else 'DIFFERENT'}; C is {py['wall'] / c['wall']:.1f}x "
                      f"faster (wall), {py['cpu'] / c['cpu']:.1f}x (cpu)")
    print("load after: ", uptime())
    print(f"target >= {TARGET_RECORDS_PER_S / 1e6:.0f}M records/s by the C pass: {'met' if ok else 'MISSED or DIFFERENT'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
