"""Streaming parser for ltrace 0.7.3 logs of allocator calls.

    events = parse_file("app.log")             # or parse(lines, "name")
    for ev in events:              # AllocEvent, in effect order (see scenc.trace.events)
        ...
    events.report                  # ParseReport: counters, anomalies, exits, crash flags

Memory grows with the number of calls that are ``<unfinished ...>`` at the same
time (a few per thread), the number of threads, and a bounded number of
anomaly examples -- never with the length of the log.  The report is final once
the iteration is exhausted (or the generator is closed).

What ltrace 0.7.3 writes, and what the parser does with it
-----------------------------------------------------------
Line prefix: ``TID `` with ``-o FILE -f``, ``[pid N] `` on stderr with ``-f``,
nothing without ``-f`` (tid 0).  Then optionally a timestamp (``-t`` HH:MM:SS,
``-tt`` HH:MM:SS.uuuuuu, ``-ttt`` epoch.uuuuuu, ``-r`` relative seconds),
``[0xADDR]`` (``-i``) and indentation (``-n``).  The body is one of::

    prog->malloc(16) = 0x55d0c0a0b2a0 <0.000123>     -e: PLT breakpoint, CALLER->NAME
    malloc@libc.so.6(16) = 0x55d0c0a0b2a0            -x: symbol breakpoint, NAME@LIB
    prog->free(0x55d0 <unfinished ...>               another thread interrupted the call ...
    <... free resumed> ) = <void> <0.000234>          ... which completes here (same thread)
    prog->free(0x55d0 <no return ...>                 ltrace gave up on the return
    --- SIGSEGV (Segmentation fault) ---              signal delivered to that thread
    +++ exited (status 0) +++ / +++ killed by SIGSEGV +++
    unexpected breakpoint at 0x55df81dd0408           ltrace lost a breakpoint (crash ahead)

Handled quirks (each counted as an anomaly, see ``events.ANOMALY_KINDS``):

* ``<unfinished ...>``/``<... NAME resumed>`` are paired per thread (innermost
  pending call of that name); a resume without a start and a start never resumed
  are reported, never fatal.
* Nested calls: with ``-x`` (and with ``-e`` through libstdc++'s PLT) an
  allocator call made *from inside* another traced allocator call of the same
  thread is printed inside the outer ``<unfinished ...>`` call: realloc(p, 0)
  -> free(p), realloc(NULL, n) -> malloc(n), posix_memalign(small align) ->
  malloc, operator new -> malloc, operator delete -> free.  The inner call is
  dropped (nested-inner-call) when it matches the outer one (same pointer, or
  same size up to the alignment); posix_memalign takes its result pointer from
  such an inner malloc, the only place ltrace shows it.  A non-matching call
  while another is pending is counted normally, so a lost ``resumed`` line
  cannot swallow the rest of a thread.
* ``libc.so.6->realloc``/``->calloc`` lines (``-e``) are libc's own IRELATIVE
  PLT slots mislabelled by ltrace (``= 0x6`` results): skipped.
* ``memalign@libc.so.6`` under ``-x`` may be aligned_alloc (alias in glibc <
  2.38): kind 'memalign', noted once per call.
* Failed allocations (``= 0``/``nil``), ``free(0)``, signals, exits and kills,
  a truncated last line (no newline: ignored), garbage lines.
* Input that is not an ltrace log at all raises :class:`TraceFormatError`
  (no recognisable line among the first ``sniff_lines`` non-empty lines).

Thread lifetimes (``extra_events=True``, for the exact replay and the
statistics): events of kinds ``thread_start`` (``size``: the creating thread)
and ``thread_exit``, as the preload tracer's reader gives them
(trace/tracerlog.py EXTRA_KINDS). A thread ends at its ``+++ exited`` (or
``killed``) line. A thread starts where its creator made it when the log shows
that: a ``clone``/``clone3``/``fork`` whose return value is the new thread's id
(``-S`` prints ``SYS_435(...) = TID``; a traced ``fork`` returns the pid), or a
traced ``pthread_create`` (the next new thread is its creator's). Otherwise it
starts at its own first line, made by the thread that was active just before
(the last thread to print a line that has not exited): a plain ``-e`` log does
not show who created a thread, and any thread alive then may stand for it.
The log's first thread starts with the replay and has no ``thread_start``.

Modules: this one is the interface (parse, parse_file, EventStream); trace/ltrace/parser.py reads the lines
(_Parser) with trace/ltrace/lex.py (the regexes and the fast path), trace/ltrace/pending.py (unfinished and resumed
calls), trace/ltrace/threads.py (thread starts and exits), trace/ltrace/calls.py (the allocator functions and their
arguments) and trace/ltrace/report.py (ParseReport, TraceFormatError). Each imports only modules after it in
that list.
"""
from __future__ import annotations

