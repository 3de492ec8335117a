"""What a generated scenario program costs next to the same benchmark written by hand.

For `loop`, `larson` and `prodcons` (bench/scenarios/) it builds the program
scenc generates and its plain C twin (bench/handwritten/), checks with ltrace
that both make the same allocator calls (each thread the same calls in the same
order, a free the block of the same allocation), then runs them in interleaved
pairs under glibc and every preloadable allocator installed. Each pair gives one ratio generated/hand-written
of the wall time the programs report themselves (gate open to last join); the
table shows the median ratio, its interquartile range and a bootstrap 95%
confidence interval, and PASS when the median is at most 1.02: the allocator, not
scenc's scaffolding, must dominate every timing (issue 11). With `--baseline DIR`
(another scenc checkout) its generated programs join each pair too, so a change
is measured before and after in one run.

It also times a cold build (empty cache), a cached rebuild, and what a random
draw costs next to a malloc+free pair.

    .venv/bin/python bench/bench_overhead.py            # about 2 minutes
    .venv/bin/python bench/bench_overhead.py --quick    # about 30 seconds
    .venv/bin/python bench/bench_overhead.py --instructions  # + callgrind counts, load-independent
    git archive --prefix=scenc/ main | tar -x -C /tmp/before
    .venv/bin/python bench/bench_overhead.py --baseline /tmp/before/scenc --no-builds

Exits 0 even when a target is missed; the FAIL lines say which.
"""

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from scenc.compiler import build, pipeline, distributions as tables
from scenc.scenario.errors import ScenarioError

BENCH = Path(__file__).resolve().parent
RUNTIME = build.RUNTIME  # the runtime headers of the scenc being measured

TARGET_RATIO = 1.02
TARGET_COLD_S = 1.0
TARGET_CACHED_S = 0.050

# Preloadable allocators, by the soname their Debian packages install.
ALLOCATOR_SONAMES = {
    "tcmalloc": "libtcmalloc_minimal.so.4",
    "jemalloc": "libjemalloc.so.2",
    "mimalloc": "libmimalloc.so.2",
}


@dataclass(frozen=True)
class Scenario:
    name: str
    params: Dict[str, int]
    twin_args: Sequence[str]     # param names, in the twin's argv order; the seed follows
    trace_params: Dict[str, int]  # small, single-threaded: for the ltrace comparison

    @property
    def scn(self) -> Path:
        return BENCH / "scenarios" / f"{self.name}.scn"

    @property
    def twin_source(self) -> Path:
        return BENCH / "handwritten" / f"{self.name}.c"


SCENARIOS = (
    Scenario("loop", {"threads": 2, "iterations": 3_000_000, "maxsize": 1024},
             ("threads", "iterations", "maxsize"), {"threads": 1, "iterations": 300, "maxsize": 1024}),
    Scenario("larson", {"threads": 2, "slots": 1000, "rounds": 2_000_000},
             ("threads", "slots", "rounds"), {"threads": 1, "slots": 50, "rounds": 300}),
    # One pair is two threads, as in the others; `--threads` does not apply.
    Scenario("prodcons", {"pairs": 1, "objects": 1_000_000, "capacity": 64, "maxsize": 256},
             ("pairs", "objects", "capacity", "maxsize"),
             {"pairs": 1, "objects": 300, "capacity": 64, "maxsize": 256}),
)


@dataclass(frozen=True)
class Allocator:
    name: str
    library: Optional[str]  # None: the system malloc

    def env(self) -> Dict[str, str]:
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        if self.library:
            env["LD_PRELOAD"] = self.library
        return env


def installed_allocators(wanted: Optional[Sequence[str]]) -> List[Allocator]:
    found = [Allocator("glibc", None)]
    listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    for name, soname in ALLOCATOR_SONAMES.items():
        m = re.search(rf"^\s*{re.escape(soname)} \(.*x86-64.*\) => (\S+)$", listing, re.M) \
            or re.search(rf"^\s*{re.escape(soname)} .* => (\S+)$", listing, re.M)
        if m:
            found.append(Allocator(name, m.group(1)))
    if wanted:
        missing = set(wanted) - {a.name for a in found}
        if missing:
            sys.exit(f"bench_overhead: not installed: {', '.join(sorted(missing))}")
        found = [a for a in found if a.name in wanted]
    return found


