"""`scenc run`'s plan and session: which runs to make, and making them fairly.

The work is split in steps, each in its own module:

* planning (here): which runs to make. A `Plan` is a list of run configurations
  (allocator x param set x probe set) plus how many times to run each. The
  default planner crosses every allocator with every param set and the one
  probe set every program already has ("time+memory"); a probe planner can
  hand over any other list of configurations.
* execution (here, `Session`): each program is built once per (param set,
  probe set) before any run (run_setup.py), then every configuration runs
  once to warm up, then in rounds. Each round runs every configuration once,
  in a new random order, so a drift of the machine (a noisy neighbour, a hot
  CPU) falls on all alike. One run, and the record of how it ended, is
  runner.py's job.
* saving: every finished run is appended to the result file at once
  (see resultfile.py), so Ctrl-C or a crash of scenc itself loses at most
  the run in progress, and `--resume` carries on from the file. Interrupted
  runs (Ctrl-C, SIGTERM) are not saved at all: the file ends with the last
  finished run, and `--resume` redoes the interrupted one.
* the command line: run_command.py (options, signals, the report at the end)
  and run_setup.py (a new or resumed plan, its result file and programs).
  `register` stays here, where cli.py looks for it.

Warm-up runs are not measurements and are not saved when they succeed; a
warm-up that fails is saved (round 0, "warmup": true) because the failure
is a result. Statistics and tables live in report/.
"""

import itertools
import json
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from .command_target import COMMAND, SCENARIO
from .report import metrics as metric_defs
from .report.progress import Progress, format_duration
from .runner import ProgramRunner, make_record, static_peak

STATUS_WORDS = {"crashed": "crashed", "timeout": "timed out", "failed-allocs": "had failed allocations",
                "out-of-memory": "ran out of memory", "wrong-allocator": "ran under the wrong allocator",
                "no-metric": "printed no --metric figure"}
# Failures that repeat exactly in every run: no second try.
DROP_AT_ONCE = ("timeout", "wrong-allocator", "out-of-memory")

DEFAULT_RUNS = 10
DEFAULT_WARMUP = 1
AUTO_MIN_RUNS = 5
AUTO_MAX_RUNS = 50
DEFAULT_CI = 0.02
# A run slower than this many warm-ups is taken for a hang.
TIMEOUT_FACTOR = 20
MIN_TIMEOUT_S = 10.0
FIRST_WARMUP_TIMEOUT_S = 120.0
# A crash may be a rare race; three in a row is a pattern, and further runs
# would only waste time. A timeout or a wrong allocator stops at once: each
# further try costs a whole timeout, or measures the wrong thing.
CRASHES_BEFORE_DROP = 3

# A probe set is the probes measured in one run, joined by "+" (probes/__init__.py);
# probes/planner.py turns `--probes` into the sets, each built into its own program.
DEFAULT_PROBE_SET = "time+memory"


def register(subparsers) -> None:
    """Add `scenc run` (its command line lives in run_command.py, which imports this module)."""
    from .run_command import register as add_run_command
    add_run_command(subparsers)


# --------------------------------------------------------------------------- plan


def params_key(params: Mapping) -> str:
    return json.dumps(dict(params), sort_keys=True)


def params_label(params: Mapping) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items()) or "(defaults)"


@dataclass(frozen=True)
class RunConfig:
    """One thing to measure repeatedly: an allocator, param values, a probe set.

    `target` is what runs: the scenario, or the real command given after
    `--` (command_target.py; its configurations have no params).
    """
    allocator: str
    params: Tuple[Tuple[str, object], ...]
    probe_set: str = DEFAULT_PROBE_SET
    target: str = SCENARIO

    @classmethod
    def make(cls, allocator: str, params: Mapping, probe_set: str = DEFAULT_PROBE_SET,
             target: str = SCENARIO):
        return cls(allocator, tuple(params.items()), probe_set, target)

    @property
    def params_dict(self) -> Dict[str, object]:
        return dict(self.params)

    @property
    def program_key(self) -> Tuple[str, str]:
        """Configurations with the same key run the same program."""
        if self.target != SCENARIO:
            return self.target, self.probe_set
        return params_key(self.params_dict), self.probe_set

    def label(self) -> str:
        if self.target != SCENARIO:
            return f"{self.allocator} [{self.target}]"
        extra = f" [{self.probe_set}]" if self.probe_set != DEFAULT_PROBE_SET else ""
        params = params_label(self.params_dict) if self.params else ""
        return f"{self.allocator} {params}".strip() + extra

    def to_json(self) -> dict:
        data = {"allocator": self.allocator, "params": self.params_dict, "probe_set": self.probe_set}
        if self.target != SCENARIO:
            data["target"] = self.target
        return data

    @classmethod
    def from_json(cls, data: Mapping) -> "RunConfig":
        return cls.make(data["allocator"], data["params"], data.get("probe_set", DEFAULT_PROBE_SET),
                        data.get("target", SCENARIO))

    def matches(self, record: Mapping) -> bool:
        return (record["allocator"] == self.allocator and record["params"] == self.params_dict
                and record.get("probe_set", DEFAULT_PROBE_SET) == self.probe_set
                and record.get("target", SCENARIO) == self.target)


