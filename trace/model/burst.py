"""The burst of a fitted model's single-thread group (trace/model/shape.py, _take_bursts): the objects live at
the capture's peak that its thread made close together, or held from earlier in the peak's phase, and freed
after the peak, made into the pool `burst` over the part of the phase where they came, with their own
sizes, and freed together by one `free_all(burst)` where the capture freed them (the middle of their
frees), so the peak holds all of them at once, as the capture's did.

    burst = BurstPlanner(shape, sizer, group)
    stmts = burst.statements(pi)          # pi 0-based; planned into the phase by trace/model/plan.py
"""

from collections import Counter
from typing import List

from .collect import add, hist_totals, merge_hist, size_bucket
from .shape import Group, ModelShape
from .sizes import PhaseSizer
from .stmt import Stmt, alloc_text, mk_key

POOL, INDEX = "burst", "in_burst"
MAX_OWN_SIZES = 8           # the burst's sizes holding the most bytes get a statement each (at their mean) ...
OWN_SIZE_SHARE = 1 / 64     # ... when they hold this share of its bytes; the others are drawn from a histogram
BIRTHS_SPAN = (0.05, 0.95)  # the allocations are spread over the part of the phase that holds these of them


class BurstPlanner:
    """The burst's statements of one group of one thread."""

    def __init__(self, shape: ModelShape, sizer: PhaseSizer, g: Group):
        self.shape, self.sizer, self.g = shape, sizer, g
        self.phase, self.objects = shape.bursts.get(g.name, (None, []))

    def size(self) -> int:
        """The pool's slots: the burst's objects."""
        return len(self.objects)

    def statements(self, pi: int) -> List[Stmt]:
        """The burst's allocations made in phase pi (0-based), and its free when pi is the peak's phase."""
        made = [r for r in self.objects if self.shape.phase_of(r.at) == pi]
        if not made and pi != self.phase:
            return []
        at = self.shape.clock_at(self.g.tids[0], pi)
        out, last = [], 0.0
        if made:
            births = sorted(r.at[1] for r in made)
            n = len(births)
            first, last = at(births[int(BIRTHS_SPAN[0] * (n - 1))]), at(births[int(BIRTHS_SPAN[1] * (n - 1))])
            order = min(r.at[0] for r in made)
            for mk, text, count, mean in self._allocs(made, pi):
                out.append(Stmt(f"{POOL}[{INDEX}] = {text}  {INDEX} = {INDEX} + 1", per_thread=count,
                                calls={mk[0]: 1}, draws=1, mean=mean, at=first, until=max(last, first), order=order))
        if pi == self.phase:
            deaths = sorted(r.at[1] + r.life for r in self.objects)
            ends = sorted(r.end for r in self.objects)
            n = len(deaths)
            out.append(Stmt(f"free_all({POOL})", per_thread=1, calls={"free": n}, local_frees=n,
                            at=max(at(deaths[n // 2]), last), order=ends[n // 2]))
        return out

    def _allocs(self, objects: list, pi: int):
        """(model kind, allocation text, how many, mean size): the sizes holding the most bytes each at its
        mean (drawn from one histogram, 16 buffers of 535 KB among 2500 objects came out as luck had it), the
        others drawn from a histogram of theirs; by kind."""
        by_size: Counter = Counter()
        hist_of: dict = {}
        for r in objects:
            b = size_bucket(r.size)
            by_size[r.mk, b] += 1
            add(hist_of.setdefault(r.mk, {}), b, r.size)
        total = sum(r.size for r in objects)
        heavy = sorted(((hist_of[mk][b][1], mk, b) for mk, b in by_size), reverse=True)[:MAX_OWN_SIZES]
        out = []
        for nbytes, mk, b in sorted(heavy, key=lambda x: (mk_key(x[1]), x[2])):
            if nbytes < OWN_SIZE_SHARE * total:
                continue
            count, sum_ = hist_of[mk].pop(b)
            mean = round(sum_ / count)
            out.append((mk, alloc_text(mk, str(mean)), count, mean))
        rest = {mk: hist_of[mk] for mk in sorted(hist_of, key=mk_key) if hist_of[mk]}
        if rest:
            merged: dict = {}
            for hist in rest.values():
                merge_hist(merged, hist)
            expr = self.sizer.files.expr(merged, "burst-sizes", "sizes of the objects made together before the "
                                         "peak and freed together after it", self.g.name, pi + 1)
            count_all, sum_all = hist_totals(merged)
            for mk, hist in rest.items():
                out.append((mk, alloc_text(mk, expr), hist_totals(hist)[0], sum_all / count_all))
        return out

