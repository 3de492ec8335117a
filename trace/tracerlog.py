"""Reading the LD_PRELOAD tracer's log (runtime/tracer/tracer.c writes it; trace/capture/preload.py captures it).

    log = parse_preload_log("server.trace")    # extra_events=True adds thread starts, exits and mappings
    for ev in log:                 # AllocEvents, in the causal order of the whole process
        ...
    log.info                       # PreloadLogInfo: counts, threads, missing calls, end mark

Reads versions 1 to 6: versions 3 to 6 through runtime/tracer/tracelog.h's decoder, loaded as
runtime/tools/tracelog.c with ctypes; versions 1 and 2 here. The format: docs/capture.md, "The tracer
log"; what the events' fields hold and how the log is read in bounded memory: docs/architecture.md,
"Inside the subsystems".
"""

from __future__ import annotations

import ctypes
import functools
import heapq
import os
import struct
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional

from .events import FREE_KINDS, PRELOAD_MAGIC, REALLOC_KINDS, AllocEvent, EventSource
from .ltrace import ParseReport, TraceFormatError

__all__ = ["parse_preload_log", "raw_records", "stop_sentence", "is_preload_log", "PreloadLog", "PreloadLogInfo", "KIND_CODES", "HEADER", "RECORD",
           "MAGIC", "EXTRA_KINDS", "CHUNK_HEADER", "first_chunk", "missing_sentence"]

MAGIC = PRELOAD_MAGIC
VERSION = 6
READS = (1, 2, 3, 4, 5, 6)   # 1 has no thread records; 3 is compact (chunks of encoded records); 4 numbers them by
                             # per-thread clocks, keeps times in marks and counts the records made at the log's head;
                             # 5 may hold window marks (K_WINDOW, capture --server); 6 has the threads' CPU clocks
                             # in time marks (AllocEvent.cpu_ns)
K_WINDOW = 45          # a window mark's record: (1 opens / 2 closes, a thread's tid, its last clock before it)
HEADER = struct.Struct("<8sIIIIQQ24x")
RECORD = struct.Struct("<QQIBBHIIQQQQ")
_INDEX = struct.Struct("<QQIB7xI32x")          # seq, ns, tid, kind, span: what the indexing pass needs
assert HEADER.size == RECORD.size == _INDEX.size == 64
F_THREW = 1
KIND_END = 255       # not a call: the process was leaving (exit, _exit, exec); seq = numbers taken so far
#: Records that are not allocator calls (version 2): yielded as events of these kinds with ``extra_events=True``.
#: thread_start: ``size`` is the creating thread's tid. mmap (the program's own anonymous mapping): ``size``
#: its length, ``nmemb`` its protection, ``align`` mmap's flags, ``result_ptr`` its address (None: failed).
#: munmap: ``old_ptr``, ``size``. mremap: ``old_ptr``, ``align`` the old length, ``size`` the new one,
#: ``nmemb`` mremap's flags, ``result_ptr`` the new address (None: failed). mprotect: ``old_ptr``, ``size``,
#: ``nmemb`` the protection (failed: it returned an error).
EXTRA_KINDS = {40: "thread_start", 41: "thread_exit", 42: "mmap", 43: "munmap", 44: "mremap", 46: "mprotect"}

# Argument layouts of arg[0..2].
L_SIZE, L_NMEMB_SIZE, L_OLD_SIZE, L_OLD_NMEMB_SIZE, L_OLD, L_ALIGN_SIZE, L_SIZE_ALIGN, L_OLD_ALIGN, \
    L_OLD_SIZE_ALIGN = range(9)

#: Record kind code (runtime/tracer/tracer.c enum scn_trace_kind) -> (function, AllocEvent kind, layout).
KIND_CODES = {
    1: ("malloc", "malloc", L_SIZE),
    2: ("calloc", "calloc", L_NMEMB_SIZE),
    3: ("realloc", "realloc", L_OLD_SIZE),
    4: ("reallocarray", "reallocarray", L_OLD_NMEMB_SIZE),
    5: ("free", "free", L_OLD),
    6: ("posix_memalign", "posix_memalign", L_ALIGN_SIZE),
    7: ("aligned_alloc", "aligned_alloc", L_ALIGN_SIZE),
    8: ("memalign", "memalign", L_ALIGN_SIZE),
    9: ("valloc", "valloc", L_SIZE),
    10: ("pvalloc", "pvalloc", L_SIZE),
}
_code = 11
for _kind, _mangled in (("operator_new", "_Znwm"), ("operator_new_array", "_Znam")):
    for _suffix, _layout in (("", L_SIZE), ("RKSt9nothrow_t", L_SIZE), ("St11align_val_t", L_SIZE_ALIGN),
                             ("St11align_val_tRKSt9nothrow_t", L_SIZE_ALIGN)):
        KIND_CODES[_code] = (_mangled + _suffix, _kind, _layout)
        _code += 1
