"""Peak live memory (bytes requested and not yet freed), bounded before the run.

Upper bound: at any moment every object is held by exactly one thing: a
pointer variable (one object at a time), a pool (one per slot), a channel
(up to its capacity), the `lives` queue, or nothing (leaked: an overwritten
variable or slot, an object dropped by `write(malloc(..))`). The sum over
holders of each holder's largest possible content bounds the peak from above:
variables and slots by the largest object ever put there, `lives L` by
min(L, executions) objects, `lives forever` and leaks by their executions.
Anything a holder's bound needs that is only known at run time makes the
whole bound unknown (None).

Lower bound: one thread's live bytes are followed through its statements
with the smallest size of every object it allocates itself (a received
object counts 0: its sender counted it), loops with a constant count run
for real until their effect repeats and are then extrapolated. A thread's
lower bound is the largest value seen. The scenario's lower bound adds those
of all threads, because the start gate releases them together: it is a
bound for threads that overlap in time, which is what scenarios are written
for, not a guarantee for threads that could run one after another.

The program's own mappings (`map`) are bounded the same way, apart: mapped
bytes are not the allocator's (`mapped_low`, `mapped_high`), and the
machine's memory is weighed against both together.
"""

from dataclasses import dataclass, field, replace
from typing import Dict, List, Optional, Sequence, Tuple

from . import flow
from . import nodes as n
from .errors import Diagnostic, Reporter
from ..system.machine import mem_total
from ..system.units import fmt_bytes
from .ranges import Ranges, scenario_dir
from .resolve import MAP, PTR, Resolved, ThreadGroup
from .walk import (Loop, calls_in, condition_holds, const_or_none, executions_at_most, loop_of,
                   stmt_exprs, walk)

INF = float("inf")
ALLOCATING = ("malloc", "calloc", "realloc", "aligned_alloc", "memalign", "posix_memalign")
MAPPING = ("map",)              # the program's own mappings, counted apart from the heap
TICKS = ALLOCATING + ("free",)  # statements that advance the `lives` clock (runtime/ops.h scn_tick)
EXACT_ITERATIONS = 3            # loop iterations simulated before extrapolating


@dataclass
class PeakEstimate:
    low: int
    high: Optional[int]
    by_group: List[Tuple[ThreadGroup, int, Optional[int]]]  # per thread: (group, low, high)
    mapped_low: int = 0                 # the same bounds of the bytes mapped by `map` (not the heap's)
    mapped_high: Optional[int] = 0


def estimate_peak(resolved: Resolved) -> Tuple[int, Optional[int]]:
    """(lower bound, upper bound or None) of the scenario's peak live requested bytes."""
    rep = Reporter(resolved.scenario.filename, resolved.scenario.source)  # diagnostics not wanted here
    est = estimate(resolved, flow.analyze(resolved, rep))
    return est.low, est.high


def estimate(resolved: Resolved, leaks: Dict[int, flow.FlowFacts]) -> PeakEstimate:
    base_dir = scenario_dir(resolved)
    ranges = {id(g): Ranges(resolved, g, base_dir) for g in resolved.groups}
    sizes = _ObjectSizes(resolved, ranges)
    by_group, low, high = [], 0, 0.0
    mapped_low, mapped_high = 0, 0.0
    for g in resolved.groups:
        lo = _LowerBound(resolved, ranges[id(g)]).thread_peak()
        hi = _thread_high(resolved, g, ranges[id(g)], sizes, leaks[id(g)])
        by_group.append((g, lo, None if hi == INF else int(hi)))
        low += (g.at_most or g.count) * lo  # thread churn: only so many threads overlap
        high += g.count * hi
        if any(k == MAP for k in g.symbols.values()) or any(c.func in MAPPING for st, _ in walk(g.node.body, resolved.params)
                                                           for e in stmt_exprs(st) for c in calls_in(e)):
            mapped_low += (g.at_most or g.count) * _LowerBound(resolved, ranges[id(g)], mapped=True).thread_peak()
            mapped_high += g.count * _thread_high(resolved, g, ranges[id(g)], sizes, leaks[id(g)], mapped=True)
    for name, info in resolved.channels.items():
        high += info.capacity * (info.count or 1) * sizes.chan_max.get(name, 0)
    for name, slots in resolved.shared.items():
        high += _times(slots, sizes.shared_max.get(name, 0))
    if resolved.scenario.replays:
        high = INF  # the trace's own threads are not seen here
    return PeakEstimate(int(low), None if high == INF else int(high), by_group, int(mapped_low),
                        None if mapped_high == INF else int(mapped_high))


