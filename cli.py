"""The `scenc` command: argument parsing and dispatch, nothing else.

Each command's work lives in the module that owns it; heavy imports (numpy,
scipy, matplotlib, the harness, the probes, tqdm) happen inside the commands
that need them, so `scenc check`, `scenc convert` and a cached `scenc build`
start fast: building the parser imports every command module (COMMAND_MODULES),
so those import at their top only what their options need.
"""

import argparse
import json
import os
import sys

from . import __version__
from .commands import allocators as allocators_cli, probes as probes_cli, run as run_command
from .run import merge
from .errors import EXIT_BUILD, EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN, EXIT_SCENARIO, EXIT_USAGE, UsageError
from .commands.options import add_memory_limit_option, parse_params, split_command_tail
from .compiler.build import default_cc
from .commands import report as report_cli
from .commands import trace as trace_cli

# Commands owned by other modules, in `scenc --help` order: each adds itself with `register`.
COMMAND_MODULES = (run_command, merge, allocators_cli, probes_cli, trace_cli, report_cli)


def _add_build_options(p, sweep=False):
    p.add_argument("scenario", help="a .scn file")
    p.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="override a param" + (" (NAME=1,2,4 sweeps)" if sweep else ""))
    p.add_argument("--cc", default=default_cc(), help="C compiler (gcc or clang)")
    p.add_argument("--sanitize", choices=("thread", "address", "undefined"),
                   help="build with a sanitizer (for checking scenc's runtime, not for timing)")


def sanitizer_flags(args):
    if not getattr(args, "sanitize", None):
        return ()
    return (f"-fsanitize={args.sanitize}", "-fno-omit-frame-pointer")


def cmd_check(args):
    from .compiler.pipeline import load, print_warnings
    loaded = load(args.scenario, parse_params(args.param))
    print_warnings(loaded)
    r = loaded.resolved
    print(f"{args.scenario}: ok ({len(r.groups)} thread group{'s' * (len(r.groups) != 1)}, "
          f"{r.total_threads} threads, {len(loaded.warnings)} warning{'s' * (len(loaded.warnings) != 1)})")
    return EXIT_OK


def cmd_emit(args):
    from .compiler.pipeline import emit
    sys.stdout.write(emit(args.scenario, parse_params(args.param)))
    return EXIT_OK


def cmd_build(args):
    import shutil
    import time
    from .compiler.pipeline import build
    start = time.perf_counter()
    b = build(args.scenario, parse_params(args.param), cc=args.cc, extra_flags=sanitizer_flags(args),
              warn=lambda m: print(m, file=sys.stderr))
    took = time.perf_counter() - start
    if args.output:
        shutil.copy2(b.binary, args.output)
        where = args.output
    else:
        where = str(b.binary)
    print(f"{where} ({'cached' if b.cached else 'built'} in {took * 1000:.0f} ms)")
    return EXIT_OK


def cmd_exec(args):
    from .run import memlimit
    from .system.process import describe_status
    from .run.runner import ProgramRunner
    from .compiler.pipeline import build
    from .report.execsummary import format_exec
    b = build(args.scenario, parse_params(args.param), cc=args.cc, extra_flags=sanitizer_flags(args),
              warn=lambda m: print(m, file=sys.stderr), allow_huge=args.allow_huge)
    # ASan and TSan reserve terabytes of shadow memory, which RLIMIT_DATA counts.
    limit = None if args.sanitize in ("address", "thread") else args.memory_limit
    outcome = ProgramRunner().run([str(b.binary)], os.environ, None, limit, capture_stderr=False)
    if outcome.over_limit is not None:
        print(f"scenc: out of memory: the scenario program already used {memlimit.fmt_bytes(outcome.over_limit)} "
              f"when its memory limit of {memlimit.describe(limit)} was set; killed", file=sys.stderr)
        return EXIT_RUN
    if outcome.returncode != 0:
        print(f"scenc: the scenario program failed with {describe_status(outcome.returncode)}", file=sys.stderr)
        return EXIT_RUN
    result = json.loads(outcome.stdout)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(format_exec(result))
    failed = sum(t.get("failed", 0) for t in result["threads"])
    if args.allow_huge and failed and limit is not None:
        print(f"scenc: out of memory: {failed} allocations returned NULL under the memory limit of "
              f"{memlimit.describe(limit)}", file=sys.stderr)
        return EXIT_RUN
    return EXIT_OK


def build_parser():
    parser = argparse.ArgumentParser(prog="scenc", description="Compile allocator scenarios to C and "
                                     "compare allocators on them.")
    parser.add_argument("--version", action="version", version=f"scenc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("check", help="check a scenario and print its diagnostics")
    _add_build_options(p)
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("emit", help="print the generated C program")
    _add_build_options(p)
    p.set_defaults(func=cmd_emit)

    p = sub.add_parser("build", help="compile a scenario to a program (cached)")
    _add_build_options(p)
    p.add_argument("-o", "--output", help="copy the program here")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("exec", help="build and run once under the default allocator")
    _add_build_options(p)
    p.add_argument("--json", action="store_true", help="print the program's raw JSON report")
    add_memory_limit_option(p, "the program", "allocations beyond it return NULL", default="80%")
    p.add_argument("--allow-huge", action="store_true",
                   help="run a scenario whose peak cannot fit in this machine's memory (an error "
                        "otherwise), held to --memory-limit")
    p.set_defaults(func=cmd_exec)

    for module in COMMAND_MODULES:
        module.register(sub)
    return parser


def _scenario_or_build_error(exc: Exception):
    """The exit status of a ScenarioError or BuildError, reported; None for any other exception.

    Their modules (the scenario nodes, the compiler) take tens of milliseconds to import, which a command
    that compiles nothing (`scenc convert`, `scenc --help`) should not pay: an exception of theirs can only
    have been raised once its module was imported, so they are looked up where they already are."""
    errors = sys.modules.get(f"{__package__}.scenario.errors")
    if errors is not None and isinstance(exc, errors.ScenarioError):
        print(exc.render(), file=sys.stderr)
        return EXIT_SCENARIO
    build = sys.modules.get(f"{__package__}.compiler.build")
    if build is not None and isinstance(exc, build.BuildError):
        print(f"scenc: {exc}", file=sys.stderr)
        return EXIT_BUILD
    return None


def main(argv=None):
    try:
        # Ctrl-C while the parser is built is as much an interruption as during the command.
        parser = build_parser()
        argv, command_argv = split_command_tail(list(sys.argv[1:] if argv is None else argv))
        args = parser.parse_args(argv)
        if command_argv is not None:  # `scenc run ... -- ./prog args`
            args.command_argv = command_argv
    except KeyboardInterrupt:
        print("scenc: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    try:
        return args.func(args)
    except UsageError as exc:
        print(exc.render(), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("scenc: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:
        status = _scenario_or_build_error(exc)
        if status is None:
            raise
        return status


if __name__ == "__main__":
    sys.exit(main())