for _kind, _mangled in (("operator_delete", "_ZdlPv"), ("operator_delete_array", "_ZdaPv")):
    for _suffix, _layout in (("", L_OLD), ("m", L_OLD_SIZE), ("St11align_val_t", L_OLD_ALIGN),
                             ("mSt11align_val_t", L_OLD_SIZE_ALIGN), ("RKSt9nothrow_t", L_OLD),
                             ("St11align_val_tRKSt9nothrow_t", L_OLD_ALIGN)):
        KIND_CODES[_code] = (_mangled + _suffix, _kind, _layout)
        _code += 1
del _code, _kind, _mangled, _suffix, _layout

_RELEASES = frozenset(c for c, (_, kind, _) in KIND_CODES.items() if kind in FREE_KINDS)
_RESIZES = frozenset(c for c, (_, kind, _) in KIND_CODES.items() if kind in REALLOC_KINDS)
_POSIX_MEMALIGN = 6


# --------------------------------------------------------------------------- reading
@dataclass
class PreloadLogInfo:
    """What the indexing pass found in a log (complete before the first event is yielded)."""
    path: str
    pid: int = 0
    ppid: int = 0
    start_realtime_ns: int = 0
    records: int = 0
    threads: List[int] = field(default_factory=list)           # tids, in order of first record
    calls_by_kind: Counter = field(default_factory=Counter)    # AllocEvent kind -> calls
    calls_by_function: Counter = field(default_factory=Counter)  # '_ZdlPvm' -> calls
    calls_by_thread: Dict[int, Counter] = field(default_factory=dict)
    last_seq: int = -1
    ended: bool = False         # an end mark was written: the process left through exit, _exit or exec
    missing: int = 0            # calls lost (killed, in flight at exit): made and never written
    moved_reallocs: int = 0
    thread_records: int = 0     # thread starts and exits (version 2)
    chunks: int = 0             # runs of consecutive records of one thread in the file
    first_ns: Optional[int] = None
    last_ns: Optional[int] = None
    reordered_reallocs: int = 0  # set while iterating: moved reallocs put before another thread's reuse
    version: int = 0
    made: Optional[int] = None   # version 4: records the process made (its counters, its end mark)
    size: int = 0                # bytes of the log
    stopped_at: Optional[int] = None  # a cut or damaged log (version 3): byte offset where reading stopped
    stop_reason: str = ""             # why, in words
    page_faults: Optional[int] = None  # minor faults from tracing start to the end mark (None: not measured)
    tracer_pages: int = 0              # of them, pages of the tracer's own buffers
    fresh_pages: int = 0               # inner pages of sampled blocks not resident at their malloc
    written_pages: int = 0             # of them, resident at their free: the program wrote them
    file_resident_kib: Optional[int] = None  # file-backed resident KiB (code, libraries, files) at the end mark
    #: version 5: window marks (capture --server): {1 (opens) or 2 (closes): {tid: its last clock before the mark,
    #: 0: the mark's own time}}
    window: Dict[int, Dict[int, int]] = field(default_factory=dict)

    @property
    def span_s(self) -> float:
        return 0.0 if self.first_ns is None else (self.last_ns - self.first_ns) / 1e9


class _Cursor:
    """One thread's records, read back from its runs in the file, ``block`` at a time."""

    __slots__ = ("f", "runs", "run", "left", "offset", "block", "buf", "pos", "head")

    def __init__(self, f, runs, block: int):
        self.f, self.runs, self.run, self.block = f, runs, 0, block
        self.left = self.offset = 0
        self.buf: list = []
        self.pos = 0
        self.head = None
        self.advance()

    def advance(self):
        if self.pos >= len(self.buf):
            if not self.left:
                if self.run >= len(self.runs):
                    self.head = None
                    return
                start, self.left = self.runs[self.run]
                self.offset = HEADER.size + start * RECORD.size
                self.run += 1
            n = min(self.left, self.block)
            self.f.seek(self.offset)
            data = self.f.read(n * RECORD.size)
            self.buf = list(RECORD.iter_unpack(data))
            self.offset += n * RECORD.size
            self.left -= n
            self.pos = 0
        self.head = self.buf[self.pos]
        self.pos += 1

    @staticmethod
    def cpu(_i: int) -> None:
        """No CPU clock before version 6."""
        return None


