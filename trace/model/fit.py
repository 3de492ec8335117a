"""Fits for `scenc convert --model`: phases, lifetime distributions, thread groups.

Plain functions over the figures the streaming pass collected
(trace/model/collect.py); the thresholds and tests are described in
docs/capture.md, "scenc convert --model".
"""

import math
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from .collect import SIZE_CLASS_BOUNDS, ThreadWindow, Window, hist_totals, life_bucket_range, size_class

SIZE_THRESHOLD = 2.0         # phase change: log2 of the ratio of typical (geometric mean) sizes: 4x
GROWTH_THRESHOLD = 0.5       # phase change: difference of (allocations - frees) / (allocations + frees)
RATE_THRESHOLD = 3.0         # phase change: log2 of the ratio of call rates: 8x ...
MIN_RATE_SPAN = 0.05         # ... between parts that last 50 ms at least (a start-up's hiccups are no phase)
MIN_PHASE_EVENTS = 32        # a phase holds at least this many calls, one window and MIN_PHASE_SHARE of all
MIN_PHASE_SHARE = 0.02
MAX_TABLE = 16               # entries of a `weighted` lifetime table
LARGE_SHARE = 0.05           # large objects: at most 5% of those a thread frees itself ...
LARGE_MASS = 0.25            # ... holding a quarter of their bytes x lifetimes at least, or
HEAVY_SHARE = 0.15           # ... at most 15% of them ...
HEAVY_MASS = 0.75            # ... holding three quarters at least
PAIRED_ERROR = 2.0           # sizes and lifetimes drawn apart misjudge the bytes x lifetimes this many times or more
LARGE_REALLOC_SHARE = 0.25   # large realloc sizes: at most a quarter of the reallocs ...
LARGE_REALLOC_BYTES = 0.5    # ... with half their bytes at least
MAX_BIG_CHAINS = 16          # a thread's chains that reach the large realloc sizes are written step by step ...
MAX_BIG_STEPS = 1024         # ... when there are this few, with this many reallocs in all at most
BIG_OBJECT_SHARE = 1 / 64    # a thread's objects of this share of the capture's peak of live bytes or more ...
MAX_BIG_OBJECTS = 16         # ... are written one by one when there are this few
LONG_LIFE_SHARE = 1 / 64     # ... and so are those that live this share of their phase (long_big_objects)
KEPT_SPREAD = 1 / 100       # the objects kept to the end drawn from their sizes vary the live bytes by this share of the
#                              peak at most (one standard deviation): the largest are written one by one ...
MAX_KEPT_OBJECTS = 256       # ... this many at most (big_kept_objects)
BURST_EXCESS = 3             # a size class came in a burst when this many times more of its bytes were live at the
#                              capture's peak than its phase's objects keep live on average ...
BURST_SHARE = 1 / 16         # ... and such classes' objects live at the peak are made and freed together when
#                              they hold this share of the peak at least


# --------------------------------------------------------------------------- phases
@dataclass
class Phase:
    start: int                  # first window
    end: int                    # one past the last window
    first_line: int
    last_line: int
    events: int
    why: str = ""               # what changed where it starts


def _segment(wins: List[Window], a: int, b: int, has_time: bool) -> dict:
    allocs = sum(w.allocs for w in wins[a:b])
    frees = sum(w.frees for w in wins[a:b])
    events = sum(w.events for w in wins[a:b])
    # sizes by their logarithm (bit length), counts rather than bytes: one huge block does not make a phase
    f = {"events": events,
         "size": sum(w.log_sizes for w in wins[a:b]) / allocs if allocs else None,
         "growth": (allocs - frees) / (allocs + frees) if allocs + frees else 0.0}
    if has_time and wins[a].t_first is not None and wins[b - 1].t_last is not None:
        span = wins[b - 1].t_last - wins[a].t_first
        f["rate"] = math.log2(events / span) if span >= MIN_RATE_SPAN else None
    return f


_FEATURES = (("size", SIZE_THRESHOLD), ("growth", GROWTH_THRESHOLD), ("rate", RATE_THRESHOLD))


def _describe(name: str, x: float, y: float) -> str:
    if name == "size":
        return f"typical size {2 ** (x - 1):.0f} -> {2 ** (y - 1):.0f} bytes (geometric mean)"
    if name == "rate":
        return f"call rate {2 ** x:.0f} -> {2 ** y:.0f} calls/s"
    return f"growth {x:+.2f} -> {y:+.2f} ((allocations - frees) / (allocations + frees))"


