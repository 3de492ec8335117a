"""DJ Delorie's workload files (`.wl`), read as a stream of AllocEvents.

    wl = open_workload("oocalc.wl", extra_events=True)
    for ev in wl: ...                 # AllocEvents, the threads merged in an order their syncs allow
    wl.report, wl.info, wl.losses(), wl.master_tid

A workload is what glibc's malloc trace simulator, `trace_run` (glibc's dj/malloc branch; allocbench's
dj_trace benchmark), plays back and `trace2wl` writes: one-byte opcodes and big-endian 7-bit varints; a
main stream (slots, syncs, threads, each thread's offset) and one stream per thread, ordered between
threads by SYNC_W/SYNC_R pairs. The format as read here, what is taken from trace_run's semantics and
where this reader differs (a failed call is an event, realloc(p, 0) a free): docs/capture.md, "DJ
Delorie's workloads".

The order of the events: one thread runs until it waits for a sync or ends; a thread that writes a
sync another thread waits for hands over to it at once (trace2wl wrote that SYNC_W when the other
thread's call came) and is resumed when that one waits or ends. `line` is the event's number in that
order; times are None; pointers are made up, one per slot (`slot_pointer`), so a reused slot is a
reused address. With extra_events, a thread starts (thread_start, its creator the writer) where its
start sync is written and ends (thread_exit) at its DONE.

Memory follows the threads (a 64 KiB window each), the slots (a byte each) and the syncs (a bit each),
never the file's length.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from itertools import chain
from typing import Iterator, List, Optional

from .events import AllocEvent, EventSource
from .ltrace.report import ParseReport, TraceFormatError

__all__ = ["WORKLOAD_SUFFIX", "OPCODES", "looks_like_workload", "open_workload", "Workload", "WorkloadInfo",
           "slot_pointer"]

WORKLOAD_SUFFIX = ".wl"

# The opcodes, as glibc's malloc/mtrace.h numbers them for the simulator (C_NOP ... C_POSIX_MEMALIGN).
NOP, DONE, MALLOC, CALLOC, REALLOC, FREE, SYNC_W, SYNC_R = range(8)
ALLOC_PTRS, ALLOC_SYNCS, NTHREADS, START_THREAD, MEMALIGN, VALLOC, PVALLOC, POSIX_MEMALIGN = range(8, 16)
OPCODES = {NOP: "NOP", DONE: "DONE", MALLOC: "MALLOC", CALLOC: "CALLOC", REALLOC: "REALLOC", FREE: "FREE",
           SYNC_W: "SYNC_W", SYNC_R: "SYNC_R", ALLOC_PTRS: "ALLOC_PTRS", ALLOC_SYNCS: "ALLOC_SYNCS",
           NTHREADS: "NTHREADS", START_THREAD: "START_THREAD", MEMALIGN: "MEMALIGN", VALLOC: "VALLOC",
           PVALLOC: "PVALLOC", POSIX_MEMALIGN: "POSIX_MEMALIGN"}

WINDOW = 1 << 16          # bytes of a thread's stream read at once
_OP_MAX = 1 + 3 * 10      # the longest op: an opcode and three 64-bit varints
_BATCH = 2048             # events handed out at once
POINTER_BASE = 1 << 32    # the made-up address of slot 0's block (slot n: + 16 n)


def slot_pointer(slot: int) -> int:
    """The address a slot's block gets in the events: one per slot, 16 apart."""
    return POINTER_BASE + 16 * slot


def looks_like_workload(head: bytes, path) -> bool:
    """A workload's first byte is ALLOC_PTRS (trace2wl writes it first); a `.wl` file is taken for one too, so
    that a damaged one is refused as a workload, not as a text log."""
    return bool(head) and head[0] == ALLOC_PTRS or str(path).endswith(WORKLOAD_SUFFIX)


# --------------------------------------------------------------------------- the main stream
@dataclass
class WorkloadInfo:
    path: str
    size: int                       # bytes
    slots: int = 0                  # ALLOC_PTRS
    syncs: int = 0                  # ALLOC_SYNCS
    threads: int = 0                # NTHREADS
    starts: List[int] = field(default_factory=list)   # each thread's first byte
    header_bytes: int = 0

    def to_dict(self) -> dict:
        return {"bytes": self.size, "slots": self.slots, "syncs": self.syncs, "threads": self.threads,
                "starts": list(self.starts), "header_bytes": self.header_bytes}


def _varint(buf, i: int):
    """(value, next index) of the big-endian 7-bit varint at buf[i] (IndexError past the end)."""
    v = 0
    while True:
        c = buf[i]
        i += 1
        v |= c & 0x7F
        if c < 0x80:
            return v, i
        v <<= 7