class _ChunkCursor:
    """One thread's records of a version 3 log: its chunks read back and decoded in C, ``block`` at a time."""

    __slots__ = ("f", "chunks", "next", "left", "block", "buf", "pos", "head", "data", "reader", "out", "shift",
                 "cpus", "cpu_out")

    def __init__(self, f, chunks, block: int, shift=None):
        self.f, self.chunks, self.next, self.left, self.block = f, chunks, 0, 0, block
        self.shift = shift           # a window's epochs put into the records' clocks (_Watch.shift)
        self.buf: list = []
        self.pos = 0
        self.head = None
        self.data = None             # the chunk being decoded: the C reader points into it
        self.cpus: list = []         # each record's CPU clock in buf (version 6; 0: none)
        self.cpu_out = (ctypes.c_uint64 * block)()
        self.reader = ctypes.create_string_buffer(_tracelog().scn_tl_reader_size())
        self.out = ctypes.create_string_buffer(RECORD.size * block)
        self.advance()

    def advance(self):
        if self.pos >= len(self.buf):
            n = self._decode() if self.left else 0
            while not n:
                if self.next >= len(self.chunks):
                    self.head = None
                    return
                offset, size, self.left = self.chunks[self.next]
                self.next += 1
                self.f.seek(offset)
                self.data = self.f.read(CHUNK_HEADER + size)
                if not _tracelog().scn_tl_open(self.reader, self.data, len(self.data)):
                    raise TraceFormatError(self.f.name, 1, 1, f"the chunk at byte {offset} changed since the log "
                                                              f"was indexed")
                n = self._decode()
            self.buf = list(RECORD.iter_unpack(memoryview(self.out)[:n * RECORD.size]))
            self.cpus = self.cpu_out[:n]
            if self.shift is not None:
                self.buf = self.shift(self.buf)
            self.pos = 0
        self.head = self.buf[self.pos]
        self.pos += 1

    def cpu(self, i: int) -> Optional[int]:
        """Record i of buf on its thread's CPU clock (ns; version 6: the last reading at or before it), None
        without one."""
        return self.cpus[i] or None

    def _decode(self) -> int:
        what, at = ctypes.c_char_p(), ctypes.c_uint64()
        n = _tracelog().scn_tl_read(self.reader, self.out, self.cpu_out, min(self.block, self.left),
                                    ctypes.byref(what), ctypes.byref(at))
        if what.value and n < self.left:      # the index counted records it can no longer decode
            offset = self.chunks[self.next - 1][0] + CHUNK_HEADER + at.value
            raise TraceFormatError(self.f.name, 1, 1, f"byte {offset}: {what.value.decode()}")
        self.left -= n
        return n