_TOO_SMALL = "live at its peak but this machine has"   # in the error below and nowhere else


def is_machine_too_small(d: Diagnostic) -> bool:
    """Is this the error saying the scenario cannot fit in this machine's memory?

    `scenc run --allow-huge` turns that one error into a warning (and runs the
    program under a memory limit instead).
    """
    return d.severity == "error" and d.message.startswith("the scenario needs at least ") \
        and _TOO_SMALL in d.message


def check(resolved: Resolved, rep: Reporter, leaks: Dict[int, flow.FlowFacts]) -> None:
    mem = mem_total()
    if mem is None or not resolved.groups:
        return
    est = estimate(resolved, leaks)
    if est.mapped_low and est.low + est.mapped_low > mem:
        rep.error(resolved.groups[0].node.pos, f"the scenario needs at least {fmt_bytes(est.low + est.mapped_low)} "
                  f"{_TOO_SMALL} {fmt_bytes(mem)}", f"{fmt_bytes(est.low)} of heap and "
                  f"{fmt_bytes(est.mapped_low)} mapped by `map`")
        return
    if est.low > mem:
        g, lo, _ = max(est.by_group, key=lambda t: t[0].count * t[1])
        rep.error(g.node.pos, f"the scenario needs at least {fmt_bytes(est.low)} {_TOO_SMALL} "
                  f"{fmt_bytes(mem)}", f"thread {g.node.name}: {g.count} x {fmt_bytes(lo)} each")
    elif est.high is not None and est.high > mem:
        g, _, hi = max(est.by_group, key=lambda t: t[0].count * (t[2] or 0))
        rep.warning(g.node.pos, f"the scenario may need up to {fmt_bytes(est.high)} live at its peak but this "
                    f"machine has {fmt_bytes(mem)}", f"thread {g.node.name}: up to {g.count} x {fmt_bytes(hi or 0)} each")


# ------------------------------------------------------------ object sizes

class _ObjectSizes:
    """The largest object each variable, pool slot and channel can ever hold (INF: unknown)."""

    def __init__(self, resolved: Resolved, ranges: Dict[int, Ranges]):
        self.r = resolved
        self.ranges = ranges
        self.var_max: Dict[Tuple[int, str], float] = {}
        self.pool_max: Dict[Tuple[int, str], float] = {}
        self.chan_max: Dict[str, float] = {}
        self.shared_max: Dict[str, float] = {}
        for _ in range(64):  # a largest size only ever grows, from finitely many candidates
            if not self._round():
                break

    def _round(self) -> bool:
        changed = False

        def grow(table, key, value):
            nonlocal changed
            if value > table.get(key, 0):
                table[key] = value
                changed = True

        for g in self.r.groups:
            for st, loops in walk(g.node.body, self.r.params):
                if isinstance(st, n.Assign) and self._holds_ptr(g, st.target):
                    value = self.of(g, st.value, loops)
                    if isinstance(st.target, n.Index):
                        grow(self.pool_max, (id(g), st.target.base.id), value)
                    else:
                        grow(self.var_max, (id(g), st.target.id), value)
                for e in stmt_exprs(st):
                    for c in calls_in(e):
                        if c.func == "send":
                            chan = c.args[0]
                            grow(self.chan_max, chan.id if isinstance(chan, n.Name) else chan.base.id,
                                 self.of(g, c.args[1], loops))
                        elif c.func == "swap":
                            grow(self.shared_max, c.args[0].base.id, self.of(g, c.args[1], loops))
        return changed

    def _holds_ptr(self, g: ThreadGroup, target) -> bool:
        return isinstance(target, n.Index) or g.symbols.get(target.id) in (PTR, MAP)

    def of(self, g: ThreadGroup, e, loops: Sequence[Loop]) -> float:
        """The largest object a pointer expression can give."""
        if isinstance(e, n.Name):
            return self.var_max.get((id(g), e.id), 0)
        if isinstance(e, n.Index):
            return self.pool_max.get((id(g), e.base.id), 0)
        if isinstance(e, n.Call):
            if e.func == "recv":
                chan = e.args[0]
                return self.chan_max.get(chan.id if isinstance(chan, n.Name) else chan.base.id, 0)
            if e.func == "swap":
                return self.shared_max.get(e.args[0].base.id, 0)
            return alloc_size(self.ranges[id(g)], e, loops)[1]
        return INF


