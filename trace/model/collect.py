"""The streaming pass of `scenc convert --model`: AllocEvents -> per-thread, per-window figures.

One pass over the events. Memory: the live objects (pointer -> owner, clock,
size), one clock per thread, and per thread and window a Counter and three
bucketed histograms; windows double in length past MAX_WINDOWS, so their
number stays bounded however long the trace is. What the categories mean and
which clock the lifetimes use: docs/capture.md, "scenc convert --model".
"""

import bisect
from bisect import bisect_right as _bisect_right
import heapq
from array import array
from collections import Counter
from statistics import median
from typing import Dict, Iterable, List, Optional, Tuple

from ..events import ALLOC_KINDS, FREE_KINDS, KINDS, REALLOC_KINDS, page_round

WINDOW0 = 64                 # events per window at first
MAX_WINDOWS = 128            # windows double in length past this many

# Trace kinds -> the model's allocation statements.
MODEL_KIND = {
    "malloc": "malloc", "operator_new": "malloc", "operator_new_array": "malloc", "calloc": "calloc",
    "aligned_alloc": "aligned_alloc", "memalign": "memalign", "posix_memalign": "posix_memalign",
    "valloc": "memalign", "pvalloc": "memalign",
}
PAGE_ALIGNED = {"valloc", "pvalloc"}
# An object allocated by realloc(NULL, n) (lua allocates every object so): an allocation like malloc's, written
# `realloc(none[0], n)` (none[0] stays empty), with its size and lifetime; a realloc of a pointer never seen
# allocated starts one likewise (its old block's free was not captured).
REALLOC_START = ("realloc", None)
MAX_HANDOFFS = 4_000_000     # handoff lifetimes kept for the channels' capacities (16 bytes each)
MAX_TRAILS = 16              # finished realloc chains kept whole per thread: the biggest (their largest size) ...
MAX_TRAIL_STEPS = 512        # ... each with at most this many reallocs (a longer one keeps no steps)
MAX_BIG_OBJECTS = 32         # the largest objects kept one by one per thread (BigObject)
MAX_PEAK_FREED = 1 << 17     # objects live at the peak and freed after it, kept at most (Collector.peak_freed)
KEPT_RECORD_SHARE = 1 / 1024  # objects still live at the end of this share of the peak of live bytes or more ...
MAX_KEPT_RECORDS = 4096      # ... are kept one by one (Collector.kept_big), when there are this few
MAX_MAP_RECORDS = 256        # the program's own mappings kept one by one per thread (MapRecord), at most ...
MAX_BIG_MAPS = 16            # ... and past that, its largest ones
PROT_WRITE = 2
#: A thread's time between two of its calls counts as its own work (ThreadWindow counters 'gaps', 'gap_ns'): on its
#: CPU clock (tracer logs of version 6: AllocEvent.cpu_ns) every one, since that clock stands still while the thread
#: waits; on the wall clock alone (logs of version 5 and older) up to this long, a longer one being taken for
#: waiting (blocked in the kernel: a lock, I/O, an idle pool thread), which a model must not turn into CPU time. The
#: rule is not kept for the CPU clock, which does not move while the thread waits: jq sorting 120,000 objects spent
#: 1.58 s of its 1.83 s capture in 56 times between calls over 1 ms; its CPU clock had 1.24 s between calls in all,
#: the wall clock's times up to 1 ms 0.25 s, and its model without the rest ran 0.33x its program
#: (bench/results/2026-11-27-model-cpuclock.md; docs/language.md, "What a model keeps of it")
DENSE_GAP_NS = 1_000_000


# --------------------------------------------------------------------------- buckets
def size_bucket(s: int) -> int:
    """Exact below 1024; above, 16 classes per power of two."""
    if s < 1024:
        return s
    e = s.bit_length() - 1
    return 1024 + (e - 10) * 16 + ((s >> (e - 4)) & 15)


def life_bucket(n: int) -> int:
    """Exact below 32; above, 8 classes per power of two."""
    if n < 32:
        return n
    e = n.bit_length() - 1
    return 32 + (e - 5) * 8 + ((n >> (e - 3)) & 7)


def life_bucket_range(b: int) -> Tuple[int, int]:
    """[lo, hi) of lifetime bucket b."""
    if b < 32:
        return b, b + 1
    e, sub = 5 + (b - 32) // 8, (b - 32) % 8
    return (8 + sub) << (e - 3), (9 + sub) << (e - 3)


#: Upper bounds of the coarse size classes whose lifetimes are kept apart (the last class is unbounded):
#: a program's big blocks often live longer (or shorter) than its small ones, and live bytes are
#: sizes times lifetimes, so the model keeps that link class by class (docs/capture.md, "Large objects").
SIZE_CLASS_BOUNDS = (64, 256, 1024, 4096, 16384, 65536, 262144, 1048576)


def size_class(s: int) -> int:
    """The coarse size class of s: the number of SIZE_CLASS_BOUNDS at or below it."""
    c = 0
    while c < len(SIZE_CLASS_BOUNDS) and s >= SIZE_CLASS_BOUNDS[c]:
        c += 1
    return c


def add(hist: dict, bucket: int, value: int, count: int = 1) -> None:
    h = hist.get(bucket)
    if h is None:
        hist[bucket] = [count, value * count]
    else:
        h[0] += count
        h[1] += value * count


def merge_hist(into: dict, other: dict) -> None:
    for b, (c, s) in other.items():
        h = into.get(b)
        if h is None:
            into[b] = [c, s]
        else:
            h[0] += c
            h[1] += s


def hist_minus(hist: dict, part: dict) -> dict:
    """``hist`` without ``part`` (a sub-histogram of it, same buckets)."""
    out = {}
    for b, (c, s) in hist.items():
        pc, ps = part.get(b, (0, 0))
        if c > pc:
            out[b] = [c - pc, s - ps]
    return out


def hist_totals(hist: dict) -> Tuple[int, int]:
    return sum(c for c, _ in hist.values()), sum(s for _, s in hist.values())