class PreloadLog(EventSource):
    """The events of a tracer log in causal global order; ``.info`` is the indexing pass's summary."""

    def __init__(self, path, block_records: int = 256, extra_events: bool = False, window: bool = False):
        self.path = str(path)
        self.block = max(1, block_records)
        self.extra_events = extra_events
        self.info = PreloadLogInfo(self.path)
        self._runs: Dict[int, list] = {}
        self._index()
        # With window (and a log with marks): merged by (epoch, clock), a "window" event between the epochs,
        # and what was live at the open made there (trace/window.py).
        self._watch = _Watch(self.info.window) if window and 1 in self.info.window and self.info.version >= 3 else None
        self._events = self._merge()
        if self._watch is not None:
            from .window import windowed_events
            self._events = windowed_events(self._events)

    @property
    def windowed(self) -> bool:
        """Its events are the window's (asked for, and the log has window marks), not the whole log's."""
        return self._watch is not None

    @property
    def report(self) -> ParseReport:
        """A ParseReport saying what it can about this log, for TraceStats and format_trace_stats (which
        were written for ltrace logs: 'lines' are records; set exit_status from the capture if known)."""
        info = self.info
        rep = ParseReport(self.path)
        rep.lines = rep.events = info.records
        rep.threads = set(info.threads)
        rep.has_timestamps = True
        rep.has_durations = info.version < 3      # version 3 does not record the time spent in a call
        if info.ended:
            rep.exits[info.pid] = "exited"
        rep.truncated = info.stopped_at is not None
        return rep

    # ---------------------------------------------------------------- pass 1
    def _error(self, record: int, message: str):
        # 'line' is the record's 1-based position in the file, the header being record 1
        raise TraceFormatError(self.path, record, 1, message)

    def _index(self) -> None:
        info, runs = self.info, self._runs
        try:
            f = open(self.path, "rb")
        except OSError as e:
            raise TraceFormatError(self.path, 1, 1, f"cannot read the trace log: {e.strerror}") from None
        with f:
            head = f.read(HEADER.size)
            if len(head) < HEADER.size or head[:8] != MAGIC:
                what = "empty" if not head else "too short" if len(head) < HEADER.size else "bad magic"
                self._error(1, f"not a scenc tracer log ({what}; expected a 64-byte header starting with "
                               f"'SCNTRACE')")
            _, version, rsize, info.pid, info.ppid, _, info.start_realtime_ns = HEADER.unpack(head)
            info.version = version
            info.size = os.fstat(f.fileno()).st_size
            if version in (3, 4, 5, 6) and rsize == 0:
                at = first_chunk(head)
                if at is None:
                    self._error(1, f"a version 4 header whose chunks start at byte "
                                   f"{struct.unpack_from('<Q', head, 40)[0]}: the log is damaged")
                self._index_chunks(f, at)
                return
            if version not in READS or rsize != RECORD.size:
                self._error(1, f"tracer log version {version} with {rsize}-byte records; this scenc reads versions "
                               f"{', '.join(map(str, READS))} with {RECORD.size}-byte records (rebuild the tracer "
                               f"and capture again)")
            whole = (info.size - HEADER.size) // RECORD.size
            if (info.size - HEADER.size) % RECORD.size:     # the disk filled up, or it was cut: read the whole ones
                info.stopped_at = HEADER.size + whole * RECORD.size
                info.stop_reason = (f"the log is cut short inside a record ({(info.size - HEADER.size) % RECORD.size} "
                                    f"bytes of record {whole + 2})")
            last_by_tid: Dict[int, int] = {}
            counts: Dict[int, Counter] = {}
            kinds = KIND_CODES
            moved = 0
            first_ns = last_ns = None
            max_seq = -1
            end_total = 0
            index = 0
            prev_tid = None
            current = None           # the run being extended: [start, count]
            while index < whole:
                data = f.read(RECORD.size * min(8192, whole - index))
                if not data:
                    break
                for seq, ns, tid, kind, span in _INDEX.iter_unpack(data):
                    if kind == KIND_END:
                        info.ended = True
                        end_total = max(end_total, seq)
                        prev_tid = None
                        index += 1
                        continue
                    last = last_by_tid.get(tid)
                    if last is None:
                        if not tid:
                            self._error(index + 2, f"record {index + 2} (byte {HEADER.size + index * 64}) has thread "
                                                   f"id 0: the log is damaged")
                        last_by_tid[tid] = seq
                        counts[tid] = Counter()
                        runs[tid] = []
                        info.threads.append(tid)
                    elif seq <= last:
                        self._error(index + 2, f"record {index + 2} (byte {HEADER.size + index * 64}): sequence "
                                               f"number {seq} after {last} in thread {tid}: the log is damaged")
                    last_by_tid[tid] = seq
                    if kind in EXTRA_KINDS and version > 1:
                        info.thread_records += 1
                    elif kind not in kinds:
                        self._error(index + 2, f"record {index + 2} (byte {HEADER.size + index * 64}) has unknown "
                                               f"kind {kind}: the log is damaged")
                    else:
                        counts[tid][kind] += 1
                    if span:
                        if span > seq or kind not in _RESIZES:
                            self._error(index + 2, f"record {index + 2}: a span of {span} on a "
                                                   f"{kinds[kind][0]} record: the log is damaged")
                        moved += 1
                    if seq > max_seq:
                        max_seq = seq
                    if first_ns is None or ns < first_ns:
                        first_ns = ns
                    if last_ns is None or ns > last_ns:
                        last_ns = ns
                    if tid == prev_tid:
                        current[1] += 1
                    else:
                        current = [index, 1]
                        runs[tid].append(current)
                        prev_tid = tid
                    index += 1
        info.moved_reallocs = moved
        info.first_ns, info.last_ns = first_ns, last_ns
        info.chunks = sum(len(r) for r in runs.values())
        self._totals(counts, max_seq, end_total)

    def _totals(self, counts: Dict[int, Counter], max_seq: int, end_total: int) -> None:
        """Calls by kind, function and thread from counts by thread and kind code; missing numbers (version 4:
        the records made that the log does not hold)."""
        info = self.info
        info.records = sum(sum(c.values()) for c in counts.values())
        if info.version >= 4:
            info.last_seq = max_seq
            info.missing = max(0, (info.made or 0) - info.records - info.thread_records)
        else:
            used = info.records + info.moved_reallocs + info.thread_records
            if used > max_seq + 1:
                self._error(1, f"{used - max_seq - 1} sequence numbers are used twice: the log is damaged or two "
                               f"processes wrote to it")
            info.last_seq = max(max_seq, end_total - 1)
            info.missing = info.last_seq + 1 - used
        for tid in info.threads:
            info.calls_by_thread[tid] = Counter()
            for code, n in counts[tid].items():
                function, kind, _ = KIND_CODES[code]
                info.calls_by_kind[kind] += n
                info.calls_by_function[function] += n
                info.calls_by_thread[tid][kind] += n

    def _index_chunks(self, f, at: int) -> None:
        """Versions 3 and 4: runtime/tools/tracelog.c reads every chunk's header and census (not its records)."""
        info, lib = self.info, _tracelog()
        scan = lib.scn_tl_scan_file(f.fileno(), at, info.size)
        if not scan:
            raise MemoryError("scn_tl_scan_file")
        try:
            s = scan.contents
            counts: Dict[int, Counter] = {}
            control, last = set(), {}
            for t in s.threads[:s.nthreads]:
                if t.records and t.counts[K_WINDOW] == t.records:   # the tracer's control thread: marks only
                    control.add(t.tid)
                    self._runs[t.tid] = []
                    continue
                info.threads.append(t.tid)
                last[t.tid] = t.last_seq
                counts[t.tid] = Counter({c: n for c, n in enumerate(t.counts) if n and c in KIND_CODES})
                self._runs[t.tid] = []
            for ch in s.chunks[:s.nchunks]:
                self._runs[s.threads[ch.thread].tid].append((ch.offset, ch.bytes, ch.count))
            for tid in control:
                self._read_marks(f, self._runs.pop(tid), last)
            info.moved_reallocs, info.thread_records, info.ended = s.moved, s.extra, bool(s.ended)
            if s.any:
                info.first_ns, info.last_ns = s.first_ns, s.last_ns
            info.chunks = s.nchunks
            if s.faulted:
                info.page_faults, info.tracer_pages = s.faults_end - s.faults_start, s.tracer_pages
                info.fresh_pages, info.written_pages = s.fresh_pages, s.written_pages
            info.file_resident_kib = s.file_kib or None
            if s.what:
                info.stopped_at, info.stop_reason = s.stop, s.what.decode()
            if info.version >= 4:
                info.made = max(s.made, s.end_seq)
            self._totals(counts, s.max_seq if s.any else -1, s.end_seq)
        finally:
            lib.scn_tl_scan_free(scan)

    def _read_marks(self, f, chunks: list, last: Dict[int, int]) -> None:
        """The control thread's chunks: each K_WINDOW record names a thread and its last clock before the mark;
        under tid 0, the mark's own time (the clock it was written at)."""
        c = _ChunkCursor(f, chunks, 256)
        while c.head is not None:
            r = c.head
            which, tid, seq = r[8], r[9], r[10]
            if r[3] == K_WINDOW and which in (1, 2):
                cuts = self.info.window.setdefault(which, {})
                cuts[0] = min(cuts.get(0, r[0]), r[0])     # the mark's own time: for the threads it did not name
                if tid in last:
                    cuts[tid] = seq
            c.advance()

    # ---------------------------------------------------------------- pass 2
    def _merge(self) -> Iterator[AllocEvent]:
        """By sequence number (version 4: by (clock, thread), the threads in order of their first chunk, and an
        event's line is its place in this order, every record counted), step for step as trace_read.h's tr_merge."""
        info = self.info
        base = info.first_ns or 0
        clocks = info.version >= 4
        merged = 0
        heappush, heappop = heapq.heappush, heapq.heappop
        with open(self.path, "rb") as f:
            cursor = _ChunkCursor if info.version >= 3 else _Cursor
            watch = self._watch
            cursors = [cursor(f, self._runs[tid], self.block) if watch is None else
                       _ChunkCursor(f, self._runs[tid], self.block, watch.shift(tid)) for tid in info.threads]
            if len(cursors) == 1:
                yield from self._one_thread(cursors[0], base, clocks)
                return
            if not cursors:
                if watch is not None:
                    yield from watch.marks(None, merged)
                return
            heap = [(c.head[0], i) for i, c in enumerate(cursors) if c.head is not None]
            heapq.heapify(heap)
            # Moved reallocs at the head of a thread, by the block they released.
            inflight: Dict[int, int] = {}
            for i, c in enumerate(cursors):
                if c.head is not None and c.head[7]:
                    inflight[c.head[8]] = i
            last = -1
            while heap:
                seq, i = heappop(heap)
                c = cursors[i]
                r = c.head
                if r is None or r[0] != seq:
                    continue                     # taken out of turn (see below)
                bound = heap[0] if heap else _NO_BOUND       # the next thread's turn: (seq, thread)
                while True:                      # this thread's records up to the next thread's turn
                    seq = r[0]
                    if inflight and r[11] and r[3] not in _RELEASES:
                        j = inflight.get(r[11])
                        if j is not None and j != i and cursors[j].head[0] - cursors[j].head[7] < seq:
                            # Another thread's realloc released this block before we got it
                            # (its first number is older) but took its final number later.
                            o = cursors[j].head
                            info.reordered_reallocs += 1
                            if watch is not None and o[0] >> _EPOCH_SHIFT > watch.phase:
                                yield from watch.marks(o[0], merged)
                            merged += 1
                            yield _event(o, base, merged if clocks else None, cursors[j].cpu(cursors[j].pos - 1))
                            _advance(cursors[j], j, heap, inflight)
                            bound = heap[0]
                    if seq < last + (not clocks):       # version 4: threads' clocks may be equal
                        self._error(1, f"sequence number {seq} appears twice (threads' chunks overlap): the log "
                                       f"is damaged")
                    last = seq
                    if watch is not None and seq >> _EPOCH_SHIFT > watch.phase:
                        yield from watch.marks(seq, merged)
                    merged += 1
                    if r[3] not in EXTRA_KINDS:
                        yield _event(r, base, merged if clocks else None, c.cpu(c.pos - 1))
                    elif self.extra_events:
                        yield _extra_event(r, base, merged if clocks else None)
                    if r[7] and inflight.get(r[8]) == i:
                        del inflight[r[8]]
                    pos = c.pos                  # c.advance(), its commonest case written out
                    if pos < len(c.buf):
                        r = c.head = c.buf[pos]
                        c.pos = pos + 1
                    else:
                        c.advance()
                        r = c.head
                        if r is None:
                            break
                    if r[7]:
                        inflight[r[8]] = i
                    if (r[0], i) > bound:
                        heappush(heap, (r[0], i))
                        break
            if watch is not None:
                yield from watch.marks(None, merged)

    def _one_thread(self, c, base: int, clocks: bool) -> Iterator[AllocEvent]:
        """The merge of a log of one thread: its records in their order, a block at a time (no other thread's
        realloc can take a block out of turn); `clocks` (version 4): an event's line is its place, every record
        counted, as in _merge."""
        last, extra_events, merged, watch = -1, self.extra_events, 0, self._watch
        while c.head is not None:
            buf, at = c.buf, max(c.pos - 1, 0)
            for i, r in enumerate(buf[at:] if at else buf, at):
                seq = r[0]
                if seq <= last:
                    self._error(1, f"sequence number {seq} appears twice (threads' chunks overlap): the log "
                                   f"is damaged")
                last = seq
                if watch is not None and seq >> _EPOCH_SHIFT > watch.phase:
                    yield from watch.marks(seq, merged)
                merged += 1
                if r[3] not in EXTRA_KINDS:
                    yield _event(r, base, merged if clocks else None, c.cpu(i))
                elif extra_events:
                    yield _extra_event(r, base, merged if clocks else None)
            c.pos = len(buf)
            c.advance()
        if watch is not None:
            yield from watch.marks(None, merged)