def alloc_size(ranges: Ranges, c: n.Call, loops: Sequence[Loop]) -> Tuple[float, float]:
    """The smallest and largest size an allocating call asks for (0 and INF when unknown)."""
    def bounds(e):
        r = ranges.of(e, loops)
        return (0, INF) if r is None else (max(0, r[0]), max(0, r[1]))

    if c.func == "malloc":
        return bounds(c.args[0])
    if c.func == "calloc":
        (a, b), (x, y) = bounds(c.args[0]), bounds(c.args[1])
        return _times(a, x), _times(b, y)      # calloc(0, unknown) asks for 0 bytes, not 0 x inf = NaN
    if c.func in ALLOCATING:
        return bounds(c.args[1])
    if c.func in MAPPING:
        return bounds(c.args[0])
    return 0, 0


# ------------------------------------------------------------ upper bound

def _thread_high(resolved: Resolved, g: ThreadGroup, ranges: Ranges, sizes: _ObjectSizes,
                 leaks: flow.FlowFacts, mapped: bool = False) -> float:
    """The most one thread of g holds at once: heap bytes, or with `mapped` the bytes it maps (`map`)."""
    params = resolved.params
    holder, counted = (MAP, MAPPING) if mapped else (PTR, ALLOCATING + ("recv", "swap"))
    total = sum(sizes.var_max.get((id(g), v), 0) for v, k in g.symbols.items() if k == holder)
    transient = 0.0
    for st, loops in walk(g.node.body, params):
        runs = executions_at_most(loops)
        runs = INF if runs is None else runs
        if isinstance(st, n.Pool) and not mapped:
            slots = const_or_none(st.size, params)
            # _times: a pool of unknown size whose slots hold nothing is 0, not inf x 0 = NaN
            total += _times(INF if slots is None else max(0, slots), sizes.pool_max.get((id(g), st.name), 0))
        elif isinstance(st, n.Assign):
            if id(st) in leaks.overwrites and g.symbols.get(st.target.id) == holder:
                total += _times(runs, sizes.var_max.get((id(g), st.target.id), 0))
            if id(st) in leaks.unsafe_slot_assigns and not mapped:
                total += _times(runs, sizes.pool_max.get((id(g), st.target.base.id), 0))
        elif isinstance(st, n.Lives) and (st.call.func in MAPPING) == mapped:
            size = sizes.of(g, st.call, loops)  # a received object's size is its sender's
            pending = runs
            if st.lifetime is not None:
                life = ranges.of(st.lifetime, loops)
                if life is not None:
                    pending = min(runs, max(0, life[1]))
            total += _times(pending, size)
        # Objects that live inside one statement: free(malloc(..)), send(q, malloc(..)) ...
        direct = st.value if isinstance(st, n.Assign) else st.call if isinstance(st, n.Lives) else None
        for e in stmt_exprs(st):
            for c in calls_in(e):
                if c is direct or c.func not in counted:
                    continue
                size = sizes.of(g, c, loops)
                if id(c) in leaks.lost:
                    total += _times(runs, size)
                transient = max(transient, size)
    return total + transient


def _times(count: float, size: float) -> float:
    return 0 if count == 0 or size == 0 else count * size


# ------------------------------------------------------------ lower bound

@dataclass
class _Live:
    """Bytes certainly live in one thread, by holder."""
    vars: Dict[str, int] = field(default_factory=dict)
    pools: Dict[str, int] = field(default_factory=dict)
    retained: int = 0   # `lives forever` and leaks: they stay until the thread ends
    peak: int = 0

    def total(self) -> int:
        return sum(self.vars.values()) + sum(self.pools.values()) + self.retained

    def see(self, extra: int = 0) -> None:
        self.peak = max(self.peak, self.total() + extra)

    def copy(self) -> "_Live":
        return replace(self, vars=dict(self.vars), pools=dict(self.pools))

    def holders(self):
        """What the next iteration depends on: everything but `retained` and `peak`."""
        return ({k: v for k, v in self.vars.items() if v}, {k: v for k, v in self.pools.items() if v})

    def forget_holders(self) -> None:
        self.vars = {}
        self.pools = {}


