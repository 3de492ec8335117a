"""The model library against its originals, by their traces.

For each scenario of the model library (examples/mstress.scn, larson-churn.scn,
...) the original program is built from mimalloc-bench's sources in a
temporary directory (never in the repository), both programs are captured
with `scenc capture --method preload`, and the two traces are compared side
by side from `scenc trace-stats --json`:

  calls per kind             the counts of each allocator function
  size KS                    Kolmogorov-Smirnov distance of the log2 size histograms
  lifetime KS                the same for lifetimes in operations
  cross-thread free share    frees made by another thread than the allocating one
  peak live bytes            requested bytes live at the peak
  threads alive at once      most threads between their first and last call at once

Targets (issue 10): KS <= 0.1, shares and peaks within 10%, thread counts equal.
A scenario is tuned to its original's trace, never to an allocator's result.

Originals that run for a time are patched to do a fixed amount of work, the
same the scenario's params say (`PATCHES` below names each replacement); the
sizes of the runs are the scenario's defaults, so that each takes 0.2 to 1 s.
sh6bench and sh8bench are MicroQuill's and not redistributable: mimalloc-bench
downloads them; pass --shbench DIR holding sh6bench-new.c and sh8bench-new.c
to include them.

With --verdicts, each scenario then runs BESIDE its original in one scenc
session, as bench/fidelity.py runs a replay beside its program:

    scenc run examples/MODEL.scn --allocators glibc,tcmalloc,jemalloc,mimalloc \
        --runs N --seed S --quiet -o WORK/MODEL.json -- ORIGINAL ARGS

and `scenc report --json`'s side-by-side entry says, for wall time and peak
RSS, whether the scenario's fastest/slowest (leanest/fattest) allocator is the
original's wherever the original's difference is significant ('-' where it is
not), with each end's ratio to glibc on both sides.

    .venv/bin/python bench/bench_models.py --mimalloc-bench GITDIR [--models mstress,larson-churn]
        [--shbench DIR] [--keep DIR] [--json FILE] [--verdicts [--runs N] [--seed S]]

GITDIR is a git directory or checkout of github.com/daanx/mimalloc-bench
(`git clone`, or the `fetch` tool's mirror); sources are read with `git show HEAD:path`.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import fidelity   # bench/fidelity.py, beside this file: the side-by-side session and its report

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SCENC = [sys.executable, "-m", "scenc.cli"]
CC, CXX = os.environ.get("CC", "gcc"), os.environ.get("CXX", "g++")
ALLOCATORS = fidelity.DEFAULT_ALLOCATORS.split(",")


@dataclass
class Model:
    scenario: str
    sources: List[str]                  # paths in mimalloc-bench (or in --shbench for shbench)
    args: List[str]
    params: Dict[str, str] = field(default_factory=dict)   # the scenario's, to match the args
    cxx: bool = False
    defines: List[str] = field(default_factory=list)
    patches: List[Tuple[str, str]] = field(default_factory=list)  # (file, old, new) via PATCHES
    stdin: str = ""
    shbench: bool = False


MODELS = {
    "mstress": Model("mstress.scn", ["bench/mstress/mstress.c"], ["4", "10", "4"], params={"scale": "10", "iter": "4"}),
    "larson-churn": Model(
        "larson-churn.scn", ["bench/larson/larson.cpp"], ["1", "8", "1000", "1000", "10", "4141", "2"],
        cxx=True, defines=["CPP=1", "LARSON_GENERATIONS=20"], params={"generations": "20"},
        # a fixed number of generations instead of as many as one second allows
        patches=[("if( !stopflag ){", "if( !stopflag && pdea->cThreads < LARSON_GENERATIONS ){")]),
    "sh6bench": Model("sh6bench.scn", ["sh6bench-new.c"], ["4"], defines=["BENCH=1", "SYS_MULTI_THREAD=1"],
                      stdin="400\n1\n1000\n", shbench=True, params={"calls": "400"}),
    "sh8bench": Model("sh8bench.scn", ["sh8bench-new.c"], ["4"], defines=["BENCH=1", "SYS_MULTI_THREAD=1"],
                      stdin="40000\n2400\n16000\n", shbench=True, params={"iterations": "2400"}),
    "xmalloc-test": Model(
        "xmalloc-test.scn", ["bench/xmalloc-test/xmalloc-test.c"], ["-w", "2", "-t", "2", "-s", "64"],
        defines=["XM_BATCHES=50"], params={"batches": "50"},
        # a fixed number of batches per allocator thread instead of as many as -t seconds allow
        patches=[("  while (!atomic_load(&done_flag)) {",
                  "  for (int nb = 0; nb < XM_BATCHES && !atomic_load(&done_flag); nb++) {")]),
    "alloc-test": Model(
        "alloc-test.scn", ["bench/alloc-test/test_common.cpp", "bench/alloc-test/allocator_tester.cpp"], ["1"],
        cxx=True, defines=["BENCH=4"], params={"iterations": "1000000"},
        patches=[("params.startupParams.iterCount = 100000000;", "params.startupParams.iterCount = 1000000;")]),
    "glibc-malloc-simple": Model(
        "glibc-malloc-simple.scn", ["bench/glibc-bench/bench-malloc-simple.c"], [], params={"iterations": "20000"},
        patches=[("#define NUM_ITERS 2000000", "#define NUM_ITERS 20000")]),
    "glibc-malloc-thread": Model(
        "glibc-malloc-thread.scn", ["bench/glibc-bench/bench-malloc-thread.c"], ["1"],
        defines=["GLIBC_ITERS=400000"], params={"iterations": "400000"},
        patches=[("while (!timeout)", "while (!timeout && iters < GLIBC_ITERS)")]),
    "rptest": Model(
        "rptest.scn", ["bench/rptest/rptest.c", "bench/rptest/thread.c", "bench/rptest/timer.c"],
        ["2", "0", "1", "2", "500", "1000", "100", "8", "16000"], params={"loops": "500"}),
    "malloc-large": Model(
        "malloc-large.scn", ["bench/malloc-large/malloc-large.cpp"], [], cxx=True,
        patches=[("kNumIterations = 2000;", "kNumIterations = 40;")]),
}

HEADERS = {  # files the sources include, copied beside them
    "bench/xmalloc-test/xmalloc-test.c": ["bench/xmalloc-test/random.h"],
    "bench/alloc-test/allocator_tester.cpp": [
        "bench/alloc-test/allocator_tester.h", "bench/alloc-test/test_common.h",
        "bench/alloc-test/new_delete_allocator.h", "bench/alloc-test/selector.h",
        "bench/alloc-test/void_allocator.h"],
    "bench/rptest/rptest.c": ["bench/rptest/atomic.h", "bench/rptest/benchmark.h",
                              "bench/rptest/thread.h", "bench/rptest/timer.h"],
}


class Skip(Exception):
    """A model that cannot be compared here, with the reason."""


# ------------------------------------------------------------ building and capturing

def read_source(gitdir: Path, path: str) -> str:
    proc = subprocess.run(["git", "--git-dir", str(gitdir), "show", f"HEAD:{path}"],
                          capture_output=True, text=True)
    if proc.returncode:
        raise Skip(f"{path} is not in {gitdir}: {proc.stderr.strip()[:200]}")
    return proc.stdout


def git_dir(path: Path) -> Path:
    return path / ".git" if (path / ".git").exists() else path


def build_original(name: str, m: Model, gitdir: Path, shbench: Optional[Path], work: Path) -> Path:
    src_dir = work / "src"
    src_dir.mkdir(parents=True, exist_ok=True)
    files = []
    applied = set()
    for rel in m.sources:
        if m.shbench:
            if shbench is None or not (shbench / rel).is_file():
                raise Skip("MicroQuill's source is not redistributable; give --shbench DIR with " + rel)
            text = (shbench / rel).read_text(errors="replace")
        else:
            text = read_source(gitdir, rel)
            for header in HEADERS.get(rel, []):
                (src_dir / Path(header).name).write_text(read_source(gitdir, header))
        for old, new in m.patches:
            if old in text:
                text = text.replace(old, new)
                applied.add(old)
        target = src_dir / Path(rel).name
        target.write_text(text)
        files.append(str(target))
    missing = [old for old, _ in m.patches if old not in applied]
    if missing:
        raise Skip(f"a patch for fixed work no longer applies: {missing[0]!r}")
    binary = work / name
    compiler = CXX if m.cxx else CC
    cmd = [compiler, "-O2", "-w", "-pthread", f"-I{src_dir}", *(f"-D{d}" for d in m.defines), *files,
           "-o", str(binary), "-lm"]
    if m.cxx:
        cmd.insert(1, "-std=c++17")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise Skip(f"the original does not build: {proc.stderr.strip()[-400:]}")
    return binary


def build_scenario(m: Model) -> Path:
    cmd = SCENC + ["build", str(EXAMPLES / m.scenario)]
    for k, v in m.params.items():
        cmd += ["--param", f"{k}={v}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode:
        raise Skip(f"the scenario does not build: {proc.stderr.strip()[-400:]}")
    return Path(proc.stdout.split()[0])


def capture(argv: List[str], log: Path, stdin: str = "") -> float:
    """Capture a program's calls with the preload tracer; returns its wall time (s)."""
    import time
    feed = []
    if stdin:       # the program's input: a pipe into scenc would stay scenc's (the program reads /dev/null)
        (log.parent / "capture-stdin").write_text(stdin)
        feed = ["--stdin", str(log.parent / "capture-stdin")]
    t0 = time.monotonic()
    proc = subprocess.run(SCENC + ["capture", "--timeout", "300", "-o", str(log), *feed, "--"] + argv,
                          capture_output=True, text=True, cwd=log.parent)
    if proc.returncode or not log.is_file():
        raise Skip(f"capture failed ({proc.returncode}): {proc.stderr.strip()[-400:]}")
    return time.monotonic() - t0


