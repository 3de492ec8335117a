"""A thread group's realloc chains in a fitted model: how its threads grow blocks (Chains, decided once from
the capture: blocks grown at once, brief chains, the first block), and each phase's reallocs and chain ends,
for trace/model/plan.py.

    chains, rsizes, lives = ChainPlanner(shape, group).chains()
    stmts = ChainPlanner(shape, group).statements(pi, agg, flows, sizes, chains, counts, ring_send, ring_recv)
"""

from collections import Counter
from dataclasses import dataclass
from typing import List, Optional, Tuple

from .collect import REALLOC_START, ThreadWindow, merge_hist
from .shape import Group, ModelShape
from .sizes import Sizes, few_sizes
from .stmt import Counts, Flows, Stmt, alloc_text, mk_key, split

MAX_GROW_SLOTS = 1 << 20    # realloc chains a thread of the model grows at once, at most


@dataclass
class Chains:
    """How the threads of a group grow blocks with realloc (the same in every phase)."""
    has_chain: bool             # the group reallocs at all
    start_kinds: list           # [(kind, chains started with it)], the most frequent first
    initial: bool               # the first block is allocated before the phases, the last freed after them
    credit_phase: Optional[int]  # (0-based) the phase that ends one chain fewer per thread for it
    slots: int                  # blocks grown at once (`pool grow[slots]`)
    big_slots: int              # the big chains' own pool (`pool big[...]`), 0 without
    units: bool                 # brief chains: each one statement, no block held between them
    in_pool: bool               # the grown blocks live in a pool (else in a variable `grow`)
    grow: str                   # the block a realloc grows: `grow`, `grow[0]` or `grow[k]`
    pick: str                   # the statement that picks k, or ""

    @property
    def start_mk(self):
        """The first block's kind."""
        return self.start_kinds[0][0]


