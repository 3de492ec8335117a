"""One run of a scenario program, and the record of how it ended.

`ProgramRunner` starts the program as a child process in its own process
group (killed whole on a timeout or Ctrl-C), under the allocator's
LD_PRELOAD (in the environment it is given) and a memory limit (run/memlimit.py:
80% of the machine's memory unless --memory-limit). `make_record` turns what
happened into the record saved in the result file. The program reports
which shared object served malloc, and a run served by the wrong one is
recorded as "wrong-allocator", never under the allocator's name.

A run ends in one of these statuses (run/record.py's Status):
* ok: the program did all the scenario says; its figures enter the statistics;
* crashed, timeout, wrong-allocator: see make_record (a timeout is also a run
  that used almost no CPU time for the idle limit: stuck, see communicate_watched);
* failed-allocs: the program finished, but some allocations returned NULL.
  It is a failure, not "ok with a footnote": a NULL is not used, written or
  freed, so the run did less work than the scenario and its time would make
  a failing allocator look fast. The record keeps its figures (and the count
  of failed calls), the statistics leave it out, the report says so;
* out-of-memory: the run reached its memory limit (--memory-limit, see
  run/memlimit.py), known because the scenario's own lower bound of live bytes
  (scenario/peak.py) is above the limit, or because the program was already
  over it when the limit was set.
An interrupted run has no status: it is not saved (see harness.py). The
record's keys are run/record.py's.
"""

import json
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping, Optional, Sequence

from .. import probes
from .record import RunRecord, Status
from .plan import WATCH_EVERY_S, RunConfig
from ..system.process import IdleWatch, kill_group, signal_name

STDERR_TAIL_CHARS = 2000


@dataclass
class Outcome:
    started: str
    duration_s: float
    returncode: Optional[int]
    stdout: str
    stderr: str
    timed_out: bool = False
    over_limit: Optional[int] = None    # bytes in use when the memory limit was set, if over it
    stuck: Optional[float] = None       # it timed out sooner: almost no CPU time for this idle limit (seconds)


class _Stuck(Exception):
    """A watched run's process group used almost no CPU time for its idle limit."""


def stuck_problem(idle_s: float, timeout_s: float) -> str:
    """The record's sentence for a run ended by the idle limit."""
    return (f"almost no CPU time used for {idle_s:g} s (under {IdleWatch.IDLE_SHARE:.0%} of a CPU, by it and "
            f"every process it started): it is stuck (threads that wait on one another, or a wait for input "
            f"that never comes); killed (process group) without waiting for its timeout of {timeout_s:g} s "
            f"(with --timeout, only the timeout ends a run)")


def communicate_watched(proc: subprocess.Popen, timeout_s: Optional[float], idle_s: Optional[float]):
    """proc.communicate(), ended by TimeoutExpired after `timeout_s`, or by _Stuck when its process group
    (it leads one) uses almost no CPU time for `idle_s` seconds (None: not watched; system/process.py's IdleWatch)."""
    if idle_s is None:
        return proc.communicate(timeout=timeout_s)
    watch = IdleWatch(proc.pid, idle_s)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        step = WATCH_EVERY_S if deadline is None else max(0.0, min(WATCH_EVERY_S, deadline - time.monotonic()))
        try:
            return proc.communicate(timeout=step)
        except subprocess.TimeoutExpired:
            if deadline is not None and time.monotonic() >= deadline:
                raise
            if watch.stuck():
                raise _Stuck() from None


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

    def run(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: Optional[float],
            memory_limit: Optional[int] = None, capture_stderr: bool = True,
            idle_s: Optional[float] = None) -> Outcome:
        """Run once; `timeout_s` None waits for ever, `idle_s` ends it sooner when its process group uses
        almost no CPU time that long (communicate_watched). Without `capture_stderr` the program writes to scenc's
        own stderr (`scenc exec`) and `Outcome.stderr` is empty."""
        # The imports inside this module's functions wait until a run is made:
        # every command's parser imports it, and `scenc check` must start fast.
        from . import memlimit
        started = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        t0 = time.perf_counter()
        proc = subprocess.Popen(list(argv), env=dict(env), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE if capture_stderr else None,
                                start_new_session=True)
        self._current = proc
        timed_out, stuck = False, None
        over_limit = None
        try:
            if memory_limit is not None:
                over_limit = memlimit.apply(proc.pid, memory_limit)
            if self.interrupted or over_limit is not None:
                self._kill(proc)
            out, err = communicate_watched(proc, timeout_s, idle_s)
        except (subprocess.TimeoutExpired, _Stuck) as exc:
            timed_out, stuck = True, (idle_s if isinstance(exc, _Stuck) else None)
            self._kill(proc)
            out, err = proc.communicate()
        except BaseException:
            # KeyboardInterrupt where no handler is installed (`scenc exec`): the
            # program has a session of its own and would outlive scenc.
            self._kill(proc)
            proc.wait()
            raise
        finally:
            self._current = None
        duration = time.perf_counter() - t0
        return Outcome(started, duration, proc.returncode,
                       out.decode("utf-8", "replace"), (err or b"").decode("utf-8", "replace"), timed_out,
                       over_limit, stuck)

    @staticmethod
    def _kill(proc: subprocess.Popen) -> None:
        kill_group(proc.pid)

    def interrupt(self, signum=None, _frame=None):
        """Signal handler for SIGINT/SIGTERM: stop the running program, finish cleanly."""
        self.interrupted = True
        if self.signal is None and signum is not None:
            self.signal = signum
        proc = self._current
        if proc is not None and proc.returncode is None:
            self._kill(proc)


