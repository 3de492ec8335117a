"""The statements of a fitted model, planned per thread group and phase on the model's shape
(trace/model_shape.py), with the sizes trace/model_sizes.py chose: how many times each runs per thread
and what one execution does (calls, objects left to `lives`, objects handed over), from which
trace/model_write.py writes the text and the header's model column.

    plan = GroupPlanner(shape, files, group, life_scale).plan()   # -> GroupPlan: Chains, a PhasePlan per phase
"""

from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .model_collect import REALLOC_START, Cell, merge_hist
from .model_files import HistogramFiles
from .model_fit import fit_lifetimes
from .model_shape import Group, ModelShape
from .model_sizes import PhaseSizer, Sizes, few_sizes

MAX_GROW_SLOTS = 4096       # realloc chains a thread of the model grows at once, at most


@dataclass
class Stmt:
    """One statement of a phase, with what one execution of it does (the header's model column sums them)."""
    text: str
    per_thread: int = 0                        # the same count in every thread of the group ...
    share: Optional[Tuple[str, int]] = None    # ... or (variable, group total) split over the threads by `self`
    calls: Dict[str, int] = field(default_factory=dict)   # allocator calls per execution, runtime counter names
    lives: int = 0                             # objects it leaves to a `lives` free
    sent: int = 0                              # objects it hands to another thread
    local_frees: int = 0                       # objects of its own thread it frees (a realloc chain's end)
    draws: int = 0                             # sizes drawn from the phase's size histogram
    handed: bool = False                       # ... from the sizes of the objects handed over instead
    place: str = "loop"                        # 'pre' and 'post' run before and after the phase's rounds
    lumped: bool = False                       # its share is all one thread's: a loop of its own
    kept: bool = False                         # its objects live to the end (`lives forever`): their own sizes
    mean: Optional[float] = None               # the mean of its sizes, when not the phase's
    at: Optional[float] = None                 # runs once, this far into the phase (0 .. 1): a big chain's step
    order: int = 0                             # ... its ordinal in the capture (steps in one round keep it)

    def max_count(self, threads: int) -> int:
        return self.per_thread if self.share is None else self.share[1] if self.lumped \
            else -(-self.share[1] // threads)

    def total(self, threads: int) -> int:
        return self.per_thread * threads if self.share is None else self.share[1]


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


@dataclass
class PhasePlan:
    stmts: List[Stmt]           # those that run at least once
    variables: List[str]        # the `self`-dependent counts they need, declared at the group's top
    sizes: Sizes
    events: int                 # the group's calls in the phase (a phase without statements says so)


@dataclass
class GroupPlan:
    chains: Chains
    phases: List[PhasePlan]
    first_size: Optional[str]   # the first phase's size expression (the first block's size)


@dataclass
class _Flows:
    """A phase's objects by where they go: counts per kind (and partner)."""
    local: Counter = field(default_factory=Counter)     # kind -> freed by their own thread (`lives`)
    sends: Counter = field(default_factory=Counter)     # (kind, group) -> sent over a channel
    ring: Counter = field(default_factory=Counter)      # kind -> handed around the group's ring
    recvs: Counter = field(default_factory=Counter)     # group -> received from it and freed
    ends: Counter = field(default_factory=Counter)      # 'local', 'ring' or group -> realloc chains ended so
    kept: Counter = field(default_factory=Counter)      # kind -> still live at the end


class _Counts:
    """Per-thread counts of one group's statements in one phase, and the variables that split a total
    over the threads by `self`."""

    def __init__(self, g: Group, pi: int):
        self.g, self.n, self.pi = g, g.n, pi
        self.variables: List[str] = []

    def per(self, total) -> dict:
        return dict(per_thread=int(round(total / self.n)))

    def exact(self, total: int, var: str, member_counts=None) -> dict:
        """total over the threads: evenly, or all by the first (last) thread when the capture's first (last)
        thread of the group made them all (a churning group's first thread takes what came before it)."""
        n = self.n
        if member_counts and n > 1 and sum(member_counts) == total:
            if member_counts[0] == total:
                self.variables.append(f"{var} = {total} * (1 / (self + 1))      # thread 0 only, as captured")
                return dict(share=(var, total), lumped=True)
            if member_counts[-1] == total:
                self.variables.append(f"{var} = {total} * ((self + 1) / {n})      # the last thread only, as captured")
                return dict(share=(var, total), lumped=True)
        if total % n == 0:
            return dict(per_thread=total // n)
        self.variables.append(f"{var} = (self + 1) * {total} / {n} - self * {total} / {n}")
        return dict(share=(var, total))

    def members(self, match) -> list:
        """Per thread of the group, its counts in the phase under the keys that match."""
        return [sum(v for k, v in m.phases[self.pi - 1].c.items() if isinstance(k, tuple) and match(k))
                for m in self.g.summaries]


class GroupPlanner:
    """The statements of one group, phase by phase; the histogram files they read are written on the way."""

    def __init__(self, shape: ModelShape, files: HistogramFiles, g: Group, life_scale: Optional[int]):
        self.shape, self.col, self.g = shape, shape.col, g
        self.life_scale = life_scale
        self.sizer = PhaseSizer(shape, files, g)

    def plan(self) -> GroupPlan:
        g = self.g
        chains, rsizes, group_lives = self._chains()
        self.sizer.start_reallocs(rsizes)
        group_fit = fit_lifetimes(group_lives)
        phases: List[PhasePlan] = []
        for pi in range(1, len(self.shape.phases) + 1):
            agg = Cell()
            for s in g.summaries:
                agg.merge(s.phases[pi - 1])
            sizes = self.sizer.sizes(agg, pi, group_fit)
            sizes.rsize, sizes.large_realloc = self.sizer.realloc_sizes(agg, pi, chains.slots)
            stmts, variables = self._statements(pi, agg, sizes, chains)
            phases.append(PhasePlan(stmts, variables, sizes, agg.c["events"]))
        return GroupPlan(chains, phases, self.sizer.first_size)

    # ---------------------------------------------------------------- the group's realloc chains
    def _chains(self) -> Tuple[Chains, dict, dict]:
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
        start_kinds = sorted(starts.items(), key=lambda kv: (-kv[1], kv[0] == REALLOC_START, mk_key(kv[0]))) \
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
        ticks = sum(c.c["ticks"] for t in g.tids for c in self.col.cells[t] if c is not None)
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

    # ---------------------------------------------------------------- a phase's statements
    def _statements(self, pi: int, agg: Cell, sz: Sizes, chains: Chains) -> Tuple[List[Stmt], List[str]]:
        """The statements of group g in phase pi (1-based), with per-thread counts; and the variables they
        need. In this order: frees of received objects, free(NULL), the thread's own objects (`lives`),
        those kept to the end, sends to other groups, the ring, reallocs, ends of realloc chains, and the
        big objects and big chains' steps where they came."""
        counts = _Counts(self.g, pi)
        flows = self._flows(agg.c)
        ring_send, ring_recv = self._ring_ops()
        stmts = self._receives(flows, counts)
        if agg.c["free_null"]:
            stmts.append(Stmt("free(none[0])", **counts.per(agg.c["free_null"]), calls={"free": 1}))
        stmts += self._own_allocs(flows, sz, counts)
        stmts += self._kept_allocs(pi, agg, flows, sz, counts)
        stmts += self._sends(flows, sz, counts)
        stmts += self._ring_steps(flows, sz, counts, ring_send, ring_recv)
        stmts += self._reallocs(agg, flows, sz, chains, counts, ring_send, ring_recv)
        if not chains.units:
            credit = self.g.n if chains.credit_phase == pi - 1 else 0
            stmts += self._chain_ends(pi, flows, sz, chains, credit, counts, ring_send, ring_recv)
        stmts += self._big_stmts(pi - 1)
        # lost handoffs come after the ring's and channels' drain (post statements run in this order)
        stmts = [s for s in stmts if not (s.kept and s.place == "post")] + \
            [s for s in stmts if s.kept and s.place == "post"]
        kept = [s for s in stmts if s.max_count(self.g.n) > 0]
        return kept, [v for v in counts.variables if any(v.split(" = ")[0] == (s.share or ("",))[0] for s in kept)]

    def _flows(self, c: Counter) -> _Flows:
        """A phase's counts sorted by where the objects go: a flow between groups without a channel (it
        would close a loop) is freed by its owner itself."""
        g, group_of, edges = self.g, self.shape.group_of, self.shape.edges
        f = _Flows()
        for k, v in c.items():
            if not isinstance(k, tuple):
                continue
            if k[0] == "recv":
                src = group_of[k[1]]
                if src is not g and (src.name, g.name) in edges:
                    f.recvs[src.name] += v
            elif k[0] == "kept":
                f.kept[k[1]] += v
            elif k[0] in ("lives", "send"):
                dest = group_of[k[2]] if k[0] == "send" else g
                if k[0] == "lives" or (dest is not g and (g.name, dest.name) not in edges):
                    f.local[k[1]] += v
                elif dest is g:
                    f.ring[k[1]] += v
                else:
                    f.sends[k[1], dest.name] += v
            elif k[0] == "end":
                dest = group_of[k[2]] if k[1] == "send" else g
                if k[1] == "send" and dest is g:
                    f.ends["ring"] += v
                elif k[1] == "send" and (g.name, dest.name) in edges:
                    f.ends[dest.name] += v
                else:
                    f.ends["local"] += v
        return f

    def _ring_ops(self) -> Tuple[str, str]:
        """The ring's send (a format with the object as {0}) and receive, for the group's threads."""
        g = self.g
        if g.name in self.shape.churn:
            # Threads come and go in order: thread i hands to i + 1, which starts after it; the ring does not
            # close (thread 0 would wait for the last thread, which starts only after it ends). Its channels
            # hold a thread's sends: none blocks, and thread i's receives wait only for thread i - 1.
            return (f"if self + 1 < {g.n} {{{{ send({g.name}_ring[self + 1], {{0}}) }}}} else {{{{ free({{0}}) }}}}",
                    f"if self > 0 {{ free(recv({g.name}_ring[self])) }}")
        return f"send({g.name}_ring[(self + 1) % {g.n}], {{0}})", f"free(recv({g.name}_ring[self]))"

    def _receives(self, flows: _Flows, counts: _Counts) -> List[Stmt]:
        """Frees of the objects received from other groups: those the capture freed only once their senders
        were done with the phase before (model_shape._late_receives) first, right after its barrier, then
        the phase's others spread over its rounds (its own late ones wait for the next phase)."""
        out, pi = [], counts.pi
        for src, total in sorted(flows.recvs.items()):
            src_tids = set(self.shape.group_named(src).tids)
            late = [self.shape.late_recvs.get((src, t), [0] * pi) for t in self.g.tids]
            waited = [n[pi - 2] for n in late] if pi > 1 else [0] * self.g.n
            if sum(waited):
                out.append(Stmt(f"free(recv({src}_to_{self.g.name}))", calls={"free": 1}, place="pre",
                                **counts.exact(sum(waited), f"from_{src}_p{pi - 1}_late", waited)))
            members = [m - n[pi - 1] for m, n in
                       zip(counts.members(lambda k: k[0] == "recv" and k[1] in src_tids), late)]
            out.append(Stmt(f"free(recv({src}_to_{self.g.name}))", calls={"free": 1},
                            **counts.exact(total - sum(n[pi - 1] for n in late), f"from_{src}_p{pi}", members)))
        return out

    def _own_allocs(self, flows: _Flows, sz: Sizes, counts: _Counts) -> List[Stmt]:
        """The objects freed by their own thread, `lives` as fitted; the large ones with their own sizes and
        lifetimes."""
        out, large = [], sz.large
        for mk, v in sorted(flows.local.items(), key=lambda kv: mk_key(kv[0])):
            n_large = large[2].get(mk, 0) if large else 0
            if v > n_large:
                out.append(Stmt(f"{alloc_text(mk, sz.size)} lives {self._scaled(sz.lives)}", **counts.per(v - n_large),
                                calls={mk[0]: 1}, lives=1, draws=1))
            if n_large:
                out.append(Stmt(f"{alloc_text(mk, large[0])} lives {self._scaled(large[1])}", **counts.per(n_large),
                                calls={mk[0]: 1}, lives=1, draws=1, mean=large[3]))
        return out

    def _kept_allocs(self, pi: int, agg: Cell, flows: _Flows, sz: Sizes, counts: _Counts) -> List[Stmt]:
        """The objects still live at the end: `lives forever`, where they came on average when once a phase;
        after the phase's last round when they are lost handoffs (_lost_handoffs)."""
        out = []
        exact_sizes = few_sizes(agg.kept) if self.g.n == 1 else None
        lost = self._lost_handoffs(pi, flows)
        kept_at = None if lost else self._kept_at(pi - 1)
        where = dict(place="post") if lost else {}
        for mk, v in sorted(flows.kept.items(), key=lambda kv: mk_key(kv[0])):
            if exact_sizes:
                # A few objects kept to the end, each with its size, where they came on average: drawn at
                # random, a handful of big ones (a 256 KiB table) could come out twice, or not at all.
                for nbytes in exact_sizes[:v]:
                    out.append(Stmt(f"{alloc_text(mk, str(nbytes))} lives forever", per_thread=1,
                                    calls={mk[0]: 1}, lives=1, draws=1, kept=True, mean=nbytes, at=kept_at,
                                    order=-1, **where))
                del exact_sizes[:v]
                continue
            once = counts.per(v)["per_thread"] == 1
            out.append(Stmt(f"{alloc_text(mk, sz.kept or sz.size)} lives forever", **counts.per(v), calls={mk[0]: 1},
                            lives=1, draws=1, handed=bool(sz.kept), kept=True, at=kept_at if once else None,
                            order=-1, **where))
        return out

    def _lost_handoffs(self, pi: int, flows: _Flows) -> bool:
        """Whether the objects the group still held at the end of the capture were most likely in flight to
        another thread, their frees lost with the capture's end (a crash, a cut): the last phase of a group
        that hands over more of its objects (its ring, its channels) than it frees itself. Those objects
        were among the ring's or the channels' content at the end; kept in the last rounds they would come
        on top of it (mt_pthread_crashed_e: 4 objects live at the crash, all four in the ring), so they are
        allocated after the drain."""
        handed = sum(flows.ring.values()) + sum(flows.sends.values())
        return pi == len(self.shape.phases) and handed > sum(flows.local.values())

    def _kept_at(self, pi: int) -> Optional[float]:
        """How far into phase pi (0-based) the group's objects still live at the end came, on average, on
        their threads' `lives` clocks: a statement that makes one of them per thread runs there, not in the
        phase's last round, where every statement made once a phase runs (a crashed capture's last objects
        came at its very end; a program's tables early)."""
        total, count = 0.0, 0
        for tid, s in zip(self.g.tids, self.g.summaries):
            c = s.phases[pi].c
            n = sum(v for k, v in c.items() if isinstance(k, tuple) and k[0] == "kept")
            if n <= 0:
                continue
            lo, ticks = self.shape.clock_span(tid, pi)
            total += n * min(max((c["kept_ticks"] / n - 1 - lo) / ticks, 0.0), 1.0)
            count += n
        return total / count if count else None

    def _sends(self, flows: _Flows, sz: Sizes, counts: _Counts) -> List[Stmt]:
        """Objects sent over a channel to another group, which frees them."""
        out = []
        for (mk, dest), v in sorted(flows.sends.items(), key=lambda kv: (mk_key(kv[0][0]), kv[0][1])):
            dest_tids = set(self.shape.group_named(dest).tids)
            members = counts.members(lambda k: k[0] == "send" and k[1] == mk and k[2] in dest_tids)
            dest_size, dest_fields = sz.handed_for(dest)
            out.append(Stmt(f"p = {alloc_text(mk, dest_size)}  send({self.g.name}_to_{dest}, p)",
                            **counts.exact(v, f"to_{dest}_{mk[0]}_p{counts.pi}", members), calls={mk[0]: 1}, sent=1,
                            draws=1, **dest_fields))
        return out

    def _ring_steps(self, flows: _Flows, sz: Sizes, counts: _Counts, ring_send: str, ring_recv: str) -> List[Stmt]:
        """Objects handed around the group's ring. They stay in flight as long as in the capture: the threads
        first send the ring's primed objects (model_shape._ring_depths: spread over them by `self`), then
        send one and free one per step, and each frees at the end as many as its predecessor primed."""
        out = []
        primed = self.shape.ring_depth.get(self.g.name, 0)
        ring_size, ring_fields = sz.handed_for(self.g.name)
        for mk, v in sorted(flows.ring.items(), key=lambda kv: (-kv[1], mk_key(kv[0]))):
            steps = counts.per(v)["per_thread"]
            total, primed = min(primed, steps * self.g.n), 0            # the most frequent kind primes the ring
            if total:
                prime, drain = self._ring_shares(total, counts)
                out.append(Stmt(f"p = {alloc_text(mk, ring_size)}  {ring_send.format('p')}", **prime,
                                calls={mk[0]: 1}, sent=1, draws=1, place="pre", **ring_fields))
                out.append(Stmt(ring_recv, **drain, calls={"free": 1}, place="post"))
            # every thread steps as often: thread i frees what thread i - 1 primed and sent, the same count
            out.append(Stmt(f"p = {alloc_text(mk, ring_size)}  {ring_send.format('p')}  {ring_recv}",
                            per_thread=steps - total // self.g.n, calls={mk[0]: 1, "free": 1}, sent=1, draws=1,
                            **ring_fields))
        return out

    def _ring_shares(self, total: int, counts: _Counts) -> Tuple[dict, dict]:
        """How many of the ring's primed objects each thread sends first, and how many it frees at the end
        (its predecessor's: thread i hands to i + 1): the same in every thread, or split by `self`."""
        n = self.g.n
        if total % n == 0:
            return dict(per_thread=total // n), dict(per_thread=total // n)
        prime, drain, pred = f"primed_p{counts.pi}", f"drained_p{counts.pi}", f"((self + {n - 1}) % {n})"
        counts.variables.append(f"{prime} = (self + 1) * {total} / {n} - self * {total} / {n}    "
                                f"# {total} primed objects over {n} threads")
        counts.variables.append(f"{drain} = ({pred} + 1) * {total} / {n} - {pred} * {total} / {n}    "
                                f"# its predecessor's")
        return dict(share=(prime, total)), dict(share=(drain, total))

    def _reallocs(self, agg: Cell, flows: _Flows, sz: Sizes, chains: Chains, counts: _Counts, ring_send: str,
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

    def _chain_ends(self, pi: int, flows: _Flows, sz: Sizes, chains: Chains, local_end_credit: int, counts: _Counts,
                    ring_send: str, ring_recv: str) -> List[Stmt]:
        """A realloc chain ends (freed, or handed to the thread that freed it) and a new block starts, of
        each kind as often as the capture's chains started with it."""
        grow, pick, g = chains.grow, chains.pick, self.g

        def restart(mk):
            if mk == REALLOC_START:             # the next realloc(NULL, n) starts it
                return "", {}, 0
            return f"  {grow} = {alloc_text(mk, sz.size)}", {mk[0]: 1}, 1

        out = []
        for where, v in sorted(flows.ends.items(), key=lambda kv: ("local", "ring").index(kv[0])
                               if kv[0] in ("local", "ring") else 2):
            parts = _split(v, chains.start_kinds)
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
                    out.append(Stmt(f"{pick}send({g.name}_to_{where}, {grow}){text}",
                                    **counts.exact(part, f"to_{where}_grown_{mk[0]}_p{pi}"), calls=dict(calls),
                                    sent=1, draws=draws))
        return out

    def _chain_units(self, ends: Counter, start_kinds, reallocs: int, sz: Sizes, grow: str, counts: _Counts,
                     ring_send: str, ring_recv: str) -> List[Stmt]:
        """Realloc chains held briefly (_brief_chains), one statement each: the chain starts, grows and ends
        (freed, handed to the next thread of the ring or sent to another group) in one step, so that the
        thread holds no block between its chains. The phase's reallocs are shared among its chains: L each,
        L + 1 for the first few, as many in all as captured (about, when a count is split by `self`)."""
        n, g = self.g.n, self.g
        units = []              # (where, kind, per thread (rounded), its count's fields)
        for where in ["local", "ring"] + sorted(k for k in ends if k not in ("local", "ring")):
            for mk, part in sorted(_split(ends[where], start_kinds).items(), key=lambda kv: mk_key(kv[0]))                     if ends[where] else ():
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
                start = "" if mk == REALLOC_START else f"{grow} = {alloc_text(mk, sz.size)}  "
                step = f"{grow} = realloc({grow}, {sz.rsize})"
                body = start + ("  ".join([step] * grows) if grows <= 2 else f"repeat {grows} {{ {step} }}")
                calls = Counter({"realloc": grows})
                if mk != REALLOC_START:
                    calls[mk[0]] += 1
                counted = dict(per_thread=times) if exact is None else times
                if where == "local":
                    calls["free"] += 1
                    out.append(Stmt(f"{body}  free({grow})", **counted, calls=dict(calls), local_frees=1,
                                    draws=int(mk != REALLOC_START)))
                elif where == "ring":
                    calls["free"] += 1
                    out.append(Stmt(f"{body}  {ring_send.format(grow)}  {ring_recv}", **counted,
                                    calls=dict(calls), sent=1, draws=int(mk != REALLOC_START)))
                else:
                    out.append(Stmt(f"{body}  send({g.name}_to_{where}, {grow})", **counted, calls=dict(calls),
                                    sent=1, draws=int(mk != REALLOC_START)))
            extra -= min(extra, count)
        return out

    def _big_stmts(self, pi: int) -> List[Stmt]:
        """The big objects and the steps of the big chains of group g (one thread) in phase pi (0-based), each
        once, as far into the phase as it came on the thread's `lives` clock: the statements' rounds spread
        the clock's ticks evenly, so an object that `lives L` ends where it ended in the capture."""
        out: List[Stmt] = []
        shape, g = self.shape, self.g
        lo, ticks = shape.clock_span(g.tids[0], pi)

        def at(moment):
            return min(max(moment[1] - 1 - lo, 0) / ticks, 1.0)

        for r in shape.big_objects.get(g.name, []):
            if shape.phase_of(r.at) == pi:
                life = "forever" if r.how == "kept" else str(r.life)
                out.append(Stmt(f"{alloc_text(r.mk, str(r.size))} lives {life}", per_thread=1, calls={r.mk[0]: 1},
                                lives=1, draws=1, mean=r.size, kept=r.how == "kept", at=at(r.at), order=r.at[0]))
        for t, slot in shape.big.get(g.name, []):
            b = f"big[{slot}]"
            steps = [] if t.mk == REALLOC_START else \
                [(t.start, f"free({b})  {b} = {alloc_text(t.mk, str(t.size))}", {"free": 1, t.mk[0]: 1},
                  dict(draws=1, mean=t.size))]
            steps += [(o, f"{b} = realloc({b}, {n})", {"realloc": 1}, {}) for o, n in t.steps]
            if t.how == "local" and t.end is not None:
                steps.append((t.end, f"free({b})", {"free": 1}, dict(local_frees=1)))
            for o, text, calls, more in steps:
                if shape.phase_of(o) == pi:
                    out.append(Stmt(text, per_thread=1, calls=calls, at=at(o), order=o[0], **more))
        return out

    def _scaled(self, lives: str) -> str:
        """A `lives` expression times the calibrated scale, when there is one (trace/model.py)."""
        return lives if self.life_scale is None or lives == "0" else f"({lives}) * life_scale / 100"


def alloc_text(mk, size_expr: str) -> str:
    kind, align = mk
    if kind == "malloc":
        return f"malloc({size_expr})"
    if kind == "calloc":
        return f"calloc(1, {size_expr})"
    return f"{kind}({align or 16}, {size_expr})"


def mk_key(mk):
    """The order of allocation kinds in the text: malloc, calloc, then the aligned ones by alignment."""
    order = ("malloc", "calloc", "aligned_alloc", "memalign", "posix_memalign")
    return (order.index(mk[0]) if mk[0] in order else 9, mk[1] or 0)


def _split(total: int, weights) -> Counter:
    """total split in proportion to [(key, weight)], largest remainders first; the parts add up to total."""
    whole = sum(w for _, w in weights)
    shares = [(key, total * w / whole) for key, w in weights]
    parts = Counter({key: int(x) for key, x in shares})
    left = total - sum(parts.values())
    for key, x in sorted(shares, key=lambda kx: -(kx[1] - int(kx[1])))[:left]:
        parts[key] += 1
    return parts
