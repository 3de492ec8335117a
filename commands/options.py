"""Every option more than one command takes, defined once, and the values options parse into.

commands/parser.py puts them on each command line. This module imports nothing heavy: the parser is
built for every command, `scenc --help` included.
"""

import argparse

# ------------------------------------------------------------ option values

def _percentage(text: str, example: str) -> float:
    """"2%" or "0.02" -> 0.02."""
    text = text.strip()
    try:
        return float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage (like {example})") from None


def parse_fraction(text: str) -> float:
    """--ci: "2%" or "0.02" -> 0.02, strictly between 0 and 1."""
    value = _percentage(text, "2%")
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text.strip()!r} should be between 0% and 100%")
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
    from ..run.cells import parse_shard as parse  # run/cells.py loads when the option is given
    try:
        return parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_noise(text: str) -> float:
    """--noise: "1%", "0.5%" or "0.01" -> 0.01; 0 turns the noise threshold off."""
    value = _percentage(text, "1%")
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text.strip()!r} should be at least 0% and below 100%")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must not be negative")
    return value


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


# ------------------------------------------------------------ shared options

PARAM_HELP = {
    "one": "override a param",
    "sweep": "override a param; several values sweep it (several --param: all combinations); `{NAME}` in the "
             "arguments of a program after `--` takes its values (numbers, or any words for a program alone)",
    "pick": "with several param sets in RESULT: which one",
}


def add_param(p, use: str) -> None:
    """`--param NAME=VALUE`: `use` is "one" (a build), "sweep" (`scenc run`) or "pick" (one set of a result)."""
    p.add_argument("--param", action="append", metavar="NAME=V1,V2" if use == "sweep" else "NAME=VALUE",
                   help=PARAM_HELP[use])


def add_allocator_config(p) -> None:
    p.add_argument("--allocator-config", metavar="FILE", help="INI file defining more allocators")


ALLOCATOR_FORMS = ("a built-in name (`scenc allocators`), a library's path, NAME=/path/lib.so, or a variant "
                   "with options: jemalloc[narenas:1]")


def add_cc(p, default, help_text: str = "C compiler (gcc or clang)") -> None:
    p.add_argument("--cc", default=default, help=help_text)


def add_memory_limit(p, who: str, beyond: str, default) -> None:
    """`--memory-limit SIZE`: `who` may take at most SIZE; `beyond` says what happens past it."""
    p.add_argument("--memory-limit", type=_memory_limit, default=default, metavar="SIZE",
                   help=f"most memory {who} may take (RLIMIT_DATA: 4G, 512M, 50%%, or none; "
                        f"default 80%% of this machine's); {beyond}")


def add_allow_huge(p, held: str) -> None:
    p.add_argument("--allow-huge", action="store_true",
                   help=f"run a scenario whose peak cannot fit in this machine's memory (an error "
                        f"otherwise), {held}")


def add_baseline(p, help_text: str) -> None:
    p.add_argument("--baseline", metavar="NAME", help=help_text)


def add_outputs(p, also: bool) -> None:
    """--csv and --plots: with `also`, besides the tables (`scenc run`); else on their own (`scenc report`)."""
    p.add_argument("--csv", metavar="FILE", help=f"{'also ' if also else ''}export the runs as CSV "
                   "(- for stdout: the CSV alone, the tables then go to stderr)")
    p.add_argument("--plots", metavar="DIR", help=f"{'also ' if also else ''}draw plots (PNG and SVG) into DIR")


def add_all_metrics(p) -> None:
    p.add_argument("--all-metrics", action="store_true", help="tables for every metric, not only "
                   "wall time and peak RSS")


def add_json(p, what: str) -> None:
    p.add_argument("--json", action="store_true", help=f"print {what} as JSON")


def add_metric_names(p, verb: str) -> None:
    p.add_argument("--metric", action="append", metavar="NAME",
                   help=f"{verb} this metric (repeatable; default wall time and peak RSS)")


def add_noise(p, default: str) -> None:
    """--noise PCT: the practical threshold of every claim (stats/rank.py); `default` says where it comes from."""
    p.add_argument("--noise", type=parse_noise, metavar="PCT",
                   help=f"differences within PCT are noise: never called significant, \"equivalent\" when the "
                        f"whole interval lies within it ({default}; 0 turns it off)")


def add_stdin(p) -> None:
    """--stdin FILE: the standard input of a real program (`scenc run -- PROGRAM`, `scenc capture`)."""
    p.add_argument("--stdin", metavar="FILE", help="the program's standard input (default /dev/null)")


def add_timeout(p, what: str) -> None:
    p.add_argument("--timeout", type=parse_seconds, metavar="DURATION", help=what)