_NO_BOUND = (float("inf"), 0)


_EPOCH_SHIFT = 58      # a window's epoch, above any clock (trace_read.h's TR_EPOCH_SHIFT)


class _Watch:
    """A log's window marks in the merge, as trace_read.h's: records are merged by (epoch, clock), the epoch (0
    before the window, 1 in it, 2 after) being the marks their thread had passed where the mark found it (its
    clock named; a thread not named, by the mark's time), and a "window" event comes between the epochs."""

    def __init__(self, window: Dict[int, Dict[int, int]]):
        self.cuts = window
        self.phase = 0

    def shift(self, tid: int):
        """The function that puts thread tid's epochs into a buffer of its records' clocks."""
        inf = float("inf")
        cut1, cut2 = (self.cuts[w].get(tid, self.cuts[w].get(0, inf)) if w in self.cuts else inf for w in (1, 2))
        return lambda buf: [(r[0] + (((r[0] > cut1) + (r[0] > cut2)) << _EPOCH_SHIFT),) + r[1:] for r in buf]

    def marks(self, key: Optional[int], line: int) -> Iterator[AllocEvent]:
        """The marks due before a record of this clock (None: after the last record)."""
        epoch = 2 if key is None else key >> _EPOCH_SHIFT
        while self.phase < epoch and self.phase + 1 in self.cuts:
            self.phase += 1
            yield AllocEvent(line, 0, None, "window", self.phase, 1, None, None, None, False, line, None)


