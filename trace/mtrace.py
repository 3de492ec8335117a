"""glibc's mtrace logs, read as a stream of AllocEvents.

    log = open_mtrace("app.mtrace")
    for ev in log: ...                  # AllocEvents in the log's order, every one in thread 0, no times
    log.report, log.losses()

The trace every C programmer can make without a tool: the program calls `mtrace()` (from <mcheck.h>) and
runs with `MALLOC_TRACE=FILE`; since glibc 2.34 the tracing lives in libc_malloc_debug.so, which must be
preloaded (`LD_PRELOAD=libc_malloc_debug.so.0`; without it `mtrace()` does nothing). What glibc writes
(malloc/mtrace-impl.c), and so what is read here:

* ``= Start`` when `mtrace()` opens the file, ``= End`` when `muntrace()` closes it (a program that never
  calls it has no ``= End``: its log is complete all the same).
* One line per call, each after an optional ``@ CALLER `` (``@ ./prog:[0x1189] ``, ``@ /lib/...:(func+0x1f)
  [0x...] ``, ``@ [0x...] ``): ``+ PTR SIZE`` an allocation (malloc, calloc with its total size, memalign,
  valloc, pvalloc, aligned_alloc, posix_memalign and realloc(NULL, n) all print the same line, so all are
  read as malloc; ``(nil)`` is a failed one), ``- PTR`` a free (free(NULL) is not logged) or a realloc(p, 0)
  that freed p, ``! PTR SIZE`` a failed realloc, and ``< OLD`` followed by ``> NEW SIZE`` a realloc.
  Pointers are printed with %p, sizes with %#lx.
* No thread and no time: the lines of all threads are interleaved whole (each call's lines are written
  under the stream's lock), so cross-thread frees cannot be told from others. Every event has tid 0 and
  ``time_s`` None.
"""
from __future__ import annotations

import re
from itertools import chain
from typing import Iterator, List, Optional

from .events import AllocEvent, EventSource
from .ltrace.report import ParseReport, TraceFormatError

__all__ = ["looks_like_mtrace", "open_mtrace", "MtraceLog"]

START, END = "= Start", "= End"
# The call at the end of a line, after `@ CALLER ` (which ends in "] " when present).
_CALL = re.compile(r"([-+!<>]) (0x[0-9a-fA-F]+|\(nil\))(?: (0x[0-9a-fA-F]+|0))?$")
_BATCH = 4096


def looks_like_mtrace(path) -> bool:
    """The file's first line is ``= Start``, or an mtrace call line."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    first = head.split(b"\n", 1)[0].decode("ascii", "replace").rstrip("\r")
    return first == START or (first.startswith(("@ ", "+ ", "- ")) and _call(first) is not None)


def _call(line: str):
    """(op, pointer, size or None) of a call line, or None."""
    if line.startswith("@ "):
        cut = line.rfind("] ")
        if cut < 0:
            return None
        line = line[cut + 2:]
    m = _CALL.match(line)
    if not m:
        return None
    op, ptr, size = m.groups()
    return op, 0 if ptr == "(nil)" else int(ptr, 16), None if size is None else int(size, 16)


class MtraceReport(ParseReport):
    """A ParseReport for an mtrace log: no exit lines, no threads; incomplete only when its last line is cut."""

    def __init__(self, filename: str):
        super().__init__(filename)
        self.starts = 0          # "= Start" lines (more than one: mtrace() again after muntrace())
        self.ended = False       # "= End": muntrace() was called

    @property
    def incomplete(self) -> bool:
        return self.truncated

    def to_dict(self) -> dict:
        d = super().to_dict()
        d.update({"starts": self.starts, "ended": self.ended, "incomplete": self.incomplete})
        return d


class MtraceLog(EventSource):
    """The events of an mtrace log, in its order (module doc)."""

    master_tid = 0           # one thread as far as the log shows: the replay runs it on its main thread

    def __init__(self, path):
        self.path = str(path)
        self.report = MtraceReport(self.path)
        self._chunks = self._read()
        self._events = chain.from_iterable(self._chunks)

    def batches(self) -> Iterator[list]:
        return self._chunks

    def close(self):
        self._chunks.close()

    def losses(self) -> List[str]:
        if self.report.truncated:
            return ["the last line of the mtrace log is cut off (the program was killed before glibc flushed "
                    "the log: up to 512 bytes of calls are lost); it is ignored"]
        return []

    def _read(self) -> Iterator[list]:
        rep, out = self.report, []
        add = rep.add
        pending: Optional[tuple] = None       # a realloc's "< OLD" line, waiting for its "> NEW SIZE"
        lineno = 0
        with open(self.path, encoding="ascii", errors="replace", newline="") as f:
            for raw in f:
                lineno += 1
                if not raw.endswith("\n"):
                    rep.truncated = True
                    break
                line = raw.rstrip("\r\n")
                if not line:
                    rep.blank_lines += 1
                    continue
                if line == START:
                    rep.starts += 1
                    continue
                if line == END:
                    rep.ended = True
                    continue
                call = _call(line)
                if call is None:
                    if lineno == 1:
                        raise TraceFormatError(self.path, 1, 1, f"not an mtrace log: {line[:60]!r}")
                    add("unparsable-line", lineno, line)
                    continue
                op, ptr, size = call
                if pending is not None and op != ">":
                    add("unparsable-line", pending[0], "a realloc's '<' line without its '>' line")
                    pending = None
                if op == "+":
                    failed = not ptr and bool(size)
                    if failed:
                        add("failed-allocation", lineno, line)
                    out.append(AllocEvent(lineno, 0, None, "malloc", size, 1, None, None, ptr, failed, lineno, None))
                elif op == "-":
                    out.append(AllocEvent(lineno, 0, None, "free", None, 1, None, ptr, None, False, lineno, None))
                elif op == "!":
                    add("failed-allocation", lineno, line)
                    out.append(AllocEvent(lineno, 0, None, "realloc", size, 1, None, ptr, 0, True, lineno, None))
                elif op == "<":
                    pending = (lineno, ptr)
                    continue
                elif pending is None:
                    add("unparsable-line", lineno, "a realloc's '>' line without its '<' line")
                    continue
                else:
                    start, old = pending
                    pending = None
                    out.append(AllocEvent(lineno, 0, None, "realloc", size, 1, None, old, ptr, False, start, None))
                if len(out) >= _BATCH:
                    rep.events += len(out)
                    yield out
                    out = []
        if pending is not None:
            add("unparsable-line", pending[0], "a realloc's '<' line without its '>' line")
        rep.lines = lineno
        rep.events += len(out)
        rep.threads = {0}
        if out:
            yield out


def open_mtrace(path) -> MtraceLog:
    return MtraceLog(path)
