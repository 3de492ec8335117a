"""The yardstick: does a replay rank allocators as the real program does?

For each program of bench/programs/ (and python3 running a script), this bench

1. runs the REAL program under every allocator (glibc, tcmalloc, jemalloc,
   mimalloc: scenc's registry, LD_PRELOAD),
2. captures it once (`scenc capture --method preload`), converts the capture
   (`scenc convert`, an exact replay; --convert-arg passes options through),
   builds the replay, and captures the replay too (to compare what it does to
   the heap with what the program did),
3. runs the REPLAY under the same allocators, in the SAME rounds as the real
   program: each round runs every (program, real|replay, allocator) once, in
   shuffled order, so drift in the machine's load hits both alike; the first
   round is a warm-up and is dropped,

and prints, per program, side by side: trace statistics of capture and
replay (threads, threads active at most, cross-thread frees, peak live
bytes), then for wall time and peak RSS (both from wait4's rusage of the
child) each allocator's mean, its ratio to glibc with a 95% confidence
interval (Fieller, scenc.stats), the ranking, whether the fastest/slowest
(leanest/fattest) agree wherever the real program's difference is
significant, and the issue's peak-RSS checks:

* a program that takes its memory from malloc (the C programs): the replay's
  peak RSS within 20% + 2 MiB of the real program's, under every allocator;
* every program: each allocator's peak-RSS difference from glibc in the replay
  within 20% + 1 MiB of the same difference in the real program.

A final table sums up agreement per program. The bench reports; it exits 0
even when the replay disagrees (that is what it is for), 1 when something
could not be built, captured or run.

    .venv/bin/python bench/fidelity.py                  # about 10 minutes on 2 idle cores
    .venv/bin/python bench/fidelity.py --quick          # 3 runs each: about 3-4 minutes
        [--runs N] [--allocators glibc,tcmalloc,...] [--programs alloc_heavy,prodcons]
        [--convert-arg=--touch=first ...] [--seed N] [--workdir DIR] [--json FILE]

Programs are run by `Runner.measure` (wall time and peak RSS of one run of a
command under one allocator, through the small bench/programs/launch.c); when
`scenc run -- COMMAND` exists it can take that method's place.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from scenc import allocators as allocator_registry
from scenc.stats import compare, summarize

HERE = Path(__file__).resolve().parent
PROGRAMS_DIR = HERE / "programs"
DEFAULT_ALLOCATORS = "glibc,tcmalloc,jemalloc,mimalloc"
MIB = 1024.0                       # ru_maxrss is in KiB
RUN_TIMEOUT_S = 120.0


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


# --------------------------------------------------------------------------- one run
@dataclass
class Sample:
    wall_s: float
    maxrss_kib: int
    status: int                    # exit status, or -signal


class Runner:
    """Runs a command once under an allocator: its wall time and peak RSS (wait4's rusage), through
    bench/programs/launch.c (a child of this Python process would count the bench's own memory in its
    ru_maxrss). `measure` is the one place to swap for `scenc run -- COMMAND`."""

    def __init__(self, workdir: Path, cc: str = "gcc", timeout: float = RUN_TIMEOUT_S):
        self.launcher = workdir / "launch"
        self.timeout = timeout
        subprocess.run([cc, "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(self.launcher),
                        str(PROGRAMS_DIR / "launch.c")], check=True)

    def measure(self, argv: Sequence[str], allocator) -> Sample:
        settings = [f"{k}={v}" for k, v in allocator.preload_env(base_env={}).items()]
        proc = subprocess.run([str(self.launcher), *settings, "--", *argv], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=self.timeout)
        try:
            wall_ns, maxrss, status = map(int, proc.stdout.split())
        except ValueError:
            wall_ns, maxrss, status = 0, 0, proc.returncode or -1
        if status != 0:
            raise RuntimeError(f"{' '.join(argv)} under {allocator.name} ended with status {status}: "
                               f"{proc.stderr[-400:].decode(errors='replace').strip()}")
        return Sample(wall_ns / 1e9, maxrss, status)


# --------------------------------------------------------------------------- capture, convert, stats
def scenc_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scenc.cli", *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)


def capture(argv: Sequence[str], trace: Path) -> None:
    proc = scenc_cli("capture", "-o", str(trace), "--method", "preload", "--", *argv)
    if proc.returncode != 0:
        raise RuntimeError(f"scenc capture of {' '.join(argv)} failed ({proc.returncode}): "
                           f"{(proc.stdout + proc.stderr).strip()[-600:]}")


def convert(trace: Path, scn: Path, extra: Sequence[str]) -> List[str]:
    """Exact replay of a capture; the command line of the built replay."""
    proc = scenc_cli("convert", str(trace), "-o", str(scn), *extra)
    if proc.returncode != 0:
        raise RuntimeError(f"scenc convert {trace} failed ({proc.returncode}): {proc.stderr.strip()[-600:]}")
    from scenc.compiler.pipeline import build
    return [str(build(scn).binary)]


def trace_figures(trace: Path) -> Dict[str, float]:
    """What a capture did to the heap: calls, threads, threads active at once at most (between a thread's
    first and last allocator call: captures do not record thread start and exit), cross-thread share of
    frees, peak live bytes."""
    from scenc.trace.source import TraceSource
    from scenc.trace.stats import TraceStats
    source = TraceSource(trace)
    spans: Dict[int, List[int]] = {}

    def watched(events):
        for i, ev in enumerate(events):
            span = spans.get(ev.tid)
            if span is None:
                spans[ev.tid] = [i, i]
            else:
                span[1] = i
            yield ev

    d = TraceStats(source.report).consume(watched(source.events)).to_dict()
    steps = sorted([(a, 1) for a, _ in spans.values()] + [(b + 0.5, -1) for _, b in spans.values()])
    active = most = 0
    for _, step in steps:
        active += step
        most = max(most, active)
    return {"calls": d["events"], "threads": d["threads"], "threads_active_max": most,
            "cross_thread_share": d["frees"]["cross_thread_share"], "peak_live_bytes": d["peak"]["bytes"],
            "live_at_end_bytes": d["live_at_end"]["bytes"]}


# --------------------------------------------------------------------------- the rounds
def run_rounds(runner: Runner, units: Dict[Tuple[str, str], List[str]], allocators, runs: int, seed: int,
               progress=print) -> Dict[Tuple[str, str, str], List[Sample]]:
    """Every (program, real|replay) x allocator once per round, in shuffled order; round 0 is a warm-up."""
    rng = random.Random(seed)
    results: Dict[Tuple[str, str, str], List[Sample]] = {}
    plan = [(name, side, a) for (name, side) in units for a in allocators]
    for rnd in range(runs + 1):
        rng.shuffle(plan)
        started = time.perf_counter()
        for name, side, a in plan:
            sample = runner.measure(units[name, side], a)
            if rnd:
                results.setdefault((name, side, a.name), []).append(sample)
        progress(f"  round {rnd}/{runs}{' (warm-up)' if not rnd else ''}: {len(plan)} runs in "
                 f"{time.perf_counter() - started:.1f} s")
    return results


# --------------------------------------------------------------------------- the report
@dataclass
class Verdict:
    what: str                      # 'fastest', 'slowest', 'leanest', 'fattest'
    real: str
    replay: str
    significant: bool              # the real program's leader is significantly ahead of its runner-up

    @property
    def agrees(self) -> bool:
        return self.real == self.replay

    def text(self) -> str:
        if not self.significant:
            return f"{self.what:<8} real {self.real:<9} replay {self.replay:<9} (not significant in the real program)"
        return f"{self.what:<8} real {self.real:<9} replay {self.replay:<9} {'agree' if self.agrees else 'DISAGREE'}"


def extremes(values: Dict[str, List[float]], replay: Dict[str, List[float]], words: Tuple[str, str]) -> List[Verdict]:
    """The best and the worst allocator by mean (lower is better), real vs replay; significant when the
    real program's leader differs significantly from its runner-up."""
    out = []
    for word, reverse in ((words[0], False), (words[1], True)):
        order = sorted(values, key=lambda a: sum(values[a]) / len(values[a]), reverse=reverse)
        replay_order = sorted(replay, key=lambda a: sum(replay[a]) / len(replay[a]), reverse=reverse)
        significant = len(order) > 1 and compare(values[order[1]], values[order[0]]).significant
        out.append(Verdict(word, order[0], replay_order[0], significant))
    return out


def ratio_text(base: List[float], other: List[float]) -> str:
    c = compare(base, other)
    if c.ratio is None:
        return "-"
    ci = f"[{c.ratio_ci[0]:.2f}, {c.ratio_ci[1]:.2f}]" if c.ratio_ci else "[unbounded]"
    return f"{c.ratio:5.2f}x {ci:<14}{'*' if c.significant else ' '}"


def metric_block(title: str, unit: str, scale: float, real: Dict[str, List[float]], replay: Dict[str, List[float]],
                 words: Tuple[str, str]) -> Tuple[List[str], List[Verdict]]:
    names = list(real)
    lines = [f"{title}: mean, ratio to glibc [95% CI] (* significant)",
             f"  {'allocator':<10}{'real ' + unit:>12}  {'x glibc':<22}{'replay ' + unit:>12}  {'x glibc':<22}"]
    for a in names:
        lines.append(f"  {a:<10}{summarize(real[a]).mean / scale:>12.1f}  {ratio_text(real['glibc'], real[a]):<22}"
                     f"{summarize(replay[a]).mean / scale:>12.1f}  {ratio_text(replay['glibc'], replay[a]):<22}")
    rank = lambda d: " < ".join(sorted(d, key=lambda a: sum(d[a]) / len(d[a])))   # noqa: E731
    lines.append(f"  ranking  real:   {rank(real)}")
    lines.append(f"           replay: {rank(replay)}")
    verdicts = extremes(real, replay, words)
    lines += ["  " + v.text() for v in verdicts]
    return lines, verdicts


def rss_checks(program: Program, real: Dict[str, List[float]], replay: Dict[str, List[float]],
               ops_mib: float = 0.0) -> Tuple[List[str], int, int]:
    """The issue's peak-RSS targets; (lines, passed, checked). The replay's figure less the size of its ops
    file is shown beside it: a replay that maps its whole ops file counts it in its RSS."""
    mean = {side: {a: sum(v) / len(v) / MIB for a, v in d.items()} for side, d in (("real", real), ("replay", replay))}
    lines, passed, checked = [], 0, 0
    if program.malloc_based:
        lines.append(f"  replay peak RSS within 20% + 2 MiB of the real program's (ops file {ops_mib:.1f} MiB):")
        for a, r in mean["real"].items():
            p = mean["replay"][a]
            ok = abs(p - r) <= 0.2 * r + 2
            passed, checked = passed + ok, checked + 1
            lines.append(f"    {a:<10} real {r:7.1f} MiB  replay {p:7.1f} MiB  {'ok  ' if ok else 'FAIL'}"
                         f"  (replay - ops file {p - ops_mib:7.1f} MiB)")
    lines.append("  each allocator's peak-RSS difference from glibc within 20% + 1 MiB of the real one:")
    for a, r in mean["real"].items():
        if a == "glibc":
            continue
        dr, dp = r - mean["real"]["glibc"], mean["replay"][a] - mean["replay"]["glibc"]
        ok = abs(dp - dr) <= 0.2 * abs(dr) + 1
        passed, checked = passed + ok, checked + 1
        lines.append(f"    {a:<10} real {dr:+7.1f} MiB  replay {dp:+7.1f} MiB  {'ok' if ok else 'FAIL'}")
    return lines, passed, checked


def trace_block(cap: Dict[str, float], rep: Dict[str, float]) -> List[str]:
    rows = [("calls", "calls", "{:.0f}"), ("threads in all", "threads", "{:.0f}"),
            ("threads active at most", "threads_active_max", "{:.0f}"),
            ("cross-thread frees", "cross_thread_share", "{:.1%}"), ("peak live bytes", "peak_live_bytes", "{:.0f}"),
            ("live bytes at the end", "live_at_end_bytes", "{:.0f}")]
    lines = [f"  {'trace statistics':<26}{'capture':>14}{'replay':>14}"]
    lines += [f"  {label:<26}{fmt.format(cap[k]):>14}{fmt.format(rep[k]):>14}" for label, k, fmt in rows]
    return lines


def report(program: Program, results, allocators, figures) -> Tuple[List[str], dict]:
    names = [a.name for a in allocators]
    data = {side: {m: {a: [getattr(s, m) for s in results[program.name, side, a]] for a in names}
                   for m in ("wall_s", "maxrss_kib")} for side in ("real", "replay")}
    lines = [f"== {program.name}: {program.what} =="]
    lines += trace_block(*figures[program.name])
    wall, wall_v = metric_block("wall time", "ms", 1e-3, data["real"]["wall_s"], data["replay"]["wall_s"],
                                ("fastest", "slowest"))
    rss, rss_v = metric_block("peak RSS", "MiB", MIB, data["real"]["maxrss_kib"], data["replay"]["maxrss_kib"],
                              ("leanest", "fattest"))
    checks, passed, checked = rss_checks(program, data["real"]["maxrss_kib"], data["replay"]["maxrss_kib"],
                                         figures[program.name][1].get("ops_bytes", 0) / MIB / MIB)
    lines += wall + rss + checks
    verdicts = wall_v + rss_v
    summary = {"program": program.name, "verdicts": {v.what: {"real": v.real, "replay": v.replay,
                                                             "significant": v.significant} for v in verdicts},
               "rss_checks_passed": passed, "rss_checks": checked, "samples": data,
               "trace": {"capture": figures[program.name][0], "replay": figures[program.name][1]}}
    return lines, summary


def summary_table(summaries: List[dict]) -> List[str]:
    words = ("fastest", "slowest", "leanest", "fattest")
    lines = ["== summary: replay vs real program (agree / DISAGREE; '-' where the real difference is not "
             "significant) ==", f"  {'program':<14}" + "".join(f"{w:<10}" for w in words) + "RSS checks"]
    for s in summaries:
        cells = []
        for w in words:
            v = s["verdicts"][w]
            cells.append("-" if not v["significant"] else ("agree" if v["real"] == v["replay"] else "DISAGREE"))
        lines.append(f"  {s['program']:<14}" + "".join(f"{c:<10}" for c in cells)
                     + f"{s['rss_checks_passed']}/{s['rss_checks']} ok")
    return lines


# --------------------------------------------------------------------------- main
def prepare(programs: List[Program], workdir: Path, convert_args: Sequence[str], progress=print):
    """Build, capture, convert and capture the replay of each program: {(name, side): argv}, figures."""
    units: Dict[Tuple[str, str], List[str]] = {}
    figures = {}
    for p in programs:
        t0 = time.perf_counter()
        argv = build_program(p, workdir)
        trace = workdir / f"{p.name}.trace"
        capture(argv, trace)
        replay = convert(trace, workdir / f"{p.name}-replay.scn", convert_args)
        replay_trace = workdir / f"{p.name}-replay.trace"
        capture(replay, replay_trace)
        units[p.name, "real"], units[p.name, "replay"] = argv, replay
        figures[p.name] = (trace_figures(trace), trace_figures(replay_trace))
        ops = workdir / f"{p.name}-replay.ops"
        figures[p.name][1]["ops_bytes"] = ops.stat().st_size if ops.exists() else 0
        progress(f"  {p.name}: built, captured ({figures[p.name][0]['calls']:.0f} calls, "
                 f"{trace.stat().st_size >> 10} KiB), converted and its replay captured in "
                 f"{time.perf_counter() - t0:.1f} s")
    return units, figures


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=None, help="measured runs per program x allocator (default 10)")
    ap.add_argument("--quick", action="store_true", help="3 runs each")
    ap.add_argument("--allocators", default=DEFAULT_ALLOCATORS)
    ap.add_argument("--programs", default=",".join(p.name for p in PROGRAMS))
    ap.add_argument("--convert-arg", action="append", default=[], metavar="ARG",
                    help="passed to `scenc convert` (repeat for several), e.g. --convert-arg=--touch=first")
    ap.add_argument("--seed", type=int, default=1)
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
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="scenc-fidelity-"))
    workdir.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    print(f"fidelity: {len(programs)} programs x {len(allocators)} allocators x (real + replay), {runs} runs + "
          f"1 warm-up round; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; work in {workdir}")
    try:
        runner = Runner(workdir)
        units, figures = prepare(programs, workdir, args.convert_arg)
        results = run_rounds(runner, units, allocators, runs, args.seed)
    except (RuntimeError, subprocess.CalledProcessError) as e:
        print(f"fidelity: {e}", file=sys.stderr)
        return 1
    summaries = []
    for p in programs:
        lines, summary = report(p, results, allocators, figures)
        print("\n".join(lines) + "\n")
        summaries.append(summary)
    print("\n".join(summary_table(summaries)))
    load = os.getloadavg()
    print(f"load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "allocators": [a.name for a in allocators],
                                         "convert_args": args.convert_arg, "programs": summaries}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
