"""`scenc run`: run a scenario many times under each allocator, save every run.

The work is split in three steps, each its own piece below:

* planning: which runs to make. A `Plan` is a list of run configurations
  (allocator x param set x probe set) plus how many times to run each. The
  default planner crosses every allocator with every param set and the one
  probe set every program already has ("time+memory"); a probe planner can
  hand over any other list of configurations.
* execution: each program is built once per (param set, probe set) before
  any run, then every configuration runs once to warm up, then in rounds.
  Each round runs every configuration once, in a new random order, so a
  drift of the machine (a noisy neighbour, a hot CPU) falls on all alike.
  Each run is a child process in its own process group (killed whole on a
  timeout or Ctrl-C), under the allocator's LD_PRELOAD and a memory limit
  (memlimit.py: 80% of the machine's memory unless --memory-limit); the program reports
  which shared object served malloc, and a run served by the wrong one is
  recorded as "wrong-allocator", never under the allocator's name.
* saving: every finished run is appended to the result file at once
  (see resultfile.py), so Ctrl-C or a crash of scenc itself loses at most
  the run in progress, and `--resume` carries on from the file.

Warm-up runs are not measurements and are not saved when they succeed; a
warm-up that fails is saved (round 0, "warmup": true) because the failure
is a result. Statistics and tables live in report/.

A run ends in one of these statuses (resultfile.RUN_STATUSES):
* ok: the program did all the scenario says; its figures enter the statistics;
* crashed, timeout, wrong-allocator: see make_record;
* failed-allocs: the program finished, but some allocations returned NULL.
  It is a failure, not "ok with a footnote": a NULL is not used, written or
  freed, so the run did less work than the scenario and its time would make
  a failing allocator look fast. The record keeps its figures (and the count
  of failed calls), the statistics leave it out, the report says so;
* out-of-memory: the run reached its memory limit (--memory-limit, see
  memlimit.py), known because the scenario's own lower bound of live bytes
  (scenario/peak.py) is above the limit, or because the program was already
  over it when the limit was set;
* interrupted runs (Ctrl-C, SIGTERM) are not saved at all: the file ends with
  the last finished run, and `--resume` redoes the interrupted one.
"""

import argparse
import dataclasses
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from .report import metrics as metric_defs
from .report.progress import Progress, format_duration

EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 3, 64, 130
STATUS_WORDS = {"crashed": "crashed", "timeout": "timed out", "failed-allocs": "had failed allocations",
                "out-of-memory": "ran out of memory", "wrong-allocator": "ran under the wrong allocator"}
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
STDERR_TAIL_CHARS = 2000

# A probe set is the probes measured in one run, joined by "+" (probes/__init__.py);
# probes/planner.py turns `--probes` into the sets, each built into its own program.
DEFAULT_PROBE_SET = "time+memory"


class HarnessError(Exception):
    """A run that cannot start; the message is a sentence for the user."""


# --------------------------------------------------------------------------- plan


def params_key(params: Mapping) -> str:
    return json.dumps(dict(params), sort_keys=True)


def params_label(params: Mapping) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items()) or "(defaults)"


@dataclass(frozen=True)
class RunConfig:
    """One thing to measure repeatedly: an allocator, param values, a probe set."""
    allocator: str
    params: Tuple[Tuple[str, object], ...]
    probe_set: str = DEFAULT_PROBE_SET

    @classmethod
    def make(cls, allocator: str, params: Mapping, probe_set: str = DEFAULT_PROBE_SET):
        return cls(allocator, tuple(params.items()), probe_set)

    @property
    def params_dict(self) -> Dict[str, object]:
        return dict(self.params)

    @property
    def program_key(self) -> Tuple[str, str]:
        """Configurations with the same key run the same program."""
        return params_key(self.params_dict), self.probe_set

    def label(self) -> str:
        extra = f" [{self.probe_set}]" if self.probe_set != DEFAULT_PROBE_SET else ""
        params = params_label(self.params_dict) if self.params else ""
        return f"{self.allocator} {params}".strip() + extra

    def to_json(self) -> dict:
        return {"allocator": self.allocator, "params": self.params_dict, "probe_set": self.probe_set}

    @classmethod
    def from_json(cls, data: Mapping) -> "RunConfig":
        return cls.make(data["allocator"], data["params"], data.get("probe_set", DEFAULT_PROBE_SET))

    def matches(self, record: Mapping) -> bool:
        return (record["allocator"] == self.allocator and record["params"] == self.params_dict
                and record.get("probe_set", DEFAULT_PROBE_SET) == self.probe_set)


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
        return [dict(p) for p in self._distinct("params")]

    @property
    def probe_sets(self) -> List[str]:
        return self._distinct("probe_set")

    def describe(self) -> str:
        """"4 allocators x 3 param sets x 10 runs + 1 warm-up each = 132 runs"."""
        def count(n, word):
            return f"{n} {word}{'s' * (n != 1)}"
        parts = [count(len(self.allocators), "allocator"), count(len(self.param_sets), "param set")]
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
        if len(self.configs) != len(self.allocators) * len(self.param_sets) * len(self.probe_sets):
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


