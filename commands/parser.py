"""Every `scenc` command line: the verbs in `scenc --help` order, each with its options.

A verb names its handler as "module:function" of commands/ (`handler`); cli.py imports that module
only when the verb runs, so building the parser costs no more than argparse and this package's
options module.
"""

import argparse
import sys

from .. import __version__
from ..compiler.build import default_cc
from ..errors import EXIT_USAGE
from ..run.memlimit import NO_LIMIT_GIVEN
from ..run.plan import (AUTO_MAX_RUNS, AUTO_MIN_RUNS, DEFAULT_CI, DEFAULT_TIME_BUDGET_S, DEFAULT_WARMUP,
                        MIN_TIMEOUT_S, TIMEOUT_FACTOR)
from ..trace.opsfile import DEFAULT_TOUCH, TOUCH_MODES
from . import options as o


class _Parser(argparse.ArgumentParser):
    """argparse's parser, but a command line it cannot use exits 64 (errors.py), as every usage error does:
    argparse's own 2 is scenc's "the C compiler failed"."""

    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _verb(sub, name: str, handler: str, **kwargs):
    p = sub.add_parser(name, **kwargs)
    p.set_defaults(handler=handler)
    return p


def _scenario_file(p) -> None:
    p.add_argument("scenario", help="a .scn file")
    o.add_param(p, "one")
    o.add_cc(p, default_cc())
    p.add_argument("--sanitize", choices=("thread", "address", "undefined"),
                   help="build with a sanitizer (for checking scenc's runtime, not for timing)")


def _compile_verbs(sub) -> None:
    _scenario_file(_verb(sub, "check", "compile:check", help="check a scenario and print its diagnostics"))
    _scenario_file(_verb(sub, "emit", "compile:emit", help="print the generated C program"))
    p = _verb(sub, "build", "compile:build", help="compile a scenario to a program (cached)")
    _scenario_file(p)
    p.add_argument("-o", "--output", help="copy the program here")
    p = _verb(sub, "exec", "exec:exec_once", help="build and run once (under the system malloc, or --allocator)")
    _scenario_file(p)
    p.add_argument("--allocator", metavar="NAME", help=f"run under this allocator: {o.ALLOCATOR_FORMS} "
                                                        f"(default: the system malloc, no preload)")
    o.add_allocator_config(p)
    o.add_json(p, "the program's raw report")
    o.add_memory_limit(p, "the program", "allocations beyond it return NULL", default="80%")
    o.add_allow_huge(p, "held to --memory-limit")
    o.add_timeout(p, "kill the program (and every process of its group) after this long (30s, 5m ...; "
                     "default: no limit)")