def _best_split(wins: List[Window], a: int, b: int, has_time: bool, min_events: int):
    """(score, k, reason) of the strongest change inside windows [a, b) that passes a threshold, or None.

    For one step change, the difference of the two sides' means is largest at
    the step, so the best k is where the pattern changes."""
    best = None
    for k in range(a + 1, b):
        left, right = _segment(wins, a, k, has_time), _segment(wins, k, b, has_time)
        if min(left["events"], right["events"]) < min_events:
            continue
        score, reason = 0.0, ""
        for name, threshold in _FEATURES:
            x, y = left.get(name), right.get(name)
            if x is not None and y is not None and abs(x - y) / threshold > score:
                score, reason = abs(x - y) / threshold, _describe(name, x, y)
        if best is None or score > best[0]:
            best = (score, k, reason)
    return best if best is not None and best[0] >= 1.0 else None


def detect_phases(wins: List[Window], has_time: bool, max_phases: int, last_line: int) -> List[Phase]:
    """Binary segmentation: split the segment with the strongest change, until none passes or max_phases."""
    cuts = {0: ""}
    segments = [(0, len(wins))]
    min_events = max(MIN_PHASE_EVENTS, MIN_PHASE_SHARE * sum(w.events for w in wins))
    while len(cuts) < max_phases:
        found = [(split, a, b) for a, b in segments for split in [_best_split(wins, a, b, has_time, min_events)] if split]
        if not found:
            break
        (_score, k, why), a, b = max(found, key=lambda f: f[0][0])
        cuts[k] = why
        segments.remove((a, b))
        segments += [(a, k), (k, b)]
    starts = sorted(cuts)
    phases = []
    for i, s in enumerate(starts):
        e = starts[i + 1] if i + 1 < len(starts) else len(wins)
        if s >= len(wins):
            break
        end_line = wins[e].first_line - 1 if e < len(wins) else last_line
        phases.append(Phase(s, e, wins[s].first_line, end_line, sum(w.events for w in wins[s:e]), cuts[s]))
    return phases or [Phase(0, 0, 0, last_line, 0)]


# --------------------------------------------------------------------------- lifetimes
@dataclass
class LifetimeFit:
    expr: str                   # what follows `lives`
    samples: int
    mean: float                 # of the capture's lifetimes
    model_mean: float           # of the expression's draws (from the compiler's own table)
    ks: float                   # Kolmogorov-Smirnov distance, capture vs the expression
    geometric_ks: float         # the same for a geometric of the capture's mean
    how: str                    # 'geometric' or 'table'

    def comment(self) -> str:
        if self.how == "geometric":
            return (f"lifetimes of {self.samples} objects, mean {self.mean:.1f} calls: a geometric fits "
                    f"(KS distance {self.ks:.3f})")
        return (f"lifetimes of {self.samples} objects, mean {self.mean:.1f} calls: not geometric (KS "
                f"{self.geometric_ks:.2f}), so a table of buckets at their means (KS {self.ks:.3f}, mean "
                f"{self.model_mean:.1f})")


def _cdf_points(hist: dict):
    """(x, empirical P(L <= x)) at both edges of every bucket (inside a bucket the CDF is unknown)."""
    n = sum(c for c, _ in hist.values())
    cum = 0
    for b in sorted(hist):
        lo, hi = life_bucket_range(b)
        yield lo - 1, cum / n
        cum += hist[b][0]
        yield hi - 1, cum / n


