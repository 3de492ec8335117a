"""`scenc run`'s session: carrying out a plan, fairly, and saving every run.

The work is split in steps, each in its own module:

* the plan (run/plan.py): which runs to make, as plain data;
* set-up (run/setup.py): the programs built once per (param set, probe set)
  before any run, the allocators found, the result file created or resumed;
* the session (here): every configuration runs once to warm up, then in
  rounds. Each round runs every configuration once, in a new random order,
  so a drift of the machine (a noisy neighbour, a hot CPU) falls on all
  alike. One run, and the record of how it ended, is run/runner.py's job; the
  record's shape is run/record.py's;
* saving: every finished run is appended to the result file at once
  (see run/resultfile.py), so Ctrl-C or a crash of scenc itself loses at most
  the run in progress, and `--resume` carries on from the file. Interrupted
  runs (Ctrl-C, SIGTERM) are not saved at all: the file ends with the last
  finished run, and `--resume` redoes the interrupted one;
* the command line: commands/run.py (signals, the report at the end).

Warm-up runs are not measurements and are not saved when they succeed; a
warm-up that fails is saved (round 0, "warmup": true) because the failure
is a result. Statistics and tables live in report/.
"""

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional

from . import probes
from .probes import rundata
from .report import metrics as metric_defs
from .report.progress import Progress, format_duration
from .run.record import RunRecord, Status
from .run.plan import (COMMAND, FIRST_WARMUP_TIMEOUT_S, IDLE_LIMIT_S, MIN_TIMEOUT_S, TIMEOUT_FACTOR, Plan,
                       RunConfig, params_key)
from .run.program.hooks import hook_failure, run_hook
from .run.program.runner import make_program_record
from .run.program.serving import make_served_record
from .run.runner import ProgramRunner, make_record, static_peak
from .stats.summary import relative_ci_halfwidth

# A crash may be a rare race; three in a row is a pattern, and further runs would only waste time.
# A failure that repeats (Status.repeats) stops a configuration at once.
CRASHES_BEFORE_DROP = 3


@dataclass
class _ConfigState:
    done: int = 0                      # measured runs finished, any status
    ok: int = 0
    failures_in_row: int = 0
    dropped: Optional[str] = None      # why no further runs are made
    warm: bool = False
    measured: int = 0                  # runs measured (warm-ups aside) that ended well
    duration_sum: float = 0.0          # of their durations, and the largest: read before every run
    duration_max: float = 0.0
    warmup_duration: Optional[float] = None


