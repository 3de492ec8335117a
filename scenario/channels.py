"""Channel traffic: every `recv` needs a `send`, and what is sent must be received.

Counts are known before the run when the repeat counts, `for` bounds and
thread counts are constants (params are, after overrides). A statement runs
threads x (product of the enclosing loop counts) times. In a channel array,
an index made of `self`, `for` variables and params is evaluated for every
thread and iteration, so each channel of the array is counted on its own;
any other index (a random draw, an integer variable) only lets the array be
counted as a whole. The branches of an `if` whose condition is made of the
same things are counted the same way (`if self >= 2 { recv(heir[self % 2]) }`);
a statement under any other condition is not counted (nothing is then said
about its channel). Ordering (who waits for whom at a barrier) is not
modelled: only totals.
"""

import itertools
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from . import nodes as n
from .errors import Reporter
from .consts import NotConstant, const_value
from .resolve import Resolved, ThreadGroup
from .walk import Loop, calls_in, condition_holds, executions, names_in, show, stmt_exprs, subexprs, walk

MAX_ENUMERATION = 100_000


@dataclass
class _Op:
    kind: str                            # "send" or "recv"
    call: n.Call
    channel: str
    total: Optional[int]                 # times it runs, all threads of its group together
    per_channel: Optional[Dict[int, int]]  # channel arrays: the same, by channel index


def check(resolved: Resolved, rep: Reporter) -> None:
    ops = [op for g in resolved.groups for op in _ops(resolved, g, rep)]
    for name, info in resolved.channels.items():
        mine = [op for op in ops if op.channel == name]
        sends = [op for op in mine if op.kind == "send"]
        recvs = [op for op in mine if op.kind == "recv"]
        if recvs and not sends:
            for op in recvs:
                if op.total != 0:
                    where = name if info.count is None else f"any channel of {name}"
                    rep.error(op.call.pos, f"nobody sends to {where}: this recv would wait forever")
            continue
        if sends and not recvs and any(op.total is None for op in sends):
            rep.warning(sends[0].call.pos, f"nothing receives from {name}: every object sent to it stays "
                        "allocated")
            continue
        if info.count is not None and all(op.per_channel is not None for op in mine):
            _compare_each(name, info.count, info.capacity, sends, recvs, rep)
        else:
            total_capacity = info.capacity * (info.count or 1)
            label = name if info.count is None else f"the channels of {name}"
            _compare(label, _sum(op.total for op in sends), _sum(op.total for op in recvs),
                     total_capacity, sends, recvs, rep)


def _ops(resolved: Resolved, group: ThreadGroup, rep: Reporter) -> List[_Op]:
    out = []
    for st, loops in walk(group.node.body, resolved.params):
        for e in stmt_exprs(st):
            for call in calls_in(e):
                if call.func not in ("send", "recv"):
                    continue
                chan = call.args[0]
                # Branches whose condition is only known per thread or iteration
                # are counted by enumerating it, like a channel index.
                open_ifs = [lp for lp in loops if lp.branch is not None and lp.count is None]
                runs = executions([lp for lp in loops if lp not in open_ifs])
                total = None if runs is None else runs * group.count
                if isinstance(chan, n.Name):
                    if open_ifs:
                        total, _ = _enumerate(None, 1, total, open_ifs, group, loops, resolved, rep)
                    out.append(_Op(call.func, call, chan.id, total, None))
                else:
                    count = resolved.channels[chan.base.id].count
                    total, per = _enumerate(chan, count, total, open_ifs, group, loops, resolved, rep)
                    out.append(_Op(call.func, call, chan.base.id, total, per))
    return out


