"""The `memory` probe: peak and final resident memory, page faults, an RSS
timeline, and -- with `live` in the same run -- the fragmentation ratio.

Peak/final RSS, the RSS before the first allocator call and faults are the
runtime's own figures, under the names the reports know (peak_rss_kib,
final_rss_kib, baseline_rss_kib, heap_rss_kib = peak - baseline, minflt); the C side
(probes/probe_memory.h) adds the timeline from a sampler thread. The exact
peak of live bytes is the `live` probe's: counting it perturbs timing, which
`memory` must not do since it runs beside `time` by default.
"""

from pathlib import Path
from typing import List, Mapping, Optional, Tuple

from .base import CSide, Metric, Metrics, Probe, probe_report

NAME = "memory"
RUNTIME_METRICS = ("peak_rss_kib", "final_rss_kib", "minflt", "baseline_rss_kib", "heap_rss_kib")

METRICS = (
    Metric("memory:major_faults", "major page faults", "faults", "lower", "major-fault count"),
    Metric("memory:baseline_rss_kib", "RSS before the scenario's first call", "KiB", ""),
    Metric("memory:sampled_peak_rss_kib", "highest RSS the sampler saw", "KiB", "lower", "memory"),
    Metric("memory:fragmentation", "peak RSS / peak live bytes", "ratio", "lower", "fragmentation", key=True),
    Metric("memory:overhead_kib", "peak RSS - baseline RSS - peak live bytes", "KiB", "lower", "memory"),
)


def timeline(program: Mapping) -> List[Tuple[float, int, Optional[int]]]:
    """[(seconds since the program started, RSS KiB, live bytes or None)]; [] without the probe."""
    own = probe_report(program, NAME)
    if not own:
        return []
    return [(t / 1e9, rss, live if live >= 0 else None) for t, rss, live in own["samples"]]


def collect(program: Mapping, run_dir: Path) -> Metrics:
    mem = program.get("memory") or {}
    ru = program.get("rusage") or {}
    out: Metrics = {}
    for key in ("peak_rss_kib", "final_rss_kib", "baseline_rss_kib"):
        if mem.get(key, -1) >= 0:  # -1: the runtime could not read /proc
            out[key] = float(mem[key])
    if "peak_rss_kib" in out and "baseline_rss_kib" in out:  # the heap's share of the peak
        out["heap_rss_kib"] = out["peak_rss_kib"] - out["baseline_rss_kib"]
    if ru.get("minflt", -1) >= 0:
        out["minflt"] = float(ru["minflt"])
        out["memory:major_faults"] = float(ru["majflt"])
    samples = timeline(program)
    if samples and samples[0][1] >= 0:
        out["memory:baseline_rss_kib"] = float(samples[0][1])
        # VmHWM is not raised by pages the kernel counts late and is left behind
        # by madvise(MADV_DONTNEED); the sampled peak can be a little higher.
        out["memory:sampled_peak_rss_kib"] = float(max(s[1] for s in samples))
    live = probe_report(program, "live")
    if live and live["peak_bytes"] > 0 and "peak_rss_kib" in out:
        peak_rss = out["peak_rss_kib"] * 1024
        out["memory:fragmentation"] = peak_rss / live["peak_bytes"]
        if "memory:baseline_rss_kib" in out:
            out["memory:overhead_kib"] = (peak_rss - live["peak_bytes"]) / 1024 - out["memory:baseline_rss_kib"]
    return out


PROBE = Probe(
    name=NAME,
    description="peak and final RSS, page faults, an RSS timeline; with `live`, the fragmentation "
                "ratio peak RSS / peak live bytes",
    cost="a sampler thread reading /proc/self/statm every 10 ms (SCENC_MEMORY_SAMPLE_US)",
    perturbs=frozenset(),
    sensitive_to=frozenset({"rss"}),
    c=CSide(NAME, "probe_memory.h", ("program_start", "program_end", "report")),
    metric_kinds=METRICS,
    collect=collect,
    default=True,
    runtime_metrics=RUNTIME_METRICS,
    pairs_with=frozenset({"live"}),
    paired_figures="the fragmentation ratio (peak RSS / peak live bytes)",
)
