"""`scenc capture -o FILE [--method ltrace|preload] -- COMMAND`: record a program's allocator calls.

With `--server 'CMD' --ready ... -- CLIENT` (the tracer only): the server is traced while the client, not
traced, drives it, then stopped as `scenc run --server` stops it (run/program/serving.py runs both).

Exit status 0 when the capture is complete, 4 when it is incomplete or saw nothing (errors.py).
"""

import os
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
    if args.server is not None or any(v is not None for v in (args.ready, args.stop, args.stop_grace,
                                                                 args.ready_timeout)):
        return _capture_server(args, argv, out)
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


def _capture_server(args, client: list, out: Path) -> int:
    """The server traced with the preload tracer while its client runs; then stopped."""
    from ..errors import UsageError
    from ..run.program.serving import ServedRunner
    from ..run.program.target import ProgramError, ProgramTarget
    from ..trace.capture.preload import checked_capture, prepare_preload
    if args.server is None:
        raise UsageError("--ready, --stop, --stop-grace and --ready-timeout go with --server 'CMD ARGS'")
    if args.method != "preload":
        raise UsageError("scenc capture --server needs --method preload: under ltrace a server answers 100-1000x "
                         "slower, and its client would measure ltrace")
    try:
        target = ProgramTarget.from_options(client, server=args.server, ready=args.ready, stop=args.stop,
                                            stop_grace_s=args.stop_grace, ready_timeout_s=args.ready_timeout)
    except ProgramError as exc:
        raise UsageError(str(exc)) from None
    server = target.server
    _, _, log, _, added = prepare_preload(server.argv, out, {}, cwd=target.cwd)
    runner = ServedRunner()
    runner.show_output = True         # the client's output is what a user of capture wants to see
    import signal
    previous = {s: signal.signal(s, runner.interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        outcome = runner.run_served(target, None, dict(os.environ), args.timeout or 24 * 3600.0,
                                    server_preload=added)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if runner.interrupted:
        print(f"scenc capture: interrupted; the server was stopped (its log {log} is what it wrote)",
              file=sys.stderr)
        return 128 + (runner.signal or signal.SIGINT)
    code = outcome.server.returncode
    result = checked_capture(log, server.argv, added, Path(added["LD_PRELOAD"].split()[0]), code,
                             outcome.duration_s, outcome.server.stderr, args.timeout)
    srv = outcome.server
    client_state = _client_state(outcome.client)
    if srv.problem:
        result.warnings.insert(0, f"{srv.problem}: the capture holds what the server did until it stopped")
    elif client_state:
        result.warnings.insert(0, f"the client {client_state}: the server saw less load than it should")
    if code is not None and -code == server.stop_signal:
        result.warnings.append(f"the server ended by {srv.stopped_by} without catching it, so its last buffered "
                               f"calls are lost: stop it with a signal it handles (--stop SIGINT for many servers)")
    ok = _print_preload_capture(result, log)
    if srv.ready_s is not None:
        ended = f", the client ended at {srv.client_ended_s:.2f} s" if srv.client_ended_s is not None else ""
        print(f"  server {server.describe()}: ready at {srv.ready_s:.2f} s{ended}, stopped by {srv.stopped_by} "
              f"({srv.ended()}); the log holds its whole life: start-up, the load, and its stop")
    for w in result.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if result.events:
        print(f"next: scenc trace-stats {log}   |   scenc convert {log} -o {log.stem}.scn   |   "
              f"scenc run {log.stem}.scn --server ... -- CLIENT")
    return EXIT_OK if ok and not srv.problem and not client_state else EXIT_INCOMPLETE


def _client_state(client) -> str:
    """"" for a client that ended well, else how it ended."""
    from ..run.program.runner import returncode
    if client is None or client.launched is None:
        return "did not run to its end" if client is not None else ""
    code = returncode(client.wait_status)
    if code < 0:
        return f"was killed by signal {-code}"
    return f"ended with exit status {code}" if code else ""
