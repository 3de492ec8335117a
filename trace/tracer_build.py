"""Building the LD_PRELOAD tracer (runtime/tracer.c) into the scenc cache, once per source, compiler and flags."""

import hashlib
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

from ..compiler.build import (RUNTIME, WARNINGS, BuildError, _compiler_identity, _publish, _run_cc, cache_dir,
                              find_compiler)

TRACER_SOURCE = RUNTIME / "tracer.c"
TRACER_FLAGS = ("-O2", "-g", "-fPIC", "-shared", "-fvisibility=hidden", "-fexceptions", "-ftls-model=initial-exec",
                "-fno-builtin", "-pthread", "-std=gnu11")


def tracer_library(cc: str = "gcc", extra_flags: Sequence[str] = ()) -> Path:
    """runtime/tracer.c compiled with the project's compiler into the scenc cache (once per source and flags)."""
    flags = (*TRACER_FLAGS, *WARNINGS, *extra_flags)
    h = hashlib.sha256(_compiler_identity(cc).encode())
    h.update(" ".join(flags).encode())
    h.update(TRACER_SOURCE.read_bytes())
    h.update((RUNTIME / "clock.h").read_bytes())  # the one header tracer.c includes
    final = cache_dir() / "tracer" / h.hexdigest()[:24]
    lib = final / "libscntrace.so"
    if lib.exists():
        return lib
    cache_dir().mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="tracer-", dir=cache_dir()))
    try:
        _run_cc([find_compiler(cc), *flags, "-o", str(tmp / lib.name), str(TRACER_SOURCE), "-ldl"],
                "compiling the allocation tracer (runtime/tracer.c)")
    except BuildError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _publish(tmp, final)
    return lib