# --------------------------------------------------------------------------- collection
class BigObject:
    """One of a thread's largest plain objects: when it was allocated (a moment: (ordinal, the thread's
    `lives` clock)), its size and model kind, how it ended ('local' with its lifetime on the `lives` clock,
    'send', 'chain' when a realloc grew it, 'kept' when still live at the end; '' while live) and the
    ordinal of its free (None while live)."""
    __slots__ = ("at", "size", "mk", "how", "life", "end")

    def __init__(self, at: tuple, size: int, mk):
        self.at, self.size, self.mk = at, size, mk
        self.how = ""
        self.life: Optional[int] = None
        self.end: Optional[int] = None


class MapRecord:
    """One of the program's own writable mappings (mmap outside the allocator): when it was mapped (a moment:
    (ordinal, the thread's `lives` clock)), its size for the model (its bytes once the cuts made before the
    thread's next call are done: a program that maps more to align and cuts the rest off at once keeps
    what it kept; grown by mremap, its largest), the bytes still mapped, and its lifetime on the owner's
    `lives` clock once its last page is unmapped (None while mapped)."""
    __slots__ = ("tid", "at", "size", "bytes", "life", "seq")

    def __init__(self, tid: int, at: tuple, size: int, seq: int = 0):
        self.tid, self.at, self.size, self.bytes = tid, at, size, 0
        self.life: Optional[int] = None
        self.seq = seq                       # the writable mappings made before it: orders equal ones


class Trail:
    """One realloc chain step by step: its start (moment, model kind, size; REALLOC_START when it began
    with realloc(NULL, n), at its first step), its reallocs [(moment, size), ...] (None past
    MAX_TRAIL_STEPS), its end (moment, how: 'local', 'send' or 'end' when still live at the end). A moment
    is (ordinal, the owner's `lives` clock just after the call)."""
    __slots__ = ("owner", "start", "mk", "size", "steps", "largest", "end", "how", "last")

    def __init__(self, owner: int, start: tuple, mk, size: int):
        self.owner, self.start, self.mk, self.size = owner, start, mk, size
        self.steps: Optional[list] = []
        self.largest = size
        self.end: Optional[tuple] = None
        self.how = ""
        self.last = start                    # the moment of its last realloc

    def step(self, moment: tuple, nbytes: int) -> None:
        self.largest = max(self.largest, nbytes)
        self.last = moment
        if self.steps is not None:
            self.steps.append((moment, nbytes))
            if len(self.steps) > MAX_TRAIL_STEPS:
                self.steps = None


class Window:
    """Whole-trace figures of one window of events (for phase detection)."""
    __slots__ = ("events", "allocs", "frees", "log_sizes", "t_first", "t_last", "first_line")

    def __init__(self, line: int, t: Optional[float]):
        self.events = self.allocs = self.frees = self.log_sizes = 0   # log_sizes: sum of sizes' bit lengths
        self.t_first = self.t_last = t
        self.first_line = line

    def merge(self, o: "Window") -> None:
        self.events += o.events
        self.allocs += o.allocs
        self.frees += o.frees
        self.log_sizes += o.log_sizes
        if o.t_last is not None:
            self.t_last = o.t_last
        if self.t_first is None:
            self.t_first = o.t_first