class _LowerBound:
    """Heap bytes certainly live in one thread; with `mapped`, bytes certainly mapped by `map`."""

    def __init__(self, resolved: Resolved, ranges: Ranges, mapped: bool = False):
        self.holder, self.counted = (MAP, MAPPING) if mapped else (PTR, ALLOCATING)
        self.params = resolved.params
        self.ranges = ranges
        self.g = ranges.group
        # The most one slot object of a pool was counted for, so that taking
        # any one out never subtracts more than was added.
        self.unit: Dict[str, int] = {}
        for st, loops in walk(self.g.node.body, self.params):
            if isinstance(st, n.Assign) and isinstance(st.target, n.Index):
                pool = st.target.base.id
                self.unit[pool] = max(self.unit.get(pool, 0), self._new(st.value, loops))

    def thread_peak(self) -> int:
        return self.block(self.g.node.body, _Live(), ()).peak

    def _new(self, e, loops) -> int:
        """Bytes counted for the object a pointer expression creates (0 for one that already exists)."""
        if isinstance(e, n.Call) and e.func in self.counted:
            lo = alloc_size(self.ranges, e, loops)[0]
            return 0 if lo == INF else int(lo)
        return 0

    def block(self, stmts, s: _Live, loops) -> _Live:
        for st in stmts:
            s = self.stmt(st, s, loops)
        return s

    def stmt(self, st, s: _Live, loops) -> _Live:
        if isinstance(st, n.Assign):
            if isinstance(st.target, n.Name) and self.g.symbols.get(st.target.id) != self.holder:
                return s
            new = self.take(st.value, s, loops, keep=st.target)
            if isinstance(st.target, n.Index):
                pool = st.target.base.id
                # No slot object may count for more than a take from the pool subtracts.
                s.pools[pool] = s.pools.get(pool, 0) + min(new, self.unit.get(pool, 0))
            else:
                # An object still counted for the variable leaks, and stays live.
                s.retained += s.vars.get(st.target.id, 0)
                s.vars[st.target.id] = new
            s.see()
        elif isinstance(st, n.CallStmt):
            c = st.call
            if c.func in ("free", "send", "unmap"):
                obj = c.args[0] if c.func != "send" else c.args[1]
                s.see(self._new(obj, loops))
                self.take(obj, s, loops, keep=None)
            elif c.func in ("write", "touch") and isinstance(c.args[0], n.Call):
                s.retained += self._new(c.args[0], loops)  # lost: never freed
                s.see()
            elif c.func == "free_all":
                s.pools[c.args[0].id] = 0
        elif isinstance(st, n.Lives):
            lo = self.take(st.call, s, loops, keep=None)  # realloc hands its source's object over
            if st.lifetime is None:
                s.retained += lo
                s.see()
            else:
                s.see(self._pending(st, loops) * lo)
        elif isinstance(st, n.Pool):
            s.pools[st.name] = 0
        elif isinstance(st, (n.Repeat, n.For)):
            return self.loop(st, s, loops)
        elif isinstance(st, n.Measure):
            return self.block(st.body, s, loops)
        elif isinstance(st, n.If):
            return self.branches(st, s, loops)
        return s

    def branches(self, st: n.If, s: _Live, loops) -> _Live:
        """Either branch may run: only what both leave is certain."""
        holds = condition_holds(st.cond, self.params)
        if holds is not None:
            return self.block(st.then if holds else st.orelse, s, loops)
        a = self.block(st.then, s.copy(), loops)
        b = self.block(st.orelse, s.copy(), loops)
        out = s.copy()
        out.retained = min(a.retained, b.retained)
        out.peak = max(s.peak, min(a.peak, b.peak))
        for mine, x, y in ((out.vars, a.vars, b.vars), (out.pools, a.pools, b.pools)):
            mine.clear()
            for k in set(x) | set(y):
                mine[k] = min(x.get(k, 0), y.get(k, 0))
        return out

    def take(self, e, s: _Live, loops, keep) -> int:
        """Evaluate a pointer expression: what it creates (counted), minus what it moves out of a holder."""
        if isinstance(e, n.Name):
            moved = s.vars.get(e.id, 0)
            s.vars[e.id] = 0
            return moved
        if isinstance(e, n.Index):
            pool = e.base.id
            s.pools[pool] = max(0, s.pools.get(pool, 0) - self.unit.get(pool, 0))
            return 0
        if isinstance(e, n.Call) and e.func == "swap":
            self.take(e.args[1], s, loops, keep=None)  # into the shared pool, out of this count
            return 0
        if isinstance(e, n.Call) and e.func == "realloc":
            src = e.args[0]
            if isinstance(src, n.Name) and isinstance(keep, n.Name) and src.id == keep.id:
                s.vars[src.id] = 0  # the old block is gone, not leaked
            else:
                self.take(src, s, loops, keep=None)
        return self._new(e, loops)

    def _pending(self, st: n.Lives, loops: Sequence[Loop]) -> int:
        """Objects of this `lives L` statement certainly pending right after it runs."""
        life = self.ranges.of(st.lifetime, loops)
        if not loops or life is None or life[0] < 1:
            return 1
        inner = loops[-1]
        if inner.branch is not None:
            return 1
        per_iteration = _ticks(inner.node.body, self.params)
        if inner.count is None or not per_iteration:
            return 1
        return max(1, min(inner.count, (int(life[0]) - 1) // per_iteration + 1))

    def loop(self, st, s: _Live, loops) -> _Live:
        info = loop_of(st, self.params)
        inner = loops + (info,)
        if info.count == 0:
            return s

        def once(x: _Live) -> _Live:
            return self.block(st.body, x.copy(), inner)

        if info.count is None:
            # Zero or more times: only what holds either way is certain afterwards,
            # and nothing seen inside is certain to have happened.
            after = once(s)
            again = once(after)
            out = s.copy()
            if after.holders() != again.holders():
                out.forget_holders()
                return out
            for mine, one in zip((out.vars, out.pools), (after.vars, after.pools)):
                for k in set(mine) | set(one):
                    mine[k] = min(mine.get(k, 0), one.get(k, 0))
            return out

        states = [s]
        for done in range(1, min(info.count, EXACT_ITERATIONS) + 1):
            end = once(replace(states[-1], peak=0))
            end.peak = max(states[-1].peak, end.peak)
            states.append(end)
            rest = info.count - done
            if not rest:
                return end
            if done < 2 or end.holders()[0] != states[-2].holders()[0]:
                continue
            step = _pool_steps(states[-2], end)
            if not any(step.values()) or done >= 3 and step == _pool_steps(states[-3], states[-2]):
                return self._extrapolate(st, end, states[-2], step, rest, inner)
        last = states[-1]
        last.forget_holders()  # still changing: what it will be after the last iteration is unknown
        return last

    def _extrapolate(self, st, end: _Live, before: _Live, step: Dict[str, int], rest: int, loops) -> _Live:
        """Every iteration from here on changes the pools and `retained` by the same amounts.

        (Variables hold one object each and are already periodic.) Where a
        pool would go below 0 the real value stays higher, so the straight
        line is still a lower bound.
        """
        retained_step = end.retained - before.retained
        total_step = sum(step.values()) + retained_step
        next_peak = self.block(st.body, replace(end, peak=0).copy(), loops).peak
        end.peak = max(end.peak, next_peak + (rest - 1) * max(0, total_step))
        for k, d in step.items():
            end.pools[k] = max(0, end.pools.get(k, 0) + rest * d)
        end.retained += rest * retained_step
        return end


def _pool_steps(a: _Live, b: _Live) -> Dict[str, int]:
    return {k: b.pools.get(k, 0) - a.pools.get(k, 0) for k in set(a.pools) | set(b.pools)}


def _ticks(stmts, params) -> Optional[int]:
    """Allocator calls one run of a block makes (the `lives` clock), None if not known."""
    total = 0
    for st in stmts:
        if isinstance(st, (n.Repeat, n.For)):
            count, inner = loop_of(st, params).count, _ticks(st.body, params)
            if count is None or inner is None:
                return None
            total += count * inner
        elif isinstance(st, n.Measure):
            inner = _ticks(st.body, params)
            if inner is None:
                return None
            total += inner
        elif isinstance(st, n.If):
            # The most either branch makes: `_pending` needs an upper bound.
            then, orelse = _ticks(st.then, params), _ticks(st.orelse, params)
            if then is None or orelse is None:
                return None
            total += max(then, orelse) + sum(1 for e in stmt_exprs(st) for c in calls_in(e) if c.func in TICKS)
        else:
            total += sum(1 for e in stmt_exprs(st) for c in calls_in(e) if c.func in TICKS)
    return total
