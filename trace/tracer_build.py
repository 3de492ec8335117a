"""Building scenc's trace helpers into the scenc cache, once per source, compiler and flags: the LD_PRELOAD
tracer (runtime/tracer.c), the converter (runtime/convert.c) and the tracer log's decoder library that
trace/preload_log.py loads (runtime/tracelog.c)."""

from pathlib import Path
from typing import Sequence

from ..compiler.build import RUNTIME, WARNINGS, helper_build

TRACER_SOURCE = RUNTIME / "tracer.c"
TRACER_FLAGS = ("-O2", "-g", "-fPIC", "-shared", "-fvisibility=hidden", "-fexceptions", "-ftls-model=initial-exec",
                "-fno-builtin", "-pthread", "-std=gnu11")
# Every header tracer.c includes: its parts (one translation unit) and the ones it shares. A cached
# tracer is rebuilt when any of them changes.
TRACER_PARTS = ("tracer_os.h", "tracer_next.h", "tracer_file.h", "tracer_buffer.h", "tracer_sample.h",
                "tracer_record.h", "tracer_alloc.h", "tracer_cxx.h", "tracer_thread.h", "tracer_mmap.h",
                "tracer_exit.h")
TRACER_HEADERS = tuple(RUNTIME / name for name in ("clock.h", "tracelog.h", *TRACER_PARTS))
CONVERTER_SOURCE = RUNTIME / "convert.c"
CONVERTER_FLAGS = ("-O2", "-g", "-std=gnu11")


def tracer_library(cc: str = "gcc", extra_flags: Sequence[str] = ()) -> Path:
    """runtime/tracer.c compiled with the project's compiler into the scenc cache (once per source and flags)."""
    return helper_build(cc, TRACER_SOURCE, "libscntrace.so", (*TRACER_FLAGS, *WARNINGS, *extra_flags), ("-ldl",),
                        headers=TRACER_HEADERS,
                        what="the allocation tracer (runtime/tracer.c)")


def converter_program(cc: str = "gcc", extra_flags: Sequence[str] = ()) -> Path:
    """runtime/convert.c (with the log reader it includes) compiled into the scenc cache."""
    return helper_build(cc, CONVERTER_SOURCE, "scenc-convert", (*CONVERTER_FLAGS, *WARNINGS, *extra_flags),
                        headers=(RUNTIME / "trace_read.h", RUNTIME / "tracelog.h", RUNTIME / "tracelog.c",
                                 RUNTIME / "opsfmt.h"),
                        what="the trace converter (runtime/convert.c)")


TRACELOG_SOURCE = RUNTIME / "tracelog.c"


def tracelog_library(cc: str = "gcc") -> Path:
    """runtime/tracelog.c (tracelog.h's decoder, for trace/preload_log.py) compiled into the scenc cache."""
    return helper_build(cc, TRACELOG_SOURCE, "libscntracelog.so",
                        ("-O2", "-g", "-fPIC", "-shared", "-fvisibility=hidden", "-std=gnu11", *WARNINGS), (),
                        headers=(RUNTIME / "tracelog.h",), what="the tracer log's decoder (runtime/tracelog.c)")
