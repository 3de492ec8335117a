"""Pointer-state dataflow, one thread group at a time.

A pointer variable is unassigned, live, freed or moved (sent to a channel,
realloc'ed into another name, copied by `q = p`: compiler/lower.py clears the
source in each case). The analysis keeps, for every variable, the set of states
it may be in with where each came from, joins them where paths meet, and runs a
loop body to a fixpoint: a body may run zero or many times unless its count is
a positive constant. Both branches of an `if` whose condition is only known at
run time are followed and joined, so "may" means "depending on how many times
a loop has run or which branches were taken".

A shared pool is every thread's at once, so nothing is known about its slots:
`swap` hands back an object or nothing, and the variable it lands in counts as
live (freeing an empty one is a harmless free(NULL); keeping it, a leak).

A mapping (`m = map(n)`) is followed like a pointer: unmapping it twice, using
it once unmapped and leaving it mapped at the thread's end are the same
mistakes as for a heap block, said in its own words (`unmap`, "mapped").

Pools hold many slots that an index chosen at run time picks; the runtime
checks indexes, and per-slot tracking is impossible in general, so a pool is
only ever blamed when every path emptied it with free_all. What the analysis
learns about leaks (overwritten live objects, pool slots that may be
overwritten, objects dropped on the floor) is also handed to the peak
estimate.
"""

from dataclasses import dataclass, field, replace
from typing import Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

from . import nodes as n
from .errors import Reporter
from .resolve import HOLDERS, MAP, POOL, Resolved, ThreadGroup
from .walk import condition_holds, const_or_none, loop_of, names_in, scenario_calls, show, walk

# Pointer variables. NOTHING: known to hold nothing (the other side of `if held(p)`),
# where using it is harmless (free(NULL), a write of nothing) and nothing leaks.
UNSET, LIVE, FREED, MOVED, NOTHING = "unassigned", "live", "freed", "moved", "empty"
# Pools, as a whole.
EMPTY, FILLED, SOME, CLEARED = "empty", "filled", "partly emptied", "cleared"

ALLOCATORS = ("malloc", "calloc", "aligned_alloc", "memalign", "posix_memalign")


@dataclass(frozen=True)
class Fact:
    atom: str
    pos: n.Pos
    how: str = ""  # for a move: "sent to q", "realloc'ed into r", "copied to r"


Facts = FrozenSet[Fact]


def _in_order(facts: Iterable[Fact], atom: Optional[str] = None) -> List[Fact]:
    """The facts (of one state) in source order, so messages name the earliest line first."""
    return sorted((f for f in facts if atom is None or f.atom == atom),
                  key=lambda f: (f.pos.line, f.pos.col, f.atom, f.how))


@dataclass(frozen=True)
class State:
    ptrs: Tuple[Tuple[str, Facts], ...]
    pools: Tuple[Tuple[str, Facts], ...]
    # (pool, index as written) of slots known to hold nothing right now, e.g.
    # just after `free(objs[i])`; dropped when a name in the index changes.
    empty_slots: FrozenSet[Tuple[str, str, FrozenSet[str]]] = frozenset()

    def ptr(self, name: str) -> Facts:
        return dict(self.ptrs)[name]

    def pool(self, name: str) -> Facts:
        return dict(self.pools).get(name, frozenset({Fact(EMPTY, n.NOWHERE)}))

    def with_ptr(self, name: str, facts: Iterable[Fact]) -> "State":
        d = dict(self.ptrs)
        d[name] = frozenset(facts)
        return replace(self, ptrs=tuple(sorted(d.items())))

    def with_pool(self, name: str, facts: Iterable[Fact]) -> "State":
        d = dict(self.pools)
        d[name] = frozenset(facts)
        return replace(self, pools=tuple(sorted(d.items())))

    def with_empty_slot(self, pool: str, index: n.Expr, empty: bool) -> "State":
        key = (pool, show(index), frozenset(names_in(index)))
        slots = self.empty_slots | {key} if empty else self.empty_slots - {key}
        return replace(self, empty_slots=frozenset(slots))

    def slot_known_empty(self, pool: str, index: n.Expr) -> bool:
        return (pool, show(index), frozenset(names_in(index))) in self.empty_slots

    def forget_slots(self, names: Set[str] = frozenset(), pool: Optional[str] = None) -> "State":
        """Slots whose index uses a changed name (or in a pool emptied wholesale) are no longer known."""
        keep = frozenset(k for k in self.empty_slots if not (k[2] & names) and k[0] != pool)
        return replace(self, empty_slots=keep)

    def join(self, other: "State") -> "State":
        def merge(a, b):
            da, db = dict(a), dict(b)
            return tuple(sorted((k, da.get(k, frozenset()) | db.get(k, frozenset()))
                                for k in set(da) | set(db)))
        return State(merge(self.ptrs, other.ptrs), merge(self.pools, other.pools),
                     self.empty_slots & other.empty_slots)


