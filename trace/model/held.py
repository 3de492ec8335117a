"""The held objects of a fitted model's single-thread groups (trace/model/shape.py, _take_held_objects): the
statements that allocate them into the pool of the phase that frees them and free them there, each part of a
phase as many as the capture made and freed there; and where the objects kept to the end came, likewise.

    held = HeldPlanner(shape, sizer, group)
    stmts = held.allocs(pi) + held.frees(pi)        # pi 0-based; planned into the phase by trace/model/plan.py
"""

from collections import Counter
from typing import Dict, List, Tuple

from .collect import hist_minus, hist_totals
from .fit import BIG_OBJECT_SHARE, MAX_BIG_OBJECTS
from .shape import Group, ModelShape
from .sizes import PhaseSizer, few_sizes
from .stmt import Stmt, alloc_text, mk_key

EXIT_TAIL = 8     # calls a thread can make as it ends, after the thread that joins it goes on (_others_done)


class HeldPlanner:
    """The held objects' statements of one group of one thread."""

    def __init__(self, shape: ModelShape, sizer: PhaseSizer, g: Group):
        self.shape, self.col, self.sizer, self.g = shape, shape.col, sizer, g

    def pools(self) -> Dict[int, int]:
        """Phase (1-based) -> how many objects the group frees in it from its pool `held_pN`."""
        held: Counter = Counter()
        for (_, qi), (_, births) in self.shape.held.get(self.g.name, {}).items():
            held[qi + 1] += sum(births.values())
        return dict(sorted(held.items()))

    def allocs(self, pi: int) -> List[Stmt]:
        """The objects of phase pi (0-based) freed in a later part of it or a later phase
        (model_shape._take_held_objects), put into the pool of the phase that frees them, with their own
        sizes, where they came (places): spread evenly over the phase, the start-up's last objects, which
        live to the teardown, would come as early as its first ones (python3 start-up: their lifetimes came
        out longer than captured)."""
        held = {q: v for (p, q), v in self.shape.held.get(self.g.name, {}).items() if p == pi}
        floor = self.col.peak_bytes * BIG_OBJECT_SHARE
        out = []
        for q, (hist, births) in sorted(held.items()):
            pool, index = f"held_p{q + 1}", f"in_p{q + 1}"
            kinds: Counter = Counter()
            for (_, mk), n in births.items():
                kinds[mk] += n
            # The few big ones freed in a later phase with their sizes, as big objects are: drawn from the
            # histogram, one block of a tenth of the peak among a thousand small ones comes out twice as often
            # as once. They come at the phase's end, as one made once a phase does.
            big = {b: h for b, h in hist.items() if h[1] >= floor * h[0]} if q > pi else {}
            big_sizes = few_sizes(big) if big and hist_totals(big)[0] <= MAX_BIG_OBJECTS else None
            big_mk = kinds.most_common(1)[0][0]
            if big_sizes:
                hist = hist_minus(hist, big)
                out += [Stmt(f"{pool}[{index}] = {alloc_text(big_mk, str(n))}  {index} = {index} + 1", per_thread=1,
                             calls={big_mk[0]: 1}, draws=1, mean=n) for n in big_sizes]
            if not hist:
                continue
            # the objects that live to a later phase are often not those that live to the next one
            expr, mean = self.sizer.held_sizes(hist, pi + 1, q + 1 if len(held) > 1 else None)
            for mk in sorted(kinds, key=mk_key):
                by_window = Counter({w: n for (w, k), n in births.items() if k == mk})
                if big_sizes and mk == big_mk:
                    _take_last(by_window, len(big_sizes))
                text = f"{pool}[{index}] = {alloc_text(mk, expr)}  {index} = {index} + 1"
                out += [Stmt(text, per_thread=n, calls={mk[0]: 1}, draws=1, mean=mean, at=at, until=until, order=order)
                        for at, until, n, order in self.places(by_window, pi)]
        return out

    def frees(self, pi: int) -> List[Stmt]:
        """The frees in phase pi (0-based) of the objects held for it (allocs), where the capture freed
        them (places): a random one of those in the pool (its slot takes the first one left). A teardown
        frees its objects in no order of their births (python3 start-up: next to no rank correlation), and first
        come first freed would give them all alike lifetimes. Each part's frees come after the births of
        the objects they free, which came in earlier parts."""
        frees = Counter(self.shape.held_frees.get(self.g.name, {}).get(pi) or {})
        pool, index, end = f"held_p{pi + 1}", f"out_p{pi + 1}", f"in_p{pi + 1}"
        text = f"h = uniform({index}, {end} - 1)  free({pool}[h])  {pool}[h] = {pool}[{index}]  {index} = {index} + 1"
        last, after = self._others_done(pi), 0
        if last is not None:
            after = sum(n for w, n in frees.items() if w >= last)
            frees = Counter({w: n for w, n in frees.items() if w < last})
        out = [Stmt(text, per_thread=n, calls={"free": 1}, local_frees=1, at=at, until=until, order=order)
               for at, until, n, order in self.places(frees, pi)]
        out += self._after_peak(pi, text, last)
        if after:
            out.append(Stmt(text, per_thread=after, calls={"free": 1}, local_frees=1, place="end"))
        return out

    def _after_peak(self, pi: int, text: str, last) -> List[Stmt]:
        """The frees in phase pi (0-based) of the held objects live at the capture's peak (shape.
        held_after_peak): spread over the part of the phase that holds the middle 90% of them, on the thread's
        clock, all after the peak. Where the others' end places the phase's last frees (_others_done),
        those from its window on are among them."""
        phase, ends, first = self.shape.held_after_peak.get(self.g.name, (None, [], 0))
        if phase != pi or not ends:
            return []
        out = []
        if last is not None:
            late = sum(wd >= last for _, wd in ends)
            ends = [(c, wd) for c, wd in ends if wd < last]
            if late:
                out.append(Stmt(text, per_thread=late, calls={"free": 1}, local_frees=1, place="end"))
        if not ends:
            return out
        at = self.shape.clock_at(self.g.tids[0], pi)
        n = len(ends)
        return [Stmt(text, per_thread=n, calls={"free": 1}, local_frees=1, at=at(ends[int(0.05 * (n - 1))][0]),
                     until=at(ends[int(0.95 * (n - 1))][0]), order=first)] + out

    def _others_done(self, pi: int):
        """In the last phase, the last window in which the threads of the other groups made more than
        EXIT_TAIL calls, when there is one: this group's frees from it on came as the others ended or after (a
        main thread that tears down after joining its workers; a window is Collector.window calls, so those
        in the others' last window count too), and they come after the model's last barrier. On its own
        clock, which does not tick while it waits, python's pc.py main freed 650 KB held since its start-up
        in its last calls, but the model's main made those calls as soon as the phase began: the objects
        were gone while the workers ran, and the model's peak of live bytes fell short of the capture's.
        A thread's last few calls can come after its joiner's: python's thread frees its state after it
        has released the thread that joins it, and in some captures pc.py's consumer made its last calls
        after main's first teardown frees, which then stayed in the phase. Not in a model whose
        group churns (`at most K`): its threads at a last barrier would hold the slots the rest wait for."""
        if pi != len(self.shape.phases) - 1 or self.shape.churn:
            return None
        p, mine = self.shape.phases[pi], set(self.g.tids)
        calls = Counter()
        for tid, thread_windows in self.col.thread_windows.items():
            if tid not in mine:
                for w in range(p.start, min(p.end, len(thread_windows))):
                    calls[w] += thread_windows[w].c["events"] if thread_windows[w] is not None else 0
        busy = [w for w, n in calls.items() if n > EXIT_TAIL] or [w for w, n in calls.items() if n]
        return max(busy) if busy else None

    def places(self, by_window: Counter, pi: int) -> List[Tuple[float, float, int, int]]:
        """Where in phase pi (0-based) calls counted by window of the capture come: per part of the phase
        (model_shape.part_of), spread evenly over the windows that hold the middle 90% of them (a steady
        flow over the part, a teardown in its last window), on the thread's `lives` clock. Returns (how far
        into the phase they begin, how far they end, calls, ordinal of their first window), in the order of
        the parts."""
        tid = self.g.tids[0]
        lo, ticks = self.shape.clock_span(tid, pi)
        thread_windows = self.col.thread_windows[tid]
        parts: Dict[tuple, list] = {}                # part -> [(window, clock where it begins, its ticks, calls)]
        before = sum(c.c["ticks"] for c in thread_windows[:min(by_window)] if c is not None) if by_window else 0
        for w in range(min(by_window, default=0), max(by_window, default=-1) + 1):
            t = thread_windows[w].c["ticks"] if w < len(thread_windows) and thread_windows[w] is not None else 0
            if by_window[w] > 0:
                parts.setdefault(self.shape.part_of(w), []).append((w, before, t, by_window[w]))
            before += t

        def where(clock):
            return min(max((clock - lo) / ticks, 0.0), 1.0)
        out = []
        for key in sorted(parts):
            windows = parts[key]
            n = sum(x[3] for x in windows)
            seen, first, last = 0, None, windows[-1]
            for x in windows:
                seen += x[3]
                if first is None and seen > 0.05 * n:
                    first = x
                if seen >= 0.95 * n:
                    last = x
                    break
            out.append((where(first[1]), where(last[1] + last[2]), n, windows[0][0] * self.col.window))
        return out

    def kept_places(self, pi: int, mk, v: int) -> List[Tuple[float, float, int, int]]:
        """Where in phase pi (0-based) the thread's v objects of kind mk still live at the end came (places),
        or [] when the capture's windows do not say (their counts do not add up to v)."""
        p, tid = self.shape.phases[pi], self.g.tids[0]
        thread_windows = self.col.thread_windows[tid]
        by_window = Counter({w: thread_windows[w].c["kept", mk] for w in range(p.start, min(p.end, len(thread_windows)))
                             if thread_windows[w] is not None and thread_windows[w].c["kept", mk] > 0})
        for r in self.shape.big_objects.get(self.g.name, []):       # written one by one
            if r.how == "kept" and r.mk == mk and self.shape.phase_of(r.at) == pi:
                by_window[r.at[0] // self.col.window] -= 1
        by_window = +by_window
        return self.places(by_window, pi) if sum(by_window.values()) == v else []


def _take_last(counts: Counter, n: int) -> None:
    """n out of counts (by window), from the last window back."""
    for w in sorted(counts, reverse=True):
        step = min(n, counts[w])
        counts[w] -= step
        n -= step
    for w in [w for w, c in counts.items() if c <= 0]:
        del counts[w]
