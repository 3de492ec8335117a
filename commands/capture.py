"""`scenc capture -o FILE [--method ltrace|preload] -- COMMAND`: record a program's allocator calls.

Exit status 0 when the capture is complete, 4 when it is incomplete or saw nothing (errors.py).
"""

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


def _print_ltrace_capture(r, out: Path) -> bool:
    mode = {"x": "ltrace -L -x (every call, libc's own included)", "e": "ltrace -e (the program's PLT calls)"}
    status = ("killed by " + r.report.killed_by if r.report is not None and r.report.killed_by else
              f"exit status {r.tracee_status}" if r.tracee_status is not None else "no exit line")
    print(f"captured {out}: {r.events} allocator calls in {r.stats.threads if r.stats else 0} thread(s) with "
          f"{mode.get(r.mode, r.mode)}, {r.attempts} attempt(s); program {status}")
    if r.stats is not None:
        print(f"  calls: {kinds_line(r.stats.calls_by_kind)}")
        print(f"  peak live {r.stats.peak_bytes} bytes, {r.stats.cross_thread_frees} cross-thread frees")
    if r.crashed:
        print("  the capture is INCOMPLETE (see the warnings); it still converts, with what was seen")
    return r.ok


def _print_preload_capture(r, out: Path) -> bool:
    status = (f"killed by {r.signal}" if r.signal else "timed out" if r.tracee_status is None
              else f"exit status {r.tracee_status}")
    print(f"captured {out}: {r.events} allocator calls in {r.threads} thread(s) with the LD_PRELOAD tracer in "
          f"{r.wall_s:.2f} s; program {status}")
    print(f"  calls: {kinds_line(r.counts)}")
    if not r.complete:
        print("  the capture is INCOMPLETE (see the warnings); it still converts, with what was seen")
    return r.ok
