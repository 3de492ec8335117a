"""Getting `scenc run` ready: a new plan and result file, or a resumed one, and its programs.

Nothing is run here. A new run checks its options, finds the allocators
while the programs build (every program before any run: a build error stops
everything early), plans, and creates the result file with a header that
says everything needed to resume it or read it later. A resumed run takes
its plan and allocators from that header and refuses options that would
contradict it.
"""

import dataclasses
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Dict, Mapping, Optional

from .. import probes
from ..allocators import registry
from ..compiler.build import default_cc
from ..compiler.pipeline import build
from ..errors import UsageError
from ..probes import ProbeError, planner
from ..report import metrics as metric_defs
from ..report.progress import Progress
from ..scenario.errors import ScenarioError
from ..scenario.params import parse_params
from ..scenario.parser import parse
from ..scenario.peak import is_machine_too_small
from ..scenario.resolve import resolve
from ..stats.rank import DEFAULT_NOISE
from ..system import metadata
from . import cells, memlimit, shard
from .memlimit import NO_LIMIT_GIVEN
from .plan import (AUTO_MAX_RUNS, AUTO_MIN_RUNS, DEFAULT_CI, DEFAULT_PROBE_SET, DEFAULT_TIME_BUDGET_S,
                   DEFAULT_WARMUP, Plan, params_key, params_label, plan_runs, sweep)
from .program import setup as program_setup
from .program.runner import helpers
from .resultfile import ResultFileError, create, load, make_header
from .runner import ProgramRunner
from .shard import default_seed


class HarnessError(Exception):
    """A saved session that cannot be resumed; the message is a sentence for the user."""


# Options that shape the plan: given on --resume they would contradict the file.
_PLAN_OPTIONS = ("allocators", "param", "runs", "warmup", "ci", "min_runs", "max_runs", "seed",
                 "allocator_config", "cc", "probes", "shard")


def _default_allocators(config_path) -> str:
    names = ["glibc"] + [a.name for a in registry.known(config_path)
                         if a.name in ("tcmalloc", "jemalloc", "mimalloc") and registry.problem(a) is None]
    return ",".join(names)


def _default_output(scenario: str, shard: Optional[Mapping] = None) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in scenario) or "scenario"
    base = Path("results") / f"{safe}-{stamp}"
    if shard:
        base = Path(f"{base}-shard{shard['index']}of{shard['count']}")
    path, n = base.with_suffix(".json"), 1
    while path.exists():
        n += 1
        path = Path(f"{base}-{n}.json")
    return path


def _allocators_from_header(header: Mapping) -> Dict[str, object]:
    chosen = {}
    for name, entry in header["allocators"].items():
        a = registry.Allocator.from_json(name, entry)
        issue = registry.problem(a)
        if issue:
            raise HarnessError(f"cannot resume: {issue}")
        chosen[name] = a
    return chosen


_HUGE_HINT = ("to run it anyway, add --allow-huge: each run is then held to --memory-limit "
              "(default 80% of this machine's memory) and recorded as out of memory if it reaches it")


def _build_programs(scenario_path: Path, param_sets, probe_sets, cc: str, progress: Progress,
                    allow_huge: bool = False, check=lambda: None) -> Dict:
    """Every program a plan needs, before any run: a build error stops everything early."""
    # The compiler (jinja2, lark) and the allocator registry load when a run is prepared,
    # not when the parser of every command is built.
    programs = {}
    for params in param_sets:
        for probe_set in probe_sets:
            key = (params_key(params), probe_set)
            check()
            t0 = time.perf_counter()
            try:
                b = build(scenario_path, params, cc=cc, probes=probes.c_parts(probe_set),
                          warn=progress.note if not programs else None, allow_huge=allow_huge)
            except ScenarioError as exc:
                if len(param_sets) > 1:
                    progress.note(f"scenc: with {params_label(params)}:")
                if any(is_machine_too_small(d) for d in exc.diagnostics):
                    raise ScenarioError([dataclasses.replace(d, hint=f"{d.hint}; {_HUGE_HINT}")
                                         if is_machine_too_small(d) else d for d in exc.diagnostics],
                                        exc.source) from None
                raise
            programs[key] = b.binary
            probe_label = f" [{probe_set}]" if probe_set != DEFAULT_PROBE_SET else ""
            progress.info(f"built {scenario_path.name} {params_label(params) if params else ''}{probe_label} "
                          f"({'cached' if b.cached else f'{time.perf_counter() - t0:.1f} s'})")
    return programs


