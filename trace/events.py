"""Plain-data event model for captured allocator traces.

An :class:`AllocEvent` is one allocator call the traced program made, as a
``NamedTuple`` (immutable, cheap to create: the ltrace parser builds hundreds of
thousands per second; unpack it like a tuple in hot loops).  An
:class:`Anomaly` is something odd the parser or the statistics noticed at a
given line.  Both are plain data: no behaviour beyond a few derived
properties, so that the scenario converter can build on them.

Event order and line numbers
----------------------------
Events come out in *effect order*: an allocation (malloc, calloc, realloc,
memalign, operator new ...) when its result is known, i.e. on the line that
prints its return value (the ``<... malloc resumed>`` line of an unfinished
call); a free (free, operator delete) on the line where it starts, because the
block may be reused by another thread before ltrace prints the free's return.
``line`` is that effect line, ``start_line`` the line where the call (and its
arguments) appeared; they differ only for ``<unfinished ...>`` calls.

Sizes
-----
``size`` is the byte count argument as the program passed it: the element size
for ``calloc``/``reallocarray`` (``nmemb`` is the element count), the size of
sized ``operator delete``, ``None`` for ``free``.  ``nbytes`` is
``size * nmemb``, the bytes requested.
"""
from __future__ import annotations

from typing import Iterator, NamedTuple, Optional

#: Kinds that return a new block.
ALLOC_KINDS = frozenset({
    "malloc", "calloc", "posix_memalign", "aligned_alloc", "memalign", "valloc",
    "pvalloc", "operator_new", "operator_new_array",
})
#: Kinds that resize a block (and may move it): ``old_ptr`` -> ``result_ptr``.
REALLOC_KINDS = frozenset({"realloc", "reallocarray"})
#: Kinds that release a block (``old_ptr``).
FREE_KINDS = frozenset({"free", "operator_delete", "operator_delete_array"})
#: Every kind an :class:`AllocEvent` can have.
KINDS = ALLOC_KINDS | REALLOC_KINDS | FREE_KINDS


class AllocEvent(NamedTuple):
    """One allocator call.

    line        1-based line of the log where the call took effect (see module doc)
    tid         thread id (0 when the log has no thread prefix: ltrace without -f)
    time_s      seconds since the first timestamp of the log, at ``line``; None without -t/-tt/-ttt/-r
    kind        one of :data:`KINDS`, e.g. 'malloc', 'realloc', 'operator_new'
    size        byte count argument (element size for calloc/reallocarray), None for free
    nmemb       element count (calloc, reallocarray); 1 otherwise
    align       alignment argument (posix_memalign, aligned_alloc, memalign, aligned new/delete)
    old_ptr     block passed in (realloc, free, operator delete); None otherwise; 0 is NULL
    result_ptr  block returned (None for frees, and when ltrace could not show it:
                posix_memalign writes it to memory ltrace does not print)
    failed      True when an allocation returned NULL (or posix_memalign an error code)
                although memory was asked for; realloc(p, 0) returning NULL is a free, not a failure
    start_line  line where the call started (== line unless it was ``<unfinished ...>``)
    duration_s  time spent in the call as printed by ltrace -T (None without -T)
    cpu_ns      the calling thread's CPU clock (CLOCK_THREAD_CPUTIME_ID, ns) when the call took effect,
                interpolated between its tracer chunk's two readings: tracer logs of version 6; else None
    """

    line: int
    tid: int
    time_s: Optional[float]
    kind: str
    size: Optional[int]
    nmemb: int
    align: Optional[int]
    old_ptr: Optional[int]
    result_ptr: Optional[int]
    failed: bool
    start_line: int
    duration_s: Optional[float]
    cpu_ns: Optional[int] = None

    @property
    def nbytes(self) -> Optional[int]:
        """Bytes requested (size * nmemb), None when the call has no size."""
        return None if self.size is None else self.size * self.nmemb

    @property
    def is_alloc(self) -> bool:
        return self.kind in ALLOC_KINDS

    @property
    def is_realloc(self) -> bool:
        return self.kind in REALLOC_KINDS

    @property
    def is_free(self) -> bool:
        return self.kind in FREE_KINDS


class Anomaly(NamedTuple):
    """Something unusual at ``line`` (1-based) of a log; ``kind`` is a key of :data:`ANOMALY_KINDS`."""

    line: int
    kind: str
    message: str


INFO, WARNING, ERROR = "info", "warning", "error"

