"""The `time` probe: wall and CPU time of the scenario, each thread and each
measured region, and throughput.

The runtime times the scenario and its threads in every program; this probe
answers for those figures (under the names the reports know: wall_s,
ops_per_s, user_s, sys_s, region:<name>) and its C side
(probes/probe_time.h) adds user/system CPU per thread and CPU per region
(exact for long entries, the thread's CPU share for short ones), read outside
the timed operations.
"""

from pathlib import Path
from typing import Mapping

from .base import CSide, Metric, Metrics, Probe, probe_report, thread_label, total_ops

NAME = "time"
RUNTIME_METRICS = ("wall_s", "ops_per_s", "user_s", "sys_s", "region:<region>")

METRICS = (
    Metric("time:cpu_s", "CPU time (user + system)", "s", "lower", "time"),
    Metric("time:thread.<thread>.wall_s", "wall time of the thread", "s", "lower", "time"),
    Metric("time:thread.<thread>.cpu_s", "CPU time of the thread", "s", "lower", "time"),
    Metric("time:thread.<thread>.user_s", "user CPU time of the thread", "s", "lower", "time"),
    Metric("time:thread.<thread>.sys_s", "system CPU time of the thread", "s", "lower", "time"),
    Metric("time:thread.<thread>.ops_per_s", "allocator calls per second of the thread", "ops/s",
           "higher", "throughput"),
    Metric("time:region.<region>.cpu_s", "CPU time in the region, all threads", "s", "lower", "time"),
    Metric("time:region.<region>.<thread>.wall_s", "the thread's wall time in the region", "s",
           "lower", "time"),
    Metric("time:region.<region>.<thread>.cpu_s", "the thread's CPU time in the region", "s",
           "lower", "time"),
)


def runtime_figures(program: Mapping) -> Metrics:
    """What the runtime measured, as report/metrics.py names and defines it."""
    out: Metrics = {"wall_s": program["wall_ns"] / 1e9}
    ops = sum(total_ops(t) for t in program["threads"])
    if out["wall_s"] > 0:
        out["ops_per_s"] = ops / out["wall_s"]
    ru = program.get("rusage") or {}
    for key in ("user_s", "sys_s"):
        if ru.get(key, -1) >= 0:
            out[key] = float(ru[key])
    # A region is finished when its slowest thread is: the maximum is the time
    # it adds to the scenario (report/metrics.py, "Region times").
    for t in program["threads"]:
        for name, figures in (t.get("regions") or {}).items():
            if figures["entries"]:
                key = f"region:{name}"
                out[key] = max(out.get(key, 0.0), figures["ns"] / 1e9)
    return out


def collect(program: Mapping, run_dir: Path) -> Metrics:
    out = runtime_figures(program)
    if "user_s" in out and "sys_s" in out:
        out["time:cpu_s"] = out["user_s"] + out["sys_s"]
    own = probe_report(program, NAME)
    extras = own["threads"] if own else [None] * len(program["threads"])
    region_cpu = {}
    for t, extra in zip(program["threads"], extras):
        label = thread_label(t)
        if "start_ns" in t:  # (not in hand-written reports of tests)
            wall = (t["end_ns"] - t["start_ns"]) / 1e9
            out[f"time:thread.{label}.wall_s"] = wall
            out[f"time:thread.{label}.cpu_s"] = t["cpu_ns"] / 1e9
            if wall > 0:
                out[f"time:thread.{label}.ops_per_s"] = total_ops(t) / wall
        if extra:
            out[f"time:thread.{label}.user_s"] = extra["user_s"]
            out[f"time:thread.{label}.sys_s"] = extra["sys_s"]
        # Regions come in declaration order, the order of the probe's CPU slots.
        for slot, (name, figures) in enumerate((t.get("regions") or {}).items()):
            if not figures["entries"]:
                continue
            region = name.replace(".", "_").replace(":", "_")  # would split the metric name
            out[f"time:region.{region}.{label}.wall_s"] = figures["ns"] / 1e9
            if extra:
                cpu = extra["region_cpu_ns"][slot] / 1e9
                out[f"time:region.{region}.{label}.cpu_s"] = cpu
                region_cpu[region] = region_cpu.get(region, 0.0) + cpu
    for region, cpu in region_cpu.items():
        out[f"time:region.{region}.cpu_s"] = cpu
    return out


PROBE = Probe(
    name=NAME,
    description="wall and CPU (user/sys) time of the scenario, each thread and each measured region; "
                "allocator calls per second",
    cost="nothing per call; two rusage reads per thread; a store and a comparison per region entry, "
         "CPU-clock reads only around a region's first entry and entries after a long one",
    perturbs=frozenset(),
    sensitive_to=frozenset({"time"}),
    c=CSide(NAME, "probe_time.h", ("program_start", "thread_start", "thread_end", "region_begin",
                                    "region_end", "report")),
    metric_kinds=METRICS,
    collect=collect,
    default=True,
    runtime_metrics=RUNTIME_METRICS,
)