# ---- building

def build_twin(source: Path, out: Path, cc: str) -> Path:
    subprocess.run([cc, "-O2", "-pthread", "-std=gnu11", "-Wall", "-Wextra", "-Werror",
                    str(source), "-o", str(out)], check=True)
    return out


def twin_argv(binary: Path, sc: Scenario, params: Dict[str, int], seed: int) -> List[str]:
    return [str(binary), *(str(params[k]) for k in sc.twin_args), str(seed)]


# ---- the same calls: ltrace on a tiny single-threaded run of each program

# A call line ends in its result, or " <unfinished ...>" (the result comes on a
# "resumed" line), or " <no return ...>" (ltrace lost it: fine for a free only).
_CALL = re.compile(r"^(\d+)\s+\S*?(malloc|free)\((\w*)(\)\s+=\s+(\S+)| <(?:unfinished|no return) \.\.\.>)")
_RESUMED = re.compile(r"^(\d+)\s+<\.\.\. (malloc) resumed> ?\)\s+=\s+(\S+)")


def call_sequence(argv: Sequence[str], log: Path) -> Optional[List[str]]:
    """The program's malloc/free calls, thread by thread, with addresses replaced
    by (allocating thread, allocation number), so two runs compare equal when
    every thread makes the same calls in the same order and frees the blocks of
    the same allocations, however the threads interleave; None if ltrace failed.

    A free counts when it is called (its block may be handed out again before
    ltrace prints its return), a malloc when it returns (its address is known
    then, before any other thread can free it)."""
    proc = subprocess.run(["ltrace", "-f", "-e", "malloc+free", "-o", str(log), *argv],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 or not log.exists():
        return None
    threads: Dict[str, list] = {}   # pid -> [(call, size, block)]
    pending: Dict[str, str] = {}    # pid -> size of its unfinished malloc
    live: Dict[str, tuple] = {}     # address -> (pid, allocation number in that thread)

    def malloc_returned(pid: str, size: str, address: str) -> None:
        calls = threads.setdefault(pid, [])
        live[address] = (pid, sum(c[0] == "malloc" for c in calls) + 1)
        calls.append(("malloc", size, live[address]))

    for line in log.read_text().splitlines():
        m, r = _CALL.match(line), _RESUMED.match(line)
        if r:
            if r.group(1) in pending:
                malloc_returned(r.group(1), pending.pop(r.group(1)), r.group(3))
        elif m:
            pid, func, arg, returned, address = m.groups()
            if func == "free":
                threads.setdefault(pid, []).append(("free", "", live.pop(arg, (arg, 0))))
            elif returned.startswith(" <no return"):
                return None  # the block's address is unknown
            elif returned.startswith(" <unfinished"):
                pending[pid] = arg
            else:
                malloc_returned(pid, arg, address)
    # Threads are named by what they do (pids differ from run to run).
    order = sorted(threads, key=lambda pid: ([c[1] for c in threads[pid]], len(threads[pid])))
    name = {pid: f"t{k}" for k, pid in enumerate(order)}
    return [f"{name[pid]} {call}({size})#{name.get(block[0], block[0])}.{block[1]}"
            for pid in order for call, size, block in threads[pid]]


def check_same_calls(sc: Scenario, twin: Path, work: Path, compilers: Sequence[str]) -> str:
    """'same N calls' or what differs. The generated program is built with every
    compiler given: an optimiser that drops a malloc/free pair shows up here."""
    seqs = {}
    for cc in compilers:
        gen = pipeline.build(sc.scn, sc.trace_params, cc=cc).binary
        seqs[f"generated/{cc}"] = [str(gen)]
    seqs["hand-written"] = twin_argv(twin, sc, sc.trace_params, seed_of(sc, seqs[f"generated/{compilers[0]}"]))
    got = {}
    for label, argv in seqs.items():
        for _attempt in range(3):  # ltrace 0.7.3 sometimes crashes a threaded tracee
            got[label] = call_sequence(argv, work / "ltrace.log")
            if got[label] is not None:
                break
        if got[label] is None:
            return f"not checked (ltrace failed on {label})"
    reference = got["hand-written"]
    for label, calls in got.items():
        if calls != reference:
            first = next((i for i, (a, b) in enumerate(zip(calls, reference)) if a != b),
                         min(len(calls), len(reference)))
            return (f"DIFFERENT: {label} makes {len(calls)} calls, hand-written {len(reference)};"
                    f" first difference at call {first + 1}")
    return f"same {len(reference)} calls ({', '.join(got)})"


def seed_of(sc: Scenario, argv: Sequence[str]) -> int:
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return int(json.loads(out)["seed"])


# ---- timing

@dataclass
class Sample:
    wall_ns: int
    cpu_ns: int


def run_once(argv: Sequence[str], alloc: Allocator, expect_provider: bool) -> Sample:
    proc = subprocess.run(argv, capture_output=True, text=True, env=alloc.env(), timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[0]} under {alloc.name} exited {proc.returncode}: {proc.stderr.strip()}")
    doc = json.loads(proc.stdout)
    if expect_provider:
        provider = doc["provider"]
        if alloc.library and os.path.realpath(provider) != os.path.realpath(alloc.library):
            raise RuntimeError(f"the preload of {alloc.library} did not take: malloc came from {provider}")
        return Sample(doc["wall_ns"], sum(t["cpu_ns"] for t in doc["threads"]))
    return Sample(doc["wall_ns"], doc["cpu_ns"])


@dataclass
class Cell:
    scenario: Scenario
    alloc: Allocator
    gen: List[str]
    hand: List[str]
    base: Optional[List[str]] = None  # --baseline: the program another scenc generates
    pairs: List[tuple] = field(default_factory=list)  # (generated Sample, hand-written Sample)
    base_pairs: List[tuple] = field(default_factory=list)  # (baseline Sample, the same hand-written)

    def run_pair(self) -> None:
        order = [("gen", self.gen), ("hand", self.hand)] + [("base", self.base)] * bool(self.base)
        random.shuffle(order)  # no program always runs first, or after the same other
        got = {label: run_once(argv, self.alloc, label != "hand") for label, argv in order}
        self.pairs.append((got["gen"], got["hand"]))
        if self.base:
            self.base_pairs.append((got["base"], got["hand"]))


def bootstrap_median_ci(values: np.ndarray, reps: int = 4000, seed: int = 1) -> tuple:
    rng = np.random.default_rng(seed)
    medians = np.median(rng.choice(values, size=(reps, len(values)), replace=True), axis=1)
    return float(np.percentile(medians, 2.5)), float(np.percentile(medians, 97.5))


def summarize(cell: Cell, pairs: Optional[List[tuple]] = None) -> dict:
    pairs = cell.pairs if pairs is None else pairs
    wall = np.array([g.wall_ns / h.wall_ns for g, h in pairs])
    cpu = np.array([g.cpu_ns / h.cpu_ns for g, h in pairs])
    lo, hi = bootstrap_median_ci(wall)
    return {
        "scenario": cell.scenario.name, "allocator": cell.alloc.name, "pairs": len(wall),
        "gen_ms": statistics.median(g.wall_ns for g, _ in pairs) / 1e6,
        "hand_ms": statistics.median(h.wall_ns for _, h in pairs) / 1e6,
        "ratio": float(np.median(wall)),
        "iqr": (float(np.percentile(wall, 25)), float(np.percentile(wall, 75))),
        "ci95": (lo, hi),
        "cpu_ratio": float(np.median(cpu)),
        "pass": float(np.median(wall)) <= TARGET_RATIO,
    }


# ---- build times

_BUILD_TIMER = r"""
import json, sys, time
t0 = time.perf_counter()
from scenc.compiler import pipeline
t1 = time.perf_counter()
path, params = sys.argv[1], json.loads(sys.argv[2])
first = pipeline.build(path, params)
t2 = time.perf_counter()
again = pipeline.build(path, params)
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "first_s": t2 - t1, "first_cached": first.cached,
                  "again_s": t3 - t2, "again_cached": again.cached}))
"""


def time_builds(sc: Scenario, reps: int) -> dict:
    """Each repetition, in fresh processes over a fresh SCENC_CACHE:
    cold = empty cache (runtime library and scenario compiled), scenario = only the
    scenario compiled (runtime library cached), cached = pipeline.build again in the
    same process, fresh_cached = a cached build in a new process (import excluded)."""
    got = {"cold": [], "scenario": [], "cached": [], "fresh_cached": [], "import": []}

    def timed(cache: str, params: dict) -> dict:
        env = dict(os.environ, SCENC_CACHE=cache)
        out = subprocess.run([sys.executable, "-c", _BUILD_TIMER, str(sc.scn), json.dumps(params)],
                             capture_output=True, text=True, env=env, check=True).stdout
        return json.loads(out)

    for _ in range(reps):
        cache = tempfile.mkdtemp(prefix="scenc-bench-cache-")
        try:
            cold = timed(cache, sc.params)
            other = timed(cache, {**sc.params, "threads": sc.params["threads"] + 1})
            warm = timed(cache, sc.params)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        # A flag out of place means scenc's own sources changed in between
        # (someone editing the checkout): that figure is left out.
        if not cold["first_cached"]:
            got["cold"].append(cold["first_s"])
        if cold["again_cached"]:
            got["cached"].append(cold["again_s"])
        if not other["first_cached"]:
            got["scenario"].append(other["first_s"])
        if warm["first_cached"]:
            got["fresh_cached"].append(warm["first_s"])
        got["import"].append(warm["import_s"])
    return {k: statistics.median(v) if v else float("nan") for k, v in got.items()}


# ---- draw cost

def draw_tables_header() -> str:
    alias = tables.alias_table([(16, 5), (32, 3), (4096, 1)])
    quant = tables.lognormal_table(64, 1.5)
    return "\n".join([
        "static const uint64_t T_alias_values[] = { %s };" % ", ".join(map(str, alias.values)),
        "static const uint32_t T_alias_prob[] = { %s };" % ", ".join(f"{p}U" for p in alias.prob),
        "static const uint32_t T_alias_alias[] = { %s };" % ", ".join(map(str, alias.alias)),
        f"static const scn_alias_table T_alias = {{ {len(alias.values)}, T_alias_prob, T_alias_alias,"
        " T_alias_values };",
        "static const uint64_t T_quantile_q[] = { %s };" % ", ".join(f"{q}ULL" for q in quant.quantiles),
        "static const scn_quantile_table T_quantile = { T_quantile_q };", ""])


def draw_costs(work: Path, allocs: Sequence[Allocator], n: int, reps: int, cc: str) -> dict:
    (work / "draw_tables.h").write_text(draw_tables_header())
    binary = work / "draw_cost"
    subprocess.run([cc, "-O2", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-I", str(RUNTIME),
                    "-I", str(work), str(BENCH / "handwritten" / "draw_cost.c"), "-o", str(binary)],
                   check=True)
    runs = {a.name: [] for a in allocs}
    for _ in range(reps):
        for a in allocs:
            out = subprocess.run([str(binary), str(n)], capture_output=True, text=True,
                                 env=a.env(), check=True).stdout
            runs[a.name].append(json.loads(out))
    draws = {k: statistics.median(r[k] for runs_a in runs.values() for r in runs_a)
             for k in ("random", "uniform", "pow2", "weighted", "lognormal")}
    pairs = {a: statistics.median(r["malloc_free"] for r in rs) for a, rs in runs.items()}
    return {"draw_ns": draws, "malloc_free_ns": pairs}


# ---- report

def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def print_ratio_table(rows: List[dict], which: str = "generated") -> None:
    print(f"\nOverhead: wall time {which} / hand-written, median of per-pair ratios"
          f" (target <= {TARGET_RATIO:.2f})")
    head = (f"{'scenario':9} {'allocator':9} {'pairs':>5} {'gen ms':>8} {'hand ms':>8} {'ratio':>6}"
            f"  {'IQR':13}  {'bootstrap 95% CI':16}  {'cpu ratio':>9}  verdict")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['scenario']:9} {r['allocator']:9} {r['pairs']:5d} {r['gen_ms']:8.1f} {r['hand_ms']:8.1f}"
              f" {r['ratio']:6.3f}  {r['iqr'][0]:.3f}..{r['iqr'][1]:.3f}  {r['ci95'][0]:.3f}..{r['ci95'][1]:.3f}"
              f"      {r['cpu_ratio']:9.3f}  {verdict(r['pass'])}")
    print("ratio: median over pairs of generated/hand-written wall time (gate open to last join);"
          " IQR of the pair ratios;\nCI: bootstrap 95% interval of that median; cpu ratio: the same"
          " for the workers' summed CPU time,\nwhich other load on the machine disturbs less.")