def _header(args, plan: Plan, allocators, cc: str, machine: Mapping, **fields) -> dict:
    """A new session's header: what every session records, and `fields` of its target."""
    return make_header(
        machine=machine,
        allocators={name: a.to_json() for name, a in allocators.items()},
        plan=plan.to_json(),
        command=["scenc"] + sys.argv[1:],
        cc=cc,
        baseline=args.baseline or plan.allocators[0],
        noise=DEFAULT_NOISE if args.noise is None else args.noise,
        metrics={m.name: {"label": m.label, "unit": m.unit, "lower_is_better": m.lower_is_better}
                 for m in metric_defs.all_metrics()},
        **fields,
    )


def _new_session_header(args, scenario_path: Path, plan: Plan, allocators, sweep_params, cc):
    source = scenario_path.read_text()
    # The builds have checked every param set; only the resolved values are needed here.
    scenario = parse(source, str(scenario_path))
    resolved = {params_key(p): resolve(scenario, p) for p in plan.param_sets}
    first = next(iter(resolved.values()))
    machine = metadata.collect_machine(cc=cc)
    return _header(
        args, plan, allocators, cc, machine,
        scenario=scenario.name or scenario_path.stem,
        source=source,
        params=sweep_params,
        seed=first.seed,
        probes=plan.probe_sets,
        scenario_path=str(scenario_path.resolve()),
        compiler=machine.get("compiler"),
        param_sets=[{"params": p, "resolved": dict(resolved[params_key(p)].params)}
                    for p in plan.param_sets],
    )


def _command_only_header(args, plan: Plan, allocators, command, cc: str, sweep_params=None) -> dict:
    """The header of a session that runs a command and no scenario (its `--param` sweep in "params")."""
    return _header(args, plan, allocators, cc, metadata.collect_machine(cc=cc),
                   scenario=command.name, source="", params=dict(sweep_params or {}), seed=None, probes=[],
                   param_sets=[])


def _resolve_allocators(args) -> Dict[str, object]:
    try:
        spec = args.allocators or _default_allocators(args.allocator_config)
        chosen = registry.resolve(spec, config_path=args.allocator_config)
    except registry.AllocatorError as exc:
        raise UsageError(str(exc)) from None
    allocators = {a.name: a for a in chosen}
    if args.baseline and args.baseline not in allocators:
        raise UsageError(f"--baseline {args.baseline}: not among the allocators ({', '.join(allocators)})")
    return allocators


def _time_budget(args, points: int):
    """--time-budget, or without --runs a default one per param set and probe set."""
    if args.time_budget is not None or args.runs is not None:
        return args.time_budget
    return DEFAULT_TIME_BUDGET_S * points


