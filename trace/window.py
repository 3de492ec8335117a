"""A captured server's window as events: what was live when it opened, made at once, then its calls.

    for ev in windowed_events(log_events):    # the merged events of a log read with window=True
        ...

A tracer log of `scenc capture --server` marks the window from the server's ready to its client's end
(runtime/tracer/tracer_window.h); the reader puts a "window" event where each mark falls (size 1: opens,
2: closes). This generator is what `convert --model` reads: before the window, nothing but what is live
(objects, the program's own mappings) is kept; when it opens, each live mapping becomes an mmap and each
live object a malloc of its size, in the order they were made, by the thread that made them; then the
window's events as they are; after it closes, nothing. The exact replay does the same in C
(runtime/tools/convert.c, open_window), with the set-up untimed.
"""

from __future__ import annotations

from typing import Dict, Iterable, Iterator, List, Tuple

from .events import FREE_KINDS, REALLOC_KINDS, AllocEvent, page_round


def _cut(ranges: List[list], lo: int, hi: int) -> None:
    """[lo, hi) unmapped: cut out of the live mappings ([start, end, prot, tid])."""
    out = []
    for r in ranges:
        if r[1] <= lo or r[0] >= hi:
            out.append(r)
            continue
        if r[0] < lo:
            out.append([r[0], lo, r[2], r[3]])
        if r[1] > hi:
            out.append([hi, r[1], r[2], r[3]])
    ranges[:] = out


def _protect(ranges: List[list], lo: int, hi: int, prot: int) -> None:
    """[lo, hi) given protection `prot` (mprotect): the parts of live mappings it covers made at the open with
    it (a reservation made writable before ready is memory when the window opens)."""
    covered = [[max(r[0], lo), min(r[1], hi), prot, r[3]] for r in ranges if r[0] < hi and r[1] > lo]
    _cut(ranges, lo, hi)
    ranges.extend(covered)


def windowed_events(events: Iterable[AllocEvent]) -> Iterator[AllocEvent]:
    live: Dict[int, Tuple[int, int, int]] = {}     # address -> (order made, bytes, thread)
    ranges: List[list] = []
    order = 0
    phase = 0
    for ev in events:
        kind = ev.kind
        if kind == "window":
            if ev.size == 1 and phase == 0:
                phase = 1
                for start, end, prot, tid in ranges:
                    yield AllocEvent(ev.line, tid, ev.time_s, "mmap", end - start, prot, 0x22, None, start, False,
                                     ev.line, None)
                for ptr, (_, size, tid) in sorted(live.items(), key=lambda item: item[1][0]):
                    yield AllocEvent(ev.line, tid, ev.time_s, "malloc", size, 1, None, None, ptr, False, ev.line,
                                     None)
                live.clear()
            elif ev.size == 2:
                return
            continue
        if phase:
            yield ev
            continue
        if kind == "mmap":
            if not ev.failed and ev.result_ptr and not (ev.align or 0) & 0x10:
                _cut(ranges, ev.result_ptr, ev.result_ptr + page_round(ev.size))
                ranges.append([ev.result_ptr, ev.result_ptr + page_round(ev.size), ev.nmemb, ev.tid])
        elif kind == "munmap":
            _cut(ranges, ev.old_ptr, ev.old_ptr + page_round(ev.size))
        elif kind == "mremap":
            if not ev.failed and ev.result_ptr:
                prot = next((r[2] for r in ranges if r[0] == ev.old_ptr), 3)
                _cut(ranges, ev.old_ptr, ev.old_ptr + page_round(ev.align or 0))
                _cut(ranges, ev.result_ptr, ev.result_ptr + page_round(ev.size))
                ranges.append([ev.result_ptr, ev.result_ptr + page_round(ev.size), prot, ev.tid])
        elif kind == "mprotect":
            if not ev.failed and ev.old_ptr:
                _protect(ranges, ev.old_ptr, ev.old_ptr + page_round(ev.size or 0), ev.nmemb)
        elif kind in ("thread_start", "thread_exit"):
            pass
        else:
            if kind in FREE_KINDS or (kind in REALLOC_KINDS and not ev.failed):
                live.pop(ev.old_ptr, None)
            if kind in FREE_KINDS or ev.failed or not ev.result_ptr:
                continue
            size = (ev.size or 0) * (ev.nmemb or 1) if kind in ("calloc", *REALLOC_KINDS) else (ev.size or 0)
            live[ev.result_ptr] = (order, size, ev.tid)
            order += 1
