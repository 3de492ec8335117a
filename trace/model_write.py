"""The text of a fitted model: statements per group and phase, channels, histogram files, header.

Every statement carries what one execution does (allocator calls, objects left
to `lives`, objects handed to another thread), so the header's model column
is computed from the statements actually written, not from the capture.
"""

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from .events import FREE_KINDS, REALLOC_KINDS
from .model_collect import (MODEL_KIND, REALLOC_START, Cell, Collector, hist_minus, hist_totals, life_bucket,
                            merge_hist, size_bucket, size_class)
from .model_fit import (Phase, ThreadSummary, big_chains, big_objects, chain_slots, class_bound, detect_phases, fit_lifetimes,
                        group_threads, large_class, large_realloc_class)

NOT_MEASURED = "not measured"
PEAK_HOW = "one run of this file under glibc with the `live` probe, made by scenc convert"
MAX_CAPACITY = 1 << 20
MAX_GROW_SLOTS = 4096       # realloc chains a thread of the model grows at once, at most
BARRIER = "    barrier             # phases follow one another in every thread, as captured"
END_BARRIER = "    barrier             # the threads end together, as captured: what `lives forever` lives as long"
LINE = 110                  # longer statements are split over several lines      # channel slots live in the runtime's arena: 16 MiB at most per channel