# ---------------------------------------------------------------------- execution


@dataclass
class Outcome:
    started: str
    duration_s: float
    returncode: Optional[int]
    stdout: str
    stderr: str
    timed_out: bool = False
    over_limit: Optional[int] = None    # bytes in use when the memory limit was set, if over it


class ProgramRunner:
    """Runs one program at a time, each in its own process group.

    The group lets a timeout kill the program with all its threads and any
    child it made. Ctrl-C is caught (see `interrupt`) rather than raised, so
    it never lands in the middle of saving a run.
    """

    def __init__(self):
        self.interrupted = False
        self.signal: Optional[int] = None     # the first signal that interrupted the session
        self._current: Optional[subprocess.Popen] = None

    def run(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float,
            memory_limit: Optional[int] = None) -> Outcome:
        from . import memlimit
        started = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        t0 = time.perf_counter()
        proc = subprocess.Popen(list(argv), env=dict(env), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        self._current = proc
        timed_out = False
        over_limit = None
        try:
            if memory_limit is not None:
                over_limit = memlimit.apply(proc.pid, memory_limit)
            if self.interrupted or over_limit is not None:
                self._kill(proc)
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            self._kill(proc)
            out, err = proc.communicate()
        finally:
            self._current = None
        duration = time.perf_counter() - t0
        return Outcome(started, duration, proc.returncode,
                       out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), timed_out,
                       over_limit)

    @staticmethod
    def _kill(proc: subprocess.Popen) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def interrupt(self, signum=None, _frame=None):
        """Signal handler for SIGINT/SIGTERM: stop the running program, finish cleanly."""
        self.interrupted = True
        if self.signal is None and signum is not None:
            self.signal = signum
        proc = self._current
        if proc is not None and proc.returncode is None:
            self._kill(proc)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def static_peak(source: str, filename: str, params: Mapping) -> Optional[int]:
    """The scenario's lower bound of peak live bytes (scenario/peak.py), or None."""
    from .scenario.checks import estimate_peak
    from .scenario.errors import ScenarioError
    from .scenario.parser import parse
    from .scenario.resolve import resolve
    try:
        return estimate_peak(resolve(parse(source, filename), dict(params)))[0]
    except (ScenarioError, OSError, ValueError):
        return None  # it only explains a failure; a scenario that built parses


def _allocation_calls(report: Mapping) -> int:
    return sum(n for t in report.get("threads", []) for kind, n in t.get("ops", {}).items()
               if kind != "free")


def _blame_memory(record: dict, memory_limit: Optional[int], peak_needed, what: str) -> None:
    """A crash or NULLs under a memory limit the scenario cannot fit in: out of memory."""
    from .scenario.machine import fmt_bytes
    if memory_limit is None or peak_needed is None:
        return
    needs = peak_needed()
    if needs is None or needs < memory_limit:
        # The limit may still be the cause (a scenario's upper bound can be above
        # it), or the allocator failed by itself: the record does not guess.
        return
    record.update(status="out-of-memory",
                  problem=f"the scenario needs at least {fmt_bytes(needs)} live, more than the "
                          f"memory limit of {fmt_bytes(memory_limit)} per run (--memory-limit): {what}")


