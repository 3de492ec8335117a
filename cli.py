"""The `scenc` command: parse the command line, run the verb's handler, turn errors into exit codes.

Every command line is in commands/parser.py; each verb's handler is a module of commands/, imported
only when that verb runs, so `scenc check` never loads the harness nor `scenc --help` numpy.
"""

import importlib
import sys

from .commands.options import split_command_tail
from .commands.parser import build_parser
from .errors import EXIT_BUILD, EXIT_INTERRUPTED, EXIT_OK, EXIT_SCENARIO, EXIT_USAGE, UsageError


def _handler(args):
    module, function = args.handler.split(":")
    return getattr(importlib.import_module(f"{__package__}.commands.{module}"), function)


def _scenario_or_build_error(exc: Exception):
    """The exit status of a ScenarioError or BuildError, reported; None for any other exception.

    Their modules (the scenario nodes, the compiler) take tens of milliseconds to import, which a command
    that compiles nothing (`scenc convert`, `scenc --help`) should not pay: an exception of theirs can only
    have been raised once its module was imported, so they are looked up where they already are."""
    errors = sys.modules.get(f"{__package__}.scenario.errors")
    if errors is not None and isinstance(exc, errors.ScenarioError):
        print(exc.render(), file=sys.stderr)
        return EXIT_USAGE if exc.usage else EXIT_SCENARIO
    build = sys.modules.get(f"{__package__}.compiler.build")
    if build is not None and isinstance(exc, build.BuildError):
        print(f"scenc: {exc}", file=sys.stderr)
        return EXIT_BUILD
    return None


def main(argv=None):
    try:
        # Ctrl-C while the parser is built or the handler imported is as much an interruption as during the command.
        parser = build_parser()
        argv, program_argv = split_command_tail(list(sys.argv[1:] if argv is None else argv))
        args = parser.parse_args(argv)
        if program_argv is not None:  # `scenc run ... -- ./prog args`
            args.program_argv = program_argv
        handler = _handler(args)
        return handler(args)
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
