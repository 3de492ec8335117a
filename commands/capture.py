"""`scenc capture -o FILE [--method preload|ltrace] [--stdin FILE] -- COMMAND`: record a program's allocator calls.

With `--server 'CMD' --ready ... -- CLIENT` (the tracer only): the server is traced while the client, not
traced, drives it, then stopped as `scenc run --server` stops it (run/program/serving.py runs both); the
tracer marks the window from ready to the client's end in the log (trace/capture/window.py), which convert
replays (the objects live at ready as an untimed set-up).

Everything scenc says goes to stderr: the program's stdout stays as the program wrote it. Exit status 0
when the capture is complete, 4 when it is incomplete or saw nothing (errors.py).
"""

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Optional

from ..errors import EXIT_INCOMPLETE, EXIT_OK
from ..system.metadata import load_averages
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
    if args.server is not None or any(v is not None for v in (args.ready, args.stop, args.stop_grace,
                                                                 args.ready_timeout)):
        return _capture_server(args, argv, out)
    try:
        stdin = open(args.stdin, "rb") if args.stdin else subprocess.DEVNULL
    except OSError as e:
        raise TraceInputError(f"--stdin {args.stdin}: {e.strerror or e}") from None
    load_before = _one_minute_load()
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
    threads = result.threads if args.method == "preload" else (result.stats.threads if result.stats else 0)
    loaded = load_warning(threads, load_before, _one_minute_load(), os.cpu_count() or 1)
    if loaded:
        _say(f"warning: {loaded}")
    if result.events:
        _say(f"next: scenc trace-stats {_quoted(out)}   |   "
             f"scenc convert {_quoted(out)} -o {_quoted(replay_path(out))}")
    return EXIT_OK if ok else EXIT_INCOMPLETE


# A machine is busy for a capture when its load average is over twice its CPUs: node's model from a capture at
# 2.25 (4.5 on 2 CPUs) failed, those at 0.25-0.75 passed (bench/results/2026-11-28-model-fidelity-6.md); the helpers'
# captures at 1.6-3 mostly failed too, but a suite of tests alone on 2 CPUs reaches 1.25, and must not be warned.
BUSY_LOAD_PER_CPU = 2.0


def _one_minute_load() -> Optional[float]:
    loads = load_averages()
    return loads[0] if loads else None


def load_warning(threads: int, before: Optional[float], after: Optional[float], cpus: int) -> Optional[str]:
    """Why a capture of several threads made on a loaded machine may not stand for the program, or None: its
    threads interleave otherwise when they wait for a CPU, and a fitted model keeps the interleaving it saw.
    node's model from a capture made beside four busy loops (load 4.5 on 2 CPUs) was 5 MiB fatter under jemalloc
    than node, whose own figure does not move with the load; from captures at load 0.5-1.5 it was within 1 MiB
    (bench/results/2026-11-28-model-fidelity-6.md)."""
    load = max((x for x in (before, after) if x is not None), default=None)
    if threads < 2 or load is None or load <= BUSY_LOAD_PER_CPU * cpus:
        return None
    return (f"the machine was busy while capturing (load average {load:.1f} on {cpus} CPUs): the program's "
            f"{threads} threads interleave otherwise when they wait for a CPU, and `convert --model` keeps the "
            f"interleaving it sees; capture on a quiet machine for a model that compares allocators' memory")


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
        target = ProgramTarget.from_options(client, stdin=args.stdin, server=args.server, ready=args.ready,
                                            stop=args.stop,
                                            stop_grace_s=args.stop_grace, ready_timeout_s=args.ready_timeout)
    except ProgramError as exc:
        raise UsageError(str(exc)) from None
    server = target.server
    from ..trace.capture.window import WindowControl
    path, _, log, _, added, script = prepare_preload(server.argv, out, {}, cwd=target.cwd)
    runner = ServedRunner()
    runner.show_output = True         # the client's output is what a user of capture wants to see
    import signal
    previous = {s: signal.signal(s, runner.interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    window_problems = []

    def mark(which: str):
        problem = control.mark(which)
        if problem:
            window_problems.append(f"the window's {which} mark was not written: {problem}")

    control = WindowControl()
    try:
        outcome = runner.run_served(target, None, dict(os.environ), args.timeout or 24 * 3600.0,
                                    server_preload={**added, **control.env}, on_ready=lambda: mark("open"),
                                    on_client_end=lambda: mark("close"))
    finally:
        control.close()
        for s, handler in previous.items():
            signal.signal(s, handler)
    if runner.interrupted:
        _say(f"scenc capture: interrupted; the server was stopped (its log {log} is what it wrote)")
        return 128 + (runner.signal or signal.SIGINT)
    code = outcome.server.returncode
    result = checked_capture(log, server.argv, added, Path(added["LD_PRELOAD"].split()[0]), code,
                             outcome.duration_s, outcome.server.stderr, args.timeout, script=script,
                             executable=path)
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
        if control.marked == ["open", "close"]:
            held = ("the log marks the window from ready to the client's end, which convert replays (what was "
                    "live at ready as an untimed set-up)")
        else:
            held = "the log holds its whole life: start-up, the load, and its stop"
        _say(f"  server {server.describe()}: ready at {srv.ready_s:.2f} s{ended}, stopped by {srv.stopped_by} "
             f"({srv.ended()}); {held}")
    for problem in window_problems:
        result.warnings.append(problem)
    for w in result.warnings:
        _say(f"warning: {w}")
    if result.events:
        _say(f"next: scenc trace-stats {_quoted(log)}   |   scenc convert {_quoted(log)} -o "
             f"{_quoted(replay_path(log))}   |   scenc run {_quoted(replay_path(log))} --server ... -- CLIENT")
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
