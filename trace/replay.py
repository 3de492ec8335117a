"""Exact replay: a stream of captured calls becomes an ops file and a `replay` scenario.

Each captured thread keeps its own calls in order with their exact sizes.
Pointers become slots, reused as soon as they are free so memory grows with
the number of live objects, not with the trace. When an op touches a slot
whose previous op was made by another thread (a cross-thread free, or a slot
reused after another thread freed it), the op is marked to wait for that
thread, as DJ Delorie's glibc trace simulator does: the replay keeps every
handoff and its order, and nothing else is serialised.

Calls that cannot be replayed faithfully are still replayed as calls of the
same kind, so counts per kind and per thread match the capture exactly, and
each is counted in `ReplayReport.degraded` with the first line numbers:
a free of a pointer never seen allocated becomes free(NULL); a realloc of such
a pointer, or a realloc that failed in the trace, becomes realloc(NULL, n).
"""

import heapq
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional

from .events import AllocEvent
from .opsfile import COUNTED_AS, NONE, WAIT, WAIT_OLD, OpsWriter

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

    def note(self, what: str, line: int) -> None:
        self.degraded[what] += 1
        if len(self.degraded_lines[what]) < 5:
            self.degraded_lines[what].append(line)


class _Slots:
    """Slot numbers with generation counters and the thread that touched each last."""

    def __init__(self):
        self.free: List[int] = []
        self.gen: List[int] = []
        self.last_thread: List[int] = []

    def take(self, thread: int):
        slot = heapq.heappop(self.free) if self.free else self._new()
        flags = WAIT if self.last_thread[slot] not in (-1, thread) else 0
        self.last_thread[slot] = thread
        return slot, self.gen[slot], flags

    def _new(self) -> int:
        self.gen.append(0)
        self.last_thread.append(-1)
        return len(self.gen) - 1

    def touch(self, slot: int, thread: int) -> int:
        flags = WAIT if self.last_thread[slot] != thread else 0
        self.last_thread[slot] = thread
        return flags

    def release(self, slot: int) -> None:
        self.gen[slot] += 1
        heapq.heappush(self.free, slot)


def convert_events(events: Iterable[AllocEvent], ops_path) -> ReplayReport:
    """Write the ops file for a stream of events; returns what was converted."""
    writer = OpsWriter(ops_path)
    report = ReplayReport()
    slots = _Slots()
    threads: Dict[int, int] = {}
    live: Dict[int, tuple] = {}   # pointer -> (slot, size)
    live_bytes = 0
    try:
        for ev in events:
            report.trace_kinds[ev.kind] += 1
            kind = REPLAY_KIND.get(ev.kind)
            if kind is None:
                report.note(f"unsupported call {ev.kind}", ev.line)
                continue
            thread = threads.get(ev.tid)
            if thread is None:
                thread = threads[ev.tid] = writer.add_thread()
                report.counts.append(Counter())
                report.tids.append(ev.tid)
            report.counts[thread][COUNTED_AS.get(kind, kind)] += 1
            report.calls += 1
            if kind == "free":
                live_bytes -= _free(ev, thread, writer, slots, live, report)
            elif kind == "realloc":
                live_bytes += _realloc(ev, thread, writer, slots, live, report)
            else:
                live_bytes += _alloc(ev, kind, thread, writer, slots, live, report)
            if live_bytes > report.peak_live_bytes:
                report.peak_live_bytes, report.peak_line = live_bytes, ev.line
        writer.close()
    except BaseException:
        writer.abort()
        raise
    report.threads = len(threads)
    report.live_at_end = len(live)
    report.slots = writer.slots
    report.counts = [dict(c) for c in report.counts]
    return report


