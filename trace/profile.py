"""Streaming statistics over AllocEvents: the `scenc trace-stats FILE` command.

    stats = trace_stats_file("app.log")          # or TraceStats(report).consume(events)
    print(format_trace_stats(stats))
    json.dumps(stats.to_dict())                  # what `scenc trace-stats --json` prints

Only the live blocks are kept (pointer -> a small tuple), so memory follows the program's live objects,
not the trace's length. What each figure means (operations, realloc chains, log2 buckets, cross-thread
frees, posix_memalign's guessed blocks, threads and the program's own mappings): docs/capture.md,
"scenc trace-stats".
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from typing import Iterable, Optional

from .events import ALLOC_KINDS, ANOMALY_KINDS, FREE_KINDS, KINDS, AllocEvent, page_round
from .ltrace import ParseReport, TraceFormatError, parse_file

__all__ = ["TraceStats", "trace_stats_file", "format_trace_stats", "bucket_label", "main"]


def bucket_label(b: int, unit: str = "") -> str:
    """Label of log2 bucket ``b``: '0', '1', '[2, 4)', '[1K, 2K)', ... (half-open ranges)."""
    if b <= 1:
        return f"{b}{unit}"
    lo = 1 << (b - 1)
    return f"[{_pow2(lo)}, {_pow2(2 * lo)}){unit}"


def _pow2(n: int) -> str:
    for suffix, shift in (("E", 60), ("P", 50), ("T", 40), ("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift:
            return f"{n >> shift}{suffix}"
    return str(n)


def _us_label(b: int) -> str:
    """Label of a log2 bucket of microseconds."""
    if b == 0:
        return "<1us"
    lo = 1 << (b - 1)
    for unit, scale in (("s", 1_000_000), ("ms", 1000)):
        if lo >= scale:
            return f"[{_short(lo / scale)}, {_short(2 * lo / scale)}){unit}"
    return f"[{lo}, {2 * lo})us"


def _short(x: float) -> str:
    return f"{x:.0f}" if x >= 100 else f"{x:.3g}"


# live entry: (nbytes, tid, op index, time, realloc chain length, line of first allocation)
L_BYTES, L_TID, L_OP, L_TIME, L_CHAIN, L_LINE = range(6)


class TraceStats:
    """Accumulates statistics over AllocEvents; feed it with :meth:`consume` (or :meth:`add`)."""

    def __init__(self, report: Optional[ParseReport] = None):
        self.report = report if report is not None else ParseReport()
        self.ops = 0
        self.by_thread_kind = defaultdict(int)     # (tid, kind) -> calls
        self.size_hist = defaultdict(int)          # log2 bucket of requested bytes -> allocations
        self.lifetime_ops_hist = defaultdict(int)  # log2 bucket of operations -> freed blocks
        self.lifetime_us_hist = defaultdict(int)   # log2 bucket of microseconds -> freed blocks
        self.live: dict = {}                   # ptr -> live entry
        self.live_bytes = 0
        self.peak_bytes = 0
        self.peak_objects = 0
        self.peak_line: Optional[int] = None
        self.peak_time: Optional[float] = None
        self.max_objects = 0
        self.frees = 0                         # frees of a known block (incl. realloc(p, 0))
        self.free_null = 0
        self.free_unknown = 0
        self.cross_thread_frees = 0
        self.cross_thread_reallocs = 0
        self.failed: dict = {}                 # kind -> failed calls
        self.realloc_in_place = 0
        self.realloc_moved = 0
        self.realloc_as_malloc = 0
        self.realloc_as_free = 0
        self.chain_hist: dict = {}             # realloc chain length -> blocks
        self.longest_chain = 0
        self.longest_chain_line: Optional[int] = None
        self.first_time: Optional[float] = None
        self.last_time: Optional[float] = None
        self.last_line = 0
        self.posix_memalign_guessed = 0
        self.unresolved: list = []             # posix_memalign blocks with unknown pointer: [align, entry]
        self.lives = ThreadLives()
        self.mapped = OwnMappings()
        self.peak_total = 0                    # live heap bytes + the program's own mapped bytes, at most
        self.peak_total_line: Optional[int] = None

    # ------------------------------------------------------------------ feeding
    def add(self, ev: AllocEvent) -> None:
        self.consume((ev,))

    def consume(self, events: Iterable[AllocEvent]) -> "TraceStats":
        """Account every event; returns self."""
        live = self.live
        by_tk = self.by_thread_kind
        size_hist = self.size_hist
        lt_ops = self.lifetime_ops_hist
        lt_us = self.lifetime_us_hist
        note = self.report.add
        ops = self.ops
        live_bytes = self.live_bytes
        peak = self.peak_bytes
        frees = self.frees
        cross = self.cross_thread_frees
        alloc_kinds, free_kinds = ALLOC_KINDS, FREE_KINDS
        first_time = self.first_time
        max_objects = self.max_objects
        seen = self.lives.seen
        t = None
        line = self.last_line
        try:
            for ev in events:
                line, tid, t, kind, size, nmemb, align, old, res, failed, _start, _dur, _cpu = ev
                if kind not in KINDS:
                    self.live_bytes = live_bytes
                    self._extra(ev)
                    continue
                if tid not in seen:
                    seen.add(tid)
                    self.lives.first_call(tid, line, t)
                ops += 1
                by_tk[tid, kind] += 1
                if first_time is None and t is not None:
                    first_time = t
                # a free, or realloc(p, 0) returning NULL, which frees p (frees never have a result)
                if kind in free_kinds or (old and not size and not res and not failed):
                    if not old:
                        self.free_null += 1
                        continue
                    if res is not None:
                        self.realloc_as_free += 1
                    e = live.pop(old, None)
                    if e is None:
                        e = self._unknown_free(old, line, kind)
                        if e is None:
                            continue
                    nb, otid, oop, ot, chain_len, _ = e
                    frees += 1
                    live_bytes -= nb
                    if tid != otid:
                        cross += 1
                    b = (ops - oop).bit_length()
                    lt_ops[b] += 1
                    if t is not None and ot is not None:
                        b = int((t - ot) * 1e6 + 0.5).bit_length()
                        lt_us[b] += 1
                    if chain_len:
                        self._chain_end(e)
                    continue
                if failed:
                    self.failed[kind] = self.failed.get(kind, 0) + 1
                    continue
                nbytes = size * nmemb if size is not None else 0
                if kind in alloc_kinds:
                    entry = (nbytes, tid, ops, t, 0, line)
                elif old:                           # realloc / reallocarray of a block
                    e = live.pop(old, None)
                    if e is None:
                        e = self._unknown_free(old, line, kind)
                    if e is None:
                        entry = (nbytes, tid, ops, t, 1, line)
                    else:
                        live_bytes -= e[0]
                        if tid != e[1]:
                            self.cross_thread_reallocs += 1
                        entry = (nbytes, tid, e[2], e[3], e[4] + 1, e[5])
                    if res == old:
                        self.realloc_in_place += 1
                    else:
                        self.realloc_moved += 1
                else:                               # realloc(NULL, n) == malloc(n)
                    self.realloc_as_malloc += 1
                    entry = (nbytes, tid, ops, t, 0, line)
                b = nbytes.bit_length()
                size_hist[b] += 1
                if res is None:                     # posix_memalign: pointer not shown by ltrace
                    self.unresolved.append([align or 1, entry])
                else:
                    prev = live.setdefault(res, entry)
                    if prev is not entry:
                        note("alloc-returned-live-pointer", line,
                             f"{kind} returned {res:#x}, still live since line {prev[5]}: its free was not seen")
                        live_bytes -= prev[0]
                        live[res] = entry
                live_bytes += nbytes
                if live_bytes > peak:
                    peak = live_bytes
                    self.peak_objects = len(live) + len(self.unresolved)
                    self.peak_line = line
                    self.peak_time = t
                if live_bytes + self.mapped.bytes > self.peak_total:
                    self.peak_total, self.peak_total_line = live_bytes + self.mapped.bytes, line
                if len(live) > max_objects:
                    max_objects = len(live)
        finally:
            self.ops = ops
            self.live_bytes = live_bytes
            self.peak_bytes = peak
            self.frees = frees
            self.cross_thread_frees = cross
            self.first_time = first_time
            self.max_objects = max_objects
            if t is not None:
                self.last_time = t
            self.last_line = line
        return self

    def _extra(self, ev: AllocEvent) -> None:
        """A thread start or exit, or one of the program's own mappings."""
        kind = ev.kind
        if kind == "thread_start":
            self.lives.start(ev.tid, ev.size, ev.line, ev.time_s)
        elif kind == "thread_exit":
            self.lives.exit(ev.tid)
        elif kind in OwnMappings.KINDS:
            self.mapped.event(ev)
            total = self.live_bytes + self.mapped.bytes
            if total > self.peak_total:
                self.peak_total, self.peak_total_line = total, ev.line

    def _unknown_free(self, ptr: int, line: int, kind: str):
        """A free/realloc of a pointer not live: match a posix_memalign block or report it."""
        for i, (align, entry) in enumerate(self.unresolved):
            if ptr % align == 0:
                del self.unresolved[i]
                self.posix_memalign_guessed += 1
                return entry
        self.free_unknown += 1
        self.report.add("free-unknown-pointer", line, f"{kind}({ptr:#x}): pointer never seen allocated")
        return None

    def _chain_end(self, e) -> None:
        n = e[L_CHAIN]
        self.chain_hist[n] = self.chain_hist.get(n, 0) + 1
        if n > self.longest_chain:
            self.longest_chain = n
            self.longest_chain_line = e[L_LINE]

    # ------------------------------------------------------------------ results
    @property
    def calls_by_kind(self) -> dict:
        out: dict = {}
        for (_tid, kind), n in self.by_thread_kind.items():
            out[kind] = out.get(kind, 0) + n
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    @property
    def calls_by_thread(self) -> dict:
        """tid -> {kind: calls}, threads in order of first appearance."""
        out: dict = {}
        for (tid, kind), n in self.by_thread_kind.items():
            out.setdefault(tid, {})[kind] = n
        return out

    @property
    def threads(self) -> int:
        return len({tid for tid, _ in self.by_thread_kind})

    @property
    def live_objects(self) -> int:
        """Blocks still allocated at the end of the trace (posix_memalign blocks never matched included)."""
        return len(self.live) + len(self.unresolved)

    @property
    def chains(self) -> dict:
        """Realloc chain length -> blocks, including blocks still live (their chain so far)."""
        hist = dict(self.chain_hist)
        for e in list(self.live.values()) + [u[1] for u in self.unresolved]:
            if e[L_CHAIN]:
                hist[e[L_CHAIN]] = hist.get(e[L_CHAIN], 0) + 1
        return dict(sorted(hist.items()))

    @property
    def longest(self):
        """(length, first line) of the longest realloc chain, live blocks included."""
        best = (self.longest_chain, self.longest_chain_line)
        for e in self.live.values():
            if e[L_CHAIN] > best[0]:
                best = (e[L_CHAIN], e[L_LINE])
        return best

    @property
    def cross_thread_share(self) -> float:
        return self.cross_thread_frees / self.frees if self.frees else 0.0

    @property
    def failed_allocations(self) -> int:
        return sum(self.failed.values())

    def to_dict(self) -> dict:
        """JSON-ready (string keys, ints, floats, lists)."""
        rep = self.report
        length, line = self.longest
        return {
            "file": rep.filename,
            "lines": rep.lines,
            "events": self.ops,
            "threads": self.threads,
            "calls_by_kind": self.calls_by_kind,
            "calls_by_thread": {str(t): k for t, k in self.calls_by_thread.items()},
            "size_hist_log2": {str(b): n for b, n in sorted(self.size_hist.items())},
            "lifetime_ops_hist_log2": {str(b): n for b, n in sorted(self.lifetime_ops_hist.items())},
            "lifetime_us_hist_log2": {str(b): n for b, n in sorted(self.lifetime_us_hist.items())},
            "peak": {"bytes": self.peak_bytes, "objects": self.peak_objects, "line": self.peak_line,
                     "time_s": None if self.peak_time is None else round(self.peak_time, 6)},
            "max_live_objects": self.max_objects,
            "live_at_end": {"objects": self.live_objects, "bytes": self.live_bytes},
            "frees": {"of_known_blocks": self.frees, "null": self.free_null, "unknown_pointer": self.free_unknown,
                      "cross_thread": self.cross_thread_frees,
                      "cross_thread_share": round(self.cross_thread_share, 6),
                      "posix_memalign_guessed": self.posix_memalign_guessed},
            "realloc": {"in_place": self.realloc_in_place, "moved": self.realloc_moved,
                        "as_malloc": self.realloc_as_malloc, "as_free": self.realloc_as_free,
                        "cross_thread": self.cross_thread_reallocs,
                        "chains": {str(n): c for n, c in self.chains.items()},
                        "longest_chain": {"length": length, "first_line": line}},
            "failed_allocations": {"total": self.failed_allocations, "by_kind": dict(sorted(self.failed.items()))},
            "duration_s": round(self.last_time - self.first_time, 6) if self.first_time is not None
            and self.last_time is not None else None,
            "threads_alive": self.lives.to_dict(),
            "own_mappings": {**self.mapped.to_dict(), "peak_with_heap": self.peak_total,
                             "peak_with_heap_line": self.peak_total_line},
            "parse": rep.to_dict(),
        }


