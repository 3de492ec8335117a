"""Harness cost of `scenc run -- COMMAND` per run, for a 10 ms and a 100 ms program, against their own wall time.

For each program (the threaded test program, tests/fixtures/threaded_alloc.c, calibrated to about 10 ms and
about 100 ms under glibc), `scenc run --allocators glibc,jemalloc --warmup 0` runs twice in a row, once with
few and once with many runs, timed from outside (the whole `scenc` process: start, plan, launcher and proof
builds (cached), every run, statistics, report). The programs' own wall times come from the result file (the
launcher's wait4 figures of each program). Printed per program, beside its mean run:

* `gap`: the median time from one run's end to the next run's start in the long sessions (the records'
  start times, to the millisecond, less the program's own wall time): what scenc adds between two runs,
  a figure a busy neighbour disturbs only now and then. The verdict's figure; issue 30's target: 1 ms;
* `fit/run`: the slope of a straight line through the two sessions,
      scenc wall = start-up + sum of program wall times + runs x per-run cost,
  which takes in every disturbance of the machine, and `start-up` its intercept;
* `CPU/run`: the same slope with CPU time (scenc's process tree minus the programs' user+sys), which other
  load disturbs less;
* `Py CPU/run`: the same slope with scenc's own process's CPU time (getrusage of itself: not the launcher's,
  not the programs') from its first run to its last, read in the process (Session.measure wrapped): what
  scenc's Python costs a run, with nothing of start-up (nor of the launcher's start, in both sessions) in it.

    .venv/bin/python bench/bench_commands.py [--repeat 3] [--few 2] [--many 10] [--nice -10] [--against DIR]

`--against DIR` runs another scenc beside this one, interleaved, in the same invocation: DIR holds a `scenc`
package (e.g. `git archive --prefix=scenc/ main | tar -x -C DIR`), put first on PYTHONPATH. On a shared
machine other processes' load lands between scenc's runs and reads as overhead; `--nice N` (negative needs
root) runs the timed sessions at that priority.

Every figure is printed with the load average; the machine may be shared. Python's bytecode cache is on for
the timed `scenc` (in a temporary PYTHONPYCACHEPREFIX, even where PYTHONDONTWRITEBYTECODE is set), as for a
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

from bench_harness import environment   # bench/bench_harness.py, beside this file

ROOT = Path(__file__).resolve().parents[1]
ALLOCATORS = "glibc,jemalloc"
MAX_PER_RUN_S = 0.001
TARGETS_S = (0.01, 0.1)
# `scenc` with Session.measure wrapped: scenc's own CPU time over its runs, written to $BENCH_MEASURE_CPU.
SCENC = [sys.executable, "-c", """
import os, resource, sys
from scenc import harness
from scenc.cli import main
measure = harness.Session.measure
def timed(self):
    before = resource.getrusage(resource.RUSAGE_SELF)
    try:
        return measure(self)
    finally:
        after = resource.getrusage(resource.RUSAGE_SELF)
        with open(os.environ["BENCH_MEASURE_CPU"], "w") as f:
            f.write(repr(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime))
