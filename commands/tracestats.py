"""`scenc trace-stats FILE [--json]`: a capture's calls, sizes, lifetimes, threads and anomalies.

Exit status 4 when the capture is incomplete (errors.py).
"""

import json
import sys

from ..errors import EXIT_INCOMPLETE, EXIT_OK
from ..trace.profile import TraceStats, format_trace_stats
from ..trace.source import TraceSource
from .tracing import guarded, refuse_scenario


@guarded("trace-stats")
def trace_stats(args) -> int:
    refuse_scenario("trace-stats", args.file)
    source = TraceSource(args.file, extra_events=True)
    stats = TraceStats(source.report).consume(source.events)
    if args.json:
        d = stats.to_dict()
        d["format"] = source.format
        if source.format == "preload":
            info = source.events.info
            d["preload"] = {"pid": info.pid, "records": info.records, "missing": info.missing, "ended": info.ended}
        print(json.dumps(d, indent=1))
    else:
        text = format_trace_stats(stats)
        if source.format == "preload":
            text = _preload_header(text, stats, source)
        sys.stdout.write(text)
    return EXIT_INCOMPLETE if source.report.incomplete else EXIT_OK


def _preload_header(text: str, stats, source) -> str:
    """format_trace_stats speaks of ltrace lines and exit lines; say what a tracer log is instead."""
    info = source.events.info
    lines = text.split("\n")
    lines[0] = (f"trace {source.path}: {info.records} records, {stats.ops} allocator events, {stats.threads} threads, "
                f"captured with the LD_PRELOAD tracer (pid {info.pid})")
    lines = [ln for ln in lines if not ln.startswith("  INCOMPLETE capture:")]
    if source.losses():
        lines.insert(1, "  INCOMPLETE capture: " + "; ".join(source.losses()) + ". The figures below cover what "
                        "was written.")
    return "\n".join(lines)
