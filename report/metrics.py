"""What is measured in a run: the one list of metrics, with unit and direction.

A metric turns the JSON report of one program run into one number. The
harness stores those numbers in every run record; the tables, plots and
comparisons look up a metric's unit and direction here, so a metric added
here (or registered by a probe module through `register`/`register_family`)
shows up everywhere without touching them.

Region times: a `measure "name" { ... }` block is timed per thread. The
metric `region:name` is the *maximum* over the threads that entered it: a
region is finished when its slowest thread is, so the maximum is the time
the region adds to the scenario (the sum would count parallel threads
twice, and the mean would hide a straggler the allocator caused).
"""

from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional

Extract = Callable[[Mapping], Optional[float]]


@dataclass(frozen=True)
class Metric:
    name: str               # key in run records ("wall_s")
    label: str              # words for people ("wall time")
    unit: str               # "s", "KiB", "ops/s" or a count noun; tables scale s and KiB
    lower_is_better: bool
    word: str               # for stats.Comparison.sentence: time, memory, throughput or a noun
    extract: Extract = None  # program JSON -> value; None when the report lacks it
    headline: bool = False  # shown by default and used by `--runs auto` to decide when to stop
    best: Optional[str] = None  # word for the winner in reports: "fastest", "leanest"
    worst: Optional[str] = None  # and for the last: "slowest", "fattest"

    @property
    def direction(self) -> str:
        return "lower is better" if self.lower_is_better else "higher is better"


def total_ops(report: Mapping) -> int:
    return sum(sum(t.get("ops", {}).values()) for t in report.get("threads", []))


def _wall_s(r):
    return r["wall_ns"] / 1e9


def _ops_per_s(r):
    wall = r["wall_ns"] / 1e9
    return total_ops(r) / wall if wall > 0 else None


def _path(*keys):
    def extract(r):
        for k in keys:
            r = r[k]
        # The runtime writes -1 when it could not read a value (e.g. /proc
        # unreadable because the allocator under test returned NULL to fopen).
        return None if r is None or r < 0 else r
    return extract


def _heap_rss_kib(r):
    peak, baseline = _path("memory", "peak_rss_kib")(r), _path("memory", "baseline_rss_kib")(r)
    return None if peak is None or baseline is None else peak - baseline


_REGISTRY: Dict[str, Metric] = {}
# prefix -> (report -> {full name: value}, name -> Metric, name -> shown by default?)
# for metrics whose names depend on the scenario (regions, probe outputs).
_FAMILIES: Dict[str, tuple] = {}


def register(metric: Metric) -> Metric:
    _REGISTRY[metric.name] = metric
    return metric


def register_family(prefix: str, extract_all: Callable[[Mapping], Dict[str, float]],
                    describe: Callable[[str], Metric],
                    is_key: Callable[[str], bool] = lambda name: False) -> None:
    """Metrics named `prefix:<something>`, found in a report at run time; `is_key`
    says which of them a report shows even without --all-metrics."""
    _FAMILIES[prefix] = (extract_all, describe, is_key)


for _m in (
    Metric("wall_s", "wall time", "s", True, "time", _wall_s, headline=True, best="fastest",
           worst="slowest"),
    Metric("ops_per_s", "allocator calls per second", "ops/s", False, "throughput", _ops_per_s),
    Metric("user_s", "user CPU time", "s", True, "user CPU time", _path("rusage", "user_s")),
    Metric("sys_s", "system CPU time", "s", True, "system CPU time", _path("rusage", "sys_s")),
    Metric("peak_rss_kib", "peak RSS", "KiB", True, "memory", _path("memory", "peak_rss_kib"),
           headline=True, best="leanest", worst="fattest"),
    Metric("final_rss_kib", "final RSS", "KiB", True, "final RSS", _path("memory", "final_rss_kib")),
    # RSS before the first allocator call (the program, the runtime's tables), and the peak above it: the heap's.
    Metric("baseline_rss_kib", "RSS before the first allocator call", "KiB", True, "baseline RSS",
           _path("memory", "baseline_rss_kib")),
    Metric("heap_rss_kib", "peak RSS above the baseline", "KiB", True, "memory", _heap_rss_kib),
    Metric("minflt", "minor page faults", "faults", True, "page-fault count", _path("rusage", "minflt")),
    Metric("majflt", "major page faults", "faults", True, "major-fault count", _path("rusage", "majflt")),
    Metric("failed_allocs", "failed allocations", "calls", True, "failed-allocation count",
           lambda r: sum(t.get("failed", 0) for t in r["threads"])),
    # `scenc run --server ... -- CLIENT`: wall time is the client's, the figures above the server's; these are
    # the client's own and the server's start (run/program/serving.py). No scenario report has them.
    Metric("ready_s", "time until the server was ready", "s", True, "start-up time"),
    Metric("client_user_s", "the client's user CPU time", "s", True, "client CPU time"),
    Metric("client_sys_s", "the client's system CPU time", "s", True, "client system time"),
    Metric("client_peak_rss_kib", "the client's peak RSS", "KiB", True, "client memory"),
):
    register(_m)


def _regions(report: Mapping) -> Dict[str, float]:
    longest: Dict[str, int] = {}
    for t in report.get("threads", []):
        for name, region in (t.get("regions") or {}).items():
            if region.get("entries"):
                longest[name] = max(longest.get(name, 0), region["ns"])
    return {f"region:{name}": ns / 1e9 for name, ns in longest.items()}


def _describe_region(name: str) -> Metric:
    region = name.split(":", 1)[1]
    return Metric(name, f"region {region!r} (slowest thread)", "s", True, "time")


register_family("region", _regions, _describe_region)


def metric(name: str) -> Metric:
    """The description of a metric by name, also for family members and unknown names."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    prefix = name.split(":", 1)[0]
    if ":" in name and prefix in _FAMILIES:
        return _FAMILIES[prefix][1](name)
    # A metric written by a newer scenc: show it, without claiming a direction we do not know.
    return Metric(name, name, "", True, name)


def all_metrics() -> List[Metric]:
    return list(_REGISTRY.values())


def headline_names() -> List[str]:
    return [m.name for m in _REGISTRY.values() if m.headline]


def from_report(report: Mapping) -> Dict[str, float]:
    """Every metric this report allows; a metric the report cannot give is left out."""
    values: Dict[str, float] = {}
    for m in _REGISTRY.values():
        try:
            value = m.extract(report)
        except (KeyError, TypeError, ZeroDivisionError):
            continue
        if value is not None:
            values[m.name] = float(value)
    for extract_all, _, _ in _FAMILIES.values():
        try:
            values.update({k: float(v) for k, v in extract_all(report).items()})
        except (KeyError, TypeError, AttributeError):
            continue
    return values


def shown_by_default(name: str) -> bool:
    """What a table shows without --all-metrics: the headline metrics, region
    times, and the few figures each probe marks as key (p50/p99 latency,
    false sharing, fragmentation ...)."""
    if name in headline_names() or name.startswith(("region:", "reported:")):
        return True
    prefix = name.split(":", 1)[0]
    return ":" in name and prefix in _FAMILIES and _FAMILIES[prefix][2](name)


def order(names) -> List[str]:
    """Registered metrics in registry order, then the others (regions ...) sorted."""
    names = set(names)
    known = [m.name for m in _REGISTRY.values() if m.name in names]
    return known + sorted(names - set(known))
