"""What a `measure` region costs per entry, and what it does to a server scenario.

Issue 28: a region read the thread's CPU clock (a system call) on entry and
exit, so a `measure` per request made a server scenario 5-20x slower under
`scenc run`. Regions now read the TSC (CLOCK_MONOTONIC where the kernel does
not trust it) and the `time` probe reads the CPU clock only around long
entries (probes/probe_time.h). This bench prices an entry, in one run:

* cost per entry: one thread allocates and frees a 64-byte block N times,
  with and without `measure "r" { ... }` around each pair, built with the
  probes `scenc run` uses by default (time+memory) against this checkout's
  runtime ("now") and against the runtime of `--before REV` ("before": the
  same generated C, the old headers); the cost is the difference of the
  thread's CPU time over N. Beside them the hand-written C loop
  (bench/handwritten/measure.c) with nothing timed, an `rdtsc` pair and a
  clock_gettime(CLOCK_MONOTONIC) pair around each iteration.
* the server: bench/scenarios/server.scn and server-measure.scn (4 workers x
  20,000 requests, five allocator calls a request, the second with a
  `measure` per request), time+memory, invoked alternately `--per` times a
  round; the figure is the median over rounds of each round's median wall
  time, measure over plain. Target: at most 1.3.

All programs run in shuffled, interleaved rounds under glibc, and the load
average is printed at the start and end.

    .venv/bin/python bench/bench_measure.py            # about 1 minute: 25 rounds, 9 invocations
    .venv/bin/python bench/bench_measure.py --quick    # about 20 seconds
    [--rounds N] [--per N] [--entries N] [--before REV] [--cc gcc] [--json FILE]

Exits 0 even when the target is missed (the FAIL line says so); 1 when
something could not be built or run.
"""

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

from scenc import probes
from scenc.compiler import build, pipeline

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
BEFORE = "0024409"  # main before the cheap regions (issue 28)
PROBE_SET = "time+memory"  # scenc run's default
TARGET_RATIO = 1.3

COST = """\
scenario "measure-cost"
param entries = 300_000
thread worker {{
    repeat entries {{ {open}p = malloc(64)  free(p){close} }}
}}
"""


def load() -> str:
    return "%.2f %.2f %.2f" % os.getloadavg()


def cost_scenarios(work: Path) -> Dict[str, Path]:
    out = {}
    for name, open_, close in (("plain", "", ""), ("measure", 'measure "r" { ', " }")):
        path = work / f"cost-{name}.scn"
        path.write_text(COST.format(open=open_, close=close))
        out[name] = path
    return out


def old_runtime(rev: str, work: Path) -> Optional[Path]:
    """runtime/ and probes/ of `rev`, or None when git cannot give them."""
    folder = work / "before"
    folder.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "runtime", "probes"],
                             capture_output=True)
    if archive.returncode != 0:
        print(f"bench_measure: no runtime for --before {rev}: {archive.stderr.decode().strip()}",
              file=sys.stderr)
        return None
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return folder


def build_against(scn: Path, params: dict, headers: Path, out: Path, cc: str) -> Path:
    """The C scenc generates for `scn`, compiled against another runtime's headers."""
    c_file = out.with_suffix(".c")
    c_file.write_text(pipeline.emit(scn, params, probes=probes.c_parts(PROBE_SET)))
    subprocess.run([build.find_compiler(cc), *build.BASE_FLAGS, *build.WARNINGS,
                    "-I", str(headers / "runtime"), "-I", str(headers / "probes"),
                    str(c_file), str(headers / "runtime" / "runtime.c"), "-ldl", "-o", str(out)],
                   check=True)
    return out


def run(argv: List[str]) -> dict:
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    doc = json.loads(proc.stdout)
    cpu = sum(t["cpu_ns"] for t in doc["threads"]) if "threads" in doc else doc["cpu_ns"]
    return {"wall_ns": doc["wall_ns"], "cpu_ns": cpu}


