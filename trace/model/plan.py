"""The statements of a fitted model, planned per thread group and phase on the model's shape
(trace/model/shape.py), with the sizes trace/model/sizes.py chose: how many times each runs per thread
and what one execution does (calls, objects left to `lives`, objects handed over), from which
trace/model/write.py writes the text and the header's model column. The realloc chains' statements are
trace/model/chains.py's.

    plan = GroupPlanner(shape, files, group, life_scale).plan()   # -> GroupPlan: Chains, a PhasePlan per phase
"""

from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .burst import BurstPlanner
from .chains import ChainPlanner, Chains
from .collect import ThreadWindow, hist_totals, merge_hist
from .files import HistogramFiles
from .held import HeldPlanner
from .fit import fit_lifetimes
from .shape import Group, ModelShape
from .sizes import PhaseSizer, Sizes, few_sizes
from .stmt import Counts, Flows, Stmt, alloc_text, mk_key
from .work import WorkCost, work_units


@dataclass
class PhasePlan:
    stmts: List[Stmt]           # those that run at least once
    variables: List[str]        # the `self`-dependent counts they need, declared at the group's top
    sizes: Sizes
    events: int                 # the group's calls in the phase (a phase without statements says so)
    waiting: int = 0            # its receives that wait for the next phase (model_shape._late_receives)
    work: int = 0               # `work` units per thread in the phase: the program's time between calls (work.py)


@dataclass
class GroupPlan:
    chains: Chains
    phases: List[PhasePlan]
    first_size: Optional[str]   # the first phase's size expression (the first block's size)
    held: Dict[int, int] = field(default_factory=dict)   # phase (1-based) -> objects freed in it from `held_pN`
    burst: int = 0              # the objects of the pool `burst` (trace/model/burst.py)


RECEIVE_PLACES = 8       # a lone thread's receives from a group, placed where they came, in at most this many runs a phase
MAX_MAP_SIZES = 8       # the program's own mappings of the most frequent sizes each get a statement of their own


