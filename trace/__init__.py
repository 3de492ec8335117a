"""Captured allocator traces: ltrace or tracer logs -> AllocEvents -> statistics and scenarios.

scenc.trace.events            AllocEvent, Anomaly, ANOMALY_KINDS
scenc.trace.ltrace            parse(lines, filename), parse_file(path), ParseReport, TraceFormatError
scenc.trace.tracerlog         parse_preload_log(path): the LD_PRELOAD tracer's log
scenc.trace.source            TraceSource(path): a capture of either kind
scenc.trace.profile           TraceStats, trace_stats_file(path), format_trace_stats(stats)
scenc.trace.capture.ltrace    capture(argv, out_path, ...) -> CaptureResult
scenc.trace.capture.preload   capture_preload(argv, out_path, ...)
scenc.trace.replay            write_replay(events, scn_path, source) -> ReplayReport (exact replay, ops file)
scenc.trace.model             write_model(events, scn_path, source) -> ModelResult, measure_peak(result)
The commands are commands/capture.py, commands/tracestats.py and commands/convert.py.
"""