@dataclass
class FlowFacts:
    """What one group's analysis found out about leaks, for the peak estimate (by node id)."""
    overwrites: Set[int] = field(default_factory=set)          # Assign: target may still hold an object
    unsafe_slot_assigns: Set[int] = field(default_factory=set)  # Assign: pool slot may still hold one
    lost: Set[int] = field(default_factory=set)                 # Call: object nothing keeps
    live_at_end: Set[str] = field(default_factory=set)          # pointer variables and pools


def analyze(resolved: Resolved, rep: Reporter) -> Dict[int, FlowFacts]:
    """Report pointer misuse and leaks for every thread group; facts by id(group)."""
    _shared_leaks(resolved, rep)
    return {id(g): _ThreadFlow(resolved, g, rep).run() for g in resolved.groups}


def _shared_leaks(resolved: Resolved, rep: Reporter) -> None:
    """A shared pool that no thread empties with free_all keeps whatever is in it at the end."""
    calls = list(scenario_calls(resolved))
    emptied = {c.args[0].id for c in calls if c.func == "free_all"}
    swapped = {c.args[0].base.id for c in calls if c.func == "swap"}
    for sp in resolved.scenario.shared:
        if sp.name in swapped and sp.name not in emptied:
            rep.warning(sp.pos, f"shared pool {sp.name} may still hold objects when the program ends; "
                        f"a last thread should free_all({sp.name})",
                        f"thread cleanup {{ barrier  free_all({sp.name}) }} waits for every other thread")


