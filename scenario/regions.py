"""`measure` regions that cost a noticeable share of what they measure.

An entry into a region reads a clock twice (runtime/ops.h; about 10-25 ns in
all, docs/probes.md, bench/bench_measure.py). Around a loop that is nothing;
inside a loop of short iterations it is a share of every iteration, the same
under every allocator, which makes allocators look closer than they are. The
check warns when a region is entered many times and its body's estimated
work is short next to an entry's cost, and says the share.

The estimate is a lower bound of the body's work from what has a known cost
(allocator calls, draws, writes of a known number of bytes, loops of a known
count); a body with something that may take any time (a channel operation, a
barrier, a write of a whole block, a loop of unknown count) is not judged.
"""

from typing import Mapping, Optional, Sequence

from . import nodes as n
from .builtins import ALLOCATOR_OPS, BUILTINS
from .consts import Number
from .errors import Reporter
from .resolve import Resolved
from .walk import branch_of, const_or_none, executions, loop_of, stmt_exprs, subexprs, walk

ENTRY_NS = 15          # two clock reads and their bookkeeping (bench/bench_measure.py: 10-25 ns)
CALL_NS = 15           # an allocator call on its fast path (5-20 ns for small blocks)
DRAW_NS = 2            # a random draw (bench/bench_overhead.py's draw costs)
WRITE_BYTES_PER_NS = 32
MANY_ENTRIES = 1000    # per thread: fewer entries cost little in all, whatever the share
WARN_SHARE = 0.05


def check(resolved: Resolved, rep: Reporter) -> None:
    seen = set()
    for group in resolved.groups:
        for st, loops in walk(group.node.body, resolved.params):
            if not isinstance(st, n.Measure) or st.pos in seen:
                continue
            around = [lp for lp in loops if isinstance(lp.node, (n.Repeat, n.For))]
            if not around:
                continue
            entries = executions(around)
            if entries is not None and entries < MANY_ENTRIES:
                continue
            work = body_ns(st.body, resolved.params)
            if work is None:
                continue
            share = ENTRY_NS / (ENTRY_NS + work)
            if share < WARN_SHARE:
                continue
            seen.add(st.pos)
            times = f"{entries:,} times per thread" if entries is not None else "in a loop"
            rep.warning(
                st.pos,
                f'measure "{st.name}" is entered {times}, each time around about {work:.0f} ns of work; '
                f"its two clock reads (about {ENTRY_NS} ns an entry) are about {share:.0%} of the time "
                f"inside it, the same under every allocator (allocators look closer than they are)",
                hint="to time the loop, put the `measure` around the `repeat` or `for` "
                     "(one entry); what an entry costs is in docs/probes.md")


def body_ns(body: Sequence, params: Mapping[str, Number]) -> Optional[float]:
    """A lower bound of the work of one run of `body`, in ns; None when it may take any time."""
    total = 0.0
    for st in body:
        cost = stmt_ns(st, params)
        if cost is None:
            return None
        total += cost
    return total


def stmt_ns(st, params: Mapping[str, Number]) -> Optional[float]:
    if isinstance(st, n.Barrier):
        return None
    if isinstance(st, (n.Repeat, n.For)):
        count = loop_of(st, params).count
        inner = body_ns(st.body, params)
        return None if count is None or inner is None else count * inner
    if isinstance(st, n.Measure):
        inner = body_ns(st.body, params)
        return None if inner is None else ENTRY_NS + inner
    own = 0.0
    for e in stmt_exprs(st):
        for node in subexprs(e):
            cost = expr_ns(node, params)
            if cost is None:
                return None
            own += cost
    if isinstance(st, n.Lives):
        own += CALL_NS  # the free the clock makes later
    if isinstance(st, n.If):
        branches = []
        for branch, block in ((True, st.then), (False, st.orelse)):
            if branch_of(st, branch, params).count == 0:
                continue  # known not to run
            branches.append(body_ns(block, params))
        if any(b is None for b in branches):
            return None
        own += min(branches, default=0.0)
    return own


def expr_ns(node, params: Mapping[str, Number]) -> Optional[float]:
    if isinstance(node, n.Weighted):
        return DRAW_NS
    if not isinstance(node, n.Call):
        return 0.0
    if node.func in ALLOCATOR_OPS:
        return CALL_NS
    builtin = BUILTINS.get(node.func)
    if builtin is not None and builtin.role == "dist":
        return DRAW_NS
    if node.func == "write":
        times = const_or_none(node.args[1], params) if len(node.args) > 1 else None
        size = dict(node.kwargs).get("bytes")
        size = const_or_none(size, params) if size is not None else None
        if times is None or size is None:
            return None  # a whole block, or a count known only at run time
        return max(0.0, float(times)) * max(0.0, float(size)) / WRITE_BYTES_PER_NS
    return None  # recv, send, swap, free_all, touch: may take any time