def median(values) -> float:
    return float(statistics.median(values))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--per", type=int, default=9, help="server invocations of each kind per round")
    ap.add_argument("--entries", type=int, default=300_000, help="region entries of the cost programs")
    ap.add_argument("--before", default=BEFORE, help=f"the runtime to compare with (default {BEFORE})")
    ap.add_argument("--cc", default="gcc")
    ap.add_argument("--quick", action="store_true", help="5 rounds of 3")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds, args.per = 5, 3
    random.seed(args.seed)
    print(f"bench_measure: {args.rounds} rounds, {args.per} server invocations of each kind a round, "
          f"probes {PROBE_SET}, glibc, {args.cc}; load average {load()} at the start")

    work = Path(tempfile.mkdtemp(prefix="scenc-bench-measure-"))
    try:
        params = {"entries": args.entries}
        cost = cost_scenarios(work)
        ps = probes.c_parts(PROBE_SET)
        programs = {f"now {k}": [str(pipeline.build(p, params, cc=args.cc, probes=ps).binary)]
                    for k, p in cost.items()}
        before = old_runtime(args.before, work)
        if before is not None:
            for k, p in cost.items():
                programs[f"before {k}"] = [str(build_against(p, params, before, work / f"before-{k}", args.cc))]
        hand = work / "hand-measure"
        subprocess.run([build.find_compiler(args.cc), "-O2", "-pthread", "-std=gnu11", "-Wall", "-Wextra",
                        "-Werror", str(BENCH / "handwritten" / "measure.c"), "-o", str(hand)], check=True)
        for mode, label in ((0, "hand bare"), (1, "hand rdtsc"), (2, "hand clock_gettime")):
            programs[label] = [str(hand), str(args.entries), str(mode)]
        server = {k: [str(pipeline.build(BENCH / "scenarios" / f"{f}.scn", cc=args.cc, probes=ps).binary)]
                  for k, f in (("plain", "server"), ("measure", "server-measure"))}
        if before is not None:
            server_before = [str(build_against(BENCH / "scenarios" / "server-measure.scn", {}, before,
                                               work / "before-server-measure", args.cc))]
    except (subprocess.CalledProcessError, RuntimeError) as e:
        print(f"bench_measure: cannot build: {e}", file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)
        return 1

    samples: Dict[str, List[dict]] = {k: [] for k in programs}
    rounds: List[Dict[str, float]] = []
    before_server: List[float] = []
    try:
        for r in range(args.rounds):
            order = list(programs)
            random.shuffle(order)
            for k in order:
                samples[k].append(run(programs[k]))
            kinds = ["plain", "measure"] if r % 2 == 0 else ["measure", "plain"]
            walls: Dict[str, List[float]] = {"plain": [], "measure": []}
            for _ in range(args.per):
                for k in kinds:
                    walls[k].append(run(server[k])["wall_ns"] / 1e6)
            rounds.append({k: median(v) for k, v in walls.items()})
            if before is not None and r < 3:  # slow: a few suffice to show it
                before_server.append(run(server_before)["wall_ns"] / 1e6)
            print(f"  round {r + 1}/{args.rounds}: server {rounds[-1]['plain']:.2f} ms, "
                  f"with measure {rounds[-1]['measure']:.2f} ms", file=sys.stderr)
    except RuntimeError as e:
        print(f"bench_measure: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)

    n = args.entries
    result = {"rounds": args.rounds, "per": args.per, "entries": n, "before": args.before,
              "cost": {}, "server": {}}
    print()
    print(f"cost of a region entry ({n} entries of malloc(64)+free in one thread; medians over rounds, "
          "each the difference to the loop without timing, in the same round)")
    print(f"  {'program':<22} {'wall ms':>9} {'cpu ms':>9} {'ns/entry (cpu)':>15} {'ns/entry (wall)':>16}")

    def row(label: str, base: str) -> None:
        if label not in samples:
            return
        cpu = [(s["cpu_ns"] - b["cpu_ns"]) / n for s, b in zip(samples[label], samples[base])]
        wall = [(s["wall_ns"] - b["wall_ns"]) / n for s, b in zip(samples[label], samples[base])]
        w = median(s["wall_ns"] for s in samples[label]) / 1e6
        c = median(s["cpu_ns"] for s in samples[label]) / 1e6
        extra = "" if label == base else f"{median(cpu):15.1f} {median(wall):16.1f}"
        print(f"  {label:<22} {w:9.2f} {c:9.2f} {extra}")
        result["cost"][label] = {"wall_ms": w, "cpu_ms": c,
                                 "ns_per_entry_cpu": None if label == base else median(cpu),
                                 "ns_per_entry_wall": None if label == base else median(wall)}

    for label, base in (("hand bare", "hand bare"), ("hand rdtsc", "hand bare"),
                        ("hand clock_gettime", "hand bare"), ("now plain", "now plain"),
                        ("now measure", "now plain"), ("before plain", "before plain"),
                        ("before measure", "before plain")):
        row(label, base)

    plain = median(r["plain"] for r in rounds)
    measured = median(r["measure"] for r in rounds)
    ratio = measured / plain
    per_round = median(r["measure"] / r["plain"] for r in rounds)
    ok = ratio <= TARGET_RATIO
    print()
    print(f"server (4 workers x 20,000 requests, 5 allocator calls each), {PROBE_SET}, "
          f"median of {args.rounds} rounds' medians of {args.per} alternating invocations")
    print(f"  without measure  {plain:8.2f} ms")
    print(f"  measure/request  {measured:8.2f} ms   ratio {ratio:.3f} (median of per-round ratios "
          f"{per_round:.3f}), target <= {TARGET_RATIO}: {'PASS' if ok else 'FAIL'}")
    if before_server:
        print(f"  the same under the runtime of {args.before}: {median(before_server):.2f} ms "
              f"({median(before_server) / plain:.1f}x, {len(before_server)} runs)")
    print(f"load average {load()} at the end")
    result["server"] = {"plain_ms": plain, "measure_ms": measured, "ratio": ratio,
                        "ratio_per_round": per_round, "pass": ok,
                        "before_measure_ms": median(before_server) if before_server else None}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
