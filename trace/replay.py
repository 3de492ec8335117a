"""Exact replay: a stream of captured calls becomes an ops file and a `replay` scenario.

Each captured thread keeps its own calls in order with their exact sizes.
Pointers become slots, reused as soon as they are free (by the thread that
freed them first, so that reuse rarely waits for another thread) so memory
grows with the number of live objects, not with the trace. When an op touches a slot
whose previous op was made by another thread (a cross-thread free, or a slot
reused after another thread freed it), the op is marked to wait for that
thread, as DJ Delorie's glibc trace simulator does: the replay keeps every
handoff and its order, and nothing else is serialised.

Calls that cannot be replayed faithfully are still replayed as calls of the
same kind, so counts per kind and per thread match the capture exactly, and
each is counted in `ReplayReport.degraded` with the first line numbers:
a free of a pointer never seen allocated becomes free(NULL); a realloc of such
a pointer, or a realloc that failed in the trace, becomes realloc(NULL, n).

Thread lifetimes (from events of kinds thread_start and thread_exit, which the
preload tracer records since version 2): a thread whose start was captured
becomes a DEFERRED replay thread, started by a SPAWN op placed in its
creator's ops where it began; thread creations keep their captured order; the
threads that had ended by then are joined first (JOIN ops before the SPAWN);
a thread's end is an EXIT op that waits for the creations it outlived. The
replay never has more threads alive than the capture had at the same point.
Captures without those events (ltrace, version 1 tracer logs) start every
thread with the replay, as before.

Back-pressure (_Pacer; the design and why it cannot deadlock are in
runtime/replay.h): every event gets a position in capture order (1 plus the
bytes it allocates, frees, maps or unmaps, summed), and an op is flagged SYNC when its
thread's position moved more than D past its last SYNC while another thread
had events; the replay keeps every thread within W positions of the least
advanced one. W is WINDOW_SHARE of the capture's peak of live (and mapped)
bytes, D half of that at most, so a replay holds at most about 3/32 of the
peak more than the capture did at the same point.

``touch`` (opsfile.TOUCH_MODES) is written into the ops file: what the replay
stores into each new block and the grown part of each realloc.

The program's own anonymous mappings (mmap, munmap, mremap events; see
_Mappings) are replayed with slots of their own: MAP where it mapped, UNMAP for
each piece it unmapped (partial unmaps included), REMAP where it resized a
whole mapping; writable mappings are touched like blocks.
"""

import bisect
import json
import struct
import subprocess
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

from .events import AllocEvent
from .ltrace import TraceFormatError
from .opsfile import COUNTED_AS, DEFERRED, KIND_CODE, LAST_PIECE, MAIN, NONE, OP, TOUCH_MODES, WAIT, WAIT_OLD, WRITABLE, OpsWriter

# Trace kinds to the replay op that performs the same kind of call.
REPLAY_KIND = {
    "malloc": "malloc", "operator_new": "malloc", "operator_new_array": "malloc",
    "calloc": "calloc", "realloc": "realloc", "reallocarray": "realloc",
    "free": "free", "operator_delete": "free", "operator_delete_array": "free",
    "aligned_alloc": "aligned_alloc", "memalign": "memalign", "posix_memalign": "posix_memalign",
    "valloc": "valloc", "pvalloc": "valloc",
}


@dataclass
class ReplayReport:
    threads: int = 0
    calls: int = 0
    counts: List[Dict[str, int]] = field(default_factory=list)  # per replay thread, runtime counter kinds
    tids: List[int] = field(default_factory=list)                # captured tid of each replay thread
    cross_thread_waits: int = 0
    peak_live_bytes: int = 0
    peak_line: int = 0
    live_at_end: int = 0
    slots: int = 0
    degraded: Counter = field(default_factory=Counter)
    degraded_lines: Dict[str, List[int]] = field(default_factory=lambda: defaultdict(list))
    trace_kinds: Counter = field(default_factory=Counter)        # calls by their captured kind
    spawned: int = 0              # threads created during the replay, where the capture created them
    joined: int = 0               # threads joined before a later creation, where the capture had ended them
    peak_threads: int = 0         # most threads alive at once in the capture (as far as it shows)
    maps: int = 0                 # the program's own anonymous mappings replayed
    mapped_peak: int = 0          # most bytes of them mapped at once
    touch: str = "none"

    def note(self, what: str, line: int) -> None:
        self.degraded[what] += 1
        if len(self.degraded_lines[what]) < 5:
            self.degraded_lines[what].append(line)