def print_build_times(name: str, t: dict) -> List[str]:
    cold_ok, cached_ok = t["cold"] < TARGET_COLD_S, t["cached"] < TARGET_CACHED_S
    print(f"\nBuild time of bench/scenarios/{name}.scn (median of repetitions)")
    print(f"  cold, empty cache (runtime library + scenario) {t['cold'] * 1e3:8.1f} ms"
          f"  target < {TARGET_COLD_S * 1e3:.0f} ms   {verdict(cold_ok)}")
    print(f"  scenario only (runtime library cached)         {t['scenario'] * 1e3:8.1f} ms")
    print(f"  cached rebuild, pipeline.build again           {t['cached'] * 1e3:8.1f} ms"
          f"  target < {TARGET_CACHED_S * 1e3:.0f} ms    {verdict(cached_ok)}")
    print(f"  cached build in a new process (after import)   {t['fresh_cached'] * 1e3:8.1f} ms"
          f"  (importing scenc.compiler: {t['import'] * 1e3:.0f} ms)")
    return [f"{name} cold build"] * (not cold_ok) + [f"{name} cached rebuild"] * (not cached_ok)


def print_draw_costs(d: dict) -> None:
    fastest = min(d["malloc_free_ns"].values())
    print("\nRandom draws (runtime/rng.h, dist.h) against a malloc(64)+free pair")
    for k, ns in d["draw_ns"].items():
        print(f"  {k:10} {ns:6.2f} ns/draw  = {100 * ns / fastest:5.1f}% of the fastest pair")
    for a, ns in d["malloc_free_ns"].items():
        print(f"  malloc(64)+free under {a:9} {ns:6.2f} ns")


