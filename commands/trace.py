"""`scenc capture`, `scenc trace-stats`, `scenc convert`: from a real program to a scenario.

    scenc capture -o app.ltrace -- ./app --its --args     # ltrace (default) or --method preload
    scenc trace-stats app.ltrace [--json]                  # an ltrace log or a tracer log
    scenc convert app.ltrace -o app.scn                    # exact replay (app.ops beside it)
    scenc convert app.ltrace --model -o app-model.scn      # fitted model (trace/model/__init__.py)

Exit status (commands/options.py): 0 done; 4 done, but the capture is incomplete
(capture, trace-stats) or saw nothing; 64 the input cannot be used (not a
log, no such program, nothing to convert). A capture cut short by a crash
still converts: the command says what was lost and exits 0.
"""

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import EXIT_INCOMPLETE, EXIT_OK, UnusableInput
from ..compiler.build import default_cc
from ..trace.opsfile import DEFAULT_TOUCH, TOUCH_MODES

if TYPE_CHECKING:
    from ..trace.ltrace import ParseReport
# The readers (source.py, ltrace.py with its regexes) are imported by the commands that read a capture:
# cli.py imports this module for every command's parser.

SHOWN_THREADS = 32         # threads listed one by one in convert's summary

def anomaly_lines(report: "ParseReport", max_lines: int = 5) -> list:
    """One line per anomaly kind: severity, kind, count, first lines (errors first)."""
    from ..trace.events import ANOMALY_KINDS
    order = {"error": 0, "warning": 1, "info": 2}
    out = []
    for kind, n in sorted(report.anomaly_counts.items(),
                          key=lambda kv: (order[ANOMALY_KINDS.get(kv[0], ("warning",))[0]], kv[0])):
        sev = ANOMALY_KINDS.get(kind, ("warning", ""))[0]
        lines = report.first_lines(kind)[:max_lines]
        where = f"  lines {', '.join(map(str, lines))}{', ...' if n > len(lines) else ''}" if lines else ""
        out.append(f"{sev:<7} {kind:<30} {n:>8}{where}")
    return out


# --------------------------------------------------------------------------- capture
def cmd_capture(args) -> int:
    from ..trace.capture import CaptureError
    from ..trace.source import TraceInputError
    argv = list(args.program)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise TraceInputError("no program to capture: scenc capture -o app.ltrace -- ./app ARGS")
    out = Path(args.output)
    try:
        if args.method == "preload":
            from ..trace.capture.preload import capture_preload
            result = capture_preload(argv, out, timeout=args.timeout)
        else:
            from ..trace.capture.ltrace import capture
            result = capture(argv, out, mode=args.mode, retries=args.retries, timeout=args.timeout)
    except CaptureError as e:
        raise TraceInputError(str(e)) from None
    if args.method == "preload":
        ok = _print_preload_capture(result, out)
    else:
        ok = _print_ltrace_capture(result, out)
    for w in result.warnings:
        print(f"warning: {_as_options(w)}", file=sys.stderr)
    if result.events:
        print(f"next: scenc trace-stats {out}   |   scenc convert {out} -o {out.stem}.scn")
    return EXIT_OK if ok else EXIT_INCOMPLETE


def _as_options(warning: str) -> str:
    """The capture module's advice names its Python arguments; say them as this command's options."""
    for python, option in (("mode='x'", "--mode x"), ("mode='e'", "--mode e"), ("(mode=x)", "(--mode x)"),
                           ("(mode=e)", "(--mode e)"), ("retries=N", "--retries N"),
                           ("(method='preload')", "(--method preload)")):
        warning = warning.replace(python, option)
    return warning