def prepare_new(args, progress, check=lambda: None):
    """(result file, plan, allocators, programs) for a fresh run; nothing is run yet."""
    command = program_setup.target_from_args(args)      # `-- ./prog args`, or None
    if not args.scenario and command is None:
        raise UsageError("give a scenario file, a command after `--`, or --resume RESULT.json")
    program_setup.check_options(args, bool(args.scenario))
    if getattr(args, "shard", None) and command is not None and args.scenario:
        raise UsageError("--shard splits a sweep into cells; a program after `--` is measured beside its "
                         "scenario in one session: run them without --shard (a program alone can be sharded)")
    scenario_path = Path(args.scenario) if args.scenario else None
    if scenario_path is not None and not scenario_path.is_file():
        raise UsageError(f"{args.scenario}: no such file")
    cc = args.cc or default_cc()
    auto = args.runs in ("auto", None)   # the default adapts, within a time budget
    if not auto and any(v is not None for v in (args.ci, args.min_runs, args.max_runs)):
        raise UsageError("--ci, --min-runs and --max-runs go with --runs auto")
    min_runs = max(2, args.min_runs if args.min_runs is not None else AUTO_MIN_RUNS)
    max_runs = args.max_runs or AUTO_MAX_RUNS
    if auto and min_runs > max_runs:
        raise UsageError(f"--min-runs {min_runs} is more than --max-runs {max_runs}")
    sweep_params = parse_params(args.param, sweep=True, words=scenario_path is None)
    try:
        probe_plan = planner.plan_spec(args.probes)
    except ProbeError as exc:
        raise UsageError(str(exc)) from None
    if args.probes:
        progress.info(probe_plan.explain())
    param_sets = sweep(sweep_params) if scenario_path is not None else []
    command_sets = program_setup.param_sets(command, sweep_params, scenario_path is not None) \
        if command is not None else []
    if command is not None:
        program_setup.check_runnable(command, command_sets)

    with ThreadPoolExecutor(max_workers=1) as pool:
        # Finding the allocators' libraries and versions waits on ldconfig and
        # dpkg; the builds (mostly a cache look-up) go on meanwhile.
        looked_up = pool.submit(_resolve_allocators, args)
        try:
            programs = _build_programs(scenario_path, param_sets, probe_plan.probe_sets, cc, progress,
                                       allow_huge=args.allow_huge, check=check) if scenario_path else {}
            if command is not None:
                helpers(cc)  # the launcher and the proof library: a compiler error stops here
        except BaseException:
            looked_up.result()  # an unusable allocator is the first thing to fix
            raise
        allocators = looked_up.result()
    check()

    plan = plan_runs(
        list(allocators), param_sets, probe_sets=probe_plan.probe_sets,
        runs=None if auto else args.runs,
        warmup=DEFAULT_WARMUP if args.warmup is None else args.warmup,
        ci=args.ci or DEFAULT_CI, min_runs=min_runs, max_runs=max_runs,
        # Per cell: the scenario's (a program beside it runs in the same rounds), or the program's alone.
        time_budget_s=_time_budget(args, len(param_sets) * len(probe_plan.probe_sets) or len(command_sets)),
        timeout_s=args.timeout,
        seed=args.seed if args.seed is not None else random.SystemRandom().randrange(2**31),
        memory_limit=_memory_limit(args),
    )
    if command is not None:
        plan.configs += program_setup.configs(allocators, command_sets)
    if scenario_path is not None:
        header = _new_session_header(args, scenario_path, plan, allocators, sweep_params, cc)
    else:
        header = _command_only_header(args, plan, allocators, command, cc, sweep_params)
    if command is not None:
        program_setup.describe(header, command)
    if getattr(args, "shard", None):
        if args.seed is None:  # a random one would differ in every shard: another plan each
            plan.seed = default_seed(plan, header["source"])
        plan, header["shard"] = _take_shard(args, plan, programs, progress, check)
        header["plan"], header["probes"] = plan.to_json(), plan.probe_sets
    progress.info(f"plan: {plan.describe()}")
    _tell_memory_limit(args, plan, progress)
    header["probe_plan"] = probe_plan.to_json()
    header["allow_huge"] = bool(args.allow_huge)
    output = Path(args.output) if args.output else _default_output(header["scenario"], header.get("shard"))
    check()  # the last moment to stop without leaving a file behind
    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        result = create(output, header)
    except FileExistsError:
        raise UsageError(_output_exists(output, header)) from None
    return result, plan, allocators, programs


def _output_exists(output: Path, header: Mapping) -> str:
    """Why -o cannot be `output`, and what to do: never overwrite; --resume only what this
    session could continue (the same scenario or program, unfinished)."""
    try:
        found = load(output)
        existing = found.header
    except (ResultFileError, OSError, ValueError, KeyError):
        return f"{output} exists and is not a result file; choose another -o (scenc never overwrites a file)"
    ours = (header.get("source"), header.get("targets"))
    theirs = (existing.get("source"), existing.get("targets"))
    if ours != theirs:
        what = existing.get("scenario_path") or existing.get("scenario") or "?"
        kind = "program" if existing.get("targets") and not existing.get("source") else "scenario"
        return (f"{output} holds the results of another {kind} ({what}); choose another -o for this one "
                f"(scenc never overwrites a result file)")
    if found.status == "complete":
        return (f"{output} holds a finished session of this scenario; choose another -o "
                f"(`scenc report {output}` shows it again)")
    return (f"{output} holds an unfinished session of this scenario: continue it with "
            f"`scenc run --resume {output}`, or choose another -o")


