"""Building scenc's trace helpers into the scenc cache, once per source, compiler and flags: the LD_PRELOAD
tracer (runtime/tracer.c) and the converter (runtime/convert.c)."""

from pathlib import Path
from typing import Sequence

from ..compiler.build import RUNTIME, WARNINGS, helper_build

TRACER_SOURCE = RUNTIME / "tracer.c"
TRACER_FLAGS = ("-O2", "-g", "-fPIC", "-shared", "-fvisibility=hidden", "-fexceptions", "-ftls-model=initial-exec",
                "-fno-builtin", "-pthread", "-std=gnu11")
CONVERTER_SOURCE = RUNTIME / "convert.c"
CONVERTER_FLAGS = ("-O2", "-g", "-std=gnu11")


def tracer_library(cc: str = "gcc", extra_flags: Sequence[str] = ()) -> Path:
    """runtime/tracer.c compiled with the project's compiler into the scenc cache (once per source and flags)."""
    return helper_build(cc, TRACER_SOURCE, "libscntrace.so", (*TRACER_FLAGS, *WARNINGS, *extra_flags), ("-ldl",),
                        headers=(RUNTIME / "clock.h",),  # the one header tracer.c includes
                        what="the allocation tracer (runtime/tracer.c)")


def converter_program(cc: str = "gcc", extra_flags: Sequence[str] = ()) -> Path:
    """runtime/convert.c (with the log reader it includes) compiled into the scenc cache."""
    return helper_build(cc, CONVERTER_SOURCE, "scenc-convert", (*CONVERTER_FLAGS, *WARNINGS, *extra_flags),
                        headers=(RUNTIME / "trace_read.h",),
                        what="the trace converter (runtime/convert.c)")