class ChainPlanner:
    """The realloc chains of one group: how its threads grow blocks, and the statements that do it."""

    def __init__(self, shape: ModelShape, g: Group):
        self.shape, self.col, self.g = shape, shape.col, g

    def chains(self) -> Tuple[Chains, dict, dict]:
        """How the group grows blocks; its realloc sizes and its lifetimes, over all phases."""
        g, shape = self.g, self.shape
        starts: Counter = Counter()
        rsizes: dict = {}
        group_lives: dict = {}
        local_ends = [0] * len(shape.phases)
        for s in g.summaries:
            merge_hist(rsizes, s.total.rsizes)
            merge_hist(group_lives, s.total.lives)
            for k, v in s.total.c.items():
                if isinstance(k, tuple) and k[0] == "start":
                    starts[k[1]] += v
            for i, p in enumerate(s.phases):
                local_ends[i] += sum(v for k, v in p.c.items() if isinstance(k, tuple) and k[0] == "end"
                                     and (k[1] in ("local", "end") or (k[1] == "send" and not shape.sent_on(g, k[2]))))
        has_chain = bool(rsizes)
        start_kinds = sorted(((mk, v) for mk, v in starts.items() if v > 0),
                             key=lambda kv: (-kv[1], kv[0] == REALLOC_START, mk_key(kv[0]))) \
            or [(REALLOC_START, 1)]
        initial = has_chain and start_kinds[0][0] != REALLOC_START
        # The first block in `grow` is allocated before the phases and the last one freed after them,
        # so the phases end one chain fewer per thread: the last phase that ends enough chains locally.
        credit_phase = next((i for i in reversed(range(len(shape.phases))) if local_ends[i] >= g.n), None) \
            if initial else None
        # A chain that the capture began with realloc(NULL, n) starts from an empty block: a pool slot, which
        # may be empty (the checker rightly refuses a variable that may hold a freed block).
        # As many chains at once as a thread of the group held at once in the capture, a random one grown
        # or ended each time (one block, grown again and again, held far fewer bytes than many).
        big = shape.big.get(g.name, [])
        big_slots = max([slot + 1 for _, slot in big] + [0])
        # (the big chains, written step by step, have slots of their own)
        slots = min(max([self.col.max_chains[t] - big_slots for t in g.tids] + [1]), MAX_GROW_SLOTS) if has_chain \
            else 1
        units = has_chain and slots == 1 and not big and self._brief_chains()
        if units:                               # no block held between chains: none before the phases either
            initial, credit_phase = False, None
        in_pool = has_chain and (slots > 1 or not initial or REALLOC_START in starts)
        grow = "grow[k]" if slots > 1 else "grow[0]" if in_pool else "grow"
        pick = f"k = uniform(0, {slots - 1})  " if slots > 1 else ""
        return Chains(has_chain, start_kinds, initial, credit_phase, slots, big_slots, units, in_pool, grow,
                      pick), rsizes, group_lives

    def _brief_chains(self) -> bool:
        """Whether the threads of g held their realloc chain (one at a time) less than half of the time, on
        their `lives` clock: then each chain is one statement (start, grow, end: _chain_units) and the thread
        holds no block between them; else the thread holds a block all along, as when a new chain starts
        where the last one ended. The nearer of the two keeps the bytes held in chains nearer the capture's
        (mt_pthread_crashed_e: four threads that grow a 1 KB block now and then, and hand it on at once).
        Each phase must end a chain for each few reallocs (a chain across phases is no statement), and the
        chains must end in their thread, around the group's ring or over a channel to another group
        (mt_pthread_e: each block grown once and handed on, to the next worker or to main)."""
        g = self.g
        held = sum(self.col.chain_held[t] for t in g.tids)
        ticks = sum(c.c["ticks"] for t in g.tids for c in self.col.thread_windows[t] if c is not None)
        if not ticks or held >= ticks / 2:
            return False
        for pi in range(len(self.shape.phases)):
            reallocs = ends = 0
            for s in g.summaries:
                c = s.phases[pi].c
                reallocs += c["realloc"]
                for k, v in c.items():
                    if isinstance(k, tuple) and k[0] == "end":
                        dest = self.shape.group_of[k[2]] if k[1] == "send" else g
                        if dest is not g and (g.name, dest.name) not in self.shape.edges:
                            return False
                        ends += v
            if reallocs < ends or (reallocs and not ends):
                return False
        return True

    def statements(self, pi: int, agg: ThreadWindow, flows: Flows, sz: Sizes, chains: Chains, counts: Counts,
                   ring_send: str, ring_recv: str) -> List[Stmt]:
        """Phase pi's (1-based) reallocs and the ends of its chains (whole chains when they are brief)."""
        stmts = self._reallocs(agg, flows, sz, chains, counts, ring_send, ring_recv)
        if not chains.units:
            credit = self.g.n if chains.credit_phase == pi - 1 else 0
            stmts += self._chain_ends(pi, flows, sz, chains, credit, counts, ring_send, ring_recv)
        return stmts

    def _reallocs(self, agg: ThreadWindow, flows: Flows, sz: Sizes, chains: Chains, counts: Counts, ring_send: str,
                  ring_recv: str) -> List[Stmt]:
        """The phase's reallocs: whole brief chains, a few each to its own size, the large sizes in the first
        K blocks, or a random block grown to a drawn size."""
        reallocs, grow, pick = agg.c["realloc"], chains.grow, chains.pick
        few_rsizes = few_sizes(agg.rsizes) if self.g.n == 1 else None
        if chains.units:
            return self._chain_units(flows.ends, chains.start_kinds, reallocs, sz, grow, counts, ring_send, ring_recv)
        if reallocs and few_rsizes and len(few_rsizes) == reallocs:
            # a few reallocs, each to its own size (drawn at random, the one big size could come out twice)
            return [Stmt(f"{pick}{grow} = realloc({grow}, {nbytes})", per_thread=1, calls={"realloc": 1})
                    for nbytes in few_rsizes]
        if reallocs and sz.large_realloc:
            # A program grows one big buffer (or a few) among many small blocks: the large sizes grow the first
            # K blocks, as many as the thread held large ones at once in the capture, the others the rest. Drawn
            # for any block, the big sizes would pile up in several blocks at once.
            l_size, n_large, k, slots = sz.large_realloc
            pick_large = "grow[0]" if k == 1 else "grow[k]"
            out = [Stmt(("" if k == 1 else f"k = uniform(0, {k - 1})  ")
                        + f"{pick_large} = realloc({pick_large}, {l_size})", **counts.per(n_large),
                        calls={"realloc": 1})]
            if reallocs > n_large:
                out.append(Stmt(f"k = uniform({k}, {slots - 1})  grow[k] = realloc(grow[k], {sz.rsize})",
                                **counts.per(reallocs - n_large), calls={"realloc": 1}))
            return out
        if reallocs:
            return [Stmt(f"{pick}{grow} = realloc({grow}, {sz.rsize})", **counts.per(reallocs), calls={"realloc": 1})]
        return []

    def _chain_ends(self, pi: int, flows: Flows, sz: Sizes, chains: Chains, local_end_credit: int, counts: Counts,
                    ring_send: str, ring_recv: str) -> List[Stmt]:
        """A realloc chain ends (freed, or handed to the thread that freed it) and a new block starts, of
        each kind as often as the capture's chains started with it."""
        grow, pick, g = chains.grow, chains.pick, self.g

        def restart(mk):
            return f"  {grow} = {alloc_text(mk, sz.start or sz.size)}", {mk[0]: 1}, 1

        out = []
        for where, v in sorted(flows.ends.items(), key=lambda kv: ("local", "ring").index(kv[0])
                               if kv[0] in ("local", "ring") else 2):
            parts = split(v, chains.start_kinds)
            if where == "local" and local_end_credit:        # the first block came before the phases
                parts[chains.start_kinds[0][0]] -= local_end_credit
            for mk, part in sorted(parts.items(), key=lambda kv: mk_key(kv[0])):
                if part <= 0:
                    continue
                text, calls, draws = restart(mk)
                if where == "local":
                    out.append(Stmt(f"{pick}free({grow}){text}", **counts.per(part), calls={"free": 1, **calls},
                                    local_frees=1, draws=draws))
                elif where == "ring":
                    out.append(Stmt(f"{pick}{ring_send.format(grow)}{text}  {ring_recv}", **counts.per(part),
                                    calls={"free": 1, **calls}, sent=1, draws=draws))
                else:
                    out.append(Stmt(f"{pick}send({self.shape.channel(g.name, where)}, {grow}){text}",
                                    **counts.exact(part, f"to_{where}_grown_{mk[0]}_p{pi}"), calls=dict(calls),
                                    sent=1, draws=draws))
        return out

    def _chain_units(self, ends: Counter, start_kinds, reallocs: int, sz: Sizes, grow: str, counts: Counts,
                     ring_send: str, ring_recv: str) -> List[Stmt]:
        """Realloc chains held briefly (_brief_chains), one statement each: the chain starts, grows and ends
        (freed, handed to the next thread of the ring or sent to another group) in one step, so that the
        thread holds no block between its chains. The phase's reallocs are shared among its chains: L each,
        L + 1 for the first few, as many in all as captured (about, when a count is split by `self`)."""
        n, g = self.g.n, self.g
        units = []              # (where, kind, per thread (rounded), its count's fields)
        for where in ["local", "ring"] + sorted(k for k in ends if k not in ("local", "ring")):
            for mk, part in sorted(split(ends[where], start_kinds).items(), key=lambda kv: mk_key(kv[0]))                     if ends[where] else ():
                if where in ("local", "ring") and round(part / n):
                    units.append((where, mk, int(round(part / n)), None))
                elif where not in ("local", "ring") and part:      # the receiver frees exactly as many
                    units.append((where, mk, -(-part // n),
                                  counts.exact(part, f"to_{where}_grown_{mk[0]}_p{counts.pi}")))
        total = sum(u[2] for u in units)
        if not total:
            return []
        per_thread = int(round(reallocs / n))
        length, extra = divmod(per_thread, total) if per_thread >= total else (1, 0)
        out = []
        for where, mk, count, exact in units:
            plan = ((length + 1, min(extra, count)), (length, count - min(extra, count))) if exact is None else                 ((length + 1 if extra >= count else length, exact),)
            for grows, times in plan:
                if not times:
                    continue
                start = f"{grow} = {alloc_text(mk, sz.start or sz.size)}  "
                step = f"{grow} = realloc({grow}, {sz.rsize})"
                body = start + ("  ".join([step] * grows) if grows <= 2 else f"repeat {grows} {{ {step} }}")
                calls = Counter({"realloc": grows})
                calls[mk[0]] += 1
                counted = dict(per_thread=times) if exact is None else times
                if where == "local":
                    calls["free"] += 1
                    out.append(Stmt(f"{body}  free({grow})", **counted, calls=dict(calls), local_frees=1,
                                    draws=1))
                elif where == "ring":
                    calls["free"] += 1
                    out.append(Stmt(f"{body}  {ring_send.format(grow)}  {ring_recv}", **counted,
                                    calls=dict(calls), sent=1, draws=1))
                else:
                    out.append(Stmt(f"{body}  send({self.shape.channel(g.name, where)}, {grow})", **counted, calls=dict(calls),
                                    sent=1, draws=1))
            extra -= min(extra, count)
        return out
