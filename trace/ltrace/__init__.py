"""Streaming parser for ltrace 0.7.3 logs of allocator calls: its interface, parse, parse_file and EventStream.

    events = parse_file("app.log")     # or parse(lines, "name"); extra_events=True adds thread starts and exits
    for ev in events:                  # AllocEvent, in effect order (see scenc.trace.events)
        ...
    events.report                      # ParseReport: counters, anomalies, exits, crash flags; final once iterated

Memory follows the calls pending at once, the threads and a bounded number of anomaly examples, never
the log's length. The parser is trace/ltrace/parser.py, with lex.py, pending.py, threads.py, calls.py and
report.py. The logs it reads and what it makes of ltrace's quirks: docs/capture.md, "The ltrace logs scenc
reads"; how the parser is built: docs/architecture.md, "Inside the subsystems".
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

    ``extra_events``: also thread starts and exits (docs/capture.md, "scenc convert: exact replay", says where).

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