_BASELINE_BUILD = """
import json, sys
from scenc.compiler import pipeline
print(pipeline.build(sys.argv[1], json.loads(sys.argv[2]), cc=sys.argv[3]).binary)
"""


def baseline_build(baseline: Path, sc: Scenario, cc: str, cache: Path) -> str:
    """The program the scenc at `baseline` (a checkout, e.g. `git archive main`
    into a folder named scenc) generates for the same scenario and params."""
    env = dict(os.environ, PYTHONPATH=str(baseline.resolve().parent), SCENC_CACHE=str(cache))
    out = subprocess.run([sys.executable, "-c", _BASELINE_BUILD, str(sc.scn), json.dumps(sc.params), cc],
                         capture_output=True, text=True, env=env, cwd=str(cache), check=True).stdout
    return out.strip().splitlines()[-1]


def prepare(sc: Scenario, allocs: Sequence[Allocator], work: Path, cc: str,
            failures: List[str], baseline: Optional[Path] = None) -> List[Cell]:
    """Both programs of a scenario (three with a baseline), built, checked for
    the same calls and warmed up."""
    gen = pipeline.build(sc.scn, sc.params, cc=cc).binary
    base = baseline_build(baseline, sc, cc, work) if baseline else None
    twin = build_twin(sc.twin_source, work / f"hand_{sc.name}", cc)
    other_cc = [c for c in ("gcc", "clang") if c != cc and shutil.which(c)]
    same = check_same_calls(sc, twin, work, [cc, *other_cc]) if shutil.which("ltrace") \
        else "not checked (ltrace is not installed)"
    print(f"{sc.name}: {same}")
    if same.startswith("DIFFERENT"):
        failures.append(f"{sc.name}: the programs make different calls")
    hand = twin_argv(twin, sc, sc.params, seed_of(sc, [str(gen)]))
    print(f"  generated:    {gen} {json.dumps(sc.params)}\n  hand-written: {' '.join(hand)}")
    if base:
        print(f"  baseline:     {base}")
    cells = []
    for a in allocs:
        cell = Cell(sc, a, [str(gen)], hand, [base] if base else None)
        run_once(cell.gen, a, True)  # warm-up runs (page cache, ld.so), not counted
        run_once(cell.hand, a, False)
        if base:
            run_once(cell.base, a, True)
        cells.append(cell)
    return cells


