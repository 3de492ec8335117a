"""What every `scenc` command line shares: `--param`, `--memory-limit`, the command after `--`."""

from ..errors import UsageError

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


def add_memory_limit_option(parser, who: str, beyond: str, default) -> None:
    """`--memory-limit SIZE`: `who` may take at most SIZE; `beyond` says what happens past it."""
    parser.add_argument("--memory-limit", type=_memory_limit, default=default, metavar="SIZE",
                        help=f"most memory {who} may take (RLIMIT_DATA: 4G, 512M, 50%%, or none; "
                             f"default 80%% of this machine's); {beyond}")
