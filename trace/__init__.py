"""Captured allocator traces: ltrace logs -> AllocEvents -> statistics (and, later, scenarios).

scenc.trace.events   AllocEvent, Anomaly, ANOMALY_KINDS
scenc.trace.ltrace   parse(lines, filename), parse_file(path), ParseReport, TraceFormatError
scenc.trace.stats    TraceStats, trace_stats_file(path), format_trace_stats(stats)
scenc.trace.capture  capture(argv, out_path, ...) -> CaptureResult
"""
