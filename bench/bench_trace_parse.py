#!/usr/bin/env python3
"""Throughput and memory of the ltrace parser + trace statistics (scenc.trace).

    .venv/bin/python bench/bench_trace_parse.py                       # 1M- and 10M-line logs
    .venv/bin/python bench/bench_trace_parse.py --short 200000 --long 2000000 --keep /tmp/tr

Generates synthetic ltrace 0.7.3 logs (``ltrace -f -tt -T -e ... -o LOG`` style, calls padded to
a column as ltrace does): several threads, ``<unfinished ...>``/``<... resumed>`` pairs when threads
interleave, realloc chains, free(NULL), failed allocations, cross-thread frees,
libc.so.6-> mislabel lines, and a bounded number of live objects (so that a
longer log must not need more memory).  Each log is then parsed with
parse()+TraceStats in a fresh subprocess that reports wall time and peak RSS
(ru_maxrss).  Targets: >= 300,000 lines/s; peak RSS(long) <= 1.2 x RSS(short).
Exit status 1 when a target is missed.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

TARGET_LINES_PER_S = 300_000
TARGET_MEMORY_RATIO = 1.2
CALL_WIDTH = 26        # ltrace pads a call to a column: 'python3->free(0)           = <void> <0.000086>'


def generate(path: str, nlines: int, threads: int = 8, live_per_thread: int = 300, seed: int = 1) -> int:
    """Write a synthetic ltrace log of about ``nlines`` lines; returns the exact line count."""
    rng = random.Random(seed)
    rand = rng.random
    tids = [20000 + i for i in range(threads)]
    pools = {tid: [] for tid in tids}                 # live (ptr, size) per thread
    spare = {tid: [] for tid in tids}                 # freed addresses, reused like an allocator does
    top = {tid: 0x7f0000000000 + (i << 32) for i, tid in enumerate(tids)}
    pending = {}                                      # tid -> resume line body
    sizes = [16, 24, 32, 48, 64, 100, 128, 256, 512, 1000, 4096]
    us = 12 * 3600 * 10 ** 6                          # 12:00:00.000000
    out = []
    written = 0

    def stamp():
        s, u = divmod(us, 10 ** 6)
        h, s = divmod(s, 3600)
        m, s = divmod(s, 60)
        return f"{h:02d}:{m:02d}:{s:02d}.{u:06d}"

    def addr(tid):
        if spare[tid]:
            return spare[tid].pop()
        top[tid] += 0x40
        return top[tid]

    with open(path, "w") as f:
        while written < nlines - 2 * threads:
            us += rng.randint(20, 400)
            tid = tids[int(rand() * threads)]
            dur = f"<0.000{rng.randint(100, 999)}>"
            if tid in pending:
                out.append(f"{tid} {stamp()} <... {pending.pop(tid)} {dur}\n")
                written += 1
                continue
            pool = pools[tid]
            r = rand()
            if r < 0.02:                                    # libc's mislabelled PLT entries
                out.append(f"{tid} {stamp()} {f'libc.so.6->realloc(0x{addr(tid):x}, 6)':<{CALL_WIDTH}} = 0x6 {dur}\n")
                written += 1
                continue
            if r < 0.06:
                call, result, name = "free(0", "= <void>", "free resumed> )"
            elif len(pool) < live_per_thread * (0.5 + rand()):  # allocate
                size = sizes[int(rand() * len(sizes))] + int(rand() * 8)
                if r < 0.07:
                    call, result = f"malloc({1 << 62}", "= 0"
                    name = "malloc resumed> )"
                else:
                    p = addr(tid)
                    pool.append((p, size))
                    if r < 0.2:
                        call, name = f"calloc({size}, 4", "calloc resumed> )"
                    else:
                        call, name = f"malloc({size}", "malloc resumed> )"
                    result = f"= 0x{p:x}"
            elif r < 0.35:                                  # realloc: grows chains
                i = int(rand() * len(pool))
                p, size = pool[i]
                size = size * 2 if size < 1 << 16 else size
                q = p if rand() < 0.6 else addr(tid)
                if q != p:
                    spare[tid].append(p)
                pool[i] = (q, size)
                call, result, name = f"realloc(0x{p:x}, {size}", f"= 0x{q:x}", "realloc resumed> )"
            else:                                           # free, sometimes another thread's block
                owner = tids[int(rand() * threads)] if rand() < 0.1 else tid
                if owner in pending:                        # its newest block is not returned yet
                    owner = tid
                opool = pools[owner] or pool
                if not opool:
                    continue
                i = int(rand() * len(opool))
                p, _ = opool[i]
                opool[i] = opool[-1]
                opool.pop()
                spare[tid if opool is pool else owner].append(p)
                call, result, name = f"free(0x{p:x}", "= <void>", "free resumed> )"
            if rand() < 0.25:                               # another thread interrupts the call
                out.append(f"{tid} {stamp()} app->{call} <unfinished ...>\n")
                pending[tid] = f"{name:<24} {result}"
            else:
                out.append(f"{tid} {stamp()} {f'app->{call})':<{CALL_WIDTH}} {result} {dur}\n")
            written += 1
            if len(out) >= 20000:
                f.writelines(out)
                out.clear()
        for tid, body in list(pending.items()):
            us += 50
            out.append(f"{tid} {stamp()} <... {body} <0.000100>\n")
            written += 1
        for tid in tids:
            us += 50
            out.append(f"{tid} {stamp()} +++ exited (status 0) +++\n")
            written += 1
        f.writelines(out)
    return written


def measure(path: str) -> dict:
    """Parse + stats over ``path`` in this process; wall time and peak RSS."""
    from scenc.trace.profile import trace_stats_file
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0, c0 = time.perf_counter(), time.process_time()
    stats = trace_stats_file(path)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rep = stats.report
    return {"lines": rep.lines, "events": stats.ops, "seconds": dt, "lines_per_s": rep.lines / dt,
            "cpu_seconds": cpu, "lines_per_cpu_s": rep.lines / cpu,
            "maxrss_kb": rss, "rss_before_kb": rss0, "live_at_end": stats.live_objects,
            "peak_live_objects": stats.peak_objects, "anomalies": dict(rep.anomaly_counts)}


def add_log_options(ap: argparse.ArgumentParser) -> None:
    """The options of both log benchmarks (bench_convert.py too): log lengths, threads, where the logs go."""
    ap.add_argument("--short", type=int, default=1_000_000, help="lines of the short log")
    ap.add_argument("--long", type=int, default=10_000_000, help="lines of the long log")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--keep", metavar="DIR", help="write (and reuse) the logs in DIR instead of a temp dir")
    ap.add_argument("--measure", metavar="LOG", help=argparse.SUPPRESS)


@contextlib.contextmanager
def log_dir(keep: str | None, prefix: str) -> Iterator[str]:
    """--keep DIR, or a temporary directory removed afterwards."""
    if keep:
        os.makedirs(keep, exist_ok=True)
        yield keep
    else:
        with tempfile.TemporaryDirectory(prefix=prefix) as d:
            yield d


def synthetic_log(d: str, nlines: int, threads: int) -> str:
    """The path of a log of ``nlines`` in ``d``, generated (and the time it took printed) unless already there."""
    path = os.path.join(d, f"synthetic_{nlines}_{threads}t.log")
    if not os.path.exists(path):
        t0 = time.perf_counter()
        generate(path, nlines, threads=threads)
        print(f"generated {path} ({os.path.getsize(path) / 1e6:.0f} MB) in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_log_options(ap)
    args = ap.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return 0

    results = {}
    with log_dir(args.keep, "scenc-bench-trace-") as d:
        for label, n in (("short", args.short), ("long", args.long)):
            path = synthetic_log(d, n, args.threads)
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--measure", path],
                                  capture_output=True, text=True, check=True)
            r = results[label] = json.loads(proc.stdout)
            print(f"{label:>5}: {r['lines']:>10} lines {r['events']:>10} events  {r['seconds']:7.2f} s  "
                  f"{r['lines_per_s']:>9,.0f} lines/s (wall), {r['lines_per_cpu_s']:>9,.0f} lines/s (CPU)  "
                  f"peak RSS {r['maxrss_kb'] / 1024:6.1f} MB "
                  f"(at start {r['rss_before_kb'] / 1024:.1f} MB)  peak live objects {r['peak_live_objects']}",
                  flush=True)
    short, long_ = results["short"], results["long"]
    ratio = long_["maxrss_kb"] / short["maxrss_kb"]
    growth_s = short["maxrss_kb"] - short["rss_before_kb"]
    growth_l = long_["maxrss_kb"] - long_["rss_before_kb"]
    slowest = min(short["lines_per_s"], long_["lines_per_s"])
    slowest_cpu = min(short["lines_per_cpu_s"], long_["lines_per_cpu_s"])
    print(f"memory ratio long/short (peak RSS): {ratio:.3f}  (target <= {TARGET_MEMORY_RATIO}); "
          f"RSS growth during parsing: short {growth_s / 1024:.1f} MB, long {growth_l / 1024:.1f} MB")
    print(f"slowest throughput: {slowest:,.0f} lines/s wall clock, {slowest_cpu:,.0f} lines/s of CPU time "
          f"(target >= {TARGET_LINES_PER_S:,}, judged on wall clock; the CPU figure shows what a busy machine hides)")
    ok = ratio <= TARGET_MEMORY_RATIO and slowest >= TARGET_LINES_PER_S
    print("targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