def make_record(config: RunConfig, allocator, round_: int, outcome: Outcome,
                timeout_s: float, warmup: bool = False, run_dir: Optional[Path] = None,
                memory_limit: Optional[int] = None, peak_needed=None) -> dict:
    """The saved record of one run, with its status decided from what the program did.

    `peak_needed()` gives the scenario's lower bound of live bytes; it is only
    called to explain a failure under `memory_limit`.
    """
    from . import allocators as allocator_registry
    from . import probes
    from .scenario.machine import fmt_bytes
    record = {
        "allocator": config.allocator,
        "params": config.params_dict,
        "probe_set": config.probe_set,
        "round": round_,
        "warmup": warmup,
        "status": "ok",
        "metrics": {},
        "provider": None,
        "stderr_tail": outcome.stderr[-STDERR_TAIL_CHARS:],
        "signal": None,
        "exit_code": outcome.returncode,
        "started": outcome.started,
        "duration_s": round(outcome.duration_s, 6),
        "problem": None,
    }
    if outcome.over_limit is not None:
        record.update(status="out-of-memory", exit_code=None,
                      problem=f"it already used {fmt_bytes(outcome.over_limit)} when its memory limit "
                              f"of {fmt_bytes(memory_limit or 0)} was set; killed (process group)")
        return record
    if outcome.timed_out:
        record.update(status="timeout", exit_code=None,
                      problem=f"no result after {timeout_s:g} s; killed (process group)")
        return record
    if outcome.returncode is not None and outcome.returncode < 0:
        record.update(status="crashed", signal=signal_name(-outcome.returncode), exit_code=None,
                      problem=f"killed by {signal_name(-outcome.returncode)}")
        _blame_memory(record, memory_limit, peak_needed, f"it was {record['problem']}")
        return record
    if outcome.returncode != 0:
        record.update(status="crashed", problem=f"exit status {outcome.returncode}")
        _blame_memory(record, memory_limit, peak_needed, f"it ended with {record['problem']}")
        return record
    try:
        report = json.loads(outcome.stdout)
        if not isinstance(report, dict) or "wall_ns" not in report:
            raise ValueError("no wall_ns")
    except ValueError:
        record.update(status="crashed", problem="exit status 0 but no valid JSON report on stdout")
        return record
    record["provider"] = report.get("provider")
    # Only the figures of the probes in this run: a run slowed down by `layout`
    # must not leave a wall time behind.
    record["metrics"] = probes.run_metrics(config.probe_set, report, run_dir or Path("."))
    notes = probes.notes(config.probe_set, report)
    if notes:
        record["notes"] = notes
    if not allocator_registry.provider_matches(allocator, record["provider"]):
        record.update(status="wrong-allocator",
                      problem=allocator_registry.explain_mismatch(allocator, record["provider"]))
        return record
    failed = int(record["metrics"].get("failed_allocs") or 0)
    if failed:
        nulls = f"{failed} of {_allocation_calls(report)} allocation calls returned NULL"
        record.update(status="failed-allocs",
                      problem=f"{nulls}, so the run did less work than the scenario; its figures "
                              f"are left out of the statistics")
        _blame_memory(record, memory_limit, peak_needed, nulls)
    return record


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
                 progress: Progress, runner: Optional[ProgramRunner] = None, base_env=None):
        self.plan = plan
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
        for note in record.get("notes", ()):
            if note not in self._notes_shown:
                self._notes_shown.add(note)
                self.progress.note(f"scenc: {note}")
        st = self.state[config]
        if warmup:
            st.warm = True
            if record["status"] == "ok":
                st.warmup_duration = outcome.duration_s
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


# ----------------------------------------------------------------- the command


def parse_fraction(text: str) -> float:
    """"2%" or "0.02" -> 0.02."""
    text = text.strip()
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage (like 2%)") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} should be between 0% and 100%")
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


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must not be negative")
    return value