def _alloc(ev, kind, thread, writer, slots, live, report) -> int:
    size = ev.size or 0
    aux = ev.nmemb if kind == "calloc" else (ev.align or (16 if kind != "malloc" else NONE))
    if ev.failed or not ev.result_ptr:
        if not ev.failed:
            report.note(f"{ev.kind} result not shown by the capture (replayed, never freed)", ev.line)
        writer.op(thread, kind, aux=aux, size=size)
        return 0
    if ev.result_ptr in live:
        _forget(ev.result_ptr, slots, live, report, ev.line)
    slot, gen, flags = slots.take(thread)
    report.cross_thread_waits += bool(flags)
    writer.op(thread, kind, flags, slot, aux, gen, 0, size)
    nbytes = size * (ev.nmemb if kind == "calloc" else 1)
    live[ev.result_ptr] = (slot, nbytes)
    return nbytes


def _free(ev, thread, writer, slots, live, report) -> int:
    entry = live.pop(ev.old_ptr, None) if ev.old_ptr else None
    if entry is None:
        if ev.old_ptr:
            report.note("free of a pointer never seen allocated (replayed as free(NULL))", ev.line)
        writer.op(thread, "free")
        return 0
    slot, nbytes = entry
    flags = slots.touch(slot, thread)
    report.cross_thread_waits += bool(flags)
    writer.op(thread, "free", flags, slot, NONE, slots.gen[slot])
    slots.release(slot)
    return nbytes


def _realloc(ev, thread, writer, slots, live, report) -> int:
    size = (ev.size or 0) * (ev.nmemb or 1)
    old = live.get(ev.old_ptr) if ev.old_ptr else None
    if ev.old_ptr and old is None:
        report.note("realloc of a pointer never seen allocated (replayed as realloc(NULL, n))", ev.line)
    if ev.failed:
        # The old block stays alive in the trace; realloc(NULL, n) keeps the
        # call without risking a block the trace goes on using.
        report.note("realloc that failed in the trace (replayed as realloc(NULL, n))", ev.line)
        writer.op(thread, "realloc", size=size)
        return 0
    delta = 0
    flags, aux, aux_gen = 0, NONE, 0
    if old is not None:
        del live[ev.old_ptr]
        aux, aux_gen = old[0], slots.gen[old[0]]
        if slots.touch(aux, thread):
            flags |= WAIT_OLD
        delta -= old[1]
    slot, gen = NONE, 0
    if ev.result_ptr:
        if ev.result_ptr in live:
            _forget(ev.result_ptr, slots, live, report, ev.line)
        slot, gen, wait = slots.take(thread)   # taken before the old one is released: never the same
        flags |= wait
        live[ev.result_ptr] = (slot, size)
        delta += size
    report.cross_thread_waits += bool(flags)
    writer.op(thread, "realloc", flags, slot, aux, gen, aux_gen, size)
    if old is not None:
        slots.release(aux)
    return delta


def _forget(ptr, slots, live, report, line) -> None:
    """The allocator returned a pointer we believed live: its free was not captured."""
    slot, _ = live.pop(ptr)
    report.note("pointer returned again without a captured free (old object left live)", line)
    # The slot is left allocated in the replay (its object leaks), never reused.


def scenario_text(name: str, ops_file: str, source: str, report: ReplayReport) -> str:
    """The short `.scn` file that replays an ops file."""
    lines = [
        f"# Exact replay of {source}: {report.threads} thread(s), {report.calls} allocator calls,",
        f"# {report.cross_thread_waits} ops wait for another thread (cross-thread frees and slot reuse),",
        f"# peak live {report.peak_live_bytes} bytes (line {report.peak_line}), {report.live_at_end} live at the end.",
    ]
    for what, count in sorted(report.degraded.items()):
        lines.append(f"# degraded: {count} x {what}")
    safe_name = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name) or "replay"
    lines += [f'scenario "{safe_name}"', f'replay "{ops_file}"', ""]
    return "\n".join(lines)


def write_replay(events: Iterable[AllocEvent], scn_path, source_name: str,
                 ops_path: Optional[Path] = None) -> ReplayReport:
    scn_path = Path(scn_path)
    ops_path = Path(ops_path) if ops_path else scn_path.with_suffix(".ops")
    report = convert_events(events, ops_path)
    try:
        ref = ops_path.resolve().relative_to(scn_path.resolve().parent)
    except ValueError:
        ref = ops_path.resolve()
    scn_path.write_text(scenario_text(scn_path.stem, str(ref), source_name, report))
    return report
