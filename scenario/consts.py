"""Arithmetic on constants: what an expression of numbers and params is worth before the run.

Name resolution (param values, thread counts) and the checks (loop counts)
both need it; it depends on the syntax tree only.
"""

from typing import Mapping, Optional, Union

from . import nodes as n
from .errors import Reporter

Number = Union[int, float]


class NotConstant(Exception):
    """Raised by `const_value` for an expression only known at run time."""


def const_value(expr: n.Expr, env: Mapping[str, Number], rep: Optional[Reporter] = None) -> Number:
    """Evaluate an expression made of numbers and params, as C would (integer division truncates)."""
    if isinstance(expr, n.Num):
        return expr.value
    if isinstance(expr, n.Name) and expr.id in env:
        return env[expr.id]
    if isinstance(expr, n.Neg):
        return -const_value(expr.operand, env, rep)
    if isinstance(expr, n.BinOp):
        a, b = const_value(expr.left, env, rep), const_value(expr.right, env, rep)
        if expr.op in "/%" and b == 0:
            if rep is not None:
                raise rep.fail(expr.pos, "division by zero")
            raise NotConstant()
        if expr.op == "+":
            return a + b
        if expr.op == "-":
            return a - b
        if expr.op == "*":
            return a * b
        if isinstance(a, int) and isinstance(b, int):
            q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
            return q if expr.op == "/" else a - q * b
        return a / b if expr.op == "/" else a % b
    raise NotConstant()
