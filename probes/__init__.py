"""What is measured: the probes, their registry, and what a run of a probe set needs.

A probe set is the probes compiled into one program and so measured in one
run, named by joining its probes with "+" in registry order ("time+memory").
probes/planner.py decides which sets a selection needs; the harness builds a
program per set (`c_parts`), runs it with `environment`, and stores
`run_metrics`.
"""

from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Sequence, Tuple

from ..report import metrics as metric_defs
from .base import ASPECTS, CSide, Metric, Metrics, Probe
from . import counters, latency, layout, live, memory, timing

__all__ = ["ASPECTS", "Metric", "Probe", "ProbeError", "PROBES", "DEFAULT", "get", "set_name",
           "set_members", "c_parts", "environment", "run_metrics", "notes", "describe_metric"]

PROBES: Dict[str, Probe] = {p.name: p for p in (timing.PROBE, memory.PROBE, live.PROBE, latency.PROBE,
                                                layout.PROBE, counters.PROBE)}
DEFAULT: Tuple[str, ...] = tuple(name for name, p in PROBES.items() if p.default)


class ProbeError(ValueError):
    """A probe selection that cannot be measured; the message is for the user."""


def get(name: str) -> Probe:
    try:
        return PROBES[name]
    except KeyError:
        raise ProbeError(f"unknown probe {name!r}; the probes are {', '.join(PROBES)} "
                         f"(`scenc probes` describes them)") from None


def ordered(names: Iterable[str]) -> List[str]:
    """Known names without repeats, in registry order (so a set has one name)."""
    wanted = set(names)
    for name in wanted:
        get(name)
    return [name for name in PROBES if name in wanted]


def set_name(names: Iterable[str]) -> str:
    return "+".join(ordered(names))


def set_members(name: str) -> List[str]:
    return ordered(part for part in name.split("+") if part)


def c_parts(probe_set: str) -> tuple:
    """What the program of this probe set compiles in (compiler.codegen.ProbeC)."""
    from ..compiler.codegen import ProbeC
    return tuple(ProbeC(c.name, c.header, c.hooks, c.reads_sizes) for c in
                 (PROBES[n].c for n in set_members(probe_set)) if c is not None)


def environment(probe_set: str, run_dir: Path) -> Dict[str, str]:
    env: Dict[str, str] = {}
    for name in set_members(probe_set):
        env.update(PROBES[name].environment(Path(run_dir)))
    return env


def needs_run_dir(probe_set: str) -> bool:
    return any(PROBES[n].files for n in set_members(probe_set))


def run_metrics(probe_set: str, program: Mapping, run_dir: Path) -> Metrics:
    """Every figure the probes of this set give for one run.

    Only those: a figure the set's probes do not answer for is not stored, so
    the wall time of a run slowed down by `layout` never reaches a table.
    Failed allocations are counted in every run (a count no probe perturbs).
    """
    out: Metrics = {}
    for name in set_members(probe_set):
        out.update(PROBES[name].metrics(program, Path(run_dir)))
    out["failed_allocs"] = float(sum(t.get("failed", 0) for t in program.get("threads", [])))
    return out


def notes(probe_set: str, program: Mapping) -> List[str]:
    """Things to tell the user about this run's figures (unsupported counters ...)."""
    return [line for name in set_members(probe_set) for line in PROBES[name].notes(program)]


def owner(metric_name: str):
    """The probe that reports this metric, or None."""
    for p in PROBES.values():
        if metric_name.startswith(p.name + ":") or any(
                Metric(pattern, "", "", "").matches(metric_name) for pattern in p.runtime_metrics):
            return p
    return None


def metric_kind(metric_name: str):
    prefix = metric_name.split(":", 1)[0]
    probe = PROBES.get(prefix)
    return probe.metric_kind(metric_name) if probe and ":" in metric_name else None


def key_metrics(names: Iterable[str]) -> List[str]:
    """Of these metric names, the probe figures a report should show even
    without --all-metrics (p50/p99 latency, false sharing, fragmentation ...)."""
    return [n for n in names if (lambda kind: kind is not None and kind.key)(metric_kind(n))]


def describe_metric(metric_name: str):
    """A report.metrics.Metric for a probe figure, so tables and comparisons
    show its label, unit and direction. A figure with no direction (a
    property of the scenario) is marked lower-is-better: the report has no
    third choice."""
    kind = metric_kind(metric_name)
    if kind is None:
        return metric_defs.Metric(metric_name, metric_name, "", True, metric_name)
    lower = kind.better != "higher"
    word = kind.word or kind.label
    return metric_defs.Metric(metric_name, f"{kind.label} ({metric_name.split(':', 1)[1]})", kind.unit,
                              lower, word)


def _register_with_reports() -> None:
    """Tell report/metrics.py how to describe `<probe>:...` names. The values
    themselves come from run_metrics, for the probes of each run only."""
    for name in PROBES:
        metric_defs.register_family(name, lambda report: {}, describe_metric,
                                    lambda metric_name: bool(key_metrics([metric_name])))


_register_with_reports()