def _advance(c: _Cursor, i: int, heap: list, inflight: Dict[int, int]) -> None:
    r = c.head
    if r[7] and inflight.get(r[8]) == i:
        del inflight[r[8]]
    c.advance()
    if c.head is not None:
        heapq.heappush(heap, (c.head[0], i))
        if c.head[7]:
            inflight[c.head[8]] = i


def _fields(layout: int) -> tuple:
    """Record positions (8, 9, 10 = arg[0..2]) of (size, nmemb, align, old_ptr) for a layout; 0 = absent."""
    return {L_SIZE: (8, 0, 0, 0), L_OLD: (0, 0, 0, 8), L_NMEMB_SIZE: (9, 8, 0, 0), L_OLD_SIZE: (9, 0, 0, 8),
            L_OLD_NMEMB_SIZE: (10, 9, 0, 8), L_ALIGN_SIZE: (9, 0, 8, 0), L_SIZE_ALIGN: (8, 0, 9, 0),
            L_OLD_ALIGN: (0, 0, 9, 8), L_OLD_SIZE_ALIGN: (9, 0, 10, 8)}[layout]


#: code -> (kind, size, nmemb, align, old positions, what the result means: 0 free, 1 pointer, 2 posix_memalign)
_DECODE = {code: (kind, *_fields(layout), 0 if kind in FREE_KINDS else 2 if code == _POSIX_MEMALIGN else 1)
           for code, (_, kind, layout) in KIND_CODES.items()}


