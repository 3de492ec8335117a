"""`scenc run` on the command line: its options, its signals, the report at the end.

Getting the runs ready (a new plan or a resumed one, the programs built) is
run/setup.py's job; making them is harness.py's `Session`, which drives
run/runner.py's `ProgramRunner`. cli.py adds this command with `register`.

Until the runs start, Ctrl-C and SIGTERM are noted and acted on between
steps of the preparation (`_StopRequest`); afterwards they only stop the
program running (`ProgramRunner.interrupt`), so a signal never lands in the
middle of saving a run.
"""

import argparse
import signal
import sys
import threading
from typing import Optional

from ..errors import EXIT_OK, EXIT_RUN
from ..run.memlimit import NO_LIMIT_GIVEN
from .options import add_memory_limit_option
from .report import NOISE_HELP, parse_noise
from ..run.plan import (AUTO_MAX_RUNS, AUTO_MIN_RUNS, DEFAULT_CI, DEFAULT_TIME_BUDGET_S, DEFAULT_WARMUP,
                        MIN_TIMEOUT_S, TIMEOUT_FACTOR)
from ..system.process import signal_name


# ------------------------------------------------------------ option values


def parse_fraction(text: str) -> float:
    """"2%" or "0.02" -> 0.02."""
    text = text.strip()
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage (like 2%)") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} should be between 0% and 100%")
    return value


def parse_seconds(text: str) -> float:
    """"90", "90s", "2m", "1.5h" -> seconds."""
    text = text.strip().lower()
    scale = {"s": 1, "m": 60, "min": 60, "h": 3600}
    for suffix in ("min", "s", "m", "h"):
        if text.endswith(suffix):
            number, factor = text[: -len(suffix)], scale[suffix]
            break
    else:
        number, factor = text, 1
    try:
        value = float(number) * factor
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (like 30s or 2m)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} should be more than 0")
    return value


def parse_runs(text: str):
    if text.strip().lower() == "auto":
        return "auto"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--runs {text!r}: give a number or 'auto'") from None
    if value < 1:
        raise argparse.ArgumentTypeError("--runs must be at least 1")
    return value


def parse_shard(text: str):
    from ..run.cells import parse_shard as parse
    try:
        return parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must not be negative")
    return value