harness.Session.measure = timed
sys.exit(main())
"""]


def _build_threaded(folder: Path) -> Path:
    out = folder / "threaded_alloc"
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(out), str(ROOT / "tests/fixtures/threaded_alloc.c")],
                   check=True)
    return out


def _calibrate(prog: Path, target_s: float) -> list:
    """Arguments that make the threaded program run about target_s under glibc (the median of 5 runs)."""
    iterations = 200_000
    for _ in range(8):
        took = []
        for _ in range(5):
            t0 = time.perf_counter()
            subprocess.run([str(prog), "1", str(iterations), "8"], check=True, stdout=subprocess.DEVNULL)
            took.append(time.perf_counter() - t0)
        took = statistics.median(took)
        if abs(took - target_s) < 0.2 * target_s:
            break
        iterations = max(1_000, int(iterations * target_s / max(took, 1e-4)))
    return [str(prog), "1", str(iterations), "8"]


def _session(command: list, runs: int, folder: Path, tree) -> dict:
    out = folder / f"r-{time.monotonic_ns()}.json"
    env = environment(tree=tree, bytecode_dir=folder / ("pycache-" + ("this" if tree is None else "other")))
    env["BENCH_MEASURE_CPU"] = str(out) + ".cpu"
    load = os.getloadavg()[0]
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
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "load": load,
            "gaps": [b - a - r["metrics"]["wall_s"] for a, b, r in zip(starts, starts[1:], runs_)],
            "prog_wall": sum(r["metrics"]["wall_s"] for r in runs_),
            "prog_cpu": sum(r["metrics"]["user_s"] + r["metrics"]["sys_s"] for r in runs_),
            "py_cpu": float(Path(env["BENCH_MEASURE_CPU"]).read_text()),
            "n": len(runs_)}


def _fit(few: dict, many: dict, key: str) -> tuple:
    """(per-run cost in s, fixed start-up in s) from two sessions: scenc = start-up + programs + n x cost."""
    per_run = ((many[key] - many[f"prog_{key}"]) - (few[key] - few[f"prog_{key}"])) / (many["n"] - few["n"])
    return per_run, few[key] - few[f"prog_{key}"] - few["n"] * per_run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="pairs of sessions per program and scenc (medians)")
    ap.add_argument("--few", type=int, default=2, help="runs per allocator in the short session")
    ap.add_argument("--many", type=int, default=10, help="runs per allocator in the long session")
    ap.add_argument("--nice", type=int, default=0, help="run the timed sessions at this priority "
                    "(negative needs root; default: unchanged)")
    ap.add_argument("--against", help="a folder holding another scenc package, run beside this one")
    args = ap.parse_args(argv)
    if args.nice:
        os.nice(args.nice)  # this process and every scenc session it starts
    os.environ.setdefault("SCENC_CACHE", tempfile.mkdtemp(prefix="scenc-bench-cache-"))
    trees = {"this": None, **({"against": Path(args.against).resolve()} if args.against else {})}
    failed = False
    with tempfile.TemporaryDirectory(prefix="scenc-bench-commands-") as tmp:
        folder = Path(tmp)
        prog = _build_threaded(folder)
        programs = {f"threaded_alloc ~{t * 1e3:.0f} ms": _calibrate(prog, t) for t in TARGETS_S}
        for tree in trees.values():                     # launcher and proof library built once, not timed
            _session(next(iter(programs.values())), 1, folder, tree)
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; allocators {ALLOCATORS}; "
              f"sessions of {args.few} and {args.many} runs per allocator, --warmup 0, x{args.repeat}, "
              f"interleaved; nice {os.nice(0)}" + (f"; against: {trees['against']}" if args.against else ""))
        heads = ("mean run", "gap", "gap/run", "fit/run", "start-up", "CPU/run", "Py CPU/run", "load")
        print(f"{'program':<24}{'scenc':<9}" + "".join(f"{h:>11}" for h in heads) + "  verdict")
        for name, command in programs.items():
            got = {t: {"fits": [], "cpu": [], "runs": [], "gaps": [], "load": [], "py": []} for t in trees}
            for _ in range(args.repeat):
                for t, tree in trees.items():           # interleaved: each scenc in turn
                    few, many = _session(command, args.few, folder, tree), _session(command, args.many, folder, tree)
                    g = got[t]
                    g["runs"].append(many["prog_wall"] / many["n"])
                    g["gaps"] += many["gaps"]
                    g["fits"].append(_fit(few, many, "wall"))
                    g["cpu"].append(_fit(few, many, "cpu"))
                    g["py"].append((many["py_cpu"] - few["py_cpu"]) / (many["n"] - few["n"]))
                    g["load"] += [few["load"], many["load"]]
            for t in trees:
                g = got[t]
                run = statistics.median(g["runs"])
                gap = statistics.median(g["gaps"])
                per_run = statistics.median(f[0] for f in g["fits"])
                startup = statistics.median(f[1] for f in g["fits"])
                cpu = statistics.median(f[0] for f in g["cpu"])
                ok = gap <= MAX_PER_RUN_S
                if t == "this":
                    failed |= not ok
                cells = (f"{run * 1e3:.1f} ms", f"{gap * 1e3:.2f} ms", f"{gap / run:.2%}", f"{per_run * 1e3:.2f} ms",
                         f"{startup:.2f} s", f"{cpu * 1e3:.2f} ms", f"{statistics.median(g['py']) * 1e3:.2f} ms",
                         f"{statistics.median(g['load']):.2f}")
                print(f"{name:<24}{t:<9}" + "".join(f"{c:>11}" for c in cells) + f"  {'PASS' if ok else 'FAIL'}")
        print(f"target: scenc's cost between two runs (the median gap) at most {MAX_PER_RUN_S * 1e3:g} ms; "
              f"load average now {os.getloadavg()[0]:.2f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