@dataclass
class Plan:
    configs: List[RunConfig]
    runs: Optional[int] = DEFAULT_RUNS      # None: `--runs auto`
    warmup: int = DEFAULT_WARMUP
    ci: float = DEFAULT_CI                  # auto: stop when every 95% CI is within ±ci of its mean
    min_runs: int = AUTO_MIN_RUNS
    max_runs: int = AUTO_MAX_RUNS
    time_budget_s: Optional[float] = None
    timeout_s: Optional[float] = None       # None: derived from each configuration's warm-up
    seed: int = 0                           # of the shuffles, not of the scenario
    memory_limit: Optional[int] = None      # bytes of RLIMIT_DATA per run (memlimit.py); None: none

    @property
    def auto(self) -> bool:
        return self.runs is None

    @property
    def max_rounds(self) -> int:
        return self.max_runs if self.auto else self.runs

    def _distinct(self, attribute):
        seen = []
        for c in self.configs:
            value = getattr(c, attribute)
            if value not in seen:
                seen.append(value)
        return seen

    @property
    def allocators(self) -> List[str]:
        return self._distinct("allocator")

    @property
    def param_sets(self) -> List[Dict[str, object]]:
        """The scenario's param sets (a command has none)."""
        return [dict(p) for p in dict.fromkeys(c.params for c in self.configs if c.target == SCENARIO)]

    @property
    def probe_sets(self) -> List[str]:
        return list(dict.fromkeys(c.probe_set for c in self.configs if c.target == SCENARIO))

    def describe(self) -> str:
        """"4 allocators x 3 param sets x 10 runs + 1 warm-up each = 132 runs"."""
        def count(n, word):
            return f"{n} {word}{'s' * (n != 1)}"
        parts = [count(len(self.allocators), "allocator"), count(len(self.param_sets), "param set")]
        targets = self._distinct("target")
        if targets != [SCENARIO]:
            parts[1:] = [" and ".join(([count(len(self.param_sets), "scenario param set")]
                                       if SCENARIO in targets else []) + ["the command"])]
        if len(self.probe_sets) > 1:
            parts.append(count(len(self.probe_sets), "probe set"))
        if self.auto:
            runs = f"{self.min_runs} to {self.max_runs} runs (until each 95% CI is within ±{self.ci:.1%})"
        else:
            runs = count(self.runs, "run")
        text = " x ".join(parts) + f" x {runs}"
        if self.warmup:
            text += f" + {count(self.warmup, 'warm-up')} each"
        n = len(self.configs)
        if self.auto:
            text += f" = {n * (self.min_runs + self.warmup)} to {n * (self.max_runs + self.warmup)} runs"
        else:
            text += f" = {n * (self.runs + self.warmup)} runs"
        if len(self.configs) != len(self.allocators) * len(self.param_sets) * len(self.probe_sets) \
                and targets == [SCENARIO]:
            text += f" ({n} configurations)"
        return text

    def to_json(self) -> dict:
        return {
            "configs": [c.to_json() for c in self.configs],
            "runs": "auto" if self.auto else self.runs,
            "warmup": self.warmup,
            "ci": self.ci,
            "min_runs": self.min_runs,
            "max_runs": self.max_runs,
            "time_budget_s": self.time_budget_s,
            "timeout_s": self.timeout_s,
            "seed": self.seed,
            "memory_limit": self.memory_limit,
            "order": "every round runs each configuration once, shuffled with "
                     "random.Random(f'{seed}:{round}'); round 0 is the warm-up",
        }

    @classmethod
    def from_json(cls, data: Mapping) -> "Plan":
        return cls(
            configs=[RunConfig.from_json(c) for c in data["configs"]],
            runs=None if data["runs"] == "auto" else int(data["runs"]),
            warmup=int(data["warmup"]), ci=float(data["ci"]),
            min_runs=int(data["min_runs"]), max_runs=int(data["max_runs"]),
            time_budget_s=data.get("time_budget_s"), timeout_s=data.get("timeout_s"),
            seed=int(data["seed"]), memory_limit=data.get("memory_limit"),
        )

    def round_order(self, round_: int, configs: Sequence[RunConfig]) -> List[RunConfig]:
        order = list(configs)
        random.Random(f"{self.seed}:{round_}").shuffle(order)
        return order