def fit_lifetimes(hist: dict) -> Optional[LifetimeFit]:
    """The `lives` expression for a histogram of lifetimes (life_bucket -> [count, sum])."""
    from ...compiler.distributions import geometric_table
    n, total = hist_totals(hist)
    if not n:
        return None
    mean = total / n
    q = mean / (mean + 1)          # L = G - 1 with G geometric on 1, 2, ... of mean (mean + 1)
    points = list(_cdf_points(hist))
    geo_ks = max(abs(f - (1 - q ** (x + 1) if x >= 0 else 0.0)) for x, f in points)
    if geo_ks <= max(0.05, 1.36 / math.sqrt(n)):      # not rejected by a KS test at 5%
        m = round(mean + 1, 2)
        return LifetimeFit(f"geometric(mean = {m:g}) - 1", n, mean, geometric_table(m).mean() - 1, geo_ks, geo_ks,
                           "geometric")
    # The histogram's buckets (exact below 32), neighbours with the least mass merged until MAX_TABLE are
    # left; each at its mean.
    buckets = [list(hist[b]) for b in sorted(hist)]
    while len(buckets) > MAX_TABLE:
        i = min(range(len(buckets) - 1), key=lambda j: buckets[j][0] + buckets[j + 1][0])
        buckets[i] = [buckets[i][0] + buckets[i + 1][0], buckets[i][1] + buckets[i + 1][1]]
        del buckets[i + 1]
    table: Dict[int, int] = {}
    for c, s in buckets:
        v = round(s / c)
        table[v] = table.get(v, 0) + c
    values = sorted(table.items())
    ks = max(abs(f - sum(c for v, c in values if v <= x) / n) for x, f in points)
    model_mean = sum(v * c for v, c in values) / n
    expr = "weighted { " + ", ".join(f"{v}: {c}" for v, c in values) + " }" if len(values) > 1 else str(values[0][0])
    return LifetimeFit(expr, n, mean, model_mean, ks, geo_ks, "table")


def large_class(by_class: dict) -> Optional[int]:
    """The lowest size class from which on objects freed by their own thread are the model's large ones:
    at most LARGE_SHARE of them, with LARGE_MASS of their sum of size x lifetime (their expected live
    bytes) at least, or, when there are none such, at most HEAVY_SHARE with HEAVY_MASS (node's main thread at its end: 596 buffers of
    16 KB to 535 KB, 12% of its objects, held 99% of their bytes x lifetimes; drawn with the small ones'
    lifetimes, its model peaked at 0.6x the capture); None when there is no such class (no few objects
    that weigh on the live bytes).

    by_class: size class -> [lifetime histogram, bytes, bytes * lifetime, sizes] (trace/model/collect.py)."""
    classes = sorted(by_class)
    n_total = sum(hist_totals(by_class[c][0])[0] for c in classes)
    mass_total = sum(by_class[c][2] for c in classes)
    for share, least in ((LARGE_SHARE, LARGE_MASS), (HEAVY_SHARE, HEAVY_MASS)):
        found, n, mass = None, 0, 0
        for c in reversed(classes[1:]):              # the smallest class stays small
            n += hist_totals(by_class[c][0])[0]
            mass += by_class[c][2]
            if n > share * n_total:
                break
            if mass_total and mass >= least * mass_total:
                found = c
        if found is not None:
            return found
    return None


def paired_class(by_class: dict) -> Optional[int]:
    """The size class from which on objects freed by their own thread get sizes and lifetimes of their own
    because they live much longer or shorter than the smaller ones: when drawing every size from one table and
    every lifetime from another misjudges their sum of size x lifetime (their expected live bytes) PAIRED_ERROR
    times or more, the class whose split brings the two parts' drawn sums nearest to it; None otherwise. node's
    libuv ring (4 threads) freed 1-16 KiB objects after 25 of its calls and those under 1 KiB after 774: drawn
    apart, the bytes x lifetimes came out 11 times the capture's, and at the model's peak the group held 926 KB
    against 11 KB.

    by_class: as for large_class."""
    classes = sorted(by_class)
    mass = sum(by_class[c][2] for c in classes)
    if len(classes) < 2 or mass <= 0:
        return None

    def drawn(part) -> float:
        n, lives = (sum(x) for x in zip(*(hist_totals(by_class[c][0]) for c in part))) if part else (0, 0)
        return sum(by_class[c][1] for c in part) * lives / n if n else 0.0

    def error(x: float) -> float:
        return max(x / mass, mass / x) if x > 0 else float("inf")

    whole = error(drawn(classes))
    if whole < PAIRED_ERROR:
        return None
    split = min(classes[1:], key=lambda c: (error(drawn([k for k in classes if k < c])
                                                  + drawn([k for k in classes if k >= c])), c))
    return split if error(drawn([k for k in classes if k < split]) + drawn([k for k in classes if k >= split])) \
        < whole else None


def large_realloc_class(rsizes: dict) -> Optional[int]:
    """The lowest size class from which on realloc sizes are the large ones: at most LARGE_REALLOC_SHARE of
    the reallocs, with LARGE_REALLOC_BYTES of their bytes at least (a buffer grown big among many small
    ones); None when there is none. rsizes: a size histogram (buckets never straddle a class bound)."""
    from .collect import size_class
    by_class: Dict[int, List[int]] = {}
    for c, total in rsizes.values():
        part = by_class.setdefault(size_class(round(total / c)), [0, 0])
        part[0] += c
        part[1] += total
    n_total, bytes_total = hist_totals(rsizes)
    found, n, nbytes = None, 0, 0
    for c in sorted(by_class, reverse=True)[:-1]:        # the smallest class stays small
        n += by_class[c][0]
        nbytes += by_class[c][1]
        if n > LARGE_REALLOC_SHARE * n_total:
            break
        if nbytes >= LARGE_REALLOC_BYTES * bytes_total:
            found = c
    return found