# ---- instructions: what the CPU executes inside the thread bodies, counted
# by callgrind. Unlike a time it does not move with the machine's load, so it
# shows scaffolding that a noisy wall clock hides (a failed-allocation count
# compiled to cmp + adc was 2 instructions per call, 2.4% of loop under tcmalloc).

# Small single-threaded runs: callgrind runs threads one at a time, so only
# programs that never wait for another thread count the same twice. prodcons
# spins while its channel is full or empty, so it is left out.
_INSTRUCTION_PARAMS = {"loop": {"threads": 1, "iterations": 200_000},
                       "larson": {"threads": 1, "rounds": 200_000}}
# The twins' thread bodies are `work`; the generated ones `body_<group>`.
_BODIES = ("--toggle-collect=work", "--toggle-collect=body_*")


def instructions_in_bodies(argv: Sequence[str], alloc: Allocator) -> int:
    env = alloc.env()
    preload = env.pop("LD_PRELOAD", None)
    wrapped = ["env", f"LD_PRELOAD={preload}", *argv] if preload else list(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg.out",
                              "--trace-children=yes", *_BODIES, *wrapped],
                             capture_output=True, text=True, env=env, check=True).stderr
    got = re.findall(r"Collected : (\d+)", out)
    if not got:
        raise RuntimeError(f"callgrind counted nothing for {' '.join(argv)}:\n{out[-2000:]}")
    return int(got[-1])


