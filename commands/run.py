"""`scenc run`: its signals, the session, the report at the end (its options: commands/parser.py).

Getting the runs ready (a new plan or a resumed one, the programs built) is
run/setup.py's job; making them is harness.py's `Session`, which drives
run/runner.py's `ProgramRunner`.

Until the runs start, Ctrl-C and SIGTERM are noted and acted on between
steps of the preparation (`_StopRequest`); afterwards they only stop the
program running (`ProgramRunner.interrupt`), so a signal never lands in the
middle of saving a run.
"""

import errno
import signal
import sys
import threading
from typing import Optional

from ..errors import EXIT_OK, EXIT_RUN
from ..harness import Session
from ..report.analysis import analyze
from ..report.progress import Progress, format_duration
from ..report.tables import format_analysis
from ..run.program.runner import LauncherRunner
from ..run.program.serving import ServedRunner
from ..run.program.target import target_of
from ..run.resultfile import export_csv
from ..run.runner import ProgramRunner
from ..run.setup import prepare_new, prepare_resume
from ..system.process import signal_name

# A closed terminal (SIGHUP) stops a session as Ctrl-C does: Python's default would end scenc at once and leave
# the program running, in a session of its own.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _preload_scipy() -> threading.Thread:
    """Import numpy and scipy.special (what stats/summary.py needs) while builds and warm-ups go on.

    Together they take a few hundred milliseconds and are needed at the end;
    doing it meanwhile keeps them off the critical path. The thread is joined
    before the first measured run, so it never competes with a measurement
    for a CPU (a warm-up is not one: it only has to run the program once, and
    its duration only sets the timeout, generously).
    """
    def work():
        try:
            import scipy.special  # noqa: F401
        except Exception:
            pass
    thread = threading.Thread(target=work, name="scenc-preload", daemon=True)
    thread.start()
    return thread


class Interrupted(Exception):
    """SIGINT or SIGTERM before the runs start (afterwards ProgramRunner.interrupt handles them)."""

    def __init__(self, signum: int):
        super().__init__(signal_name(signum))
        self.signum = signum


class _StopRequest:
    """Signal handler for the preparation: notes the signal, to be acted on between steps.

    Raising from the handler (as Python's default SIGINT handler does) can land
    inside an import while the thread preloading scipy imports too, and leave
    the import lock taken for good: scenc then hangs instead of stopping.
    """

    def __init__(self):
        self.signum: Optional[int] = None

    def __call__(self, signum, _frame=None):
        if self.signum is None:
            self.signum = signum

    def check(self) -> None:
        if self.signum is not None:
            raise Interrupted(self.signum)


def _cannot_go_on(exc: OSError, result, progress: Progress) -> int:
    """A run could not be saved (disk full, file removed ...): what is on disk is still valid."""
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    reason = "the disk is full" if full else "the file system refused"
    where = exc.filename or result.path
    saved = sum(1 for r in result.runs if not r.warmup)
    try:
        result.set_status("interrupted")
        stale = ""
    except OSError:
        stale = (" (its header still says \"running\": there was no room to rewrite it; "
                 "--resume works all the same)")
    progress.note(f"scenc: cannot save to {where}: {reason} ({exc.strerror or exc}).\n"
                  f"scenc: the {saved} runs finished before are saved in {result.path}{stale}.\n"
                  f"scenc: {'make room, then ' if full else ''}continue with: "
                  f"scenc run --resume {result.path}")
    return EXIT_RUN


def run(args) -> int:
    progress = Progress(quiet=args.quiet)
    # Until the runs start, SIGTERM stops scenc as Ctrl-C does: cleanly, with a sentence.
    stop = _StopRequest()
    previous = {s: signal.signal(s, stop) for s in STOP_SIGNALS}
    try:
        preload = _preload_scipy()
        try:
            if args.resume:
                prepared = prepare_resume(args, progress, stop.check)
            else:
                prepared = prepare_new(args, progress, stop.check)
        except OSError as exc:
            stop.check()
            progress.note(f"scenc: cannot start: {exc.strerror or exc}"
                          f"{f' ({exc.filename})' if exc.filename else ''}")
            return EXIT_RUN
        except Exception:
            stop.check()  # a compiler killed by the same Ctrl-C: the signal is the news
            raise
        status = _run_session(args, progress, preload, *prepared, stop)
    except Interrupted as exc:
        progress.close()
        progress.note(f"scenc: interrupted by {signal_name(exc.signum)} before any run")
        return 128 + exc.signum
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if status is not None:
        return status
    return finish(prepared[0], args, progress)


