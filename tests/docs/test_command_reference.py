"""docs/commands.md, the reference of every command and option, is what commands/parser.py defines.

The reference is written from the parser itself (each verb's usage, its help line and every
option's help string), with a link to the page that explains the command at length, so it
cannot fall behind the command line: after changing an option, rewrite it with
`.venv/bin/python tests/docs/test_command_reference.py --write`.
"""

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "docs" / "commands.md"

# Where each command is explained at length (a page, and an anchor in it).
DETAILS = {
    "check": "language.md#mistakes-caught-before-any-c-is-written",
    "emit": "language.md",
    "build": "language.md",
    "exec": "language.md#what-a-program-reports",
    "run": "running.md",
    "merge": "running.md#shards-one-plan-on-several-machines",
    "allocators": "running.md#allocators",
    "probes": "probes.md",
    "play": "probes.md#pictures",
    "capture": "capture.md#scenc-capture",
    "trace-stats": "capture.md#scenc-trace-stats",
    "convert": "capture.md#scenc-convert-exact-replay",
    "report": "results.md#scenc-report",
    "compare": "results.md#scenc-compare",
}

HEADER = """# Every command and option

This page is written from scenc's command-line parser (`commands/parser.py`) by
`tests/docs/test_command_reference.py`, which fails when the two differ: it is the
list of what exists. Each command links to the page that explains it. The exit codes
of every command are in [running.md](running.md#exit-codes); `scenc COMMAND --help`
prints the same options.

"""


def _subcommands():
    sys.path.insert(0, str(REPO.parent))
    from scenc.commands.parser import build_parser
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help for choice in sub._choices_actions}
    return [(name, helps.get(name, ""), sp) for name, sp in sub.choices.items()]


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _option_help(action) -> str:
    text = action.help or ""
    if "%(" in text:
        text = text % {"default": action.default, "prog": "", "metavar": action.metavar}
    return text.replace("%%", "%")


def reference() -> str:
    os.environ["COLUMNS"] = "100"     # argparse wraps the usage to the terminal's width
    out = [HEADER, "Contents: " + " · ".join(f"[{name}](#scenc-{name})" for name, _, _ in _subcommands()), "\n"]
    for name, summary, sp in _subcommands():
        usage = sp.format_usage().strip().removeprefix("usage: ")
        out.append(f"\n## `scenc {name}`\n\n{summary[:1].upper() + summary[1:]}. "
                   f"More: [{DETAILS[name].split('#')[0]}]({DETAILS[name]}).\n\n")
        out.append("<!-- illustrative: a synopsis -->\n```\n" + usage + "\n```\n\n")
        rows = []
        for action in sp._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if action.option_strings:
                names = ", ".join(f"`{o}`" for o in action.option_strings)
                if action.metavar:
                    names += f" `{action.metavar}`"
                elif action.choices:
                    names += " `" + "|".join(map(str, action.choices)) + "`"
            else:
                names = f"`{action.metavar or action.dest}`"
            rows.append(f"| {_cell(names)} | {_cell(_option_help(action))} |")
        out.append("| argument | what it does |\n|---|---|\n" + "\n".join(rows) + "\n")
    return "".join(out)


def test_every_command_has_its_page_of_details():
    names = [name for name, _, _ in _subcommands()]
    assert sorted(names) == sorted(DETAILS), "a command was added or removed: give it a page in DETAILS"
    for page in {d.split("#")[0] for d in DETAILS.values()}:
        assert (REPO / "docs" / page).exists(), page


def test_the_reference_is_the_parser():
    expected = reference()
    current = REFERENCE.read_text() if REFERENCE.exists() else ""
    assert current == expected, ("docs/commands.md differs from commands/parser.py: rewrite it with "
                                 "`.venv/bin/python tests/docs/test_command_reference.py --write`")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        REFERENCE.write_text(reference())
        print(f"wrote {REFERENCE}")
    else:
        print(reference())