def instruction_counts(scenarios: Sequence[Scenario], allocs: Sequence[Allocator], work: Path,
                       cc: str) -> List[dict]:
    rows = []
    for sc in (sc for sc in scenarios if sc.name in _INSTRUCTION_PARAMS):
        params = {**sc.params, **_INSTRUCTION_PARAMS[sc.name]}
        gen = [str(pipeline.build(sc.scn, params, cc=cc).binary)]
        twin = build_twin(sc.twin_source, work / f"hand_{sc.name}", cc)
        hand = twin_argv(twin, sc, params, seed_of(sc, gen))
        for a in allocs:
            g, h = instructions_in_bodies(gen, a), instructions_in_bodies(hand, a)
            rows.append({"scenario": sc.name, "allocator": a.name, "params": params,
                         "generated": g, "hand": h, "ratio": g / h})
    return rows


def print_instruction_table(rows: List[dict]) -> None:
    print("\nInstructions inside the thread bodies (callgrind), generated / hand-written, one thread")
    print(f"{'scenario':9} {'allocator':9} {'generated':>12} {'hand-written':>12}  ratio")
    print("-" * 53)
    for r in rows:
        print(f"{r['scenario']:9} {r['allocator']:9} {r['generated']:12,d} {r['hand']:12,d}  {r['ratio']:.4f}")
    print("the allocator's own instructions are in both counts; prodcons is left out (its threads wait"
          " for each other, and callgrind runs one thread at a time)")


