"""The program's own time between its calls, in a fitted model: `work(n)` per round of each phase.

The collectors sum each thread's time between its calls from the capture's clocks (ThreadWindow counters
'gaps' and 'gap_ns'): the CPU time it ran between them, on its CPU clock (tracer logs of version 6), so that its
waits are left out by construction; without that clock (older logs), the wall time, those longer than
collect.DENSE_GAP_NS taken for waiting and left out. A call's own cost is in that time too, so each gap is taken
less what a call costs in the model (its phase's `measure` block's time per call, the model run without work
under glibc, the allocator the capture ran) and less what the tracer added to the call (with CPU clocks, measured
on the model itself: measure_cost captures it under the tracer; else TRACER_CALL_NS); what is left, over a
`work` unit's time measured on this machine, is the group's units per thread in the phase. Fitted to the capture's
clocks, never to a run under some allocator: docs/language.md, "What a model keeps of it".

    cost = measure_cost(model, cc, traced=True)   # a unit loop, the model (3 times each; once traced): WorkCost
    units = work_units(agg.c, threads, cost, group, phase)
"""

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Optional, Tuple

#: What the preload tracer adds to a call when it cannot be measured (a capture without CPU clocks): about 7 ns
#: (bench/results/2026-11-27-tracer-floor.md: cfrac's 183M calls, 5.15 s traced against 3.79 s plain). It depends
#: on the program: on lua's fitted model the CPU clock saw 60-85 ns a call more under the tracer than without
#: (bench/results/2026-11-27-model-fidelity-5.md), so with CPU clocks measure_cost measures it on the model.
TRACER_CALL_NS = 7.0
TRACED_RUNS = 1             # captures of the model under the tracer (the least per call): one, for convert's speed
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
    # (group, phase) -> the time one of the group's threads spent in the phase's `measure` block, without work
    phase_ns: Dict[Tuple[str, int], float] = field(default_factory=dict)
    # what the tracer adds to a call: the model's CPU time between its calls under the tracer, per call, less its
    # CPU time per call without (None: not measured, TRACER_CALL_NS is taken)
    tracer_ns: Optional[float] = None

    @property
    def tracer_call_ns(self) -> float:
        return TRACER_CALL_NS if self.tracer_ns is None else self.tracer_ns

    def per_call(self, group: str, phase: int, calls_per_thread: float) -> float:
        """The model's own cost of a call of the group in the phase: its block's time per call (a phase's
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


def _runs(binary: Path, timeout: float, idle: float) -> list:
    """The reports of MEASURE_RUNS runs of a built scenario."""
    from ...system.process import run_watched
    reports = []
    for _ in range(MEASURE_RUNS):
        status, stdout, stderr, why = run_watched([str(binary)], timeout, idle)
        if why or status != 0:
            return []
        reports.append(json.loads(stdout))
    return reports


def _traced_per_call(binary: Path, timeout: float) -> Optional[float]:
    """The model's CPU time between its calls under the preload tracer, per call, on its threads' CPU clocks (as a
    capture's collector counts it), the least of TRACED_RUNS captures; None when a capture fails or has no CPU
    clock."""
    import subprocess
    from ...compiler.build import BuildError
    from ..capture import CaptureError
    from ..capture.preload import capture_preload
    from .native import CollectorError, collect_tracer_log
    best = None
    with tempfile.TemporaryDirectory(prefix="scenc-work-") as tmp:
        log = Path(tmp) / "model.trace"
        for _ in range(TRACED_RUNS):
            try:
                cap = capture_preload([str(binary)], log, timeout=timeout, stdout=subprocess.DEVNULL)
                if cap.tracee_status != 0:
                    return None
                col = collect_tracer_log(log)
            except (BuildError, CaptureError, CollectorError, OSError):    # TRACER_CALL_NS is taken
                return None
            gaps = sum(c["gaps"] for c in _counters(col))
            if not col.has_cpu or not gaps:
                return None
            per_gap = capture_gap_ns(col) / gaps
            best = per_gap if best is None else min(best, per_gap)
    return best


def measure_cost(scn_path: Path, cc: str = "gcc", timeout: float = 120.0, idle: float = 5.0,
                 traced: bool = False) -> Optional[WorkCost]:
    """A unit's time (a loop of UNIT_LOOP units) and the model's CPU time per call (its threads' CPU time over
    its calls; the model as written, so without work), the least of MEASURE_RUNS runs each, under the system's
    malloc (glibc: the capture's). traced (a capture with CPU clocks): also what the tracer adds to a call, the
    model captured under it against the model alone. None when a run fails (the model's own measurement then says
    why)."""
    from ...compiler.pipeline import build
    with tempfile.TemporaryDirectory(prefix="scenc-work-") as tmp:
        unit = Path(tmp) / "unit.scn"
        unit.write_text(f'scenario "work_unit"\nthread main {{\n    work({UNIT_LOOP})\n}}\n')
        unit_runs = _runs(build(unit, cc=cc, extra_flags=BUILD_FLAGS).binary, timeout, idle)
    model = build(scn_path, cc=cc, extra_flags=BUILD_FLAGS).binary
    model_runs = _runs(model, timeout, idle)
    if not unit_runs or not model_runs:
        return None
    unit_ns = min(sum(t["cpu_ns"] for t in r["threads"]) for r in unit_runs) / UNIT_LOOP
    per_call = []
    phase_ns: Dict[Tuple[str, int], float] = {}
    for r in model_runs:
        calls = sum(sum(t["ops"].values()) for t in r["threads"])
        per_call.append(sum(t["cpu_ns"] for t in r["threads"]) / max(calls, 1))
        spent: Dict[Tuple[str, int], list] = {}
        for t in r["threads"]:
            for name, region in t["regions"].items():
                if name.startswith("phase ") and name[6:].isdigit():
                    spent.setdefault((t["group"], int(name[6:])), []).append(region["ns"])
        for key, times in spent.items():        # a thread's mean; the least run
            mean = sum(times) / len(times)
            phase_ns[key] = min(phase_ns.get(key, mean), mean)
    cost = WorkCost(unit_ns, min(per_call), phase_ns)
    traced_ns = _traced_per_call(model, timeout) if traced else None
    if traced_ns is not None:
        cost.tracer_ns = max(0.0, traced_ns - cost.call_ns)
    return cost