def plan_runs(allocators: Sequence[str], param_sets: Sequence[Mapping],
              probe_sets: Sequence[str] = (DEFAULT_PROBE_SET,), **options) -> Plan:
    """The default planner: every allocator with every param set and probe set."""
    configs = [RunConfig.make(a, p, s) for p in param_sets for s in probe_sets for a in allocators]
    return Plan(configs=configs, **options)


def sweep(params: Mapping[str, Sequence]) -> List[Dict[str, object]]:
    """{threads: [1, 2], size: [8, 64]} -> the 4 combinations, first param slowest."""
    if not params:
        return [{}]
    keys = list(params)
    return [dict(zip(keys, values)) for values in itertools.product(*(params[k] for k in keys))]


# ---------------------------------------------------------------------- session


@dataclass
class _ConfigState:
    done: int = 0                      # measured runs finished, any status
    ok: int = 0
    failures_in_row: int = 0
    dropped: Optional[str] = None      # why no further runs are made
    warm: bool = False
    durations: List[float] = field(default_factory=list)
    warmup_duration: Optional[float] = None


class Session:
    """Carries out a plan, appending every finished run to a result file."""

    def __init__(self, plan: Plan, allocators: Mapping, programs: Mapping, result,
                 progress: Progress, runner: Optional[ProgramRunner] = None, base_env=None,
                 command=None):
        self.plan = plan
        self.command = command                # command_target.CommandTarget, or None
        self.allocators = allocators          # name -> allocators.Allocator
        self.programs = programs              # RunConfig.program_key -> binary path
        self.result = result                  # resultfile.ResultFile
        self.progress = progress
        self.runner = runner or ProgramRunner()
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.state: Dict[RunConfig, _ConfigState] = {c: _ConfigState() for c in plan.configs}
        self.started = time.monotonic()
        self.stop_reason: Optional[str] = None
        self.runs_this_session = 0
        self._notes_shown: set = set()
        self._peaks: Dict[str, Optional[int]] = {}
        self._restore(result.runs)

    # -- state from records (a resumed file)

    def _restore(self, records) -> None:
        for record in records:
            config = next((c for c in self.plan.configs if c.matches(record)), None)
            if config is None:
                continue
            self._account(config, record)

    def _account(self, config: RunConfig, record: Mapping) -> None:
        st = self.state[config]
        if not record.get("warmup"):
            st.done += 1
        if record["status"] == "ok":
            st.ok += 1
            st.failures_in_row = 0
            if not record.get("warmup"):
                st.durations.append(record["duration_s"])
            return
        st.failures_in_row += 1
        status = STATUS_WORDS.get(record["status"], record["status"])
        if record["status"] in DROP_AT_ONCE:
            st.dropped = f"it {status}, and every further run would do the same"
        elif record.get("warmup"):
            # A program that fails before it is even warm has nothing to measure.
            st.dropped = f"its warm-up run {status}"
        elif st.failures_in_row >= CRASHES_BEFORE_DROP:
            st.dropped = f"it {status} {st.failures_in_row} times in a row"

    # -- timing

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def _estimate(self, config: RunConfig) -> float:
        st = self.state[config]
        if st.durations:
            return sum(st.durations) / len(st.durations)
        if st.warmup_duration is not None:
            return st.warmup_duration
        known = [d for s in self.state.values() for d in s.durations] or \
                [s.warmup_duration for s in self.state.values() if s.warmup_duration is not None]
        return sum(known) / len(known) if known else 1.0

    def _timeout(self, config: RunConfig) -> float:
        if self.plan.timeout_s is not None:
            return self.plan.timeout_s
        st = self.state[config]
        reference = st.warmup_duration
        if reference is None and st.durations:
            reference = max(st.durations)
        if reference is None:
            # Before this configuration ran at all: judge by the slowest run of
            # the same program under another allocator, if any.
            same = [s.warmup_duration or max(s.durations, default=0.0)
                    for c, s in self.state.items() if c.program_key == config.program_key]
            same = [d for d in same if d]
            if not same:
                return FIRST_WARMUP_TIMEOUT_S
            reference = max(same)
        return max(MIN_TIMEOUT_S, TIMEOUT_FACTOR * reference)

    def remaining_runs(self) -> int:
        return sum(max(0, self.plan.max_rounds - st.done) + (0 if st.warm else self.plan.warmup)
                   for st in self.state.values() if st.dropped is None)

    def eta(self) -> float:
        return sum((max(0, self.plan.max_rounds - st.done) + (0 if st.warm else self.plan.warmup))
                   * self._estimate(c) for c, st in self.state.items() if st.dropped is None)

    # -- running

    def active(self) -> List[RunConfig]:
        return [c for c in self.plan.configs if self.state[c].dropped is None]

    def run_one(self, config: RunConfig, round_: int, warmup: bool = False) -> Optional[dict]:
        """Run and save once; None when interrupted (the unfinished run is not saved)."""
        from . import probes
        from .probes import rundata
        allocator = self.allocators[config.allocator]
        timeout = self._timeout(config)
        if config.target == COMMAND:
            from .command_runner import make_command_record
            outcome = self.runner.run_command(self.command, allocator, self.base_env, timeout,
                                              self.plan.memory_limit)
            if self.runner.interrupted:
                return None
            return self._save(config, make_command_record(
                config, allocator, round_, outcome, self.command, timeout, warmup,
                self.plan.memory_limit), warmup, outcome.duration_s)
        run_dir = None
        env = dict(self.base_env)
        first_good = not warmup and self.state[config].ok == 0
        # A directory costs a mkdir and an rmtree per run: make one only when a
        # probe writes files, or when this run's report may be kept.
        if rundata.wants_run_dir(config.probe_set) and (probes.needs_run_dir(config.probe_set)
                                                        or first_good):
            run_dir = rundata.run_dir(self.result.path, config.allocator, config.probe_set,
                                      config.params_dict, round_)
            run_dir.mkdir(parents=True, exist_ok=True)
            env.update(probes.environment(config.probe_set, run_dir))
        env = allocator.preload_env(env)
        outcome = self.runner.run([str(self.programs[config.program_key])], env, timeout,
                                  self.plan.memory_limit)
        if self.runner.interrupted:
            if run_dir:
                rundata.discard(run_dir)
            return None
        record = make_record(config, allocator, round_, outcome, timeout, warmup, run_dir,
                             self.plan.memory_limit, lambda: self._peak_needed(config))
        if run_dir:
            # The first good measured run keeps its files for the pictures and
            # `scenc play`; the others' are large and already summed up.
            if first_good and record["status"] == "ok":
                rundata.keep(run_dir, outcome.stdout)
                record["run_dir"] = os.path.relpath(run_dir, Path(self.result.path).resolve().parent)
            else:
                rundata.discard(run_dir)
        return self._save(config, record, warmup, outcome.duration_s)

    def _save(self, config: RunConfig, record: dict, warmup: bool, duration_s: float) -> dict:
        """Account for a finished run, and append it unless it is a good warm-up."""
        for note in record.get("notes", ()):
            if note not in self._notes_shown:
                self._notes_shown.add(note)
                self.progress.note(f"scenc: {note}")
        st = self.state[config]
        if warmup:
            st.warm = True
            if record["status"] == "ok":
                st.warmup_duration = duration_s
                self.runs_this_session += 1
                return record  # warm-ups are not measurements: nothing to save
        self.result.append_run(record)
        self.runs_this_session += 1
        self._account(config, record)
        if record["status"] != "ok":
            self._report_failure(config, record, warmup)
        return record

    def _peak_needed(self, config: RunConfig) -> Optional[int]:
        key = params_key(config.params_dict)
        if key not in self._peaks:
            header = self.result.header
            self._peaks[key] = static_peak(header["source"], header.get("scenario_path") or "scenario",
                                           config.params_dict)
        return self._peaks[key]

    def _report_failure(self, config: RunConfig, record: Mapping, warmup: bool) -> None:
        what = "warm-up run" if warmup else f"run {record['round']}"
        status = record["status"]
        if status == "wrong-allocator":
            self.progress.note(f"scenc: WRONG ALLOCATOR in {what} of {config.label()}: "
                               f"{record['problem']}. Recorded as wrong-allocator, not as "
                               f"{config.allocator}.")
        else:
            self.progress.note(f"scenc: {what} of {config.label()} {STATUS_WORDS.get(status, status)}: "
                               f"{record['problem']}")
            tail = record["stderr_tail"].strip().splitlines()[-3:]
            for line in tail:
                self.progress.note(f"    stderr: {line[:200]}")
        dropped = self.state[config].dropped
        if dropped:
            self.progress.note(f"scenc: no more runs of {config.label()}: {dropped}")

    def _tick(self, config: RunConfig, label: str) -> None:
        done = self.runs_this_session
        total = done + self.remaining_runs()
        self.progress.update(done, total, label, self.eta())

    def warm_up(self) -> bool:
        """Warm every configuration not warm yet; False when interrupted."""
        for i in range(self.plan.warmup):
            for config in self.plan.round_order(-i, self.active()):
                if self.state[config].dropped is not None:
                    continue
                self._tick(config, f"warm-up {config.label()}")
                if self.run_one(config, 0, warmup=True) is None:
                    return False
        return True

    def _converged(self) -> bool:
        from .stats import relative_ci_halfwidth
        from . import probes
        for config in self.active():
            samples = self.samples(config)
            measured = probes.set_members(config.probe_set)
            for name in metric_defs.headline_names():
                owner = probes.owner(name)
                if owner is not None and owner.name not in measured:
                    continue  # e.g. wall time in a layout run: not measured there
                values = samples.get(name, [])
                if len(values) < self.plan.min_runs:
                    return False
                width = relative_ci_halfwidth(values)
                if width is None or width > self.plan.ci:
                    return False
        return True

    def samples(self, config: RunConfig) -> Dict[str, List[float]]:
        values: Dict[str, List[float]] = {}
        for record in self.result.runs:
            if record["status"] == "ok" and not record.get("warmup") and config.matches(record):
                for name, v in record["metrics"].items():
                    values.setdefault(name, []).append(v)
        return values

    def measure(self) -> bool:
        """All rounds; False when interrupted. Sets stop_reason when a limit ended it early."""
        plan = self.plan
        for round_ in range(1, plan.max_rounds + 1):
            todo = [c for c in self.active() if self.state[c].done < round_]
            if not todo:
                continue
            if plan.auto and round_ > plan.min_runs and self._converged():
                self.stop_reason = None
                return True
            if plan.time_budget_s is not None and self.runs_this_session:
                round_cost = sum(self._estimate(c) for c in todo)
                if self.elapsed() + round_cost > plan.time_budget_s:
                    self.stop_reason = (f"time budget of {format_duration(plan.time_budget_s)} "
                                        f"reached before round {round_}")
                    return True
            for config in plan.round_order(round_, todo):
                if self.state[config].dropped is not None:
                    continue
                self._tick(config, f"round {round_}/{plan.max_rounds}  {config.label()}")
                if self.run_one(config, round_) is None:
                    return False
            self.progress.round_done(
                f"round {round_}/{plan.max_rounds} done: {self.runs_this_session} runs in "
                f"{format_duration(self.elapsed())}, about {format_duration(self.eta())} to go"
                if not plan.auto else
                f"round {round_} done: {self.runs_this_session} runs in "
                f"{format_duration(self.elapsed())}")
        if plan.auto and not self._converged():
            self.stop_reason = (f"--max-runs {plan.max_runs} reached before every 95% CI was "
                                f"within ±{plan.ci:.1%}")
        return True