def static_peak(source: str, filename: str, params: Mapping) -> Optional[int]:
    """The scenario's lower bound of peak live bytes (scenario/peak.py), or None."""
    from ..scenario.checks import estimate_peak
    from ..scenario.errors import ScenarioError
    from ..scenario.parser import parse
    from ..scenario.resolve import resolve
    try:
        return estimate_peak(resolve(parse(source, filename), dict(params)))[0]
    except (ScenarioError, OSError, ValueError):
        return None  # it only explains a failure; a scenario that built parses


def _allocation_calls(report: Mapping) -> int:
    return sum(n for t in report.get("threads", []) for kind, n in t.get("ops", {}).items()
               if kind != "free")


def _blame_memory(record: RunRecord, memory_limit: Optional[int], peak_needed, what: str) -> None:
    """A crash or NULLs under a memory limit the scenario cannot fit in: out of memory."""
    from ..system.units import fmt_bytes
    if memory_limit is None or peak_needed is None:
        return
    needs = peak_needed()
    if needs is None or needs < memory_limit:
        # The limit may still be the cause (a scenario's upper bound can be above
        # it), or the allocator failed by itself: the record does not guess.
        return
    record.fail(Status.OUT_OF_MEMORY,
                problem=f"the scenario needs at least {fmt_bytes(needs)} live, more than the "
                        f"memory limit of {fmt_bytes(memory_limit)} per run (--memory-limit): {what}")


def make_record(config: RunConfig, allocator, round_: int, outcome: Outcome,
                timeout_s: float, warmup: bool = False, run_dir: Optional[Path] = None,
                memory_limit: Optional[int] = None, peak_needed=None) -> RunRecord:
    """The saved record of one run, with its status decided from what the program did.

    `peak_needed()` gives the scenario's lower bound of live bytes; it is only
    called to explain a failure under `memory_limit`.
    """
    from ..allocators import registry as allocator_registry
    from ..system.units import fmt_bytes
    record = RunRecord.new(config, round_, warmup, stderr_tail=outcome.stderr[-STDERR_TAIL_CHARS:],
                           exit_code=outcome.returncode, started=outcome.started,
                           duration_s=outcome.duration_s)
    if outcome.over_limit is not None:
        record.fail(Status.OUT_OF_MEMORY, exit_code=None,
                    problem=f"it already used {fmt_bytes(outcome.over_limit)} when its memory limit "
                            f"of {fmt_bytes(memory_limit or 0)} was set; killed (process group)")
        return record
    if outcome.timed_out:
        record.fail(Status.TIMEOUT, exit_code=None,
                    problem=stuck_problem(outcome.stuck, timeout_s) if outcome.stuck
                    else f"no result after {timeout_s:g} s; killed (process group)")
        return record
    if outcome.returncode is not None and outcome.returncode < 0:
        record.fail(Status.CRASHED, signal=signal_name(-outcome.returncode), exit_code=None,
                    problem=f"killed by {signal_name(-outcome.returncode)}")
        _blame_memory(record, memory_limit, peak_needed, f"it was {record.problem}")
        return record
    if outcome.returncode != 0:
        record.fail(Status.CRASHED, problem=f"exit status {outcome.returncode}")
        _blame_memory(record, memory_limit, peak_needed, f"it ended with {record.problem}")
        return record
    try:
        report = json.loads(outcome.stdout)
        if not isinstance(report, dict) or "wall_ns" not in report:
            raise ValueError("no wall_ns")
    except ValueError:
        record.fail(Status.CRASHED, problem="exit status 0 but no valid JSON report on stdout")
        return record
    record.provider = report.get("provider")
    # Only the figures of the probes in this run: a run slowed down by `layout`
    # must not leave a wall time behind.
    record.metrics = probes.run_metrics(config.probe_set, report, run_dir or Path("."))
    notes = probes.notes(config.probe_set, report)
    if notes:
        record.notes = notes
    if not allocator_registry.provider_matches(allocator, record.provider):
        record.fail(Status.WRONG_ALLOCATOR, allocator_registry.explain_mismatch(allocator, record.provider))
        return record
    failed = int(record.metrics.get("failed_allocs") or 0)
    if failed:
        nulls = f"{failed} of {_allocation_calls(report)} allocation calls returned NULL"
        record.fail(Status.FAILED_ALLOCS, f"{nulls}, so the run did less work than the scenario; its figures "
                                          f"are left out of the statistics")
        _blame_memory(record, memory_limit, peak_needed, nulls)
    return record