class Session:
    """Carries out a plan, appending every finished run to a result file."""

    def __init__(self, plan: Plan, allocators: Mapping, programs: Mapping, result,
                 progress: Progress, runner: Optional[ProgramRunner] = None, base_env=None,
                 program=None):
        self.plan = plan
        self.program = program                # run/program/target.py's ProgramTarget, or None
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
            config = next((c for c in self.plan.configs if record.belongs_to(c)), None)
            if config is None:
                continue
            self._account(config, record)

    def _account(self, config: RunConfig, record: RunRecord) -> None:
        st = self.state[config]
        if not record.warmup:
            st.done += 1
        if record.ok:
            st.ok += 1
            st.failures_in_row = 0
            if not record.warmup:
                st.measured += 1
                st.duration_sum += record.duration_s
                st.duration_max = max(st.duration_max, record.duration_s)
            return
        st.failures_in_row += 1
        status = record.status.words
        if record.status.repeats:
            st.dropped = f"it {status}, and every further run would do the same"
        elif record.warmup:
            # A program that fails before it is even warm has nothing to measure.
            st.dropped = f"its warm-up run {status}"
        elif st.failures_in_row >= CRASHES_BEFORE_DROP:
            st.dropped = f"it {status} {st.failures_in_row} times in a row"

    # -- timing

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def _estimate(self, config: RunConfig) -> float:
        st = self.state[config]
        if st.measured:
            return st.duration_sum / st.measured
        if st.warmup_duration is not None:
            return st.warmup_duration
        measured = sum(s.measured for s in self.state.values())
        if measured:
            return sum(s.duration_sum for s in self.state.values()) / measured
        known = [s.warmup_duration for s in self.state.values() if s.warmup_duration is not None]
        return sum(known) / len(known) if known else 1.0

    def _reference(self, config: RunConfig) -> Optional[float]:
        """How long a run of the configuration takes, as far as known: its warm-up, its slowest run, or
        before it ran at all the slowest run of the same program under another allocator; None before any."""
        st = self.state[config]
        if st.warmup_duration is not None:
            return st.warmup_duration
        if st.measured:
            return st.duration_max
        same = [s.warmup_duration or s.duration_max
                for c, s in self.state.items() if c.program_key == config.program_key]
        return max((d for d in same if d), default=None)

    def _timeout(self, config: RunConfig) -> float:
        if self.plan.timeout_s is not None:
            return self.plan.timeout_s
        reference = self._reference(config)
        if reference is None:
            return FIRST_WARMUP_TIMEOUT_S
        return max(MIN_TIMEOUT_S, TIMEOUT_FACTOR * reference)

    def _idle_limit(self, config: RunConfig) -> Optional[float]:
        """Seconds of almost no CPU time after which a run is stuck, or None: not watched. Only without --timeout
        (with it, the user's timeout alone ends a run). A scenario's program never waits on purpose, so each of
        its runs is watched; a real program may (a sleep, a lock file, the network), from its very first run, so
        only its timeout ends it."""
        if self.plan.timeout_s is not None or config.target == COMMAND:
            return None
        return IDLE_LIMIT_S

    def _runs_left(self, st: _ConfigState) -> int:
        return max(0, self.plan.max_rounds - st.done) + (0 if st.warm else self.plan.warmup)

    def remaining_runs(self) -> int:
        return sum(self._runs_left(st) for st in self.state.values() if st.dropped is None)

    def _eta_of_plan(self) -> float:
        return sum(self._runs_left(st) * self._estimate(c) for c, st in self.state.items()
                   if st.dropped is None)

    def _within_budget(self, planned: float) -> float:
        if self.plan.time_budget_s is not None:
            return min(planned, max(0.0, self.plan.time_budget_s - self.elapsed()))
        return planned

    def eta(self) -> float:
        """Seconds until the last planned run, or until the time budget ends the session."""
        return self._within_budget(self._eta_of_plan())

    # -- running

    def active(self) -> List[RunConfig]:
        return [c for c in self.plan.configs if self.state[c].dropped is None]

    def run_one(self, config: RunConfig, round_: int, warmup: bool = False) -> Optional[RunRecord]:
        """Run and save once; None when interrupted (the unfinished run is not saved)."""
        allocator = self.allocators[config.allocator]
        timeout = self._timeout(config)
        if config.target == COMMAND:
            return self._run_program(config, allocator, round_, warmup, timeout)
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
                                  self.plan.memory_limit, idle_s=self._idle_limit(config))
        if self.runner.interrupted:
            if run_dir:
                rundata.discard(run_dir)
            return None
        record = make_record(config, allocator, round_, outcome, timeout, warmup, run_dir,
                             self.plan.memory_limit, lambda: self._peak_needed(config))
        if run_dir:
            # The first good measured run keeps its files for the pictures and
            # `scenc play`; the others' are large and already summed up.
            if first_good and record.ok:
                rundata.keep(run_dir, outcome.stdout)
                record.run_dir = os.path.relpath(run_dir, Path(self.result.path).resolve().parent)
            else:
                rundata.discard(run_dir)
        return self._save(config, record, warmup, outcome.duration_s)

    def _run_program(self, config: RunConfig, allocator, round_: int, warmup: bool,
                     timeout: float) -> Optional[RunRecord]:
        """One run of the program after `--`, its `{name}`s filled with the config's params, between its
        --prepare and --cleanup (run/program/hooks.py); None when interrupted."""
        program = self.program.for_params(config.params_dict)
        stopped, problem = run_hook(self.runner, "--prepare", program.prepare, program, self.base_env, timeout)
        if stopped:
            return None
        if problem:
            return self._save(config, hook_failure(config, round_, warmup, problem), warmup, 0.0)
        if program.server is not None:      # the server under the allocator, its client under none
            outcome = self.runner.run_served(program, allocator, self.base_env, timeout, self.plan.memory_limit)
            if self.runner.interrupted:
                return None
            record = make_served_record(config, allocator, round_, outcome, program, timeout, warmup,
                                        self.plan.memory_limit)
        else:
            outcome = self.runner.run_program(program, allocator, self.base_env, timeout, self.plan.memory_limit,
                                              self._idle_limit(config))
            if self.runner.interrupted:
                return None
            record = make_program_record(config, allocator, round_, outcome, program, timeout, warmup,
                                         self.plan.memory_limit)
        stopped, problem = run_hook(self.runner, "--cleanup", program.cleanup, program, self.base_env, timeout)
        if stopped:
            return None
        if problem and record.ok:
            record.fail(Status.CRASHED, problem=f"the run went well, but {problem}")
        return self._save(config, record, warmup, outcome.duration_s)

    def _save(self, config: RunConfig, record: RunRecord, warmup: bool, duration_s: float) -> RunRecord:
        """Account for a finished run, and append it unless it is a good warm-up."""
        for note in (record.notes or ()):
            if note not in self._notes_shown:
                self._notes_shown.add(note)
                self.progress.note(f"scenc: {note}")
        st = self.state[config]
        if warmup:
            st.warm = True
            if record.ok:
                st.warmup_duration = duration_s
                self.runs_this_session += 1
                return record  # warm-ups are not measurements: nothing to save
        self.result.append_run(record)
        self.runs_this_session += 1
        self._account(config, record)
        if not record.ok:
            self._report_failure(config, record, warmup)
        return record

    def _peak_needed(self, config: RunConfig) -> Optional[int]:
        key = params_key(config.params_dict)
        if key not in self._peaks:
            header = self.result.header
            self._peaks[key] = static_peak(header["source"], header.get("scenario_path") or "scenario",
                                           config.params_dict)
        return self._peaks[key]

    def _report_failure(self, config: RunConfig, record: RunRecord, warmup: bool) -> None:
        what = "warm-up run" if warmup else f"run {record.round}"
        if record.status is Status.WRONG_ALLOCATOR:
            self.progress.note(f"scenc: WRONG ALLOCATOR in {what} of {config.label()}: "
                               f"{record.problem}. Recorded as wrong-allocator, not as "
                               f"{config.allocator}.")
        else:
            self.progress.note(f"scenc: {what} of {config.label()} {record.status.words}: "
                               f"{record.problem}")
            tail = record.stderr_tail.strip().splitlines()[-3:]
            for line in tail:
                self.progress.note(f"    stderr: {line[:200]}")
        dropped = self.state[config].dropped
        if dropped:
            self.progress.note(f"scenc: no more runs of {config.label()}: {dropped}")

    def _tick(self, config: RunConfig, round_: int) -> None:
        """The progress bar before a run of `config` in `round_` (0: its warm-up): redrawn when it is due,
        and before the last run (which a short session would otherwise never show)."""
        if not self.progress.shows_bar:
            return
        remaining = self.remaining_runs()
        if remaining > 1 and not self.progress.due():
            return
        label = (f"round {round_}/{self.plan.max_rounds}  {config.label()}" if round_
                 else f"warm-up {config.label()}")
        done = self.runs_this_session
        planned = self._eta_of_plan()
        eta = self._within_budget(planned)
        if eta < planned:
            # The time budget ends the session first: count only the runs that fit.
            remaining = math.ceil(remaining * eta / planned)
        self.progress.update(done, done + remaining, label, eta)

    def warm_up(self) -> bool:
        """Warm every configuration not warm yet; False when interrupted."""
        for i in range(self.plan.warmup):
            for config in self.plan.round_order(-i, self.active()):
                if self.state[config].dropped is not None:
                    continue
                self._tick(config, 0)
                if self.run_one(config, 0, warmup=True) is None:
                    return False
        return True

    def _converged(self) -> bool:
        # A figure the program reports (a server's requests per second) is what it is measured for.
        reported = [m.metric_name for m in self.program.reported] if self.program is not None else []
        for config in self.active():
            samples = self.samples(config)
            measured = probes.set_members(config.probe_set)
            for name in metric_defs.headline_names() + (reported if config.target == COMMAND else []):
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
            if record.is_measurement and record.belongs_to(config):
                for name, v in record.metrics.items():
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
            # With `auto`, --min-runs rounds come first: fewer would compare nothing.
            if plan.time_budget_s is not None and self.runs_this_session and \
                    not (plan.auto and round_ <= plan.min_runs):
                round_cost = sum(self._estimate(c) for c in todo)
                if self.elapsed() + round_cost > plan.time_budget_s:
                    self.stop_reason = (f"time budget of {format_duration(plan.time_budget_s)} "
                                        f"reached before round {round_}")
                    return True
            for config in plan.round_order(round_, todo):
                if self.state[config].dropped is not None:
                    continue
                self._tick(config, round_)
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