def _event(r, base: int, line: Optional[int] = None, cpu: Optional[int] = None) -> AllocEvent:
    """The event of a call record; line: its place in the merged order (version 4), else its number + 1; cpu: its
    thread's CPU clock (version 6)."""
    seq, ns, tid, code, flags, err, dur, span, _a0, _a1, _a2, result = r
    kind, si, ni, ai, oi, rk = _DECODE[code]
    size = r[si] if si else None
    nmemb = r[ni] if ni else 1
    align = r[ai] if ai else None
    old = r[oi] if oi else None
    if rk == 1:
        # NULL is a failure, except from realloc(p, 0), which frees p (as in the ltrace parser)
        failed = flags & F_THREW != 0 or (result == 0 and not (old and size * nmemb == 0))
    elif rk == 0:
        result, failed = None, False
    else:
        failed = err != 0
        if failed:
            result = None
    if line is None:
        line, start = seq + 1, seq + 1 - span
    else:
        start = line
    return _new_event(AllocEvent, (line, tid, (ns - base) / 1e9, kind, size, nmemb, align, old, result, failed,
                                   start, dur / 1e9 if dur else None, cpu))


_new_event = tuple.__new__       # AllocEvent(*fields) without the named tuple's own __new__ (a Python call)


def _extra_event(r, base: int, line: Optional[int] = None) -> AllocEvent:
    seq, ns, tid, code, flags, _err, dur, _span, a0, a1, a2, result = r
    line = seq + 1 if line is None else line
    kind = EXTRA_KINDS[code]
    size, nmemb, align, old, res = a0 or None, 1, None, None, None
    if kind == "mmap":
        nmemb, align, res = a1, a2, result or None
    elif kind == "munmap":
        size, old = a1, a0
    elif kind == "mremap":
        size, nmemb, align, old, res = a2, flags, a1, a0, result or None
    elif kind == "mprotect":
        size, nmemb, old = a1, a2, a0
    failed = (kind in ("mmap", "mremap") and res is None) or (kind == "mprotect" and result != 0)
    return AllocEvent(line, tid, (ns - base) / 1e9, kind, size, nmemb, align, old, res, failed, line,
                      dur / 1e9 if dur else None)


# --------------------------------------------------------------------------- the C decoder (version 3)
CHUNK_HEADER = 72         # struct scn_tl_chunk of runtime/tracer/tracelog.h


class _Thread(ctypes.Structure):
    _fields_ = [("tid", ctypes.c_uint32), ("chunks", ctypes.c_uint32), ("last_seq", ctypes.c_uint64),
                ("records", ctypes.c_uint64), ("counts", ctypes.c_uint64 * 64)]


