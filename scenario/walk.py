"""Walking a thread body: each statement with the loops around it, each call in it.

The checks all need the same two things: how many times a statement runs
(the product of its enclosing loop counts, when those are constants) and the
calls nested in its expressions, in the order C evaluates them after lowering.
"""

from dataclasses import dataclass
from typing import Iterator, Mapping, Optional, Sequence, Tuple

from . import nodes as n
from .consts import NotConstant, Number, const_value


@dataclass(frozen=True)
class Loop:
    """One enclosing `repeat` or `for`, as far as it is known before the run.

    A branch of an `if` is one too, run once or never: `node` is the n.If,
    `branch` says which side (True: the `then` block), and `count` is 1 or 0
    when the condition is known before the run, else None.
    """
    node: object                 # n.Repeat, n.For or n.If
    count: Optional[int]         # exact number of iterations, None when only known at run time
    var: Optional[str] = None    # the variable of a `for`
    branch: Optional[bool] = None

    @property
    def runs_at_least_once(self) -> bool:
        return self.count is not None and self.count > 0

    @property
    def at_most(self) -> Optional[int]:
        """An upper bound of the iterations: a branch runs at most once."""
        return self.count if self.count is not None or self.branch is None else 1


def const_or_none(expr: n.Expr, params: Mapping[str, Number]) -> Optional[Number]:
    try:
        return const_value(expr, params)
    except NotConstant:
        return None


def condition_holds(cond: n.Compare, env: Mapping[str, Number]) -> Optional[bool]:
    """The value of a comparison when its sides are known from `env`, else None."""
    if cond.right is None:
        return None  # held(p): known only at run time
    left, right = const_or_none(cond.left, env), const_or_none(cond.right, env)
    if left is None or right is None:
        return None
    return {"==": left == right, "!=": left != right, "<": left < right, "<=": left <= right,
            ">": left > right, ">=": left >= right}[cond.op]


def branch_of(st: n.If, branch: bool, params: Mapping[str, Number]) -> Loop:
    holds = condition_holds(st.cond, params)
    return Loop(st, None if holds is None else int(holds == branch), branch=branch)


def loop_of(st, params: Mapping[str, Number]) -> Loop:
    if isinstance(st, n.Repeat):
        count = const_or_none(st.count, params)
        return Loop(st, None if count is None else max(0, int(count)))
    start, stop = const_or_none(st.start, params), const_or_none(st.stop, params)
    count = None if start is None or stop is None else max(0, int(stop) - int(start))
    return Loop(st, count, st.var)


def walk(stmts: Sequence, params: Mapping[str, Number],
         loops: Tuple[Loop, ...] = ()) -> Iterator[Tuple[object, Tuple[Loop, ...]]]:
    """Every statement, depth first in source order, with the loops that enclose it."""
    for st in stmts:
        yield st, loops
        if isinstance(st, (n.Repeat, n.For)):
            yield from walk(st.body, params, loops + (loop_of(st, params),))
        elif isinstance(st, n.Measure):
            yield from walk(st.body, params, loops)
        elif isinstance(st, n.If):
            yield from walk(st.then, params, loops + (branch_of(st, True, params),))
            yield from walk(st.orelse, params, loops + (branch_of(st, False, params),))


def executions(loops: Sequence[Loop]) -> Optional[int]:
    """How many times a statement runs per thread; None when a count is only known at run time."""
    return _product(loop.count for loop in loops)


def executions_at_most(loops: Sequence[Loop]) -> Optional[int]:
    """An upper bound of `executions`: a branch of an unknown `if` counts as run."""
    return _product(loop.at_most for loop in loops)


def _product(counts) -> Optional[int]:
    total = 1
    for count in counts:
        if count is None:
            return None
        total *= count
    return total


def stmt_exprs(st) -> Tuple[n.Expr, ...]:
    """The expressions a statement evaluates itself (not those of a loop body)."""
    if isinstance(st, n.Assign):
        return (st.value,) + ((st.target.index,) if isinstance(st.target, n.Index) else ())
    if isinstance(st, n.CallStmt):
        return (st.call,)
    if isinstance(st, n.Lives):
        return (st.call,) + ((st.lifetime,) if st.lifetime is not None else ())
    if isinstance(st, n.Pool):
        return (st.size,)
    if isinstance(st, n.Repeat):
        return (st.count,)
    if isinstance(st, n.For):
        return (st.start, st.stop)
    if isinstance(st, n.If):
        return tuple(e for e in (st.cond.left, st.cond.right) if e is not None)
    return ()


def calls_in(expr) -> Iterator[n.Call]:
    """Calls nested in an expression, arguments before the call that uses them."""
    return (e for e in subexprs(expr) if isinstance(e, n.Call))


def scenario_calls(resolved) -> Iterator[n.Call]:
    """Every call in the bodies of all thread groups of a resolved scenario."""
    return (c for g in resolved.groups for st, _loops in walk(g.node.body, resolved.params)
            for e in stmt_exprs(st) for c in calls_in(e))


def names_in(expr) -> Iterator[str]:
    """The names an expression reads, in source order (an index's base is not one: see `children`)."""
    return (e.id for e in subexprs(expr) if isinstance(e, n.Name))


def show(expr) -> str:
    """An expression as the user would write it, for messages."""
    if isinstance(expr, n.Num):
        return str(expr.value)
    if isinstance(expr, n.Str):
        return f'"{expr.value}"'
    if isinstance(expr, n.Name):
        return expr.id
    if isinstance(expr, n.Index):
        return f"{expr.base.id}[{show(expr.index)}]"
    if isinstance(expr, n.Neg):
        return f"-{show(expr.operand)}"
    if isinstance(expr, n.BinOp):
        return f"{show(expr.left)} {expr.op} {show(expr.right)}"
    if isinstance(expr, n.Call):
        return f"{expr.func}(...)"
    return "weighted { ... }"


def children(expr) -> Tuple[n.Expr, ...]:
    """The expressions directly inside one, in source order.

    The base of an index (`objs` in `objs[i]`) names a pool or a channel
    array: it is not evaluated on its own, so it is not a child.
    """
    if isinstance(expr, n.BinOp):
        return (expr.left, expr.right)
    if isinstance(expr, n.Neg):
        return (expr.operand,)
    if isinstance(expr, n.Index):
        return (expr.index,)
    if isinstance(expr, n.Call):
        return tuple(expr.args) + tuple(a for _, a in expr.kwargs)
    if isinstance(expr, n.Weighted):
        return tuple(e for pair in expr.pairs for e in pair)
    return ()


def subexprs(expr, parents_first: bool = False) -> Iterator[n.Expr]:
    """Every node of an expression, children before parents (or parents first)."""
    if parents_first:
        yield expr
    for child in children(expr):
        yield from subexprs(child, parents_first)
    if not parents_first:
        yield expr
