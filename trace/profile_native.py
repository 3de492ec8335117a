"""trace-stats' pass for a tracer log in C (runtime/tools/tracestats.c), back as a finished TraceStats.

profile.py's TraceStats reads AllocEvents in Python (well under a million calls a second); for a tracer log the
same pass runs in C, reading the log itself as the converter does, and hands over every figure TraceStats
holds, so that format_trace_stats and to_dict print them as they would have. A server's capture read by its
window (trace/window.py) keeps the Python path: `native_trace_stats` returns None for it (and for a made-up
log whose sizes pass 64 bits). Other captures
(ltrace logs, workloads, mtrace logs) keep the Python path too. tests/trace/test_stats_native.py runs both
paths on the same captures and compares their output byte for byte.
"""

from collections import defaultdict
from typing import Optional

from ..system.process import describe_status
from .events import Anomaly
from .profile import TraceStats


class StatsToolError(RuntimeError):
    """The C pass failed otherwise than on the log (a crash, a signal): said plainly."""


class NativeTraceStats(TraceStats):
    """A TraceStats whose live blocks are the C pass's summary of them (their count, realloc chains, longest
    chain): the figures its properties would compute from the live dict."""

    def __init__(self, report, live: dict):
        super().__init__(report)
        self._live_objects = live["objects"]
        self._live_chains = {n: c for n, c in live["chains"]}
        self._live_longest = tuple(live["longest"])

    @property
    def live_objects(self) -> int:
        return self._live_objects

    @property
    def chains(self) -> dict:
        hist = dict(self.chain_hist)
        for n, c in self._live_chains.items():
            hist[n] = hist.get(n, 0) + c
        return dict(sorted(hist.items()))

    @property
    def longest(self):
        best = (self.longest_chain, self.longest_chain_line)
        length, line = self._live_longest
        return (length, line) if length > best[0] else best


def native_trace_stats(source, whole: bool = False, cc: str = "gcc") -> Optional[TraceStats]:
    """The TraceStats of a tracer log's TraceSource made with index=False (TraceStats(source.report)
    .consume(events) for its events read with extra_events), the source given what the log held
    (adopt_log_info). None for a log with window marks read without `whole` (its window is read in Python), and
    for a log whose figures pass 64 bits (made up or damaged), which Python counts."""
    from .native import run_log_tool, trace_stats_program
    path = source.path
    status, data = run_log_tool([str(trace_stats_program(cc)), "--log", str(path)] + (["--whole"] if whole else []),
                                path)
    if status or not data:
        raise StatsToolError(f"scenc trace-stats: the C pass over {path} failed ({describe_status(status)}); "
                             f"the Python pass still reads it: SCENC_TRACE_STATS=python scenc trace-stats {path}")
    if "python" in data:        # a window, or figures past 64 bits: what Python reads
        return None
    source.adopt_log_info(data["log"])
    source.events.windowed = False
    source.events.info.window = {w: {} for w in (1, 2) if data["marks"] >> w & 1}
    return _stats(source.report, data)


def _stats(report, d: dict) -> TraceStats:
    stats = NativeTraceStats(report, d["live"])
    for name in ("ops", "live_bytes", "peak_bytes", "peak_objects", "peak_line", "max_objects", "frees", "free_null",
                 "free_unknown", "cross_thread_frees", "cross_thread_reallocs", "realloc_in_place", "realloc_moved",
                 "realloc_as_malloc", "realloc_as_free", "longest_chain", "longest_chain_line", "peak_total",
                 "peak_total_line"):
        setattr(stats, name, d[name])
    for name in ("peak_time", "first_time", "last_time"):
        setattr(stats, name, None if d[name] is None else float(d[name]))
    for tid, kind, n in d["by_thread_kind"]:
        stats.by_thread_kind[tid, kind] = n
    stats.failed = dict(d["failed"])
    for name in ("size_hist", "lifetime_ops_hist", "lifetime_us_hist"):
        setattr(stats, name, defaultdict(int, {b: n for b, n in d[name]}))
    stats.chain_hist = {n: c for n, c in d["chain_hist"]}
    lives, got = stats.lives, d["lives"]
    lives.peak, lives.starts, lives.exits, lives.peak_line = got["peak"], got["starts"], got["exits"], got["line"]
    lives.peak_time = None if got["time"] is None else float(got["time"])
    mapped, got = stats.mapped, d["mapped"]
    mapped.calls = dict(zip(mapped.KINDS, got["calls"]))
    mapped.peak, mapped.bytes, mapped.peak_line = got["peak"], got["bytes"], got["peak_line"]
    for kind, count, examples in d["notes"]:
        report.anomaly_counts[kind] = report.anomaly_counts.get(kind, 0) + count
        report.anomaly_examples.setdefault(kind, []).extend(Anomaly(line, kind, text) for line, text in examples)
    return stats