class GroupPlanner:
    """The statements of one group, phase by phase; the histogram files they read are written on the way."""

    def __init__(self, shape: ModelShape, files: HistogramFiles, g: Group, life_scale: Optional[int],
                 map_written: Optional[int] = None, work_cost: Optional[WorkCost] = None):
        self.shape, self.col, self.g = shape, shape.col, g
        self.work_cost = work_cost          # None: no `work` (not measured, or a capture without a usable clock)
        self.life_scale = life_scale
        self.map_written = map_written      # percent of each mapping's pages written (None: as touch_new)
        self.sizer = PhaseSizer(shape, files, g)
        self.chains = ChainPlanner(shape, g)
        self.held = HeldPlanner(shape, self.sizer, g)
        self.burst = BurstPlanner(shape, self.sizer, g)
        self.map_fits: List[str] = []   # the lifetimes' fits of the mappings drawn from histograms

    def plan(self) -> GroupPlan:
        g = self.g
        chains, rsizes, group_lives = self.chains.chains()
        self.sizer.start_reallocs(rsizes)
        group_fit = fit_lifetimes(group_lives)
        phases: List[PhasePlan] = []
        for pi in range(1, len(self.shape.phases) + 1):
            agg = ThreadWindow()
            for s in g.summaries:
                agg.merge(s.phases[pi - 1])
            sizes = self.sizer.sizes(agg, pi, group_fit)
            sizes.rsize, sizes.large_realloc = self.sizer.realloc_sizes(agg, pi, chains.slots)
            stmts, variables = self._statements(pi, agg, sizes, chains)
            waiting = sum(n[pi - 1] for (_, t), n in self.shape.late_recvs.items() if t in g.tids)
            work = work_units(agg.c, g.n, self.work_cost, g.name, pi) if self.work_cost else 0
            phases.append(PhasePlan(stmts, variables, sizes, agg.c["events"], waiting, work))
        return GroupPlan(chains, phases, self.sizer.first_size, self.held.pools(), self.burst.size())

    # ---------------------------------------------------------------- a phase's statements
    def _statements(self, pi: int, agg: ThreadWindow, sz: Sizes, chains: Chains) -> Tuple[List[Stmt], List[str]]:
        """The statements of group g in phase pi (1-based), with per-thread counts; and the variables they
        need. In this order: frees of received objects, free(NULL), the thread's own objects (`lives`),
        those kept to the end, sends to other groups, the ring, reallocs, ends of realloc chains, and the
        big objects and big chains' steps where they came."""
        counts = Counts(self.g, pi)
        flows = self._flows(agg.c)
        ring_send, ring_recv = self._ring_ops()
        stmts = self._receives(flows, counts)
        if agg.c["free_null"]:
            stmts.append(Stmt("free(none[0])", **counts.per(agg.c["free_null"]), calls={"free": 1}))
        stmts += self._own_allocs(flows, sz, counts)
        stmts += self.held.allocs(pi - 1)
        stmts += self._kept_allocs(pi, agg, flows, sz, counts)
        stmts += self._sends(flows, sz, counts)
        stmts += self._ring_steps(flows, sz, counts, ring_send, ring_recv)
        stmts += self.chains.statements(pi, agg, flows, sz, chains, counts, ring_send, ring_recv)
        stmts += self._big_stmts(pi - 1) + self.held.frees(pi - 1) + self.burst.statements(pi - 1)
        stmts += self._maps(pi, agg, counts)
        kept = [s for s in stmts if s.max_count(self.g.n) > 0]
        return kept, [v for v in counts.variables if any(v.split(" = ")[0] == (s.share or ("",))[0] for s in kept)]

    def _flows(self, c: Counter) -> Flows:
        """A phase's counts sorted by where the objects go: a flow between groups without a channel (it
        would close a loop) is freed by its owner itself."""
        g, group_of, edges, handoffs = self.g, self.shape.group_of, self.shape.edges, self.shape.handoffs
        f = Flows()
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
                if k[0] == "lives" or (dest is not g and (g.name, dest.name) not in edges) or not handoffs:
                    f.local[k[1]] += v
                elif dest is g:
                    f.ring[k[1]] += v
                else:
                    f.sends[k[1], dest.name] += v
            elif k[0] == "end":
                dest = group_of[k[2]] if k[1] == "send" else g
                if k[1] == "send" and dest is g and handoffs:
                    f.ends["ring"] += v
                elif k[1] == "send" and (g.name, dest.name) in edges:
                    f.ends[dest.name] += v
                else:
                    # freed by the thread itself, or still grown at the end: the model's pool slots are reused,
                    # so such a chain ends (freed) where the next one starts (a call more: perl's 17 of 1.24M;
                    # started in a slot at random instead, without the free, a block the slot held stayed live
                    # and pc.py's model peaked at 1.14x its capture's, against 1.10x)
                    f.ends["local"] += v
        return f

    def _ring_ops(self) -> Tuple[str, str]:
        """The ring's send (a format with the object as {0}) and receive, for the group's threads."""
        g = self.g
        if g.name in self.shape.churn:
            # Threads come and go in order: thread i hands to i + 1, which starts after it; the ring does not
            # close (thread 0 would wait for the last thread, which starts only after it ends). The last
            # thread frees what it would send (a realloc chain's end; _ring_steps' objects it never makes).
            return (f"if self + 1 < {g.n} {{{{ {self._ring_target('{0}')} }}}} else {{{{ free({{0}}) }}}}",
                    f"if self > 0 {{ free(recv({g.name}_ring[self % {self.shape.ring_channels(g.name)}])) }}")
        return self._ring_target("{0}"), f"free(recv({g.name}_ring[self]))"

    def _ring_target(self, obj: str) -> str:
        """The send of obj to the ring's next thread. A churning group's channels hold a thread's sends: none
        blocks, and thread i's receives wait only for thread i - 1. With at most K threads alive, K * K + 1
        channels serve them all, each shared modulo that number (model_shape.ring_channels says why); one
        channel per thread kept the thread_windows of all of them resident: thread_churn's model of 200 workers, 2 at
        a time, had several times the replay's arena resident."""
        g = self.g
        k = self.shape.ring_channels(g.name) if g.name in self.shape.churn else g.n
        return f"send({g.name}_ring[(self + 1) % {k}], {obj})"

    def _receives(self, flows: Flows, counts: Counts) -> List[Stmt]:
        """Frees of the objects received from other groups: those the capture freed only once their senders
        were done with the phase before (model_shape._late_receives) first, right after its barrier, then
        the phase's others spread over its rounds (its own late ones wait for the next phase)."""
        out, pi = [], counts.pi
        late_of = self.shape.late_recvs
        waiting = {src for (src, t), n in late_of.items() if t in self.g.tids and pi > 1 and n[pi - 2]}
        for src in sorted(set(flows.recvs) | waiting):
            total = flows.recvs[src]
            src_tids = set(self.shape.group_named(src).tids)
            late = [late_of.get((src, t), [0] * pi) for t in self.g.tids]
            waited = [n[pi - 2] for n in late] if pi > 1 else [0] * self.g.n
            if sum(waited):
                out.append(Stmt(f"free(recv({self.shape.channel(src, self.g.name)}))", calls={"free": 1}, place="pre",
                                **counts.exact(sum(waited), f"from_{src}_p{pi - 1}_late", waited)))
            members = [m - n[pi - 1] for m, n in
                       zip(counts.members(lambda k: k[0] == "recv" and k[1] in src_tids), late)]
            batch = self.shape.batch.get((src, self.g.name), 0)
            placed = self._placed_receives(src, pi, members, batch)
            if placed is not None:
                out += placed
                continue
            if batch:       # model_shape._batch_receives: B received, then freed together
                whole = [m // batch for m in members]
                out.append(Stmt(f"for j in 0 .. {batch} {{ from_{src}[j] = recv({self.shape.channel(src, self.g.name)}) }}"
                                f"  free_all(from_{src})", calls={"free": batch},
                                **counts.exact(sum(whole), f"from_{src}_p{pi}_batches", whole)))
                members = [m % batch for m in members]
            if sum(members):
                out.append(Stmt(f"free(recv({self.shape.channel(src, self.g.name)}))", calls={"free": 1},
                                **counts.exact(sum(members), f"from_{src}_p{pi}", members)))
        return out

    def _placed_receives(self, src: str, pi: int, members: List[int], batch: int) -> Optional[List[Stmt]]:
        """A lone thread's receives from group src in phase pi (1-based), but for those that wait for the
        senders' phase to end, where the capture freed those objects (shape.receive_places, on the thread's
        `lives` clock), as its held objects are freed: a batch where its last object was freed, the receives a
        batch leaves one by one where they came; in up to RECEIVE_PLACES runs of as many receives each, each
        spread from its first receive's place to its last's. Spread evenly over the phase, node's main freed
        its pool threads' deflate states all along its last phase, where the capture freed them in a few
        thousand calls while those threads were still allocating; the senders, paced by their channel's
        capacity (the capture's most in flight), then make their next objects once main has taken those, as
        in the capture. None when the capture does not say where (too many handoffs to keep, a group of
        several threads, counts that do not add up): the receives are then spread over the phase's rounds."""
        if self.g.n != 1:
            return None
        places = self.shape.receive_places(src, self.g.tids[0], pi - 1)
        if places is None or len(places) != members[0]:
            return None
        channel = self.shape.channel(src, self.g.name)
        whole = len(places) // batch if batch else 0
        parts = []
        if whole:
            parts.append((f"for j in 0 .. {batch} {{ from_{src}[j] = recv({channel}) }}  free_all(from_{src})",
                          batch, [places[(i + 1) * batch - 1] for i in range(whole)]))
        if places[whole * batch:]:
            parts.append((f"free(recv({channel}))", 1, places[whole * batch:]))
        out, order = [], self.shape.phases[pi - 1].start * self.col.window
        for text, frees, at in parts:
            runs = min(len(at), RECEIVE_PLACES)
            for i in range(runs):
                run = at[i * len(at) // runs:(i + 1) * len(at) // runs]
                out.append(Stmt(text, per_thread=len(run), calls={"free": frees}, at=run[0],
                                until=run[-1] if len(run) > 1 else None, order=order))
        return out

    def _own_allocs(self, flows: Flows, sz: Sizes, counts: Counts) -> List[Stmt]:
        """The objects freed by their own thread, `lives` as fitted; the large ones with their own sizes and
        lifetimes."""
        out, large = [], sz.large or []
        for mk, v in sorted(flows.local.items(), key=lambda kv: mk_key(kv[0])):
            n_large = sum(band[2].get(mk, 0) for band in large)
            if v > n_large:
                out.append(Stmt(f"{alloc_text(mk, sz.size)} lives {self._scaled(sz.lives)}", **counts.per(v - n_large),
                                calls={mk[0]: 1}, lives=1, draws=1))
            for size, lives, kinds, mean in large:
                if kinds.get(mk, 0):
                    out.append(Stmt(f"{alloc_text(mk, size)} lives {self._scaled(lives)}", **counts.per(kinds[mk]),
                                    calls={mk[0]: 1}, lives=1, draws=1, mean=mean))
        return out

    def _kept_allocs(self, pi: int, agg: ThreadWindow, flows: Flows, sz: Sizes, counts: Counts) -> List[Stmt]:
        """The objects still live at the end: `lives forever`, where they came on average when once a phase;
        after every thread's last round and drain when they are lost handoffs (_lost_handoffs)."""
        out = []
        exact_sizes = few_sizes(agg.kept) if self.g.n == 1 else None
        lost = self._lost_handoffs(pi, flows)
        kept_at = None if lost else self._kept_at(pi - 1)
        where = dict(place="end") if lost else {}
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
            text = f"{alloc_text(mk, sz.kept or sz.size)} lives forever"
            places = self.held.kept_places(pi - 1, mk, v) if self.g.n == 1 and not lost and not once else []
            if places:
                # with one thread, in each part of the phase as many as the capture made there (as held objects,
                # which those are whose frees the capture's end cut off): spread evenly over the phase, a steady
                # program's last objects, kept to its end, would come as early as its first ones
                out += [Stmt(text, per_thread=n, calls={mk[0]: 1}, lives=1, draws=1, handed=bool(sz.kept), kept=True,
                             at=at, until=until, order=order) for at, until, n, order in places]
                continue
            out.append(Stmt(text, **counts.per(v), calls={mk[0]: 1},
                            lives=1, draws=1, handed=bool(sz.kept), kept=True, at=kept_at if once else None,
                            order=-1, **where))
        return out

    def _lost_handoffs(self, pi: int, flows: Flows) -> bool:
        """Whether the objects the group still held at the end of the capture were most likely in flight to
        another thread, their frees lost with the capture's end (a crash, a cut): the last phase of a group
        that hands over more of its objects (its ring, its channels) than it frees itself. Those objects
        were among the ring's or the channels' content at the end; kept in the last rounds they would come
        on top of it (mt_pthread_crashed_e: 4 objects live at the crash, all four in the ring), and so they
        would after a thread's own drain, while the others still run theirs (most of the model's peaks came
        there): they are allocated once every thread is done (place 'end': after a last barrier, which
        threads that come and go (churn) cannot wait at)."""
        handed = sum(flows.ring.values()) + sum(flows.sends.values())
        return pi == len(self.shape.phases) and handed > sum(flows.local.values()) and not self.shape.churn

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

    def _sends(self, flows: Flows, sz: Sizes, counts: Counts) -> List[Stmt]:
        """Objects sent over a channel to another group, which frees them."""
        out = []
        for (mk, dest), v in sorted(flows.sends.items(), key=lambda kv: (mk_key(kv[0][0]), kv[0][1])):
            dest_tids = set(self.shape.group_named(dest).tids)
            members = counts.members(lambda k: k[0] == "send" and k[1] == mk and k[2] in dest_tids)
            dest_size, dest_fields = sz.handed_for(dest)
            out.append(Stmt(f"p = {alloc_text(mk, dest_size)}  send({self.shape.channel(self.g.name, dest)}, p)",
                            **counts.exact(v, f"to_{dest}_{mk[0]}_p{counts.pi}", members), calls={mk[0]: 1}, sent=1,
                            draws=1, **dest_fields))
        return out

    def _ring_steps(self, flows: Flows, sz: Sizes, counts: Counts, ring_send: str, ring_recv: str) -> List[Stmt]:
        """Objects handed around the group's ring. They stay in flight as long as in the capture: the threads
        first send the ring's primed objects (model_shape._ring_depths: spread over them by `self`), then
        send one and free one per step, and each frees at the end as many as it primed. A thread primes k,
        steps n - k times and frees k at the end: it sends and frees n objects, as captured, and the ring
        cannot wait on itself (a thread mid-step has sent one more than it freed).
        A churning group's ring is open: its last thread sends nothing and its first receives nothing, so
        each of the other n - 1 sends the flow's count over n - 1 (over n, thread_churn's model handed 49
        objects where each of its program's threads handed 51, and its last thread made and freed 49 the
        program never made)."""
        out = []
        g = self.g
        churn = g.name in self.shape.churn and g.n > 1
        primed = self.shape.ring_depth.get(g.name, 0)
        ring_size, ring_fields = sz.handed_for(g.name)
        skip = dict(skip=1) if churn else {}
        for mk, v in sorted(flows.ring.items(), key=lambda kv: (-kv[1], mk_key(kv[0]))):
            steps = int(round(v / (g.n - 1))) if churn else counts.per(v)["per_thread"]
            total, primed = min(primed, steps * g.n), 0            # the most frequent kind primes the ring
            prime, stepped = self._ring_shares(total, steps, counts)
            made = f"p = {alloc_text(mk, ring_size)}  {ring_send.format('p')}"
            if churn:
                made = f"if self + 1 < {g.n} {{ p = {alloc_text(mk, ring_size)}  {self._ring_target('p')} }}"
            if total:
                out.append(Stmt(made, **prime, calls={mk[0]: 1}, sent=1, draws=1, place="pre", **skip,
                                **ring_fields))
                out.append(Stmt(ring_recv, **prime, calls={"free": 1}, place="post", **skip))
            out.append(Stmt(f"{made}  {ring_recv}", **stepped, calls={mk[0]: 1, "free": 1}, sent=1, draws=1, **skip,
                            **ring_fields))
        return out

    def _ring_shares(self, total: int, steps: int, counts: Counts) -> Tuple[dict, dict]:
        """How many of the ring's `total` primed objects each thread sends first (and frees at the end), and
        how many steps it makes: the same in every thread, or split by `self`."""
        n = self.g.n
        if total % n == 0:
            return dict(per_thread=total // n), dict(per_thread=steps - total // n)
        prime, stepped = f"primed_p{counts.pi}", f"stepped_p{counts.pi}"
        counts.variables.append(f"{prime} = (self + 1) * {total} / {n} - self * {total} / {n}    "
                                f"# the ring's first {total} object(s), spread over the threads")
        counts.variables.append(f"{stepped} = {steps} - {prime}")
        return dict(share=(prime, total)), dict(share=(stepped, steps * n - total))

    def _big_stmts(self, pi: int) -> List[Stmt]:
        """The big objects and the steps of the big chains of group g (one thread) in phase pi (0-based), each
        once, as far into the phase as it came on the thread's `lives` clock: the statements' rounds spread
        the clock's ticks evenly, so an object that `lives L` ends where it ended in the capture."""
        out: List[Stmt] = []
        shape, g = self.shape, self.g
        clock_at = shape.clock_at(g.tids[0], pi)

        def at(moment):
            return clock_at(moment[1])

        for r in shape.big_objects.get(g.name, []):
            if shape.phase_of(r.at) == pi:
                life = "forever" if r.how == "kept" else str(r.life)
                out.append(Stmt(f"{alloc_text(r.mk, str(r.size))} lives {life}", per_thread=1, calls={r.mk[0]: 1},
                                lives=1, draws=1, mean=r.size, kept=r.how == "kept", at=at(r.at), order=r.at[0]))
        for t, slot in shape.big.get(g.name, []):
            b = f"big[{slot}]"
            steps = [(t.start, f"free({b})  {b} = {alloc_text(t.mk, str(t.size))}", {"free": 1, t.mk[0]: 1},
                      dict(draws=1, mean=t.size))]
            steps += [(o, f"{b} = realloc({b}, {n})", {"realloc": 1}, {}) for o, n in t.steps]
            if t.how == "local" and t.end is not None:
                steps.append((t.end, f"free({b})", {"free": 1}, dict(local_frees=1)))
            for o, text, calls, more in steps:
                if shape.phase_of(o) == pi:
                    out.append(Stmt(text, per_thread=1, calls=calls, at=at(o), order=o[0], **more))
        return out

    def _maps(self, pi: int, agg: ThreadWindow, counts: Counts) -> List[Stmt]:
        """The program's own writable mappings made in phase pi (1-based), `map(n) lives L` (L on the thread's
        `lives` clock, as objects; `forever` when still mapped at the end): with one thread, one by one with
        their sizes and lifetimes where they came (few of them, and big: a language runtime's arenas, a
        compiler's pages); else drawn from the phase's histograms of their sizes and lifetimes."""
        g, shape = self.g, self.shape
        records = shape.map_records(g)
        if records is not None:
            at = shape.clock_at(g.tids[0], pi - 1)
            return [Stmt(f"{self._map(r.size)} lives {'forever' if r.life is None else r.life}", per_thread=1, maps=1,
                         mapped=r.size, at=at(r.at[1]), order=r.at[0])
                    for r in records if shape.phase_of(r.at) == pi - 1]
        out = []
        big = shape.big_maps.get(g.name, [])
        if big:                             # a lone thread's big mappings, one by one where they came
            at = shape.clock_at(g.tids[0], pi - 1)
            out += [Stmt(f"{self._map(r.size)} lives {'forever' if r.life is None else r.life}", per_thread=1, maps=1,
                         mapped=r.size, at=at(r.at[1]), order=r.at[0])
                    for r in big if shape.phase_of(r.at) == pi - 1]
        files = self.sizer.files
        for key, hist in (("map", agg.maps), ("map_kept", agg.map_kept)):
            # by size, the most frequent sizes each with its own lifetimes (a runtime's arenas of one size
            # live to the end, its big ones briefly: drawn from one table, a big one lived as long as an
            # arena as often as not), the rest together from a histogram
            buckets = sorted(hist, key=lambda b: (-hist[b][0], b))
            parts = [(b,) for b in buckets[:MAX_MAP_SIZES]] + ([tuple(buckets[MAX_MAP_SIZES:])]
                                                              if buckets[MAX_MAP_SIZES:] else [])
            for bs in parts:
                sub = {b: hist[b] for b in bs}
                n, nbytes = hist_totals(sub)
                if n <= 0:
                    continue
                if len(bs) == 1:
                    size = str(round(nbytes / n))
                else:
                    size = files.expr(sub, "map-sizes" if key == "map" else "map-kept-sizes",
                                      "sizes of the program's own mappings"
                                      + ("" if key == "map" else " still mapped at the end"), g.name, pi)
                mean = nbytes / n
                if g.n == 1:
                    placed = self._placed_maps(pi, key, bs, size, mean, n)
                    if placed:
                        out += placed
                        continue
                fit = None
                if key == "map":
                    lives: dict = {}
                    for b in bs:
                        merge_hist(lives, agg.map_lives.get(b, {}))
                    fit = fit_lifetimes(lives)
                    if fit is not None:
                        self.map_fits.append(f"{g.name}, phase {pi}, mappings of {size} bytes: {fit.comment()}")
                text = f"{self._map(size)} lives {fit.expr if fit else 'forever'}"
                members = [sum(m.phases[pi - 1].c[key, b] for b in bs) for m in g.summaries]
                out.append(Stmt(text, **counts.exact(n, f"{key}s_{bs[0]}_p{pi}", members), maps=1, mapped=mean))
        return out

    def _map(self, size) -> str:
        """A `map` of size bytes, with the share of its pages the program wrote when it is known."""
        return f"map({size})" if self.map_written is None else f"map({size}, percent_written = {self.map_written})"

    def _placed_maps(self, pi: int, key: str, buckets: tuple, size: str, mean: float, total: int) -> List[Stmt]:
        """A lone thread's mappings of phase pi (1-based) of the given size buckets, part by part of the phase
        as many as the capture made there (HeldPlanner.places), each part's with the lifetimes of the mappings
        made in it: a mapping made early that lives to the end lives long, one made late briefly, and drawn
        from one table for the phase, early ones died young as often as late ones outlived the capture
        (own_maps.c's arenas kept to the end: 0.82x the mapped peak). [] when the windows do not add up."""
        p, thread_windows, g = self.shape.phases[pi - 1], self.col.thread_windows[self.g.tids[0]], self.g
        parts: Dict[tuple, Counter] = {}
        for w in range(p.start, min(p.end, len(thread_windows))):
            made = sum(thread_windows[w].c[key, b] for b in buckets) if thread_windows[w] is not None else 0
            if made > 0:
                parts.setdefault(self.shape.part_of(w), Counter())[w] = made
        if sum(sum(c.values()) for c in parts.values()) != total:
            return []
        out = []
        for part in sorted(parts):
            by_window = parts[part]
            fit = None
            if key == "map":
                lives: dict = {}
                for w in by_window:
                    for b in buckets:
                        merge_hist(lives, thread_windows[w].map_lives.get(b, {}))
                fit = fit_lifetimes(lives)
                if fit is not None:
                    self.map_fits.append(f"{g.name}, phase {pi}, part {part[1] + 1}, mappings of {size} bytes: "
                                         f"{fit.comment()}")
            text = f"{self._map(size)} lives {fit.expr if fit else 'forever'}"
            out += [Stmt(text, per_thread=k, maps=1, mapped=mean, at=at, until=until, order=order)
                    for at, until, k, order in self.held.places(by_window, pi - 1)]
        return out
    def _scaled(self, lives: str) -> str:
        """A `lives` expression times the calibrated scale, when there is one (trace/model/__init__.py)."""
        return lives if self.life_scale is None or lives == "0" else f"({lives}) * life_scale / 100"