# ----------------------------------------------------------------- the command


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "run", help="compare allocators on a scenario or a real program: many shuffled runs, statistics, report",
        usage="scenc run [FILE.scn] [options] [-- COMMAND [ARGS...]]",
        description="Build the scenario once per param set, then run it under each allocator "
                    "in shuffled rounds, save every run, and report which allocator is faster "
                    "and leaner, by how much, and how sure that is. A command after `--` is run "
                    "the same way (alone, or beside the scenario in the same rounds, side by side "
                    "in the report).")
    p.add_argument("scenario", nargs="?", help="a .scn file (not needed with --resume or with a "
                                               "command alone)")
    p.add_argument("--allocators", metavar="LIST",
                   help="comma-separated names or NAME=/path/lib.so (default: glibc and every "
                        "installed tcmalloc, jemalloc, mimalloc); see `scenc allocators`")
    p.add_argument("--allocator-config", metavar="FILE", help="INI file defining more allocators")
    p.add_argument("--param", action="append", metavar="NAME=V1,V2",
                   help="override a param; several values sweep it (several --param: all combinations)")
    p.add_argument("--cc", default=None, help="C compiler (gcc or clang; default $SCENC_CC or gcc)")
    p.add_argument("--runs", type=parse_runs, metavar="N|auto",
                   help=f"measured runs per allocator and param set, or 'auto': rounds until --ci "
                        f"is reached (the default, with a --time-budget of {DEFAULT_TIME_BUDGET_S:g} s "
                        f"per param set)")
    p.add_argument("--warmup", type=positive_int, metavar="N",
                   help=f"unmeasured runs first, per allocator and param set (default {DEFAULT_WARMUP})")
    p.add_argument("--ci", type=parse_fraction, metavar="PCT",
                   help=f"with --runs auto: stop when each 95%% CI of wall time and peak RSS is "
                        f"within ±PCT of its mean (default {DEFAULT_CI * 100:g}%%)")
    p.add_argument("--min-runs", type=positive_int, metavar="N",
                   help=f"with --runs auto: at least N runs (default {AUTO_MIN_RUNS})")
    p.add_argument("--max-runs", type=positive_int, metavar="N",
                   help=f"with --runs auto: at most N runs (default {AUTO_MAX_RUNS})")
    p.add_argument("--time-budget", type=parse_seconds, metavar="DURATION",
                   help="start no new round after this long (30s, 5m ...)")
    p.add_argument("--timeout", type=parse_seconds, metavar="DURATION",
                   help=f"per run (default: max({MIN_TIMEOUT_S:g} s, {TIMEOUT_FACTOR}x the warm-up))")
    p.add_argument("--probes", metavar="LIST",
                   help="what to measure (default time,memory; `scenc probes` lists them): scenc "
                        "plans the fewest runs in which no probe disturbs another's figures; "
                        "'a+b' forces a and b into one run")
    p.add_argument("--baseline", metavar="NAME", help="compare against this allocator (default: the first)")
    p.add_argument("--noise", type=parse_noise, default=0.01, metavar="PCT", help=NOISE_HELP)
    p.add_argument("--seed", type=int, help="seed of the run order (default: random, saved in the result)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="result file (default results/<scenario>-<timestamp>.json)")
    p.add_argument("--shard", type=parse_shard, metavar="K/N",
                   help="run only the K-th of N parts of the plan (whole param set x probe set "
                        "blocks, dealt for equal time); put the parts together with `scenc merge`")
    p.add_argument("--resume", metavar="FILE", help="continue an interrupted run from its result file")
    p.add_argument("--csv", metavar="FILE", help="also export the runs as CSV")
    p.add_argument("--plots", metavar="DIR", help="also draw plots (PNG and SVG) into DIR")
    p.add_argument("--all-metrics", action="store_true", help="tables for every metric, not only "
                   "wall time and peak RSS")
    add_memory_limit_option(p, "a run", "a run that reaches it is recorded as out of memory",
                            default=NO_LIMIT_GIVEN)
    p.add_argument("--allow-huge", action="store_true",
                   help="run a scenario whose peak cannot fit in this machine's memory (an error "
                        "otherwise); each run is held to --memory-limit")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress, only the result")
    g = p.add_argument_group("a real program (`-- COMMAND ARGS...`)")
    g.add_argument("--cwd", metavar="DIR", help="run the command in DIR (default: here)")
    g.add_argument("--stdin", metavar="FILE", help="the command's standard input (default /dev/null)")
    g.add_argument("--env", action="append", metavar="KEY=VALUE", help="set a variable for the command "
                   "(repeatable)")
    g.add_argument("--metric", metavar="REGEX", help="also take a figure the command prints, from the "
                   "last match of REGEX's first group in its output (e.g. 'rtime: ([0-9.]+)')")
    g.add_argument("--higher-is-better", action="store_true",
                   help="the --metric figure is a throughput: higher is better (default: lower)")
    p.set_defaults(func=cmd_run, command_argv=None)


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


def _cannot_go_on(exc: OSError, result, progress: "Progress") -> int:
    """A run could not be saved (disk full, file removed ...): what is on disk is still valid."""
    import errno
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    reason = "the disk is full" if full else "the file system refused"
    where = exc.filename or result.path
    saved = sum(1 for r in result.runs if not r.get("warmup"))
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


def cmd_run(args) -> int:
    # Loaded here, not at the top: every command's parser imports this module (cli.py), and these pull in
    # the harness and tqdm, which `scenc convert` or `scenc --help` have no use for.
    from ..report.progress import Progress
    from ..run.setup import prepare_new, prepare_resume
    progress = Progress(quiet=args.quiet)
    # Until the runs start, SIGTERM stops scenc as Ctrl-C does: cleanly, with a sentence.
    stop = _StopRequest()
    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
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
    from ..run.program.target import target_of
    from ..harness import Session
    from ..report.progress import format_duration
    from ..run.runner import ProgramRunner
    command = target_of(result.header)
    if command is not None:
        from ..run.program.runner import CommandRunner
        runner = CommandRunner(result.header.get("cc") or "gcc")
    else:
        runner = ProgramRunner()
    session = Session(plan, allocators, programs, result, progress, runner, command=command)
    # From here a signal only stops the program running and ends the session
    # between runs, so it never lands in the middle of saving one.
    for s in (signal.SIGINT, signal.SIGTERM):
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
        measured = sum(1 for r in result.runs if not r.get("warmup"))
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
    from ..report.analysis import analyze
    from ..report.tables import format_analysis
    from ..run.resultfile import export_csv
    # Statistics only for what is shown, unless every metric is asked for.
    analysis = analyze(result, baseline=args.baseline, metrics=None if args.all_metrics else [],
                       noise=args.noise)
    print(format_analysis(analysis, all_metrics=args.all_metrics))
    sys.stdout.flush()
    if args.csv:
        rows = export_csv(result, args.csv)
        progress.info(f"CSV: {args.csv} ({rows} rows)")
    if args.plots:
        from ..report.plots.probes import write_probe_plots
        from ..report.plots.charts import write_plots
        paths = write_plots(analysis, args.plots, all_metrics=args.all_metrics)
        paths += write_probe_plots(result, args.plots)
        progress.info(f"plots: {len(paths)} files in {args.plots}")
    progress.info(f"results: {result.path}")
    failed = [r for r in result.runs if r["status"] != "ok"]
    if failed:
        counts = {}
        for r in failed:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        progress.note("scenc: some runs failed: " + ", ".join(f"{n} {s}" for s, n in counts.items())
                      + " (details in the table above and in the result file)")
        return EXIT_RUN
    return EXIT_OK