def big_chains(trails: list, dropped_largest: int, rsizes: dict, peak_bytes: int = 0) -> list:
    """The realloc chains (trace/model_collect.Trail) of one thread written step by step: those whose largest
    size is a large realloc size (large_realloc_class), when they are few (MAX_BIG_CHAINS, MAX_BIG_STEPS),
    all kept whole by the collector, and freed by the thread itself (or live at the end); in the order
    they started. A program grows one big buffer (a JSON text, a file read whole) from small to large and
    frees it: its size at each moment is what its chain made it, and drawn at random in any order, the
    large sizes would rarely stand at their largest when the rest of the heap does (python_json_e's model fell
    well short of its capture's peak). Without large realloc sizes (a thread that makes few reallocs: a
    quarter of them cannot stand apart), the chains whose block reaches BIG_OBJECT_SHARE of the capture's
    peak of live bytes, as big objects are (alloc_kinds_x.log: one block grown 10 -> 100 -> 5000 bytes among
    two reallocs)."""
    large_from = large_realloc_class(rsizes) if rsizes else None
    if large_from is not None:
        bound = class_bound(large_from)
    elif peak_bytes > 0:
        bound = peak_bytes * BIG_OBJECT_SHARE
    else:
        return []
    big = [t for t in trails if t.largest >= bound]
    if (not big or dropped_largest >= bound or len(big) > MAX_BIG_CHAINS
            or any(t.steps is None or t.how == "send" for t in big)
            or sum(len(t.steps) for t in big) > MAX_BIG_STEPS):
        return []
    return sorted(big, key=lambda t: t.start)


def big_objects(records: list, dropped_largest: int, peak_bytes: int) -> list:
    """The objects of one thread (trace/model_collect.BigObject) written one by one, each with its size, where
    it came and its lifetime: those of BIG_OBJECT_SHARE of the capture's peak of live bytes or more, freed by
    their own thread or live at the end, when the collector kept all of them (at most MAX_BIG_OBJECTS). A
    few big blocks make much of a peak: drawn from one size table and one lifetime table, the largest size
    would meet the longest lifetime by chance (python_json_e: a 296 KB block that lives 3200 calls)."""
    floor = peak_bytes * BIG_OBJECT_SHARE
    if not records or floor <= 0 or dropped_largest >= floor:
        return []
    big = [r for r in records if r.size >= floor]
    if len(big) > MAX_BIG_OBJECTS:      # many alike: the large objects' statement keeps them (large_class)
        return []
    return sorted((r for r in big if r.how in ("local", "kept")), key=lambda r: r.at)


def big_kept_objects(records: list, kept: dict, peak_bytes: int) -> list:
    """Of one thread's objects still live at the end (records: Collector.kept_big's, its largest), those written
    one by one, each with its size where it came: the largest, until the sum of the others' sizes, drawn from
    their histogram (kept: the thread's, all phases), varies by KEPT_SPREAD of the capture's peak of live bytes
    at most (one standard deviation), MAX_KEPT_OBJECTS at most; in the order they came. A program's last live
    bytes are mostly what it keeps to its end, and among thousands of small objects a few big tables are most of
    them: gcc's cc1 kept 3.9 MB in 19,429 objects, 2.2 MB of it in 24 blocks of 64 KiB to 512 KiB, and drawn
    at random the model's peak (at its end, as the program's) came out 0.75x to 1.11x of the capture's from
    one seed to the next. The bound is the trace's own: how much drawing the kept sizes moves the peak."""
    n, total = hist_totals(kept)
    if not records or not n or peak_bytes <= 0:
        return []
    squares = sum(s * s / c for c, s in kept.values())
    chosen = []
    for r in sorted(records, key=lambda r: (-r[3], r[1])):
        spread = math.sqrt(max(squares - total * total / n, 0.0)) if n else 0.0    # sqrt(n * variance)
        if spread <= KEPT_SPREAD * peak_bytes or len(chosen) >= MAX_KEPT_OBJECTS:
            break
        chosen.append(r)
        n, total, squares = n - 1, total - r[3], squares - r[3] * r[3]
    return sorted(chosen, key=lambda r: r[1])


