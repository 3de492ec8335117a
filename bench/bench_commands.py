"""Harness overhead of `scenc run -- COMMAND` for real programs.

For each program, `scenc run --warmup 0` runs twice in a row, once with few
and once with many runs, timed from outside (the whole `scenc` process: start,
plan, launcher and proof builds (cached), every run, statistics, report).
The programs' own wall times come from the result file (the launcher's
wait4 figures). Also printed: the median gap between one run's end and the next one's start
in the long sessions (from the records' start times, to the millisecond): a
figure a busy neighbour disturbs only now and then, where the line's slope
takes every disturbance in. A straight line through the two points,

    scenc wall = start-up + (1 + per-run overhead) x sum of program wall times,

gives the per-run overhead (target: under 2%) and the fixed start-up
(target: under 1 s) for programs of 0.1 s or more. The same is done with CPU
time (scenc's own CPU: everything its process tree used minus the programs'
user+sys), which other load on the machine disturbs less.

    .venv/bin/python bench/bench_commands.py [--repeat 3] [--few 2] [--many 10] [--nice -10]

On a shared machine other processes' load lands between scenc's runs and
reads as overhead; `--nice N` (negative needs root) runs the timed sessions
at that priority, so the figures are closer to scenc's own cost.

Every figure is printed with the load average; the machine may be shared.
Python's bytecode cache is on for the timed `scenc` (in a temporary
PYTHONPYCACHEPREFIX, even where PYTHONDONTWRITEBYTECODE is set), as for a
user; without it every start compiles scenc's sources again (about 0.3 s).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from bench_harness import SCENC, environment   # bench/bench_harness.py, beside this file

ROOT = Path(__file__).resolve().parents[1]
ALLOCATORS = "glibc,jemalloc"
MAX_OVERHEAD = 0.02
MAX_STARTUP_S = 1.0


def _build_threaded(folder: Path) -> Path:
    out = folder / "threaded_alloc"
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(out), str(ROOT / "tests/fixtures/threaded_alloc.c")],
                   check=True)
    return out


def _calibrate(prog: Path, target_s: float) -> list:
    """Arguments that make the threaded program run about target_s under glibc."""
    iterations = 200_000
    for _ in range(6):
        t0 = time.perf_counter()
        subprocess.run([str(prog), "1", str(iterations), "8"], check=True, stdout=subprocess.DEVNULL)
        took = time.perf_counter() - t0
        if abs(took - target_s) < 0.2 * target_s:
            break
        iterations = max(10_000, int(iterations * target_s / max(took, 1e-3)))
    return [str(prog), "1", str(iterations), "8"]


def _sort_input(folder: Path, lines: int) -> Path:
    import random
    r = random.Random(1)
    path = folder / "sort-input.txt"
    path.write_text("".join(f"{r.random():.12f} {r.randrange(10**9)}\n" for _ in range(lines)))
    return path


def _session(command: list, runs: int, folder: Path) -> dict:
    out = folder / f"r-{time.monotonic_ns()}.json"
    env = environment(bytecode_dir=folder / "pycache")
    t0 = time.perf_counter()
    proc = subprocess.Popen([*SCENC, "run", "--allocators", ALLOCATORS, "--runs", str(runs), "--warmup", "0",
                             "-q", "-o", str(out), "--", *command], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, cwd=folder, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode()
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"scenc failed: {err}")
    runs_ = [json.loads(line) for line in out.read_text().splitlines()[1:]]
    starts = [datetime.fromisoformat(r["started"]).timestamp() for r in runs_]
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
            "gaps": [b - a - r["metrics"]["wall_s"] for a, b, r in zip(starts, starts[1:], runs_)],
            "prog_wall": sum(r["metrics"]["wall_s"] for r in runs_),
            "prog_cpu": sum(r["metrics"]["user_s"] + r["metrics"]["sys_s"] for r in runs_),
            "n": len(runs_)}


def _fit(few: dict, many: dict, key: str) -> tuple:
    """(per-run overhead as a fraction, fixed start-up in s, per-run cost in s) from two sessions."""
    d_scenc = many[key] - few[key]
    d_prog = many[f"prog_{key}"] - few[f"prog_{key}"]
    overhead = d_scenc / d_prog - 1
    startup = few[key] - few[f"prog_{key}"] * (1 + overhead)
    return overhead, startup, (d_scenc - d_prog) / (many["n"] - few["n"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="pairs of sessions per program (medians are printed)")
    ap.add_argument("--few", type=int, default=2, help="runs per allocator in the short session")
    ap.add_argument("--many", type=int, default=10, help="runs per allocator in the long session")
    ap.add_argument("--nice", type=int, default=0, help="run the timed sessions at this priority "
                    "(negative needs root; default: unchanged)")
    args = ap.parse_args(argv)
    if args.nice:
        os.nice(args.nice)  # this process and every scenc session it starts
    os.environ.setdefault("SCENC_CACHE", tempfile.mkdtemp(prefix="scenc-bench-cache-"))
    failed = False
    with tempfile.TemporaryDirectory(prefix="scenc-bench-commands-") as tmp:
        folder = Path(tmp)
        prog = _build_threaded(folder)
        programs = {"threaded_alloc ~0.1 s": _calibrate(prog, 0.1),
                    "threaded_alloc ~0.3 s": _calibrate(prog, 0.3),
                    "sort 300k lines": ["sort", "-S", "64M", str(_sort_input(folder, 300_000))]}
        _session(programs["sort 300k lines"], 1, folder)  # launcher and proof library built once, not timed
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; allocators {ALLOCATORS}; "
              f"sessions of {args.few} and {args.many} runs per allocator, --warmup 0, x{args.repeat}; "
              f"nice {os.nice(0)}")
        heads = ("mean run", "gap", "gap/run", "fit ovh", "fit/run", "start-up", "CPU/run", "CPU start")
        print(f"{'program':<22}" + "".join(f"{h:>10}" for h in heads) + "  verdict")
        for name, command in programs.items():
            fits = {"wall": [], "cpu": []}
            mean_run, gaps = [], []
            for _ in range(args.repeat):
                few, many = _session(command, args.few, folder), _session(command, args.many, folder)
                mean_run.append(many["prog_wall"] / many["n"])
                gaps += many["gaps"]
                for key in fits:
                    fits[key].append(_fit(few, many, key))
            med = {k: tuple(statistics.median(f[i] for f in v) for i in range(3)) for k, v in fits.items()}
            gap = statistics.median(gaps)
            ok = gap / statistics.median(mean_run) < MAX_OVERHEAD and med["wall"][1] < MAX_STARTUP_S
            failed |= not ok and statistics.median(mean_run) >= 0.1
            run = statistics.median(mean_run)
            cells = (f"{run * 1e3:.0f} ms", f"{gap * 1e3:.1f} ms", f"{gap / run:.2%}", f"{med['wall'][0]:.2%}",
                     f"{med['wall'][2] * 1e3:.1f} ms", f"{med['wall'][1]:.2f} s", f"{med['cpu'][2] * 1e3:.1f} ms",
                     f"{med['cpu'][1]:.2f} s")
            print(f"{name:<22}" + "".join(f"{c:>10}" for c in cells) + f"  {'PASS' if ok else 'FAIL'}")
        print(f"targets: per-run overhead (median gap / mean run) < {MAX_OVERHEAD:.0%}, "
              f"start-up < {MAX_STARTUP_S:g} s "
              f"(programs of 0.1 s or more); load average now {os.getloadavg()[0]:.2f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
