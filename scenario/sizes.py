"""Numbers that cannot be meant: negative or absurd sizes, empty ranges, broken distributions.

Each message points at the argument at fault (the `-1` of `uniform(-1, 64)`,
the `sigma` of a lognormal), not at the statement. A size is only called
negative when that is certain (a constant, or a distribution's own bound):
interval arithmetic on loop variables over-approximates and would cry wolf.
Too large a size uses the whole interval, since any value in it past 1 TiB or
past the machine's memory is a mistake either way.
"""

from typing import Optional, Sequence

from ..compiler import distributions as tables
from ..compiler.lower import resolve_data_path
from . import nodes as n
from .errors import Reporter
from ..system.machine import ABSURD_ALLOCATION, mem_total
from ..system.units import fmt_bytes
from .ranges import MAX_POW2, Range, Ranges, scenario_dir
from .resolve import Resolved
from .walk import Loop, const_or_none, show, stmt_exprs, subexprs, walk

SIZEOF_VOID_P = 8
SIZE_MAX = (1 << 64) - 1


def check(resolved: Resolved, rep: Reporter) -> None:
    base_dir = scenario_dir(resolved)
    for group in resolved.groups:
        _GroupSizes(resolved, Ranges(resolved, group, base_dir), rep).run()


class _GroupSizes:
    def __init__(self, resolved: Resolved, ranges: Ranges, rep: Reporter):
        self.params = resolved.params
        self.ranges = ranges
        self.group = ranges.group
        self.base_dir = ranges.base_dir
        self.rep = rep

    def const(self, e) -> Optional[float]:
        return const_or_none(e, self.params)

    def run(self) -> None:
        for st, loops in walk(self.group.node.body, self.params):
            if isinstance(st, n.Repeat):
                self.not_negative(st.count, "a repeat count")
            elif isinstance(st, n.Pool):
                self.not_negative(st.size, "a pool's size")
            elif isinstance(st, n.Lives) and st.lifetime is not None:
                self.not_negative(st.lifetime, "a lifetime")
            for e in stmt_exprs(st):
                for node in subexprs(e):
                    if isinstance(node, n.Call):
                        self.call(node, loops)
                    elif isinstance(node, n.Weighted):
                        self.weighted(node)

    # -- calls
    def call(self, c: n.Call, loops: Sequence[Loop]) -> None:
        f, a = c.func, c.args
        kw = dict(c.kwargs)
        if f in ("malloc", "map"):
            self.size(a[0], loops)
        elif f == "realloc":
            self.size(a[1], loops)
        elif f in ("aligned_alloc", "memalign", "posix_memalign"):
            self.alignment(f, a[0])
            self.size(a[1], loops)
        elif f == "calloc":
            self.calloc(c, loops)
        elif f == "work":
            self.not_negative(a[0], "work's units")
        elif f == "write":
            self.not_negative(a[1], "a write count")
            if "bytes" in kw:
                self.not_negative(kw["bytes"], "write's bytes")
        elif f == "random":
            v = self.const(a[0])
            if v is not None and v < 1:
                self.rep.error(a[0].pos, f"random(n) draws from 0 to n - 1, so n must be at least 1, not {v}")
        elif f == "uniform":
            lo, hi = self.const(a[0]), self.const(a[1])
            if lo is not None and hi is not None and lo > hi:
                self.rep.error(a[0].pos, f"uniform(a, b) needs a <= b, not {lo} > {hi}")
        elif f == "pow2":
            self.pow2(a)
        elif f == "lognormal":
            median, sigma = self.const(kw["median"]), self.const(kw["sigma"])
            if median is not None and median <= 0:
                self.rep.error(kw["median"].pos, f"lognormal median must be above 0, not {median}")
            if sigma is not None and sigma < 0:
                self.rep.error(kw["sigma"].pos, f"lognormal sigma must not be negative, not {sigma}")
        elif f == "geometric":
            mean = self.const(kw["mean"])
            if mean is not None and mean < 1:
                self.rep.error(kw["mean"].pos, f"geometric mean must be at least 1, not {mean}")
        elif f == "histogram":
            self.histogram(a[0])

    def pow2(self, a) -> None:
        lo, hi = self.const(a[0]), self.const(a[1])
        bad = False
        for arg, v in ((a[0], lo), (a[1], hi)):
            if v is not None and not 0 <= v <= MAX_POW2:
                self.rep.error(arg.pos, f"pow2() exponents run from 0 to {MAX_POW2}, not {v}")
                bad = True
        if not bad and lo is not None and hi is not None and lo > hi:
            self.rep.error(a[0].pos, f"pow2(lo, hi) needs lo <= hi, not {lo} > {hi}")

    def calloc(self, c: n.Call, loops) -> None:
        count, size = c.args
        for arg, what in ((count, "calloc's count"), (size, "a size")):
            self.not_negative(arg, what)
        rc, rs = self.ranges.of(count, loops), self.ranges.of(size, loops)
        if rc is None or rs is None or rc[0] < 0 or rs[0] < 0:
            return
        total = rc[1] * rs[1]
        if total > SIZE_MAX:
            self.rep.error(c.pos, f"calloc's count x size can overflow: {rc[1]} x {rs[1]} is more than "
                           "a size can hold (2^64 - 1)")
        else:
            self.too_large(c, (rc[0] * rs[0], total), f"calloc({show(count)}, {show(size)})")

    def alignment(self, f: str, arg) -> None:
        values = [(arg, self.const(arg))]
        if isinstance(arg, n.Call) and arg.func == "choice":
            values = [(x, self.const(x)) for x in arg.args]
        for where, v in values:
            if v is None:
                continue
            if v <= 0 or int(v) != v or int(v) & (int(v) - 1):
                self.rep.error(where.pos, f"an alignment must be a power of two, not {v}")
            elif f == "posix_memalign" and v < SIZEOF_VOID_P:
                self.rep.error(where.pos, f"posix_memalign needs an alignment of at least {SIZEOF_VOID_P} "
                               f"(sizeof(void *)), not {v}")

    def histogram(self, arg: n.Str) -> None:
        try:
            path = resolve_data_path(arg.value, self.base_dir)
        except tables.TableError as exc:
            self.rep.error(arg.pos, f"histogram file {exc}", "keep data files next to the scenario or below it")
            return
        if not path.is_file():
            self.rep.error(arg.pos, f"histogram file {arg.value!r} does not exist (looked for {path})")
            return
        try:
            tables.histogram_table(path)
        except tables.TableError as exc:
            self.rep.error(arg.pos, str(exc))

    def weighted(self, w: n.Weighted) -> None:
        weights = [(e, self.const(e)) for _, e in w.pairs]
        negative = [(e, v) for e, v in weights if v is not None and v < 0]
        for e, v in negative:
            self.rep.error(e.pos, f"a weight must not be negative, not {v}")
        if not negative and weights and all(v == 0 for _, v in weights):
            self.rep.error(w.pos, "every weight is zero, so nothing can be drawn")

    # -- values in a role
    def not_negative(self, e, what: str) -> bool:
        """Report `e` if it is certainly negative somewhere; True when it was."""
        v = self.const(e)
        if v is not None:
            if v < 0:
                self.rep.error(e.pos, f"{what} must not be negative, not {v}")
                return True
            return False
        for where, low in _lowest_bounds(e, self.const):
            if low is not None and low < 0:
                self.rep.error(where.pos, f"{what} must not be negative, but {_draw_name(e)} here can draw {low}")
                return True
        return False

    def size(self, e, loops: Sequence[Loop]) -> None:
        if self.not_negative(e, "a size"):
            return
        r = self.ranges.of(e, loops)
        if r is None:
            return
        if self.too_large(e, r, None):
            return
        if r == (0, 0) and self.const(e) is None:
            self.rep.warning(e.pos, "every size drawn here is 0: each allocation would be empty")

    def too_large(self, e, r: Range, what: Optional[str]) -> bool:
        lo, hi = r
        mem = mem_total()
        if hi > ABSURD_ALLOCATION:
            reason = "more than 1 TiB: surely a mistake"
        elif mem is not None and hi > mem:
            reason = f"more than this machine's {fmt_bytes(mem)}"
        else:
            return False
        where = _highest_bound(e, self.const) if what is None else e
        verb = "asks for" if lo == hi else "can reach"
        self.rep.error(where.pos, f"{what or 'this size'} {verb} {fmt_bytes(hi)} in one allocation, {reason}")
        return True


def _lowest_bounds(e, const):
    """(argument, value) pairs that set a distribution's smallest draw."""
    if isinstance(e, n.Call) and e.func == "uniform":
        return [(e.args[0], const(e.args[0]))]
    if isinstance(e, n.Call) and e.func == "choice":
        return [(a, const(a)) for a in e.args]
    if isinstance(e, n.Weighted):
        return [(v, const(v)) for v, w in e.pairs if const(w) != 0]
    return []


def _highest_bound(e, const):
    """The argument that sets a distribution's largest draw, to point at."""
    if isinstance(e, n.Call) and e.func in ("uniform", "pow2"):
        return e.args[1]
    candidates = []
    if isinstance(e, n.Call) and e.func == "choice":
        candidates = list(e.args)
    elif isinstance(e, n.Weighted):
        candidates = [v for v, _ in e.pairs]
    known = [(const(a), a) for a in candidates if const(a) is not None]
    return max(known, key=lambda t: t[0])[1] if known else e


def _draw_name(e) -> str:
    return f"{e.func}()" if isinstance(e, n.Call) else "weighted { }"