# ------------------------------------------------------------ comparing

def trace_stats(log: Path, scenario: bool = False) -> dict:
    """`scenc trace-stats --json`, with calls of C++'s operators counted as malloc and free
    (the language has no operator new: the allocator serves both through the same paths)."""
    proc = subprocess.run(SCENC + ["trace-stats", "--json", str(log)], capture_output=True, text=True)
    if proc.returncode:
        raise Skip(f"trace-stats failed: {proc.stderr.strip()[-400:]}")
    stats = json.loads(proc.stdout)
    kinds: Dict[str, int] = {}
    for k, v in stats["calls_by_kind"].items():
        k = "malloc" if k.startswith("operator_new") else "free" if k.startswith("operator_delete") else k
        kinds[k] = kinds.get(k, 0) + v
    stats["calls_by_kind"] = kinds
    stats["threads_alive_at_once"] = threads_alive_at_once(log, scenario)
    return stats


def threads_alive_at_once(log: Path, scenario: bool) -> int:
    """Most threads between their own first and last call at the same moment (by log order).

    Threads that make fewer than NOISE_CALLS calls are not counted, in either
    program: a main thread that only starts the others (glibc's pthread_create
    callocs their TLS there) and prints, as several originals' do. A scenario
    program's first thread runs no statement of the scenario (it starts,
    joins and, with thread churn, re-starts the threads, and writes the
    report) and is never counted.
    """
    from scenc.trace.source import TraceSource
    spans: Dict[int, List[int]] = {}
    for e in TraceSource(str(log)).events:
        span = spans.setdefault(e.tid, [e.line, e.line, 0])
        span[1] = e.line
        span[2] += 1
    if scenario and spans:
        del spans[next(iter(spans))]   # the first tid seen: the runtime's main thread
    kept = [(a, b) for a, b, calls in spans.values() if calls >= NOISE_CALLS]
    events = sorted([(a, 1) for a, _ in kept] + [(b, -1) for _, b in kept], key=lambda x: (x[0], -x[1]))
    alive = most = 0
    for _, step in events:
        alive += step
        most = max(most, alive)
    return most