class ThreadLives:
    """Threads alive at once: from a captured start (or a thread's first call, when no start was captured)
    to its captured exit."""

    def __init__(self):
        self.seen: set = set()          # threads that made a call or were started
        self.alive: set = set()
        self.starts = self.exits = 0
        self.peak = 0
        self.peak_line: Optional[int] = None
        self.peak_time: Optional[float] = None

    def _now(self, line: int, t) -> None:
        if len(self.alive) > self.peak:
            self.peak, self.peak_line, self.peak_time = len(self.alive), line, t

    def first_call(self, tid: int, line: int, t) -> None:
        self.alive.add(tid)
        self._now(line, t)

    def start(self, tid: int, creator: Optional[int], line: int, t) -> None:
        if creator and creator not in self.seen:      # a creator is alive, whether it made a call yet or not
            self.seen.add(creator)
            self.alive.add(creator)
        self.starts += 1
        self.seen.add(tid)
        self.alive.add(tid)
        self._now(line, t)

    def exit(self, tid: int) -> None:
        self.exits += 1
        self.seen.add(tid)
        self.alive.discard(tid)

    def to_dict(self) -> dict:
        return {"peak": self.peak, "line": self.peak_line,
                "time_s": None if self.peak_time is None else round(self.peak_time, 6),
                "starts": self.starts, "exits": self.exits}