from itertools import chain
from typing import Iterable, Iterator, Optional

from ..events import AllocEvent, EventSource, pack_events
# Re-exported: FUNCTIONS with the layouts its values name, the parser (tests switch its fast path) and _leader.
from .calls import (A_ALIGN_SIZE, A_NMEMB_SIZE, A_OLD, A_OLD_ALIGN, A_OLD_NMEMB_SIZE, A_OLD_SIZE,
                    A_OLD_SIZE_ALIGN, A_SIZE, A_SIZE_ALIGN, A_X_ALIGN_SIZE, FUNCTIONS)
from .parser import _Parser
from .report import ParseReport, TraceFormatError
from .threads import _leader

__all__ = ["parse", "parse_file", "ParseReport", "TraceFormatError", "FUNCTIONS", "EventStream"]


class EventStream(EventSource):
    """Iterable of AllocEvents with the ParseReport alongside (``stream.report``).

    The parser hands out events in small chunks internally; iterating the stream
    yields them one by one (lazily: at most a few hundred are buffered).
    """

    leader: Optional[int] = None   # parse_file(extra_events=True): the process's main thread, if the log shows it

    def __init__(self, chunks: Iterator[list], report: ParseReport, parser=None):
        self._generator = chunks       # the parser's run(): close() stops it (first() rewraps _chunks)
        self._chunks = chunks
        self._events = chain.from_iterable(chunks)
        self._owner = parser           # the _Parser making the chunks (packed() asks it to pack)
        self.report = report

    def batches(self) -> Iterator[list]:
        """The events in the lists the parser hands them out in (cheaper than one by one, for the converter's
        feed). Take either the batches or the events, from the start (first() aside), not both."""
        return self._chunks

    def packed(self, pack, codes: dict) -> Iterator[bytes]:
        """The events as the converter reads them (scenc.trace.replay's EVENT): ``pack(line, size, nmemb,
        align, old_ptr, result_ptr, tid, codes[kind], failed)`` of each, None as 0, joined per batch. From the
        next batch on the parser packs the calls itself (no AllocEvent made: a tenth of the conversion's time).
        Take these, the batches or the events, from the start (first() aside), not two of them."""
        if self._owner is not None:
            self._owner.packer = (pack, codes)
        for batch in self._chunks:
            try:
                yield b"".join(batch)
            except TypeError:          # AllocEvents: a batch made before, thread starts and exits
                yield pack_events(batch, pack, codes)

    def first(self) -> Optional[AllocEvent]:
        """The first event, left in the stream (None when there is none). Call it before iterating."""
        for chunk in self._chunks:
            if chunk:
                self._chunks = chain((chunk,), self._chunks)
                self._events = chain.from_iterable(self._chunks)
                return chunk[0]
        return None

    def close(self):
        """Stop parsing early (closes the file of parse_file)."""
        self._generator.close()


def parse(lines: Iterable, filename: str = "<input>", report: Optional[ParseReport] = None,
          sniff_lines: int = 20, newlines: Optional[bool] = None, extra_events: bool = False,
          times: bool = True) -> EventStream:
    """Parse ltrace output lines (str, or bytes decoded as UTF-8; or one string) lazily into AllocEvents.

    ``newlines``: True when every complete line ends with a newline (lines read from a
    file), so that a last line without one is a cut-off line (truncated-line); False
    for lines without newlines; None guesses from the first line.

    ``extra_events``: also thread starts and exits (see the module doc).

    ``times``: False leaves the timestamps unread (every ``time_s`` None, ``has_timestamps`` False): the
    exact replay has no use for them, and reading them is several percent of the parse. Everything else is
    the same, line for line (durations are still read: reading them is also how a line is checked).

    Raises TraceFormatError during iteration if none of the first ``sniff_lines``
    non-empty lines looks like ltrace output.  Nothing else raises.
    """
    whole_lines = isinstance(lines, (str, bytes))
    if whole_lines:                              # a whole log in one string
        lines = lines.splitlines(keepends=True)
    if report is None:
        report = ParseReport(filename)
    parser = _Parser(filename, report, sniff_lines, extra_events, times=times)
    return EventStream(parser.run(lines, newlines=newlines, whole_lines=whole_lines), report, parser)


def parse_file(path, report: Optional[ParseReport] = None, sniff_lines: int = 20,
               extra_events: bool = False, times: bool = True) -> EventStream:
    """parse() on a file (closed when the iteration ends); bytes that are not UTF-8 are replaced."""
    path = str(path)
    if report is None:
        report = ParseReport(path)
    leader = _leader(path) if extra_events else None
    f = open(path, encoding="utf-8", errors="replace", newline="")
    parser = _Parser(path, report, sniff_lines, extra_events, leader, times)
    stream = EventStream(parser.run(f, close=f.close, newlines=True, whole_lines=True), report, parser)
    stream.leader = leader
    return stream
