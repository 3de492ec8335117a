"""What every `scenc` command line shares: the usage error, the exit codes, `--param`, `--cc`, `--memory-limit`.

A command raises `UsageError` for a command line (or an input file) it cannot
carry out; `cli.main` is the one place that turns it, and every other error,
into a message and an exit code. This module imports nothing of scenc at its
top, so any command module can use it without a cycle. The exit codes below
are the only ones scenc uses; docs/running.md lists them for users.
"""

import os

EXIT_OK = 0
EXIT_SCENARIO = 1       # the scenario has errors (file:line:col)
EXIT_BUILD = 2          # the C compiler failed
EXIT_RUN = 3            # a run failed, or the runs could not start or be saved
EXIT_INCOMPLETE = 4     # capture, trace-stats: done, but the capture is incomplete or saw nothing
EXIT_USAGE = 64         # a command line or an input that cannot be used (not a capture, not a result file ...)
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT); `scenc run` also exits 143 on SIGTERM


class UsageError(Exception):
    """A command line that cannot be carried out; the message says why."""

    def render(self) -> str:
        return f"scenc: {self}"


class UnusableInput(UsageError):
    """An input a command cannot use, whose message is already a whole line (it names the command or file)."""

    def render(self) -> str:
        return str(self)


def default_cc() -> str:
    """The C compiler when no --cc is given: $SCENC_CC, else gcc."""
    return os.environ.get("SCENC_CC", "gcc")


def parse_params(items, sweep=False):
    """`--param k=v` (several times, or k=v1,v2 with sweep) into {k: value or [values]}."""
    # The scenario front end loads only for commands that take --param.
    from ..scenario.resolve import parse_param_value
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


def _memory_limit(text: str):
    from ..run.memlimit import parse_option  # memlimit loads when the option is given
    return parse_option(text)


def split_command_tail(argv: list):
    """(scenc's own arguments, the command after `--` or None) for `scenc run ... -- ./prog args`.

    argparse cannot tell an optional scenario file from the command's words,
    so the command is cut off before parsing.
    """
    words = [w for w in argv if not w.startswith("-")]
    if not words or words[0] != "run" or "--" not in argv:
        return argv, None
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1:]


NO_LIMIT_GIVEN = object()  # --memory-limit absent (None is "--memory-limit none")


def add_memory_limit_option(parser, who: str, beyond: str, default) -> None:
    """`--memory-limit SIZE`: `who` may take at most SIZE; `beyond` says what happens past it."""
    parser.add_argument("--memory-limit", type=_memory_limit, default=default, metavar="SIZE",
                        help=f"most memory {who} may take (RLIMIT_DATA: 4G, 512M, 50%%, or none; "
                             f"default 80%% of this machine's); {beyond}")