class OwnMappings:
    """The program's own anonymous mappings (mmap, munmap, mremap events): bytes mapped, in whole pages."""

    KINDS = ("mmap", "munmap", "mremap")

    def __init__(self):
        self.regions: dict = {}         # start -> end
        self.bytes = self.peak = 0
        self.peak_line: Optional[int] = None
        self.calls = {k: 0 for k in self.KINDS}

    def event(self, ev: AllocEvent) -> None:
        self.calls[ev.kind] += 1
        if ev.failed:
            return
        if ev.kind == "mmap" and ev.result_ptr:
            self._unmap(ev.result_ptr, ev.result_ptr + page_round(ev.size or 0))
            self._map(ev.result_ptr, ev.result_ptr + page_round(ev.size or 0))
        elif ev.kind == "munmap":
            self._unmap(ev.old_ptr or 0, (ev.old_ptr or 0) + page_round(ev.size or 0))
        elif ev.kind == "mremap" and ev.result_ptr:
            self._unmap(ev.old_ptr or 0, (ev.old_ptr or 0) + page_round(ev.align or 0))
            self._map(ev.result_ptr, ev.result_ptr + page_round(ev.size or 0))
        if self.bytes > self.peak:
            self.peak, self.peak_line = self.bytes, ev.line

    def _map(self, lo: int, hi: int) -> None:
        self.regions[lo] = hi
        self.bytes += hi - lo

    def _unmap(self, lo: int, hi: int) -> None:
        """Cut [lo, hi) out of every region it overlaps (a program may unmap any page range)."""
        for start, end in [(s, e) for s, e in self.regions.items() if s < hi and e > lo]:
            del self.regions[start]
            self.bytes -= end - start
            if start < lo:
                self._map(start, lo)
            if hi < end:
                self._map(hi, end)

    def to_dict(self) -> dict:
        return {"calls": dict(self.calls), "peak_bytes": self.peak, "peak_line": self.peak_line,
                "mapped_at_end": self.bytes}


