"""The `latency` probe: percentiles of the cost of single calls, per kind.

The C side (probes/probe_latency.h) times about one call in N (64 unless
SCENC_LATENCY_SAMPLE says otherwise) with the TSC into log-scale histograms;
here they are merged over threads, turned into percentiles and converted to
nanoseconds with the TSC rate measured over the run itself (TSC cycles /
monotonic ns of each thread).
"""

import math
from pathlib import Path
from typing import Dict, List, Mapping, Tuple

from .base import CSide, Metric, Metrics, Probe, probe_report

NAME = "latency"
SUB_BITS = 4
PERCENTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("p999", 0.999))

METRICS = tuple(
    Metric(f"latency:<op>.{label}_ns", f"{q * 100:g}th percentile of one call's cost", "ns", "lower", "time",
           key=label in ("p50", "p99"))
    for label, q in PERCENTILES) + (
    Metric("latency:<op>.max_ns", "the costliest timed call", "ns", "lower", "time"),
    Metric("latency:<op>.mean_ns", "mean cost of the timed calls", "ns", "lower", "time"),
    Metric("latency:<op>.samples", "calls timed", "calls", ""),
    Metric("latency:timer_overhead_ns", "cost of an empty measurement, taken off every sample", "ns", ""),
    Metric("latency:tsc_ghz", "TSC rate measured over the run", "GHz", ""),
)


def bucket_bounds(bucket: int, sub_bits: int = SUB_BITS) -> Tuple[int, int]:
    """The smallest and largest cycle counts that fall in `bucket` (the C side's
    scn_latency_bucket, inverted)."""
    per = 1 << sub_bits
    if bucket < per:
        return bucket, bucket
    exponent, sub = divmod(bucket - per, per)
    shift = exponent  # values with their top bit at sub_bits + exponent
    return (per + sub) << shift, ((per + sub + 1) << shift) - 1


def bucket_of(value: int, sub_bits: int = SUB_BITS) -> int:
    per = 1 << sub_bits
    if value < per:
        return value
    top = value.bit_length() - 1
    return per + (top - sub_bits) * per + ((value >> (top - sub_bits)) & (per - 1))


def merged(own: Mapping) -> Dict[str, Dict]:
    """Per operation kind: samples, sum and max cycles, and the histogram {bucket: count},
    summed over threads."""
    ops: Dict[str, Dict] = {}
    for thread in own["threads"]:
        for op, figures in thread["ops"].items():
            m = ops.setdefault(op, {"samples": 0, "sum": 0, "max": 0, "hist": {}})
            m["samples"] += figures["samples"]
            m["sum"] += figures["sum"]
            m["max"] = max(m["max"], figures["max"])
            for bucket, count in figures["hist"]:
                m["hist"][bucket] = m["hist"].get(bucket, 0) + count
    return ops


def percentile(hist: Mapping[int, int], q: float, maximum: int, sub_bits: int = SUB_BITS) -> float:
    """The q-quantile in cycles: the middle of the bucket holding the ceil(q*n)-th
    smallest sample, never above the exact maximum."""
    total = sum(hist.values())
    if total == 0:
        return math.nan
    rank = max(1, math.ceil(q * total - 1e-9))
    seen = 0
    for bucket in sorted(hist):
        seen += hist[bucket]
        if seen >= rank:
            lo, hi = bucket_bounds(bucket, sub_bits)
            return min((lo + hi) / 2, maximum)
    return float(maximum)


def cycles_per_ns(own: Mapping) -> float:
    cycles = sum(t["tsc_cycles"] for t in own["threads"])
    ns = sum(t["ns"] for t in own["threads"])
    return cycles / ns if ns > 0 else math.nan


def percentile_curve(own: Mapping, op: str, quantiles: List[float]) -> List[float]:
    """Nanoseconds at each quantile for one kind of call, for the plots."""
    m = merged(own).get(op)
    rate = cycles_per_ns(own)
    if not m or not rate > 0:
        return [math.nan] * len(quantiles)
    return [percentile(m["hist"], q, m["max"], own.get("sub_bits", SUB_BITS)) / rate for q in quantiles]


def collect(program: Mapping, run_dir: Path) -> Metrics:
    own = probe_report(program, NAME)
    if not own:
        return {}
    rate = cycles_per_ns(own)
    if not rate > 0:
        return {}
    sub_bits = own.get("sub_bits", SUB_BITS)
    out: Metrics = {"latency:timer_overhead_ns": own["overhead_cycles"] / rate, "latency:tsc_ghz": rate}
    for op, m in merged(own).items():
        if not m["samples"]:
            continue
        for label, q in PERCENTILES:
            out[f"latency:{op}.{label}_ns"] = percentile(m["hist"], q, m["max"], sub_bits) / rate
        out[f"latency:{op}.max_ns"] = m["max"] / rate
        out[f"latency:{op}.mean_ns"] = m["sum"] / m["samples"] / rate
        out[f"latency:{op}.samples"] = float(m["samples"])
    return out


PROBE = Probe(
    name=NAME,
    description="cost of single calls per kind (TSC cycles into log-scale histograms): p50, p90, p99, "
                "p99.9 and max",
    cost="a countdown per call; two TSC reads around about one call in 64 (SCENC_LATENCY_SAMPLE=N; "
         "1 times every call)",
    perturbs=frozenset({"time", "counters", "rss"}),
    sensitive_to=frozenset({"latency"}),
    perturbation="a countdown at every call, TSC reads around sampled ones, 55 KiB of resident "
                 "histograms per thread",
    c=CSide(NAME, "probe_latency.h", ("program_start", "thread_start", "thread_end", "op_before",
                                       "op_after", "report")),
    metric_kinds=METRICS,
    collect=collect,
)