@dataclass
class Stmt:
    text: str
    per_thread: int = 0                        # the same count in every thread of the group ...
    share: Optional[Tuple[str, int]] = None    # ... or (variable, group total) split over the threads by `self`
    calls: Dict[str, int] = field(default_factory=dict)   # allocator calls per execution, runtime counter names
    lives: int = 0                             # objects it leaves to a `lives` free
    sent: int = 0                              # objects it hands to another thread
    local_frees: int = 0                       # objects of its own thread it frees (a realloc chain's end)
    draws: int = 0                             # sizes drawn from the phase's size histogram
    handed: bool = False                       # ... from the sizes of the objects handed over instead
    place: str = "loop"                        # 'pre' and 'post' run before and after the phase's rounds
    lumped: bool = False                       # its share is all one thread's: a loop of its own
    kept: bool = False                         # its objects live to the end (`lives forever`): their own sizes
    mean: Optional[float] = None               # the mean of its sizes, when not the phase's
    at: Optional[float] = None                 # runs once, this far into the phase (0 .. 1): a big chain's step
    order: int = 0                             # ... its ordinal in the capture (steps in one round keep it)

    def max_count(self, threads: int) -> int:
        return self.per_thread if self.share is None else self.share[1] if self.lumped \
            else -(-self.share[1] // threads)

    def total(self, threads: int) -> int:
        return self.per_thread * threads if self.share is None else self.share[1]


@dataclass
class Group:
    name: str
    tids: List[int]
    summaries: List[ThreadSummary]

    @property
    def n(self) -> int:
        return len(self.tids)


def alloc_text(mk, size_expr: str) -> str:
    kind, align = mk
    if kind == "malloc":
        return f"malloc({size_expr})"
    if kind == "calloc":
        return f"calloc(1, {size_expr})"
    return f"{kind}({align or 16}, {size_expr})"


def spread(count_expr: str, rounds: int) -> str:
    """Runs in round r of `for r in 0 .. rounds`: count_expr in all, evenly spread (Bresenham)."""
    return f"(r + 1) * {count_expr} / {rounds} - r * {count_expr} / {rounds}"


def runtime_kind(trace_kind: str) -> str:
    """The runtime's counter for a captured kind, as the model makes it."""
    if trace_kind in FREE_KINDS:
        return "free"
    if trace_kind in REALLOC_KINDS:
        return "realloc"
    return MODEL_KIND.get(trace_kind, trace_kind)


def _mk_key(mk):
    order = ("malloc", "calloc", "aligned_alloc", "memalign", "posix_memalign")
    return (order.index(mk[0]) if mk[0] in order else 9, mk[1] or 0)


class _Tally:
    """What the written statements make, summed over every thread."""

    def __init__(self):
        self.calls: Counter = Counter()
        self.sent = self.known_frees = self.draws = 0
        self.bytes = 0.0

    def add(self, s: Stmt, threads: int, mean_size: float, handed_mean: float, kept_mean: float = 0.0) -> None:
        total = s.total(threads)
        for kind, n in s.calls.items():
            self.calls[kind] += n * total
        self.calls["free"] += s.lives * total
        self.sent += s.sent * total
        self.known_frees += (s.lives + s.sent + s.local_frees) * total
        self.draws += s.draws * total
        self.bytes += s.draws * total * (s.mean if s.mean is not None else kept_mean if s.kept and s.handed
                                         else handed_mean if s.handed else mean_size)


class ModelWriter:
    """Collected figures -> groups, phases, statements -> the .scn text and its .csv files."""

    def __init__(self, col: Collector, scn_path: Path, source_name: str, max_phases: int):
        self.col = col
        self.scn_path = scn_path
        self.stem = scn_path.stem
        self.source_name = source_name
        self.phases: List[Phase] = detect_phases(col.wins, col.has_time, max(1, max_phases), col.last_line)
        self.notes: List[str] = []
        self._group_threads()
        self.churn = self._churn()
        if self.churn and len(self.phases) > 1:
            # a barrier would wait for a churning group's threads not yet started: one phase
            self.phases = detect_phases(col.wins, col.has_time, 1, col.last_line)
            self._group_threads()
            self.churn = self._churn()
            self.notes.append("one phase: the threads of a group come and go (`at most`), and a barrier between "
                              "phases would wait for threads not yet started")
        self.fits: List[str] = []
        self.data_files: List[Path] = []
        self.figures: List[Tuple[str, str, str]] = []
        self._explained = False         # the spreading formula is explained once, at its first use
        self._flows()
        self._take_big_chains()
        self._take_big_objects()
        self._notes = list(self.notes)  # write() may run again (calibration): it starts from these
        # Calibration (trace/model.py): the lifetimes of the objects freed by their own thread, in percent of the
        # fitted ones, as `param life_scale`; None: not calibrated, the fitted lifetimes as they are.
        self.life_scale: Optional[int] = None
        self.calibration: str = ""      # how the scale was found, above the param

    # ---------------------------------------------------------------- groups and flows
    def _group_threads(self) -> None:
        summaries = []
        for tid, cells in self.col.cells.items():
            per_phase = []
            for p in self.phases:
                agg = Cell()
                for cell in cells[p.start:p.end]:
                    if cell is not None:
                        agg.merge(cell)
                per_phase.append(agg)
            total = Cell()
            for agg in per_phase:
                total.merge(agg)
            summaries.append(ThreadSummary(tid, total, per_phase))
        leader = min(self.col.cells) if self.col.cells else 0
        self.groups: List[Group] = []
        workers = 0
        for members in group_threads(summaries):
            if len(members) == 1 and members[0].tid == leader:
                name = "main"
            else:
                workers += 1
                name = "worker" if workers == 1 else f"worker{workers}"
            self.groups.append(Group(name, [s.tid for s in members], members))
        self.group_of = {tid: g for g in self.groups for tid in g.tids}

    def _churn(self) -> Dict[str, int]:
        """Group name -> K for the groups whose threads were not all alive at once in the capture (its
        thread starts and exits show it): `thread NAME * N at most K`. Their threads are put in the order
        they started: the model starts thread i + K when thread i ends."""
        if not self.col.thread_starts:
            return {}
        out = {}
        born = self.col.born
        for g in self.groups:
            k = self.col.alive_at_most(g.tids)
            if g.n > 1 and 0 < k < g.n:
                out[g.name] = k
                g.summaries.sort(key=lambda s: born.get(s.tid, 0))
                g.tids[:] = [s.tid for s in g.summaries]
        return out

    def _flows(self) -> None:
        """Objects handed between groups, over a forest of channels; each channel holds as many objects as
        were in flight at once between those groups in the capture.

        Bounded channels keep the model's producers from running ahead of their consumers (its peak of live
        bytes stays the capture's), but the statements spread each thread's sends and receives evenly, not
        as captured, so any loop of channels, whatever their directions, could deadlock: the heaviest flows
        that form no loop keep their channel (a maximum spanning forest), the others are freed by their
        owner itself, and a note says so."""
        edges: Counter = Counter()
        for g in self.groups:
            for s in g.summaries:
                for k, n in s.total.c.items():
                    dest = _dest(k)
                    if dest is not None and self.group_of[dest] is not g:
                        edges[g.name, self.group_of[dest].name] += n
        tree = {g.name: g.name for g in self.groups}

        def root(name):
            while tree[name] != name:
                name = tree[name]
            return name

        kept = {}
        for (src, dst), n in sorted(edges.items(), key=lambda en: (-en[1], en[0])):
            if not n:
                continue
            a, b = root(src), root(dst)
            if a != b:
                tree[a] = b
                kept[src, dst] = n
                continue
            self.notes.append(f"{n} objects allocated by {src} and freed by {dst} are freed by {src} itself in the "
                              f"model: a channel for them would close a loop of channels, which could deadlock")
        self.edges = kept
        self.capacity = {}
        tids = {g.name: g.tids for g in self.groups}
        # Objects the threads of a group handed to one another, in flight at once at most, per thread alive,
        # less the one each thread holds in a step of the ring (allocated and sent, its predecessor's not yet
        # received and freed): with every thread mid-step, the model's ring then holds as many as the
        # capture's at most, not that many more (mt_pthread_crashed_e: 8 at most, 4-5 most of the time;
        # primed with 8, the model held 8-12 all along)
        self.ring_depth = {}
        for g in self.groups:
            if g.n > 1:
                most, alive = self.col.in_flight([(a, b) for a in g.tids for b in g.tids if b != a]) or 0, \
                    self.churn.get(g.name, g.n)
                self.ring_depth[g.name] = max(0, (2 * most + alive) // (2 * alive) - 1)   # most / alive, rounded, - 1
        for (src, dst), n in kept.items():
            most = self.col.in_flight([(a, b) for a in tids[src] for b in tids[dst]])
            if most is None:
                self.notes.append(f"channel {src}_to_{dst} may hold all {n} objects at once: too many handoffs "
                                  f"to measure how many were in flight in the capture")
            self.capacity[src, dst] = max(1, min(n, MAX_CAPACITY, most if most is not None else n))

    def _take_big_chains(self) -> None:
        """The big realloc chains of each single-thread group (model_fit.big_chains) are written step by step
        (self.big: group name -> [(chain, slot)]); their starts, reallocs and ends leave the thread's figures,
        which the other statements model as before."""
        self.big: Dict[str, list] = {}
        col = self.col
        for g in self.groups:
            if g.n != 1:
                continue
            tid, summary = g.tids[0], g.summaries[0]
            chains = big_chains([t for _, _, t in col.trails.get(tid, [])], col.trail_dropped[tid],
                                summary.total.rsizes)
            if not chains:
                continue
            self.big[g.name] = list(zip(chains, chain_slots(chains)))
            for t in chains:
                takes = [("start", t.start, t.size)] + [("realloc", o, n) for o, n in t.steps] + \
                    [("end", t.end, 0)]
                for what, o, nbytes in takes:
                    if what == "end" and t.how == "local" and o is not None:
                        key = ("end", "local", None)
                    elif what == "end":
                        key, o = ("end", "end", None), None
                    elif what == "start":
                        key = ("start", t.mk)
                    else:
                        key = "realloc"
                    phase = summary.phases[self._phase_of(o)]
                    # a start frees its empty slot first (free(NULL): the checker cannot follow a slot
                    # through the rounds' `if`s), one of the capture's free(NULL) when it has one left
                    null = what == "start" and t.mk != REALLOC_START and phase.c["free_null"] > 0
                    for cell in (phase, summary.total):
                        cell.c[key] -= 1
                        cell.c["free_null"] -= null
                        if what == "realloc":
                            _take(cell.rsizes, nbytes)
                        elif what == "start" and t.mk != REALLOC_START:
                            _take(cell.sizes, nbytes)

    def _take_big_objects(self) -> None:
        """The big objects of each single-thread group (model_fit.big_objects) are written one by one
        (self.big_objects: group name -> records); they leave the thread's figures (sizes, lifetimes, counts),
        which the other statements model as before."""
        self.big_objects: Dict[str, list] = {}
        col = self.col
        for g in self.groups:
            if g.n != 1:
                continue
            tid, summary = g.tids[0], g.summaries[0]
            records = big_objects([r for _, _, r in col.big_objects.get(tid, [])], col.big_dropped[tid],
                                  col.peak_bytes)
            if records:
                self.big_objects[g.name] = records
            for r in records:
                for cell in (summary.phases[self._phase_of(r.at)], summary.total):
                    _take(cell.sizes, r.size)
                    if r.how == "kept":
                        cell.c["kept", r.mk] -= 1
                        cell.c["kept_ticks"] -= r.at[1]
                        cell.c["censored"] -= 1
                        _take(cell.kept, r.size)
                        continue
                    cls = size_class(r.size)
                    cell.c["lives", r.mk] -= 1
                    cell.c["lives_class", r.mk, cls] -= 1
                    _take(cell.lives, r.life, life_bucket)
                    by_class = cell.lives_by_class[cls]
                    _take(by_class[0], r.life, life_bucket)
                    by_class[1] -= r.size
                    by_class[2] -= r.size * r.life
                    _take(by_class[3], r.size)
                    if not by_class[0]:
                        del cell.lives_by_class[cls]

    def _phase_of(self, moment: Optional[tuple]) -> int:
        """The phase (index) of a call's moment (ordinal, clock); the last one for None (the end of the capture)."""
        if moment is None:
            return len(self.phases) - 1
        w = moment[0] // self.col.window
        return next((i for i, p in enumerate(self.phases) if p.start <= w < p.end), len(self.phases) - 1)

    def _clock_span(self, tid: int, pi: int) -> Tuple[int, int]:
        """Thread tid's `lives` clock where phase pi (0-based) begins, and its ticks in the phase (1 at least)."""
        cells, p = self.col.cells[tid], self.phases[pi]
        lo = sum(c.c["ticks"] for c in cells[:p.start] if c is not None)
        return lo, max(sum(c.c["ticks"] for c in cells[p.start:p.end] if c is not None), 1)

    def _big_stmts(self, g: Group, pi: int) -> List[Stmt]:
        """The big objects and the steps of the big chains of group g (one thread) in phase pi (0-based), each
        once, as far into the phase as it came on the thread's `lives` clock: the statements' rounds spread
        the clock's ticks evenly, so an object that `lives L` ends where it ended in the capture."""
        out: List[Stmt] = []
        lo, ticks = self._clock_span(g.tids[0], pi)

        def at(moment):
            return min(max(moment[1] - 1 - lo, 0) / ticks, 1.0)

        for r in self.big_objects.get(g.name, []):
            if self._phase_of(r.at) == pi:
                life = "forever" if r.how == "kept" else str(r.life)
                out.append(Stmt(f"{alloc_text(r.mk, str(r.size))} lives {life}", per_thread=1, calls={r.mk[0]: 1},
                                lives=1, draws=1, mean=r.size, kept=r.how == "kept", at=at(r.at), order=r.at[0]))
        for t, slot in self.big.get(g.name, []):
            b = f"big[{slot}]"
            steps = [] if t.mk == REALLOC_START else \
                [(t.start, f"free({b})  {b} = {alloc_text(t.mk, str(t.size))}", {"free": 1, t.mk[0]: 1},
                  dict(draws=1, mean=t.size))]
            steps += [(o, f"{b} = realloc({b}, {n})", {"realloc": 1}, {}) for o, n in t.steps]
            if t.how == "local" and t.end is not None:
                steps.append((t.end, f"free({b})", {"free": 1}, dict(local_frees=1)))
            for o, text, calls, more in steps:
                if self._phase_of(o) == pi:
                    out.append(Stmt(text, per_thread=1, calls=calls, at=at(o), order=o[0], **more))
        return out

    # ---------------------------------------------------------------- files
    def _file_name(self, what: str, group: Group, phase: Optional[int]) -> str:
        parts = [_safe(self.stem), what]
        if len(self.groups) > 1:
            parts.append(group.name)
        if phase is not None and len(self.phases) > 1:
            parts.append(f"p{phase}")
        return "-".join(parts) + ".csv"

    def _histogram(self, hist: dict, what: str, label: str, group: Group, phase: Optional[int]) -> str:
        name = self._file_name(what, group, phase)
        n, total = hist_totals(hist)
        where = f" in phase {phase}" if phase is not None and len(self.phases) > 1 else ""
        merged: Dict[int, int] = {}
        for c, s in hist.values():
            v = round(s / c)
            merged[v] = merged.get(v, 0) + c
        rows = ["size,count",
                f"# {label} of {group.name}{where}, from {self.source_name}: {n} calls, mean {total / n:.1f} bytes",
                "# exact below 1024 bytes; above, 16 classes per power of two, each at its mean"]
        rows += [f"{v},{c}" for v, c in sorted(merged.items())]
        path = self.scn_path.parent / name
        path.write_text("\n".join(rows) + "\n")
        if path not in self.data_files:
            self.data_files.append(path)
        return name

    # ---------------------------------------------------------------- statements
    def _plan(self, g: Group, pi: int, agg: Cell, size: str, rsize: str, lives: str, start_kinds,
              local_end_credit: int, grow: str, pick: str = "", handed: str = "",
              kept_size: str = "", large=None, large_realloc=None, units: bool = False,
              handed_to=None) -> Tuple[List[Stmt], List[str]]:
        """The statements of group g in phase pi, with per-thread counts; and variables they need.
        handed: the size expression of the objects handed to another thread (default: size); large: (size
        expression, lives expression, count per kind, mean size) of the large objects freed by their own
        thread, or None; large_realloc: (size expression, count, K, slots): the large realloc sizes grow the
        first K blocks of the pool only, the others the rest, or None; units: each realloc chain is one
        statement (_chain_units); handed_to: destination group -> (size expression, mean) of the objects
        handed to it, when they have a histogram per partner (_handed_to)."""
        handed_size = handed or size
        handed_to = handed_to or {}

        def handed_for(dest: str) -> Tuple[str, dict]:
            """The size expression of the objects handed to group dest, and the Stmt fields that go with it."""
            if dest in handed_to:
                return handed_to[dest][0], dict(mean=handed_to[dest][1])
            return handed_size, dict(handed=bool(handed))
        n, c = g.n, agg.c
        stmts: List[Stmt] = []
        variables: List[str] = []

        def per(total):
            return dict(per_thread=int(round(total / n)))

        def exact(total: int, var: str, member_counts=None):
            """total over the threads: evenly, or all by the first (last) thread when the capture's first (last)
            thread of the group made them all (a churning group's first thread takes what came before it)."""
            if member_counts and n > 1 and sum(member_counts) == total:
                if member_counts[0] == total:
                    variables.append(f"{var} = {total} * (1 / (self + 1))      # thread 0 only, as captured")
                    return dict(share=(var, total), lumped=True)
                if member_counts[-1] == total:
                    variables.append(f"{var} = {total} * ((self + 1) / {n})      # the last thread only, as captured")
                    return dict(share=(var, total), lumped=True)
            if total % n == 0:
                return dict(per_thread=total // n)
            variables.append(f"{var} = (self + 1) * {total} / {n} - self * {total} / {n}")
            return dict(share=(var, total))

        local, sends, ring, recvs, ends, kept = Counter(), Counter(), Counter(), Counter(), Counter(), Counter()
        for k, v in c.items():
            if not isinstance(k, tuple):
                continue
            if k[0] == "recv":
                src = self.group_of[k[1]]
                if src is not g and (src.name, g.name) in self.edges:
                    recvs[src.name] += v
            elif k[0] == "kept":
                kept[k[1]] += v
            elif k[0] in ("lives", "send"):
                dest = self.group_of[k[2]] if k[0] == "send" else g
                if k[0] == "lives" or (dest is not g and (g.name, dest.name) not in self.edges):
                    local[k[1]] += v
                elif dest is g:
                    ring[k[1]] += v
                else:
                    sends[k[1], dest.name] += v
            elif k[0] == "end":
                dest = self.group_of[k[2]] if k[1] == "send" else g
                if k[1] == "send" and dest is g:
                    ends["ring"] += v
                elif k[1] == "send" and (g.name, dest.name) in self.edges:
                    ends[dest.name] += v
                else:
                    ends["local"] += v

        def members(match) -> list:
            return [sum(v for k, v in m.phases[pi - 1].c.items() if isinstance(k, tuple) and match(k))
                    for m in g.summaries]

        for src, total in sorted(recvs.items()):
            src_tids = set(next(x for x in self.groups if x.name == src).tids)
            counts = members(lambda k: k[0] == "recv" and k[1] in src_tids)
            stmts.append(Stmt(f"free(recv({src}_to_{g.name}))", **exact(total, f"from_{src}_p{pi}", counts),
                              calls={"free": 1}))
        if c["free_null"]:
            stmts.append(Stmt("free(none[0])", **per(c["free_null"]), calls={"free": 1}))
        for mk, v in sorted(local.items(), key=lambda kv: _mk_key(kv[0])):
            n_large = large[2].get(mk, 0) if large else 0
            if v > n_large:
                stmts.append(Stmt(f"{alloc_text(mk, size)} lives {self._scaled(lives)}", **per(v - n_large),
                                  calls={mk[0]: 1}, lives=1, draws=1))
            if n_large:
                stmts.append(Stmt(f"{alloc_text(mk, large[0])} lives {self._scaled(large[1])}", **per(n_large),
                                  calls={mk[0]: 1}, lives=1, draws=1, mean=large[3]))
        exact_sizes = _few_sizes(agg.kept) if n == 1 else None
        kept_at = self._kept_at(g, pi - 1)
        for mk, v in sorted(kept.items(), key=lambda kv: _mk_key(kv[0])):
            if exact_sizes:
                # A few objects kept to the end, each with its size, where they came on average: drawn at
                # random, a handful of big ones (a 256 KiB table) could come out twice, or not at all.
                for nbytes in exact_sizes[:v]:
                    stmts.append(Stmt(f"{alloc_text(mk, str(nbytes))} lives forever", per_thread=1,
                                      calls={mk[0]: 1}, lives=1, draws=1, kept=True, mean=nbytes, at=kept_at,
                                      order=-1))
                del exact_sizes[:v]
                continue
            once = per(v)["per_thread"] == 1
            stmts.append(Stmt(f"{alloc_text(mk, kept_size or size)} lives forever", **per(v), calls={mk[0]: 1},
                              lives=1, draws=1, handed=bool(kept_size), kept=True, at=kept_at if once else None,
                              order=-1))
        for (mk, dest), v in sorted(sends.items(), key=lambda kv: (_mk_key(kv[0][0]), kv[0][1])):
            dest_tids = set(next(x for x in self.groups if x.name == dest).tids)
            counts = members(lambda k: k[0] == "send" and k[1] == mk and k[2] in dest_tids)
            dest_size, dest_fields = handed_for(dest)
            stmts.append(Stmt(f"p = {alloc_text(mk, dest_size)}  send({g.name}_to_{dest}, p)",
                              **exact(v, f"to_{dest}_{mk[0]}_p{pi}", counts), calls={mk[0]: 1}, sent=1, draws=1,
                              **dest_fields))
        if g.name in self.churn:
            # Threads come and go in order: thread i hands to i + 1, which starts after it; the ring does not
            # close (thread 0 would wait for the last thread, which starts only after it ends). Its channels
            # hold a thread's sends: none blocks, and thread i's receives wait only for thread i - 1.
            ring_send = f"if self + 1 < {n} {{{{ send({g.name}_ring[self + 1], {{0}}) }}}} else {{{{ free({{0}}) }}}}"
            ring_recv = f"if self > 0 {{ free(recv({g.name}_ring[self])) }}"
        else:
            ring_send = f"send({g.name}_ring[(self + 1) % {n}], {{0}})"
            ring_recv = f"free(recv({g.name}_ring[self]))"
        # Objects handed around the ring stay in flight as long as in the capture: each thread first sends
        # `depth` objects, then sends one and frees one per step, and frees the last `depth` at the end.
        depth = self.ring_depth.get(g.name, 0)
        ring_size, ring_fields = handed_for(g.name)
        for mk, v in sorted(ring.items(), key=lambda kv: (-kv[1], _mk_key(kv[0]))):
            steps = per(v)["per_thread"]
            d, depth = min(depth, steps), 0              # the most frequent kind carries the depth
            if d:
                stmts.append(Stmt(f"p = {alloc_text(mk, ring_size)}  {ring_send.format('p')}", per_thread=d,
                                  calls={mk[0]: 1}, sent=1, draws=1, place="pre", **ring_fields))
                stmts.append(Stmt(ring_recv, per_thread=d, calls={"free": 1}, place="post"))
            stmts.append(Stmt(f"p = {alloc_text(mk, ring_size)}  {ring_send.format('p')}  {ring_recv}",
                              per_thread=steps - d, calls={mk[0]: 1, "free": 1}, sent=1, draws=1, **ring_fields))
        few_rsizes = _few_sizes(agg.rsizes) if n == 1 else None
        if units:
            stmts += self._chain_units(g, ends, start_kinds, c["realloc"], size, rsize, grow, ring_send, ring_recv)
        elif c["realloc"] and few_rsizes and len(few_rsizes) == c["realloc"]:
            # a few reallocs, each to its own size (drawn at random, the one big size could come out twice)
            for nbytes in few_rsizes:
                stmts.append(Stmt(f"{pick}{grow} = realloc({grow}, {nbytes})", per_thread=1, calls={"realloc": 1}))
        elif c["realloc"] and large_realloc:
            # A program grows one big buffer (or a few) among many small blocks: the large sizes grow the first
            # K blocks, as many as the thread held large ones at once in the capture, the others the rest. Drawn
            # for any block, the big sizes would pile up in several blocks at once.
            l_size, n_large, k, slots = large_realloc
            pick_large = "grow[0]" if k == 1 else "grow[k]"
            stmts.append(Stmt(("" if k == 1 else f"k = uniform(0, {k - 1})  ")
                              + f"{pick_large} = realloc({pick_large}, {l_size})", **per(n_large),
                              calls={"realloc": 1}))
            if c["realloc"] > n_large:
                stmts.append(Stmt(f"k = uniform({k}, {slots - 1})  grow[k] = realloc(grow[k], {rsize})",
                                  **per(c["realloc"] - n_large), calls={"realloc": 1}))
        elif c["realloc"]:
            stmts.append(Stmt(f"{pick}{grow} = realloc({grow}, {rsize})", **per(c["realloc"]), calls={"realloc": 1}))
        # A realloc chain ends (freed, or handed to the thread that freed it) and a new block starts, of
        # each kind as often as the capture's chains started with it.
        def restart(mk):
            if mk == REALLOC_START:             # the next realloc(NULL, n) starts it
                return "", {}, 0
            return f"  {grow} = {alloc_text(mk, size)}", {mk[0]: 1}, 1

        for where, v in sorted(ends.items(), key=lambda kv: ("local", "ring").index(kv[0])
                               if kv[0] in ("local", "ring") else 2):
            if units:
                break
            parts = _split(v, start_kinds)
            if where == "local" and local_end_credit:        # the first block came before the phases
                parts[start_kinds[0][0]] -= local_end_credit
            for mk, part in sorted(parts.items(), key=lambda kv: _mk_key(kv[0])):
                if part <= 0:
                    continue
                text, calls, draws = restart(mk)
                if where == "local":
                    stmts.append(Stmt(f"{pick}free({grow}){text}", **per(part), calls={"free": 1, **calls},
                                      local_frees=1, draws=draws))
                elif where == "ring":
                    stmts.append(Stmt(f"{pick}{ring_send.format(grow)}{text}  {ring_recv}", **per(part),
                                      calls={"free": 1, **calls}, sent=1, draws=draws))
                else:
                    stmts.append(Stmt(f"{pick}send({g.name}_to_{where}, {grow}){text}",
                                      **exact(part, f"to_{where}_grown_{mk[0]}_p{pi}"), calls=dict(calls), sent=1,
                                      draws=draws))
        stmts += self._big_stmts(g, pi - 1)
        kept = [s for s in stmts if s.max_count(n) > 0]
        return kept, [v for v in variables if any(v.split(" = ")[0] == (s.share or ("",))[0] for s in kept)]

    def _handed_to(self, agg: Cell, g: Group, pi: int) -> Dict[str, Tuple[str, float]]:
        """Destination group -> (size expression, mean size) of the objects group g hands to it in phase pi,
        when it hands them to several (its ring and another group, ...): a program often hands bigger
        objects to one partner than to another (mt_pthread_e: 314 bytes on average to main, 264 around the
        workers' ring), and one histogram for all would give each partner the others' sizes."""
        by_dest: Dict[str, dict] = {}
        for tid, hist in agg.sent_to.items():
            dest = self.group_of[tid]
            if dest is g or (g.name, dest.name) in self.edges:
                merge_hist(by_dest.setdefault(dest.name, {}), hist)
        if len(by_dest) < 2:
            return {}
        out = {}
        for dest, hist in sorted(by_dest.items()):
            n, total = hist_totals(hist)
            what = "ring" if dest == g.name else dest
            name = self._histogram(hist, f"handed-sizes-to-{what}", f"sizes of the objects handed to {what}", g, pi)
            out[dest] = (f'histogram("{name}")', total / n)
        return out

    def _join_at_end(self) -> bool:
        """Whether every thread waits for the others at its end (a last barrier): when the model has several
        groups, none of them churning, and objects that `lives forever`. Such an object lives to the end of
        its thread, and in the capture its thread lived to the end (a program's main thread waits for its
        workers); a thread of the model ends when its statements are done, and one that is done early (a
        main thread that only sets up its tables) would free its objects while the others still run
        (mt_handoff_x_crashed: main's 5 KB, half the capture's peak, freed before the workers got going)."""
        if self.churn or len(self.groups) < 2:
            return False
        return any(s.total.c[k] > 0 for g in self.groups for s in g.summaries for k in list(s.total.c)
                   if isinstance(k, tuple) and k[0] == "kept") or any(self.big_objects.values())

    def _kept_at(self, g: Group, pi: int) -> Optional[float]:
        """How far into phase pi (0-based) the group's objects still live at the end came, on average, on
        their threads' `lives` clocks: a statement that makes one of them per thread runs there, not in the
        phase's last round, where every statement made once a phase runs (a crashed capture's last objects
        came at its very end; a program's tables early)."""
        total, count = 0.0, 0
        for tid, s in zip(g.tids, g.summaries):
            c = s.phases[pi].c
            n = sum(v for k, v in c.items() if isinstance(k, tuple) and k[0] == "kept")
            if n <= 0:
                continue
            lo, ticks = self._clock_span(tid, pi)
            total += n * min(max((c["kept_ticks"] / n - 1 - lo) / ticks, 0.0), 1.0)
            count += n
        return total / count if count else None

    def _brief_chains(self, g: Group) -> bool:
        """Whether the threads of g held their realloc chain (one at a time) less than half of the time, on
        their `lives` clock: then each chain is one statement (start, grow, end: _chain_units) and the thread
        holds no block between them; else the thread holds a block all along, as when a new chain starts
        where the last one ended. The nearer of the two keeps the bytes held in chains nearer the capture's
        (mt_pthread_crashed_e: four threads that grow a 1 KB block now and then, and hand it on at once).
        Each phase must end a chain for each few reallocs (a chain across phases is no statement), and the
        chains must end in their thread or around the group's ring."""
        held = sum(self.col.chain_held[t] for t in g.tids)
        ticks = sum(c.c["ticks"] for t in g.tids for c in self.col.cells[t] if c is not None)
        if not ticks or held >= ticks / 2:
            return False
        for pi in range(len(self.phases)):
            reallocs = ends = 0
            for s in g.summaries:
                c = s.phases[pi].c
                reallocs += c["realloc"]
                for k, v in c.items():
                    if isinstance(k, tuple) and k[0] == "end":
                        if k[1] == "send" and self.group_of[k[2]] is not g:
                            return False
                        ends += v
            if reallocs < ends or (reallocs and not ends):
                return False
        return True

    def _chain_units(self, g: Group, ends: Counter, start_kinds, reallocs: int, size: str, rsize: str, grow: str,
                     ring_send: str, ring_recv: str) -> List[Stmt]:
        """Realloc chains held briefly (_brief_chains), one statement each: the chain starts, grows and ends
        (freed, or handed to the next thread of the ring) in one step, so that the thread holds no block
        between its chains. The phase's reallocs are shared among its chains: L each, L + 1 for the first
        few, as many in all as captured."""
        n = g.n
        units = []
        for where in ("local", "ring"):
            for mk, part in sorted(_split(ends[where], start_kinds).items(), key=lambda kv: _mk_key(kv[0])) \
                    if ends[where] else ():
                if round(part / n):
                    units.append((where, mk, int(round(part / n))))
        total = sum(u for _, _, u in units)
        if not total:
            return []
        per_thread = int(round(reallocs / n))
        length, extra = divmod(per_thread, total) if per_thread >= total else (1, 0)
        out = []
        for where, mk, count in units:
            for grows, times in ((length + 1, min(extra, count)), (length, count - min(extra, count))):
                if not times:
                    continue
                start = "" if mk == REALLOC_START else f"{grow} = {alloc_text(mk, size)}  "
                step = f"{grow} = realloc({grow}, {rsize})"
                body = start + ("  ".join([step] * grows) if grows <= 2 else f"repeat {grows} {{ {step} }}")
                calls = Counter({"realloc": grows})
                if mk != REALLOC_START:
                    calls[mk[0]] += 1
                if where == "local":
                    calls["free"] += 1
                    out.append(Stmt(f"{body}  free({grow})", per_thread=times, calls=dict(calls), local_frees=1,
                                    draws=int(mk != REALLOC_START)))
                else:
                    calls["free"] += 1
                    out.append(Stmt(f"{body}  {ring_send.format(grow)}  {ring_recv}", per_thread=times,
                                    calls=dict(calls), sent=1, draws=int(mk != REALLOC_START)))
            extra -= min(extra, count)
        return out

    def _large_objects(self, agg: Cell, g: Group, pi: int):
        """The few large objects freed by their own thread that weigh on the live bytes (model_fit.large_class):
        a statement of their own, their sizes and lifetimes kept together, their number exact (not a chance of
        each draw). Returns (size expression, lives expression, count per kind, mean size) or None, their
        (lifetime, size) histograms, and a comment for the phase."""
        large_from = large_class(agg.lives_by_class) if agg.lives_by_class else None
        if large_from is None:
            return None, None, ""
        lives: dict = {}
        sizes: dict = {}
        for cls, (lives_hist, _bytes, _mass, sizes_hist) in agg.lives_by_class.items():
            if cls >= large_from:
                merge_hist(lives, lives_hist)
                merge_hist(sizes, sizes_hist)
        counts: Counter = Counter()
        for k, v in agg.c.items():
            if isinstance(k, tuple) and k[0] == "lives_class" and k[2] >= large_from:
                counts[k[1]] += v
        fit = fit_lifetimes(lives)
        n, total = hist_totals(sizes)
        bound = class_bound(large_from)
        label = f"sizes of the objects of {bound} bytes or more freed by their own thread"
        expr = f'histogram("{self._histogram(sizes, "large-sizes", label, g, pi)}")'
        comment = f"; the {n} objects of {bound} bytes or more, sizes and lifetimes of their own: {fit.comment()}"
        return (expr, fit.expr, counts, total / n), (lives, sizes), comment

    def _large_reallocs(self, agg: Cell, g: Group, pi: int, slots: int):
        """Large realloc sizes (model_fit.large_realloc_class) grow only the first K blocks of the pool, K the
        most blocks of that size the group's threads held at once in the capture. Returns (size expression,
        count, K, slots) and the file of the other realloc sizes, or (None, None)."""
        large_from = large_realloc_class(agg.rsizes) if slots > 1 and agg.rsizes else None
        if large_from is None:
            return None, None
        k = max([self.col.max_chain_classes[t][large_from] for t in g.tids if t in self.col.max_chain_classes] + [1])
        if k >= slots:
            return None, None
        part = {b: h for b, h in agg.rsizes.items() if size_class(round(h[1] / h[0])) >= large_from}
        label = f"realloc sizes of {class_bound(large_from)} bytes or more"
        expr = f'histogram("{self._histogram(part, "large-realloc-sizes", label, g, pi)}")'
        small = self._histogram(hist_minus(agg.rsizes, part), "realloc-sizes", "realloc sizes", g, pi)
        return (expr, hist_totals(part)[0], k, slots), small

    def _scaled(self, lives: str) -> str:
        """A `lives` expression times the calibrated scale, when there is one (trace/model.py)."""
        return lives if self.life_scale is None or lives == "0" else f"({lives}) * life_scale / 100"

    # ---------------------------------------------------------------- the whole text
    def write(self) -> str:
        self.fits, self.data_files, self.notes, self._explained = [], [], list(self._notes), False
        tally = _Tally()
        body: List[str] = []
        rings: Dict[str, int] = {}
        for g in self.groups:
            lines, ring_per_thread, grows = self._group_text(g, tally)
            if lines:
                body += lines + [""]
                if ring_per_thread:
                    rings[g.name] = ring_per_thread
        decls = []
        for (src, dst), total in sorted(self.edges.items()):
            decls.append(f"channel {src}_to_{dst} capacity {self.capacity[src, dst]}"
                         f"    # {total} objects allocated by {src}, freed by {dst}, at most "
                         f"{self.capacity[src, dst]} in flight at once")
        for name, per_thread in sorted(rings.items()):
            n = next(g.n for g in self.groups if g.name == name)
            decls.append(f"channel {name}_ring[{n}] capacity {max(1, min(per_thread, MAX_CAPACITY))}"
                         f"    # {name}[i] hands objects to {name}[i + 1], which frees them")
        self.tally_calls = dict(tally.calls)
        text = self._header(tally)
        text += [f'scenario "{_safe(self.stem)}"', "seed 1"]
        if self.life_scale is not None:
            text += _wrap(self.calibration, "# ", "#   ") + [f"param life_scale = {self.life_scale}"]
        text += decls + [""] + body
        return "\n".join(text).rstrip() + "\n"

    def _group_text(self, g: Group, tally: _Tally) -> Tuple[List[str], int, bool]:
        """The `thread` block of one group; how many ring handoffs per thread; whether it grows a block."""
        starts: Counter = Counter()
        rsizes: dict = {}
        group_lives: dict = {}
        local_ends = [0] * len(self.phases)
        for s in g.summaries:
            merge_hist(rsizes, s.total.rsizes)
            merge_hist(group_lives, s.total.lives)
            for k, v in s.total.c.items():
                if isinstance(k, tuple) and k[0] == "start":
                    starts[k[1]] += v
            for i, p in enumerate(s.phases):
                local_ends[i] += sum(v for k, v in p.c.items() if isinstance(k, tuple) and k[0] == "end"
                                     and (k[1] in ("local", "end") or (k[1] == "send" and not self._sent_on(g, k[2]))))
        has_chain = bool(rsizes)
        start_kinds = sorted(starts.items(), key=lambda kv: (-kv[1], kv[0] == REALLOC_START, _mk_key(kv[0]))) \
            or [(REALLOC_START, 1)]
        start_mk = start_kinds[0][0]            # the first block's kind
        initial = has_chain and start_mk != REALLOC_START
        # The first block in `grow` is allocated before the phases and the last one freed after them,
        # so the phases end one chain fewer per thread: the last phase that ends enough chains locally.
        credit_phase = next((i for i in reversed(range(len(self.phases))) if local_ends[i] >= g.n), None) \
            if initial else None
        # Realloc sizes per phase, as the sizes (a program that builds one big buffer late, e.g. a JSON
        # text, grows its blocks far more in that phase); per group when there is one phase.
        per_phase_rsizes = len(self.phases) > 1
        rsize = "0"
        if rsizes and not per_phase_rsizes:
            rsize = f'histogram("{self._histogram(rsizes, "realloc-sizes", "realloc sizes", g, None)}")'
        group_fit = fit_lifetimes(group_lives)
        # A chain that the capture began with realloc(NULL, n) starts from an empty block: a pool slot, which
        # may be empty (the checker rightly refuses a variable that may hold a freed block).
        # As many chains at once as a thread of the group held at once in the capture, a random one grown
        # or ended each time (one block, grown again and again, held far fewer bytes than many).
        big = self.big.get(g.name, [])
        big_slots = max([slot + 1 for _, slot in big] + [0])
        # (the big chains, written step by step, have slots of their own)
        slots = min(max([self.col.max_chains[t] - big_slots for t in g.tids] + [1]), MAX_GROW_SLOTS) if has_chain \
            else 1
        units = has_chain and slots == 1 and not big and self._brief_chains(g)
        if units:                               # no block held between chains: none before the phases either
            initial, credit_phase = False, None
        in_pool = has_chain and (slots > 1 or not initial or REALLOC_START in starts)
        grow = "grow[k]" if slots > 1 else "grow[0]" if in_pool else "grow"
        pick = f"k = uniform(0, {slots - 1})  " if slots > 1 else ""
        blocks: List[str] = []
        variables: List[str] = []
        first_size = None
        ring_per_thread = 0
        for pi, p in enumerate(self.phases, 1):
            if pi > 1:
                blocks.append(BARRIER)
            agg = Cell()
            for s in g.summaries:
                agg.merge(s.phases[pi - 1])
            # the objects handed to another thread get the sizes they had in the capture, the others theirs
            own_sizes = hist_minus(agg.sizes, agg.sent) if agg.sent else agg.sizes
            own_sizes = hist_minus(own_sizes, agg.kept) if agg.kept else own_sizes
            large, large_hists, large_comment = self._large_objects(agg, g, pi)
            if large:
                own_sizes = hist_minus(own_sizes, large_hists[1])
            n_sizes, sum_sizes = hist_totals(own_sizes)
            n_sent, sum_sent = hist_totals(agg.sent)
            n_kept, sum_kept = hist_totals(agg.kept)
            kept_size = ""
            one_by_one = g.n == 1 and _few_sizes(agg.kept)          # then _plan writes them with their sizes
            if n_kept and (n_sizes or n_sent) and not one_by_one:
                label = "sizes of the objects still live at the end"
                kept_size = f'histogram("{self._histogram(agg.kept, "kept-sizes", label, g, pi)}")'
            elif n_kept and not n_sizes and not n_sent:
                n_sizes, sum_sizes, own_sizes = n_kept, sum_kept, agg.kept
            size = f'histogram("{self._histogram(own_sizes, "sizes", "requested sizes", g, pi)}")' if n_sizes \
                else (first_size or "64")
            handed, handed_to = "", self._handed_to(agg, g, pi) if n_sent and n_sizes else {}
            if n_sent and n_sizes and not handed_to:
                label = "sizes of the objects handed to another thread"
                handed = f'histogram("{self._histogram(agg.sent, "handed-sizes", label, g, pi)}")'
            if n_sent and not n_sizes:
                n_sizes, sum_sizes = n_sent, sum_sent
                size = f'histogram("{self._histogram(agg.sent, "sizes", "requested sizes", g, pi)}")'
            first_size = first_size or (size if n_sizes else None)
            mean_size = sum_sizes / n_sizes if n_sizes else 64.0
            handed_mean = sum_sent / n_sent if n_sent else mean_size
            kept_mean = sum_kept / n_kept if n_kept else mean_size
            fit = fit_lifetimes(hist_minus(agg.lives, large_hists[0]) if large else agg.lives) or group_fit
            comment = (fit.comment() if fit else "") + large_comment
            large_realloc, small_rsizes = self._large_reallocs(agg, g, pi, slots)
            if large_realloc:
                rsize = f'histogram("{small_rsizes}")'
            elif per_phase_rsizes and agg.rsizes:
                rsize = f'histogram("{self._histogram(agg.rsizes, "realloc-sizes", "realloc sizes", g, pi)}")'
            stmts, new_vars = self._plan(g, pi, agg, size, rsize, fit.expr if fit else "0", start_kinds,
                                         g.n if credit_phase == pi - 1 else 0, grow, pick, handed, kept_size, large,
                                         large_realloc, units, handed_to)
            if not stmts:
                blocks.append(f"    # phase {pi}, lines {p.first_line}-{p.last_line}: no call of its own here"
                              + (" (its objects' `lives` end them)" if agg.c["events"] else ""))
                continue
            variables += new_vars
            for s in stmts:
                tally.add(s, g.n, mean_size, handed_mean, kept_mean)
                if "_ring[" in s.text and s.sent:
                    ring_per_thread += s.per_thread
            has_lives = any(s.lives and not s.kept for s in stmts)
            # a group that frees none of its objects itself in the capture may still keep those whose
            # handoff was cut: they have no lifetimes to fit and are freed at once
            comment = (comment or "objects whose handoff was cut are freed at once (`lives 0`)") if has_lives else ""
            if has_lives:
                self.fits.append(f"{g.name}, phase {pi}: {comment}")
            blocks += _wrap(f"phase {pi}, lines {p.first_line}-{p.last_line}"
                            + (f": {comment}" if has_lives else ""), "    # ", "    #   ")
            blocks.append(f'    measure "phase {pi}" {{')
            blocks += _phase_body(stmts, g.n)
            blocks.append("    }")
        if not any(b.startswith("    measure") for b in blocks):
            return [], 0, False
        blocks = _drop_trailing_barriers(blocks)
        tids = ", ".join(map(str, g.tids[:8])) + (", ..." if g.n > 8 else "")
        churn = f" at most {self.churn[g.name]}" if g.name in self.churn else ""
        out = [f"thread {g.name}{f' * {g.n}' if g.n > 1 else ''}{churn} {{    # captured thread(s) {tids}"]
        if churn:
            out.append(f"    # at most {self.churn[g.name]} of these threads were alive at once in the capture")
        if any("none[0]" in b for b in blocks):
            out.append("    pool none[1]        # stays empty: free(none[0]) is the capture's free(NULL)")
        out += [f"    {v}" for v in variables]
        if in_pool and slots > 1:
            out.append(f"    pool grow[{slots}]        # the blocks this thread grows with realloc, as many as it held "
                       f"at once in the capture")
        elif in_pool:
            out.append("    pool grow[1]        # the block this thread grows with realloc" + ("" if initial else
                                                                                         "; empty at first"))
        if big:
            out.append(f"    pool big[{big_slots}]         # the big buffers grown by realloc, step by step as captured")
        if initial:
            out.append(f"    {'grow[0]' if in_pool else 'grow'} = {alloc_text(start_mk, first_size or '64')}"
                       + ("" if in_pool else "    # the block this thread grows with realloc"))
            tally.calls[start_mk[0]] += g.n
            tally.known_frees += g.n
        if any("(r + 1) * " in b for b in blocks) and not self._explained:
            out.append("    # `repeat (r + 1) * n / R - r * n / R` over `for r in 0 .. R`: n times, evenly spread")
            self._explained = True
        end = []
        if has_chain and slots > 1:
            end = [f"    for i in 0 .. {slots} {{ free(grow[i]) }}    # the blocks grown (free(NULL) for an empty slot)"]
            tally.calls["free"] += g.n * slots
        elif has_chain and not units:
            end = [f"    free({grow})          # the last block grown (free(NULL) if a chain had just ended)"]
            tally.calls["free"] += g.n
        if big:
            live_at_end = sum(t.how == "end" for t, _ in big)
            end.append("    free_all(big)       # " + (f"{live_at_end} big buffer(s) still live at the end of the capture"
                                                       if live_at_end else "empty by now: each big buffer was freed "
                                                       "where the capture freed it"))
            tally.calls["free"] += live_at_end
            tally.known_frees += live_at_end
        if self._join_at_end():
            blocks.append(END_BARRIER)
        return out + blocks + end + ["}"], ring_per_thread, has_chain

    def _sent_on(self, g: Group, tid: int) -> bool:
        dest = self.group_of[tid]
        return dest is g or (g.name, dest.name) in self.edges

    # ---------------------------------------------------------------- header
    def _header(self, tally: _Tally) -> List[str]:
        col = self.col
        left: Counter = Counter()
        n_sizes = sum_sizes = 0
        for cells in col.cells.values():
            for cell in cells:
                if cell is not None:
                    for k in ("alloc_failed", "realloc_failed", "free_unknown", "free_missed", "censored",
                              "realloc_as_free"):
                        left[k] += cell.c[k]
                    n, s = hist_totals(cell.sizes)
                    n_sizes += n
                    sum_sizes += s
        captured: Counter = Counter()
        for k, v in col.trace_kinds.items():
            captured[runtime_kind(k)] += v
        rows = [("calls", f"{col.ordinal}", f"{sum(tally.calls.values())}")]
        for k in sorted(set(captured) | set(tally.calls), key=lambda k: (-captured.get(k, 0), k)):
            rows.append((f"  {k}", f"{captured.get(k, 0)}", f"{tally.calls.get(k, 0)}"))
        rows.append(("mean requested size (B)", f"{sum_sizes / max(n_sizes, 1):.1f}",
                     f"{tally.bytes / max(tally.draws, 1):.1f}"))
        share = col.cross_frees / col.known_frees if col.known_frees else 0.0
        model_share = tally.sent / tally.known_frees if tally.known_frees else 0.0
        rows.append(("cross-thread frees", f"{100 * share:.1f}%", f"{100 * model_share:.1f}%"))
        if col.thread_starts:
            alive = sum(self.churn.get(g.name, g.n) for g in self.groups)
            rows.append(("threads alive, at most", f"{col.alive_at_most(col.born)}", f"{alive}"))
        rows.append(("live bytes, peak", f"{col.peak_bytes}", NOT_MEASURED))
        self.figures = rows
        h = [f"# Model of {self.source_name}, written by `scenc convert --model`: a scenario with the",
             "# capture's statistics, not its call sequence (`scenc convert` without --model replays that).",
             "#",
             f"# Fitted from {col.ordinal} calls of {len(col.cells)} thread(s), lines {col.first_line}-{col.last_line}:",
             "#   groups     threads alike in calls per kind, sizes, partners and phases: "
             + ", ".join(f"{g.name} ({g.n})" for g in self.groups),
             "#              (per-thread counts are the group's averages)",
             "#   sizes      requested bytes per group and phase: the histogram files beside this one",
             "#   lifetimes  an object freed by its own thread `lives` as many of that thread's calls as in",
             "#              the capture (the `lives` clock; the fit of each phase is above its block)",
             "#   handoffs   an object freed by another thread is sent to that thread through a channel",
             "#   reallocs   each thread grows as many blocks (`grow`) at once as in the capture, with its sizes;",
             "#              a chain ends as in the capture (freed, or handed over) and a new block starts",
             f"#   phases     {len(self.phases)}, from windows of {col.window} calls compared for mean size, "
             f"live-byte growth" + (" and call rate" if col.has_time else "")]
        for i, p in enumerate(self.phases, 1):
            h += _wrap(f"phase {i}: lines {p.first_line}-{p.last_line}, {p.events} calls"
                       + (f"; {p.why}" if p.why else ""), "#              ", "#                ")
        h += ["#", f"#   {'':<26}{'capture':>12}{'model':>14}"]
        h += [f"#   {a:<26}{b:>12}{c:>14}" for a, b, c in rows]
        h += _wrap(f"(model peak: {PEAK_HOW}; it varies from run to run with the threads' timing)", "#   ", "#   ")
        notes = []
        if left["alloc_failed"] or left["realloc_failed"]:
            notes.append(f"{left['alloc_failed'] + left['realloc_failed']} failed allocations are left out")
        if left["free_unknown"]:
            notes.append(f"{left['free_unknown']} frees of pointers never seen allocated are left out")
        if left["free_missed"]:
            notes.append(f"{left['free_missed']} objects whose free the capture missed end where their address "
                         f"is handed out again")
        if left["realloc_as_free"]:
            notes.append(f"{left['realloc_as_free']} realloc(p, 0) that freed their block are frees in the model "
                         f"(realloc(p, 0) frees only under some allocators)")
        if left["censored"]:
            notes.append(f"{left['censored']} objects still live at the end of the capture are `lives forever` "
                         f"(freed at the end of their thread), with their own sizes")
        self.notes = notes + self.notes
        for note in self.notes:
            h += _wrap(note, "#   note: ", "#         ")
        return h + [""]


def _phase_body(stmts: List[Stmt], threads: int) -> List[str]:
    """The statements of a phase: those placed before the rounds, then the rounds (bare when each runs
    once, in `repeat R` when all run R times, else spread evenly over `for r in 0 .. R` rounds), then
    those placed after them."""
    def once_each(group: List[Stmt]) -> List[str]:
        out: List[str] = []
        for s in group:
            if s.share is None and s.per_thread == 1:
                out += _statement_lines(s.text, 8)
            elif s.share is None:
                out += [f"        repeat {s.per_thread} {{"] + _statement_lines(s.text, 12) + ["        }"]
            else:
                out += [f"        repeat {s.share[0]} {{"] + _statement_lines(s.text, 12) + ["        }"]
        return out

    pre = [s for s in stmts if s.place == "pre"]
    post = [s for s in stmts if s.place == "post"]
    timed = sorted((s for s in stmts if s.at is not None), key=lambda s: s.order)
    stmts = [s for s in stmts if s.place == "loop" and s.at is None and s.max_count(threads) > 0]
    if not stmts and not timed:
        return once_each(pre) + once_each(post)
    rounds = max([s.max_count(threads) for s in stmts] + [1])
    if timed:
        return once_each(pre) + _rounds(stmts, rounds) + _timed(timed, rounds) + ["        }"] + once_each(post)
    if rounds == 1:
        return once_each(pre) + once_each(stmts) + once_each(post)
    if all(s.share is None and s.per_thread == rounds for s in stmts):
        return (once_each(pre) + [f"        repeat {rounds} {{"]
                + [line for s in stmts for line in _statement_lines(s.text, 12)] + ["        }"] + once_each(post))
    return once_each(pre) + _rounds(stmts, rounds) + ["        }"] + once_each(post)


def _rounds(stmts: List[Stmt], rounds: int) -> List[str]:
    """`for r in 0 .. rounds {` and the statements, each spread evenly over the rounds (the loop left open)."""
    out = [f"        for r in 0 .. {rounds} {{"]
    for s in stmts:
        if s.share is None and s.per_thread == rounds:
            out += _statement_lines(s.text, 12)
            continue
        head = f"            repeat {spread(s.share[0] if s.share else str(s.per_thread), rounds)} {{"
        if len(head) + len(s.text) + 3 <= LINE:
            out.append(f"{head} {s.text} }}")
        else:
            out += [head] + _statement_lines(s.text, 16) + ["            }"]
    return out


def _timed(stmts: List[Stmt], rounds: int) -> List[str]:
    """Statements that run once, in the round as far into the phase as they came in the capture (a big
    chain's steps), in the capture's order; those of one round under one `if`."""
    by_round: Dict[int, List[str]] = {}
    for s in stmts:
        by_round.setdefault(min(rounds - 1, int(s.at * rounds)), []).append(s.text)
    out = []
    for r, texts in sorted(by_round.items()):
        line = f"            if r == {r} {{ " + "  ".join(texts) + " }"
        out += [line] if len(line) <= LINE else \
            [f"            if r == {r} {{"] + [f"                {t}" for t in texts] + ["            }"]
    return out


#: At most this many objects kept to the end (or reallocs) in a phase are written one by one with their sizes.
FEW_KEPT = 32


def _few_sizes(hist: dict) -> Optional[List[int]]:
    """The sizes of a histogram's objects one by one (each class at its mean), when there are few."""
    n, _ = hist_totals(hist)
    if not n or n > FEW_KEPT:
        return None
    return [round(s / c) for _, (c, s) in sorted(hist.items()) for _ in range(c)]


def _split(total: int, weights) -> Counter:
    """total split in proportion to [(key, weight)], largest remainders first; the parts add up to total."""
    whole = sum(w for _, w in weights)
    shares = [(key, total * w / whole) for key, w in weights]
    parts = Counter({key: int(x) for key, x in shares})
    left = total - sum(parts.values())
    for key, x in sorted(shares, key=lambda kx: -(kx[1] - int(kx[1])))[:left]:
        parts[key] += 1
    return parts


def _take(hist: dict, nbytes: int, bucket=size_bucket) -> None:
    """One object of nbytes (or one lifetime, with bucket=life_bucket) out of a histogram."""
    b = bucket(nbytes)
    h = hist.get(b)
    if h is None:
        return
    h[0] -= 1
    h[1] -= nbytes
    if h[0] <= 0:
        del hist[b]


def _drop_trailing_barriers(blocks: List[str]) -> List[str]:
    """After a group's last measure block there is nothing to wait for: the barriers go, the comments stay."""
    last = max(i for i, b in enumerate(blocks) if b.startswith("    measure"))
    return blocks[:last] + [b for b in blocks[last:] if b != BARRIER]


def _statement_lines(text: str, indent: int) -> List[str]:
    """A statement on one line, or its parts (separated by two spaces) one per line when too long."""
    pad = " " * indent
    if indent + len(text) <= LINE:
        return [pad + text]
    out = []
    for part in text.split("  "):
        if indent + len(part) > LINE and " lives " in part:
            alloc, lives = part.split(" lives ", 1)
            out.append(pad + alloc)
            line = pad + "    lives "
            words = lives.split(", ")
            for i, word in enumerate(words):     # a long weighted table goes on over several lines
                word += "," if i + 1 < len(words) else ""
                if len(line) + len(word) > LINE and line.strip() != "lives":
                    out.append(line.rstrip())
                    line = pad + "        "
                line += word + " "
            out.append(line.rstrip())
        else:
            out.append(pad + part)
    return out


def _dest(k):
    if isinstance(k, tuple) and (k[0] == "send" or k[:2] == ("end", "send")):
        return k[2]
    return None


def _wrap(text: str, first: str, rest: str, width: int = LINE) -> List[str]:
    out, line = [], first
    for word in text.split():
        if len(line) + len(word) + 1 > width and line != first:
            out.append(line.rstrip())
            line = rest
        line += word + " "
    out.append(line.rstrip())
    return out


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name) or "model"