def ks_distance(a: dict, b: dict) -> float:
    """Largest gap between the cumulative shares of two histograms over the same buckets."""
    ta, tb = sum(a.values()) or 1, sum(b.values()) or 1
    ca = cb = 0.0
    worst = 0.0
    for key in sorted({int(k) for k in a} | {int(k) for k in b}):
        ca += a.get(str(key), a.get(key, 0)) / ta
        cb += b.get(str(key), b.get(key, 0)) / tb
        worst = max(worst, abs(ca - cb))
    return worst


# Calls that start-up, stdio and thread creation make in any program (dlsym, printf's
# buffer, TLS of each new thread): a difference this small in a kind's count is not the scenario's.
NOISE_CALLS = 64


def ratio_ok(orig: float, scn: float, tolerance: float = 0.10, floor: float = 0) -> bool:
    return abs(scn - orig) <= max(tolerance * abs(orig), floor)


def compare(orig: dict, scn: dict) -> List[Tuple[str, str, str, str]]:
    """(metric, original, scenario, verdict) rows."""
    rows = []
    kinds = sorted(set(orig["calls_by_kind"]) | set(scn["calls_by_kind"]))
    for k in kinds:
        a, b = orig["calls_by_kind"].get(k, 0), scn["calls_by_kind"].get(k, 0)
        rows.append((f"calls {k}", str(a), str(b), "ok" if ratio_ok(a, b, floor=NOISE_CALLS) else "off"))
    ks = ks_distance(orig["size_hist_log2"], scn["size_hist_log2"])
    rows.append(("size KS", "", f"{ks:.3f}", "ok" if ks <= 0.1 else "off"))
    ks = ks_distance(orig["lifetime_ops_hist_log2"], scn["lifetime_ops_hist_log2"])
    rows.append(("lifetime KS (ops)", "", f"{ks:.3f}", "ok" if ks <= 0.1 else "off"))
    a, b = orig["frees"]["cross_thread_share"], scn["frees"]["cross_thread_share"]
    rows.append(("cross-thread free share", f"{a:.3f}", f"{b:.3f}",
                 "ok" if abs(a - b) <= 0.1 * max(a, 0.01) or abs(a - b) <= 0.01 else "off"))
    a, b = orig["peak"]["bytes"], scn["peak"]["bytes"]
    rows.append(("peak live bytes", str(a), str(b), "ok" if ratio_ok(a, b) else "off"))
    a, b = orig["threads_alive_at_once"], scn["threads_alive_at_once"]
    rows.append(("threads alive at once", str(a), str(b), "ok" if a == b else "off"))
    return rows


