"""`scenc trace-stats FILE [--whole] [--json]`: a capture's calls, sizes, lifetimes, threads and anomalies.

A server's capture (capture --server) is described by its window, as convert replays it, unless --whole.
A tracer log is read by the C pass (trace/profile_native.py; its window, by the Python one);
SCENC_TRACE_STATS=python takes the Python pass for every capture.

Exit status 4 when the capture is incomplete (errors.py).
"""

import json
import os
import sys

from ..errors import EXIT_INCOMPLETE, EXIT_OK, EXIT_RUN
from ..trace.profile import TraceStats, format_trace_stats
from ..trace.profile_native import StatsToolError, native_trace_stats
from ..trace.source import TraceSource
from ..trace.model.image import unrecorded_why
from ..trace.tracerlog import is_preload_log
from .tracing import guarded, refuse_scenario


@guarded("trace-stats")
def trace_stats(args) -> int:
    refuse_scenario("trace-stats", args.file)
    try:
        source, stats = _read(args)
    except StatsToolError as e:
        print(e, file=sys.stderr)
        return EXIT_RUN
    window = _window_line(source)
    if args.json:
        d = stats.to_dict()
        d["format"] = source.format
        if source.format == "preload":
            info = source.events.info
            d["preload"] = {"pid": info.pid, "records": info.records, "missing": info.missing, "ended": info.ended,
                            "file_resident_kib": info.file_resident_kib}
            d["window"] = source.events.windowed
        elif source.format == "workload":
            d["workload"] = source.events.info.to_dict()
        if source.format in ("workload", "mtrace"):
            d["has_threads"], d["has_times"] = source.format == "workload", False
            d["losses"] = source.losses()
        print(json.dumps(d, indent=1))
    else:
        text = format_trace_stats(stats)
        if source.format == "preload":
            text = _preload_header(text, stats, source)
            if window:
                head, _, rest = text.partition("\n")
                text = f"{head}\n  {window}\n{rest}"
        elif source.format in _NO_TIMES:
            text = _untimed_header(text, stats, source)
        sys.stdout.write(text)
    return EXIT_INCOMPLETE if source.report.incomplete else EXIT_OK


def _read(args):
    """(TraceSource, TraceStats) of the capture: a tracer log's by the C pass, unless read by its window."""
    if os.environ.get("SCENC_TRACE_STATS") != "python" and is_preload_log(args.file):
        source = TraceSource(args.file, extra_events=True, index=False)
        stats = native_trace_stats(source, whole=args.whole)
        if stats is not None:
            return source, stats
    source = TraceSource(args.file, extra_events=True, window=not args.whole)
    return source, TraceStats(source.report).consume(source.events)


def _window_line(source):
    """What part of a server's capture the figures cover (None: a capture without window marks)."""
    if source.format != "preload" or 1 not in source.events.info.window:
        return None
    if not source.events.windowed:
        return "window: none taken (--whole): the server's whole life, start-up and stop included"
    return ("window: the server's window from ready to its client's end, as convert replays it: what was live at "
            "ready counts as made when it opened; --whole for the server's whole life")


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
    at = next((i + 1 for i, ln in enumerate(lines) if ln.startswith("live at end:")), len(lines))
    lines.insert(at, image_line(info))
    return "\n".join(lines)


def image_line(info) -> str:
    """The program's file-backed resident memory when it left (its image: what a fitted model maps to stand for it)."""
    kib = info.file_resident_kib
    if kib:
        return (f"image at the end: {kib} KiB resident from files (the program's code, libraries and the files it "
                f"mapped: RssFile)")
    return f"image at the end: unknown ({unrecorded_why(info)})"


# What a workload and an mtrace log do not record, said where an ltrace log's header would advise -tt.
_NO_TIMES = {
    "workload": "a workload records no times: it keeps each thread's calls in order and the syncs between threads "
                "(trace2wl's), so lifetimes are counted in calls, in the order scenc runs the threads (each "
                "thread until it waits, switching to a thread at the moment its sync is written)",
    "mtrace": "an mtrace log records no threads and no times: every call is counted in one thread (tid 0), so a "
              "cross-thread free cannot be seen, and lifetimes are counted in calls; calloc, memalign, valloc "
              "and realloc(NULL, n) are printed as '+' lines like malloc, and counted as malloc",
}


def _untimed_header(text: str, stats, source) -> str:
    """format_trace_stats speaks of ltrace lines, exit lines and -tt; say what a workload or an mtrace log is."""
    lines = text.split("\n")
    if source.format == "workload":
        info = source.events.info
        lines[0] = (f"trace {source.path}: DJ Delorie workload (glibc trace_run's .wl), {info.size} bytes, "
                    f"{info.threads} threads, {info.slots} pointer slots, {info.syncs} syncs; {stats.ops} allocator "
                    f"events, {stats.threads} threads with calls")
    else:
        rep = source.report
        end = "muntrace() closed it (= End)" if rep.ended else "no '= End' (the program did not call muntrace(): " \
                                                                 "complete all the same)"
        lines[0] = f"trace {source.path}: glibc mtrace log, {rep.lines} lines, {stats.ops} allocator events; {end}"
    lines = [ln for ln in lines if not ln.startswith("  INCOMPLETE capture:")]
    lines.insert(1, "  " + _NO_TIMES[source.format])
    if source.losses():
        lines.insert(2, "  INCOMPLETE capture: " + "; ".join(source.losses()) + ". The figures below cover what "
                        "was read.")
    return "\n".join("    (the format records no times)" if ln == "    (no timestamps: capture with -tt)" else ln
                     for ln in lines)