def read_info(path) -> WorkloadInfo:
    """The main stream: how many slots, syncs and threads, and where each thread starts."""
    path = str(path)
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(min(size, 1 << 20))
    info = WorkloadInfo(path, size)

    def bad(at: int, message: str):
        return TraceFormatError(path, at, 1, f"byte {at}: {message} (not a DJ Delorie workload, or a damaged one: "
                                             f"its main stream is ALLOC_PTRS n, ALLOC_SYNCS n, NTHREADS n, a "
                                             f"START_THREAD offset per thread, DONE)")
    if not head:
        raise bad(0, "the file is empty")
    if head[0] not in (NOP, ALLOC_PTRS):
        raise bad(0, f"it starts with byte {head[0]:#04x}, not ALLOC_PTRS ({ALLOC_PTRS:#04x})")
    i, seen = 0, set()
    try:
        while True:
            at = i
            op = head[i]
            i += 1
            if op == NOP:
                continue
            if op == DONE:
                break
            if op not in (ALLOC_PTRS, ALLOC_SYNCS, NTHREADS, START_THREAD):
                raise bad(at, f"opcode {OPCODES.get(op, f'{op:#04x}')} in the main stream")
            value, i = _varint(head, i)
            if op == START_THREAD:
                if NTHREADS not in seen:
                    raise bad(at, "START_THREAD before NTHREADS")
                if len(info.starts) == info.threads:
                    raise bad(at, f"more START_THREADs than the {info.threads} threads NTHREADS declares")
                if not 0 < value < size:
                    raise bad(at, f"a thread starts at byte {value}, outside the file ({size} bytes)")
                info.starts.append(value)
                continue
            if op in seen:
                raise bad(at, f"a second {OPCODES[op]}")
            seen.add(op)
            if op == ALLOC_PTRS:
                info.slots = value
            elif op == ALLOC_SYNCS:
                info.syncs = value
            else:
                info.threads = value
    except IndexError:
        raise bad(len(head), "the main stream has no DONE") from None
    info.header_bytes = i
    missing = [OPCODES[op] for op in (ALLOC_PTRS, ALLOC_SYNCS, NTHREADS) if op not in seen]
    if missing:
        raise bad(i - 1, f"the main stream has no {', '.join(missing)}")
    if len(info.starts) < info.threads:
        raise bad(i - 1, f"NTHREADS declares {info.threads} threads but {len(info.starts)} START_THREADs follow")
    return info


# --------------------------------------------------------------------------- what the reading says
class WorkloadReport(ParseReport):
    """A ParseReport for a workload: `lines` counts the events; a workload has no exit lines, so it is
    incomplete only when cut short or when threads wait forever for syncs nobody writes."""

    def __init__(self, filename: str):
        super().__init__(filename)
        self.cut_at: Optional[int] = None          # the byte where a thread's stream ran out
        self.stuck: List[int] = []                 # tids still waiting when no thread could go on
        self.implicit_frees = 0                    # blocks trace_run frees because a new one lands in their slot

    @property
    def incomplete(self) -> bool:
        return self.cut_at is not None or bool(self.stuck)

    def to_dict(self) -> dict:
        d = super().to_dict()
        d.update({"cut_at": self.cut_at, "stuck_threads": list(self.stuck), "implicit_frees": self.implicit_frees,
                  "incomplete": self.incomplete})
        return d


# --------------------------------------------------------------------------- the threads, merged
class _Thread:
    __slots__ = ("index", "tid", "start", "buf", "base", "eof", "i", "started", "done")

    def __init__(self, index: int, start: int):
        self.index, self.tid, self.start = index, index + 1, start
        self.buf, self.base, self.i, self.eof = b"", start, 0, False
        self.started = self.done = False

    def fill(self, fd: int, size: int) -> None:
        """Keep the unread bytes and read the next window after them."""
        pos = self.base + self.i
        self.buf, self.base, self.i = os.pread(fd, WINDOW, pos), pos, 0
        self.eof = pos + len(self.buf) >= size