def trace_stats_file(path, report: Optional[ParseReport] = None) -> TraceStats:
    """Parse an ltrace log and compute its statistics in one streaming pass."""
    events = parse_file(path, report)
    return TraceStats(events.report).consume(events)


def _hist_lines(hist: dict, label, width: int = 40) -> list:
    if not hist:
        return ["    (none)"]
    total = sum(hist.values())
    top = max(hist.values())
    lo, hi = min(hist), max(hist)
    out = []
    for b in range(lo, hi + 1):
        n = hist.get(b, 0)
        bar = "#" * (round(n / top * width) if n else 0)
        out.append(f"    {label(b):>14} {n:>10} {100 * n / total:5.1f}% {bar}")
    return out


def format_trace_stats(stats: TraceStats, max_lines: int = 5) -> str:
    """The human report of ``scenc trace-stats``."""
    rep = stats.report
    out = []
    add = out.append
    how = {"e": "-e (PLT breakpoints)", "x": "-x (symbol breakpoints)", "mixed": "-e and -x"}.get(
        rep.notation, "unknown")
    if rep.killed_by:
        end = f"tracee killed by {rep.killed_by}"
    elif rep.exit_status is not None:
        end = f"exit status {rep.exit_status}"
    else:
        end = "no exit line"
    add(f"trace {rep.filename}: {rep.lines} lines, {stats.ops} allocator events, {stats.threads} threads, "
        f"captured with {how}, {end}")
    dur = stats.to_dict()["duration_s"]
    if dur is not None:
        add(f"  span {dur:.6f} s")
    if rep.incomplete:
        why = []
        if rep.killed_by:
            why.append(f"the tracee was killed by {rep.killed_by}")
        if rep.count("unexpected-breakpoint"):
            why.append("ltrace lost breakpoints")
        if rep.truncated:
            why.append("the last line is cut off")
        if rep.pending_at_end:
            why.append(f"{rep.pending_at_end} calls never returned")
        if not rep.exits:
            why.append("no '+++ exited' line")
        add("  INCOMPLETE capture: " + "; ".join(why) + ". The figures below cover what was seen.")
    add("")
    add("calls by kind:")
    for kind, n in stats.calls_by_kind.items():
        add(f"    {kind:<22} {n:>10}")
    add("")
    by_thread = stats.calls_by_thread
    kinds = list(stats.calls_by_kind)
    add(f"calls by thread ({len(by_thread)}):")
    add("    " + f"{'tid':>8} " + " ".join(f"{k[:10]:>10}" for k in kinds) + f" {'total':>10}")
    for tid, per in by_thread.items():
        add("    " + f"{tid:>8} " + " ".join(f"{per.get(k, 0):>10}" for k in kinds)
            + f" {sum(per.values()):>10}")
    add("")
    add("requested sizes (bytes, log2 buckets):")
    out += _hist_lines(stats.size_hist, bucket_label)
    add("")
    add("lifetimes of freed blocks, in operations of the whole trace:")
    out += _hist_lines(stats.lifetime_ops_hist, bucket_label)
    add("")
    add("lifetimes of freed blocks, in time:")
    out += _hist_lines(stats.lifetime_us_hist, _us_label) if rep.has_timestamps or stats.lifetime_us_hist \
        else ["    (no timestamps: capture with -tt)"]
    add("")
    at = f" at line {stats.peak_line}" if stats.peak_line is not None else ""
    if stats.peak_time is not None:
        at += f" (t={stats.peak_time:.6f} s)"
    add(f"peak live: {stats.peak_bytes} bytes in {stats.peak_objects} blocks{at}")
    mapped = stats.mapped
    if any(mapped.calls.values()):
        add(f"the program's own mappings: {mapped.calls['mmap']} mmap, {mapped.calls['munmap']} munmap, "
            f"{mapped.calls['mremap']} mremap; peak {mapped.peak} bytes mapped (line {mapped.peak_line}), "
            f"{mapped.bytes} at the end; heap and own mappings together peak at {stats.peak_total} bytes "
            f"(line {stats.peak_total_line})")
    lives = stats.lives
    if lives.starts or lives.exits:
        when = f" at line {lives.peak_line}" + (f" (t={lives.peak_time:.6f} s)" if lives.peak_time is not None
                                                else "")
        add(f"threads alive at once: at most {lives.peak}{when}; {lives.starts} thread starts, "
            f"{lives.exits} exits captured")
    add(f"live at end: {stats.live_objects} blocks, {stats.live_bytes} bytes")
    add(f"frees: {stats.frees} of known blocks, {stats.free_null} of NULL, {stats.free_unknown} of unknown pointers")
    add(f"cross-thread frees: {stats.cross_thread_frees} of {stats.frees} "
        f"({100 * stats.cross_thread_share:.1f}%)")
    if stats.posix_memalign_guessed:
        add(f"posix_memalign blocks matched to their free by alignment (a guess): {stats.posix_memalign_guessed}")
    length, line = stats.longest
    add(f"realloc: {stats.realloc_in_place} in place, {stats.realloc_moved} moved, "
        f"{stats.realloc_as_malloc} realloc(NULL, n), {stats.realloc_as_free} realloc(p, 0), "
        f"{stats.cross_thread_reallocs} by another thread")
    chains = stats.chains
    if chains:
        add(f"realloc chains: {sum(chains.values())} blocks reallocated, longest {length} "
            f"(block allocated at line {line}); length: "
            + ", ".join(f"{n}x{c}" for n, c in chains.items()))
    else:
        add("realloc chains: none")
    failed = ", ".join(f"{k} {n}" for k, n in sorted(stats.failed.items()))
    add(f"failed allocations: {stats.failed_allocations}" + (f" ({failed})" if failed else ""))
    add("")
    if rep.anomaly_counts:
        add("anomalies:")
        order = {"error": 0, "warning": 1, "info": 2}
        for kind, n in sorted(rep.anomaly_counts.items(),
                              key=lambda kv: (order[ANOMALY_KINDS.get(kv[0], ("warning",))[0]], kv[0])):
            sev = ANOMALY_KINDS.get(kind, ("warning", ""))[0]
            lines = rep.first_lines(kind)[:max_lines]
            more = ", ..." if n > len(lines) else ""
            add(f"    {sev:<7} {kind:<30} {n:>8}  lines {', '.join(map(str, lines))}{more}")
    else:
        add("anomalies: none")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    """``trace-stats FILE [--json]``: exit 0, 1 when the capture is incomplete, 2 when FILE is unusable."""
    ap = argparse.ArgumentParser(prog="scenc trace-stats", description="Statistics of an ltrace log of allocator calls")
    ap.add_argument("file")
    ap.add_argument("--json", action="store_true", help="print the statistics as JSON")
    args = ap.parse_args(argv)
    try:
        stats = trace_stats_file(args.file)
    except (OSError, TraceFormatError) as e:
        print(f"scenc trace-stats: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(stats.to_dict(), indent=1))
    else:
        sys.stdout.write(format_trace_stats(stats))
    return 1 if stats.report.incomplete else 0


if __name__ == "__main__":
    sys.exit(main())