def _take_shard(args, plan: Plan, programs, progress: Progress, check):
    """This shard's part of `plan` (see run/shard.py) and the header's "shard" entry."""
    index, count = args.shard
    progress.info(f"shard {index}/{count}: weighing the {len(cells.plan_cells(plan.to_json()))} cells "
                  f"(one unmeasured run of each program)")
    weights, uncounted = shard.weigh(plan, programs, ProgramRunner(), check)
    if uncounted:
        progress.note(f"scenc: {len(uncounted)} cells reported no allocator calls; each weighs as "
                      f"much as the heaviest (first: {cells.cell_label(uncounted[0])})")
    part, entry = shard.take(plan, index, count, weights)
    if part.time_budget_s is not None and args.time_budget is None:
        part.time_budget_s = _time_budget(args, len(entry["blocks"]))  # the default: per cell
    progress.info(shard.describe(entry))
    if not part.configs:
        progress.note(f"scenc: shard {index}/{count} has no cell to run (the plan has only "
                      f"{len(entry['weights'])}); its file still goes to `scenc merge`")
    return part, entry


def prepare_resume(args, progress, check=lambda: None):
    """The same for --resume: plan and allocators from the file's header, the programs rebuilt."""
    given = [name for name in _PLAN_OPTIONS if getattr(args, name, None) is not None]
    if given:
        raise UsageError(f"--resume continues the plan saved in the file; drop "
                         f"{', '.join('--' + g.replace('_', '-') for g in given)}")
    try:
        result = load(args.resume)
    except FileNotFoundError:
        raise UsageError(f"{args.resume}: no such file") from None
    except ResultFileError as exc:
        raise UsageError(f"cannot resume: {exc}") from None
    header = result.header
    command = program_setup.target_of(header)
    if command is not None:
        program_setup.check_resumable(command, [c.get("params") or {} for c in (header.get("plan") or {}).get(
            "configs", []) if c.get("target") == "command"])
    scenario_path = Path(args.scenario or header.get("scenario_path", ""))
    if command is None or header.get("scenario_path"):
        if not scenario_path.is_file():
            raise UsageError(f"cannot resume: the scenario {scenario_path} is gone; give its path "
                             f"after `scenc run`")
        if scenario_path.read_text() != header["source"]:
            raise UsageError(f"cannot resume: {scenario_path} changed since {args.resume} was started; "
                             f"the runs would not be comparable")
    try:
        plan = Plan.from_json(header["plan"])
        allocators = _allocators_from_header(header)
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"cannot resume: {args.resume} has no usable plan ({exc})") from None
    except HarnessError as exc:
        raise UsageError(str(exc)) from None
    if args.timeout is not None:
        plan.timeout_s = args.timeout
    if args.time_budget is not None:
        plan.time_budget_s = args.time_budget
    if args.memory_limit is not NO_LIMIT_GIVEN or "memory_limit" not in header["plan"]:
        plan.memory_limit = _memory_limit(args)  # given now, or a file from before the limit
    allow_huge = bool(header.get("allow_huge") or args.allow_huge)
    progress.info(f"resuming {args.resume}: {len(result.runs)} runs saved; plan: {plan.describe()}")
    _tell_memory_limit(args, plan, progress, allow_huge)
    programs = _build_programs(scenario_path, plan.param_sets, plan.probe_sets,
                               header.get("cc") or "gcc", progress, allow_huge=allow_huge, check=check) \
        if plan.param_sets else {}
    return result, plan, allocators, programs


def _memory_limit(args) -> Optional[int]:
    return memlimit.default() if args.memory_limit is NO_LIMIT_GIVEN else args.memory_limit


def _tell_memory_limit(args, plan: Plan, progress: Progress, allow_huge: Optional[bool] = None) -> None:
    if allow_huge is None:
        allow_huge = args.allow_huge
    if allow_huge or args.memory_limit is not NO_LIMIT_GIVEN:
        progress.info(f"memory limit per run: {memlimit.describe(plan.memory_limit)}")
