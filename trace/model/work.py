"""The program's own time between its calls, in a fitted model: `work(n)` per round of each phase.

The collectors sum each thread's time between its calls from the capture's clocks (ThreadWindow counters
'gaps' and 'gap_ns'): the CPU time it ran between them, on its CPU clock (tracer logs of version 6), so that its
waits are left out by construction; without that clock (older logs), the wall time, those longer than
collect.DENSE_GAP_NS taken for waiting and left out. A call's own cost is in that time too, so each gap is taken
less what a call costs in the model (its phase's `measure` block's CPU time per call, from the `time` probe: a
thread's waits in its phase are not a call's cost; the model run without work under glibc, the allocator the
capture ran) and less what the tracer added to the call (with CPU clocks, measured on the model itself: runs of it
alone and under the tracer, in pairs, the median difference of CPU time per call; else TRACER_CALL_NS); what is
left, over a `work` unit's time measured on this machine, is the group's units per thread in the phase. Fitted to
the capture's clocks, never to a run under some allocator: docs/language.md, "What a model keeps of it".

    cost = measure_cost(model, cc, traced=True)   # a unit loop, the model (3 times each, and traced): WorkCost
    units = work_units(agg.c, threads, cost, group, phase)
"""

import json
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

#: What the preload tracer adds to a call when it cannot be measured (a capture without CPU clocks): about 7 ns
#: (bench/results/2026-11-27-tracer-floor.md: cfrac's 183M calls, 5.15 s traced against 3.79 s plain). It depends
#: on the program: on lua's fitted model the CPU clock saw 60-85 ns a call more under the tracer than without
#: (bench/results/2026-11-27-model-fidelity-5.md), so with CPU clocks measure_cost measures it on the model.
TRACER_CALL_NS = 7.0
# Pairs of runs of the model (alone, then under the tracer) whose median difference is the tracer's cost of a call:
# MEASURE_RUNS at least, more while they took under TRACED_BUDGET_S, TRACED_PAIRS_MAX at most. One capture was
# noisy where a call's own work is small: espresso's model measured 14.8 and 22.9 ns in two converts
# (bench/results/2026-11-27-model-fidelity-5.md); the pairs' median 13.3-16.8 ns in 8 converts, at about the same
# convert time (a 3 s budget cost cfrac's 1.6 s more): bench/results/2026-11-28-model-work.md.
TRACED_BUDGET_S = 1.0
TRACED_PAIRS_MAX = 9
UNIT_LOOP = 20_000_000      # units run to time one unit (about 25 ms)
MEASURE_RUNS = 3            # the least of this many runs: load only ever adds time
# The model's builds for convert (this one, and runs.py's live build) carry no debug information: the compiler
# makes the same machine code with or without it, in about three quarters of the time
# (bench/results/2026-11-28-convert-fixed.md).
BUILD_FLAGS = ("-g0",)

# Captures whose clocks give the time between calls, and why the others give none (the header says which).
NO_WORK_WHY = {
    "ltrace": "ltrace's clock: the time between calls is mostly ltrace's own (it stops the program at every "
              "call, tens of microseconds), which no model should copy",
    "workload": "no clock in a workload", "mtrace": "no clock in an mtrace log",
}

# Why a capture of threads alive at once gets no `work` without the threads' CPU clocks (a tracer log before
# version 6): a thread's wall time between its calls holds its waits too (for a lock, another thread, the disk),
# and only those over DENSE_GAP_NS can be told from work by the wall clock alone. ripgrep -j2 on a cold page
# cache: 1.83 s of times under 1 ms between its 3 threads' calls in a capture of 1.05 s, a model 13.7x its
# program's wall time (bench/results/2026-11-27-model-fidelity-4.md). With the CPU clocks, waits are not counted.
SEVERAL_THREADS_WHY = ("threads alive at once in a capture without the threads' CPU clocks (a tracer log before "
                       "version 6): their times between calls hold their waits for locks, each other and the disk, "
                       "which the wall clock cannot tell from work")


@dataclass
class WorkCost:
    unit_ns: float              # one `work` unit on this machine
    call_ns: float              # the model's CPU time per call without work, under glibc, all threads
    # (group, phase) -> the CPU time one of the group's threads ran in the phase's `measure` block, without work (its
    # wall time there holds its waits: for a channel, a barrier, a CPU on a loaded machine)
    phase_ns: Dict[Tuple[str, int], float] = field(default_factory=dict)
    # what the tracer adds to a call: the median of tracer_pairs (None: not measured, TRACER_CALL_NS is taken)
    tracer_ns: Optional[float] = None
    # per pair of runs, the model's CPU time per call under the tracer less its CPU time per call alone, sorted
    tracer_pairs: List[float] = field(default_factory=list)

    @property
    def tracer_call_ns(self) -> float:
        return TRACER_CALL_NS if self.tracer_ns is None else self.tracer_ns

    def per_call(self, group: str, phase: int, calls_per_thread: float) -> float:
        """The model's own cost of a call of the group in the phase: its block's CPU time per call (a phase's
        calls cost what its statements make them cost), else the whole model's CPU time per call."""
        spent = self.phase_ns.get((group, phase))
        return spent / calls_per_thread if spent is not None and calls_per_thread > 0 else self.call_ns


def work_units(c, threads: int, cost: WorkCost, group: str = "", phase: int = 0) -> int:
    """A group's `work` units per thread in a phase, from its counters c (the group's threads' summed): the
    time between calls less each call's cost in the model and the tracer, none when that is below zero."""
    if not threads or cost.unit_ns <= 0:
        return 0
    call_ns = cost.per_call(group, phase, c["events"] / threads)
    spare = c["gap_ns"] - c["gaps"] * (call_ns + cost.tracer_call_ns)
    return max(0, round(spare / threads / cost.unit_ns))


