#!/usr/bin/env python3
"""Ops file size and replay speed: this scenc's ops file (version 5) against another scenc's, same capture.

    .venv/bin/python bench/bench_ops.py --baseline /tmp/before/scenc              # alloc_heavy, ~20M calls
    .venv/bin/python bench/bench_ops.py --baseline /tmp/before/scenc --trace app.trace --runs 7 --keep /tmp/ops
    .venv/bin/python bench/bench_ops.py --program thread_churn --args "200 3000"   # this scenc alone

A preload capture (given, or made of bench/programs/PROGRAM.c with `scenc capture --method preload`) is
converted (`scenc convert --touch none --no-measure`) by this checkout and, with `--baseline DIR` (a checkout
of an older scenc, e.g. `git archive <commit>` unpacked into a folder named scenc), by that one. Both replays
are built (each scenc builds its own) and run under glibc in interleaved pairs, in random order within a pair,
so drift in the machine's load hits both alike. Printed: ops bytes per op of each file, the replays' median
CPU time (user + sys: a busy neighbour slows the wall clock, not that) (the program's own getrusage: whole
process, loading included) and wall time, their ratio, and each replay's peak RSS. Targets: at most 8 bytes per op; this replay's median CPU time at most 1.05x the
baseline's. Exit status 1 when one is missed. `--keep DIR` keeps (and reuses) the capture and conversions.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET_BYTES_PER_OP = 8
TARGET_CPU_RATIO = 1.05

_SCENC = "import sys; from scenc.cli import main; sys.exit(main(sys.argv[1:]))"
_BUILD = "import sys; from scenc.compiler import pipeline; print(pipeline.build(sys.argv[1]).binary)"


def _python(code: str, args, checkout: Path | None, cache: Path, stream: str = "stdout") -> str:
    """Run `code` with this scenc, or the one at `checkout`, and its own build cache; what it wrote to `stream`."""
    env = dict(os.environ, SCENC_CACHE=str(cache))
    if checkout:
        env["PYTHONPATH"] = str(checkout.resolve().parent)
    proc = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, args))} failed:\n{proc.stdout}{proc.stderr}")
    return getattr(proc, stream)


def capture(work: Path, program: str, args: list) -> Path:
    trace = work / f"{program}.trace"
    if trace.exists():
        return trace
    binary = work / program
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(binary), str(HERE / "programs" / f"{program}.c")], check=True)
    print(_python(_SCENC, ["capture", "-o", trace, "--", binary, *args], None, work / "cache", stream="stderr"),
          end="", flush=True)   # the summary: scenc capture writes it to stderr
    return trace


def convert(trace: Path, scn: Path, checkout: Path | None, cache: Path) -> float:
    """CPU seconds the conversion took (0 when an earlier one is kept)."""
    if scn.exists() and scn.with_suffix(".ops").exists():
        return 0.0
    scn.parent.mkdir(parents=True, exist_ok=True)
    before = os.times()
    _python(_SCENC, ["convert", trace, "-o", scn, "--touch", "none", "--no-measure"], checkout, cache)
    after = os.times()
    return after.children_user + after.children_system - before.children_user - before.children_system


def ops_count(ops: Path) -> int:
    """The header's op count (u64 at byte 24 in versions 3 and 4)."""
    with open(ops, "rb") as f:
        head = f.read(32)
    return int.from_bytes(head[24:32], "little")


def run_once(binary: str) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.Popen([binary], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{binary} failed ({proc.returncode}):\n{err.decode(errors='replace')}")
    report = json.loads(out)
    return {"wall": wall, "cpu": report["rusage"]["user_s"] + report["rusage"]["sys_s"],
            "peak_rss_kib": report["memory"]["peak_rss_kib"], "calls": sum(
                sum(t["ops"].values()) for t in report["threads"])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, metavar="DIR", help="a checkout of the scenc to compare with")
    ap.add_argument("--trace", type=Path, help="a preload capture to use (default: capture PROGRAM)")
    ap.add_argument("--program", default="alloc_heavy", help="bench/programs/PROGRAM.c (default alloc_heavy)")
    ap.add_argument("--args", default="8000000", help="its arguments (default 8000000: about 20M calls)")
    ap.add_argument("--runs", type=int, default=5, help="pairs of replay runs (default 5)")
    ap.add_argument("--keep", type=Path, metavar="DIR", help="keep (and reuse) capture and conversions here")
    args = ap.parse_args(argv)

    work = args.keep or Path(tempfile.mkdtemp(prefix="scenc-bench-ops-"))
    work.mkdir(parents=True, exist_ok=True)
    trace = args.trace or capture(work, args.program, args.args.split())
    sides = {"this": None}
    if args.baseline:
        sides["baseline"] = args.baseline
    binaries, sizes = {}, {}
    for name, checkout in sides.items():
        scn = work / name / "replay.scn"
        cpu = convert(trace, scn, checkout, work / f"cache-{name}")
        ops = scn.with_suffix(".ops")
        n = ops_count(ops)
        sizes[name] = (ops.stat().st_size, n)
        binaries[name] = _python(_BUILD, [scn], checkout, work / f"cache-{name}").strip().splitlines()[-1]
        print(f"{name:>8}: ops file {ops.stat().st_size / 1e6:9.1f} MB, {n:,} ops, "
              f"{ops.stat().st_size / max(n, 1):5.2f} bytes/op" + (f"  (converted in {cpu:.1f} s CPU)" if cpu else ""),
              flush=True)

    runs = {name: [] for name in sides}
    for _ in range(args.runs):
        order = list(sides)
        random.shuffle(order)
        for name in order:
            runs[name].append(run_once(binaries[name]))
    for name, rs in runs.items():
        print(f"{name:>8}: replay CPU {statistics.median(r['cpu'] for r in rs):.3f} s (median of {len(rs)}; "
              f"min {min(r['cpu'] for r in rs):.3f}), wall {statistics.median(r['wall'] for r in rs):.3f} s, "
              f"peak RSS {max(r['peak_rss_kib'] for r in rs) / 1024:.1f} MiB, {rs[0]['calls']:,} calls", flush=True)
    this_bytes = sizes["this"][0] / max(sizes["this"][1], 1)
    ok = this_bytes <= TARGET_BYTES_PER_OP
    if args.baseline:
        if runs["this"][0]["calls"] != runs["baseline"][0]["calls"]:
            print("DIFFERENT: the two replays made different numbers of calls")
            ok = False
        cpu = {name: statistics.median(r["cpu"] for r in rs) for name, rs in runs.items()}
        ratio = cpu["this"] / cpu["baseline"]
        ok = ok and ratio <= TARGET_CPU_RATIO
        print(f"ratios this/baseline: ops file {sizes['this'][0] / sizes['baseline'][0]:.3f}, "
              f"replay CPU {ratio:.3f} (target <= {TARGET_CPU_RATIO})")
    print(f"bytes/op {this_bytes:.2f} (target <= {TARGET_BYTES_PER_OP}); load average now "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print("targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