def _run_session(args, progress, preload, result, plan, allocators, programs,
                 early: _StopRequest) -> Optional[int]:
    """Every run of the plan; an exit status if it ended early, None when complete."""
    program = target_of(result.header)
    if program is not None:
        runner = (ServedRunner if program.server is not None else LauncherRunner)(result.header.get("cc") or "gcc")
        runner.show_output = bool(getattr(args, "show_output", False))
    else:
        runner = ProgramRunner()
    session = Session(plan, allocators, programs, result, progress, runner, program=program)
    # From here a signal only stops the program running and ends the session
    # between runs, so it never lands in the middle of saving one.
    for s in STOP_SIGNALS:
        signal.signal(s, runner.interrupt)
    # A signal that came after the last check of the preparation, up to the line above (the imports
    # here take a while on a loaded machine): `early` noted it, the runner acts on it.
    if early.signum is not None:
        runner.interrupt(early.signum)
    try:
        if result.status != "running":
            result.set_status("running")
        finished = session.warm_up()
        preload.join()
        if finished and plan.warmup and session.runs_this_session:
            measured = session.remaining_runs()  # every configuration left is warm now
            progress.info(f"warm-up done in {format_duration(session.elapsed())}; "
                          f"{measured} measured runs{' at most' if plan.auto else ''}, "
                          f"about {format_duration(session.eta())}")
        finished = finished and session.measure()
    except OSError as exc:
        progress.close()
        return _cannot_go_on(exc, result, progress)
    finally:
        progress.close()

    if not finished:
        result.set_status("interrupted")
        measured = sum(1 for r in result.runs if not r.warmup)
        signum = runner.signal or signal.SIGINT
        progress.note(f"scenc: interrupted by {signal_name(signum)}; {measured} finished runs are "
                      f"saved in {result.path}\n"
                      f"scenc: continue with: scenc run --resume {result.path}")
        return 128 + signum
    result.set_status("complete")
    if session.stop_reason:
        progress.note(f"scenc: stopped early: {session.stop_reason}")
    result.close()
    return None


def finish(result, args, progress) -> int:
    """Report a finished result file: tables to stdout, CSV and plots if asked."""
    # Statistics only for what is shown, unless every metric is asked for.
    analysis = analyze(result, baseline=args.baseline, metrics=None if args.all_metrics else [], noise=args.noise)
    tables = sys.stderr if args.csv == "-" else sys.stdout  # --csv -: stdout is the CSV's alone
    print(format_analysis(analysis, all_metrics=args.all_metrics), file=tables)
    tables.flush()
    if args.csv:
        rows = export_csv(result, args.csv)
        progress.info(f"CSV: {'stdout' if args.csv == '-' else args.csv} ({rows} rows)")
    if args.plots:
        from ..report.plots.charts import write_plots
        from ..report.plots.probes import write_probe_plots
        paths = write_plots(analysis, args.plots, all_metrics=args.all_metrics)
        paths += write_probe_plots(result, args.plots)
        progress.info(f"plots: {len(paths)} files in {args.plots}")
    progress.info(f"results: {result.path}")
    failed = [r for r in result.runs if r.status != "ok"]
    if failed:
        counts = {}
        for r in failed:
            counts[r.status] = counts.get(r.status, 0) + 1
        what = ", ".join(f"{n} {s}" for s, n in counts.items())
        where = f"the report's \"problems:\" says why; every run is in {result.path}"
        if not any(r.status == "ok" for r in result.runs):
            progress.note(f"scenc: no run succeeded ({what}): {where}")
        else:
            progress.note(f"scenc: some runs failed ({what}): {where}")
        return EXIT_RUN
    return EXIT_OK
