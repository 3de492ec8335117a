"""`scenc capture -o FILE [--method preload|ltrace] [--stdin FILE] -- COMMAND`: record a program's allocator calls.

Everything scenc says goes to stderr: the program's stdout stays as the program wrote it. Exit status 0
when the capture is complete, 4 when it is incomplete or saw nothing (errors.py).
"""

import shlex
import subprocess
import sys
from pathlib import Path

from ..errors import EXIT_INCOMPLETE, EXIT_OK
from ..trace.capture import CaptureError
from ..trace.source import TraceInputError
from .tracing import guarded, kinds_line


@guarded("capture")
def capture(args) -> int:
    argv = list(args.program)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise TraceInputError("no program to capture: scenc capture -o app.ltrace -- ./app ARGS")
    if args.method != "ltrace" and (args.mode is not None or args.retries is not None):
        given = "--mode" if args.mode is not None else "--retries"
        raise TraceInputError(f"{given} is an option of --method ltrace; the default method, preload, has "
                              f"neither modes nor retries: add --method ltrace, or leave {given} out")
    out = Path(args.output)
    try:
        stdin = open(args.stdin, "rb") if args.stdin else subprocess.DEVNULL
    except OSError as e:
        raise TraceInputError(f"--stdin {args.stdin}: {e.strerror or e}") from None
    try:
        if args.method == "preload":
            from ..trace.capture.preload import capture_preload
            result = capture_preload(argv, out, timeout=args.timeout, stdin=stdin)
        else:
            from ..trace.capture.ltrace import capture
            result = capture(argv, out, mode=args.mode or "auto", timeout=args.timeout, stdin=stdin,
                             retries=2 if args.retries is None else args.retries)
    except CaptureError as e:
        raise TraceInputError(str(e)) from None
    finally:
        if stdin is not subprocess.DEVNULL:
            stdin.close()
    if args.method == "preload":
        ok = _print_preload_capture(result, out)
    else:
        ok = _print_ltrace_capture(result, out)
    for w in result.warnings:
        _say(f"warning: {_as_options(w)}")
    if result.events:
        _say(f"next: scenc trace-stats {_quoted(out)}   |   "
             f"scenc convert {_quoted(out)} -o {_quoted(replay_path(out))}")
    return EXIT_OK if ok else EXIT_INCOMPLETE


def replay_path(trace: Path) -> Path:
    """Where the `next:` hint puts the replay: beside the trace, named after it."""
    scn = trace.with_name(trace.stem + ".scn")
    return scn if scn != trace else trace.with_name(trace.stem + "-replay.scn")


def _quoted(path: Path) -> str:
    return shlex.quote(str(path))


def _say(line: str) -> None:
    print(line, file=sys.stderr)


def _as_options(warning: str) -> str:
    """The capture module's advice names its Python arguments; say them as this command's options."""
    for python, option in (("mode='x'", "--mode x"), ("mode='e'", "--mode e"), ("(mode=x)", "(--mode x)"),
                           ("(mode=e)", "(--mode e)"), ("retries=N", "--retries N"),
                           ("(method='preload')", "(--method preload)")):
        warning = warning.replace(python, option)
    return warning


def _print_ltrace_capture(r, out: Path) -> bool:
    mode = {"x": "ltrace -L -x (every call, libc's own included)", "e": "ltrace -e (the program's PLT calls)"}
    status = ("killed by " + r.report.killed_by if r.report is not None and r.report.killed_by else
              f"exit status {r.tracee_status}" if r.tracee_status is not None else "no exit line")
    _say(f"captured {out}: {r.events} allocator calls in {r.stats.threads if r.stats else 0} thread(s) with "
         f"{mode.get(r.mode, r.mode)}, {r.attempts} attempt(s); program {status}")
    if r.stats is not None:
        _say(f"  calls: {kinds_line(r.stats.calls_by_kind)}")
        _say(f"  peak live {r.stats.peak_bytes} bytes, {r.stats.cross_thread_frees} cross-thread frees")
    if r.crashed:
        _say("  the capture is INCOMPLETE (see the warnings); it still converts, with what was seen")
    return r.ok


def _print_preload_capture(r, out: Path) -> bool:
    status = (f"killed by {r.signal}" if r.signal else "timed out" if r.tracee_status is None
              else f"exit status {r.tracee_status}")
    if r.followed is not None:
        _say(r.followed.sentence())
    _say(f"captured {out}: {r.events} allocator calls in {r.threads} thread(s) with the LD_PRELOAD tracer in "
         f"{r.wall_s:.2f} s; program {status}")
    _say(f"  calls: {kinds_line(r.counts)}")
    if not r.complete:
        _say("  the capture is INCOMPLETE (see the warnings); it still converts, with what was seen")
    elif not r.holds_program:
        _say("  the capture holds the shell that ran the program, not the program (see the warnings)")
    return r.ok
