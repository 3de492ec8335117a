"""The `counters` probe: hardware event counts through perf_event_open.

Where the machine has no PMU (a VM that does not expose one, as here) or
perf_event_paranoid forbids it, the program says which counters failed and
why, the figures are left out, and the run goes on: the software counts
(context switches, CPU migrations) usually still work.
"""

from pathlib import Path
from typing import Mapping, Sequence

from .base import CSide, Metric, Metrics, Probe, probe_report, total_ops

NAME = "counters"
HARDWARE = ("cycles", "instructions", "l1d_read_misses", "llc_misses")
SOFTWARE = ("context_switches", "cpu_migrations")

METRICS = (
    Metric("counters:cycles", "CPU cycles in user mode, all threads together", "cycles", "lower",
           "cycle count"),
    Metric("counters:instructions", "instructions in user mode, all threads together", "instructions", "lower",
           "instruction count"),
    Metric("counters:l1d_read_misses", "L1 data cache read misses", "misses", "lower", "L1d miss count"),
    Metric("counters:llc_misses", "last-level cache misses", "misses", "lower", "LLC miss count"),
    Metric("counters:context_switches", "context switches of the scenario threads", "switches", "lower",
           "context-switch count", key=True),
    Metric("counters:cpu_migrations", "moves of a scenario thread to another CPU", "migrations", "lower",
           "migration count"),
    Metric("counters:ipc", "instructions per cycle", "ratio", "higher", "IPC", key=True),
    Metric("counters:<event>_per_op", "events per allocator call", "per call", "lower", "events per call"),
)


def collect(program: Mapping, run_dir: Path) -> Metrics:
    own = probe_report(program, NAME)
    if not own:
        return {}
    ops = sum(total_ops(t) for t in program["threads"])
    out: Metrics = {}
    for event in HARDWARE + SOFTWARE:
        value = own["counts"].get(event)
        if value is not None:
            out[f"counters:{event}"] = float(value)
            if ops and event in HARDWARE:
                out[f"counters:{event}_per_op"] = value / ops
    if out.get("counters:cycles"):
        if "counters:instructions" in out:
            out["counters:ipc"] = out["counters:instructions"] / out["counters:cycles"]
    return out


def unsupported(program: Mapping) -> dict:
    """event -> why it could not be counted."""
    own = probe_report(program, NAME)
    return dict(own.get("errors") or {}) if own else {}


# strerror text of perf_event_open's usual failures -> what it means here.
_MEANING = {
    "No such file or directory": "the kernel exposes no hardware PMU to this machine, as in many VMs",
    "Operation not supported": "the CPU or kernel does not support these events",
    "Permission denied": "kernel.perf_event_paranoid forbids it (try sysctl kernel.perf_event_paranoid=1)",
    "Operation not permitted": "kernel.perf_event_paranoid or a seccomp filter forbids it",
    "Function not implemented": "the kernel was built without perf events",
}


def explain(reason: str) -> str:
    meaning = _MEANING.get(reason)
    return f"{meaning} (perf_event_open: {reason})" if meaning else f"perf_event_open: {reason}"


def notes(program: Mapping) -> Sequence[str]:
    errors = unsupported(program)
    hardware = [e for e in HARDWARE if e in errors]
    lines = []
    if hardware:
        reasons = sorted({explain(errors[e]) for e in hardware})
        lines.append(f"counters: hardware counters are not supported here: {'; '.join(reasons)}. "
                     f"No {', '.join(hardware)}; the other probes are not affected.")
    software = [e for e in SOFTWARE if e in errors]
    if software:
        lines.append(f"counters: no {', '.join(software)} ({'; '.join(sorted({errors[e] for e in software}))})")
    return lines


PROBE = Probe(
    name=NAME,
    description="hardware counters of the scenario threads through perf_event_open: cycles, "
                "instructions, L1d read misses, LLC misses (and context switches, CPU migrations); "
                "'not supported here' where the machine has no PMU",
    cost="nothing per call: the kernel counts; a few system calls before the threads start and "
         "after they end",
    perturbs=frozenset(),
    sensitive_to=frozenset({"counters"}),
    c=CSide(NAME, "probe_counters.h", ("program_start", "program_end", "report")),
    metric_kinds=METRICS,
    collect=collect,
    notes=notes,
)
