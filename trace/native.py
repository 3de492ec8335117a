"""Building scenc's trace helpers into the scenc cache, once per source, compiler and flags: the LD_PRELOAD
tracer (runtime/tracer/), the converter (runtime/tools/convert.c), the model's collector
(runtime/tools/modelcollect.c), trace-stats' pass (runtime/tools/tracestats.c) and the tracer log's decoder library that
trace/tracerlog.py loads (runtime/tools/tracelog.c)."""

import json
import signal
import subprocess
from pathlib import Path
from typing import Sequence, Tuple

from ..compiler.build import RUNTIME, TOOLS, TRACER, WARNINGS, helper_build
from .ltrace import TraceFormatError

#: a tool ended by one of these (by its handler, or before it was set) was stopped, not broken
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

TRACER_SOURCE = TRACER / "tracer.c"
TRACER_FLAGS = ("-O2", "-g", "-fPIC", "-shared", "-fvisibility=hidden", "-fexceptions", "-ftls-model=initial-exec",
                "-fno-builtin", "-pthread", "-std=gnu11")
# Every header tracer.c includes: its parts (one translation unit) and the ones it shares. A cached
# tracer is rebuilt when any of them changes.
TRACER_PARTS = ("tracer_os.h", "tracer_next.h", "tracer_file.h", "tracer_order.h", "tracer_buffer.h", "tracer_sample.h",
                "tracer_record.h", "tracer_alloc.h", "tracer_cxx.h", "tracer_thread.h", "tracer_mmap.h",
                "tracer_exit.h", "tracer_window.h")
TRACELOG_HEADER = TRACER / "tracelog.h"
TRACER_HEADERS = (RUNTIME / "clock.h", TRACELOG_HEADER, *(TRACER / name for name in TRACER_PARTS))
CONVERTER_SOURCE = TOOLS / "convert.c"
CONVERTER_FLAGS = ("-O2", "-g", "-std=gnu11")
TRACELOG_SOURCE = TOOLS / "tracelog.c"


def tracer_library(cc: str = "gcc", extra_flags: Sequence[str] = ()) -> Path:
    """runtime/tracer/tracer.c compiled with the project's compiler into the scenc cache (once per source and flags)."""
    return helper_build(cc, TRACER_SOURCE, "libscntrace.so", (*TRACER_FLAGS, *WARNINGS, *extra_flags), ("-ldl",),
                        headers=TRACER_HEADERS,
                        what="the allocation tracer (runtime/tracer/tracer.c)")


def converter_program(cc: str = "gcc", extra_flags: Sequence[str] = ()) -> Path:
    """runtime/tools/convert.c (with the log reader it includes) compiled into the scenc cache."""
    return helper_build(cc, CONVERTER_SOURCE, "scenc-convert", (*CONVERTER_FLAGS, *WARNINGS, *extra_flags),
                        headers=(TOOLS / "trace_read.h", TRACELOG_HEADER, TRACELOG_SOURCE, RUNTIME / "opsfmt.h"),
                        what="the trace converter (runtime/tools/convert.c)")


MODEL_COLLECTOR_SOURCE = TOOLS / "modelcollect.c"


def model_collector_program(cc: str = "gcc") -> Path:
    """runtime/tools/modelcollect.c (the model's collector for a tracer log, with the log reader it includes)
    compiled into the scenc cache."""
    return helper_build(cc, MODEL_COLLECTOR_SOURCE, "scenc-modelcollect", (*CONVERTER_FLAGS, *WARNINGS),
                        headers=(TOOLS / "trace_read.h", TRACELOG_HEADER, TRACELOG_SOURCE),
                        what="the model's collector (runtime/tools/modelcollect.c)")


TRACE_STATS_SOURCE = TOOLS / "tracestats.c"
# Lifetimes in microseconds are rounded from float seconds as profile.py rounds them: no fused multiply-add.
TRACE_STATS_FLAGS = (*CONVERTER_FLAGS, "-ffp-contract=off")


def trace_stats_program(cc: str = "gcc") -> Path:
    """runtime/tools/tracestats.c (trace-stats' pass over a tracer log, with the log reader it includes) compiled
    into the scenc cache."""
    return helper_build(cc, TRACE_STATS_SOURCE, "scenc-tracestats", (*TRACE_STATS_FLAGS, *WARNINGS),
                        headers=(TOOLS / "trace_read.h", TRACELOG_HEADER, TRACELOG_SOURCE),
                        what="trace-stats' pass (runtime/tools/tracestats.c)")


def tracelog_library(cc: str = "gcc") -> Path:
    """runtime/tools/tracelog.c (tracelog.h's decoder, for trace/tracerlog.py) compiled into the scenc cache."""
    return helper_build(cc, TRACELOG_SOURCE, "libscntracelog.so",
                        ("-O2", "-g", "-fPIC", "-shared", "-fvisibility=hidden", "-std=gnu11", *WARNINGS), (),
                        headers=(TRACELOG_HEADER,), what="the tracer log's decoder (runtime/tools/tracelog.c)")


def run_log_tool(cmd: Sequence[str], log) -> Tuple[int, dict]:
    """Runs a C tool that reads the tracer log `log` and prints one JSON object (the model's collector,
    trace-stats' pass): its exit status and the object ({} for none: a crash before it printed, a line cut
    short). A stop signal is KeyboardInterrupt; the log's own fault (the object's "error") a TraceFormatError
    at its record. What else a failure means is the caller's to say."""
    proc = subprocess.run(list(cmd), stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    if -proc.returncode in STOP_SIGNALS:
        raise KeyboardInterrupt
    try:
        data = json.loads(proc.stdout or b"{}")
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    if "error" in data:          # the log is not one, or is damaged: the reader's sentence, at its record
        raise TraceFormatError(str(log), data.get("record") or 1, 1, data["error"])
    return proc.returncode, data
