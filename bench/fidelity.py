"""The yardstick: does a replay rank allocators as the real program does?

For each program of bench/programs/ (and python3 running a script), this bench

1. captures the program once (`scenc capture --method preload`), converts the
   capture (`scenc convert`, an exact replay; --convert-arg passes options
   through), builds the replay, and captures the replay too (to compare what
   it does to the heap with what the program did);
2. runs the replay BESIDE the real program in one scenc session:

       scenc run PROG-replay.scn --allocators glibc,tcmalloc,jemalloc,mimalloc \
           --runs N --seed S -o PROG-result.json -- PROGRAM ARGS

   every round runs the replay and the program under every allocator once, in
   shuffled order, so drift in the machine's load hits both alike (scenc's
   warm-up first); the program's figures come from wait4 (scenc's launcher),
   each run's allocator proven by the preload proof; the replay's are its
   runtime's (timed region, VmHWM);
3. reads the session back with `scenc report --json` and prints its side by
   side (report/sidebyside.py: no statistics of the bench's own).

Printed per program: trace statistics of capture and replay (threads, threads
active at most, cross-thread frees, peak live bytes), then for wall time and
peak RSS each allocator's mean, its ratio to glibc with a 95% confidence
interval (`*` significant), both rankings, whether the fastest/slowest
(leanest/fattest) agree wherever the real program's difference is
significant, and the issue's peak-RSS checks:

* a program that takes its memory from malloc (the C programs): the replay's
  peak RSS within 20% + 2 MiB of the real program's, under every allocator;
* every program: each allocator's peak-RSS difference from glibc in the replay
  within 20% + 1 MiB of the same difference in the real program.

A final table sums up agreement per program. The bench reports; it exits 0
even when the replay disagrees (that is what it is for), 1 when something
could not be built, captured or run (a session's finished runs stay in its
result file in the work directory).

    .venv/bin/python bench/fidelity.py                  # 10 runs each
    .venv/bin/python bench/fidelity.py --quick          # 3 runs each
        [--runs N] [--allocators glibc,tcmalloc,...] [--programs alloc_heavy,prodcons]
        [--convert-arg=--touch=first ...] [--seed N] [--workdir DIR] [--json FILE]
        [--capture ltrace] [--program-args 'thread_churn=40 200']
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from scenc.allocators import registry as allocator_registry

HERE = Path(__file__).resolve().parent
PROGRAMS_DIR = HERE / "programs"
DEFAULT_ALLOCATORS = "glibc,tcmalloc,jemalloc,mimalloc"
MIB = 1024.0                       # peak RSS is in KiB


# --------------------------------------------------------------------------- the programs
@dataclass
class Program:
    name: str
    what: str                      # one line for the report
    source: Optional[str]          # a C file of bench/programs/, or None for a command of the system
    args: Tuple[str, ...] = ()
    malloc_based: bool = True      # takes its memory from malloc (the replay's RSS should match its RSS)
    argv: List[str] = field(default_factory=list)


PROGRAMS = [
    Program("alloc_heavy", "1 thread, varied sizes and lifetimes, writes every block", "alloc_heavy.c"),
    Program("thread_churn", "200 threads, 2 alive at a time, objects handed to the next", "thread_churn.c"),
    Program("prodcons", "2 producer/consumer pairs, 1-32768 B blocks, first and last byte written",
            "prodcons.c"),
    Program("python3", "python3 running bench/programs/py_work.py (json, dicts, lists, bytes)", None,
            ("/usr/bin/python3", str(PROGRAMS_DIR / "py_work.py")), malloc_based=False),
]


def build_program(program: Program, workdir: Path, cc: str = "gcc") -> List[str]:
    """The command line of a program, compiled into workdir when it is ours."""
    if program.source is None:
        return list(program.args)
    binary = workdir / program.name
    subprocess.run([cc, "-O2", "-pthread", "-Wall", "-Wextra", "-Werror", "-o", str(binary),
                    str(PROGRAMS_DIR / program.source)], check=True)
    return [str(binary), *program.args]


# --------------------------------------------------------------------------- capture, convert, stats
SCENC = [sys.executable, "-c", "import sys; from scenc.cli import main; sys.exit(main())"]   # the console script's
# way (`python -m scenc.cli` would load cli.py twice, as __main__ and as scenc.cli)


def scenc_cli(*args: str, env: Optional[dict] = None) -> subprocess.CompletedProcess:
    """scenc ARGS, its output kept; env: the environment (None: this process's)."""
    return subprocess.run([*SCENC, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def capture(argv: Sequence[str], trace: Path, method: str = "preload", env: Optional[dict] = None) -> None:
    """method ltrace: `-e` (the program's own calls; -x crashes threaded programs), retried when ltrace 0.7.3
    crashes the program, each attempt stopped after 10 minutes. env: scenc's environment (None: this process's)."""
    how = ["--method", "preload"] if method == "preload" else ["--method", "ltrace", "--mode", "e", "--retries", "8",
                                                               "--timeout", "600"]
    proc = scenc_cli("capture", "-o", str(trace), *how, "--", *argv, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"scenc capture of {' '.join(argv)} failed ({proc.returncode}): "
                           f"{(proc.stdout + proc.stderr).strip()[-600:]}")


def convert(trace: Path, scn: Path, extra: Sequence[str]) -> List[str]:
    """Exact replay of a capture; the command line of the built replay."""
    proc = scenc_cli("convert", str(trace), "-o", str(scn), *extra)
    if proc.returncode not in (0, 4):       # 4: written, from an incomplete capture (its warning says what was lost)
        raise RuntimeError(f"scenc convert {trace} failed ({proc.returncode}): {proc.stderr.strip()[-600:]}")
    from scenc.compiler.pipeline import build
    return [str(build(scn).binary)]


THREAD_RECORDS = ("thread_start", "thread_exit")


def trace_figures(trace: Path) -> Dict[str, float]:
    """What a capture did to the heap: calls, threads, threads alive at once at most (from a thread's start
    record, or its first allocator call, to its exit record, or its last call), cross-thread share of frees,
    peak live bytes. The tracer's other records (the program's own mappings) are not allocator calls."""
    from scenc.trace.source import TraceSource
    from scenc.trace.profile import TraceStats
    source = TraceSource(trace, extra_events=True)
    spans: Dict[int, List[int]] = {}

    def calls(events):
        for i, ev in enumerate(events):
            span = spans.setdefault(ev.tid, [i, i])
            span[1] = i
            if ev.kind not in THREAD_RECORDS and ev.kind not in ("mmap", "munmap", "mremap"):
                yield ev

    d = TraceStats(source.report).consume(calls(source.events)).to_dict()
    steps = sorted([(a, 1) for a, _ in spans.values()] + [(b + 0.5, -1) for _, b in spans.values()])
    active = most = 0
    for _, step in steps:
        active += step
        most = max(most, active)
    return {"calls": d["events"], "threads": d["threads"], "threads_active_max": most,
            "cross_thread_share": d["frees"]["cross_thread_share"], "peak_live_bytes": d["peak"]["bytes"],
            "live_at_end_bytes": d["live_at_end"]["bytes"]}


# --------------------------------------------------------------------------- one session per program
def run_session(argv: Sequence[str], replay_scn: Path, allocators: Sequence[str], runs: int, seed: int,
                result: Path, options: Sequence[str] = ()) -> dict:
    """`scenc run REPLAY.scn -- PROGRAM ARGS`: the replay (or a scenario) beside its program in one session
    (both under every allocator in the same shuffled rounds, after scenc's warm-up), then the session's
    analysis as `scenc report --json` prints it; options go to `scenc run` (--param, --stdin, --cwd).
    A failed run stops the bench; its runs stay in the result file."""
    proc = scenc_cli("run", str(replay_scn), "--allocators", ",".join(allocators), "--runs", str(runs),
                     "--seed", str(seed), "--quiet", "-o", str(result), *options, "--", *argv)
    if proc.returncode != 0:
        raise RuntimeError(f"scenc run {replay_scn.name} -- {' '.join(argv)} failed ({proc.returncode}): "
                           f"{(proc.stdout + proc.stderr).strip()[-800:]}\n(the runs are kept in {result})")
    shown = scenc_cli("report", str(result), "--json")
    if shown.returncode != 0:
        raise RuntimeError(f"scenc report {result} failed ({shown.returncode}): {shown.stderr.strip()[-600:]}")
    return json.loads(shown.stdout)


# --------------------------------------------------------------------------- the report
# Everything below formats what `scenc report --json` computed (report/sidebyside.py): means, rankings,
# ratios to glibc with their intervals, and agreement at the significant ends. No statistics of its own.
METRICS = (("wall_s", "wall time", "ms", 1e-3, ("fastest", "slowest")),
           ("peak_rss_kib", "peak RSS", "MiB", MIB, ("leanest", "fattest")))


def beside(analysis: dict) -> dict:
    """The session's one side-by-side entry: the replay beside its program."""
    pairs = analysis.get("side_by_side") or []
    if len(pairs) != 1:
        raise RuntimeError(f"{analysis.get('result_file')}: expected the replay beside its program, "
                           f"found {len(pairs)} side-by-side entries")
    return pairs[0]


def ratio_text(name: str, to_baseline: dict) -> str:
    c = to_baseline.get(name)
    if c is None:
        return "1.00x (baseline)"
    if c["ratio"] is None:
        return "-"
    ci = f"[{c['ratio_ci'][0]:.2f}, {c['ratio_ci'][1]:.2f}]" if c["ratio_ci"] else "[unbounded]"
    return f"{c['ratio']:5.2f}x {ci:<14}{'*' if c['significant'] else ' '}"


def end_text(end: dict, stand_in: str = "replay") -> str:
    what = f"{end['word']:<8} real {end['program']:<9} {stand_in} {end['scenario']:<9}"
    if not end["significant"]:
        return what + " (not significant in the real program)"
    return what + (" agree" if end["agrees"] else " DISAGREE")


def metric_block(title: str, unit: str, scale: float, names: Sequence[str], found: dict) -> List[str]:
    """One metric of the side-by-side entry: both means, both ratios to glibc, rankings, the ends."""
    real, replay = dict(found["program"]), dict(found["scenario"])
    lines = [f"{title}: mean, ratio to glibc [95% CI] (* significant)",
             f"  {'allocator':<10}{'real ' + unit:>12}  {'x glibc':<22}{'replay ' + unit:>12}  {'x glibc':<22}"]
    for a in names:
        if a not in real or a not in replay:
            lines.append(f"  {a:<10}{'(too few ok runs)':>12}")
            continue
        lines.append(f"  {a:<10}{real[a] / scale:>12.1f}  {ratio_text(a, found['to_baseline']['program']):<22}"
                     f"{replay[a] / scale:>12.1f}  {ratio_text(a, found['to_baseline']['scenario']):<22}")
    lines.append(f"  ranking  real:   {' < '.join(a for a, _ in found['program'])}")
    lines.append(f"           replay: {' < '.join(a for a, _ in found['scenario'])}")
    return [line.rstrip() for line in lines] + ["  " + end_text(e) for e in found["ends"]]


def rss_checks(program: Program, real_kib: Dict[str, float],
               replay_kib: Dict[str, float]) -> Tuple[List[str], int, int]:
    """The issue's peak-RSS targets on the mean peak RSS of each side; (lines, passed, checked)."""
    real = {a: v / MIB for a, v in real_kib.items()}
    replay = {a: v / MIB for a, v in replay_kib.items()}
    lines, passed, checked = [], 0, 0
    if program.malloc_based:
        lines.append("  replay peak RSS within 20% + 2 MiB of the real program's:")
        for a, r in real.items():
            p = replay.get(a, float("nan"))
            ok = abs(p - r) <= 0.2 * r + 2
            passed, checked = passed + ok, checked + 1
            lines.append(f"    {a:<10} real {r:7.1f} MiB  replay {p:7.1f} MiB  {'ok' if ok else 'FAIL'}")
    lines.append("  each allocator's peak-RSS difference from glibc within 20% + 1 MiB of the real one:")
    for a, r in real.items():
        if a == "glibc":
            continue
        dr, dp = r - real["glibc"], replay.get(a, float("nan")) - replay["glibc"]
        ok = abs(dp - dr) <= 0.2 * abs(dr) + 1
        passed, checked = passed + ok, checked + 1
        lines.append(f"    {a:<10} real {dr:+7.1f} MiB  replay {dp:+7.1f} MiB  {'ok' if ok else 'FAIL'}")
    return lines, passed, checked


BASELINE_METRICS = ("baseline_rss_kib", "memory:baseline_rss_kib")   # the runtime's, the memory probe's


def baseline_line(analysis: dict) -> List[str]:
    """The replay's baseline RSS, where the session measured it (the heap's share of the peak is the rest)."""
    block = next(b for b in analysis["blocks"] if b["target"] == "scenario")
    for metric in BASELINE_METRICS:
        means = {a: s["metrics"][metric]["mean"] for a, s in block["allocators"].items() if metric in s["metrics"]}
        if means:
            return ["  replay RSS before its first allocator call: "
                    + ", ".join(f"{a} {v / MIB:.1f} MiB" for a, v in means.items())]
    return []


def report(program: Program, analysis: dict, names: Sequence[str], figures) -> Tuple[List[str], dict]:
    """The lines of one program's report and its summary; figures: (capture's, replay's) trace_figures."""
    pair = beside(analysis)
    lines = [f"== {program.name}: {program.what} =="]
    lines += trace_block(*figures)
    ends = {}
    for metric, title, unit, scale, _ in METRICS:
        found = pair["metrics"][metric]
        lines += metric_block(title, unit, scale, names, found)
        ends.update({e["word"]: e for e in found["ends"]})
    rss = pair["metrics"]["peak_rss_kib"]
    in_order = lambda ranked: {a: dict(ranked)[a] for a in names if a in dict(ranked)}   # noqa: E731
    checks, passed, checked = rss_checks(program, in_order(rss["program"]), in_order(rss["scenario"]))
    lines += baseline_line(analysis) + checks
    summary = {"program": program.name, "result_file": analysis.get("result_file"),
               "verdicts": verdicts_of(ends.values()),
               "rss_checks_passed": passed, "rss_checks": checked, "side_by_side": pair,
               "trace": {"capture": figures[0], "replay": figures[1]}}
    return lines, summary

def verdicts_of(ends) -> dict:
    """The side-by-side entry's ends by word: what summary_table reads."""
    return {e["word"]: {"real": e["program"], "replay": e["scenario"], "significant": e["significant"],
                        "agrees": e.get("agrees")} for e in ends}


def trace_block(cap: Dict[str, float], rep: Dict[str, float]) -> List[str]:
    rows = [("calls", "calls", "{:.0f}"), ("threads in all", "threads", "{:.0f}"),
            ("threads alive at most", "threads_active_max", "{:.0f}"),
            ("cross-thread frees", "cross_thread_share", "{:.1%}"), ("peak live bytes", "peak_live_bytes", "{:.0f}"),
            ("live bytes at the end", "live_at_end_bytes", "{:.0f}")]
    lines = [f"  {'trace statistics':<26}{'capture':>14}{'replay':>14}"]
    lines += [f"  {label:<26}{fmt.format(cap[k]):>14}{fmt.format(rep[k]):>14}" for label, k, fmt in rows]
    lines.append(f"  {'replay ops file':<26}{'':>14}{rep.get('ops_bytes', 0) / MIB / MIB:>10.1f} MiB")
    return lines


def summary_table(summaries: List[dict], stand_in: str = "replay") -> List[str]:
    """One row per program: agree / DISAGREE at each end, '-' where the real difference is not significant;
    the RSS checks where the summaries have them."""
    words = ("fastest", "slowest", "leanest", "fattest")
    rss = all("rss_checks" in s for s in summaries)
    lines = [f"== summary: {stand_in} vs real program (agree / DISAGREE; '-' where the real difference is not "
             "significant) ==", (f"  {'program':<20}" + "".join(f"{w:<10}" for w in words) + ("RSS checks" if rss else "")).rstrip()]
    for s in summaries:
        cells = []
        for w in words:
            v = s["verdicts"].get(w)
            if not v or not v["significant"]:
                cells.append("-")
            else:
                # the report's judgement: a stand-in that names one of the program's tied allocators agrees
                # ("mimalloc and tcmalloc" against "mimalloc"), as the block above the table says
                agrees = v["real"] == v["replay"] if v.get("agrees") is None else v["agrees"]
                cells.append("agree" if agrees else "DISAGREE")
        lines.append((f"  {s['program']:<20}" + "".join(f"{c:<10}" for c in cells)
                      + (f"{s['rss_checks_passed']}/{s['rss_checks']} ok" if rss else "")).rstrip())
    return lines


# --------------------------------------------------------------------------- main
def prepare(program: Program, workdir: Path, convert_args: Sequence[str], progress=print, method: str = "preload"):
    """Build, capture (with `method`) and convert a program, build its replay and capture that too (with the
    tracer): (the program's command line, the replay's .scn, (capture figures, replay figures))."""
    t0 = time.perf_counter()
    argv = build_program(program, workdir)
    trace = workdir / f"{program.name}.{'ltrace' if method == 'ltrace' else 'trace'}"
    capture(argv, trace, method)
    scn = workdir / f"{program.name}-replay.scn"
    replay = convert(trace, scn, convert_args)
    replay_trace = workdir / f"{program.name}-replay.trace"
    capture(replay, replay_trace)
    figures = (trace_figures(trace), trace_figures(replay_trace))
    ops = scn.with_suffix(".ops")
    figures[1]["ops_bytes"] = ops.stat().st_size if ops.exists() else 0
    progress(f"  {program.name}: built, captured ({figures[0]['calls']:.0f} calls, {trace.stat().st_size >> 10} KiB),"
             f" converted and its replay captured in {time.perf_counter() - t0:.1f} s")
    return argv, scn, figures


def measure(program: Program, workdir: Path, convert_args: Sequence[str], allocators: Sequence[str], runs: int,
            seed: int, progress=print, method: str = "preload") -> Tuple[List[str], dict]:
    """Prepare a program, run its replay beside it (one session), and report them side by side."""
    argv, scn, figures = prepare(program, workdir, convert_args, progress, method)
    t0 = time.perf_counter()
    analysis = run_session(argv, scn, allocators, runs, seed, workdir / f"{program.name}-result.json")
    progress(f"  {program.name}: replay beside the program, {len(allocators)} allocators x {runs} runs "
             f"+ warm-up, in {time.perf_counter() - t0:.1f} s")
    return report(program, analysis, allocators, figures)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=None, help="measured runs per program x allocator (default 10)")
    ap.add_argument("--quick", action="store_true", help="3 runs each")
    ap.add_argument("--allocators", default=DEFAULT_ALLOCATORS)
    ap.add_argument("--programs", default=",".join(p.name for p in PROGRAMS))
    ap.add_argument("--convert-arg", action="append", default=[], metavar="ARG",
                    help="passed to `scenc convert` (repeat for several), e.g. --convert-arg=--touch=first")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--capture", choices=("preload", "ltrace"), default="preload",
                    help="how the program is captured (the replay is always captured with the tracer)")
    ap.add_argument("--program-args", action="append", default=[], metavar="NAME=ARGS",
                    help="run program NAME with these arguments instead of its own, e.g. "
                         "--program-args='thread_churn=40 200' (ltrace captures are slow)")
    ap.add_argument("--workdir", type=Path, default=None, help="keep captures and replays here")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    runs = args.runs or (3 if args.quick else 10)
    try:
        allocators = allocator_registry.resolve(args.allocators)
    except allocator_registry.AllocatorError as e:
        print(f"fidelity: {e}", file=sys.stderr)
        return 1
    if allocators[0].name != "glibc":
        print("fidelity: the first allocator must be glibc (the baseline)", file=sys.stderr)
        return 1
    wanted = args.programs.split(",")
    programs = [p for p in PROGRAMS if p.name in wanted]
    unknown = set(wanted) - {p.name for p in programs}
    if unknown:
        print(f"fidelity: unknown program(s) {', '.join(sorted(unknown))}; known: "
              f"{', '.join(p.name for p in PROGRAMS)}", file=sys.stderr)
        return 1
    for spec in args.program_args:
        name, _, given = spec.partition("=")
        programs = [replace(p, args=tuple(given.split())) if p.name == name else p for p in programs]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="scenc-fidelity-"))
    workdir.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    print(f"fidelity: {len(programs)} programs x {len(allocators)} allocators x (real + replay), {runs} runs + "
          f"scenc's warm-up, one session per program; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"work in {workdir}")
    summaries = []
    names = [a.name for a in allocators]
    try:
        for p in programs:
            lines, summary = measure(p, workdir, args.convert_arg, names, runs, args.seed, method=args.capture)
            print("\n".join(lines) + "\n", flush=True)
            summaries.append(summary)
    except (RuntimeError, subprocess.CalledProcessError) as e:
        print(f"fidelity: {e}", file=sys.stderr)
        return 1
    print("\n".join(summary_table(summaries)))
    load = os.getloadavg()
    print(f"load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "allocators": [a.name for a in allocators],
                                         "convert_args": args.convert_arg, "programs": summaries}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