# A thread keeps up to OWN_SLOTS freed slots for itself (reused first: no wait on another thread); the
# rest go to a shared stack, taken before any new slot, so slots never outnumber live objects by more
# than OWN_SLOTS per thread.
OWN_SLOTS = 256


def _python_convert_events(events: Iterable[AllocEvent], ops_path, touch: str = "none",
                   main_tid: Optional[int] = None) -> ReplayReport:
    """Write the ops file for a stream of events; returns what was converted.

    One loop with everything inlined: it runs once per captured call, and the
    conversion must keep up with the parser (bench/bench_convert.py).
    """
    writer = OpsWriter(ops_path)
    writer.touch = touch
    report = ReplayReport(touch=touch)
    note = report.note
    pack = OP.pack
    spill_at = writer.SPILL
    kinds = list(REPLAY_KIND)
    codes = {k: (KIND_CODE[REPLAY_KIND[k]], i) for i, k in enumerate(kinds)}   # captured kind -> (op, index)
    c_free, c_realloc, c_calloc, c_malloc = (KIND_CODE[k] for k in ("free", "realloc", "calloc", "malloc"))
    threads: Dict[int, int] = {}
    bufs: List[bytearray] = []
    own: List[List[int]] = []            # per thread: slots it freed, reused first
    shared: List[int] = []
    gen: List[int] = []                  # per slot: generation (frees so far)
    last: List[int] = []                 # per slot: the replay thread that touched it last
    by_kind: List[List[int]] = []        # per thread: calls per captured kind (index in `kinds`)
    live: Dict[int, tuple] = {}          # pointer -> (slot, bytes)
    live_bytes = peak = peak_line = waits = 0
    life = _Lifetimes(writer, report)
    maps = _Mappings(writer, report, gen, last)
    pacer = _Pacer(writer, report)
    pace = pacer.event

    def new_thread(tid, flags=0, position=0):
        thread = threads[tid] = writer.add_thread(flags | (MAIN if tid == main_tid else 0), position)
        bufs.append(writer.buffer(thread))
        own.append([])
        by_kind.append([0] * len(kinds))
        report.tids.append(tid)
        life.appeared(thread, flags)
        return thread
    try:
        for ev in events:
            line, tid, _t, kind, size, nmemb, align, old, res, failed, _s, _d = ev
            known = codes.get(kind)
            if known is None:
                if kind == "thread_start" and tid not in threads and size and size != tid:
                    creator = threads.get(size)
                    creator = new_thread(size) if creator is None else creator
                    at = pace(creator, 0, peak)
                    life.spawn(creator, new_thread(tid, DEFERRED, at), at)
                elif kind == "thread_exit" and tid in threads:
                    pace(threads[tid], 0, peak)
                    life.exit(threads[tid])
                elif kind in _Mappings.KINDS:
                    thread = threads[tid] if tid in threads else new_thread(tid)
                    pace(thread, size or 0, peak)
                    maps.event(thread, ev)
                elif kind not in ("thread_start", "thread_exit"):
                    note(f"unsupported call {kind}", line)
                continue
            code, index = known
            thread = threads.get(tid)
            if thread is None:
                thread = new_thread(tid)
            by_kind[thread][index] += 1
            buf = bufs[thread]
            entry = live.get(old) if old else None
            # A position counts the bytes freed too: a consumer that lags is as many bytes too many as it has
            # yet to free. A call that failed in the capture allocated and freed nothing.
            freed = entry[1] if entry is not None else 0
            pace(thread, 0 if failed else freed if code == c_free else freed + (size or 0) * (nmemb or 1), peak)
            if code == c_free:
                if entry is None:
                    if old:
                        note("free of a pointer never seen allocated (replayed as free(NULL))", line)
                    buf += pack(c_free, 0, 0, NONE, NONE, 0, 0, 0, 0)
                else:
                    del live[old]
                    slot, nbytes = entry
                    flags = WAIT if last[slot] != thread else 0
                    waits += flags
                    last[slot] = thread
                    buf += pack(c_free, flags, 0, slot, NONE, gen[slot], 0, 0, 0)
                    gen[slot] += 1
                    mine = own[thread]
                    mine.append(slot)
                    if len(mine) > OWN_SLOTS:
                        shared.extend(mine[:OWN_SLOTS // 2])
                        del mine[:OWN_SLOTS // 2]
                    live_bytes -= nbytes
            else:
                if code == c_realloc:
                    size = (size or 0) * (nmemb or 1)
                    if old and entry is None:
                        note("realloc of a pointer never seen allocated (replayed as realloc(NULL, n))", line)
                    if failed:
                        # The old block stays alive in the trace; realloc(NULL, n) keeps the
                        # call without risking a block the trace goes on using.
                        note("realloc that failed in the trace (replayed as realloc(NULL, n))", line)
                        buf += pack(c_realloc, 0, 0, NONE, NONE, 0, 0, 0, size & 0xFFFFFFFFFFFFFFFF)
                        if len(buf) >= spill_at:
                            writer.spill(thread)
                        continue
                    flags, aux, aux_gen, nbytes = 0, NONE, 0, size
                    if entry is not None:
                        del live[old]
                        aux = entry[0]
                        aux_gen = gen[aux]
                        if last[aux] != thread:
                            flags = WAIT_OLD
                            last[aux] = thread
                        live_bytes -= entry[1]
                    if not res:
                        slot = NONE
                        gen_new = 0
                        nbytes = 0
                else:
                    size = size or 0
                    if code == c_calloc:
                        aux, nbytes = nmemb, size * nmemb
                    else:
                        aux, nbytes = (align or (NONE if code == c_malloc else 16)), size
                    entry = None
                    flags = aux_gen = 0
                    if failed or not res:
                        if not failed:
                            note(f"{kind} result not shown by the capture (replayed, never freed)", line)
                        buf += pack(code, 0, 0, NONE, aux & 0xFFFFFFFF, 0, 0, 0, size & 0xFFFFFFFFFFFFFFFF)
                        if len(buf) >= spill_at:
                            writer.spill(thread)
                        continue
                if res:
                    if res in live:
                        # The allocator returned a pointer we believed live: its free was not
                        # captured. Its slot stays allocated in the replay (it leaks), never reused.
                        live.pop(res)
                        note("pointer returned again without a captured free (old object left live)", line)
                    mine = own[thread]                    # taken before the old one is released: never the same
                    if mine:
                        slot = mine.pop()
                    elif shared:
                        slot = shared.pop()
                    else:
                        slot = len(gen)
                        gen.append(0)
                        last.append(-1)
                    if last[slot] not in (-1, thread):
                        flags |= WAIT
                    last[slot] = thread
                    gen_new = gen[slot]
                    live[res] = (slot, nbytes)
                    live_bytes += nbytes
                waits += flags != 0
                buf += pack(code, flags, 0, slot, aux & 0xFFFFFFFF, gen_new, aux_gen, 0, size & 0xFFFFFFFFFFFFFFFF)
                if entry is not None:                     # realloc: release the old block's slot
                    gen[aux] += 1
                    mine = own[thread]
                    mine.append(aux)
                    if len(mine) > OWN_SLOTS:
                        shared.extend(mine[:OWN_SLOTS // 2])
                        del mine[:OWN_SLOTS // 2]
                if live_bytes > peak:
                    peak, peak_line = live_bytes, line
            if len(buf) >= spill_at:
                writer.spill(thread)
        writer.slots = len(gen)
        writer.window = pacer.window(peak)
        writer.close()
    except BaseException:
        writer.abort()
        raise
    report.threads = len(threads)
    report.calls = sum(map(sum, by_kind))
    report.cross_thread_waits = waits
    report.peak_live_bytes, report.peak_line = peak, peak_line
    report.live_at_end = len(live)
    report.slots = writer.slots
    report.counts = [Counter() for _ in threads]
    for thread, calls in enumerate(by_kind):
        for kind, n in zip(kinds, calls):
            if n:
                replayed = REPLAY_KIND[kind]
                report.counts[thread][COUNTED_AS.get(replayed, replayed)] += n
                report.trace_kinds[kind] += n
    report.counts = [dict(c) for c in report.counts]
    return report


class _Lifetimes:
    """SPAWN, JOIN and EXIT ops from the capture's thread starts and exits (see the module doc)."""

    def __init__(self, writer: OpsWriter, report: ReplayReport):
        self.writer, self.report = writer, report
        self.spawns = 0
        self.ended: List[int] = []      # threads ended since the last creation: joined before the next
        self.alive = 0

    def appeared(self, thread: int, flags: int) -> None:
        if not flags & DEFERRED:                  # alive from the start, as far as the replay knows
            self._alive(+1)

    def _alive(self, delta: int) -> None:
        self.alive += delta
        self.report.peak_threads = max(self.report.peak_threads, self.alive)

    def spawn(self, creator: int, child: int, position: int) -> None:
        for thread in self.ended:
            self.writer.op(creator, "join", slot=thread)
        self.report.joined += len(self.ended)
        self.ended.clear()
        self.writer.op(creator, "spawn", slot=child, aux=self.spawns, size=position)
        self.spawns += 1
        self.report.spawned += 1
        self._alive(+1)

    def exit(self, thread: int) -> None:
        self.writer.op(thread, "exit", aux=self.spawns)
        self.ended.append(thread)
        self._alive(-1)


#: W, the back-pressure window, is this share of the capture's peak of live (and mapped) bytes, in positions;
#: D, how far a thread's position may move between two SYNC ops, at most half of it (the running peak's share).
WINDOW_SHARE = 1 / 16


class _Pacer:
    """Positions in capture order and the SYNC flags of back-pressure (see the module doc).

    ``event(thread, nbytes, peak)`` is called once per event, before its ops are appended to `thread`'s
    buffer (a creation's go to its creator's); it returns the event's position. An op is flagged when the
    thread's position moved more than D past its last SYNC and another thread had an event in between:
    runtime/replay.h shows why that is enough for the replay never to deadlock, and why a thread that runs
    alone needs no SYNC at all."""

    def __init__(self, writer: OpsWriter, report: ReplayReport):
        self.writer, self.report = writer, report
        self.position = 0
        self.prev_thread = -1
        self.prev_position = 0
        self.foreign = 0          # position of the last event of a thread other than prev_thread

    def event(self, thread: int, nbytes: int, peak: int) -> int:
        writer = self.writer
        if writer._pending:
            writer.settle()
        position = self.position = self.position + 1 + nbytes
        if thread != self.prev_thread:
            self.foreign, self.prev_thread = self.prev_position, thread
        self.prev_position = position
        synced = writer.synced[thread]
        if self.foreign > synced and position - synced > max(1, int((peak + self.report.mapped_peak) * WINDOW_SHARE / 2)):
            writer.sync(thread, position)
        return position

    def window(self, peak: int) -> int:
        return max(1, int((peak + self.report.mapped_peak) * WINDOW_SHARE))


PAGE = 4096


def _pages(n: int) -> int:
    return (n + PAGE - 1) // PAGE * PAGE


class _Mappings:
    """MAP, UNMAP and REMAP ops from the program's own mmap, munmap and mremap.

    Each mapping gets a slot (never reused) and is remembered as pieces
    ``start -> [end, slot, base]``: munmap may cut any page range out of it.
    What cannot be replayed is noted and skipped: MAP_FIXED mappings (they
    replace part of another), mremap of part of a mapping.
    """

    KINDS = ("mmap", "munmap", "mremap")
    MAP_FIXED = 0x10
    PROT_WRITE = 2

    def __init__(self, writer: OpsWriter, report: ReplayReport, gen: List[int], last: List[int]):
        self.writer, self.report, self.gen, self.last = writer, report, gen, last
        self.starts: List[int] = []               # sorted piece starts
        self.pieces: Dict[int, list] = {}
        self.held: Counter = Counter()            # slot -> pieces left
        self.writable: set = set()                # slots mapped with PROT_WRITE
        self.mapped = 0

    def event(self, thread: int, ev: AllocEvent) -> None:
        getattr(self, ev.kind)(thread, ev)

    def _new_slot(self, thread: int) -> int:
        self.gen.append(0)
        self.last.append(thread)
        return len(self.gen) - 1

    def _add(self, start: int, end: int, slot: int, base: int) -> None:
        bisect.insort(self.starts, start)
        self.pieces[start] = [end, slot, base]
        self.held[slot] += 1

    def _bytes(self, delta: int) -> None:
        self.mapped += delta
        self.report.mapped_peak = max(self.report.mapped_peak, self.mapped)

    def mmap(self, thread: int, ev: AllocEvent) -> None:
        if ev.failed or not ev.result_ptr:
            return
        if (ev.align or 0) & self.MAP_FIXED:
            self.report.note("mmap with MAP_FIXED (replaces part of another mapping; not replayed)", ev.line)
            return
        start, length = ev.result_ptr, _pages(ev.size or 0)
        self._cut(thread, start, start + length, ev.line, stale=True)
        slot = self._new_slot(thread)
        flags = WRITABLE if ev.nmemb & self.PROT_WRITE else 0
        self.writer.op(thread, "map", flags, slot, size=length)
        self._add(start, start + length, slot, start)
        if flags:
            self.writable.add(slot)
        self.report.maps += 1
        self._bytes(length)

    def munmap(self, thread: int, ev: AllocEvent) -> None:
        self._cut(thread, ev.old_ptr or 0, (ev.old_ptr or 0) + _pages(ev.size or 0), ev.line)

    def _cut(self, thread: int, lo: int, hi: int, line: int, stale: bool = False) -> None:
        """Unmap [lo, hi) from every piece it overlaps. stale: a new mapping landed there, so whatever
        was believed mapped there was unmapped unseen; forget it without an op."""
        i = max(0, bisect.bisect_right(self.starts, lo) - 1)
        while i < len(self.starts) and self.starts[i] < hi:
            start = self.starts[i]
            end, slot, base = self.pieces[start]
            if end <= lo:
                i += 1
                continue
            a, b = max(lo, start), min(hi, end)
            del self.starts[i]
            del self.pieces[start]
            self.held[slot] -= 1
            if start < a:
                self._add(start, a, slot, base)
                i += 1
            if b < end:
                self._add(b, end, slot, base)
                i += 1
            self._bytes(-(b - a))
            if stale:
                if not self.held[slot]:
                    self.report.note("a mapping unmapped without a captured munmap (left mapped)", line)
                continue
            flags = (WAIT if self.last[slot] != thread else 0) | (0 if self.held[slot] else LAST_PIECE)
            self.last[slot] = thread
            self.writer.op(thread, "unmap", flags, slot, (a - base) // PAGE, self.gen[slot], size=b - a)
            if not self.held[slot]:
                self.gen[slot] += 1

    def mremap(self, thread: int, ev: AllocEvent) -> None:
        if ev.failed or not ev.result_ptr:
            return
        old = ev.old_ptr or 0
        piece = self.pieces.get(old)
        if piece is None or piece[2] != old or self.held[piece[1]] != 1 or piece[0] - old != _pages(ev.align or 0):
            self.report.note("mremap of part of a mapping, or of one not seen mapped (not replayed)", ev.line)
            return
        end, old_slot, _ = piece
        self.starts.remove(old)
        del self.pieces[old]
        self.held[old_slot] = 0
        slot = self._new_slot(thread)
        flags = WAIT_OLD if self.last[old_slot] != thread else 0
        if old_slot in self.writable:
            flags |= WRITABLE
            self.writable.add(slot)
        self.last[old_slot] = thread
        length = _pages(ev.size or 0)
        self.writer.op(thread, "remap", flags, slot, old_slot, 0, self.gen[old_slot], length)
        self.gen[old_slot] += 1
        self._cut(thread, ev.result_ptr, ev.result_ptr + length, ev.line, stale=True)
        self._add(ev.result_ptr, ev.result_ptr + length, slot, ev.result_ptr)
        self._bytes(length - (end - old))


# --------------------------------------------------------------------------- the converter (runtime/convert.c)
#: Event kinds as the converter numbers them (runtime/trace_read.h, EV_*): the allocator calls, then the rest.
EVENT_CODE = {k: i for i, k in enumerate((*REPLAY_KIND, "thread_start", "thread_exit", "mmap", "munmap", "mremap"))}
#: One event on the converter's stdin (runtime/trace_read.h, tr_event).
EVENT = struct.Struct("<QQQQQQIBB2x")
_BATCH = 4096


class ConvertError(RuntimeError):
    """The converter could not write the ops file (disk full, unwritable folder); the message says why."""


def convert_events(events: Iterable[AllocEvent], ops_path, touch: str = "none",
                   main_tid: Optional[int] = None) -> ReplayReport:
    """Write the ops file for a stream of events; returns what was converted.

    The events are packed (EVENT) and piped to the converter. A tracer log read by
    scenc.trace.preload_log is not: the converter reads its file itself (see convert_log).
    """
    from .preload_log import PreloadLog
    if isinstance(events, PreloadLog):
        return convert_log(events.path, ops_path, touch, main_tid, extra=events.extra_events)[0]
    return _run(["--events"], ops_path, touch, main_tid, lambda pipe: _feed(events, pipe))[0]


def convert_log(path, ops_path, touch: str = "none", main_tid: Optional[int] = None,
                extra: bool = True) -> Tuple[ReplayReport, dict]:
    """Convert a tracer log (runtime/tracer.c) in C, reading and merging it there: (report, what the log held:
    runtime/convert.c's "log" object, PreloadLogInfo's fields). extra=False skips its thread and mapping records.
    Raises TraceFormatError for a log that is not one or is damaged (nothing is written then)."""
    return _run(["--log", str(path)] + ([] if extra else ["--no-extra"]), ops_path, touch, main_tid, None,
                error_path=str(path))


def _feed(events: Iterable[AllocEvent], pipe) -> None:
    pack, codes, batch = EVENT.pack, EVENT_CODE, []
    for line, tid, _t, kind, size, nmemb, align, old, res, failed, _s, _d in events:
        code = codes.get(kind)
        if code is None:
            raise ValueError(f"line {line}: the replay cannot convert a {kind!r} event")
        batch.append(pack(line, size or 0, nmemb, align or 0, old or 0, res or 0, tid or 0, code, bool(failed)))
        if len(batch) == _BATCH:
            pipe.write(b"".join(batch))
            batch.clear()
    pipe.write(b"".join(batch))


def _run(args: List[str], ops_path, touch: str, main_tid: Optional[int], feed, error_path: str = ""):
    from .tracer_build import converter_program
    cmd = [str(converter_program()), *args, "--ops", str(ops_path), "--touch", str(TOUCH_MODES.index(touch))]
    if main_tid is not None:
        cmd += ["--main-tid", str(main_tid)]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if feed else subprocess.DEVNULL, stdout=subprocess.PIPE)
    try:
        if feed:
            try:
                feed(proc.stdin)
                proc.stdin.close()
            except BrokenPipeError:           # the converter stopped early: its report says why
                pass
        out = proc.stdout.read()
        status = proc.wait()
    except BaseException:
        # A parse error in the events, or Ctrl-C: the converter removes its temporary files on SIGTERM.
        proc.terminate()
        proc.wait()
        raise
    finally:
        for pipe in (proc.stdin, proc.stdout):
            if pipe:
                try:
                    pipe.close()
                except BrokenPipeError:
                    pass
    data = json.loads(out) if out.strip() else {}
    if status or "error" in data:
        if status == 130 or status < 0:
            raise KeyboardInterrupt
        message = data.get("error") or f"the converter failed (exit status {status})"
        if error_path and data.get("record"):
            raise TraceFormatError(error_path, data["record"], 1, message)
        raise ConvertError(message)
    return _report(data, touch), data.get("log")


def _report(data: dict, touch: str) -> ReplayReport:
    report = ReplayReport(touch=touch)
    for name in ("threads", "tids", "cross_thread_waits", "peak_live_bytes", "peak_line", "live_at_end", "slots",
                 "spawned", "joined", "peak_threads", "maps", "mapped_peak"):
        setattr(report, name, data[name])
    for row in data["by_kind"]:
        counts: Dict[str, int] = {}
        for kind, n in zip(REPLAY_KIND, row):
            if n:
                replayed = REPLAY_KIND[kind]
                counted = COUNTED_AS.get(replayed, replayed)
                counts[counted] = counts.get(counted, 0) + n
                report.trace_kinds[kind] += n
        report.counts.append(counts)
    report.calls = sum(report.trace_kinds.values())
    for what, count, lines in data["notes"]:
        report.degraded[what] = count
        report.degraded_lines[what] = lines
    return report


def scenario_text(name: str, ops_file: str, source: str, report: ReplayReport) -> str:
    """The short `.scn` file that replays an ops file."""
    lines = [
        f"# Exact replay of {source}: {report.threads} thread(s), {report.calls} allocator calls,",
        f"# {report.cross_thread_waits} ops wait for another thread (cross-thread frees and slot reuse),",
        f"# peak live {report.peak_live_bytes} bytes (line {report.peak_line}), {report.live_at_end} live at the end.",
        f"# {threads_line(report)}; each new block {TOUCH_TEXT[report.touch]}.",
    ]
    if report.maps:
        lines.append(f"# {report.maps} anonymous mapping(s) of the program's own, at most {report.mapped_peak} bytes "
                     f"mapped at once, are mapped, touched and unmapped as captured.")
    for what, count in sorted(report.degraded.items()):
        lines.append(f"# degraded: {count} x {what}")
    safe_name = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name) or "replay"
    lines += [f'scenario "{safe_name}"', f'replay "{ops_file}"', ""]
    return "\n".join(lines)


#: What the replay does to each new block (and to the grown part of a realloc), per --touch mode.
TOUCH_TEXT = {"none": "is not written", "first": "gets its first and last byte written",
              "pages": "gets one byte written in each page and its last byte", "all": "is written whole"}


def threads_line(report: ReplayReport) -> str:
    if not report.spawned:
        return "every thread starts with the replay"
    return (f"{report.spawned} thread(s) created during the replay where the capture created them, "
            f"{report.joined} joined before a later creation; at most {report.peak_threads} alive at once")


def write_replay(events, scn_path, source_name: str, ops_path: Optional[Path] = None, touch: str = "none",
                 main_tid: Optional[int] = None, found=None) -> ReplayReport:
    """events: AllocEvents, or the path of a tracer log (runtime/convert.c reads it itself; `found` then gets
    what the log held, convert_log's second value). main_tid: the captured process's main thread (its pid),
    replayed on the replay's main thread."""
    scn_path = Path(scn_path)
    ops_path = Path(ops_path) if ops_path else scn_path.with_suffix(".ops")
    if isinstance(events, (str, Path)):
        report, log = convert_log(events, ops_path, touch, main_tid)
        if found:
            found(log)
    else:
        report = convert_events(events, ops_path, touch, main_tid)
    try:
        ref = ops_path.resolve().relative_to(scn_path.resolve().parent)
    except ValueError:
        ref = ops_path.resolve()
    scn_path.write_text(scenario_text(scn_path.stem, str(ref), source_name, report))
    return report