def _counters(col):
    """The counters of every thread and window of a finished collector."""
    return (tw.c for tws in col.thread_windows.values() for tw in tws if tw is not None)


def capture_gap_ns(col) -> int:
    """The capture's time between calls taken for work, all threads (ns): CPU time with the threads' CPU clocks."""
    return sum(c["gap_ns"] for c in _counters(col))


def measuring_build(scn_path: Path, cc: str = "gcc", loaded=None):
    """The model as written with the `time` probe (probes/probe_time.h: each `measure` region's CPU time, nothing on
    a call's path): what measure_cost runs. runs.py builds it beside the live build, found in the cache here.
    loaded: the model already parsed (pipeline.load)."""
    from ... import probes
    from ...compiler.pipeline import build
    return build(scn_path, cc=cc, probes=probes.c_parts("time"), extra_flags=BUILD_FLAGS, loaded=loaded)


def _run(binary: Path, timeout: float, idle: float, env: Optional[dict] = None) -> Optional[dict]:
    """The report of one run of a built scenario; None when it fails."""
    from ...system.process import run_watched
    status, stdout, _stderr, why = run_watched([str(binary)], timeout, idle, **({"env": env} if env else {}))
    return None if why or status != 0 else json.loads(stdout)


def _cpu_per_call(report: dict) -> float:
    """A run's CPU time per allocator call, all its threads."""
    calls = sum(sum(t["ops"].values()) for t in report["threads"])
    return sum(t["cpu_ns"] for t in report["threads"]) / max(calls, 1)


def _phase_cpu_ns(report: dict) -> Dict[Tuple[str, int], float]:
    """(group, phase) -> the CPU time a thread of the group spent in the phase's `measure` block (the group's
    mean), from the `time` probe's region CPU times (exact for a block this long, entered once a phase)."""
    probe = (report.get("probes") or {}).get("time") or {}
    extras = probe.get("threads") or [None] * len(report["threads"])
    spent: Dict[Tuple[str, int], list] = {}
    for t, extra in zip(report["threads"], extras):
        for slot, (name, region) in enumerate(t["regions"].items()):    # the probe's slots: in this order
            if name.startswith("phase ") and name[6:].isdigit() and region["entries"] and extra:
                spent.setdefault((t["group"], int(name[6:])), []).append(extra["region_cpu_ns"][slot])
    return {key: sum(times) / len(times) for key, times in spent.items()}


def _tracer_env(binary: Path, log: Path) -> Optional[dict]:
    """The environment that runs the model under the preload tracer, logging to log; None when it cannot."""
    from ...compiler.build import BuildError
    from ..capture import CaptureError
    from ..capture.preload import prepare_preload
    try:
        return prepare_preload([str(binary)], log)[3]
    except (BuildError, CaptureError, OSError):         # TRACER_CALL_NS is taken
        return None


def measure_cost(scn_path: Path, cc: str = "gcc", timeout: float = 120.0, idle: float = 5.0,
                 traced: bool = False) -> Optional[WorkCost]:
    """A unit's time (a loop of UNIT_LOOP units, the least of MEASURE_RUNS runs) and the model's CPU time per call
    (its threads' CPU time over its calls; the model as written, so without work) and per phase (measuring_build),
    the least of MEASURE_RUNS runs, under the system's malloc (glibc: the capture's). traced (a capture with CPU
    clocks): also what the tracer adds to a call, the median over pairs of runs of the model, one alone and one
    under the tracer right after it, of the difference of their CPU times per call (at least MEASURE_RUNS pairs,
    more while they take under TRACED_BUDGET_S). None when a run fails (the model's own measurement then says
    why)."""
    from ...compiler.pipeline import build
    with tempfile.TemporaryDirectory(prefix="scenc-work-") as tmp:
        unit = Path(tmp) / "unit.scn"
        unit.write_text(f'scenario "work_unit"\nthread main {{\n    work({UNIT_LOOP})\n}}\n')
        unit_binary = build(unit, cc=cc, extra_flags=BUILD_FLAGS).binary
        unit_runs = [_run(unit_binary, timeout, idle) for _ in range(MEASURE_RUNS)]
        if not all(unit_runs):
            return None
        model = measuring_build(scn_path, cc).binary
        log = Path(tmp) / "model.trace"
        env = _tracer_env(model, log) if traced else None
        plain, differences = [], []
        started = time.monotonic()
        while len(plain) < MEASURE_RUNS or (env is not None and len(plain) < TRACED_PAIRS_MAX
                                            and time.monotonic() - started < TRACED_BUDGET_S):
            report = _run(model, timeout, idle)
            if report is None:
                return None
            plain.append(report)
            if env is not None:
                log.unlink(missing_ok=True)             # the tracer never writes over a log
                under = _run(model, timeout, idle, env)
                if under is None:                       # TRACER_CALL_NS is taken
                    env = None
                else:
                    differences.append(_cpu_per_call(under) - _cpu_per_call(report))
    unit_ns = min(sum(t["cpu_ns"] for t in r["threads"]) for r in unit_runs) / UNIT_LOOP
    phase_ns: Dict[Tuple[str, int], float] = {}
    for report in plain:                                # the least run
        for key, spent in _phase_cpu_ns(report).items():
            phase_ns[key] = min(phase_ns.get(key, spent), spent)
    cost = WorkCost(unit_ns, min(_cpu_per_call(r) for r in plain), phase_ns)
    if env is not None and differences:
        cost.tracer_ns = max(0.0, statistics.median(differences))
        cost.tracer_pairs = sorted(differences)
    return cost