class ThreadWindow:
    """One thread in one window: counters by category, and histograms.

    Categories: 'events', 'gaps' and 'gap_ns' (the times between the thread's calls taken for work: DENSE_GAP_NS),
    'free_null', 'realloc', 'alloc_failed', 'realloc_failed',
    'free_unknown', 'realloc_unknown', 'realloc_as_free', 'free_missed', 'censored', ('lives', mk), ('send', mk, tid),
    ('kept', mk) (still live at the end: `lives forever`), ('lives_class', mk, size class) (the 'lives' ones
    by size class: SIZE_CLASS_BOUNDS),
    ('start', mk), ('end', how, tid), ('recv', tid); mk = (model kind, alignment).
    Objects are counted in the window of their allocation, chain ends and receives
    in the window where they happen (a chain handed to another thread ends at its last realloc). ``dies``:
    the objects freed by their own thread in a later window than their own, by that window and size class
    (as ``lives_by_class``, with their kinds): those that outlive their part of a phase are modelled apart
    (trace/model/shape.py, _take_held_objects). ``sent``: the sizes of the objects among ``sizes`` that another
    thread freed (in a program they are often not the short-lived ones: a queue's items, a thread's
    results), so that the model hands over objects of their sizes; ``kept``: those still live at the
    end (buffers, tables, caches), likewise.
    """
    __slots__ = ("c", "sizes", "rsizes", "lives", "sent", "sent_to", "kept", "lives_by_class", "dies", "maps",
                 "map_lives", "map_kept", "starts")

    def __init__(self):
        self.c = Counter()
        self.sizes: dict = {}
        self.rsizes: dict = {}
        self.lives: dict = {}
        self.sent: dict = {}
        self.sent_to: dict = {}         # ``sent`` by the thread that freed them: tid -> histogram
        self.kept: dict = {}
        # objects freed by their own thread, by size class: [lifetime histogram, bytes, bytes * lifetime, sizes]
        self.lives_by_class: dict = {}
        # ... and those freed in a later window: window -> size class -> [the same four, Counter of kinds]
        self.dies: dict = {}
        # the program's own writable mappings made in this window (counters 'map', 'map_kept', and by size
        # bucket ('map', bucket), ('map_kept', bucket)): the sizes of those unmapped and their lifetimes by size
        # bucket (a runtime's small and big mappings live differently), the sizes of those still mapped at the end
        self.maps: dict = {}
        self.map_lives: dict = {}       # size bucket -> lifetime histogram
        self.map_kept: dict = {}
        # the sizes of the blocks made in this window that a realloc later grew (a realloc chain's start)
        self.starts: dict = {}

    def merge(self, o: "ThreadWindow", discard: bool = False) -> "ThreadWindow":
        """Add o's figures to these; with discard (o is thrown away after), its figures may be taken over."""
        self.c.update(o.c)
        merge_hist(self.sizes, o.sizes)
        merge_hist(self.sent, o.sent)
        for tid, hist in o.sent_to.items():
            merge_hist(self.sent_to.setdefault(tid, {}), hist)
        merge_hist(self.kept, o.kept)
        merge_hist(self.rsizes, o.rsizes)
        merge_hist(self.lives, o.lives)
        _merge_classes(self.lives_by_class, o.lives_by_class)
        for w, by_class in o.dies.items():
            mine = self.dies.get(w)
            if mine is None and discard:    # taken over: the same figures in the same order as a merge into {}
                self.dies[w] = by_class
            else:
                _merge_classes(self.dies.setdefault(w, {}) if mine is None else mine, by_class)
        merge_hist(self.maps, o.maps)
        for b, hist in o.map_lives.items():
            merge_hist(self.map_lives.setdefault(b, {}), hist)
        merge_hist(self.map_kept, o.map_kept)
        merge_hist(self.starts, o.starts)
        return self

    def halve_dies(self) -> None:
        """The windows of ``dies`` after neighbours merged (window w becomes w // 2)."""
        dies, self.dies = self.dies, {}
        for w, by_class in dies.items():
            mine = self.dies.get(w // 2)
            if mine is None:        # moved, not copied: the same figures in the same order as a merge into {}
                self.dies[w // 2] = by_class
            else:
                _merge_classes(mine, by_class)


def _merge_classes(into: dict, other: dict) -> None:
    """Merge figures by size class (ThreadWindow.lives_by_class, ThreadWindow.dies) into ``into``."""
    for cls, entry in other.items():
        mine = into.get(cls)
        if mine is None:
            mine = into[cls] = [{}, 0, 0, {}] + ([Counter()] if len(entry) > 4 else [])
        merge_hist(mine[0], entry[0])
        mine[1] += entry[1]
        mine[2] += entry[2]
        merge_hist(mine[3], entry[3])
        if len(entry) > 4:
            mine[4].update(entry[4])


class Collector:
    """Feed AllocEvents with :meth:`consume`; then :meth:`finish`."""

    def __init__(self):
        self.window = WINDOW0
        self.wins: List[Window] = []
        # tid -> [ThreadWindow or None per window], tids in order of appearance
        self.thread_windows: Dict[int, list] = {}
        self.tick: Dict[int, int] = {}        # tid -> its `lives` clock
        self.live: dict = {}                  # ptr -> (owner, ordinal, tick, nbytes, mk, chain length)
        # posix_memalign blocks whose pointer ltrace -e does not print: [alignment, their key in `live`] in the
        # order they came; a later free of a pointer never seen takes the first whose alignment divides it, as
        # trace-stats guesses (trace/profile.py, _unknown_free), so the two give one peak of live bytes
        self.unresolved: list = []
        self.ordinal = 0
        self.live_bytes = 0
        self.peak_bytes = 0
        self.peak_line = 0
        # The objects live at the peak of live bytes that their own thread freed after it (those still live at
        # the end are in `live`): (owner, ordinal and clock of the allocation, bytes, model kind, lifetime, ordinal
        # of the free), plain objects only (no realloc chain). Emptied each time the peak rises, so it holds no
        # more than the objects live at once (trace/model/shape.py, _take_bursts); none past MAX_PEAK_FREED
        # (peak_overflow: lua's peak held 886K objects that its teardown freed, 360 MB of records in Python)
        self.peak_ordinal = -1
        self.peak_freed: list = []
        self.peak_overflow = False
        # The objects still live at the end (not realloc chains) of KEPT_RECORD_SHARE of the peak of live bytes or
        # more, in the order they came: (owner, ordinal, `lives` clock, bytes, model kind) each; none when there
        # are more than MAX_KEPT_RECORDS (kept_overflow). A program's few big tables kept to its end are much of
        # its last live bytes (trace/model/shape.py, _take_big_kept)
        self.kept_big: list = []
        self.kept_overflow = False
        self.first_line: Optional[int] = None
        self.last_line = 0
        self.has_time = False
        self.has_cpu = False        # some call had its thread's CPU clock (a tracer log of version 6)
        self.trace_kinds = Counter()
        self.cross_frees = 0
        self.known_frees = 0
        # (owner tid, freer tid) -> flat [allocated, freed, ...] ordinals of the objects one handed to the
        # other: how many were in flight at once bounds the model's channel between them (back-pressure)
        self.handoffs: Dict[Tuple[int, int], array] = {}
        self.handoff_count = 0
        self.chains: Counter = Counter()      # tid -> realloc chains it holds now (blocks it reallocated last)
        self.max_chains: Counter = Counter()  # tid -> the most it held at once (finish: as chain_spans say)
        self.chain_classes: Dict[int, list] = {}      # tid -> chain blocks it holds now, per size class
        self.max_chain_classes: Dict[int, list] = {}  # tid -> the most it held at once of class c or above
        # Realloc chains step by step (Trail): those live now by their block's address, and per thread the
        # MAX_TRAILS finished ones with the largest sizes (a heap), with the largest size among those dropped
        self.trail_of: Dict[int, "Trail"] = {}
        self.trails: Dict[int, list] = {}
        self.trail_dropped: Counter = Counter()
        # A thread holds a chain from its start to its end, or to its last realloc when another thread freed
        # it (handed over then: in flight, as Collector.in_flight counts it, no longer held): tid -> the time
        # held, summed, on its `lives` clock; and [start, end of hold, ...] ordinals, for the most held at once
        self.chain_held: Counter = Counter()
        self.chain_spans: Dict[int, array] = {}
        self.chain_span_count = 0
        self._trail_seq = 0
        # The MAX_BIG_OBJECTS largest plain objects of each thread (a heap), the largest size dropped from it,
        # and the size an object needs to enter it (once it is full)
        self.big_objects: Dict[int, list] = {}
        self.big_dropped: Counter = Counter()
        self.big_floor: Dict[int, int] = {}
        # Thread lifetimes, in ordinals (events read with extra_events): a thread is alive from its captured
        # start, or its first call, to its captured exit, or the end
        self.born: Dict[int, int] = {}
        self.died: Dict[int, int] = {}
        self.thread_starts = 0
        # The program's own mappings (mmap, munmap, mremap outside the allocator): the pieces mapped now
        # (start -> (end, MapRecord or None for one the model leaves out), their starts in order), the
        # records of the writable ones (tid -> MapRecords, None once more than MAX_MAP_RECORDS), the bytes
        # mapped (all, and the writable ones the model makes) now and at their peak, the calls
        self.map_pieces: Dict[int, tuple] = {}
        self.map_starts: List[int] = []
        self.map_records: Dict[int, Optional[list]] = {}
        self.mapped_now = self.mapped_peak = 0
        self.mapped_writable = self.mapped_writable_peak = 0
        self.map_calls: Counter = Counter()
        self.maps_made = 0                          # writable mappings (MapRecords), all threads
        self.maps_left_out: Counter = Counter()     # 'reserved' (never writable), 'failed'
        self.maps_protected = 0                     # parts of reservations made writable by mprotect (MapRecords)
        self.map_bytes_made = 0                     # bytes of every writable mapping (or part) made, each once
        # per thread the MAX_BIG_MAPS largest mappings once ended or at the end (a heap), and the largest dropped
        self.big_maps: Dict[int, list] = {}
        self.big_maps_dropped: Counter = Counter()
        # mappings unmapped since their thread's last call (tid -> MapRecords): if it makes no call after, they
        # were unmapped at its teardown, and live to its end (`lives forever`) as much as those never unmapped
        self.map_ending: Dict[int, list] = {}
        # tid -> the time of its last call, in ns of the log's clock, and its CPU clock then (None: none): the
        # time between its calls ('gap_ns')
        self.last_call_ns: Dict[int, int] = {}
        self.last_call_cpu: Dict[int, Optional[int]] = {}

    # ---------------------------------------------------------------- the pass
    def _cell(self, tid: int, w: int) -> ThreadWindow:
        thread_windows = self.thread_windows.get(tid)
        if thread_windows is None:
            thread_windows = self.thread_windows[tid] = []
            self.tick[tid] = 0
        if len(thread_windows) <= w:
            thread_windows.extend([None] * (w + 1 - len(thread_windows)))
        thread_window = thread_windows[w]
        if thread_window is None:
            thread_window = thread_windows[w] = ThreadWindow()
        return thread_window

    def _merge_windows(self) -> None:
        """Halve the number of windows: merge neighbours, double the length."""
        wins = self.wins
        merged = []
        for i in range(0, len(wins), 2):
            w = wins[i]
            if i + 1 < len(wins):
                w.merge(wins[i + 1])
            merged.append(w)
        self.wins = merged
        for tid, thread_windows in self.thread_windows.items():
            out = []
            for i in range(0, len(thread_windows), 2):
                a = thread_windows[i]
                b = thread_windows[i + 1] if i + 1 < len(thread_windows) else None
                out.append(a.merge(b, discard=True) if a is not None and b is not None else a or b)
                if out[-1] is not None:
                    out[-1].halve_dies()
            self.thread_windows[tid] = out
        self.window *= 2

    def consume(self, events: Iterable) -> "Collector":
        # The hot loop of `convert --model` (one pass per call of the capture): the thread's window (its
        # ThreadWindow) and the window are kept from one call to the next while they stay the same, and the
        # buckets and histogram additions of the commonest calls are written out in place (as size_bucket and add).
        live = self.live
        tick = self.tick
        free_kinds, realloc_kinds, alloc_kinds, kinds = FREE_KINDS, REALLOC_KINDS, ALLOC_KINDS, KINDS
        trace_kinds = self.trace_kinds
        born = self.born
        last_call_ns, last_call_cpu = self.last_call_ns, self.last_call_cpu
        unresolved = self.unresolved
        model_kinds: dict = {}
        cell_tid = cell_w = win_w = -1
        thread_window = win = None
        for ev in events:
            line, tid, t, kind, size, nmemb, align, old, res, failed, _start, _dur, cpu = ev
            if kind not in kinds:
                self._extra(ev)
                continue
            if tid not in born:
                born[tid] = self.ordinal
            o = self.ordinal
            self.ordinal = o + 1
            w = o // self.window
            if w >= MAX_WINDOWS:
                self._merge_windows()
                w = o // self.window
                cell_tid = cell_w = win_w = -1
            if w != win_w:
                if w == len(self.wins):
                    self.wins.append(Window(line, t))
                    if t is not None:
                        self.has_time = True
                win, win_w = self.wins[w], w
                if self.first_line is None:
                    self.first_line = line
            win.events += 1
            if t is not None:
                win.t_last = t
            self.last_line = line
            trace_kinds[kind] += 1
            if old and unresolved and kind not in alloc_kinds and old not in live:
                self._resolve(old)
            if tid != cell_tid or w != cell_w:
                thread_window, cell_tid, cell_w = self._cell(tid, w), tid, w
            c = thread_window.c
            c["events"] += 1
            if t is not None:
                ns = round(t * 1e9)      # the log's ns again, exactly (a tracer log's time is (ns - base) / 1e9)
                before = last_call_ns.get(tid)
                before_cpu = last_call_cpu.get(tid)
                last_call_ns[tid] = ns
                last_call_cpu[tid] = cpu
                if cpu:
                    self.has_cpu = True
                if before is not None:
                    if cpu and before_cpu:      # the CPU time the thread ran between them: its waits left out
                        c["gaps"] += 1
                        c["gap_ns"] += max(0, cpu - before_cpu)
                    elif ns - before <= DENSE_GAP_NS:
                        c["gaps"] += 1
                        c["gap_ns"] += ns - before
            if kind in free_kinds:
                if not old:
                    c["free_null"] += 1
                    c["ticks"] += 1
                    tick[tid] += 1
                else:
                    e = live.pop(old, None)
                    if e is None:
                        c["free_unknown"] += 1
                    else:
                        self._release(e, tid, w, thread_window, win)
            elif kind in realloc_kinds and (not old or old not in live):
                # realloc(NULL, n) is an allocation (lua makes every object so); so is a realloc of a pointer
                # never seen allocated
                if old:
                    c["realloc_unknown"] += 1
                if failed:
                    c["realloc_failed"] += 1
                elif res or size:           # realloc(NULL, 0) returning NULL makes nothing
                    self._alloc(tid, o, w, thread_window, win, REALLOC_START, (size or 0) * (nmemb or 1), res)
            elif kind in realloc_kinds:
                self._realloc(tid, w, thread_window, win, size, nmemb, old, res, failed, line)
            elif kind in alloc_kinds:
                if failed:
                    c["alloc_failed"] += 1
                    continue
                mk = model_kinds.get((kind, align))
                if mk is None:
                    mk = model_kinds[kind, align] = (MODEL_KIND[kind], 4096 if kind in PAGE_ALIGNED else align)
                self._alloc(tid, o, w, thread_window, win, mk, (size or 0) * nmemb, res)
            if self.live_bytes > self.peak_bytes:
                self.peak_bytes, self.peak_line, self.peak_ordinal = self.live_bytes, line, o
                if self.peak_freed or self.peak_overflow:
                    self.peak_freed, self.peak_overflow = [], False
        return self

    def _alloc(self, tid: int, o: int, w: int, thread_window: ThreadWindow, win: Window, mk, nbytes: int, res) -> None:
        """An allocation of nbytes (model kind mk) at ordinal o, its block at res."""
        c = thread_window.c
        c["ticks"] += 1
        tick = self.tick
        now = tick[tid] + 1
        tick[tid] = now
        if nbytes < 1024:                                  # add(sizes, size_bucket(nbytes), nbytes)
            bucket = nbytes
        else:
            e = nbytes.bit_length() - 1
            bucket = 1024 + (e - 10) * 16 + ((nbytes >> (e - 4)) & 15)
        h = thread_window.sizes.get(bucket)
        if h is None:
            thread_window.sizes[bucket] = [1, nbytes]
        else:
            h[0] += 1
            h[1] += nbytes
        win.allocs += 1
        win.log_sizes += nbytes.bit_length()
        live = self.live
        if res is None:              # posix_memalign under ltrace -e: pointer not shown, a key of its own
            res = -1 - len(live)
            while res in live:
                res -= 1
            self.unresolved.append([mk[1] or 1, res])
        prev = live.get(res)
        if prev is not None:         # its free was not captured: let it end here, unseen
            c["free_missed"] += 1
            self._release(prev, prev[0], w, thread_window, win, seen=False)
            now = tick[tid]
        big = self._big_object(tid, (o, now), nbytes, mk) \
            if nbytes >= self.big_floor.get(tid, 0) else None
        live[res] = (tid, o, now, nbytes, mk, 0, big)
        self.live_bytes += nbytes

    def _resolve(self, ptr: int) -> None:
        """A free or realloc of ptr, never seen allocated: the first posix_memalign block of unknown pointer whose
        alignment divides ptr is taken for it (a guess, trace-stats' own), its record moved to ptr."""
        for i, (align, key) in enumerate(self.unresolved):
            if ptr % align == 0:
                del self.unresolved[i]
                self.live[ptr] = self.live.pop(key)
                return

    def _release(self, e, freer: int, w: int, thread_window: ThreadWindow, win: Window, seen: bool = True) -> None:
        owner, o_alloc, t_alloc, nbytes, mk, chain, big = e
        self.live_bytes -= nbytes
        win.frees += 1
        if seen:
            self.known_frees += 1
            if owner != freer:
                self.cross_frees += 1
        if owner != freer:
            self._handoff(owner, freer, o_alloc)
        if chain:
            self.chains[owner] -= 1
            self._chain_block(owner, nbytes, -1)
            self._end_trail(big, "local" if owner == freer else "send", (self.ordinal - 1, self.tick[freer] + 1))
            thread_window.c["ticks"] += 1
            if owner == freer:
                thread_window.c["end", "local", None] += 1
            else:
                # handed over at its last realloc (o_alloc): the owner let go of it then, in that window
                self._cell(owner, o_alloc // self.window).c["end", "send", freer] += 1
                thread_window.c["recv", owner] += 1
            self.tick[freer] += 1
            return
        w_alloc = o_alloc // self.window
        acell = thread_window if owner == freer and w_alloc == w else self._cell(owner, w_alloc)
        if big is not None:
            big.how, big.life = ("local", self.tick[owner] - t_alloc) if owner == freer else ("send", None)
            big.end = self.ordinal - 1
        if owner == freer:
            lifetime = self.tick[owner] - t_alloc
            if lifetime < 32:                               # life_bucket(lifetime)
                bucket = lifetime
            else:
                x = lifetime.bit_length() - 1
                bucket = 32 + (x - 5) * 8 + ((lifetime >> (x - 3)) & 7)
            h = acell.lives.get(bucket)                     # add(acell.lives, bucket, lifetime)
            if h is None:
                acell.lives[bucket] = [1, lifetime]
            else:
                h[0] += 1
                h[1] += lifetime
            cls = _bisect_right(SIZE_CLASS_BOUNDS, nbytes)  # size_class(nbytes)
            _add_to_class(acell.lives_by_class, cls, bucket, lifetime, nbytes)
            if w != w_alloc:
                _add_to_class(self._dies(acell, w), cls, bucket, lifetime, nbytes, kinds=True)[4][mk] += 1
            if o_alloc <= self.peak_ordinal and seen:
                if len(self.peak_freed) < MAX_PEAK_FREED:
                    self.peak_freed.append((owner, o_alloc, t_alloc, nbytes, mk, lifetime, self.ordinal - 1))
                else:
                    self.peak_overflow = True
            ac = acell.c
            ac["lives_class", mk, cls] += 1
            ac["lives", mk] += 1
        else:
            acell.c["send", mk, freer] += 1
            add(acell.sent, size_bucket(nbytes), nbytes)
            add(acell.sent_to.setdefault(freer, {}), size_bucket(nbytes), nbytes)
            thread_window.c["recv", owner] += 1
            thread_window.c["ticks"] += 1
            self.tick[freer] += 1

    @staticmethod
    def _dies(acell: ThreadWindow, w: int) -> dict:
        by_class = acell.dies.get(w)
        if by_class is None:
            by_class = acell.dies[w] = {}
        return by_class

    def _handoff(self, owner: int, freer: int, o_alloc: int) -> None:
        self.handoff_count += 1
        if self.handoff_count > MAX_HANDOFFS:
            return
        spans = self.handoffs.get((owner, freer))
        if spans is None:
            spans = self.handoffs[owner, freer] = array("q")
        spans.append(o_alloc)
        spans.append(self.ordinal - 1)

    def _extra(self, ev) -> None:
        """A thread's start or exit, or one of the program's own mappings (mmap, munmap, mremap)."""
        if ev.kind in ("mmap", "munmap", "mremap"):
            self._mapping(ev)
        elif ev.kind == "mprotect":
            self._protect(ev)
        elif ev.kind == "thread_start":
            self.thread_starts += 1
            self.born.setdefault(ev.tid, self.ordinal)
            if ev.size:
                self.born.setdefault(ev.size, self.ordinal)      # its creator was alive
        elif ev.kind == "thread_exit":
            self.born.setdefault(ev.tid, self.ordinal)
            self.died[ev.tid] = self.ordinal

    # ---------------------------------------------------------------- the program's own mappings
    def _mapping(self, ev) -> None:
        """mmap, munmap, mremap outside the allocator: pieces of pages, each of a mapping (MapRecord). A
        mapping that was never writable (a reservation) is address space, not memory: left out."""
        self.map_calls[ev.kind] += 1
        if ev.failed:
            self.maps_left_out["failed"] += ev.kind != "munmap"
            return
        tid = ev.tid
        self.tick.setdefault(tid, 0)
        if ev.kind == "mmap" and ev.result_ptr:
            size = page_round(ev.size or 0)
            self._cut(ev.result_ptr, ev.result_ptr + size)      # MAP_FIXED over earlier pieces
            rec = None
            if (ev.nmemb or 0) & PROT_WRITE:
                rec = self._new_map_record(tid, size)
            else:
                self.maps_left_out["reserved"] += 1
            self._add_piece(ev.result_ptr, ev.result_ptr + size, rec)
        elif ev.kind == "munmap" and ev.old_ptr:
            self._cut(ev.old_ptr, ev.old_ptr + page_round(ev.size or 0))
        elif ev.kind == "mremap" and ev.result_ptr and ev.old_ptr:
            recs = self._cut(ev.old_ptr, ev.old_ptr + page_round(ev.align or 0), ended=False)
            rec = recs[0] if recs else None
            new = page_round(ev.size or 0)
            self._cut(ev.result_ptr, ev.result_ptr + new)
            self._add_piece(ev.result_ptr, ev.result_ptr + new, rec)
            if rec is not None:
                if rec.bytes == 0:
                    self._end_map(rec)
                else:
                    self._resize(rec)
        self._note_mapped_peaks()

    def _new_map_record(self, tid: int, size: int) -> MapRecord:
        """A writable mapping of `size` bytes made now by thread tid (mmap, or a reservation's part made
        writable), counted and kept among the thread's records (modelcollect.c's new_map_record)."""
        rec = MapRecord(tid, (self.ordinal, self.tick[tid]), size, self.maps_made)
        self.maps_made += 1
        self.map_bytes_made += size
        self._map_window(tid)               # the thread has windows, even with no call of its own
        records = self.map_records.setdefault(tid, [])
        if records is not None:
            records.append(rec)
            if len(records) > MAX_MAP_RECORDS:
                self.map_records[tid] = None
        return rec

    def _note_mapped_peaks(self) -> None:
        if self.mapped_now > self.mapped_peak:
            self.mapped_peak = self.mapped_now
        if self.mapped_writable > self.mapped_writable_peak:
            self.mapped_writable_peak = self.mapped_writable

    def _protect(self, ev) -> None:
        """mprotect outside the allocator. The parts of reservations (mapped never writable: V8's heap, a JIT's
        code space) it makes writable hold memory from then on, as mappings of their own (MapRecords) until
        unmapped; taking the write permission away leaves a written page resident, so nothing changes then
        (a runtime that gives pages back maps PROT_NONE over them, an mmap; or madvises, not recorded).
        Calls on memory that is no mapping of the program's own (its stack, a file mapping) are left out."""
        self.map_calls["mprotect"] += 1
        if ev.failed or not ev.old_ptr or not (ev.nmemb or 0) & PROT_WRITE:
            return
        lo, hi = ev.old_ptr, ev.old_ptr + page_round(ev.size or 0)
        starts, pieces = self.map_starts, self.map_pieces
        i = max(0, bisect.bisect_right(starts, lo) - 1)
        reserved = []
        while i < len(starts) and starts[i] < hi:
            end, rec = pieces[starts[i]]
            if end > lo and rec is None:
                reserved.append((max(starts[i], lo), min(end, hi)))
            i += 1
        if not reserved:
            return
        tid = ev.tid
        self.tick.setdefault(tid, 0)
        for a, b in reserved:
            self._cut(a, b)
            rec = self._new_map_record(tid, b - a)
            self.maps_protected += 1
            self._add_piece(a, b, rec)
        self._note_mapped_peaks()

    def _map_window(self, tid: int) -> ThreadWindow:
        """tid's ThreadWindow in the last window (a mapping comes between calls)."""
        return self._cell(tid, max(0, min(self.ordinal // self.window, len(self.wins) - 1)))

    def _add_piece(self, lo: int, hi: int, rec: Optional[MapRecord]) -> None:
        if hi <= lo:
            return
        self.map_pieces[lo] = (hi, rec)
        bisect.insort(self.map_starts, lo)
        self.mapped_now += hi - lo
        if rec is not None:
            rec.bytes += hi - lo
            self.mapped_writable += hi - lo

    def _cut(self, lo: int, hi: int, ended: bool = True) -> list:
        """Unmap [lo, hi) out of every piece it overlaps; the records it touched (ended, when their last page
        went and `ended`)."""
        starts, pieces = self.map_starts, self.map_pieces
        i = max(0, bisect.bisect_right(starts, lo) - 1)
        touched = []
        while i < len(starts) and starts[i] < hi:
            start = starts[i]
            end, rec = pieces[start]
            if end <= lo:
                i += 1
                continue
            del pieces[start]
            del starts[i]
            cut = min(end, hi) - max(start, lo)
            self.mapped_now -= cut
            if rec is not None:
                rec.bytes -= cut
                self.mapped_writable -= cut
                touched.append(rec)
            if start < lo:
                pieces[start] = (lo, rec)
                bisect.insort(starts, start)
                i += 1
            if hi < end:
                pieces[hi] = (end, rec)
                bisect.insort(starts, hi)
        for rec in touched:
            if rec.bytes <= 0 and ended:
                self._end_map(rec)
            elif ended:
                self._resize(rec)
        return touched

    def _resize(self, rec: MapRecord) -> None:
        """A mapping cut (or grown) while still mapped: cut before its thread's next call, it is the size it
        kept (an aligning trim); later, or grown, its largest."""
        if self.tick[rec.tid] == rec.at[1] and self.ordinal == rec.at[0]:
            rec.size = rec.bytes
        else:
            rec.size = max(rec.size, rec.bytes)

    def _end_map(self, rec: MapRecord) -> None:
        """A mapping's last page unmapped: its lifetime on its thread's clock; counted once its thread makes
        another call (_count_map), or at the end as one kept to the end if it makes none."""
        if rec.life is not None:
            return
        rec.life = self.tick[rec.tid] - rec.at[1]
        if rec.size <= 0:
            return
        ending = self.map_ending.setdefault(rec.tid, [])
        if ending and self.tick[rec.tid] > ending[0].at[1] + ending[0].life:
            for done in ending:
                self._count_map(done)
            ending.clear()
        ending.append(rec)

    def _count_map(self, rec: MapRecord) -> None:
        """An unmapped mapping's size and lifetime into the window it was made in."""
        self._big_map(rec)
        thread_window = self._cell(rec.tid, min(rec.at[0] // self.window, max(len(self.wins) - 1, 0)))
        b = size_bucket(rec.size)
        thread_window.c["map"] += 1
        thread_window.c["map", b] += 1
        add(thread_window.maps, b, rec.size)
        add(thread_window.map_lives.setdefault(b, {}), life_bucket(rec.life), rec.life)

    def _big_map(self, rec: MapRecord) -> None:
        """A mapping whose size and lifetime are final among its thread's largest (a heap of MAX_BIG_MAPS)."""
        heap = self.big_maps.setdefault(rec.tid, [])
        item = (rec.size, rec.at[0], rec.seq, rec)
        if len(heap) < MAX_BIG_MAPS:
            heapq.heappush(heap, item)
        else:
            dropped = heapq.heappushpop(heap, item)
            self.big_maps_dropped[rec.tid] = max(self.big_maps_dropped[rec.tid], dropped[0])

    def alive_at_most(self, tids) -> int:
        """Most of these threads alive at once (an exit at an ordinal before a start at the same one)."""
        steps = []
        for tid in tids:
            if tid in self.born:
                steps.append((self.born[tid], 1))
                if tid in self.died:
                    steps.append((self.died[tid], -1))
        steps.sort()
        most = level = 0
        for _, step in steps:
            level += step
            most = max(most, level)
        return most

    def in_flight(self, pairs) -> Optional[int]:
        """Most objects allocated by one thread and not yet freed by another at once, over the given
        (owner, freer) pairs together; None when too many handoffs were seen to keep them all."""
        spans = self._handoff_spans(pairs)
        return None if spans is None else _most_at_once(spans)

    def typical_in_flight(self, pairs) -> Optional[int]:
        """How many objects allocated by one thread and not yet freed by another were in flight at once most
        of the time, over the given (owner, freer) pairs together: the median, each count weighted by the
        calls it lasted, from the first handoff's allocation to the last one's free; None as for in_flight."""
        spans = self._handoff_spans(pairs)
        return None if spans is None else _median_at_once(spans)

    def receive_run(self, pairs) -> int:
        """How many of the handed objects of the given (owner, freer) pairs the freers freed in a row, with no
        allocation of one in between: the median over such runs (0 without handoffs, or with too many).
        python's pc.py: 64, every run (the GIL lets the producer fill its queue of 64, then the consumer
        empty it); bench/programs/prodcons.c, in C on two cores: 1."""
        spans = self._handoff_spans(pairs)
        if not spans:
            return 0
        runs, run = [], 0
        for _, step in _steps(spans):
            if step < 0:
                run += 1
            elif run:
                runs.append(run)
                run = 0
        runs += [run] if run else []
        return int(median(runs))

    def _handoff_spans(self, pairs) -> Optional[array]:
        """The handoffs' [allocated, freed, ...] ordinals of the given (owner, freer) pairs, together."""
        if self.handoff_count > MAX_HANDOFFS:
            return None
        spans = array("q")
        for pair in pairs:
            spans.extend(self.handoffs.get(pair, ()))
        return spans

    def _realloc(self, tid, w, thread_window, win, size, nmemb, old, res, failed, line) -> None:
        c = thread_window.c
        if failed:
            c["realloc_failed"] += 1
            return
        live = self.live
        nbytes = (size or 0) * (nmemb or 1)
        e = live.pop(old)               # the caller saw it live
        if not res:                     # realloc(p, 0) that freed p: a free in the model
            c["realloc_as_free"] += 1
            self._release(e, tid, w, thread_window, win)
            return
        self.tick[tid] += 1
        c["ticks"] += 1
        c["realloc"] += 1
        add(thread_window.rsizes, size_bucket(nbytes), nbytes)
        owner, o_alloc, t_alloc, old_bytes, mk, chain = e[:6]
        self.live_bytes -= old_bytes
        if not chain:               # a plain object becomes a realloc chain: its allocation starts it
            acell = self._cell(owner, o_alloc // self.window)
            acell.c["start", mk] += 1
            add(acell.starts, size_bucket(old_bytes), old_bytes)
            if e[6] is not None:
                e[6].how = "chain"
            trail = Trail(owner, (o_alloc, t_alloc), mk, old_bytes)
        else:
            self.chains[owner] -= 1
            self._chain_block(owner, old_bytes, -1)
            trail = e[6]
        now = (self.ordinal - 1, self.tick[tid])
        trail.step(now, nbytes)
        self.chains[tid] += 1
        self.max_chains[tid] = max(self.max_chains[tid], self.chains[tid])
        self._chain_block(tid, nbytes, 1)
        prev = live.get(res)
        if prev is not None:
            c["free_missed"] += 1
            self._release(prev, prev[0], w, thread_window, win, seen=False)
        live[res] = (tid, self.ordinal - 1, self.tick[tid], nbytes, mk, chain + 1, trail)
        self.live_bytes += nbytes

    def _chain_block(self, tid: int, nbytes: int, step: int) -> None:
        """A realloc chain's block of nbytes comes (step 1) or goes (-1): how many big blocks a thread grows
        at once, by size class (a program grows one big buffer among many small ones)."""
        counts = self.chain_classes.get(tid)
        if counts is None:
            counts = self.chain_classes[tid] = [0] * (len(SIZE_CLASS_BOUNDS) + 1)
            self.max_chain_classes[tid] = [0] * (len(SIZE_CLASS_BOUNDS) + 1)
        cls = size_class(nbytes)
        counts[cls] += step
        if step > 0:
            most, held = self.max_chain_classes[tid], 0
            for c in range(len(counts) - 1, -1, -1):
                held += counts[c]
                if c <= cls and held > most[c]:
                    most[c] = held

    def _big_object(self, tid: int, moment: tuple, nbytes: int, mk) -> Optional["BigObject"]:
        """A record for an object among its thread's largest so far (None when it is not)."""
        heap = self.big_objects.setdefault(tid, [])
        rec = BigObject(moment, nbytes, mk)
        item = (nbytes, moment[0], rec)
        if len(heap) < MAX_BIG_OBJECTS:
            heapq.heappush(heap, item)
        else:
            dropped = heapq.heappushpop(heap, item)
            self.big_dropped[tid] = max(self.big_dropped[tid], dropped[0])
            if dropped[2] is rec:
                return None
        if len(heap) == MAX_BIG_OBJECTS:
            self.big_floor[tid] = heap[0][0]
        return rec

    def _end_trail(self, trail: "Trail", how: str, moment: Optional[tuple]) -> None:
        """A chain ended (at moment, None: still live at the end): keep it if it is among its thread's MAX_TRAILS
        largest."""
        trail.end, trail.how = moment, how
        held = trail.last if how == "send" else moment or (self.ordinal, self.tick[trail.owner])
        self.chain_held[trail.owner] += held[1] - trail.start[1]
        self.chain_span_count += 1
        if self.chain_span_count <= MAX_HANDOFFS:
            self.chain_spans.setdefault(trail.owner, array("q")).extend((trail.start[0], held[0]))
        heap = self.trails.setdefault(trail.owner, [])
        self._trail_seq += 1
        item = (trail.largest, self._trail_seq, trail)
        if len(heap) < MAX_TRAILS:
            heapq.heappush(heap, item)
            return
        dropped = heapq.heappushpop(heap, item)[2]
        self.trail_dropped[trail.owner] = max(self.trail_dropped[trail.owner], dropped.largest)

    def finish(self) -> None:
        """Objects still live at the end: they live to the end of their thread (`lives forever`), with
        sizes of their own (often not the others': a program's buffers and tables)."""
        if self.peak_overflow:
            self.peak_freed = []
        last = max(len(self.wins) - 1, 0)
        kept_floor = self.peak_bytes * KEPT_RECORD_SHARE
        for e in self.live.values():
            owner, o_alloc, t_alloc, nbytes, mk, chain = e[:6]
            if chain:
                self._cell(owner, last).c["end", "end", None] += 1
                self._end_trail(e[6], "end", None)
            else:
                if 0 < nbytes and kept_floor <= nbytes and not self.kept_overflow:
                    if len(self.kept_big) < MAX_KEPT_RECORDS:
                        self.kept_big.append((owner, o_alloc, t_alloc, nbytes, mk))
                    else:
                        self.kept_big, self.kept_overflow = [], True
                if e[6] is not None:
                    e[6].how = "kept"
                acell = self._cell(owner, o_alloc // self.window)
                add(acell.kept, size_bucket(nbytes), nbytes)
                acell.c["kept", mk] += 1
                acell.c["kept_ticks"] += t_alloc          # when they came, on the `lives` clock (their mean)
                acell.c["censored"] += 1
        self.live_at_end = len(self.live)
        self.live.clear()
        kept = {id(rec): rec for _, rec in self.map_pieces.values() if rec is not None and rec.life is None}
        for tid, ending in self.map_ending.items():
            for rec in ending:
                if self.tick[tid] > rec.at[1] + rec.life:
                    self._count_map(rec)
                else:                      # unmapped after its thread's last call: at its teardown
                    rec.life = None
                    kept[id(rec)] = rec
        self.map_ending.clear()
        for rec in kept.values():          # still mapped at the end: `map(n) lives forever`
            thread_window = self._cell(rec.tid, min(rec.at[0] // self.window, last))
            thread_window.c["map_kept"] += 1
            thread_window.c["map_kept", size_bucket(rec.size)] += 1
            add(thread_window.map_kept, size_bucket(rec.size), rec.size)
            if rec.size > 0:
                self._big_map(rec)
        if self.chain_span_count <= MAX_HANDOFFS:
            for tid, spans in self.chain_spans.items():
                self.max_chains[tid] = _most_at_once(spans)


def _add_to_class(by_class: dict, cls: int, bucket: int, lifetime: int, nbytes: int, kinds: bool = False) -> list:
    """One object freed by its own thread into figures by size class (ThreadWindow.lives_by_class; a ThreadWindow.dies
    window, with a Counter of kinds); its class's entry."""
    entry = by_class.get(cls)
    if entry is None:
        entry = by_class[cls] = [{}, 0, 0, {}] + ([Counter()] if kinds else [])
    h = entry[0].get(bucket)
    if h is None:
        entry[0][bucket] = [1, lifetime]
    else:
        h[0] += 1
        h[1] += lifetime
    entry[1] += nbytes
    entry[2] += nbytes * lifetime
    if nbytes < 1024:
        sb = nbytes
    else:
        e = nbytes.bit_length() - 1
        sb = 1024 + (e - 10) * 16 + ((nbytes >> (e - 4)) & 15)
    h = entry[3].get(sb)
    if h is None:
        entry[3][sb] = [1, nbytes]
    else:
        h[0] += 1
        h[1] += nbytes
    return entry


def _steps(spans) -> list:
    """The starts (+1) and ends (-1) of the spans [a, b] of a flat [a, b, a, b, ...], in order (an end at x
    before a start at x)."""
    return sorted([(spans[i], 1) for i in range(0, len(spans), 2)] + [(spans[i], -1) for i in range(1, len(spans), 2)])


def _most_at_once(spans) -> int:
    """Most spans [a, b] of a flat [a, b, a, b, ...] that overlap at once (one ending at x before one starting
    at x)."""
    most = level = 0
    for _, step in _steps(spans):
        level += step
        most = max(most, level)
    return most


def _median_at_once(spans) -> int:
    """The median of how many spans [a, b] of a flat [a, b, a, b, ...] overlap, each count weighted by the
    calls it lasted, from the first span's start to the last one's end (0 without spans)."""
    lasted: Counter = Counter()
    level, last = 0, None
    for x, step in _steps(spans):
        if last is not None:
            lasted[level] += x - last
        level, last = level + step, x
    half, seen = sum(lasted.values()) / 2, 0
    for count in sorted(lasted):
        seen += lasted[count]
        if seen >= half:
            return count
    return 0


# --------------------------------------------------------------------------- phases
