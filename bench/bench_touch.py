"""Which `scenc convert --touch` mode ranks allocators as the real program does?

    .venv/bin/python bench/bench_touch.py [--runs 10] [--program prodcons] [--args "1 200000"]
                                          [--allocators glibc,tcmalloc,jemalloc,mimalloc]

Compiles bench/programs/PROGRAM.c, captures it once with the preload tracer
(under glibc), converts the capture with every touch mode (none, first, pages,
all) and once more with the default mode but without the thread lifetimes
(every thread alive from the start, as replays were before), then runs the real program and the four replays under each allocator,
interleaved and reshuffled every round. Prints, per program and metric (wall
and CPU time of the whole process), each allocator's mean with its 95% CI,
its ratio to glibc (Hodges-Lehmann, rank-test CI, * = significant), the fastest and slowest
allocator among the significant differences, and whether each replay names
the same fastest and slowest as the real program. Timings are noisy on a
loaded machine: `uptime` is printed with the figures.
"""

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scenc.allocators import registry as alloc_registry
from scenc.compiler.pipeline import build
from scenc.stats.rank import compare
from scenc.stats.summary import summarize
from scenc.trace.opsfile import TOUCH_MODES
from scenc.trace.capture.preload import capture_preload
from scenc.trace.tracerlog import parse_preload_log
from scenc.trace.opsfile import DEFAULT_TOUCH
from scenc.trace.replay import write_replay

ROOT = Path(__file__).resolve().parents[1]


def timed(argv, env) -> tuple:
    """(wall s, cpu s) of one run of argv."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True, timeout=600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def ranking(samples: dict, base: str) -> tuple:
    """(fastest, slowest) by mean, counting only allocators significantly different from the baseline."""
    means = {a: sum(v) / len(v) for a, v in samples.items()}
    sig = {a for a in samples if a == base or compare(samples[base], samples[a]).significant}
    order = sorted(sig, key=means.get)
    return (order[0], order[-1]) if len(order) > 1 else (None, None)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--program", default="prodcons", help="a program of bench/programs, or the path of a C file")
    ap.add_argument("--args", default="1 200000", help="the program's arguments, space-separated")
    ap.add_argument("--allocators", default="glibc,tcmalloc,jemalloc,mimalloc")
    args = ap.parse_args(argv)
    allocs = [a for name in args.allocators.split(",") for a in alloc_registry.resolve(name)]
    work = Path(tempfile.mkdtemp(prefix="bench-touch-"))
    source = Path(args.program) if args.program.endswith(".c") else ROOT / "bench" / "programs" / f"{args.program}.c"
    binary = work / source.stem
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(binary), str(source)], check=True)
    command = [str(binary), *args.args.split()]
    cap = capture_preload(command, work / "app.trace", stdout=subprocess.DEVNULL)
    if not cap.ok:
        sys.exit(f"capture failed: {cap.warnings}")
    subjects = {"real": command}
    for mode in TOUCH_MODES:
        scn = work / f"replay-{mode}.scn"
        write_replay(parse_preload_log(cap.path, extra_events=True), scn, "app.trace", touch=mode,
                     main_tid=cap.info.pid)
        subjects[f"touch={mode}"] = [str(build(scn).binary)]
    # The default touch, but every thread alive from the start (as replays were before thread lifetimes).
    scn = work / "replay-no-lifetimes.scn"
    write_replay(parse_preload_log(cap.path), scn, "app.trace", touch=DEFAULT_TOUCH)
    subjects["threads at once"] = [str(build(scn).binary)]
    results = {s: {a.name: ([], []) for a in allocs} for s in subjects}
    pairs = [(s, a) for s in subjects for a in allocs]
    for s, a in pairs:                       # warm-up: page cache, lazy binding
        timed(subjects[s], a.preload_env())
    for _ in range(args.runs):
        random.shuffle(pairs)
        for s, a in pairs:
            wall, cpu = timed(subjects[s], a.preload_env())
            results[s][a.name][0].append(wall * 1e3)
            results[s][a.name][1].append(cpu * 1e3)
    base = allocs[0].name
    print(f"{source.stem} {args.args}: {cap.events} calls captured; {args.runs} runs each; "
          f"load: {os.getloadavg()[0]:.1f}")
    real_rank = {}
    for metric, k in (("wall ms", 0), ("cpu ms", 1)):
        print(f"\n{metric:<16}" + "".join(f"{a.name:>26}" for a in allocs) + "   fastest / slowest   agrees")
        for s in subjects:
            samples = {a: v[k] for a, v in results[s].items()}
            cells = []
            for a in allocs:
                m = summarize(samples[a.name]).mean
                if a.name == base:
                    cells.append(f"{m:10.1f}{'':16}")
                else:
                    c = compare(samples[base], samples[a.name])
                    lo, hi = c.ci if c.ci else (float("nan"), float("nan"))
                    cells.append(f"{m:10.1f} {c.estimate:4.2f}x{'*' if c.significant else ' '}[{lo:.2f},{hi:.2f}]")
            rank = ranking(samples, base)
            if s == "real":
                real_rank[k] = rank
                agree = ""
            else:
                agree = "yes" if rank == real_rank[k] else "NO"
            print(f"{s:<16}" + "".join(f"{c:>26}" for c in cells) + f"   {rank[0]} / {rank[1]}   {agree}")
    print(json.dumps({"work": str(work)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