def _run(sub) -> None:
    p = _verb(sub, "run", "run:run",
              help="compare allocators on a scenario or a real program: many shuffled runs, statistics, report",
              usage="scenc run [FILE.scn] [options] [-- PROGRAM [ARGS...]]",
              description="Build the scenario once per param set, then run it under each allocator "
                          "in shuffled rounds, save every run, and report which allocator is faster "
                          "and leaner, by how much, and how sure that is. A program after `--` is run "
                          "the same way (alone, or beside the scenario in the same rounds, side by side "
                          "in the report); `{NAME}` in its arguments takes the values of --param NAME=..., "
                          "one cell per value.")
    p.add_argument("scenario", nargs="?", help="a .scn file (not needed with --resume or with a "
                                               "program alone)")
    p.add_argument("--allocators", metavar="LIST",
                   help=f"comma-separated: each {o.ALLOCATOR_FORMS} (default: glibc and every installed "
                        f"tcmalloc, jemalloc, mimalloc)")
    o.add_allocator_config(p)
    o.add_param(p, "sweep")
    o.add_cc(p, None, "C compiler (gcc or clang; default $SCENC_CC or gcc)")
    _run_rounds(p)
    p.add_argument("--probes", metavar="LIST",
                   help="what to measure (default time,memory; `scenc probes` lists them): scenc "
                        "plans the fewest runs in which no probe disturbs another's figures; "
                        "'a+b' forces a and b into one run")
    o.add_baseline(p, "compare against this allocator (default: the first)")
    o.add_noise(p, "default 1%%, saved in the result file")
    p.add_argument("--seed", type=int, help="seed of the run order (default: random, saved in the result)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="result file (default results/<scenario>-<timestamp>.json)")
    p.add_argument("--shard", type=o.parse_shard, metavar="K/N",
                   help="run only the K-th of N parts of the plan (whole param set x probe set "
                        "cells, dealt for equal time); put the parts together with `scenc merge`")
    p.add_argument("--resume", metavar="FILE", help="continue an interrupted run from its result file")
    o.add_outputs(p, also=True)
    o.add_all_metrics(p)
    o.add_memory_limit(p, "a run", "a run that reaches it is recorded as out of memory", default=NO_LIMIT_GIVEN)
    o.add_allow_huge(p, "each run held to --memory-limit")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress, only the result")
    _run_program(p.add_argument_group("a real program (`-- PROGRAM ARGS...`)"))
    p.set_defaults(program_argv=None)


def _run_rounds(p) -> None:
    p.add_argument("--runs", type=o.parse_runs, metavar="N|auto",
                   help=f"measured runs per allocator and param set, or 'auto': rounds until --ci "
                        f"is reached (the default, with a --time-budget of {DEFAULT_TIME_BUDGET_S:g} s "
                        f"per param set)")
    p.add_argument("--warmup", type=o.positive_int, metavar="N",
                   help=f"unmeasured runs first, per allocator and param set (default {DEFAULT_WARMUP})")
    p.add_argument("--ci", type=o.parse_fraction, metavar="PCT",
                   help=f"with --runs auto: stop when each 95%% CI of wall time and peak RSS is "
                        f"within ±PCT of its mean (default {DEFAULT_CI * 100:g}%%)")
    p.add_argument("--min-runs", type=o.positive_int, metavar="N",
                   help=f"with --runs auto: at least N runs (default {AUTO_MIN_RUNS})")
    p.add_argument("--max-runs", type=o.positive_int, metavar="N",
                   help=f"with --runs auto: at most N runs (default {AUTO_MAX_RUNS})")
    p.add_argument("--time-budget", type=o.parse_seconds, metavar="DURATION",
                   help="start no new round after this long (30s, 5m ...)")
    o.add_timeout(p, f"per run (default: max({MIN_TIMEOUT_S:g} s, {TIMEOUT_FACTOR}x the warm-up))")


def _run_program(g) -> None:
    g.add_argument("--cwd", metavar="DIR", help="run the program in DIR (default: here)")
    o.add_stdin(g)
    g.add_argument("--env", action="append", metavar="KEY=VALUE", help="set a variable for the program "
                   "(repeatable)")
    g.add_argument("--metric", metavar="REGEX", action="append", help="also take a figure the program prints, "
                   "from the last match of REGEX's first group in its output (e.g. 'rtime: ([0-9.]+)'); "
                   "repeatable")
    g.add_argument("--higher-is-better", action="store_true",
                   help="the --metric figures are throughputs: higher is better (default: lower)")
    g.add_argument("--prepare", metavar="CMD", help="a shell command run before each run of the program, not "
                   "timed (its {name}s take the params' values, like the program's arguments)")
    g.add_argument("--cleanup", metavar="CMD", help="a shell command run after each run of the program, not timed")
    g.add_argument("--ignore-failure", action="store_true",
                   help="a non-zero exit status is still a measured run (a signal is still a crash)")
    g.add_argument("--show-output", action="store_true",
                   help="the program's stdout and stderr on the terminal, after each run (kept in files too)")
    g.add_argument("--server", metavar="'CMD ARGS'", help="a server to measure under load: started under the "
                   "allocator for each run, the program after `--` (its client) run without any preload, "
                   "then the server stopped; peak RSS, CPU and faults are the server's, wall time the client's")
    g.add_argument("--ready", metavar="tcp:PORT|file:PATH|after:SECONDS",
                   help="with --server: when the server can take its client (a TCP connect, a file, a delay)")
    g.add_argument("--ready-timeout", type=o.parse_seconds, metavar="DURATION",
                   help="with --server: a server not ready after this long fails its run (default 60s)")
    g.add_argument("--stop", metavar="SIGNAL", help="with --server: the signal that stops it (default SIGTERM)")
    g.add_argument("--stop-grace", type=o.parse_seconds, metavar="DURATION",
                   help="with --server: SIGKILL its process group if it has not ended this long after --stop "
                        "(default 10s)")


def _merge(sub) -> None:
    p = _verb(sub, "merge", "merge:merge",
              help="put the result files of `scenc run --shard K/N` back together",
              description="Check that the files are shards of one plan (same scenario, params and plan), "
                          "report missing or duplicated cells, and write one result file that "
                          "`scenc report`, `compare`, CSV and plots read like any other.")
    p.add_argument("parts", nargs="+", metavar="SHARD.json", help="the shards' result files")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the merged result file")
    p.add_argument("--allow-missing", action="store_true",
                   help="write the merge even if shards or cells are missing (they are listed)")
    p.add_argument("--force", action="store_true", help="overwrite the output file")


def _allocators(sub) -> None:
    p = _verb(sub, "allocators", "allocators:allocators",
              help="list known allocators: installed or not, path, version, install hint",
              description="Built-in allocators first, then those from the config files "
                          "($SCENC_ALLOCATORS or ~/.config/scenc/allocators.ini, and --config). "
                          "Use your own library with --allocators mine=/path/libmine.so.")
    p.add_argument("--config", metavar="FILE", help="an allocator config file (INI) to read too")


def _probes(sub) -> None:
    p = _verb(sub, "probes", "probes:probes",
              help="list what can be measured, or show the run plan for a selection",
              description="List the probes with what each measures, costs and must not "
                          "share a run with; with --plan, the runs scenc would make.")
    p.add_argument("--plan", metavar="LIST", help="show the runs for this --probes selection (time,layout ...)")
    p = _verb(sub, "play", "play:play", help="animate the heap of a layout run as a GIF (the 'player')",
              description="Draw how each allocator's heap fills and empties over the "
                          "scenario, side by side, as an animated GIF. RESULT is a result "
                          "file of `scenc run --probes ...layout`, a run directory or a "
                          "layout.bin file.")
    p.add_argument("result", metavar="RESULT")
    p.add_argument("-o", "--output", help="the GIF to write (default: RESULT-heap.gif)")
    o.add_param(p, "pick")
    p.add_argument("--fps", type=int, default=10, help="frames per second (default 10)")
    p.add_argument("--frames", type=int, default=80, help="at most this many frames (default 80)")
    p.add_argument("--map", metavar="PNG", help="also draw the static heap map here")


def _capture(sub) -> None:
    p = _verb(sub, "capture", "capture:capture",
              help="run a program and record its allocator calls (an LD_PRELOAD tracer, or ltrace)",
              description="Run PROGRAM and record every allocator call it makes, then say (on stderr: the "
                          "program's stdout is left as it wrote it) whether the capture is complete and, if it "
                          "saw nothing or too little, why and what to try. A shim or `#!` script that execs "
                          "the real program is followed to it.",
              usage="scenc capture -o FILE [--method preload|ltrace] [--stdin FILE] [--timeout DURATION] "
                    "-- PROGRAM [ARGS...]\n"
                    "       scenc capture -o FILE --server 'CMD ARGS' --ready tcp:PORT|file:PATH|after:SECONDS "
                    "[--stop SIGNAL] -- CLIENT [ARGS...]")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the log to write")
    p.add_argument("--method", choices=("preload", "ltrace"), default="preload",
                   help="preload (default: the LD_PRELOAD tracer, sees every call, tens of nanoseconds a call) or "
                        "ltrace (100-1000x slower, may crash threaded programs)")
    p.add_argument("--mode", choices=("auto", "x", "e"),
                   help="--method ltrace: -L -x breakpoints (x: every call, crashes most threaded programs), -e "
                        "PLT breakpoints (e: the program's own calls), or auto (default): x, then e if every x "
                        "attempt crashed")
    p.add_argument("--retries", type=o.positive_int, metavar="N",
                   help="--method ltrace: attempts more per mode when a capture crashes (default 2)")
    o.add_stdin(p)
    o.add_timeout(p, "stop the program after this long (30s, 5m ...)")
    g = p.add_argument_group("a server under load (`--server 'CMD' --ready ... -- CLIENT`; with --method preload)")
    g.add_argument("--server", metavar="'CMD ARGS'", help="capture this server while the program after `--` (its "
                   "client, not traced) drives it; the server is stopped when the client ends")
    g.add_argument("--ready", metavar="tcp:PORT|file:PATH|after:SECONDS", help="when the server can take its client")
    g.add_argument("--ready-timeout", type=o.parse_seconds, metavar="DURATION",
                   help="give up on a server not ready after this long (default 60s)")
    g.add_argument("--stop", metavar="SIGNAL", help="the signal that stops the server (default SIGTERM)")
    g.add_argument("--stop-grace", type=o.parse_seconds, metavar="DURATION",
                   help="SIGKILL the server's process group this long after --stop (default 10s)")
    p.add_argument("program", nargs=argparse.REMAINDER, metavar="PROGRAM",
                   help="the program and its arguments, after --")


def _trace_stats(sub) -> None:
    p = _verb(sub, "trace-stats", "tracestats:trace_stats",
              help="statistics of a capture: calls, sizes, lifetimes, threads, anomalies",
              description="Statistics of a capture: an LD_PRELOAD tracer log or an ltrace log (from scenc "
                          "capture), a DJ Delorie workload (.wl, glibc trace_run's) or a glibc mtrace log, "
                          "recognised by its content. Exit status 4 when the capture is incomplete.")
    p.add_argument("file", help="the capture (tracer log, ltrace log, .wl workload or mtrace log)")
    p.add_argument("--whole", action="store_true",
                   help="a capture of a server (capture --server): the statistics of its whole life, start-up and "
                        "stop included, not of its window from ready to the client's end (what convert replays)")
    o.add_json(p, "the statistics")


def _convert(sub) -> None:
    p = _verb(sub, "convert", "convert:convert",
              help="turn a capture into a scenario: exact replay, or a fitted model (--model)",
              description="Without --model: an exact replay (FILE.scn + FILE.ops): every captured call, in "
                          "each thread's order, with the cross-thread handoffs. With --model: a short readable "
                          "scenario with the capture's statistics (thread groups, sizes, lifetimes, cross-thread "
                          "frees, phases), and its size histograms beside it.")
    p.add_argument("file", help="the capture (tracer log, ltrace log, .wl workload or mtrace log)")
    p.add_argument("-o", "--output", metavar="FILE.scn",
                   help="the scenario to write (default: FILE.scn, or FILE-model.scn with --model)")
    p.add_argument("--model", action="store_true", help="write a fitted model instead of the exact replay")
    p.add_argument("--touch", choices=(*TOUCH_MODES, "auto"), default=DEFAULT_TOUCH,
                   help="what the replay writes into each new block and the grown part of each realloc: nothing, "
                        "its first and last byte, one byte per page and its last byte, or every byte; auto: first "
                        "or pages, chosen from what a preload capture saw of the program's pages (default "
                        f"{DEFAULT_TOUCH}; docs/capture.md says why)")
    p.add_argument("--whole", action="store_true",
                   help="a capture of a server (capture --server) converted whole, start-up and stop included, "
                        "not its window from ready to the client's end")
    p.add_argument("--max-phases", type=int, default=4, metavar="N",
                   help="--model: at most N phases (default 4; 1 turns phase detection off)")
    p.add_argument("--no-measure", action="store_true",
                   help="--model: do not build and run the model once to measure its peak of live bytes")
    p.add_argument("--no-calibrate", action="store_true",
                   help="--model: keep the fitted lifetimes as they are, even when the model's peak of live bytes "
                        "is off the capture's (by default they are scaled until it is not: `param life_scale`)")
    p.add_argument("--no-image", action="store_true",
                   help="--model: the heap and the program's own mappings only, without the anonymous mapping that "
                        "stands for the program's code and files resident at its end (a tracer log records them)")
    o.add_cc(p, default_cc(), "--model: C compiler for that run")


def _report(sub) -> None:
    p = _verb(sub, "report", "report:report", help="re-render the tables (and plots, CSV) of a result file",
              description="Recompute every statistic from the raw runs saved in a "
                          "result file and print the tables of `scenc run`.")
    p.add_argument("result", help="a result file written by `scenc run`")
    o.add_baseline(p, "compare against this allocator instead")
    o.add_metric_names(p, "show")
    o.add_all_metrics(p)
    o.add_outputs(p, also=False)
    o.add_json(p, "the statistics, instead of tables,")
    o.add_noise(p, "default: the one the run was made with, else 1%%")
    p.add_argument("--across-machines", action="store_true",
                   help="in a merge of shards from several machines, draw their cells in the same "
                        "figures (by default each machine gets its own: they are not comparable)")
    _report_exports(p.add_argument_group("the report as files, besides the tables"))
    p = _verb(sub, "compare", "report:compare",
              help="compare result files with the first (before/after, two machines, a CI gate)",
              usage="scenc compare A.json B.json [C.json ...] [--metric NAME] [--noise PCT] [--fail-if-worse PCT]",
              description="For every allocator and param set found in A and a later file, "
                          "the ratio later/A (Hodges-Lehmann) with its interval from the rank test, "
                          "Holm-corrected over the comparisons (Benjamini-Hochberg over several param sets); "
                          "with three files or more, a table with one column per file. Exit status 1 with "
                          "--fail-if-worse when an allocator is significantly worse by more than PCT.")
    p.add_argument("a", metavar="A.json", help="the reference result")
    p.add_argument("b", metavar="B.json", nargs="+", help="the results compared with it (several: one column each)")
    o.add_metric_names(p, "compare")
    o.add_noise(p, "default: A's, else 1%%")
    p.add_argument("--fail-if-worse", type=o.parse_noise, metavar="PCT",
                   help="exit 5 when any allocator is significantly worse by more than PCT (e.g. 5%%) in a later "
                        "file than in A, for any metric compared: the same test with a ±PCT band")


def _report_exports(g) -> None:
    g.add_argument("--markdown", metavar="FILE", help="write the tables, verdicts and warnings as markdown")
    g.add_argument("--html", metavar="FILE", help="write one self-contained HTML page: verdicts, tables, "
                   "warnings, the machine and the plots inline (SVG); nothing to fetch")
    g.add_argument("--summary-csv", metavar="FILE", help="write one row per allocator, param set and metric: "
                   "n, mean, sd, median, min, max, 95%% intervals, one column per param")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="scenc", description="Compile allocator scenarios to C and "
                                     "compare allocators on them.")
    parser.add_argument("--version", action="version", version=f"scenc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for add in (_compile_verbs, _run, _merge, _allocators, _probes, _capture, _trace_stats, _convert, _report):
        add(sub)
    return parser
