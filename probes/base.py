"""What a probe is, as the planner, the harness and the reports see it.

A probe has a C side (hooks compiled into the scenario program, or none) and a
Python side: the environment a run needs, the metrics it takes from the
program's report and its own files, and optionally pictures.

`perturbs` and `sensitive_to` are sets of *aspects* of a run (ASPECTS). Two
probes may share a run unless one perturbs an aspect the other is sensitive to.

Metric names: the figures every scenc program reports keep the names the
reports already know (wall_s, peak_rss_kib, region:<name> ...; see
report/metrics.py) and belong to the `time` and `memory` probes; every other
figure is `<probe>:<what>`, e.g. `latency:malloc.p99_ns`.
"""

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, FrozenSet, Mapping, Optional, Sequence, Tuple


ASPECTS = {
    "time": "wall and CPU time of the scenario, its threads and regions",
    "latency": "the cost of single allocator calls",
    "rss": "resident memory of the process",
    "counters": "hardware event counts (cycles, instructions, cache misses)",
}

Metrics = Dict[str, float]


@dataclass(frozen=True)
class CSide:
    """The C side of a probe: scn_probe_<name>_<hook> functions in probes/<header>.
    (compiler.codegen.ProbeC by another name, so that listing the probes does
    not import the code generator and jinja2.)"""
    name: str
    header: str
    hooks: Tuple[str, ...]
    reads_sizes: bool = False  # the hooks read scn_obj.size (result, old, a free's size)


@dataclass(frozen=True)
class Metric:
    """A kind of figure a probe reports. `pattern` may hold placeholders in
    angle brackets (`latency:<op>.p99_ns`), each standing for one dot-free part."""
    pattern: str
    label: str
    unit: str
    better: str        # "lower", "higher" or "" (a property of the scenario, not a score)
    word: str = ""     # for comparison sentences: "time", "memory", "throughput" or a noun
    key: bool = False  # among the few figures a report shows without --all-metrics

    def matches(self, name: str) -> bool:
        return _pattern_regex(self.pattern).fullmatch(name) is not None


_PLACEHOLDER = re.compile(r"<[a-z]+>")


def _pattern_regex(pattern: str) -> "re.Pattern":
    parts = _PLACEHOLDER.split(pattern)
    return re.compile(r"[^.:]+".join(re.escape(p) for p in parts))


def no_environment(run_dir: Path) -> Dict[str, str]:
    return {}


def no_notes(program: Mapping) -> Sequence[str]:
    return ()


@dataclass(frozen=True)
class Probe:
    name: str
    description: str                        # what it measures, one sentence
    cost: str                               # what it costs the run, one sentence
    perturbs: FrozenSet[str]                # aspects it disturbs
    sensitive_to: FrozenSet[str]            # aspects its figures depend on
    c: Optional[CSide]                      # None: nothing compiled in
    metric_kinds: Tuple[Metric, ...]        # its own `<probe>:...` figures
    collect: Callable[[Mapping, Path], Metrics]
    environment: Callable[[Path], Dict[str, str]] = no_environment
    notes: Callable[[Mapping], Sequence[str]] = no_notes   # e.g. "not supported here"
    default: bool = False
    # The runtime's own figures this probe answers for (names in report/metrics.py).
    runtime_metrics: Tuple[str, ...] = ()
    # Probes whose figures this one combines with its own when they share a
    # run (memory with live: the fragmentation ratio); the planner prefers
    # such pairings among the plans with the fewest runs.
    pairs_with: FrozenSet[str] = frozenset()
    paired_figures: str = ""                # what the pairing gives, for the plan's notes
    perturbation: str = ""                  # how it perturbs, for the plan's reasons
    files: Tuple[str, ...] = ()             # what it leaves in the run directory
    plot: Optional[Callable] = field(default=None, compare=False)

    def metrics(self, program: Mapping, run_dir: Path) -> Metrics:
        """name -> value (a finite float), from the program's JSON report and the
        files the probe left in run_dir; figures the report cannot give are left out."""
        return self.collect(program, Path(run_dir))

    def metric_kind(self, name: str) -> Optional[Metric]:
        return next((m for m in self.metric_kinds if m.matches(name)), None)


def probe_report(program: Mapping, name: str) -> Optional[Mapping]:
    """The probe's own part of the program's report, or None if it was not compiled in."""
    return (program.get("probes") or {}).get(name)


def thread_label(thread: Mapping) -> str:
    return f"{thread['group']}[{thread['index']}]"


def total_ops(thread: Mapping) -> int:
    return sum(thread["ops"].values())