def print_table(name: str, rows, times) -> None:
    print(f"\n== {name}   (capture wall time: original {times[0]:.2f} s, scenario {times[1]:.2f} s)")
    print(f"{'':28} {'original':>14} {'scenario':>14}  target")
    for metric, a, b, verdict in rows:
        print(f"{metric:28} {a:>14} {b:>14}  {verdict}")


# ------------------------------------------------------------ verdicts

def verdicts(name: str, m: Model, original: Path, work: Path, runs: int, seed: int) -> Tuple[List[str], dict]:
    """The scenario beside its original in one session under every allocator: per end (fastest, slowest,
    leanest, fattest) both picks, their ratios to glibc and agreement where the original's is significant."""
    options = ["--cwd", str(work)] + [x for k, v in m.params.items() for x in ("--param", f"{k}={v}")]
    if m.stdin:
        (work / "stdin").write_text(m.stdin)
        options += ["--stdin", str(work / "stdin")]
    try:
        analysis = fidelity.run_session([str(original), *m.args], EXAMPLES / m.scenario, ALLOCATORS, runs, seed,
                                        work / f"{name}.json", options)
        pair = fidelity.beside(analysis)
    except RuntimeError as e:
        raise Skip(str(e))
    glibc = {side: dict(pair["metrics"]["wall_s"][side]).get("glibc", float("nan")) for side in ("program", "scenario")}
    lines = [f"\n== {name}: verdicts, {runs} runs x {len(ALLOCATORS)} allocators (glibc wall time: original "
             f"{glibc['program']:.3f} s, scenario {glibc['scenario']:.3f} s)"]
    ends = []
    for metric in ("wall_s", "peak_rss_kib"):
        found = pair["metrics"][metric]
        to_base = found["to_baseline"]
        for e in found["ends"]:
            lines.append(f"  {fidelity.end_text(e, 'scenario'):<68} x glibc: original "
                         f"{fidelity.ratio_text(e['program'], to_base['program']):<23} scenario "
                         f"{fidelity.ratio_text(e['scenario'], to_base['scenario'])}".rstrip())
        ends += found["ends"]
    return lines, {"program": name, "verdicts": fidelity.verdicts_of(ends), "side_by_side": pair}