#: kind -> (severity, what it means).  ``info``: expected ltrace behaviour that was
#: handled; ``warning``: information is missing or was guessed; ``error``: the
#: capture is broken (crash, lost breakpoints).
ANOMALY_KINDS = {
    "nested-inner-call": (INFO, "an allocator call made from inside another traced allocator call of the "
                                "same thread (ltrace -x: realloc(p, 0) -> free, realloc(NULL, n) -> malloc, "
                                "operator new -> malloc); dropped, the outer call is counted"),
    "libc-internal-plt": (INFO, "a 'libc.so.6->NAME' line: ltrace 0.7.3 mislabels libc's own PLT entries "
                                "(IRELATIVE string functions) as realloc/calloc; not an allocator call, skipped"),
    "memalign-may-be-aligned-alloc": (INFO, "with -x, glibc < 2.38 aliases aligned_alloc to memalign and "
                                            "ltrace prints both as memalign; same arguments and semantics"),
    "failed-allocation": (INFO, "an allocation returned NULL (or posix_memalign an error code)"),
    "free-null": (INFO, "free(NULL) / delete of a null pointer: a no-op call, kept as an event"),
    "signal": (INFO, "the tracee received a signal ('--- SIGxxx ---')"),
    "free-unknown-pointer": (WARNING, "a free/realloc of a pointer never seen allocated (allocated before the "
                                      "capture started, inside libc under -e, by posix_memalign whose result "
                                      "ltrace cannot show, or freed twice)"),
    "alloc-returned-live-pointer": (WARNING, "an allocation returned a block that was still live in the trace: "
                                             "its free was not seen"),
    "posix-memalign-result-unknown": (WARNING, "posix_memalign succeeded but ltrace does not print the pointer it "
                                               "stored; its free is matched by alignment when possible"),
    "unfinished-never-resumed": (WARNING, "an '<unfinished ...>' (or '<no return ...>') call whose "
                                          "'<... resumed>' line never came"),
    "resumed-without-start": (WARNING, "a '<... NAME resumed>' line without a matching unfinished call on that "
                                       "thread; the call is lost"),
    "thread-only-in-exit-line": (WARNING, "a thread that appears only in its '+++ exited/killed' line: it made no "
                                          "traced call, or ltrace lost them"),
    "unparsable-line": (WARNING, "a line that is not ltrace output (program output mixed into the log?) "
                                 "or that has unreadable arguments"),
    "truncated-line": (WARNING, "the last line was cut off (no newline): ltrace or the machine died while "
                                "writing; the line is ignored"),
    "wl-slot-refilled": (WARNING, "a workload's allocation into a slot still holding a block: trace_run frees the "
                                  "old block first (the trace missed its free), and so does the reading"),
    "wl-free-of-empty-slot": (WARNING, "a workload's FREE of a slot holding no block: trace_run calls free(NULL)"),
    "unexpected-breakpoint": (ERROR, "ltrace lost track of a breakpoint ('unexpected breakpoint at ...'): "
                                     "it is about to crash the tracee"),
    "tracee-crashed": (ERROR, "the tracee was killed by a signal ('+++ killed by SIGxxx +++'); under ltrace "
                              "this is usually ltrace's fault, not the program's"),
}


def pack_events(batch, pack, codes: dict) -> bytes:
    """A list of AllocEvents as the exact replay's converter reads them (scenc.trace.replay's EVENT):
    ``pack(line, size, nmemb, align, old_ptr, result_ptr, tid, codes[kind], failed)`` of each, None as 0,
    joined; entries already packed (bytes) as they are. KeyError: a kind without a code."""
    return b"".join([e if type(e) is bytes else
                     pack(e.line, e.size or 0, e.nmemb, e.align or 0, e.old_ptr or 0, e.result_ptr or 0, e.tid or 0,
                          codes[e.kind], e.failed) for e in batch])


PAGE = 4096


def page_round(n: int) -> int:
    """n bytes in whole pages (a mapping's length as the kernel takes it)."""
    return (n + PAGE - 1) // PAGE * PAGE


# The first bytes of a preload tracer log (runtime/tracer/tracer.c): how a capture's reader is chosen.
PRELOAD_MAGIC = b"SCNTRACE"


class EventSource:
    """What both capture readers hand out: an iterator of AllocEvents (over ``self._events``)
    with the parse report alongside."""

    _events: Iterator[AllocEvent]

    def __iter__(self):
        return self._events

    def __next__(self):
        return next(self._events)

    def close(self):
        """Stop reading early."""
        self._events.close()