class Workload(EventSource):
    """The events of a workload, merged from its threads in an order its syncs allow (module doc)."""

    def __init__(self, path, extra_events: bool = False):
        self.path = str(path)
        self.info = read_info(self.path)
        self.report = WorkloadReport(self.path)
        self.extra_events = extra_events
        self.threads = [_Thread(i, start) for i, start in enumerate(self.info.starts)]
        self.master_tid: Optional[int] = self._first_ready()
        self.calls = 0
        self._chunks = self._run()
        self._events = chain.from_iterable(self._chunks)

    def batches(self) -> Iterator[list]:
        """The events in the lists they are made in (the converter's feed takes them so)."""
        return self._chunks

    def close(self):
        self._chunks.close()

    def _first_op(self, t: _Thread, fd: int):
        t.fill(fd, self.info.size)
        while t.i < len(t.buf) and t.buf[t.i] == NOP:
            t.i += 1
        return t.buf[t.i] if t.i < len(t.buf) else None

    def _first_ready(self) -> Optional[int]:
        """The thread that starts on its own (its first op is not a SYNC_R): trace2wl's first thread."""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            for t in self.threads:
                if self._first_op(t, fd) not in (SYNC_R, None):
                    return t.tid
        finally:
            os.close(fd)
        return None

    def _bad(self, t: _Thread, at: int, message: str) -> TraceFormatError:
        return TraceFormatError(self.path, at, 1, f"byte {at} (thread {t.tid}): {message}")

    def losses(self) -> List[str]:
        rep, out = self.report, []
        if rep.cut_at is not None:
            out.append(f"the workload is cut short: a thread's stream runs out at byte {rep.cut_at} before its "
                       f"DONE; what comes before is kept")
        if rep.stuck:
            out.append(f"{len(rep.stuck)} thread(s) (tid {', '.join(map(str, rep.stuck[:8]))}) wait for syncs "
                       f"no thread writes: trace_run would wait for ever; their calls after that are not read")
        return out

    def _run(self) -> Iterator[list]:
        info, report, extra = self.info, self.report, self.extra_events
        fd = os.open(self.path, os.O_RDONLY)
        try:
            yield from self._merge(fd, info, report, extra)
        finally:
            os.close(fd)

    def _merge(self, fd: int, info: WorkloadInfo, report: WorkloadReport, extra: bool) -> Iterator[list]:
        size, nslots, nsyncs = info.size, info.slots, info.syncs
        live = bytearray(nslots + 1)
        written = bytearray(nsyncs // 8 + 1)
        waiting: dict = {}                    # sync -> threads waiting for it
        ready: List[_Thread] = []             # a stack: the thread that switched away is resumed first
        base, note = POINTER_BASE, report.add
        out: list = []
        line = 0
        for t in self.threads:
            op = self._first_op(t, fd)
            if op == SYNC_R:
                t.i += 1
                k, t.i = self._number(t, fd, t.i - 1, "sync", nsyncs)
                waiting.setdefault(k, []).append(t)
            elif op is None:
                t.done = True
                report.cut_at = t.start if report.cut_at is None else report.cut_at
        ready = [t for t in reversed(self.threads) if not t.done and not any(t in w for w in waiting.values())]
        current = ready.pop() if ready else None
        if current is not None:
            current.started = True

        def event(tid, kind, size_, nmemb, align, old, res, failed):
            nonlocal line
            line += 1
            out.append(AllocEvent(line, tid, None, kind, size_, nmemb, align, old, res, failed, line, None))

        while current is not None:
            t = current
            tid = t.tid
            buf, i = t.buf, t.i
            switch = None                     # the thread to run next, when this one stops or hands over
            while switch is None:
                if len(out) >= _BATCH:
                    t.i = i
                    yield out
                    out = []
                if i + _OP_MAX > len(buf) and not t.eof:
                    t.i = i
                    t.fill(fd, size)
                    buf, i = t.buf, 0
                at = t.base + i
                try:
                    op = buf[i]
                    i += 1
                    if op == MALLOC or op == CALLOC or op == VALLOC or op == PVALLOC or op == MEMALIGN:
                        c = buf[i]
                        if c < 0x80:
                            slot, i = c, i + 1
                        else:
                            slot, i = _varint(buf, i)
                        align = None
                        if op == MEMALIGN:
                            align, i = _varint(buf, i)
                        c = buf[i]
                        if c < 0x80:
                            n, i = c, i + 1
                        else:
                            n, i = _varint(buf, i)
                        kind = _ALLOC_KIND[op]
                        if not slot:
                            self.calls += 1
                            event(tid, kind, n, 1, align, None, 0, n > 0)
                            continue
                        if slot > nslots:
                            raise self._bad(t, at, f"{OPCODES[op]} into slot {slot}, beyond the {nslots} slots "
                                                   f"ALLOC_PTRS declares")
                        if live[slot]:
                            report.implicit_frees += 1
                            note("wl-slot-refilled", line + 1, f"byte {at}: {OPCODES[op]} into slot {slot}, "
                                                               f"which still holds a block: it is freed first")
                            self.calls += 1
                            event(tid, "free", None, 1, None, base + 16 * slot, None, False)
                        live[slot] = 1
                        self.calls += 1
                        event(tid, kind, n, 1, align, None, base + 16 * slot, False)
                    elif op == FREE:
                        c = buf[i]
                        if c < 0x80:
                            slot, i = c, i + 1
                        else:
                            slot, i = _varint(buf, i)
                        if slot > nslots:
                            raise self._bad(t, at, f"FREE of slot {slot}, beyond the {nslots} slots ALLOC_PTRS "
                                                   f"declares")
                        self.calls += 1
                        if slot and live[slot]:
                            live[slot] = 0
                            event(tid, "free", None, 1, None, base + 16 * slot, None, False)
                        else:
                            if slot:
                                note("wl-free-of-empty-slot", line + 1, f"byte {at}: FREE of slot {slot}, which "
                                                                        f"holds no block")
                            event(tid, "free", None, 1, None, 0, None, False)
                    elif op == REALLOC:
                        new, i = _varint(buf, i)
                        old, i = _varint(buf, i)
                        n, i = _varint(buf, i)
                        if new > nslots or old > nslots:
                            raise self._bad(t, at, f"REALLOC of slot {old} into slot {new}, beyond the {nslots} "
                                                   f"slots ALLOC_PTRS declares")
                        old_ptr = base + 16 * old if old and live[old] else 0
                        self.calls += 1
                        if not new:                  # NULL: realloc(p, 0) freed p, or the realloc failed
                            if old_ptr and not n:
                                live[old] = 0
                            event(tid, "realloc", n, 1, None, old_ptr, 0, n > 0)
                            continue
                        if old != new and old_ptr:
                            live[old] = 0
                        live[new] = 1
                        event(tid, "realloc", n, 1, None, old_ptr, base + 16 * new, False)
                    elif op == SYNC_W:
                        k, i = _varint(buf, i)
                        if not 0 < k <= nsyncs:
                            raise self._bad(t, at, f"SYNC_W {k}: syncs are numbered 1 to {nsyncs} (ALLOC_SYNCS)")
                        written[k >> 3] |= 1 << (k & 7)
                        woken = waiting.pop(k, None)
                        if woken:
                            t.i = i
                            ready.append(t)
                            ready.extend(reversed(woken[1:]))
                            switch = woken[0]
                            for w in woken:
                                if not w.started:
                                    w.started = True
                                    if extra:
                                        event(w.tid, "thread_start", tid, 1, None, None, None, False)
                    elif op == SYNC_R:
                        k, i = _varint(buf, i)
                        if not 0 < k <= nsyncs:
                            raise self._bad(t, at, f"SYNC_R {k}: syncs are numbered 1 to {nsyncs} (ALLOC_SYNCS)")
                        if not written[k >> 3] & (1 << (k & 7)):
                            t.i = i
                            waiting.setdefault(k, []).append(t)
                            switch = ready.pop() if ready else False
                    elif op == DONE:
                        t.i, t.done = i, True
                        if extra and tid != self.master_tid:
                            event(tid, "thread_exit", None, 1, None, None, None, False)
                        switch = ready.pop() if ready else False
                    elif op != NOP:
                        raise self._bad(t, at, f"opcode {OPCODES.get(op, f'{op:#04x}')} in a thread's stream "
                                               f"(a thread runs MALLOC, CALLOC, REALLOC, FREE, MEMALIGN, VALLOC, "
                                               f"PVALLOC, SYNC_W, SYNC_R, NOP up to its DONE)")
                except IndexError:
                    if not t.eof:
                        raise self._bad(t, at, "a number longer than 64 bits") from None
                    report.cut_at = at if report.cut_at is None else min(report.cut_at, at)
                    t.done = True
                    switch = ready.pop() if ready else False
            current = switch or None
        report.stuck = sorted(t.tid for w in waiting.values() for t in w)
        report.lines = line
        report.events = self.calls
        if out:
            yield out

    def _number(self, t: _Thread, fd: int, at: int, what: str, most: int) -> tuple:
        """A varint right after t's opcode at `at` (the stream's first op), checked against 1..most."""
        try:
            k, i = _varint(t.buf, t.i)
        except IndexError:
            raise self._bad(t, t.base + at, "the stream ends inside its first op") from None
        if not 0 < k <= most:
            raise self._bad(t, t.base + at, f"SYNC_R {k}: {what}s are numbered 1 to {most} (ALLOC_SYNCS)")
        return k, i


_ALLOC_KIND = {MALLOC: "malloc", CALLOC: "calloc", MEMALIGN: "memalign", VALLOC: "valloc", PVALLOC: "pvalloc"}


def open_workload(path, extra_events: bool = False) -> Workload:
    """A workload's events (TraceFormatError for a file that is not one: its main stream is read here)."""
    return Workload(path, extra_events)