class _ThreadFlow:
    def __init__(self, resolved: Resolved, group: ThreadGroup, rep: Reporter):
        self.r = resolved
        self.g = group
        self.rep = rep
        self.params = resolved.params
        self.facts = FlowFacts()
        self.quiet = 0  # > 0 while a loop body is run towards its fixpoint
        self.seen: Set[Tuple[n.Pos, str]] = set()

    def run(self) -> FlowFacts:
        ptrs = sorted(k for k, v in self.g.symbols.items() if v in HOLDERS)
        start = State(tuple((p, frozenset({Fact(UNSET, self.g.node.pos)})) for p in ptrs), ())
        end = self.block(self.g.node.body, start)
        self.thread_end(end)
        return self.facts

    # -- reporting, only on the final pass over a loop body
    def error(self, pos, message, hint=None):
        if not self.quiet and (pos, message) not in self.seen:
            self.seen.add((pos, message))
            self.rep.error(pos, message, hint)

    def warning(self, pos, message, hint=None):
        if not self.quiet and (pos, message) not in self.seen:
            self.seen.add((pos, message))
            self.rep.warning(pos, message, hint)

    def note(self, bucket: Set[int], node) -> None:
        if not self.quiet:
            bucket.add(id(node))

    # -- statements
    def block(self, stmts, s: State) -> State:
        for st in stmts:
            s = self.stmt(st, s)
        return s

    def stmt(self, st, s: State) -> State:
        if isinstance(st, n.Assign):
            return self.assign(st, s)
        if isinstance(st, n.CallStmt):
            return self.action(st.call, s)
        if isinstance(st, n.Pool):
            return s.with_pool(st.name, {Fact(EMPTY, st.pos)}).forget_slots(pool=st.name)
        if isinstance(st, (n.Repeat, n.For)):
            return self.loop(st, s)
        if isinstance(st, n.Measure):
            return self.block(st.body, s)
        if isinstance(st, n.If):
            return self.branches(st, s)
        if isinstance(st, n.Lives):
            # The object is the `lives` queue's; realloc takes its source's over.
            s, _, _ = self.ptr_value(st.call, s, None)
            return s
        return s  # barrier

    def branches(self, st: n.If, s: State) -> State:
        holds = condition_holds(st.cond, self.params)
        if holds is not None:  # known before the run: only one branch ever runs
            return self.block(st.then if holds else st.orelse, s)
        then, orelse = s, s
        if st.cond.op == "held" and isinstance(st.cond.left, n.Name):
            # `if held(p)`: p holds an object in the first branch, nothing in the other.
            p = st.cond.left.id
            live = {f for f in s.ptr(p) if f.atom == LIVE}
            empty = s.ptr(p) - live
            then = s.with_ptr(p, live) if live else s
            orelse = s.with_ptr(p, empty or {Fact(NOTHING, st.pos, "found empty")})
        return self.block(st.then, then).join(self.block(st.orelse, orelse))

    def assign(self, st: n.Assign, s: State) -> State:
        target = st.target
        if isinstance(target, n.Name) and self.g.symbols.get(target.id) not in HOLDERS:
            return s.forget_slots(names={target.id})  # an integer changed: slots indexed by it are unknown
        into = target.id if isinstance(target, n.Name) else show(target)
        s, value, source = self.ptr_value(st.value, s, into)
        if isinstance(target, n.Index):
            pool = target.base.id
            known_empty = s.slot_known_empty(pool, target.index)
            if not known_empty and not {f.atom for f in s.pool(pool)} <= {EMPTY, CLEARED}:
                self.note(self.facts.unsafe_slot_assigns, st)
            return s.with_pool(pool, {Fact(FILLED, st.pos)}).with_empty_slot(pool, target.index, False)
        if source != target.id:
            old = s.ptr(target.id)
            live = _in_order(old, LIVE)
            if live:
                self.note(self.facts.overwrites, st)
                may = len(live) != len(old)
                if self._is_map(target.id):
                    self.warning(target.pos, f"{target.id} {'may still hold' if may else 'still holds'} the mapping "
                                 f"{live[0].how} at line {live[0].pos.line}; assigning it again leaks that mapping",
                                 f"unmap({target.id}) first")
                else:
                    self.warning(target.pos, f"{target.id} {'may still hold' if may else 'still holds'} the object "
                                 f"{live[0].how} at line {live[0].pos.line}; assigning it again leaks that object",
                                 f"free({target.id}) first, or send it to a channel")
        return s.with_ptr(target.id, value)

    def action(self, call: n.Call, s: State) -> State:
        f = call.func
        if f == "free":
            return self.consume(call.args[0], s, Fact(FREED, call.pos, "freed"))
        if f == "unmap":
            return self.consume(call.args[0], s, Fact(FREED, call.pos, "unmapped"))
        if f == "send":
            return self.consume(call.args[1], s, Fact(MOVED, call.pos, f"sent to {show(call.args[0])}"))
        if f in ("write", "touch"):
            return self.use(call.args[0], s, f)
        if f == "free_all" and self.g.symbols.get(call.args[0].id) != POOL:
            return s  # a shared pool: its slots are not followed
        if f == "free_all":
            pool = call.args[0].id
            return s.with_pool(pool, {Fact(CLEARED, call.pos, f"free_all({pool})")}).forget_slots(pool=pool)
        return s

    # -- pointer expressions
    def ptr_value(self, e, s: State, into: Optional[str]) -> Tuple[State, Facts, Optional[str]]:
        """Evaluate a pointer expression: the new state, the facts of its value, the variable it came from."""
        if isinstance(e, n.Call):
            if e.func in ALLOCATORS:
                return s, frozenset({Fact(LIVE, e.pos, "allocated")}), None
            if e.func == "recv":
                return s, frozenset({Fact(LIVE, e.pos, "received")}), None
            if e.func == "map":
                return s, frozenset({Fact(LIVE, e.pos, "mapped")}), None
            if e.func == "swap":
                # The object given goes into the shared slot; what comes out may be nothing.
                src, slot = e.args[1], show(e.args[0])
                if isinstance(src, n.Name):
                    self.require(src, s)
                    if src.id != into:
                        s = s.with_ptr(src.id, {Fact(MOVED, e.pos, f"swapped into {slot}")})
                else:
                    s = self.consume(src, s, None)
                gave = src.id if isinstance(src, n.Name) else None  # p = swap(s[i], p) keeps p's place
                return s, frozenset({Fact(LIVE, e.pos, f"swapped out of {slot}")}), gave
            if e.func == "realloc":
                src = e.args[0]
                if isinstance(src, n.Name):
                    self.require(src, s)
                    if src.id != into:
                        how = f"realloc'ed into {into}" if into else "passed to realloc"
                        s = s.with_ptr(src.id, {Fact(MOVED, e.pos, how)})
                    return s, frozenset({Fact(LIVE, e.pos, "reallocated")}), src.id
                s = self.consume(src, s, None)
                return s, frozenset({Fact(LIVE, e.pos, "reallocated")}), None
        if isinstance(e, n.Name):
            facts = s.ptr(e.id)
            self.require(e, s, problems=(UNSET,))  # copying a freed pointer copies nothing, harmlessly
            if e.id != into:
                s = s.with_ptr(e.id, {Fact(MOVED, e.pos, f"copied to {into}")})
            return s, facts, e.id
        if isinstance(e, n.Index):
            return self.slot_out(e, s, check=False), frozenset({Fact(LIVE, e.pos, f"taken from {show(e)}")}), None
        return s, frozenset({Fact(LIVE, e.pos, "allocated")}), None

    def consume(self, e, s: State, gone: Optional[Fact]) -> State:
        """The object of `e` leaves the thread's hands (free, send, realloc's old block)."""
        if isinstance(e, n.Name):
            self.require(e, s)
            return s.with_ptr(e.id, {gone}) if gone is not None else s
        if isinstance(e, n.Index):
            return self.slot_out(e, s, check=True)
        s, _, _ = self.ptr_value(e, s, None)
        return s

    def use(self, e, s: State, call_name: str) -> State:
        """`write(e, n)`, `touch(e)`: the object must be live and stays where it is."""
        if isinstance(e, n.Name):
            self.require(e, s)
            return s
        if isinstance(e, n.Index):
            self.require_slot(e, s)
            return s
        s, _, _ = self.ptr_value(e, s, None)
        self.note(self.facts.lost, e)
        self.warning(e.pos, f"the object from {e.func}() is lost after this statement: nothing can free it",
                     f"keep it in a variable: p = {e.func}(...)  {call_name}(p{', ...' * (call_name == 'write')})  free(p)")
        return s

    def slot_out(self, e: n.Index, s: State, check: bool) -> State:
        if check:
            self.require_slot(e, s)
        pool = e.base.id
        facts = {Fact(SOME, f.pos) if f.atom == FILLED else f for f in s.pool(pool)}
        return s.with_pool(pool, facts).with_empty_slot(pool, e.index, True)

    # -- the checks proper
    def require(self, name: n.Name, s: State, problems=(FREED, MOVED, UNSET)) -> None:
        """`name` must hold an object here, on every path."""
        facts = s.ptr(name.id)
        atoms = {f.atom for f in facts}
        p = name.id
        for atom in problems:
            if atom not in atoms:
                continue
            sure = atoms == {atom}
            bad = _in_order(facts, atom)
            if atom == FREED and self._is_map(p):
                self.error(name.pos, f"{p} {'is' if sure else 'may'} already {'' if sure else 'be '}unmapped "
                           f"(unmapped at {_lines(bad)})",
                           f"after unmap({p}) it holds nothing; map it again first ({p} = map(...))")
            elif atom == FREED:
                self.error(name.pos, f"{p} {'is' if sure else 'may'} already {'' if sure else 'be '}freed "
                           f"(freed at {_lines(bad)})",
                           f"after free({p}) it holds nothing; assign it again first ({p} = malloc(...))")
            elif atom == MOVED:
                self.error(name.pos, f"{p} {'is' if sure else 'may'} already {'' if sure else 'be '}moved away "
                           f"({_moves(bad)})",
                           "a sent, realloc'ed or copied pointer is cleared; use the name that holds it now")
            else:
                self.error(name.pos, f"{p} {'is' if sure else 'may be'} used before it is assigned",
                           "a loop that runs zero times assigns nothing" if not sure else None)
            return

    def _is_map(self, name: str) -> bool:
        return self.g.symbols.get(name) == MAP

    def require_slot(self, e: n.Index, s: State) -> None:
        facts = s.pool(e.base.id)
        if {f.atom for f in facts} == {CLEARED}:
            self.error(e.pos, f"{show(e)} is already freed ({_moves(_in_order(facts))} emptied every slot)",
                       f"assign the slot again first: {show(e)} = malloc(...)")

    # -- loops
    def loop(self, st, s: State) -> State:
        info = loop_of(st, self.params)
        entry = s
        fresh: Set[Tuple[str, n.Index]] = set()
        if isinstance(st, n.For):
            entry = entry.forget_slots(names={st.var})
            fresh = self._fresh_slots(st, entry)
        head = entry
        self.quiet += 1
        for _ in range(64):
            out = self._back_edge(st, self.block(st.body, self._iteration(head, fresh)))
            new_head = entry.join(out)
            if new_head == head:
                break
            head = new_head
        self.quiet -= 1
        out = self._back_edge(st, self.block(st.body, self._iteration(head, fresh)))
        if not info.runs_at_least_once:
            return entry.join(out)
        for pool in self._emptied_pools(st):
            out = out.with_pool(pool, {Fact(CLEARED, st.pos, "the for loop")}).forget_slots(pool=pool)
        return out

    def _iteration(self, head: State, fresh) -> State:
        for pool, index in fresh:
            head = head.with_empty_slot(pool, index, True)
        return head

    def _back_edge(self, st, out: State) -> State:
        return out.forget_slots(names={st.var}) if isinstance(st, n.For) else out

    def _fresh_slots(self, st: n.For, entry: State) -> Set[Tuple[str, n.Index]]:
        """`for i in a .. b { objs[i] = ... }` on an empty pool fills a different slot each time.

        Only when the body assigns that pool nowhere else, at any depth, so a
        slot cannot be filled twice while i runs over distinct values.
        """
        fresh = set()
        for pool in {k for k, v in self.g.symbols.items() if v == POOL}:
            if not {f.atom for f in entry.pool(pool)} <= {EMPTY, CLEARED}:
                continue
            targets = [x for x, _ in walk(st.body, self.params)
                       if isinstance(x, n.Assign) and isinstance(x.target, n.Index) and x.target.base.id == pool]
            direct = [x for x in st.body if x in targets]
            if targets and len(targets) == len(direct) and all(
                    isinstance(x.target.index, n.Name) and x.target.index.id == st.var for x in targets):
                fresh.add((pool, targets[0].target.index))
        return fresh

    def _emptied_pools(self, st) -> Set[str]:
        """`for i in 0 .. n { free(objs[i]) }` over a whole pool of n slots leaves every slot empty."""
        if not isinstance(st, n.For) or const_or_none(st.start, self.params) != 0:
            return set()
        stop = const_or_none(st.stop, self.params)
        sizes = {x.name: const_or_none(x.size, self.params) for x, _ in walk(self.g.node.body, self.params)
                 if isinstance(x, n.Pool)}
        refilled = {x.target.base.id for x, _ in walk(st.body, self.params)
                    if isinstance(x, n.Assign) and isinstance(x.target, n.Index)}
        emptied = set()
        for x in st.body:
            if isinstance(x, n.CallStmt) and x.call.func in ("free", "send"):
                obj = x.call.args[-1]
                if isinstance(obj, n.Index) and isinstance(obj.index, n.Name) and obj.index.id == st.var \
                        and sizes.get(obj.base.id) == stop and obj.base.id not in refilled:
                    emptied.add(obj.base.id)
        return emptied

    # -- the end of the thread
    def thread_end(self, s: State) -> None:
        name = self.g.node.name
        for p, facts in s.ptrs:
            live = _in_order(facts, LIVE)
            if not live:
                continue
            self.facts.live_at_end.add(p)
            if self.r.scenario.leaks != "warn":
                continue
            may = len(live) != len(facts)
            if self._is_map(p):
                self.warning(live[0].pos, f"{p} {'may still be' if may else 'is still'} mapped when thread {name} "
                             f"ends; add unmap({p}) or write `leaks free`")
                continue
            self.warning(live[0].pos, f"{p} {'may still be' if may else 'is still'} allocated when thread {name} "
                         f"ends; add free({p}) or write `leaks free`")
        for pool, facts in s.pools:
            if not any(f.atom == FILLED for f in facts):
                continue
            self.facts.live_at_end.add(pool)
            if self.r.scenario.leaks != "warn":
                continue
            may = any(f.atom != FILLED for f in facts)
            decl = next(st for st, _ in walk(self.g.node.body, self.params)
                        if isinstance(st, n.Pool) and st.name == pool)
            self.warning(decl.pos, f"pool {pool} {'may still hold' if may else 'still holds'} objects when "
                         f"thread {name} ends; add free_all({pool}) or write `leaks free`")


def _lines(facts: List[Fact]) -> str:
    lines = sorted({f.pos.line for f in facts})
    if len(lines) == 1:
        return f"line {lines[0]}"
    return "lines " + ", ".join(map(str, lines[:-1])) + f" and {lines[-1]}"


def _moves(facts: List[Fact]) -> str:
    by_how: Dict[str, List[Fact]] = {}
    for f in facts:
        by_how.setdefault(f.how, []).append(f)
    return "; ".join(f"{how} at {_lines(fs)}" for how, fs in by_how.items())