def _enumerate(chan: Optional[n.Index], count: int, total: Optional[int], open_ifs: Sequence[Loop],
               group: ThreadGroup, loops: Sequence[Loop], resolved: Resolved,
               rep: Reporter) -> Tuple[Optional[int], Optional[Dict[int, int]]]:
    """How many times a send or recv runs in all, and on each channel of an array (`chan`).

    Only when the channel index and the conditions of the branches around it
    (`open_ifs`) are made of `self`, `for` variables and params, so that they
    can be evaluated for every thread and iteration; otherwise (None, None).
    """
    if total is None:
        return None, None
    unknown = (None if open_ifs else total), None  # an array counted as a whole, if no branch is open
    if any(lp.node.cond.right is None for lp in open_ifs):
        return unknown  # held(p): known only at run time
    exprs = [e for lp in open_ifs for e in (lp.node.cond.left, lp.node.cond.right)]
    if chan is not None:
        exprs.append(chan.index)
    axes = []  # (name, values) the index and the conditions depend on
    for name in sorted({x for e in exprs for x in names_in(e)}):
        if name in resolved.params:
            continue
        if name == "self":
            axes.append((name, range(group.count)))
            continue
        loop = next((lp for lp in reversed(loops) if lp.var == name), None)
        if loop is None or loop.count is None:
            return unknown  # an integer variable or a draw: any channel, any branch
        start = int(const_value(loop.node.start, resolved.params))
        axes.append((name, range(start, start + loop.count)))
    if any(not isinstance(x, (n.Num, n.Name, n.BinOp, n.Neg)) for e in exprs for x in subexprs(e)):
        return unknown
    combos = 1
    for _, values in axes:
        combos *= len(values)
    if combos > MAX_ENUMERATION:
        return unknown
    per: Dict[int, int] = {}
    if combos == 0:
        return 0, per
    each = total // combos
    runs = 0
    for values in itertools.product(*(v for _, v in axes)):
        env = dict(resolved.params)
        env.update(zip((a for a, _ in axes), values))
        try:
            if any(condition_holds(lp.node.cond, env) != lp.branch for lp in open_ifs):
                continue
            i = int(const_value(chan.index, env)) if chan is not None else 0
        except (NotConstant, ZeroDivisionError):
            return unknown
        if not 0 <= i < count:
            when = ", ".join(f"{a} = {v}" for a, v in zip((a for a, _ in axes), values))
            rep.error(chan.index.pos, f"{show(chan)} is out of range{' when ' + when if when else ''}: "
                      f"{chan.base.id} has {count} channels (0 .. {count - 1})")
            return unknown
        per[i] = per.get(i, 0) + each
        runs += each
    return runs, (per if chan is not None else None)


def _compare_each(name: str, count: int, capacity: int, sends, recvs, rep: Reporter) -> None:
    """Channel by channel; one message per kind of mistake, naming the first channel."""
    found: Dict[str, List[int]] = {}
    for i in range(count):
        s = sum(op.per_channel.get(i, 0) for op in sends)
        r = sum(op.per_channel.get(i, 0) for op in recvs)
        kind = _mismatch(s, r, capacity)
        if kind:
            found.setdefault(kind, []).append(i)
    for kind, indexes in found.items():
        i = indexes[0]
        more = f" (and {len(indexes) - 1} more channels of {name})" if len(indexes) > 1 else ""
        here_s = [op for op in sends if op.per_channel.get(i)] or sends
        here_r = [op for op in recvs if op.per_channel.get(i)] or recvs
        s = sum(op.per_channel.get(i, 0) for op in sends)
        r = sum(op.per_channel.get(i, 0) for op in recvs)
        _report(kind, f"{name}[{i}]", s, r, capacity, here_s, here_r, rep, more)


def _compare(label, s, r, capacity, sends, recvs, rep: Reporter) -> None:
    if s is None or r is None:
        return
    kind = _mismatch(s, r, capacity)
    if kind:
        _report(kind, label, s, r, capacity, sends, recvs, rep, "")


def _mismatch(s: int, r: int, capacity: int) -> Optional[str]:
    if r > s:
        return "starve"
    if s > r + capacity:
        return "block"
    if s > r:
        return "leftover"
    return None


def _report(kind, label, s, r, capacity, sends, recvs, rep: Reporter, more: str) -> None:
    if kind == "starve":
        have = f"only {s} send" if s else "no send"
        rep.error(recvs[0].call.pos, f"recv on {label} would wait forever: {r} recv but {have}{more}")
    elif kind == "block":
        rep.error(sends[0].call.pos, f"send on {label} would block forever: {s} send but only {r} recv "
                  f"and a capacity of {capacity}{more}")
    else:
        left = s - r
        rep.warning(sends[0].call.pos, f"{left} object{'s' * (left != 1)} sent to {label} "
                    f"{'are' if left != 1 else 'is'} never received and stay{'s' * (left == 1)} allocated "
                    f"({s} send, {r} recv){more}")


def _sum(values) -> Optional[int]:
    total = 0
    for v in values:
        if v is None:
            return None
        total += v
    return total
