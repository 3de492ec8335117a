"""The values an integer expression can take in a thread, as an interval [lo, hi].

Params are known after overrides, `self` runs over the group, a `for` variable
over its bounds, a distribution over its support (tables from
compiler/distributions.py), and an integer variable over the hull of everything ever
assigned to it (it starts at 0). None means "not known before the run".
"""

import functools
from pathlib import Path
from typing import Dict, Mapping, Optional, Sequence, Tuple

from ..compiler import distributions as tables
from ..compiler.lower import resolve_data_path
from . import nodes as n
from .resolve import INT, LOOP, Resolved, ThreadGroup
from .walk import Loop, const_or_none, walk

Range = Tuple[float, float]

MAX_POW2 = 40  # 2^40 = 1 TiB, the largest single allocation the checks accept


def scenario_dir(resolved: Resolved) -> Path:
    """The folder data files are relative to (as compiler/pipeline.py resolves them)."""
    name = resolved.scenario.filename
    if not name or name.startswith("<"):
        return Path.cwd()
    return Path(name).resolve().parent


def table_for(expr, params: Mapping[str, object], base_dir: Path):
    """The table the compiler would build for a table draw; raises tables.TableError."""
    def const(e):
        value = const_or_none(e, params)
        if value is None:
            raise tables.TableError("the distribution's values are not known before the run")
        return value

    if isinstance(expr, n.Weighted):
        return _cached_table(("weighted", tuple((const(v), const(w)) for v, w in expr.pairs)))
    if expr.func == "choice":
        return _cached_table(("choice", tuple(const(a) for a in expr.args)))
    kw = dict(expr.kwargs)
    if expr.func == "lognormal":
        return _cached_table(("lognormal", const(kw["median"]), const(kw["sigma"])))
    if expr.func == "geometric":
        return _cached_table(("geometric", const(kw["mean"])))
    if expr.func == "histogram":
        # Read each time: the file may change between two checks in one process (tabulated once per content).
        return tables.histogram_table(resolve_data_path(expr.args[0].value, base_dir))
    raise ValueError(expr.func)


@functools.lru_cache(maxsize=256)
def _cached_table(key):
    kind = key[0]
    if kind == "weighted":
        return tables.alias_table(key[1])
    if kind == "choice":
        return tables.alias_table([(v, 1) for v in key[1]])
    if kind == "lognormal":
        return tables.lognormal_table(key[1], key[2])
    return tables.geometric_table(key[1])


class Ranges:
    """Intervals of integer expressions inside one thread group."""

    def __init__(self, resolved: Resolved, group: ThreadGroup, base_dir: Optional[Path] = None):
        self.params = resolved.params
        self.group = group
        self.base_dir = base_dir or scenario_dir(resolved)
        self.int_vars: Dict[str, Optional[Range]] = {}
        self._int_var_hulls()

    def of(self, expr, loops: Sequence[Loop] = ()) -> Optional[Range]:
        if isinstance(expr, n.Num):
            return (expr.value, expr.value)
        if isinstance(expr, n.Name):
            return self._name(expr.id, loops)
        if isinstance(expr, n.Neg):
            r = self.of(expr.operand, loops)
            return None if r is None else (-r[1], -r[0])
        if isinstance(expr, n.BinOp):
            return self._binop(expr, loops)
        if isinstance(expr, (n.Call, n.Weighted)):
            return self._draw(expr, loops)
        return None

    def _name(self, name: str, loops) -> Optional[Range]:
        if name in self.params:
            v = self.params[name]
            return (v, v)
        if name == "self":
            return (0, self.group.count - 1)
        for loop in reversed(loops):
            if loop.var == name:
                lo = self.of(loop.node.start, loops[:loops.index(loop)])
                hi = self.of(loop.node.stop, loops[:loops.index(loop)])
                if lo is None or hi is None or hi[1] - 1 < lo[0]:
                    return None
                return (lo[0], hi[1] - 1)
        return self.int_vars.get(name)

    def _binop(self, e: n.BinOp, loops) -> Optional[Range]:
        a, b = self.of(e.left, loops), self.of(e.right, loops)
        if a is None or b is None:
            return None
        if e.op == "+":
            return (a[0] + b[0], a[1] + b[1])
        if e.op == "-":
            return (a[0] - b[1], a[1] - b[0])
        if e.op == "*":
            corners = [x * y for x in a for y in b]
            return (min(corners), max(corners))
        if b[0] <= 0 <= b[1]:
            return None  # a division by zero is the runtime's to report
        if e.op == "/":
            corners = [_c_div(x, y) for x in a for y in b]
            return (min(corners), max(corners))
        if a[0] == a[1] and b[0] == b[1]:
            return (a[0] - _c_div(a[0], b[0]) * b[0],) * 2
        if a[0] >= 0 and b[0] > 0:
            return (0, min(a[1], b[1] - 1))
        return None

    def _draw(self, e, loops) -> Optional[Range]:
        if isinstance(e, n.Call) and e.func in ("random", "uniform", "pow2"):
            args = [self.of(a, loops) for a in e.args]
            if None in args:
                return None
            if e.func == "random":
                return (0, args[0][1] - 1) if args[0][1] >= 1 else None
            if e.func == "uniform":
                return (args[0][0], args[1][1]) if args[0][0] <= args[1][1] else None
            lo, hi = args[0][0], args[1][1]
            if not 0 <= lo <= hi <= MAX_POW2:
                return None
            return (1 << int(lo), 1 << int(hi))
        if isinstance(e, n.Weighted) or e.func in ("choice", "lognormal", "geometric", "histogram"):
            try:
                t = table_for(e, self.params, self.base_dir)
            except tables.TableError:
                return None
            return (t.min_value, t.max_value)
        return None  # allocations and recv give pointers, not numbers

    def _int_var_hulls(self) -> None:
        """Each integer variable's hull over its assignments, widened to None if it keeps growing.

        A `for` variable is also a plain integer outside its loop (the
        resolver allows `i = random(n)` after `for i in ...`); there it may
        still hold any value the loop gave it, up to the loop's end.
        """
        kinds = (INT, LOOP)
        sources = []  # (name, expressions for its lowest and highest value, loops around them)
        for st, loops in walk(self.group.node.body, self.params):
            if isinstance(st, n.Assign) and isinstance(st.target, n.Name) \
                    and self.group.symbols.get(st.target.id) in kinds:
                sources.append((st.target.id, st.value, st.value, loops))
            elif isinstance(st, n.For):
                sources.append((st.var, st.start, st.stop, loops))
        self.int_vars = {name: (0, 0) for name, _, _, _ in sources}
        for _ in range(6):
            changed = False
            for name, low, high, loops in sources:
                old = self.int_vars[name]
                if old is None:
                    continue
                lo, hi = self.of(low, loops), self.of(high, loops)
                new = None if lo is None or hi is None else (min(old[0], lo[0]), max(old[1], hi[1]))
                if new != old:
                    self.int_vars[name], changed = new, True
            if not changed:
                return
        for name, low, high, loops in sources:  # still growing (n = n * 2 in a loop): unknown
            lo, hi, old = self.of(low, loops), self.of(high, loops), self.int_vars[name]
            if lo is None or hi is None or old is None or lo[0] < old[0] or hi[1] > old[1]:
                self.int_vars[name] = None


def _c_div(a, b):
    """Division as C does it on integers (towards zero); plain division on fractions."""
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return a / b
