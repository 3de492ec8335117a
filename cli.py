"""The `scenc` command: argument parsing and dispatch, nothing else.

Each command's work lives in the module that owns it; heavy imports (numpy,
scipy, matplotlib) happen inside the commands that need them, so `scenc check`
and a cached `scenc build` start fast.
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

EXIT_OK, EXIT_SCENARIO, EXIT_BUILD, EXIT_RUN, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 3, 64, 130


class UsageError(Exception):
    """A command line that cannot be carried out; the message says why."""


def parse_params(items, sweep=False):
    """`--param k=v` (several times, or k=v1,v2 with sweep) into {k: value or [values]}."""
    from .scenario.resolve import parse_param_value
    params = {}
    for item in items or []:
        for part in item.split(";"):
            if "=" not in part:
                raise UsageError(f"--param {part!r}: expected NAME=VALUE")
            key, _, text = part.partition("=")
            key = key.strip()
            try:
                values = [parse_param_value(v) for v in text.split(",")]
            except ValueError as exc:
                raise UsageError(f"--param {key}: {exc}") from None
            if len(values) > 1 and not sweep:
                raise UsageError(f"--param {key}: several values are for `scenc run` sweeps; give one here")
            params[key] = values if sweep else values[0]
    return params


def _add_build_options(p, sweep=False):
    p.add_argument("scenario", help="a .scn file")
    p.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="override a param" + (" (NAME=1,2,4 sweeps)" if sweep else ""))
    p.add_argument("--cc", default=os.environ.get("SCENC_CC", "gcc"), help="C compiler (gcc or clang)")
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
    from . import memlimit
    from .compiler.pipeline import build
    from .report.execsummary import format_exec
    b = build(args.scenario, parse_params(args.param), cc=args.cc, extra_flags=sanitizer_flags(args),
              warn=lambda m: print(m, file=sys.stderr), allow_huge=args.allow_huge)
    # ASan and TSan reserve terabytes of shadow memory, which RLIMIT_DATA counts.
    limit = None if args.sanitize in ("address", "thread") else args.memory_limit
    proc = subprocess.Popen([str(b.binary)], stdout=subprocess.PIPE, text=True)
    over = memlimit.apply(proc.pid, limit) if limit is not None else None
    if over is not None:
        proc.kill()
    out, _ = proc.communicate()
    if over is not None:
        print(f"scenc: out of memory: the scenario program already used {memlimit.fmt_bytes(over)} "
              f"when its memory limit of {memlimit.describe(limit)} was set; killed", file=sys.stderr)
        return EXIT_RUN
    if proc.returncode != 0:
        print(f"scenc: the scenario program failed with {_describe_status(proc.returncode)}", file=sys.stderr)
        return EXIT_RUN
    result = json.loads(out)
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


def _memory_limit(text):
    from .memlimit import parse_option
    return parse_option(text)


def _describe_status(code):
    import signal
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


def build_parser():
    parser = argparse.ArgumentParser(prog="scenc", description="Compile allocator scenarios to C and "
                                     "compare allocators on them.")
    from . import __version__
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
    p.add_argument("--memory-limit", type=_memory_limit, default="80%", metavar="SIZE",
                   help="most memory the program may take (RLIMIT_DATA: 4G, 512M, 50%%, or none; "
                        "default 80%% of this machine's); allocations beyond it return NULL")
    p.add_argument("--allow-huge", action="store_true",
                   help="run a scenario whose peak cannot fit in this machine's memory (an error "
                        "otherwise), held to --memory-limit")
    p.set_defaults(func=cmd_exec)

    for register in _command_modules():
        register(sub)
    return parser


def _command_modules():
    """Commands owned by other modules register themselves here."""
    registrars = []
    for name in ("harness", "allocators_cli", "probes.cli", "trace.cli", "report.cli"):
        try:
            module = __import__(f"{__package__}.{name}", fromlist=["register"])
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith(__package__ or "scenc"):
                continue
            raise
        if hasattr(module, "register"):
            registrars.append(module.register)
    return registrars


def main(argv=None):
    try:
        # Building the parser imports every command's module: Ctrl-C there is
        # as much an interruption as during the command.
        from .compiler.build import BuildError
        from .scenario.errors import ScenarioError
        from .command_setup import split_command_tail
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
    except ScenarioError as exc:
        print(exc.render(), file=sys.stderr)
        return EXIT_SCENARIO
    except BuildError as exc:
        print(f"scenc: {exc}", file=sys.stderr)
        return EXIT_BUILD
    except UsageError as exc:
        print(f"scenc: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("scenc: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
