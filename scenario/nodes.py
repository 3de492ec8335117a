"""The scenario AST: plain, immutable data with a source position on every node.

The parser builds these; checks read them; the compiler turns them into C.
Nothing here knows about lark or about C.
"""

from dataclasses import dataclass, field
from typing import Optional, Tuple, Union


@dataclass(frozen=True)
class Pos:
    line: int
    col: int


NOWHERE = Pos(0, 0)


# ---------------------------------------------------------------- expressions

@dataclass(frozen=True)
class Num:
    value: Union[int, float]
    pos: Pos = NOWHERE


@dataclass(frozen=True)
class Str:
    value: str
    pos: Pos = NOWHERE


@dataclass(frozen=True)
class Name:
    """A param, loop variable, integer or pointer variable, pool, channel or `self`."""
    id: str
    pos: Pos = NOWHERE


@dataclass(frozen=True)
class Index:
    """`objs[i]` (a pool slot) or `inbox[k]` (one channel of an array)."""
    base: Name
    index: "Expr"
    pos: Pos = NOWHERE


@dataclass(frozen=True)
class BinOp:
    op: str  # one of + - * / %
    left: "Expr"
    right: "Expr"
    pos: Pos = NOWHERE


@dataclass(frozen=True)
class Neg:
    operand: "Expr"
    pos: Pos = NOWHERE


@dataclass(frozen=True)
class Call:
    """A call as written; `scenario.builtins` gives it meaning."""
    func: str
    args: Tuple["Expr", ...]
    kwargs: Tuple[Tuple[str, "Expr"], ...]
    pos: Pos = NOWHERE


@dataclass(frozen=True)
class Weighted:
    pairs: Tuple[Tuple["Expr", "Expr"], ...]
    pos: Pos = NOWHERE


Expr = Union[Num, Str, Name, Index, BinOp, Neg, Call, Weighted]


# ----------------------------------------------------------------- statements

@dataclass(frozen=True)
class Assign:
    target: Union[Name, Index]
    value: Expr
    pos: Pos = NOWHERE


@dataclass(frozen=True)
class CallStmt:
    call: Call
    pos: Pos = NOWHERE


@dataclass(frozen=True)
class Lives:
    """`malloc(n) lives L`: freed after L further operations of the thread.

    `lifetime` is None for `lives forever` (freed when the thread ends).
    """
    call: Call
    lifetime: Optional[Expr]
    pos: Pos = NOWHERE


@dataclass(frozen=True)
class Pool:
    name: str
    size: Expr
    pos: Pos = NOWHERE


@dataclass(frozen=True)
class Repeat:
    count: Expr
    body: Tuple["Stmt", ...]
    pos: Pos = NOWHERE


@dataclass(frozen=True)
class For:
    var: str
    start: Expr
    stop: Expr  # exclusive
    body: Tuple["Stmt", ...]
    pos: Pos = NOWHERE


@dataclass(frozen=True)
class Barrier:
    pos: Pos = NOWHERE


@dataclass(frozen=True)
class Measure:
    name: str
    body: Tuple["Stmt", ...]
    pos: Pos = NOWHERE


@dataclass(frozen=True)
class Compare:
    """`a < b`: the condition of an `if`; op is one of == != < <= > >=, or
    "held" for `if held(p)` (p, a pointer variable or pool slot, holds an
    object; `right` is None)."""
    op: str
    left: Expr
    right: Optional[Expr]
    pos: Pos = NOWHERE


@dataclass(frozen=True)
class If:
    """`if a < b { ... } else { ... }`; `orelse` is empty without an else
    (an `else if` is an If alone in `orelse`)."""
    cond: Compare
    then: Tuple["Stmt", ...]
    orelse: Tuple["Stmt", ...]
    pos: Pos = NOWHERE


Stmt = Union[Assign, CallStmt, Lives, Pool, Repeat, For, Barrier, Measure, If]


# --------------------------------------------------------------- declarations

@dataclass(frozen=True)
class Param:
    name: str
    value: Expr
    pos: Pos = NOWHERE


@dataclass(frozen=True)
class Channel:
    name: str
    count: Optional[Expr]  # None: a single channel; else an array of channels
    capacity: Expr
    pos: Pos = NOWHERE


@dataclass(frozen=True)
class Thread:
    name: str
    count: Optional[Expr]  # None: exactly one thread
    body: Tuple[Stmt, ...]
    pos: Pos = NOWHERE
    at_most: Optional[Expr] = None  # `* N at most K`: K alive at once, each ending one replaced


@dataclass(frozen=True)
class SharedPool:
    """`shared pool transfer[N]`: N slots every thread can swap objects in and out of."""
    name: str
    size: Expr
    pos: Pos = NOWHERE


@dataclass(frozen=True)
class Replay:
    """`replay "app.ops"`: threads and calls come from a converted trace."""
    path: str
    pos: Pos = NOWHERE


#: `touch_new MODE`, in the order of runtime/ops.h's SCN_TOUCH_* (and of an ops file's touch modes).
TOUCH_NEW_MODES = ("none", "first", "pages", "all")

#: `leaks MODE`: what becomes of what a thread still holds when it ends (docs/language.md, "Leaks").
LEAKS_MODES = ("warn", "free", "keep")


@dataclass(frozen=True)
class Scenario:
    name: str
    seed: Optional[Expr]
    params: Tuple[Param, ...]
    channels: Tuple[Channel, ...]
    threads: Tuple[Thread, ...]
    replays: Tuple[Replay, ...] = ()
    leaks: str = "warn"  # "warn": report pointers live at the end; "free": free them; "keep": keep them, unsaid
    shared: Tuple[SharedPool, ...] = ()
    touch_new: str = "none"  # what every new block gets: none, first (its two ends), pages (a byte a page), all
    filename: str = "<scenario>"
    source: str = field(default="", repr=False, compare=False)