def run_pairs(cells: List[Cell], pairs: int) -> None:
    for i in range(pairs):  # every cell gets pair i before any gets pair i + 1
        random.shuffle(cells)
        for cell in cells:
            cell.run_pair()
        print(f"\r  pair {i + 1}/{pairs}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=15, help="interleaved pairs per scenario and allocator")
    ap.add_argument("--quick", action="store_true", help="5 pairs, one build repetition, fewer draws")
    ap.add_argument("--allocators", help="comma-separated subset of glibc,tcmalloc,jemalloc,mimalloc")
    ap.add_argument("--cc", default="gcc", help="compiler for both programs (default gcc)")
    ap.add_argument("--threads", type=int, help="threads per program of loop and larson (default: 2)")
    ap.add_argument("--seed", type=int, default=None, help="seed of the pair order shuffle")
    ap.add_argument("--json", type=Path, help="also write every measurement to this file")
    ap.add_argument("--baseline", type=Path, metavar="DIR",
                    help="another scenc checkout (a folder named scenc, e.g. `git archive main`): its"
                         " generated programs run interleaved too, for a before/after in one run")
    ap.add_argument("--scenarios", help="comma-separated subset of loop,larson,prodcons")
    ap.add_argument("--no-builds", action="store_true", help="skip the build-time and draw-cost figures")
    ap.add_argument("--instructions", action="store_true",
                    help="also count the instructions in the thread bodies with callgrind (load-independent)")
    args = ap.parse_args(argv)
    pairs = 5 if args.quick and args.pairs == 15 else args.pairs
    build_reps, draw_n, draw_reps = (1, 5_000_000, 1) if args.quick else (3, 20_000_000, 3)
    random.seed(args.seed)
    allocs = installed_allocators(args.allocators.split(",") if args.allocators else None)
    scenarios = [Scenario(sc.name, {**sc.params, "threads": args.threads}, sc.twin_args, sc.trace_params)
                 if args.threads and "threads" in sc.params else sc for sc in SCENARIOS
                 if not args.scenarios or sc.name in args.scenarios.split(",")]
    started = time.monotonic()
    failures: List[str] = []
    print(f"allocators: {', '.join(a.name + (' (' + a.library + ')' if a.library else '') for a in allocs)}")
    print("load average at start: %.2f %.2f %.2f (on %d CPUs)" % (*os.getloadavg(), os.cpu_count()))

    work = Path(tempfile.mkdtemp(prefix="scenc-bench-"))
    try:
        cells = [c for sc in scenarios for c in prepare(sc, allocs, work, args.cc, failures, args.baseline)]
        table_order = list(cells)
        run_pairs(cells, pairs)
        rows = [summarize(c) for c in table_order]
        if args.baseline:
            base_rows = [summarize(c, c.base_pairs) for c in table_order]
            print_ratio_table(base_rows, f"baseline ({args.baseline}) generated")
        print_ratio_table(rows)
        failures += [f"{r['scenario']} under {r['allocator']}: ratio {r['ratio']:.3f}"
                     for r in rows if not r["pass"]]
        instructions = []
        if args.instructions:
            if not shutil.which("valgrind"):
                raise RuntimeError("--instructions needs valgrind (apt install valgrind)")
            instructions = instruction_counts(scenarios, allocs, work, args.cc)
            print_instruction_table(instructions)
        builds, draws = {}, {}
        for sc in (sc for sc in scenarios if "threads" in sc.params and not args.no_builds):
            builds[sc.name] = time_builds(sc, build_reps)  # varies `threads` for a scenario-only build
            failures += print_build_times(sc.name, builds[sc.name])
        if not args.no_builds:
            draws = draw_costs(work, allocs, draw_n, draw_reps, args.cc)
            print_draw_costs(draws)
    except (RuntimeError, OSError, subprocess.SubprocessError, ScenarioError) as exc:
        print(f"bench_overhead: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print()
    for f in failures:
        print(f"FAIL {f}")
    print("load average at end: %.2f %.2f %.2f" % os.getloadavg())
    print(f"{'all targets met' if not failures else f'{len(failures)} target(s) missed'};"
          f" bench took {time.monotonic() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({
            "ratios": rows, "builds": builds, "draws": draws, "instructions": instructions,
            "baseline": str(args.baseline) if args.baseline else None,
            "baseline_ratios": base_rows if args.baseline else [],
            "baseline_pairs": {f"{c.scenario.name}/{c.alloc.name}": [(b.wall_ns, h.wall_ns, b.cpu_ns, h.cpu_ns)
                                                                      for b, h in c.base_pairs]
                               for c in table_order},
            "pairs": {f"{c.scenario.name}/{c.alloc.name}": [(g.wall_ns, h.wall_ns, g.cpu_ns, h.cpu_ns)
                                                             for g, h in c.pairs] for c in table_order},
        }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