class _ChunkRef(ctypes.Structure):
    _fields_ = [("offset", ctypes.c_uint64), ("bytes", ctypes.c_uint32), ("count", ctypes.c_uint32),
                ("thread", ctypes.c_uint32), ("pad", ctypes.c_uint32)]


class _Scan(ctypes.Structure):
    """struct scn_tl_scan of runtime/tools/tracelog.c."""
    _fields_ = [(name, ctypes.c_uint64) for name in ("offset", "calls", "extra", "moved", "max_seq", "end_seq",
                                                     "first_ns", "last_ns")] + \
               [(name, ctypes.c_uint32) for name in ("ended", "any", "nthreads", "nchunks")] + \
               [("stop", ctypes.c_uint64), ("what", ctypes.c_char_p), ("threads", ctypes.POINTER(_Thread)),
                ("chunks", ctypes.POINTER(_ChunkRef))] + \
               [(name, ctypes.c_uint32) for name in ("cap_threads", "cap_chunks", "last_thread", "pad",
                                                     "faulted", "pad2")] + \
               [(name, ctypes.c_uint64) for name in ("faults_start", "faults_end", "tracer_pages", "fresh_pages",
                                                     "written_pages")] + \
               [("counted", ctypes.c_uint32), ("overflow", ctypes.c_uint32), ("made", ctypes.c_uint64),
                ("file_kib", ctypes.c_uint64)]


@functools.lru_cache(maxsize=None)
def _tracelog():
    """runtime/tools/tracelog.c, built into the scenc cache on first use and loaded."""
    from .native import tracelog_library
    lib = ctypes.CDLL(str(tracelog_library()))
    lib.scn_tl_scan_file.restype = ctypes.POINTER(_Scan)
    lib.scn_tl_scan_file.argtypes = [ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64]
    lib.scn_tl_scan_free.argtypes = [ctypes.POINTER(_Scan)]
    lib.scn_tl_reader_size.restype = ctypes.c_size_t
    lib.scn_tl_open.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.scn_tl_read.restype = ctypes.c_size_t
    lib.scn_tl_read.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                ctypes.POINTER(ctypes.c_char_p),
                                ctypes.POINTER(ctypes.c_uint64)]
    return lib


def first_chunk(head: bytes) -> Optional[int]:
    """Where a log's chunks start, from its 64-byte header: version 3 after it, version 4 after the counters
    (the header's reserved[0]); None when a version 4 header gives an offset out of range."""
    version = struct.unpack_from("<I", head, 8)[0]
    if version < 4:
        return HEADER.size
    at = struct.unpack_from("<Q", head, 40)[0]
    return at if HEADER.size <= at <= 1 << 20 and at % 64 == 0 else None


def missing_sentence(info: PreloadLogInfo) -> str:
    """How the missing calls were counted, in words (for "N call(s) are missing from the log (...)")."""
    if info.version >= 4 and info.made is not None:
        return f"by the tracer's counters: {info.made} records made, {info.made - info.missing} written"
    return f"sequence numbers never written, last number {info.last_seq}"


def stop_sentence(info: PreloadLogInfo) -> str:
    """Where and why reading a cut or damaged log stopped, in words."""
    return f"reading stopped at byte {info.stopped_at} of {info.size}: {info.stop_reason}"


def is_preload_log(path) -> bool:
    """Does the file start like a tracer log (so `scenc trace-stats` can pick the right reader)?"""
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def raw_records(path) -> Iterator[tuple]:
    """Every record of a log as a RECORD tuple (the version 2 layout), in file order, end marks left out."""
    log = PreloadLog(path)
    with open(log.path, "rb") as f:
        if log.info.version < 3:
            f.seek(HEADER.size)
            data = f.read()
            data = data[:len(data) - len(data) % RECORD.size]
            yield from (r for r in RECORD.iter_unpack(data) if r[3] != KIND_END)
            return
        for ref in sorted(ref for runs in log._runs.values() for ref in runs):    # (offset, ...): file order
            cursor = _ChunkCursor(f, [ref], 256)
            while cursor.head is not None:
                yield cursor.head
                cursor.advance()


def parse_preload_log(path, block_records: int = 256, extra_events: bool = False, window: bool = False
                      ) -> PreloadLog:
    """The AllocEvents of a tracer log, in global sequence order (what their fields hold: docs/architecture.md,
    "Inside the subsystems").

    Indexes the whole file first (``.info`` is then complete), then merges the
    threads' records lazily. Raises TraceFormatError (file:record:1: message)
    for a file that is not a tracer log, is truncated mid-record or is damaged.
    """
    return PreloadLog(path, block_records, extra_events, window)
