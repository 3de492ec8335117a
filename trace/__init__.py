"""Captured allocator traces: ltrace or tracer logs -> AllocEvents -> statistics and scenarios.

scenc.trace.events   AllocEvent, Anomaly, ANOMALY_KINDS
scenc.trace.ltrace   parse(lines, filename), parse_file(path), ParseReport, TraceFormatError
scenc.trace.stats    TraceStats, trace_stats_file(path), format_trace_stats(stats)
scenc.trace.capture  capture(argv, out_path, ...) -> CaptureResult
scenc.trace.preload  capture_preload(argv, out_path, ...), parse_preload_log(path)
scenc.trace.replay   write_replay(events, scn_path, source) -> ReplayReport (exact replay, ops file)
scenc.trace.model    write_model(events, scn_path, source) -> ModelResult, measure_peak(result)
scenc.trace.cli      `scenc capture`, `scenc trace-stats`, `scenc convert [--model]`
"""