def class_kinds(c: dict) -> Dict[int, Dict[object, int]]:
    """Size class -> model kind -> objects freed by their own thread, from a ThreadWindow's counters
    (('lives_class', mk, class))."""
    out: Dict[int, Dict[object, int]] = {}
    for k, n in c.items():
        if isinstance(k, tuple) and k[0] == "lives_class":
            kinds = out.setdefault(k[2], {})
            kinds[k[1]] = kinds.get(k[1], 0) + n
    return out


@dataclass
class PhaseLarge:
    """What long_big_objects needs of a record's phase (one thread's figures)."""
    index: int
    ticks: int                  # of the thread's `lives` clock in the phase
    large_from: Optional[int]   # its large_class
    by_class: Dict[int, int]    # its objects freed by the thread, by size class


def long_big_objects(records: list, peak_bytes: int, phase_of: Callable[[object], PhaseLarge]) -> list:
    """The objects of one thread (collect.BigObject records, freed by it) that weigh on the live bytes by their
    size and their long life, in the order they came: large ones (of their phase's large_class or above), of
    BIG_OBJECT_SHARE of the capture's peak of live bytes or more each, living LONG_LIFE_SHARE of their phase's
    `lives` clock or more, when they are at most LARGE_SHARE of their phase's objects of their size class. They
    are written one by one like the big objects. Drawn from the one size table and lifetime table of their band
    of large objects (sizes.large_bands), a block that lived a million calls among thousands of its size that lived
    a few thousand lived as long as a bucket's mean, as often as luck had it (espresso: its peak held 4 blocks of
    13-38 KB, a third of it, that lived 1.7M-3M calls among 40,000 of 16-64 KB: its model peaked at 0.68x the
    capture). Left drawn: short-lived ones (the drawn ones reach such a peak by chance as often), objects all of
    a size (no large class: a lifetime fit keeps their long lives), and a size class most of whose objects live
    long: its band's statement keeps their sizes and lifetimes together, and those written one by one would come
    on top of the band's own (a fixture's 48 KiB blocks, 10 live at once among 240: written out at the peak, the
    model held 19 then)."""
    floor = peak_bytes * BIG_OBJECT_SHARE
    if floor <= 0:
        return []
    by_class: Dict[Tuple[int, int], list] = {}
    phases: Dict[int, PhaseLarge] = {}
    for r in records:
        p = phase_of(r)
        if (r.how == "local" and r.size >= floor and r.life >= LONG_LIFE_SHARE * p.ticks
                and p.large_from is not None and size_class(r.size) >= p.large_from):
            by_class.setdefault((p.index, size_class(r.size)), []).append(r)
            phases[p.index] = p
    out = [r for (i, cls), rs in by_class.items() if len(rs) <= LARGE_SHARE * phases[i].by_class.get(cls, 0)
           for r in rs]
    return sorted(out, key=lambda r: r.at)


def burst_objects(records: list, mean_live: Dict[int, float], peak_bytes: int, held: list = ()) -> list:
    """The objects of one thread live at the capture's peak (collect.Collector.peak_freed's records, freed by it
    after the peak, neither held nor big) that came in a burst: those of the size classes of which the peak
    held BURST_EXCESS times more bytes than the class's other objects keep live on average over the phase
    (mean_live: class -> their bytes x lifetimes / the phase's ticks), with the phase's held objects the peak holds (held: they
    outlive the model's windows), when they hold BURST_SHARE of the peak at least; else none.
    Spread over the phase with their own lifetimes, a burst's objects are seldom live at once (node: 16
    buffers of 535 KB and 600 of 16 KB made within a few thousand calls and freed together, of a phase of
    40,000: its model held 0.70x of the capture's peak)."""
    live: Dict[int, int] = {}
    for r in records:
        cls = size_class(r[3])
        live[cls] = live.get(cls, 0) + r[3]
    burst = {cls for cls, n in live.items() if n >= BURST_EXCESS * mean_live.get(cls, 0.0)}
    chosen = [r for r in records if size_class(r[3]) in burst] + list(held)
    if not chosen or sum(r[3] for r in chosen) < BURST_SHARE * peak_bytes:
        return []
    return sorted(chosen, key=lambda r: r[1])