# Options that shape the plan: given on --resume they would contradict the file.
_PLAN_OPTIONS = ("allocators", "param", "runs", "warmup", "ci", "min_runs", "max_runs", "seed",
                 "allocator_config", "cc", "probes")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "run", help="compare allocators on a scenario: many shuffled runs, statistics, report",
        description="Build the scenario once per param set, then run it under each allocator "
                    "in shuffled rounds, save every run, and report which allocator is faster "
                    "and leaner, by how much, and how sure that is.")
    p.add_argument("scenario", nargs="?", help="a .scn file (not needed with --resume)")
    p.add_argument("--allocators", metavar="LIST",
                   help="comma-separated names or NAME=/path/lib.so (default: glibc and every "
                        "installed tcmalloc, jemalloc, mimalloc); see `scenc allocators`")
    p.add_argument("--allocator-config", metavar="FILE", help="INI file defining more allocators")
    p.add_argument("--param", action="append", metavar="NAME=V1,V2",
                   help="override a param; several values sweep it (several --param: all combinations)")
    p.add_argument("--cc", default=None, help="C compiler (gcc or clang; default $SCENC_CC or gcc)")
    p.add_argument("--runs", type=parse_runs, metavar="N|auto",
                   help=f"measured runs per allocator and param set (default {DEFAULT_RUNS}); "
                        f"'auto' runs until --ci is reached")
    p.add_argument("--warmup", type=positive_int, metavar="N",
                   help=f"unmeasured runs first, per allocator and param set (default {DEFAULT_WARMUP})")
    p.add_argument("--ci", type=parse_fraction, metavar="PCT",
                   help=f"with --runs auto: stop when each 95%% CI of wall time and peak RSS is "
                        f"within ±PCT of its mean (default {DEFAULT_CI * 100:g}%%)")
    p.add_argument("--min-runs", type=positive_int, metavar="N",
                   help=f"with --runs auto: at least N runs (default {AUTO_MIN_RUNS})")
    p.add_argument("--max-runs", type=positive_int, metavar="N",
                   help=f"with --runs auto: at most N runs (default {AUTO_MAX_RUNS})")
    p.add_argument("--time-budget", type=parse_seconds, metavar="DURATION",
                   help="start no new round after this long (30s, 5m ...)")
    p.add_argument("--timeout", type=parse_seconds, metavar="DURATION",
                   help=f"per run (default: max({MIN_TIMEOUT_S:g} s, {TIMEOUT_FACTOR}x the warm-up))")
    p.add_argument("--probes", metavar="LIST",
                   help="what to measure (default time,memory; `scenc probes` lists them): scenc "
                        "plans the fewest runs in which no probe disturbs another's figures; "
                        "'a+b' forces a and b into one run")
    p.add_argument("--baseline", metavar="NAME", help="compare against this allocator (default: the first)")
    p.add_argument("--seed", type=int, help="seed of the run order (default: random, saved in the result)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="result file (default results/<scenario>-<timestamp>.json)")
    p.add_argument("--resume", metavar="FILE", help="continue an interrupted run from its result file")
    p.add_argument("--csv", metavar="FILE", help="also export the runs as CSV")
    p.add_argument("--plots", metavar="DIR", help="also draw plots (PNG and SVG) into DIR")
    p.add_argument("--all-metrics", action="store_true", help="tables for every metric, not only "
                   "wall time and peak RSS")
    p.add_argument("--memory-limit", type=_memory_limit_option, metavar="SIZE", default=_NO_LIMIT_GIVEN,
                   help="most memory a run may take (RLIMIT_DATA: 4G, 512M, 50%%, or none; default "
                        "80%% of this machine's); a run that reaches it is recorded as out of memory")
    p.add_argument("--allow-huge", action="store_true",
                   help="run a scenario whose peak cannot fit in this machine's memory (an error "
                        "otherwise); each run is held to --memory-limit")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress, only the result")
    p.set_defaults(func=cmd_run)


def _memory_limit_option(text: str):
    from . import memlimit
    return memlimit.parse_option(text)


_NO_LIMIT_GIVEN = object()  # --memory-limit absent (None is "--memory-limit none")


def _preload_scipy() -> threading.Thread:
    """Import numpy and scipy.special (what stats.py needs) while builds and warm-ups go on.

    Together they take a few hundred milliseconds and are needed at the end;
    doing it meanwhile keeps them off the critical path. The thread is joined
    before the first measured run, so it never competes with a measurement
    for a CPU (a warm-up is not one: it only has to run the program once, and
    its duration only sets the timeout, generously).
    """
    def work():
        try:
            import scipy.special  # noqa: F401
        except Exception:
            pass
    thread = threading.Thread(target=work, name="scenc-preload", daemon=True)
    thread.start()
    return thread


def _default_allocators(config_path) -> str:
    from . import allocators as registry
    names = ["glibc"] + [a.name for a in registry.known(config_path)
                         if a.name in ("tcmalloc", "jemalloc", "mimalloc") and registry.problem(a) is None]
    return ",".join(names)


def _default_output(scenario: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in scenario) or "scenario"
    base = Path("results") / f"{safe}-{stamp}"
    path, n = base.with_suffix(".json"), 1
    while path.exists():
        n += 1
        path = Path(f"{base}-{n}.json")
    return path


def _allocator_entry(a) -> dict:
    return {"path": a.library, "version": a.version, "env": dict(a.env), "package": a.package,
            "builtin": a.builtin}


def _allocators_from_header(header: Mapping) -> Dict[str, object]:
    from . import allocators as registry
    chosen = {}
    for name, entry in header["allocators"].items():
        a = registry.Allocator(name=name, library=entry.get("path"), env=entry.get("env") or {},
                               version=entry.get("version"), package=entry.get("package"),
                               builtin=bool(entry.get("builtin")))
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
    from . import probes
    from .compiler.pipeline import build
    from .scenario.errors import ScenarioError
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
                from .scenario.peak import is_machine_too_small
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


def _new_session_header(args, scenario_path: Path, plan: Plan, allocators, sweep_params, cc):
    from . import metadata
    from .resultfile import make_header
    from .scenario.parser import parse
    from .scenario.resolve import resolve
    source = scenario_path.read_text()
    # The builds have checked every param set; only the resolved values are needed here.
    scenario = parse(source, str(scenario_path))
    resolved = {params_key(p): resolve(scenario, p) for p in plan.param_sets}
    first = next(iter(resolved.values()))
    machine = metadata.collect_machine(cc=cc)
    return make_header(
        scenario=scenario.name or scenario_path.stem,
        source=source,
        params=sweep_params,
        seed=first.seed,
        machine=machine,
        allocators={name: _allocator_entry(a) for name, a in allocators.items()},
        probes=plan.probe_sets,
        plan=plan.to_json(),
        command=["scenc"] + sys.argv[1:],
        scenario_path=str(scenario_path.resolve()),
        cc=cc,
        compiler=machine.get("compiler"),
        baseline=args.baseline or plan.allocators[0],
        param_sets=[{"params": p, "resolved": dict(resolved[params_key(p)].params)}
                    for p in plan.param_sets],
        metrics={m.name: {"label": m.label, "unit": m.unit, "lower_is_better": m.lower_is_better}
                 for m in metric_defs.all_metrics()},
    )


def _resolve_allocators(args) -> Dict[str, object]:
    from . import allocators as registry
    from .cli import UsageError
    try:
        spec = args.allocators or _default_allocators(args.allocator_config)
        chosen = registry.resolve(spec, config_path=args.allocator_config)
    except registry.AllocatorError as exc:
        raise UsageError(str(exc)) from None
    allocators = {a.name: a for a in chosen}
    if args.baseline and args.baseline not in allocators:
        raise UsageError(f"--baseline {args.baseline}: not among the allocators ({', '.join(allocators)})")
    return allocators


def _prepare_new(args, progress, check=lambda: None):
    """(result file, plan, allocators, programs) for a fresh run; nothing is run yet."""
    from concurrent.futures import ThreadPoolExecutor
    from .cli import UsageError, parse_params
    from .probes import ProbeError, planner
    from .resultfile import create
    if not args.scenario:
        raise UsageError("give a scenario file (or --resume RESULT.json)")
    scenario_path = Path(args.scenario)
    if not scenario_path.is_file():
        raise UsageError(f"{args.scenario}: no such file")
    cc = args.cc or os.environ.get("SCENC_CC", "gcc")
    auto = args.runs == "auto"
    if not auto and any(v is not None for v in (args.ci, args.min_runs, args.max_runs)):
        raise UsageError("--ci, --min-runs and --max-runs go with --runs auto")
    min_runs = max(2, args.min_runs if args.min_runs is not None else AUTO_MIN_RUNS)
    max_runs = args.max_runs or AUTO_MAX_RUNS
    if auto and min_runs > max_runs:
        raise UsageError(f"--min-runs {min_runs} is more than --max-runs {max_runs}")
    sweep_params = parse_params(args.param, sweep=True)
    try:
        probe_plan = planner.plan_spec(args.probes)
    except ProbeError as exc:
        raise UsageError(str(exc)) from None
    if args.probes:
        progress.info(probe_plan.explain())
    param_sets = sweep(sweep_params)

    with ThreadPoolExecutor(max_workers=1) as pool:
        # Finding the allocators' libraries and versions waits on ldconfig and
        # dpkg; the builds (mostly a cache look-up) go on meanwhile.
        looked_up = pool.submit(_resolve_allocators, args)
        try:
            programs = _build_programs(scenario_path, param_sets, probe_plan.probe_sets, cc, progress,
                                       allow_huge=args.allow_huge, check=check)
        except BaseException:
            looked_up.result()  # an unusable allocator is the first thing to fix
            raise
        allocators = looked_up.result()
    check()

    plan = plan_runs(
        list(allocators), param_sets, probe_sets=probe_plan.probe_sets,
        runs=None if auto else (args.runs or DEFAULT_RUNS),
        warmup=DEFAULT_WARMUP if args.warmup is None else args.warmup,
        ci=args.ci or DEFAULT_CI, min_runs=min_runs, max_runs=max_runs,
        time_budget_s=args.time_budget, timeout_s=args.timeout,
        seed=args.seed if args.seed is not None else random.SystemRandom().randrange(2**31),
        memory_limit=_memory_limit(args),
    )
    progress.info(f"plan: {plan.describe()}")
    _tell_memory_limit(args, plan, progress)
    header = _new_session_header(args, scenario_path, plan, allocators, sweep_params, cc)
    header["probe_plan"] = probe_plan.to_json()
    header["allow_huge"] = bool(args.allow_huge)
    output = Path(args.output) if args.output else _default_output(header["scenario"])
    check()  # the last moment to stop without leaving a file behind
    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        result = create(output, header)
    except FileExistsError:
        raise UsageError(f"{output} exists; choose another -o, or continue it with --resume {output}") from None
    return result, plan, allocators, programs


def _prepare_resume(args, progress, check=lambda: None):
    from .cli import UsageError
    from .resultfile import ResultFileError, load
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
    scenario_path = Path(args.scenario or header.get("scenario_path", ""))
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
    if args.memory_limit is not _NO_LIMIT_GIVEN or "memory_limit" not in header["plan"]:
        plan.memory_limit = _memory_limit(args)  # given now, or a file from before the limit
    allow_huge = bool(header.get("allow_huge") or args.allow_huge)
    progress.info(f"resuming {args.resume}: {len(result.runs)} runs saved; plan: {plan.describe()}")
    _tell_memory_limit(args, plan, progress, allow_huge)
    programs = _build_programs(scenario_path, plan.param_sets, plan.probe_sets,
                               header.get("cc") or "gcc", progress, allow_huge=allow_huge, check=check)
    return result, plan, allocators, programs


def _memory_limit(args) -> Optional[int]:
    from . import memlimit
    return memlimit.default() if args.memory_limit is _NO_LIMIT_GIVEN else args.memory_limit


def _tell_memory_limit(args, plan: Plan, progress: Progress, allow_huge: Optional[bool] = None) -> None:
    from . import memlimit
    if allow_huge is None:
        allow_huge = args.allow_huge
    if allow_huge or args.memory_limit is not _NO_LIMIT_GIVEN:
        progress.info(f"memory limit per run: {memlimit.describe(plan.memory_limit)}")


class Interrupted(Exception):
    """SIGINT or SIGTERM before the runs start (afterwards ProgramRunner.interrupt handles them)."""

    def __init__(self, signum: int):
        super().__init__(signal_name(signum))
        self.signum = signum


class _StopRequest:
    """Signal handler for the preparation: notes the signal, to be acted on between steps.

    Raising from the handler (as Python's default SIGINT handler does) can land
    inside an import while the thread preloading scipy imports too, and leave
    the import lock taken for good: scenc then hangs instead of stopping.
    """

    def __init__(self):
        self.signum: Optional[int] = None

    def __call__(self, signum, _frame=None):
        if self.signum is None:
            self.signum = signum

    def check(self) -> None:
        if self.signum is not None:
            raise Interrupted(self.signum)


def _cannot_go_on(exc: OSError, result, progress: Progress) -> int:
    """A run could not be saved (disk full, file removed ...): what is on disk is still valid."""
    import errno
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    reason = "the disk is full" if full else "the file system refused"
    where = exc.filename or result.path
    saved = sum(1 for r in result.runs if not r.get("warmup"))
    try:
        result.set_status("interrupted")
        stale = ""
    except OSError:
        stale = (" (its header still says \"running\": there was no room to rewrite it; "
                 "--resume works all the same)")
    progress.note(f"scenc: cannot save to {where}: {reason} ({exc.strerror or exc}).\n"
                  f"scenc: the {saved} runs finished before are saved in {result.path}{stale}.\n"
                  f"scenc: {'make room, then ' if full else ''}continue with: "
                  f"scenc run --resume {result.path}")
    return EXIT_RUN_FAILED


def cmd_run(args) -> int:
    progress = Progress(quiet=args.quiet)
    # Until the runs start, SIGTERM stops scenc as Ctrl-C does: cleanly, with a sentence.
    stop = _StopRequest()
    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        preload = _preload_scipy()
        try:
            if args.resume:
                prepared = _prepare_resume(args, progress, stop.check)
            else:
                prepared = _prepare_new(args, progress, stop.check)
        except OSError as exc:
            stop.check()
            progress.note(f"scenc: cannot start: {exc.strerror or exc}"
                          f"{f' ({exc.filename})' if exc.filename else ''}")
            return EXIT_RUN_FAILED
        except Exception:
            stop.check()  # a compiler killed by the same Ctrl-C: the signal is the news
            raise
        status = _run_session(args, progress, preload, *prepared, stop.signum)
    except Interrupted as exc:
        progress.close()
        progress.note(f"scenc: interrupted by {signal_name(exc.signum)} before any run")
        return 128 + exc.signum
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if status is not None:
        return status
    return finish(prepared[0], args, progress)


def _run_session(args, progress, preload, result, plan, allocators, programs,
                 early_signal: Optional[int]) -> Optional[int]:
    """Every run of the plan; an exit status if it ended early, None when complete."""
    runner = ProgramRunner()
    session = Session(plan, allocators, programs, result, progress, runner)
    # From here a signal only stops the program running and ends the session
    # between runs, so it never lands in the middle of saving one.
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, runner.interrupt)
    if early_signal is not None:  # came after the last check of the preparation
        runner.interrupt(early_signal)
    try:
        if result.status != "running":
            result.set_status("running")
        finished = session.warm_up()
        preload.join()
        if finished and plan.warmup and session.runs_this_session:
            measured = sum(max(0, plan.max_rounds - st.done) for st in session.state.values()
                           if st.dropped is None)
            progress.info(f"warm-up done in {format_duration(session.elapsed())}; "
                          f"{measured} measured runs{' at most' if plan.auto else ''}, "
                          f"about {format_duration(session.eta())}")
        finished = finished and session.measure()
    except OSError as exc:
        progress.close()
        return _cannot_go_on(exc, result, progress)
    finally:
        progress.close()

    if not finished:
        result.set_status("interrupted")
        measured = sum(1 for r in result.runs if not r.get("warmup"))
        signum = runner.signal or signal.SIGINT
        progress.note(f"scenc: interrupted by {signal_name(signum)}; {measured} finished runs are "
                      f"saved in {result.path}\n"
                      f"scenc: continue with: scenc run --resume {result.path}")
        return 128 + signum
    result.set_status("complete")
    if session.stop_reason:
        progress.note(f"scenc: stopped early: {session.stop_reason}")
    result.close()
    return None


def finish(result, args, progress) -> int:
    """Report a finished result file: tables to stdout, CSV and plots if asked."""
    from .report.analysis import analyze
    from .report.tables import format_analysis
    from .resultfile import export_csv
    # Statistics only for what is shown, unless every metric is asked for.
    analysis = analyze(result, baseline=args.baseline, metrics=None if args.all_metrics else [])
    print(format_analysis(analysis, all_metrics=args.all_metrics))
    sys.stdout.flush()
    if args.csv:
        rows = export_csv(result, args.csv)
        progress.info(f"CSV: {args.csv} ({rows} rows)")
    if args.plots:
        from .probes.plots import write_probe_plots
        from .report.plots import write_plots
        paths = write_plots(analysis, args.plots, all_metrics=args.all_metrics)
        paths += write_probe_plots(result, args.plots)
        progress.info(f"plots: {len(paths)} files in {args.plots}")
    progress.info(f"results: {result.path}")
    failed = [r for r in result.runs if r["status"] != "ok"]
    if failed:
        counts = {}
        for r in failed:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        progress.note("scenc: some runs failed: " + ", ".join(f"{n} {s}" for s, n in counts.items())
                      + " (details in the table above and in the result file)")
        return EXIT_RUN_FAILED
    return EXIT_OK