def _kinds_line(counts: dict) -> str:
    return ", ".join(f"{k} {n}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))) or "none"


def _print_ltrace_capture(r, out: Path) -> bool:
    mode = {"x": "ltrace -L -x (every call, libc's own included)", "e": "ltrace -e (the program's PLT calls)"}
    status = ("killed by " + r.report.killed_by if r.report is not None and r.report.killed_by else
              f"exit status {r.tracee_status}" if r.tracee_status is not None else "no exit line")
    print(f"captured {out}: {r.events} allocator calls in {r.stats.threads if r.stats else 0} thread(s) with "
          f"{mode.get(r.mode, r.mode)}, {r.attempts} attempt(s); program {status}")
    if r.stats is not None:
        print(f"  calls: {_kinds_line(r.stats.calls_by_kind)}")
        print(f"  peak live {r.stats.peak_bytes} bytes, {r.stats.cross_thread_frees} cross-thread frees")
    if r.crashed:
        print("  the capture is INCOMPLETE (see the warnings); it still converts, with what was seen")
    return r.ok


def _print_preload_capture(r, out: Path) -> bool:
    status = (f"killed by {r.signal}" if r.signal else "timed out" if r.tracee_status is None
              else f"exit status {r.tracee_status}")
    print(f"captured {out}: {r.events} allocator calls in {r.threads} thread(s) with the LD_PRELOAD tracer in "
          f"{r.wall_s:.2f} s; program {status}")
    print(f"  calls: {_kinds_line(r.counts)}")
    if not r.complete:
        print("  the capture is INCOMPLETE (see the warnings); it still converts, with what was seen")
    return r.ok


# --------------------------------------------------------------------------- trace-stats
def cmd_trace_stats(args) -> int:
    from ..trace.source import TraceSource
    from ..trace.profile import TraceStats, format_trace_stats
    source = TraceSource(args.file, extra_events=True)
    stats = TraceStats(source.report).consume(source.events)
    if args.json:
        d = stats.to_dict()
        d["format"] = source.format
        if source.format == "preload":
            info = source.events.info
            d["preload"] = {"pid": info.pid, "records": info.records, "missing": info.missing, "ended": info.ended}
        print(json.dumps(d, indent=1))
    else:
        text = format_trace_stats(stats)
        if source.format == "preload":
            text = _preload_header(text, stats, source)
        sys.stdout.write(text)
    return EXIT_INCOMPLETE if source.report.incomplete else EXIT_OK


def _preload_header(text: str, stats, source) -> str:
    """format_trace_stats speaks of ltrace lines and exit lines; say what a tracer log is instead."""
    info = source.events.info
    lines = text.split("\n")
    lines[0] = (f"trace {source.path}: {info.records} records, {stats.ops} allocator events, {stats.threads} threads, "
                f"captured with the LD_PRELOAD tracer (pid {info.pid})")
    lines = [ln for ln in lines if not ln.startswith("  INCOMPLETE capture:")]
    if source.losses():
        lines.insert(1, "  INCOMPLETE capture: " + "; ".join(source.losses()) + ". The figures below cover what "
                        "was written.")
    return "\n".join(lines)


# --------------------------------------------------------------------------- convert
def cmd_convert(args) -> int:
    from ..trace.source import TraceInputError, TraceSource
    # The exact replay's converter reads a tracer log itself (runtime/tools/convert.c): no indexing here; nor does it
    # use an ltrace log's timestamps: not read.
    source = TraceSource(args.file, extra_events=True, index=args.model, times=args.model)
    default = f"{source.path.stem}{'-model' if args.model else ''}.scn"
    out = Path(args.output or default)
    if out.suffix != ".scn":
        raise TraceInputError(f"{out}: the output is a scenario and must end in .scn")
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.model:
        from ..trace.model import ModelRunError, calibrate_peak, measure_peak, write_model
        touch = _model_touch(source, args.touch)
        model = write_model(source.events, out, source_name=source.path.name, max_phases=args.max_phases,
                            touch=touch)
        _check_calls(source, model.calls, [out, *model.data_files])
        _self_check(out)
        if not args.no_measure:
            try:
                if not args.no_calibrate:
                    # Seconds to a minute: say so before the builds start.
                    print("calibrating the model's lifetimes on the capture's peak of live bytes (it is built and "
                          "run with the live probe a few times; --no-calibrate skips this)", file=sys.stderr)
                    calibrate_peak(model, cc=args.cc)
                measure_peak(model, cc=args.cc)
            except ModelRunError as e:
                raise TraceInputError(str(e)) from None
        print(f"modelled {source.path} -> {out}" + "".join(f" + {p.name}" for p in model.data_files))
        for line in model.summary_lines():
            print("  " + line)
        _print_losses(source)
    else:
        from ..trace.replay import write_replay
        if source.format == "preload":
            report = write_replay(source.path, out, source.path.name, touch=args.touch, main_tid=source.main_tid(),
                                  found=source.adopt_log_info)
        else:
            report = write_replay(source.events, out, source.path.name, touch=args.touch, main_tid=source.main_tid())
        _check_calls(source, report.calls, [out, out.with_suffix(".ops")])
        _note_losses(out, source.losses())
        ops = out.with_suffix(".ops")
        print(f"converted {source.path} -> {out} + {ops.name} ({report.calls} calls, "
              f"{ops.stat().st_size / 1024:.0f} KiB)")
        for line in replay_summary(report):
            print("  " + line)
        _print_losses(source)
    print(f"run it: scenc run {out} --allocators glibc,jemalloc,mimalloc")
    return EXIT_INCOMPLETE if source.damaged else EXIT_OK      # a log cut inside a record: converted, but damaged


def _model_touch(source, touch: str) -> str:
    """A model's `touch_new`: the mode given, or for auto the one the exact replay's converter chooses from the
    same capture (a tracer log's sampled pages and faults; pages without a reading, as for an ltrace log)."""
    if touch != "auto":
        return touch
    if source.format != "preload":
        return "pages"
    from ..trace.replay import auto_touch
    return auto_touch(source.path, source.main_tid())


def _note_losses(scn: Path, losses: list) -> None:
    """An incomplete capture says so in the scenario it became, not only on the terminal."""
    if losses:
        lines = ["# INCOMPLETE capture: the replay holds the calls that were seen. Lost:"]
        lines += [f"#   - {sentence}" for sentence in losses]
        scn.write_text("\n".join(lines) + "\n" + scn.read_text())


def _check_calls(source, converted: int, written: list) -> None:
    from ..trace.source import TraceInputError
    if converted == 0:
        for path in written:             # a scenario of nothing would only fail later, less clearly
            path.unlink(missing_ok=True)
        raise TraceInputError(f"{source.path}: the capture holds no allocator call: nothing to convert"
                              + (" (" + "; ".join(source.losses()) + ")" if source.losses() else ""))


def _print_losses(source) -> None:
    losses = source.losses()
    if losses:
        print(f"warning: {source.path} is an INCOMPLETE capture; the scenario covers the calls that were seen. "
              f"Lost:", file=sys.stderr)
        for sentence in losses:
            print(f"  - {sentence}", file=sys.stderr)
    if source.report.anomaly_counts:
        print("  anomalies in the capture (every one counted; 'info' ones were handled):")
        for line in anomaly_lines(source.report):
            print("    " + line)


def replay_summary(report) -> list:
    """The ReplayReport in a few lines: threads, calls per kind, waits, peak, every degraded call."""
    from ..trace.replay import threads_line, touch_line    # for convert only: every command's parser imports this module
    out = []
    totals: dict = {}
    for counts in report.counts:
        for k, n in counts.items():
            totals[k] = totals.get(k, 0) + n
    kinds = sorted(totals, key=lambda k: (-totals[k], k))
    renamed = {k: n for k, n in sorted(report.trace_kinds.items()) if k not in totals}
    out.append(f"calls: {_kinds_line(totals)} ({report.calls} in all, every captured call replayed"
               + (f"; replayed under the runtime's names: {_kinds_line(renamed)}" if renamed else "") + ")")
    out.append(f"threads: {report.threads} ({threads_line(report)})")
    if report.touch_auto:
        out.append(f"touch: {touch_line(report)}")
    for i, (tid, counts) in enumerate(zip(report.tids[:SHOWN_THREADS], report.counts)):
        per = "  ".join(f"{k} {counts.get(k, 0)}" for k in kinds)
        out.append(f"  trace[{i}]  tid {tid:<8} {per}")
    if report.threads > SHOWN_THREADS:
        out.append(f"  ... and {report.threads - SHOWN_THREADS} more thread(s) (scenc exec on the scenario lists "
                   f"them all)")
    out.append(f"cross-thread waits: {report.cross_thread_waits} ops wait for another thread "
               f"(cross-thread frees and reuse of a block freed by a thread not joined yet)")
    out.append(f"peak live: {report.peak_live_bytes} bytes (line {report.peak_line}); "
               f"{report.live_at_end} objects live at the end")
    if report.degraded:
        out.append(f"degraded calls ({sum(report.degraded.values())}, replayed as the same kind of call):")
        for what, n in sorted(report.degraded.items(), key=lambda kv: -kv[1]):
            lines = report.degraded_lines[what]
            out.append(f"  {n:>7} x {what}; lines {', '.join(map(str, lines))}{', ...' if n > len(lines) else ''}")
    else:
        out.append("degraded calls: none")
    return out


def _self_check(path: Path) -> None:
    """A model the compiler refuses is a bug of the model writer: say so plainly, never ship it silently."""
    from ..compiler.pipeline import load
    from ..scenario.errors import ScenarioError
    from ..trace.source import TraceInputError
    try:
        loaded = load(path)
    except ScenarioError as exc:
        raise TraceInputError(f"the generated model {path} does not pass `scenc check` (a bug in scenc's model "
                              f"writer, please report it):\n{exc.render()}") from None
    for w in loaded.warnings:
        print(w.render(loaded.resolved.scenario.source), file=sys.stderr)


# --------------------------------------------------------------------------- registration
def _guarded(name, func):
    """User errors as one clear sentence (cli.main gives them exit status 64), never a traceback."""
    def run(args):
        from ..trace.ltrace import TraceFormatError
        from ..trace.source import TraceInputError
        try:
            return func(args)
        except TraceFormatError as e:
            raise UnusableInput(str(e)) from None
        except TraceInputError as e:
            raise UnusableInput(f"scenc {name}: {e}") from None
        except BrokenPipeError:
            raise
        except OSError as e:
            where = f"{e.filename}: " if e.filename else ""
            raise UnusableInput(f"scenc {name}: {where}{e.strerror or e}") from None
    return run


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "capture", help="run a program and record its allocator calls (ltrace or an LD_PRELOAD tracer)",
        description="Run COMMAND and record every allocator call it makes, then say whether the capture is "
                    "complete and, if it saw nothing or too little, why and what to try.",
        usage="scenc capture -o FILE [--method ltrace|preload] [--retries N] -- COMMAND [ARGS...]")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the log to write")
    p.add_argument("--method", choices=("ltrace", "preload"), default="ltrace",
                   help="ltrace (default; 100-1000x slower, may crash threaded programs) or preload "
                        "(the LD_PRELOAD tracer: sees every call, costs microseconds)")
    p.add_argument("--mode", choices=("auto", "x", "e"), default="auto",
                   help="ltrace: -L -x breakpoints (x: every call, crashes most threaded programs), -e PLT "
                        "breakpoints (e: the program's own calls), or auto: x, then e if every x attempt crashed")
    p.add_argument("--retries", type=int, default=2, metavar="N",
                   help="ltrace: attempts more per mode when a capture crashes (default 2)")
    p.add_argument("--timeout", type=float, metavar="SECONDS", help="stop the program after this long")
    p.add_argument("program", nargs=argparse.REMAINDER, metavar="COMMAND",
                   help="the program and its arguments, after --")
    p.set_defaults(func=_guarded("capture", cmd_capture))

    p = subparsers.add_parser(
        "trace-stats", help="statistics of a capture: calls, sizes, lifetimes, threads, anomalies",
        description="Statistics of an ltrace log or an LD_PRELOAD tracer log (recognised by its content). "
                    "Exit status 4 when the capture is incomplete.")
    p.add_argument("file", help="the capture (from scenc capture)")
    p.add_argument("--json", action="store_true", help="print the statistics as JSON")
    p.set_defaults(func=_guarded("trace-stats", cmd_trace_stats))

    p = subparsers.add_parser(
        "convert", help="turn a capture into a scenario: exact replay, or a fitted model (--model)",
        description="Without --model: an exact replay (FILE.scn + FILE.ops): every captured call, in each "
                    "thread's order, with the cross-thread handoffs. With --model: a short readable scenario "
                    "with the capture's statistics (thread groups, sizes, lifetimes, cross-thread frees, "
                    "phases), and its size histograms beside it.")
    p.add_argument("file", help="the capture (ltrace log or tracer log)")
    p.add_argument("-o", "--output", metavar="FILE.scn",
                   help="the scenario to write (default: FILE.scn, or FILE-model.scn with --model)")
    p.add_argument("--model", action="store_true", help="write a fitted model instead of the exact replay")
    p.add_argument("--touch", choices=(*TOUCH_MODES, "auto"), default=DEFAULT_TOUCH,
                   help="what the replay writes into each new block and the grown part of each realloc: nothing, "
                        "its first and last byte, one byte per page and its last byte, or every byte; auto: first "
                        "or pages, chosen from what a preload capture saw of the program's pages (default "
                        f"{DEFAULT_TOUCH}; docs/capture.md says why)")
    p.add_argument("--max-phases", type=int, default=4, metavar="N",
                   help="--model: at most N phases (default 4; 1 turns phase detection off)")
    p.add_argument("--no-measure", action="store_true",
                   help="--model: do not build and run the model once to measure its peak of live bytes")
    p.add_argument("--no-calibrate", action="store_true",
                   help="--model: keep the fitted lifetimes as they are, even when the model's peak of live bytes "
                        "is off the capture's (by default they are scaled until it is not: `param life_scale`)")
    p.add_argument("--cc", default=default_cc(), help="--model: C compiler for that run")
    p.set_defaults(func=_guarded("convert", cmd_convert))