def agreement_line(summaries: List[dict]) -> str:
    """How many of the ends where the original's difference is significant the scenarios agree on."""
    significant = [v for s in summaries for v in s["verdicts"].values() if v["significant"]]
    agree = sum(v["real"] == v["replay"] for v in significant)
    ends = sum(len(s["verdicts"]) for s in summaries)
    return (f"verdicts: {agree}/{len(significant)} significant ends agree over {len(summaries)} models "
            f"({ends - len(significant)} of {ends} ends not significant in the original)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mimalloc-bench", required=True, type=Path, metavar="GITDIR")
    ap.add_argument("--shbench", type=Path, metavar="DIR", help="folder with sh6bench-new.c and sh8bench-new.c")
    ap.add_argument("--models", "--only", dest="only", metavar="NAMES", help="comma-separated model names")
    ap.add_argument("--keep", type=Path, metavar="DIR", help="keep builds and logs here (default: a temp dir)")
    ap.add_argument("--json", type=Path, metavar="FILE", help="also write the rows as JSON")
    ap.add_argument("--verdicts", action="store_true",
                    help="also run each scenario beside its original under the four allocators")
    ap.add_argument("--runs", type=int, default=5, help="measured runs per allocator for --verdicts (default 5)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the run order for --verdicts")
    args = ap.parse_args(argv)
    gitdir = git_dir(args.mimalloc_bench.resolve())
    names = args.only.split(",") if args.only else list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    if args.verdicts:
        load = os.getloadavg()
        print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    out, summaries = {}, []
    work_root = args.keep or Path(tempfile.mkdtemp(prefix="scenc-models-"))
    try:
        for name in names:
            m = MODELS[name]
            work = work_root / name
            work.mkdir(parents=True, exist_ok=True)
            try:
                original = build_original(name, m, gitdir, args.shbench, work)
                scenario = build_scenario(m)
                t_orig = capture([str(original), *m.args], work / "original.log", m.stdin)
                t_scn = capture([str(scenario)], work / "scenario.log")
                rows = compare(trace_stats(work / "original.log"), trace_stats(work / "scenario.log", True))
            except Skip as why:
                print(f"\n== {name}: skipped: {why}")
                out[name] = {"skipped": str(why)}
                continue
            print_table(name, rows, (t_orig, t_scn))
            out[name] = {"rows": rows, "capture_s": [t_orig, t_scn]}
            sys.stdout.flush()
            if args.verdicts:
                try:
                    lines, summary = verdicts(name, m, original, work, args.runs, args.seed)
                except Skip as why:
                    print(f"\n== {name}: verdicts skipped: {why}")
                    out[name]["verdicts_skipped"] = str(why)
                    continue
                print("\n".join(lines), flush=True)
                summaries.append(summary)
                out[name]["verdicts"] = summary
        if args.verdicts:
            print("\n" + "\n".join(fidelity.summary_table(summaries, "scenario")))
            print(agreement_line(summaries))
            load = os.getloadavg()
            print(f"load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    finally:
        if not args.keep:
            shutil.rmtree(work_root, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
