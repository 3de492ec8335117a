"""The `live` probe: the exact peak of requested bytes alive at once.

Counting across threads needs one shared counter updated at every call
(probes/probe_live.h), which moves a cache line between cores at every
operation; so `live` perturbs time and gets a run apart from `time`. It
disturbs neither addresses nor resident memory, so it shares its run with
`memory`, whose fragmentation ratio (peak RSS / peak live bytes) needs both
figures from the same run.
"""

from pathlib import Path
from typing import Mapping

from .base import CSide, Metric, Metrics, Probe, probe_report

NAME = "live"

METRICS = (
    Metric("live:peak_bytes", "peak of requested bytes alive at once, all threads", "B", "", key=True),
    Metric("live:final_bytes", "requested bytes still alive after the threads ended", "B", ""),
)


def collect(program: Mapping, run_dir: Path) -> Metrics:
    own = probe_report(program, NAME)
    if not own:
        return {}
    return {"live:peak_bytes": float(own["peak_bytes"]), "live:final_bytes": float(own["final_bytes"])}


PROBE = Probe(
    name=NAME,
    description="the exact peak of requested bytes alive at once over all threads: what a perfect "
                "allocator would need",
    cost="one atomic add on a counter shared by all threads at every call",
    perturbs=frozenset({"time", "latency", "counters"}),
    sensitive_to=frozenset(),
    perturbation="an atomic add on one counter shared by all threads at every call",
    c=CSide(NAME, "probe_live.h", ("op_before", "op_after", "report"),
            reads_sizes=True),
    metric_kinds=METRICS,
    collect=collect,
)
