"""Getting a real program ready for `scenc run ... -- ./prog args`: its target, its runs, its header.

run/setup.py calls these for a new or resumed session: the program after
`--` becomes a `ProgramTarget` (checked before any run: a static program or
one with its own malloc is refused), one RunConfig per allocator with target
"command" joins the plan, interleaved in the same shuffled rounds as the
scenario's runs if there is one, and the header keeps the program so
`--resume` and `scenc report` know it.
"""

from pathlib import Path
from typing import Optional

from ...errors import UsageError
from .target import ProgramError, ProgramTarget, refusal, target_of
from ..plan import COMMAND, RunConfig

SCHEMA_NOTE = "program runs: wall time, CPU and peak RSS from wait4; malloc provider proven per process"


def target_from_args(args) -> Optional[ProgramTarget]:
    """The program after `--`, checked; None when there is none."""
    extra = [o for o, v in (("--cwd", args.cwd), ("--stdin", args.stdin), ("--env", args.env),
                            ("--metric", args.metric)) if v]
    if args.program_argv is None:
        if extra:
            raise UsageError(f"{', '.join(extra)} go with a program: `scenc run ... -- ./prog args`")
        return None
    try:
        target = ProgramTarget.from_options(args.program_argv, args.cwd, args.stdin, args.env or (),
                                            args.metric, args.higher_is_better)
        reason = refusal(target)
    except ProgramError as exc:
        raise UsageError(str(exc)) from None
    if reason:
        raise UsageError(f"cannot compare allocators on `{target.describe()}`: {reason}")
    return target


def check_options(args, scenario_given: bool) -> None:
    if scenario_given:
        return
    for option, value in (("--param", args.param), ("--probes", args.probes), ("--allow-huge", args.allow_huge)):
        if value:
            raise UsageError(f"{option} is for a scenario; a program alone is measured by wait4 "
                             f"(wall time, CPU, peak RSS, page faults)")


def configs(allocators) -> list:
    return [RunConfig.make(name, {}, target=COMMAND) for name in allocators]


def describe(header: dict, target: ProgramTarget) -> dict:
    """The header of a session with a program: the program, and the schema that can hold it."""
    header["targets"] = dict(header.get("targets") or {}, **{COMMAND: target.to_json()})
    header["command_note"] = SCHEMA_NOTE
    return header


def check_resumable(target: ProgramTarget) -> None:
    """A resumed program must still be there (its stdin file and working directory too)."""
    if target.cwd and not Path(target.cwd).is_dir():
        raise UsageError(f"cannot resume: the program's working directory {target.cwd} is gone")
    if target.stdin and not Path(target.stdin).is_file():
        raise UsageError(f"cannot resume: the program's --stdin file {target.stdin} is gone")
    try:
        reason = refusal(target)
    except ProgramError as exc:
        raise UsageError(f"cannot resume: {exc}") from None
    if reason:
        raise UsageError(f"cannot resume: {reason}")
