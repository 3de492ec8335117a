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
(trace/preload_log.py EXTRA_KINDS). A thread ends at its ``+++ exited`` (or
``killed``) line. A thread starts where its creator made it when the log shows
that: a ``clone``/``clone3``/``fork`` whose return value is the new thread's id
(``-S`` prints ``SYS_435(...) = TID``; a traced ``fork`` returns the pid), or a
traced ``pthread_create`` (the next new thread is its creator's). Otherwise it
starts at its own first line, made by the thread that was active just before
(the last thread to print a line that has not exited): a plain ``-e`` log does
not show who created a thread, and any thread alive then may stand for it.
The log's first thread starts with the replay and has no ``thread_start``.

Reading a line: the general regex (_GENERAL_NL) reads every call and resume line, the slow path the
rest (exits, signals, odd spacing, demangled names). Most lines take a fast path first (str.split and
look-ups, _Parser.run with _FastPath), which takes a line only when the general regex would read it into
the same groups and hands any other to the regex: what it knows (the prefix layout, tid tokens, function
tokens, resumed names) it learnt from lines the regex read. tests/test_ltrace_fast_path.py parses every
fixture, the real samples, synthetic, hand-made and mutated logs both ways and compares.
"""
from __future__ import annotations

import re
from itertools import chain
from typing import Iterable, Iterator, Optional

from .events import ALLOC_KINDS, FREE_KINDS, REALLOC_KINDS, AllocEvent, Anomaly, EventSource, pack_events

__all__ = ["parse", "parse_file", "ParseReport", "TraceFormatError", "FUNCTIONS", "EventStream"]


class TraceFormatError(ValueError):
    """The input is not an ltrace log.  ``line`` and ``col`` are 1-based."""

    def __init__(self, filename: str, line: int, col: int, message: str):
        self.filename, self.line, self.col, self.message = filename, line, col, message
        super().__init__(f"{filename}:{line}:{col}: {message}")


# --------------------------------------------------------------------------- functions
# Argument layouts (positions as ltrace prints them; extra printed args are ignored).
A_SIZE, A_OLD, A_NMEMB_SIZE, A_OLD_SIZE, A_OLD_NMEMB_SIZE, A_X_ALIGN_SIZE, A_ALIGN_SIZE, \
    A_SIZE_ALIGN, A_OLD_ALIGN, A_OLD_SIZE_ALIGN = range(10)

#: Traced function name -> (kind, argument layout).  C++ names are Itanium-mangled
#: (64-bit ``m`` = unsigned long and 32-bit ``j`` = unsigned int variants).
FUNCTIONS = {
    "malloc": ("malloc", A_SIZE),
    "calloc": ("calloc", A_NMEMB_SIZE),
    "realloc": ("realloc", A_OLD_SIZE),
    "reallocarray": ("reallocarray", A_OLD_NMEMB_SIZE),
    "free": ("free", A_OLD),
    "cfree": ("free", A_OLD),
    "posix_memalign": ("posix_memalign", A_X_ALIGN_SIZE),
    "aligned_alloc": ("aligned_alloc", A_ALIGN_SIZE),
    "memalign": ("memalign", A_ALIGN_SIZE),
    "valloc": ("valloc", A_SIZE),
    "pvalloc": ("pvalloc", A_SIZE),
}
for _w in "mj":
    for _new, _kind in (("_Znw", "operator_new"), ("_Zna", "operator_new_array")):
        FUNCTIONS[_new + _w] = (_kind, A_SIZE)
        FUNCTIONS[_new + _w + "RKSt9nothrow_t"] = (_kind, A_SIZE)
        FUNCTIONS[_new + _w + "St11align_val_t"] = (_kind, A_SIZE_ALIGN)
        FUNCTIONS[_new + _w + "St11align_val_tRKSt9nothrow_t"] = (_kind, A_SIZE_ALIGN)
for _del, _kind in (("_ZdlPv", "operator_delete"), ("_ZdaPv", "operator_delete_array")):
    FUNCTIONS[_del] = (_kind, A_OLD)
    FUNCTIONS[_del + "RKSt9nothrow_t"] = (_kind, A_OLD)
    FUNCTIONS[_del + "St11align_val_t"] = (_kind, A_OLD_ALIGN)
    FUNCTIONS[_del + "St11align_val_tRKSt9nothrow_t"] = (_kind, A_OLD_ALIGN)
    for _w in "mj":
        FUNCTIONS[_del + _w] = (_kind, A_OLD_SIZE)
        FUNCTIONS[_del + _w + "St11align_val_t"] = (_kind, A_OLD_SIZE_ALIGN)
del _w, _new, _del, _kind

_DEMANGLED = re.compile(r"operator (new|delete)(\[\])?\(([^()]*)\)")


def _demangled_spec(name: str):
    """(kind, layout) for a name demangled by ``ltrace -C``, e.g. 'operator new[](unsigned long)'."""
    m = _DEMANGLED.fullmatch(name)
    if m is None:
        return None
    op, arr, params = m.groups()
    kind = ("operator_new" if op == "new" else "operator_delete") + ("_array" if arr else "")
    params = [p.strip() for p in params.split(",") if p.strip() and "nothrow" not in p]
    has_size = any(p.startswith("unsigned") for p in params)
    has_align = any("align_val_t" in p for p in params)
    if op == "new":
        return kind, (A_SIZE_ALIGN if has_align else A_SIZE)
    if has_size:
        return kind, (A_OLD_SIZE_ALIGN if has_align else A_OLD_SIZE)
    return kind, (A_OLD_ALIGN if has_align else A_OLD)


# Function token classes.
_T_ALLOC, _T_LIBC_PLT, _T_OTHER, _T_ALLOC_ALIAS = 0, 1, 2, 3


_TOKEN = re.compile(r"\s*(?:[\w.+-]+->)?(?:[\w.]+|operator (?:new|delete)(?:\[\])?\([^()]*\))(?:@[\w.+-]+)?")


def _classify(token: str):
    """Function token as ltrace prints it -> (name, kind, layout, class, notation, memalign_alias), or
    None when ``token`` is not a function name.  notation: 1 'CALLER->NAME' (-e), 2 'NAME@LIB' (-x), 0 'NAME'.
    'prog->malloc' -> ('malloc', 'malloc', A_SIZE, _T_ALLOC, 1, False)."""
    if not _TOKEN.fullmatch(token):
        return None
    caller, arrow, name = token.strip().partition("->")
    if not arrow:
        caller, name = None, caller
    lib = None
    if "@" in name:
        name, _, lib = name.rpartition("@")
    notation = 2 if lib is not None else 1 if caller is not None else 0
    spec = FUNCTIONS.get(name) or _demangled_spec(name)
    if spec is None:
        return (name, None, None, _T_OTHER, notation, False)
    if caller is not None and caller.startswith("libc.so"):
        return (name, spec[0], spec[1], _T_LIBC_PLT, notation, False)
    alias = spec[0] == "memalign" and lib is not None and lib.startswith("libc.so")
    return (name, spec[0], spec[1], _T_ALLOC, notation, alias)


def _num(s: str) -> int:
    """An ltrace number: decimal, 0x-hex, 'nil'/'NULL' (0); negative values read as size_t."""
    s = s.strip()
    try:
        v = int(s, 0)
    except ValueError:
        if s in ("nil", "NULL", "(nil)"):
            return 0
        v = int(s, 10)  # leading zeros; raises ValueError on garbage
    return v + (1 << 64) if v < 0 else v


def _args(layout: int, args: str):
    """(size, nmemb, align, old_ptr) from the printed argument list; raises ValueError/IndexError."""
    a = args.split(",")
    if layout == A_SIZE:
        return _num(a[0]), 1, None, None
    if layout == A_OLD:
        return None, 1, None, _num(a[0])
    if layout == A_NMEMB_SIZE:
        return _num(a[1]), _num(a[0]), None, None
    if layout == A_OLD_SIZE:
        return _num(a[1]), 1, None, _num(a[0])
    if layout == A_OLD_NMEMB_SIZE:
        return _num(a[2]), _num(a[1]), None, _num(a[0])
    if layout == A_X_ALIGN_SIZE:
        return _num(a[2]), 1, _num(a[1]), None
    if layout == A_ALIGN_SIZE:
        return _num(a[1]), 1, _num(a[0]), None
    if layout == A_SIZE_ALIGN:
        return _num(a[0]), 1, _num(a[1]), None
    if layout == A_OLD_ALIGN:
        return None, 1, _num(a[1]), _num(a[0])
    return _num(a[1]), 1, _num(a[2]), _num(a[0])  # A_OLD_SIZE_ALIGN


def _ptr(ret: Optional[str]) -> Optional[int]:
    """A printed return value as a pointer (None when it is not a number, e.g. '<void>' or '')."""
    if not ret:
        return None
    try:
        return _num(ret)
    except ValueError:
        return None


# --------------------------------------------------------------------------- regexes
# General line: groups (tid, pid, ts, token, args, ret, dur, unf, rname, rret, rdur).
_PREFIX = r"(?:(\d+) |\[pid (\d+)\] )? *(?:(\d[\d:.]*) +)?(?:\[[^\]\s]*\] )? *"
_BODY = (r"(?:([\w.+-]+(?:->[\w.+-]+)?(?:@[\w.+-]+)?)\(([^)<]*)(?:\) += ([^ \n]*)(?: +<([\d.]+)>)?| <(unfinished|no return) \.\.\.>)"
         r"|<\.\.\. (\w+) resumed> [^=<]*= ([^ \n]*)(?: +<([\d.]+)>)?)")
_GENERAL_NL = re.compile(_PREFIX + _BODY + r"\n\Z")
_GENERAL_ANY = re.compile(_PREFIX + _BODY + r"\n?\Z")
_PREFIX_ONLY = re.compile(_PREFIX)
_RET_TAIL = re.compile(r"\) *= ?([^ ]*)(?: +<([\d.]+)>)?\s*\Z")
_RESUMED = re.compile(r"<\.\.\. (.+?) resumed> ?(.*)\Z")
_DEMANGLED_CALL = re.compile(r"\s*((?:[\w.+-]+->)?operator (?:new|delete)(?:\[\])?\([^()]*\)(?:@[\w.+-]+)?)\((.*)\Z")


# Pending-call entry (a list, indexed by these constants).
P_NAME, P_KIND, P_START, P_TIME, P_SIZE, P_NMEMB, P_ALIGN, P_OLD, P_FLAGS, P_PARENT, P_INNER = range(11)
F_IGNORED, F_NESTED, F_EMITTED, F_NORETURN = 1, 2, 4, 8
_CHUNK = 256
_SPACE_RUNS = frozenset(" " * n for n in range(1, 81))    # ltrace's padding before ' = ' (longer: the regexes)
_MAX_PENDING_PER_THREAD = 64


def _matches_outer(outer, kind: str, size, nmemb, align, old) -> bool:
    """Is an allocator call (kind, size...) plausibly made from inside the pending call ``outer``?"""
    okind = outer[P_KIND]
    if kind in FREE_KINDS:
        # delete -> free, realloc(p, 0) -> free(p), reallocarray -> realloc ... same pointer
        return (okind in FREE_KINDS or okind in REALLOC_KINDS) and old is not None and old == outer[P_OLD]
    osize = outer[P_SIZE]
    if osize is None or size is None:
        return False
    obytes = osize * outer[P_NMEMB]
    nbytes = size * nmemb
    if kind in REALLOC_KINDS:  # reallocarray -> realloc
        return okind in REALLOC_KINDS and old == outer[P_OLD] and nbytes == obytes
    if okind in REALLOC_KINDS:  # realloc(NULL, n) -> malloc(n)
        return nbytes == obytes
    if okind in ALLOC_KINDS:  # new -> malloc, new[] -> new, posix_memalign -> malloc, calloc -> malloc
        return obytes <= nbytes <= obytes + (outer[P_ALIGN] or 0)
    return False


# --------------------------------------------------------------------------- report
class ParseReport:
    """What the parser (and later the statistics) saw besides the events.

    Counters are plain attributes.  Anomalies are kept as a count per kind plus
    the first ``max_examples`` :class:`Anomaly` of each kind (bounded memory).
    """

    def __init__(self, filename: str = "<input>", max_examples: int = 5):
        self.filename = filename
        self.max_examples = max_examples
        self.lines = 0               # lines read
        self.blank_lines = 0
        self.events = 0              # AllocEvents yielded
        self.other_calls = 0         # lines of non-allocator functions (e.g. with -e '*' or without -L)
        self.anomaly_counts: dict = {}
        self.anomaly_examples: dict = {}
        self.threads: set = set()    # every tid that appears, exit lines included
        self.exits: dict = {}        # tid -> 'exited 0' | 'killed by SIGSEGV'
        self.exit_status: Optional[int] = None   # of the last '+++ exited' line (the process leader's)
        self.killed_by: Optional[str] = None     # first '+++ killed by SIGxxx' signal
        self.truncated = False
        self.pending_at_end = 0      # allocator calls still unfinished when their thread exited or the log ended
        self.has_timestamps = False
        self.has_durations = False
        self.plt_notation = False    # saw '-e' notation (CALLER->NAME)
        self.symbol_notation = False  # saw '-x' notation (NAME@LIB)

    # -- anomalies
    def add(self, kind: str, line: int, message: str = "") -> None:
        """Count an anomaly of ``kind`` at ``line``; keep it if fewer than max_examples are kept."""
        n = self.anomaly_counts.get(kind, 0)
        self.anomaly_counts[kind] = n + 1
        if n < self.max_examples:
            msg = message.strip()
            if len(msg) > 200:
                msg = msg[:197] + "..."
            self.anomaly_examples.setdefault(kind, []).append(Anomaly(line, kind, msg))

    def count(self, kind: str) -> int:
        return self.anomaly_counts.get(kind, 0)

    def first_lines(self, kind: str) -> list:
        return [a.line for a in self.anomaly_examples.get(kind, ())]

    @property
    def anomalies(self) -> list:
        """The kept examples of every kind, by line."""
        return sorted((a for lst in self.anomaly_examples.values() for a in lst), key=lambda a: a.line)

    # -- verdicts
    @property
    def crashed(self) -> bool:
        """The tracee was killed by a signal or ltrace lost breakpoints."""
        return self.killed_by is not None or self.count("unexpected-breakpoint") > 0

    @property
    def incomplete(self) -> bool:
        """The log does not cover the whole run: crash, truncation, calls left unfinished, or no exit line."""
        return self.crashed or self.truncated or self.pending_at_end > 0 or not self.exits

    @property
    def notation(self) -> Optional[str]:
        """'e' (PLT breakpoints: CALLER->NAME), 'x' (symbol breakpoints: NAME@LIB), 'mixed' or None."""
        if self.plt_notation and self.symbol_notation:
            return "mixed"
        return "e" if self.plt_notation else "x" if self.symbol_notation else None

    def to_dict(self) -> dict:
        return {
            "filename": self.filename, "lines": self.lines, "blank_lines": self.blank_lines,
            "events": self.events, "other_calls": self.other_calls,
            "threads": sorted(self.threads), "exits": {str(k): v for k, v in sorted(self.exits.items())},
            "exit_status": self.exit_status, "killed_by": self.killed_by, "truncated": self.truncated,
            "pending_at_end": self.pending_at_end, "crashed": self.crashed, "incomplete": self.incomplete,
            "has_timestamps": self.has_timestamps, "has_durations": self.has_durations,
            "notation": self.notation,
            "anomalies": {k: {"count": n, "first_lines": self.first_lines(k),
                              "examples": [a.message for a in self.anomaly_examples.get(k, ())]}
                          for k, n in sorted(self.anomaly_counts.items())},
        }


# --------------------------------------------------------------------------- parser
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


_EXIT_LINE = re.compile(rb"^(?:(\d+) |\[pid (\d+)\] )[^\n]*?\+\+\+ (?:exited|killed)", re.M)


def _leader(path, tail: int = 1 << 16):
    """The process's main thread: the tid of the log's last '+++ exited/killed' line (the kernel reports a
    thread group leader's end only once its other threads are gone), read from the file's end; None when the
    log has no such line there (cut short, or no thread ids)."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - tail))
        data = f.read()
    last = None
    for last in _EXIT_LINE.finditer(data):
        pass
    return None if last is None else int(last.group(1) or last.group(2))


class _FastPath:
    """What the fast path of _Parser.run knows, all of it learnt from lines the general regex read: it takes a
    line only when the regex would read it into the same groups.

    The prefix must be the plain one ('TID ' or '[pid TID] ', then 'STAMP ', each optional, one space apart) of
    the first line learnt (``layout``). A thread's tid token, a function token and a resumed call's name must have
    been read by the regex before. A stamp with one dot (-tt, -ttt, -r) is read with the tid: the line's text up
    to its first dot (e.g. '1234 12:00:05') must be one the regex read, the digits after it are checked."""

    def __init__(self):
        self.fn: dict = {}             # function token -> its info (_Parser.classify)
        self.rnames: set = set()       # NAME of '<... NAME resumed>'
        self.tids: dict = {}           # 'TID' -> tid
        self.pids: dict = {}           # 'TID]' of '[pid TID]' -> tid
        self.heads: dict = {}          # the text up to a dotted stamp's dot -> (tid, the stamp up to its dot)
        self.layout = None             # (nsplit, tid_i, ts_i, dot): see learn

    def learn(self, raw: str, m, info) -> None:
        """The general regex read ``raw`` (m; info: its function token's, or None)."""
        tid_s, pid_s, ts, tok = m.group(1, 2, 3, 4)
        if tok is not None:
            if info is not None and len(self.fn) < 4096:
                self.fn[tok] = info
        elif len(self.rnames) < 4096:
            self.rnames.add(m.group(9))
        who = f"{tid_s} " if tid_s else f"[pid {pid_s}] " if pid_s else ""
        body = m.start(4) if tok is not None else m.start(9) - 5           # '<... NAME resumed>'
        if raw[:body] != who + (f"{ts} " if ts else ""):
            return                                                          # not a plain prefix
        stamp, sep, micro = (ts or "").partition(".")
        dot = bool(sep) and micro.isdecimal()                               # one dot, digits after it
        if self.layout is None:
            # The prefix is `nsplit` tokens split at single spaces: the tid token ``tid_i`` (0: 'TID',
            # 1: '[pid' 'TID]', -1: none), the stamp ``ts_i`` (-1: none); dot: the stamp has one.
            tid_i = 0 if tid_s else 1 if pid_s else -1
            nsplit = tid_i + 1 + (1 if ts else 0)
            self.layout = (nsplit, tid_i, nsplit - 1 if ts else -1, dot)
        tid = int(tid_s or pid_s or 0)
        for cache, key, value in ((self.tids, tid_s, tid), (self.pids, pid_s and pid_s + "]", tid),
                                  (self.heads, dot and who + stamp, (tid, stamp))):
            if key:
                if len(cache) >= 65536:
                    cache.clear()
                cache[key] = value


class _Parser:
    #: Lines of the common shapes are read with str.split (the fast path); every line it does not take with
    #: certainty goes to the regexes. False: every line to the regexes (tests compare both ways).
    fast_path = True

    def __init__(self, filename: str, report: ParseReport, sniff_lines: int, extra_events: bool = False,
                 leader: Optional[int] = None, times: bool = True):
        self.filename = filename
        self.times = times             # read the timestamps (parse's `times`)
        self.packer = None             # (pack, codes) of EventStream.packed: calls handed out packed
        self.lives = _ThreadLives(leader) if extra_events else None
        self.report = report
        self.sniff_lines = sniff_lines
        self.recognised = False
        self.unrecognised = 0          # non-empty lines before the first recognised one
        self.first_bad = None          # (line, col, text) of the first of them
        self.newline_mode = None
        self.stacks: dict = {}         # tid -> list of pending entries
        # time
        self.t0 = None
        self.day = 0.0
        self.prev_abs = None
        self.rel_sum = None            # -r: running sum of relative stamps

    # ---- time ---------------------------------------------------------------------
    def time(self, ts: str):
        """(t, key, keylen, base) with t seconds since the first stamp; later stamps that start
        with ``key`` are ``base + float(stamp[keylen:])``."""
        try:
            if len(ts) >= 8 and ts[2] == ":" and ts[5] == ":":          # -t / -tt
                minute = int(ts[0:2]) * 3600 + int(ts[3:5]) * 60
                absolute = self.day + minute + float(ts[6:])
                if self.prev_abs is not None and absolute < self.prev_abs - 43200:
                    self.day += 86400.0                                  # midnight
                    absolute += 86400.0
                self.prev_abs = absolute
                if self.t0 is None:
                    self.t0 = absolute
                return absolute - self.t0, ts[:6], 6, self.day + minute - self.t0
            if ":" in ts:
                return None, "\0", 1, 0.0
            value = float(ts)
            if self.rel_sum is not None or (self.t0 is None and value < 1e6):  # -r relative
                self.rel_sum = (self.rel_sum or 0.0) + value
                return self.rel_sum, "\0", 1, 0.0
            if self.t0 is None:                                            # -ttt epoch
                self.t0 = value
            ipart = ts.split(".")[0]
            keylen = max(len(ipart) - 3, 1)
            return value - self.t0, ts[:keylen], keylen, int(ts[:keylen]) * 10 ** (len(ipart) - keylen) - self.t0
        except ValueError:
            return None, "\0", 1, 0.0

    # ---- rare lines ----------------------------------------------------------------------
    def slow(self, raw, lineno: int):
        """Lines the fast regexes do not take.  Returns the 11 groups of a call/resume line, or None
        when the line was fully handled here (blank, exit, signal, garbage ...)."""
        rep = self.report
        if not isinstance(raw, str):
            raw = bytes(raw).decode("utf-8", "replace")
        if self.newline_mode and not raw.endswith("\n"):
            if raw.strip():
                rep.truncated = True
                rep.add("truncated-line", lineno, f"last line has no newline, ignored: {raw!r}")
            return None
        s = raw.rstrip("\r\n")
        if not s.strip():
            rep.blank_lines += 1
            return None
        m = _PREFIX_ONLY.match(s)
        tid_s, pid_s, ts = m.group(1), m.group(2), m.group(3)
        body = s[m.end():]
        if body.startswith("+++ ") or body.startswith("--- ") or body.startswith("unexpected breakpoint"):
            self.recognised = True
            if ts and self.rel_sum is not None:
                self.time(ts)                   # -r stamps are relative to the previous line, whatever it is
            tid = int(tid_s or pid_s or 0)
            self.special(tid, body, lineno, s)
            if self.lives is not None:
                t = self.time(ts)[0] if ts and self.times and self.rel_sum is None else None
                self.lives.special_line(tid, body, lineno, t, tid in self.seen)
            return None
        g = None
        if body.startswith("<... "):
            rm = _RESUMED.match(body)
            if rm:
                name, rest = rm.groups()
                if rest.rstrip().endswith("<unfinished ...>"):
                    self.recognised = True      # resumed and interrupted again: wait for the next resume
                    return None
                tm = _RET_TAIL.search(rest)
                if tm:
                    g = (tid_s, pid_s, ts, None, None, None, None, None, name, tm.group(1), tm.group(2))
        else:
            g = self.slow_call(tid_s, pid_s, ts, body)
        if g is None:
            self.unparsable(lineno, s, m.end())
            return None
        return g

    def slow_call(self, tid_s, pid_s, ts, body):
        dm = _DEMANGLED_CALL.match(body)
        if dm:
            token, tail = dm.groups()
        else:
            token, sep, tail = body.partition("(")
            if not sep or not _TOKEN.fullmatch(token):
                return None
        tail = tail.rstrip()
        for unf in ("unfinished", "no return"):
            if tail.endswith(f"<{unf} ...>"):
                args = tail[: -len(unf) - 6].rstrip()
                return (tid_s, pid_s, ts, token, args, None, None, unf, None, None, None)
        tm = _RET_TAIL.search(tail)
        if tm is None:
            return None
        return (tid_s, pid_s, ts, token, tail[: tm.start()], tm.group(1), tm.group(2), None, None, None, None)

    def unparsable(self, lineno: int, s: str, col0: int = 0):
        if not self.recognised:
            self.unrecognised += 1
            if self.first_bad is None:
                self.first_bad = (lineno, col0 + 1, s)
            if self.unrecognised >= self.sniff_lines:
                self.format_error()
        self.report.add("unparsable-line", lineno, s)

    def format_error(self):
        line, col, text = self.first_bad
        shown = text if len(text) <= 60 else text[:57] + "..."
        raise TraceFormatError(
            self.filename, line, col,
            f"not an ltrace log: none of the first {self.unrecognised} non-empty lines looks like ltrace "
            f"output (expected e.g. '1234 12:00:00.000001 prog->malloc(16) = 0x55d0c0a0b2a0'); "
            f"line {line} is {shown!r}")

    def special(self, tid: int, body: str, lineno: int, s: str):
        rep = self.report
        rep.threads.add(tid)
        if body.startswith("+++ "):
            if tid not in self.seen:
                rep.add("thread-only-in-exit-line", lineno, s)
            pending = self.stacks.pop(tid, None)
            if pending:
                self.abandon(pending, f"the thread exited (line {lineno})", at_end=True)
            what = body[4:].rstrip(" +")
            if what.startswith("exited"):
                m = re.search(r"status (-?\d+)", what)
                status = int(m.group(1)) if m else None
                rep.exits[tid] = f"exited {status}"
                rep.exit_status = status
            elif what.startswith("killed by"):
                sig = what[len("killed by"):].split()[0] if what[len("killed by"):].split() else "?"
                rep.exits[tid] = f"killed by {sig}"
                if rep.killed_by is None:
                    rep.killed_by = sig
                rep.add("tracee-crashed", lineno, s)
            else:
                rep.exits[tid] = what
        elif body.startswith("--- "):
            self.seen.add(tid)
            rep.add("signal", lineno, s)
        else:
            self.seen.add(tid)
            rep.add("unexpected-breakpoint", lineno, s)

    # ---- classification and fallback -------------------------------------------------------
    def classify(self, tok: str, cache: dict):
        """Cached _classify; ValueError when ``tok`` is not a function name."""
        info = _classify(tok)
        if info is None:
            raise ValueError(tok)
        name, kind, layout, cls, notation, alias = info
        if notation == 1:
            self.report.plt_notation = True
        elif notation == 2:
            self.report.symbol_notation = True
        info = (name, kind, layout, _T_ALLOC_ALIAS if alias else cls)
        if len(cache) < 4096:
            cache[tok] = info
        return info

    def fallback(self, raw, lineno: int, fn_cache: dict):
        """A line the split fast path did not take: the general regex, then the slow path.
        Returns (tid, ts, info, args, ret, dur, unf, rname) or None when the line is done with.
        What the general regex reads teaches the fast path (self.fast)."""
        if not isinstance(raw, str):
            raw = bytes(raw).decode("utf-8", "replace")
        m = self.general(raw)
        if m is not None:
            tid_s, pid_s, ts, tok, args, ret, dur, unf, rname, rret, rdur = m.groups()
        else:
            g = self.slow(raw, lineno)
            if g is None:
                return None
            tid_s, pid_s, ts, tok, args, ret, dur, unf, rname, rret, rdur = g
        info = None
        if tok is None:
            ret, dur = rret, rdur
        else:
            try:
                info = fn_cache.get(tok) or self.classify(tok, fn_cache)
            except ValueError:
                self.unparsable(lineno, raw.rstrip("\r\n"))
                return None
        if m is not None and self.fast is not None:
            self.fast.learn(raw, m, info)
        self.recognised = True
        try:
            dur = float(dur) if dur else None
        except ValueError:
            dur = None
        return int(tid_s or pid_s or 0), ts, info, args, ret, dur, unf, rname

    # ---- main loop -------------------------------------------------------------------------
    def run(self, lines: Iterable, close=None, newlines: Optional[bool] = None,
            whole_lines: bool = False) -> Iterator[list]:
        """The events, in lists. whole_lines: no line holds a newline before its end (lines of a file, or of
        one string split here)."""
        # The fast path reads only whole lines that end in a newline (a newline inside one would pass it).
        self.fast = _FastPath() if self.fast_path and whole_lines else None
        rep = self.report
        stacks = self.stacks
        self.seen = seen = set()            # tids that appear in a non-exit line
        lives = self.lives
        fresh = False
        new = tuple.__new__
        Event = AllocEvent
        fn_cache: dict = {}
        times = self.times
        fallback = self.fallback
        push = self.push
        resumed = self.resumed
        note = rep.add
        outer_call = self.outer_call
        alloc_kinds, free_kinds = ALLOC_KINDS, FREE_KINDS
        lineno = events = other = 0
        out: list = []                     # events are handed out in chunks of _CHUNK (cheaper than one by one)
        append = out.append
        flush_at = _CHUNK
        packer = None                      # self.packer, read at each flush
        has_ts = has_dur = False
        tkey, tklen, tbase = "\0", 1, 0.0
        it, newline_mode = self.text_lines(lines, newlines)
        if not newline_mode:
            self.fast = None
        fast = self.fast
        if fast is not None:
            fast_fn, fast_rnames, tids, pids, heads = fast.fn, fast.rnames, fast.tids, fast.pids, fast.heads
        nsplit = tid_i = ts_i = -1         # the prefix layout (_FastPath.layout), once known
        dot = False
        try:
            for raw in it:
                lineno += 1
                # ------------------------------------------- fast path: the common shapes, read with str.split
                # It takes a line only when the general regex would read it, into the same groups (see the
                # class doc); anything else raises, and the line goes to the regexes.
                try:
                    if dot:                           # 'TID HH:MM:SS.uuuuuu ' (-tt; -ttt, -r alike)
                        head, rest = raw.split(".", 1)
                        tid, ts = heads[head]         # KeyError: a thread or second not seen yet
                        micro, body = rest.split(" ", 1)
                        if not micro.isdecimal():
                            raise ValueError
                        ts = ts + "." + micro if times else None
                    elif nsplit < 0:
                        raise ValueError              # prefix layout not known yet
                    else:                             # 'TID ', '[pid TID] ', a stamp without a dot, or nothing
                        parts = raw.split(" ", nsplit)
                        body = parts[nsplit]
                        if tid_i == 0:
                            tid = tids[parts[0]]      # KeyError: a new thread
                        elif tid_i < 0:
                            tid = 0
                        elif parts[0] == "[pid":
                            tid = pids[parts[1]]
                        else:
                            raise ValueError
                        ts = parts[ts_i] if ts_i >= 0 else None
                        if ts is not None:
                            if ts.strip("0123456789:.") or not ts[0].isdigit():     # (\d[\d:.]*)
                                raise ValueError
                            if not times:
                                ts = None
                    # The line ends in a newline where it is read below (the cut-off last line: the slow path).
                    if body[0] == "<":                # <... NAME resumed> )   = RET <DUR>
                        head, _, rest = body.partition(" resumed> ")
                        rname = head[5:]
                        if rname not in fast_rnames or head[:5] != "<... ":
                            raise ValueError
                        pad, sep, rest = rest.partition("= ")
                        if not sep or "=" in pad or "<" in pad:
                            raise ValueError          # not ' [^=<]*= '
                        info = unf = None
                    else:                             # CALL(ARGS) = RET <DUR>  |  CALL(ARGS <unfinished ...>
                        tok, _, rest = body.partition("(")
                        info = fast_fn[tok]           # KeyError: a token the general regex has not read yet
                        args, sep, rest = rest.partition(")")
                        if sep:                       # ltrace pads the call to a column: ')    = '
                            pad, _, rest = rest.partition("= ")
                            if pad not in _SPACE_RUNS:
                                raise ValueError      # not '\) +='
                            unf = None
                        elif args[-18:] == " <unfinished ...>\n":
                            args, unf, rest = args[:-18], "unfinished", None
                        elif args[-17:] == " <no return ...>\n":
                            args, unf, rest = args[:-17], "no return", None
                        else:
                            raise ValueError
                        if "<" in args:
                            raise ValueError          # not ([^)<]*): the partition found no ')' before
                    if rest is None:
                        ret = dur = None
                    else:                             # what follows '= ': 'RET <DUR>\n' or 'RET\n'
                        ret, sep, d = rest.partition(" <")
                        if sep:
                            if " " in ret or d[-2:] != ">\n":
                                raise ValueError
                            d = d[:-2]
                            if not d.replace(".", "", 1).isdecimal():
                                raise ValueError      # not [\d.]+ (or not a number: the regexes read it as None)
                            dur = float(d)
                        elif " " in rest or rest[-1] != "\n":
                            raise ValueError
                        else:
                            ret, dur = rest[:-1], None
                except (ValueError, IndexError, KeyError, AttributeError, TypeError):
                    # ---------------------------------------------- general regex, then the slow path
                    r = fallback(raw, lineno, fn_cache)
                    if r is None:
                        if lives is not None and lives.out:
                            out += lives.out
                            lives.out.clear()
                        continue
                    tid, ts, info, args, ret, dur, unf, rname = r
                    if not times:
                        ts = None
                    if tid not in seen:
                        seen.add(tid)
                        rep.threads.add(tid)
                        fresh = lives is not None
                    if nsplit < 0 and fast is not None and fast.layout is not None:
                        nsplit, tid_i, ts_i, dot = fast.layout
                if ts is not None:
                    try:
                        if ts[:tklen] != tkey:
                            raise ValueError
                        t = tbase + float(ts[tklen:])
                    except ValueError:
                        t, tkey, tklen, tbase = self.time(ts)
                        if t is not None:
                            has_ts = True
                else:
                    t = None
                if lives is not None:
                    if fresh:
                        lives.appeared(tid, lineno, t)
                        fresh = False
                        if lives.out:             # only appeared() (and the lines the fallback ends) add there
                            out += lives.out
                            lives.out.clear()
                    else:
                        lives.last = tid

                if info is not None:
                    # ------------------------------------------------ a call starts
                    name, kind, layout, cls = info
                    if cls:
                        if cls == _T_ALLOC_ALIAS:
                            note("memalign-may-be-aligned-alloc", lineno, raw)
                        else:
                            if cls == _T_LIBC_PLT:
                                note("libc-internal-plt", lineno, raw)
                            else:
                                other += 1
                                if lives is not None and name in _LIFE_CALLS:
                                    lives.call(tid, name, ret, unf, lineno, t, out)
                            if unf:
                                push(tid, [name, None, lineno, t, None, 1, None, None, F_IGNORED, None, None])
                            continue
                    try:
                        if layout == A_SIZE:
                            size = int(args, 0)
                            nmemb, align, old = 1, None, None
                            if size < 0:
                                raise ValueError
                        elif layout == A_OLD:
                            old = int(args, 0)
                            size, nmemb, align = None, 1, None
                        elif layout == A_OLD_SIZE:    # realloc: two numbers, read here (raising costs more)
                            old, _, size = args.partition(",")
                            old, size = int(old, 0), int(size, 0)
                            nmemb, align = 1, None
                            if old < 0 or size < 0:
                                raise ValueError
                        elif layout == A_NMEMB_SIZE:  # calloc
                            nmemb, _, size = args.partition(",")
                            nmemb, size = int(nmemb, 0), int(size, 0)
                            align = old = None
                            if nmemb < 0 or size < 0:
                                raise ValueError
                        else:
                            size, nmemb, align, old = _args(layout, args)
                    except (ValueError, IndexError, TypeError):
                        try:
                            size, nmemb, align, old = _args(layout, args)
                        except (ValueError, IndexError, TypeError):
                            note("unparsable-line", lineno, "unreadable arguments: " + str(raw))
                            if unf:
                                push(tid, [name, None, lineno, t, None, 1, None, None, F_IGNORED, None, None])
                            continue
                    st = stacks.get(tid)
                    if st:
                        parent = outer_call(st, kind, size, nmemb, align, old)
                        if parent is not None:
                            note("nested-inner-call", lineno,
                                 f"{str(raw).strip()}  (inside {parent[P_NAME]} of line {parent[P_START]})")
                            if unf:
                                push(tid, [name, kind, lineno, t, size, nmemb, align, old, F_NESTED, parent, None])
                            elif kind in alloc_kinds and parent[P_INNER] is None:
                                parent[P_INNER] = _ptr(ret)
                            continue
                    if dur is not None:
                        has_dur = True
                    if kind in free_kinds:
                        # A free takes effect where it starts: its event now, even if it is unfinished.
                        if not old:
                            note("free-null", lineno, raw)
                        if unf:
                            e = [name, kind, lineno, t, size, nmemb, align, old,
                                 F_EMITTED | (F_NORETURN if unf == "no return" else 0), None, None]
                            if st is not None and len(st) < _MAX_PENDING_PER_THREAD:
                                st.append(e)      # push() inlined: its common case
                            else:
                                push(tid, e)
                        res, failed, start = None, False, lineno
                    elif unf:
                        e = [name, kind, lineno, t, size, nmemb, align, old, F_NORETURN if unf == "no return" else 0,
                             None, None]
                        if st is not None and len(st) < _MAX_PENDING_PER_THREAD:
                            st.append(e)
                        else:
                            push(tid, e)
                        continue
                    else:
                        start, inner, res = lineno, None, 0
                else:
                    # ------------------------------------------------ a call resumes
                    st = stacks.get(tid)
                    if st and st[-1][0] == rname:
                        e = st.pop()                  # resumed() inlined: its common case
                    else:
                        e = resumed(tid, rname)
                    if e is None:
                        note("resumed-without-start", lineno, raw)
                        continue
                    flags = e[P_FLAGS]
                    if flags & (F_IGNORED | F_EMITTED):
                        if lives is not None and e[P_NAME] in _CREATES:
                            lives.call(tid, e[P_NAME], ret, None, lineno, t, out, resumed=True)
                        continue
                    kind = e[P_KIND]
                    if flags & F_NESTED:
                        parent = e[P_PARENT]
                        if kind in alloc_kinds and parent[P_INNER] is None:
                            parent[P_INNER] = _ptr(ret)
                        continue
                    if dur is not None:
                        has_dur = True
                    _, _, start, _, size, nmemb, align, old, _, _, inner = e
                    res = 0
                # ---------------------------------------------------- an allocation/realloc completes
                if res is None:
                    pass                          # a free: nothing returned
                elif kind == "posix_memalign":
                    res = inner
                    failed = _ptr(ret) != 0
                    if not failed and res is None:
                        note("posix-memalign-result-unknown", lineno, raw)
                else:
                    try:
                        res = int(ret, 0)
                    except (ValueError, TypeError):
                        res = _ptr(ret)
                    # NULL is a failure, except from realloc(p, 0), which frees p
                    failed = res == 0 and not (old and size == 0)
                if failed:
                    note("failed-allocation", lineno, raw)
                events += 1
                if packer is None:
                    append(new(Event, (lineno, tid, t, kind, size, nmemb, align, old, res, failed, start, dur)))
                else:
                    append(pack(lineno, size or 0, nmemb, align or 0, old or 0, res or 0, tid, codes[kind], failed))
                if events >= flush_at:
                    yield out
                    out = []
                    append = out.append
                    flush_at = events + _CHUNK
                    packer = self.packer
                    if packer is not None:
                        pack, codes = packer
            # ---------------------------------------------------------------- end of input
            if out:
                yield out
                out = []
            self.finish(lineno)
        finally:
            if close is not None:
                close()
            rep.lines += lineno
            rep.events += events
            rep.other_calls += other
            rep.has_timestamps = rep.has_timestamps or has_ts
            rep.has_durations = rep.has_durations or has_dur

    def text_lines(self, lines: Iterable, newlines: Optional[bool]):
        """(the lines as str, do they end in newlines?), from the first line unless `newlines` says."""
        newline_mode = False
        it = iter(lines)
        for first in it:
            if isinstance(first, str):
                it = chain((first,), it)
                newline_mode = first.endswith("\n") if newlines is None else newlines
            else:
                it = _decoded(chain((first,), it))
                newline_mode = bytes(first).endswith(b"\n") if newlines is None else newlines
            break
        self.newline_mode = newline_mode
        self.general = (_GENERAL_NL if newline_mode else _GENERAL_ANY).match
        return it, newline_mode

    def outer_call(self, st: list, kind: str, size, nmemb, align, old):
        """The pending call of this thread that an allocator call is made from inside, or None."""
        for e in reversed(st):
            if not e[P_FLAGS] & (F_IGNORED | F_NORETURN) and _matches_outer(e, kind, size, nmemb, align, old):
                return e
        return None

    def resumed(self, tid: int, rname: str):
        """The pending call of thread `tid` a '<... NAME resumed>' line completes (popped), or None."""
        st = self.stacks.get(tid)
        if not st:
            return None
        if st[-1][0] == rname:
            return st.pop()
        for i in range(len(st) - 2, -1, -1):
            if st[i][P_NAME] == rname:
                e = st[i]
                self.abandon(st[i + 1:], f"{rname} of line {e[P_START]} resumed first")
                del st[i:]
                return e
        return None

    def finish(self, lineno: int) -> None:
        """End of input: a log nothing was recognised in, and the calls never resumed."""
        if not self.recognised and self.first_bad is not None:
            line, _, text = self.first_bad
            if lineno == 1 and not self.newline_mode and re.match(r"\d|\[pid", text):
                self.report.truncated = True     # a single, unterminated line: a log cut right at its start
                self.report.add("truncated-line", 1, f"only line has no newline, ignored: {text!r}")
            else:
                self.format_error()
        for tid, st in self.stacks.items():
            self.abandon(st, "the log ended", at_end=True)

    def abandon(self, entries, why: str, at_end: bool = False):
        for e in entries:
            if e[P_FLAGS] & (F_IGNORED | F_NESTED):
                continue
            if at_end:
                self.report.pending_at_end += 1
            what = "emitted at its start" if e[P_FLAGS] & F_EMITTED else "no event"
            self.report.add("unfinished-never-resumed", e[P_START],
                            f"{e[P_NAME]}() started at line {e[P_START]} never resumed before {why} ({what})")

    def push(self, tid: int, entry: list) -> None:
        """A call of thread ``tid`` is now pending; at most _MAX_PENDING_PER_THREAD are kept."""
        st = self.stacks.get(tid)
        if st is None:
            st = self.stacks[tid] = []
        st.append(entry)
        if len(st) > _MAX_PENDING_PER_THREAD:
            self.abandon(st[:1], "too many pending calls on this thread")
            del st[0]


#: Calls that create a thread or process: their return value is its id (clone, clone3 = syscall 435, fork), or
#: (pthread_create) the next new thread is the caller's.
_CREATES = frozenset({"SYS_clone", "SYS_clone3", "SYS_56", "SYS_435", "SYS_fork", "SYS_vfork", "fork", "vfork",
                      "pthread_create"})
#: A thread's own exit (-S): it ends there; its '+++ exited' line may come after a later creation (ltrace hears
#: of the exit late), which would count one thread too many alive.
_EXITS = frozenset({"SYS_exit", "SYS_60"})
_LIFE_CALLS = _CREATES | _EXITS


class _ThreadLives:
    """Thread starts and exits as events (see the module doc), collected in ``out`` for the parser to hand out."""

    def __init__(self, leader: Optional[int] = None):
        """leader: the process's main thread if known (parse_file reads it from the log's end): alive from the
        start, even when its first line comes after other threads' (a main thread that only creates threads
        makes no traced call before them)."""
        self.out: list = []
        self.alive: dict = {} if leader is None else {leader: True}   # tid -> True, in order of appearance
        self.announced: set = set()    # threads whose start a creation's return value gave (exited ones too)
        self.creating: list = []       # callers of pthread_create (or of a clone still running), oldest first
        self.last = None               # the thread of the last line

    def _start(self, tid: int, creator, line: int, t) -> None:
        self.out.append(AllocEvent(line, tid, t, "thread_start", creator, 1, None, None, None, False, line, None))

    def appeared(self, tid: int, line: int, t) -> None:
        """The first line of thread ``tid`` (not its exit line)."""
        alive = self.alive
        if tid not in alive and alive:       # announced, the leader and the first thread: no start
            creator = None
            while self.creating and creator is None:
                c = self.creating.pop(0)
                creator = c if c in alive and c != tid else None
            if creator is None:
                creator = self.last if self.last in alive else next(reversed(alive))
            self._start(tid, creator, line, t)
        alive[tid] = True
        self.last = tid

    def call(self, tid: int, name: str, ret, unf, line: int, t, out: list, resumed: bool = False) -> None:
        """A call that creates a thread, started (``unf``), resumed, or whole; or a thread's own exit."""
        if name in _EXITS:
            self.exited(tid, line, t, out)
            return
        if unf:
            self.creating.append(tid)
            return
        child = _ptr(ret) if name != "pthread_create" else None
        if child is None or not 0 < child < 1 << 31:
            if name == "pthread_create" and not resumed and ret == "0":
                self.creating.append(tid)    # printed whole: its thread has not printed a line yet
            return
        if resumed and tid in self.creating:
            self.creating.remove(tid)
        if child not in self.alive and child not in self.announced:
            self.announced.add(child)
            self.alive[child] = True
            out.append(AllocEvent(line, child, t, "thread_start", tid, 1, None, None, None, False, line, None))

    def exited(self, tid: int, line: int, t, out: list) -> None:
        if self.alive.pop(tid, None):
            out.append(AllocEvent(line, tid, t, "thread_exit", None, 1, None, None, None, False, line, None))
            self.creating = [c for c in self.creating if c != tid]

    def special_line(self, tid: int, body: str, line: int, t, seen: bool) -> None:
        if body.startswith("+++ "):
            self.exited(tid, line, t, self.out)
        elif tid not in self.alive and seen:
            self.appeared(tid, line, t)      # a thread first seen in a signal line


def _decoded(lines):
    for raw in lines:
        yield raw if isinstance(raw, str) else bytes(raw).decode("utf-8", "replace")
