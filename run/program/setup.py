"""Getting a real program ready for `scenc run ... -- ./prog args`: its target, its runs, its header.

run/setup.py calls these for a new or resumed session: the program after
`--` becomes a `ProgramTarget` (checked before any run: a static program or
one with its own malloc is refused), one RunConfig per allocator and param
set with target "command" joins the plan, interleaved in the same shuffled
rounds as the scenario's runs if there is one, and the header keeps the
program so `--resume` and `scenc report` know it.

With `--server`, the program after `--` is the server's client: the checks
for a preload apply to the server (the client runs without one), and only
the client's being there is checked.

A program's param sets come from the `--param`s its `{name}`s use (with a
scenario, the others are the scenario's alone; without one, a `--param` no
`{name}` uses is refused: it would sweep nothing).
"""

from pathlib import Path
from typing import Dict, List, Mapping, Optional

from ...errors import UsageError
from ...system.process import ProgramNotFound, locate_program
from .server import ServerSpecError
from .target import ProgramError, ProgramTarget, refusal, target_of
from ..plan import COMMAND, RunConfig, sweep

SCHEMA_NOTE = "program runs: wall time, CPU and peak RSS from wait4; malloc provider proven per process"


def target_from_args(args) -> Optional[ProgramTarget]:
    """The program after `--`, checked; None when there is none."""
    server_options = (("--server", args.server), ("--ready", args.ready), ("--stop", args.stop),
                      ("--stop-grace", args.stop_grace), ("--ready-timeout", args.ready_timeout))
    extra = [o for o, v in (("--cwd", args.cwd), ("--stdin", args.stdin), ("--env", args.env),
                            ("--metric", args.metric), ("--prepare", args.prepare), ("--cleanup", args.cleanup),
                            ("--ignore-failure", args.ignore_failure), ("--show-output", args.show_output),
                            *server_options) if v]
    if args.server is None:
        alone = [o for o, v in server_options[1:] if v is not None]
        if alone:
            raise UsageError(f"{', '.join(alone)} go with --server 'CMD ARGS'")
    if args.program_argv is None:
        if extra:
            raise UsageError(f"{', '.join(extra)} go with a program: `scenc run ... -- ./prog args`")
        return None
    try:
        target = ProgramTarget.from_options(args.program_argv, args.cwd, args.stdin, args.env or (),
                                            args.metric, args.higher_is_better, args.prepare, args.cleanup,
                                            args.ignore_failure, args.server, args.ready, args.stop,
                                            args.stop_grace, args.ready_timeout)
    except ProgramError as exc:
        raise UsageError(str(exc)) from None
    return target


def check_runnable(target: ProgramTarget, param_sets: List[Dict]) -> None:
    """Refuse, before any run, a program (with each param set's arguments, when they name it) that cannot
    be measured under a preloaded allocator, or cannot be found."""
    seen = set()
    for params in param_sets or [{}]:
        filled = target.for_params(params)
        preloaded = filled if filled.server is None else ProgramTarget(filled.server.argv, filled.cwd)
        if (preloaded.argv[0], filled.argv[0]) in seen:
            continue
        seen.add((preloaded.argv[0], filled.argv[0]))
        try:
            if filled.server is not None:
                locate_program(filled.argv, filled.cwd)     # the client: found, never preloaded
                if "{" not in filled.server.ready:
                    filled.server.readiness
            reason = refusal(preloaded)
        except (ProgramError, ProgramNotFound, ServerSpecError) as exc:
            raise UsageError(str(exc)) from None
        if reason:
            raise UsageError(f"cannot compare allocators on `{preloaded.describe()}`: {reason}")


def param_sets(target: ProgramTarget, sweep_params: Mapping, scenario_given: bool) -> List[Dict]:
    """The program's param sets: every combination of the swept params its `{name}`s use ([{}]: none)."""
    used = [name for name in target.placeholders() if name in sweep_params]
    if not scenario_given:
        unused = [name for name in sweep_params if name not in used]
        if unused:
            raise UsageError(f"--param {unused[0]}: the program's arguments have no {{{unused[0]}}} "
                             f"(`scenc run --param {unused[0]}=1,2 -- ./prog {{{unused[0]}}}`): it would sweep "
                             f"nothing")
    return sweep({name: sweep_params[name] for name in sweep_params if name in used})


def check_options(args, scenario_given: bool) -> None:
    if scenario_given:
        return
    for option, value in (("--probes", args.probes), ("--allow-huge", args.allow_huge)):
        if value:
            raise UsageError(f"{option} is for a scenario; a program alone is measured by wait4 "
                             f"(wall time, CPU, peak RSS, page faults)")


def configs(allocators, param_sets_: Optional[List[Dict]] = None) -> list:
    return [RunConfig.make(name, params, target=COMMAND) for params in (param_sets_ or [{}]) for name in allocators]


def describe(header: dict, target: ProgramTarget) -> dict:
    """The header of a session with a program: the program, and the schema that can hold it."""
    header["targets"] = dict(header.get("targets") or {}, **{COMMAND: target.to_json()})
    header["command_note"] = SCHEMA_NOTE
    return header


def check_resumable(target: ProgramTarget, params: Optional[List[Dict]] = None) -> None:
    """A resumed program must still be there (its stdin file and working directory too); `params`: the
    param sets of its runs."""
    if target.cwd and not Path(target.cwd).is_dir():
        raise UsageError(f"cannot resume: the program's working directory {target.cwd} is gone")
    if target.stdin and not Path(target.stdin).is_file():
        raise UsageError(f"cannot resume: the program's --stdin file {target.stdin} is gone")
    try:
        check_runnable(target, params)
    except UsageError as exc:
        raise UsageError(f"cannot resume: {exc}") from None