def chain_slots(chains: list) -> List[int]:
    """A slot for each chain (in the order they started): the lowest one free when it starts."""
    ends: List[Optional[int]] = []           # per slot: where its last chain ended (None: still live)
    out = []
    for t in chains:
        slot = next((i for i, e in enumerate(ends) if e is not None and e < t.start), len(ends))
        if slot == len(ends):
            ends.append(None)
        ends[slot] = t.end
        out.append(slot)
    return out


def class_bound(c: int) -> int:
    """The smallest size of size class c (c >= 1)."""
    return SIZE_CLASS_BOUNDS[c - 1]


# --------------------------------------------------------------------------- thread groups
@dataclass
class ThreadSummary:
    tid: int
    total: ThreadWindow
    phases: List[ThreadWindow]

    def feature(self) -> dict:
        c = self.total.c
        events = max(c["events"], 1)
        allocs = sent = recv = 0
        for k, v in c.items():
            if isinstance(k, tuple):
                if k[0] in ("lives", "kept", "send", "start"):
                    allocs += v
                if k[0] == "send" or k[:2] == ("end", "send"):
                    sent += v
                if k[0] == "recv":
                    recv += v
        n_sizes, sum_sizes = hist_totals(self.total.sizes)
        return {"events": math.log2(events), "size": math.log2(sum_sizes / n_sizes + 1) if n_sizes else 0.0,
                "shares": [allocs / events, c["realloc"] / events, c["free_null"] / events, recv / events,
                           sent / events],
                "activity": [p.c["events"] / events for p in self.phases]}


RECEIVES_SHARE = 3      # feature()["shares"][3]: calls that free another thread's objects


def _alike(a: dict, b: dict) -> bool:
    """Within 2x in calls and mean size, 0.15 in each share of calls, 0.5 apart in activity per phase."""
    return (abs(a["events"] - b["events"]) <= 1.0 and abs(a["size"] - b["size"]) <= 1.0
            and all(abs(x - y) <= 0.15 for x, y in zip(a["shares"], b["shares"]))
            and sum(abs(x - y) for x, y in zip(a["activity"], b["activity"])) <= 0.5)


def alike_but_receives(a: dict, b: dict) -> bool:
    """Alike, the share of calls that free another thread's objects aside (a chain's head: model_shape)."""
    skip = RECEIVES_SHARE
    return _alike(dict(a, shares=a["shares"][:skip] + a["shares"][skip + 1:]),
                  dict(b, shares=b["shares"][:skip] + b["shares"][skip + 1:]))


def group_threads(summaries: List[ThreadSummary]) -> List[List[ThreadSummary]]:
    """Greedy, in order of appearance: each thread joins the first group whose first thread is alike."""
    groups: List[Tuple[dict, List[ThreadSummary]]] = []
    for s in summaries:
        f = s.feature()
        for first, members in groups:
            if _alike(first, f):
                members.append(s)
                break
        else:
            groups.append((f, [s]))
    return [members for _, members in groups]


def map_written_percent(figures: dict, mode: str, maps: int) -> Optional[Tuple[int, str]]:
    """The share of its own mappings' pages a program wrote, in percent, from `--touch auto`'s figures of its
    capture (trace/replay.py, touch_figures), with blocks written as `mode`, and the pages of every writable
    mapping it made (or part of a reservation it made writable), each once; and how it was found. None
    without a fault reading or without mappings.

    The capture counts the process's page faults (less the tracer's and a small allowance: heap_faults) and
    the exact replay's converter the pages each touch mode writes, of them the mappings' apart (map_pages).
    The faults less the heap's pages in `mode` are what the mappings took: ruby writes part of its 74 MB of
    mappings (`first`, two pages each, made its model 0.63x of its RSS; `pages`, all, 1.8x). The faults
    also count pages of code, data and files the program read: an estimate from above, as the program's
    RSS counts those too."""
    auto = figures.get("touch_auto") or {}
    faults = auto.get("heap_faults", -1)
    if not maps or faults is None or faults < 0 or not auto.get("measured"):
        return None
    key = {"all": "pages"}.get(mode, mode)
    heap = auto["pages"].get(key, 0) - ((auto.get("map_pages") or {}).get(key, 0) if key != "none" else 0)
    percent = max(0, min(100, round(100 * (faults - heap) / maps)))
    return percent, (f"estimated from the capture's {faults} page faults less the {heap} pages its heap's "
                     f"blocks take written as `touch_new {mode}`, over its mappings' {maps} pages")
