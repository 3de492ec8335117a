"""The shape of a fitted model, decided once from the collected figures: its phases, its thread groups (and
which of them churn), the channels between groups with their capacities, each ring's depth, and the big
realloc chains and big objects written one by one, taken out of their thread's figures.

trace/model/plan.py plans each group's statements on this shape; trace/model/write.py writes the text.
"""

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from .collect import (MAX_HANDOFFS, MAX_PEAK_FREED, BigObject, ThreadWindow, Collector, hist_minus, life_bucket,
                      merge_hist, size_bucket, size_class)
from .fit import (BIG_OBJECT_SHARE, LONG_LIFE_SHARE, Phase, PhaseLarge, ThreadSummary, alike_but_receives, big_chains,
                  big_kept_objects, big_objects, burst_objects, class_kinds, chain_slots, detect_phases, group_threads,
                  large_class, long_big_objects)

MAX_CAPACITY = 1 << 20      # channel slots live in the runtime's arena: 16 MiB at most per channel
HELD_PARTS = 4              # an object freed in a later part of a phase than its own, or a later phase, is held


@dataclass
class Group:
    name: str
    tids: List[int]
    summaries: List[ThreadSummary]

    @property
    def n(self) -> int:
        return len(self.tids)


class ModelShape:
    """Phases, groups, churn, flows between groups, ring depths, big chains and big objects of one capture.

    Built once per model (calibration rewrites the text, not the shape); taking the big chains and big
    objects out changes the groups' summaries, which the statements then model as before."""

    def __init__(self, col: Collector, max_phases: int):
        self.col = col
        self.phases: List[Phase] = detect_phases(col.wins, col.has_time, max(1, max_phases), col.last_line)
        self.notes: List[str] = []
        self._group_threads()
        self.churn = self._churn()
        if self.churn and len(self.phases) > 1:
            # a barrier would wait for a churning group's threads not yet started: one phase
            self.phases = detect_phases(col.wins, col.has_time, 1, col.last_line)
            self._group_threads()
            self.churn = self._churn()
            self.notes.append("one phase: the threads of a group come and go (`at most`), and a barrier between "
                              "phases would wait for threads not yet started")
        self._flows()
        self._take_big_chains()
        self._take_big_objects()
        self._take_held_objects()
        self._take_bursts()
        self._take_big_maps()

    # ---------------------------------------------------------------- groups
    def _group_threads(self) -> None:
        summaries = []
        for tid, thread_windows in self.col.thread_windows.items():
            per_phase = []
            for p in self.phases:
                agg = ThreadWindow()
                for thread_window in thread_windows[p.start:p.end]:
                    if thread_window is not None:
                        agg.merge(thread_window)
                per_phase.append(agg)
            total = ThreadWindow()
            for agg in per_phase:
                total.merge(agg)
            summaries.append(ThreadSummary(tid, total, per_phase))
        leader = min(self.col.thread_windows) if self.col.thread_windows else 0
        self.groups: List[Group] = []
        workers = 0
        for members in self._with_chain_heads(group_threads(summaries)):
            if len(members) == 1 and members[0].tid == leader:
                name = "main"
            else:
                workers += 1
                name = "worker" if workers == 1 else f"worker{workers}"
            self.groups.append(Group(name, [s.tid for s in members], members))
        self.group_of = {tid: g for g in self.groups for tid in g.tids}

    def _with_chain_heads(self, groups: List[List[ThreadSummary]]) -> List[List[ThreadSummary]]:
        """A thread alone in its group that hands all its objects to the first-born thread of a group whose
        threads hand theirs on to one another, and was born before it, heads that chain: it joins the group.
        It frees nothing of a predecessor, which alone told it apart (one share of its calls just beyond the
        groups' tolerance), and as a group of its own it ran beside the chain from the start (thread_churn:
        its first worker made the model hold one thread more at once than the program)."""
        born = self.col.born
        first = {id(g): min(g, key=lambda s: born.get(s.tid, 0)) for g in groups if len(g) > 1}
        chains = {}
        for g in groups:
            tids = {m.tid for m in g}
            if len(g) > 1 and any(_dest(k) in tids for s in g for k in s.total.c):
                chains[first[id(g)].tid] = g
        out = []
        for g in groups:
            head = g[0]
            dests = {_dest(k) for k in head.total.c} - {None}
            chain = chains.get(next(iter(dests))) if len(g) == 1 and len(dests) == 1 else None
            if chain is not None and born.get(head.tid, 0) < born.get(first[id(chain)].tid, 0) \
                    and alike_but_receives(head.feature(), first[id(chain)].feature()):
                chain.insert(0, head)
            else:
                out.append(g)
        return out

    def _churn(self) -> Dict[str, int]:
        """Group name -> K for the groups whose threads were not all alive at once in the capture (its
        thread starts and exits show it): `thread NAME * N at most K`. Their threads are put in the order
        they started: the model starts thread i + K when thread i ends."""
        if not self.col.thread_starts:
            return {}
        out = {}
        born = self.col.born
        for g in self.groups:
            k = self.col.alive_at_most(g.tids)
            if g.n > 1 and 0 < k < g.n:
                out[g.name] = k
                g.summaries.sort(key=lambda s: born.get(s.tid, 0))
                g.tids[:] = [s.tid for s in g.summaries]
        return out

    def group_named(self, name: str) -> Group:
        return next(g for g in self.groups if g.name == name)

    def ring_channels(self, name: str) -> int:
        """How many channels group `name`'s ring has: one per thread, or fewer when at most K of its threads
        are alive at once (thread i + K starts when thread i ends), each channel shared by the threads whose
        indices it is modulo that number (model_plan._ring_ops).

        Sharing is safe when a thread that sends into a channel, or receives from it, starts only after its
        previous receiver has ended (and so emptied it). Let a be the first thread not ended. Thread a + d
        can have started when d < K, or when thread a + d - K has ended, which needs it started and its
        predecessor a + d - K - 1 started (its sends received): d - K >= 1 and both in that set. The set is
        finite (K=2: 0, 1, 3; K=3: 0, 1, 2, 4, 5, 8), its largest d sends into a + d + 1: d + 2 channels
        suffice (K=2: 5, K=3: 10). K + 1 did not: thread i + 1 may end before thread i, its successor
        i + 1 + K then started while thread i still received, and took thread i's objects (a hang)."""
        n = self.group_named(name).n
        k = self.churn.get(name)
        if not k:
            return n
        started = set(range(k))
        d = k
        while d <= max(started) + k + 1:
            if d - k >= 1 and d - k in started and d - k - 1 in started:
                started.add(d)
            d += 1
        return min(n, max(started) + 2)

    # ---------------------------------------------------------------- flows
    def _flows(self) -> None:
        """Objects handed between groups, over a forest of channels; each channel holds as many objects as
        were in flight at once between those groups in the capture.

        Bounded channels keep the model's producers from running ahead of their consumers (its peak of live
        bytes stays the capture's), but the statements spread each thread's sends evenly over its phase, and
        its receives too, or (a lone thread's) where the capture freed them (model_plan._placed_receives):
        never in the capture's order against the other threads' calls, so any loop of channels, whatever
        their directions, could deadlock: the heaviest flows that form no loop keep their channel (a
        maximum spanning forest), the others are freed by their owner itself, and a note says so.

        Why a forest cannot wait forever. A thread waits only at a barrier, at a `recv` on an empty channel
        or at a `send` on a full one. Per phase, a thread receives the capture's frees of the flow in that
        phase, less those that waited for the senders' phase to end, plus the phase before's that did
        (_late_receives): wherever in phase p a receive is placed, it needs only objects sent in phase p or
        before (the capture freed nothing before it was made). A channel holds at least what the statements
        leave in it at a barrier (_barrier_carry). So a thread waiting on a channel whose other side is at
        the barrier (or ended) is woken: a receiver finds what it needs sent, a sender finds room. Were every
        thread still running waiting, each waiting on a channel would have its other side waiting on another
        channel (one channel is not empty and full at once), which in a forest leads away from it: a path
        that never comes back, in a finite forest, ends at a thread that does not wait on a channel. Where
        in its phase a receive is placed does not enter: only the counts per phase do, which placing keeps
        as captured. ensure_finishes (trace/model/__init__.py) still runs the model, and rewrites it without
        back-pressure, then without channels, if it stops (a ring's threads, or the runtime, could)."""
        self.handoffs = True          # False once drop_handoffs: no channel, no ring
        self.unbounded = False        # True once unbound_channels: every channel holds all it carries
        self.edges = self._channel_forest()
        self._ordered_by_pairs: set = set()
        self.paired = {edge for edge in sorted(self.edges) if self._pair_threads(*edge)}
        self.ring_depth = self._ring_depths()
        self.late_recvs = self._late_receives()
        self.capacity = {}
        self.batch: Dict[Tuple[str, str], int] = {}
        self.carry: Dict[Tuple[str, str], int] = {}    # capacities raised to what a barrier leaves in the channel
        tids = {g.name: g.tids for g in self.groups}
        for (src, dst), n in self.edges.items():
            if (src, dst) in self.paired:
                each = [self.col.in_flight([(a, b)]) for a, b in zip(tids[src], tids[dst])]
                most = None if None in each else max(each)
            else:
                most = self.col.in_flight([(a, b) for a in tids[src] for b in tids[dst]])
            if most is None:
                self.notes.append(f"channel {src}_to_{dst} may hold all {n} objects at once: too many handoffs "
                                  f"to measure how many were in flight in the capture")
            self.capacity[src, dst] = max(1, min(n, MAX_CAPACITY, most if most is not None else n))
            self._batch_receives(src, dst, n, most)
            carry = self._barrier_carry(src, dst)
            if carry > self.capacity[src, dst]:
                self.carry[src, dst] = carry
                self.capacity[src, dst] = min(carry, MAX_CAPACITY)

    def unbound_channels(self) -> None:
        """Every channel between groups holds all the objects it carries (up to MAX_CAPACITY): a send never
        waits, and a note says the back-pressure is gone. The first fallback of a model that stopped making
        progress: its producers filled a channel whose receivers take their objects only in a later phase,
        after the barrier the producers cannot reach (node with worker threads: main sent 289 objects to a
        channel of 144 in one phase, its receivers took most of them in the next)."""
        self.unbounded = True
        for edge, n in self.edges.items():
            self.capacity[edge] = max(self.capacity[edge], min(n, MAX_CAPACITY))
        self.batch = {}
        self.notes.append("channels hold every object they carry: the model with the capture's capacities (its "
                          "most in flight) stopped making progress, its senders waiting on full channels and its "
                          "receivers at a barrier; the back-pressure between its threads is gone")

    def drop_handoffs(self) -> None:
        """No channel at all, rings included: every object handed to another thread is freed by its own thread
        (`lives`, from its thread's table), and a note says so. The model's threads then wait for nothing but
        barriers, which every thread still running meets (a finished thread leaves the count), so the model
        cannot wait forever: the fallback of a model with channels that stopped making progress
        (trace/model/__init__.py, ensure_finishes)."""
        handed = sum(self.edges.values())
        self.handoffs = False
        self.edges, self.paired, self.capacity, self.batch = {}, set(), {}, {}
        self.ring_depth, self.late_recvs, self.recv_frees = {}, {}, {}
        self.notes.append(f"no channels: the model with channels between its threads stopped making progress (its "
                          f"threads waiting on one another), so the {handed} objects handed between groups, and "
                          f"those handed around a group's threads, are freed by the thread that made them")

    def _batch_receives(self, src: str, dst: str, n: int, most: Optional[int]) -> None:
        """A flow whose receivers freed its objects in runs (Collector.receive_run: B in a row, the median,
        at least 2) is received B at a time, each batch freed once whole: the objects in flight then go up
        and down between 0 and B as in the capture (python's pc.py: its GIL lets the producer fill the queue
        of 64, then the consumer empty it), where a model receiving one by one kept its channel nearly empty.
        The model's peak of live bytes moves little with it (pc.py's peak is main's held objects,
        model_held._others_done); its rhythm of frees is the capture's. The
        channel then holds what a batch leaves of the capture's most in flight, and at least the receives
        that wait for the senders' phase to end (model_shape._late_receives)."""
        senders, receivers = self.group_named(src).tids, self.group_named(dst).tids
        runs = [self.col.receive_run([pair]) for pair in zip(senders, receivers)] if (src, dst) in self.paired \
            else [self.col.receive_run([(a, b) for a in senders for b in receivers])]
        batch = min(runs)
        if batch < 2 or n < 2 * batch or most is None:
            return
        late = max((sum(x) for x in zip(*[self.late_recvs[src, t] for t in receivers
                                          if (src, t) in self.late_recvs])), default=0)
        self.batch[src, dst] = batch
        self.capacity[src, dst] = max(1, most - batch, late)

    def _barrier_carry(self, src: str, dst: str) -> int:
        """The most objects the model's statements leave in the channel src -> dst at a barrier (per pair of
        threads for a paired flow): what its senders sent up to there less what its receivers took. At a
        barrier the receivers hold no batch (a batch is received whole inside a phase), and the receives
        that waited for the senders' phase to end (_late_receives) come only after it: the channel holds
        every object in flight then, or a sender waits on a full channel while its receivers wait at the
        barrier, for ever. A capacity of the most in flight less a batch fell short of that (node's worker
        threads: 289 sent in a phase, one batch of 144 taken in it, 145 left for a channel of 144). Where a
        lone thread's receives are placed in their phase (model_plan._placed_receives) does not change it:
        their counts per phase are the same, and so is what a barrier leaves."""
        a, b = self.group_named(src), self.group_named(dst)
        phases = len(self.phases)
        teams = [([x], [y]) for x, y in zip(a.summaries, b.summaries)] if (src, dst) in self.paired \
            else [(a.summaries, b.summaries)]
        worst = 0
        for senders, receivers in teams:
            to, sent_by = {s.tid for s in receivers}, {s.tid for s in senders}
            late = [sum(self.late_recvs.get((src, r.tid), [0] * phases)[p] for r in receivers) for p in range(phases)]
            left = 0
            for p in range(phases):
                left += sum(v for s in senders for k, v in s.phases[p].c.items() if _dest(k) in to)
                left -= sum(v for r in receivers for k, v in r.phases[p].c.items()
                            if isinstance(k, tuple) and k[0] == "recv" and k[1] in sent_by)
                left += late[p] - (late[p - 1] if p else 0)
                worst = max(worst, left)
        return worst

    def _pair_threads(self, src: str, dst: str) -> bool:
        """Whether each thread of group src hands its objects to one thread of group dst, each to a different
        one (bench/programs/prodcons.c: producer i to consumer i). Then dst's threads are put in the order of
        their partners and the flow gets a channel per pair (`src_to_dst[self]`): over one channel shared by
        all, each consumer freed every producer's blocks, and jemalloc's peak RSS on the model was far
        above the program's (which frees each block in its partner's arena only). A group whose order an earlier pair
        of groups fixed keeps it: a pairing that needs another order is not made."""
        a, b = self.group_named(src), self.group_named(dst)
        if a.n < 2 or a.n != b.n or src in self.churn or dst in self.churn:
            return False
        partner, b_tids = {}, set(b.tids)
        for summary in a.summaries:
            dests = {d for d in (_dest(k) for k, n in summary.total.c.items() if n) if d in b_tids}
            if len(dests) != 1:
                return False
            partner[summary.tid] = dests.pop()
        order = [partner[t] for t in a.tids]
        if len(set(order)) != b.n or (dst in self._ordered_by_pairs and order != b.tids):
            return False
        where = {tid: i for i, tid in enumerate(order)}
        b.summaries.sort(key=lambda s: where[s.tid])
        b.tids[:] = order
        self._ordered_by_pairs |= {src, dst}
        return True

    def channel(self, src: str, dst: str) -> str:
        """The channel from group src to group dst, as a thread of either names it."""
        return f"{src}_to_{dst}[self]" if (src, dst) in self.paired else f"{src}_to_{dst}"

    def _channel_forest(self) -> Dict[Tuple[str, str], int]:
        """(source group, destination group) -> objects handed, for the flows that keep their channel."""
        edges: Counter = Counter()
        for g in self.groups:
            for s in g.summaries:
                for k, n in s.total.c.items():
                    dest = _dest(k)
                    if dest is not None and self.group_of[dest] is not g:
                        edges[g.name, self.group_of[dest].name] += n
        tree = {g.name: g.name for g in self.groups}

        def root(name):
            while tree[name] != name:
                name = tree[name]
            return name

        kept = {}
        for (src, dst), n in sorted(edges.items(), key=lambda en: (-en[1], en[0])):
            if not n:
                continue
            a, b = root(src), root(dst)
            if a != b:
                tree[a] = b
                kept[src, dst] = n
                continue
            self.notes.append(f"{n} objects allocated by {src} and freed by {dst} are freed by {src} itself in the "
                              f"model: a channel for them would close a loop of channels, which could deadlock")
        return kept

    def _ring_depths(self) -> Dict[str, int]:
        """Group name -> objects its threads send, all together, before their first step of the ring.

        The model's ring holds as many objects most of the time as the capture's did: the median, over its
        calls, of the objects the group's threads handed to one another in flight at once. Besides those
        primed, a thread of the model holds one while it waits mid-step (its object sent, its predecessor's
        not yet come), and all but the one running wait most of the time: the median less n - 1
        (mt_pthread_crashed_e: 4 in flight most of the time, 8 once; primed from the most, 1 per thread,
        the model held far more than the capture most of the time; primed with the median less n - 1, about
        what the capture held).
        A group whose threads come and go (churn) has its threads' sends in flight all along, not a
        loop's: the most in flight per thread alive, less one, per thread."""
        depth = {}
        for g in self.groups:
            if g.n < 2:
                continue
            pairs = [(a, b) for a in g.tids for b in g.tids if b != a]
            alive = self.churn.get(g.name)
            if alive:
                most = self.col.in_flight(pairs) or 0
                depth[g.name] = g.n * max(0, (2 * most + alive) // (2 * alive) - 1)   # most / alive, rounded, - 1
            else:
                depth[g.name] = max(0, (self.col.typical_in_flight(pairs) or 0) - (g.n - 1))
        return depth

    def _late_receives(self) -> Dict[Tuple[str, int], List[int]]:
        """(sending group, receiving thread) -> per phase, the objects of that flow the thread freed after the
        sending group's last allocation, in that phase, of an object handed to the receiving group: the
        receiver waited for the senders to be done (a main thread that frees its workers' results once it
        has joined them). In the model a receive runs as soon as its object is sent, so these wait for the
        phase's barrier: they run at the start of the next phase (model_plan). The last phase's stay (no
        barrier follows). All of them were in flight at once at that allocation: the channel, which holds
        as many as the capture's most in flight, holds them. Empty when too many handoffs were seen.

        On the way, the ordinals of the other receives (self.recv_frees: (sending group, receiving thread)
        -> the ordinals of its frees of that flow's objects, in order, the late ones left out), where a lone
        receiving thread's receives are placed (receive_places)."""
        late: Dict[Tuple[str, int], List[int]] = {}
        self.recv_frees: Dict[Tuple[str, int], List[int]] = {}
        col, last = self.col, len(self.phases) - 1
        if col.handoff_count > MAX_HANDOFFS:
            return late
        tids = {g.name: g.tids for g in self.groups}
        for src, dst in self.edges:
            spans = [(pair[1], sp[i], sp[i + 1]) for pair in ((a, b) for a in tids[src] for b in tids[dst])
                     for sp in (col.handoffs.get(pair, ()),) for i in range(0, len(sp), 2)]
            last_alloc = [-1] * len(self.phases)
            for _, a, _ in spans:
                pi = self.phase_of((a,))
                last_alloc[pi] = max(last_alloc[pi], a)
            lone = len(tids[dst]) == 1
            for freer, _, f in spans:
                pi = self.phase_of((f,))
                if pi < last and 0 <= last_alloc[pi] < f:
                    late.setdefault((src, freer), [0] * len(self.phases))[pi] += 1
                elif lone:
                    self.recv_frees.setdefault((src, freer), []).append(f)
        for frees in self.recv_frees.values():
            frees.sort()
        return late

    def receive_places(self, src: str, tid: int, pi: int) -> Optional[List[float]]:
        """How far into phase pi (0-based), on thread tid's `lives` clock (0 .. 1), thread tid, alone in its
        group, freed each object it received from group src, in order, but for those that waited for the
        senders' phase to end (_late_receives). The collector keeps a handoff's ordinals, not the receiver's
        clock: inside a window (Collector.window calls of all threads) the thread's ticks are taken as evenly
        spread over its calls (a window of node's capture held 8192 calls; its last phase three windows). None
        when the capture's handoffs were not all kept (too many), or the receiver's group has several threads."""
        if self.col.handoff_count > MAX_HANDOFFS or len(self.group_of[tid].tids) != 1:
            return None
        window, thread_windows = self.col.window, self.col.thread_windows[tid]
        lo, ticks = self.clock_span(tid, pi)
        before, clock_at_window = 0, []
        for c in thread_windows:
            clock_at_window.append(before)
            before += c.c["ticks"] if c is not None else 0
        out = []
        for f in self.recv_frees.get((src, tid), ()):
            if self.phase_of((f,)) != pi:
                continue
            w = min(f // window, len(thread_windows) - 1)
            c = thread_windows[w]
            inside = (f - w * window + 0.5) / window * (c.c["ticks"] if c is not None else 0)
            out.append(min(max((clock_at_window[w] + inside - lo) / ticks, 0.0), 1.0))
        return out

    def sent_on(self, g: Group, tid: int) -> bool:
        """Whether group g's objects freed by thread tid are handed over in the model (its ring or a channel)."""
        dest = self.group_of[tid]
        return dest is g or (g.name, dest.name) in self.edges

    # ---------------------------------------------------------------- big chains and big objects
    def _lone_threads(self):
        """(group, its thread, its summary) of each group of one thread: the big chains and big objects are
        written one by one in those only."""
        for g in self.groups:
            if g.n == 1:
                yield g, g.tids[0], g.summaries[0]

    def _take_big_chains(self) -> None:
        """The big realloc chains of each single-thread group (model_fit.big_chains) are written step by step
        (self.big: group name -> [(chain, slot)]); their starts, reallocs and ends leave the thread's figures,
        which the other statements model as before."""
        self.big: Dict[str, list] = {}
        col = self.col
        for g, tid, summary in self._lone_threads():
            chains = big_chains([t for _, _, t in col.trails.get(tid, [])], col.trail_dropped[tid],
                                summary.total.rsizes, col.peak_bytes)
            if not chains:
                continue
            self.big[g.name] = list(zip(chains, chain_slots(chains)))
            for t in chains:
                self._take_chain(summary, t)

    def _take_chain(self, summary: ThreadSummary, t) -> None:
        """A big chain (model_collect.Trail) out of its thread's figures: its start, reallocs and end, each
        from the phase it came in and from the total."""
        takes = [("start", t.start, t.size)] + [("realloc", o, n) for o, n in t.steps] + \
            [("end", t.end, 0)]
        for what, o, nbytes in takes:
            if what == "end" and t.how == "local" and o is not None:
                key = ("end", "local", None)
            elif what == "end":
                key, o = ("end", "end", None), None
            elif what == "start":
                key = ("start", t.mk)
            else:
                key = "realloc"
            phase = summary.phases[self.phase_of(o)]
            # a start frees its empty slot first (free(NULL): the checker cannot follow a slot
            # through the rounds' `if`s), one of the capture's free(NULL) when it has one left
            null = what == "start" and phase.c["free_null"] > 0
            for thread_window in (phase, summary.total):
                thread_window.c[key] -= 1
                thread_window.c["free_null"] -= null
                if what == "realloc":
                    _take(thread_window.rsizes, nbytes)
                elif what == "start":
                    _take(thread_window.sizes, nbytes)
                    _take(thread_window.starts, nbytes)

    def _take_big_objects(self) -> None:
        """The big objects of each single-thread group (model_fit.big_objects) are written one by one
        (self.big_objects: group name -> records); they leave the thread's figures (sizes, lifetimes, counts),
        which the other statements model as before."""
        self.big_objects: Dict[str, list] = {}
        col = self.col
        for g, tid, summary in self._lone_threads():
            records = big_objects([r for _, _, r in col.big_objects.get(tid, [])], col.big_dropped[tid],
                                  col.peak_bytes)
            records = self._with_long_big_objects(g, tid, summary, records)
            records = self._with_big_kept(g, tid, summary, records)
            if records:
                self.big_objects[g.name] = records
            for r in records:
                for thread_window in (summary.phases[self.phase_of(r.at)], summary.total):
                    _take_object(thread_window, r)
                w = r.at[0] // col.window
                wd = r.end // col.window if r.how == "local" else None
                # its figures in `dies` (not among the held objects, below, too): recorded when it was freed in
                # a later window than its own; one freed in its own window is not there (nor, once windows
                # merged, one freed in the next window, which halving put under the same window: never held)
                if wd is not None and wd != w and wd in col.thread_windows[tid][w].dies:
                    entry = col.thread_windows[tid][w].dies[wd][size_class(r.size)]
                    _take_from_class(entry, r.size, r.life)
                    entry[4][r.mk] -= 1

    def _with_big_kept(self, g: Group, tid: int, summary: ThreadSummary, records: list) -> list:
        """The big objects of thread tid (records) with its largest objects still live at the end that are
        written one by one (model_fit.big_kept_objects), `lives forever` where they came."""
        col = self.col
        have = {r.at[0] for r in records}
        kept = {b: list(h) for b, h in summary.total.kept.items()}
        for r in records:
            if r.how == "kept":
                _take(kept, r.size)
        mine = [k for k in col.kept_big if k[0] == tid and k[1] not in have]
        extra = []
        for _, o, t, nbytes, mk in big_kept_objects(mine, kept, col.peak_bytes):
            r = BigObject((o, t), nbytes, mk)
            r.how = "kept"
            extra.append(r)
        if not extra:
            return records
        self.notes.append(f"{len(extra)} objects of {g.name} still live at the end ({sum(r.size for r in extra)} bytes, "
                          f"the largest), are written one by one with their sizes where they came: drawn from the kept "
                          f"objects' sizes, they made the model's last live bytes a chance of the draws")
        return sorted(records + extra, key=lambda r: r.at)

    def _with_long_big_objects(self, g: Group, tid: int, summary: ThreadSummary, records: list) -> list:
        """The big objects of thread tid (records) with its big objects that live long (model_fit.long_big_objects)
        not among them yet, in the order they came: of those live at the capture's peak and freed after it (the
        collector keeps them all, up to MAX_PEAK_FREED) and of the thread's largest (it keeps MAX_BIG_OBJECTS)."""
        col = self.col
        have = {r.at[0] for r in records}
        candidates = {}
        for record in (() if col.peak_overflow else col.peak_freed):
            if record[0] == tid and record[1] not in have:
                candidates[record[1]] = _freed_object(record)
        for _, _, r in col.big_objects.get(tid, []):
            if r.at[0] not in have:
                candidates.setdefault(r.at[0], r)
        phases = []
        for pi, p in enumerate(summary.phases):
            by_class = {cls: sum(kinds.values()) for cls, kinds in class_kinds(p.c).items()}
            cls = large_class(p.lives_by_class) if p.lives_by_class else None
            phases.append(PhaseLarge(pi, self.clock_span(tid, pi)[1], cls, by_class))
        extra = long_big_objects(list(candidates.values()), col.peak_bytes, lambda r: phases[self.phase_of(r.at)])
        if not extra:
            return records
        self.notes.append(f"{len(extra)} large objects of {g.name}, of 1/{round(1 / BIG_OBJECT_SHARE)} of the capture's "
                          f"peak of live bytes or more each and living 1/{round(1 / LONG_LIFE_SHARE)} of their phase "
                          f"or more ({sum(r.size for r in extra)} bytes in all), are written one by one with their "
                          f"sizes and lifetimes where they came")
        return sorted(records + extra, key=lambda r: r.at)

    def _take_held_objects(self) -> None:
        """The objects of each single-thread group freed by their thread in a later phase than their own, or
        a part of their phase later at least (_outlives_part) (self.held: group name -> {(phase, phase of their
        free): [sizes, Counter((window, kind) -> objects)]}, and
        self.held_frees: group name -> {phase: Counter(window of the free -> objects)}). A program's
        start-up builds objects that live until its teardown: with lifetimes drawn from the phase's table
        wherever they come in the phase, as many of them die inside it as outlive it, and the live objects
        never pile up as they did (python3 start-up: far fewer live at the peak than in the capture); likewise in a
        phase that starts up, then works (py_work.py: the import's objects that die before its work). They are
        allocated into a pool in their phase and freed from it where the capture freed them; they leave the
        thread's figures (sizes, lifetimes, counts), which the other statements model as before."""
        self.held: Dict[str, dict] = {}
        self.held_frees: Dict[str, dict] = {}
        col = self.col
        for g, tid, summary in self._lone_threads():
            held: dict = {}
            frees: Dict[int, Counter] = {}
            thread_windows = col.thread_windows[tid]
            for pi, p in enumerate(self.phases):
                for w in range(p.start, min(p.end, len(thread_windows))):
                    for wd, by_class in (thread_windows[w].dies.items() if thread_windows[w] is not None else ()):
                        if not _outlives_part(p, w, wd):
                            continue
                        qi = self._phase_of_window(wd)
                        for cls, entry in by_class.items():
                            kinds = +entry[4]
                            if not kinds:
                                continue
                            for c in (summary.phases[pi], summary.total):
                                _take_class(c, cls, entry, kinds)
                            sizes, births = held.setdefault((pi, qi), [{}, Counter()])
                            merge_hist(sizes, entry[3])
                            for mk, n in kinds.items():
                                births[w, mk] += n
                            frees.setdefault(qi, Counter())[wd] += sum(kinds.values())
            if held:
                self.held[g.name], self.held_frees[g.name] = held, frees

    def _take_bursts(self) -> None:
        """The objects of each single-thread group live at the capture's peak that came in a burst
        (model_fit.burst_objects), with its held objects that the peak holds made and freed in its phase,
        are made where they came and freed together after the peak (self.bursts: group name -> (phase of the
        peak, BigObjects); trace/model/burst.py); they leave the thread's figures (sizes, lifetimes, counts) or
        its held objects, which the other statements model as before. Held in the pool of the phase that frees
        them, a random one of them was freed at each of its frees of held objects before the peak, big ones
        too (node: 16 of 535 KB, drawn from the held objects' sizes among 900; its model held 0.82-0.89x of
        the capture's peak). The big objects are written one by one already. Without a burst, the held objects
        the peak holds are still freed after it (_held_after_peak)."""
        self.bursts: Dict[str, tuple] = {}
        self.held_after_peak: Dict[str, tuple] = {}
        col = self.col
        if col.peak_overflow:
            self.notes.append(f"the capture's peak of live bytes held more than {MAX_PEAK_FREED} objects that were "
                              f"freed after it: none of them is made into a burst, nor freed after the peak for it")
        peak_phase = self._phase_of_window(max(col.peak_ordinal, 0) // col.window)
        for g, tid, summary in self._lone_threads():
            big_at = {r.at[0] for r in self.big_objects.get(g.name, [])}
            records, held, held_ends = [], [], []
            for r in col.peak_freed:
                if r[0] != tid or r[1] in big_at:
                    continue
                w, wd = r[1] // col.window, r[6] // col.window
                pi = self._phase_of_window(w)
                if not _outlives_part(self.phases[pi], w, wd):
                    records.append(r)           # made and freed in the phase of the peak
                elif self._phase_of_window(wd) == peak_phase:
                    (held if pi == peak_phase else held_ends).append(r)
            held_ends = [(r[2] + r[5], r[6], r[6] // col.window) for r in held_ends]
            if not records and not held:
                self._held_after_peak(g, peak_phase, held_ends)
                continue
            _, ticks = self.clock_span(tid, peak_phase)
            # what the phase's other objects keep live on average, by size class: a short phase that is mostly
            # the burst (node's last, 5 windows) has the burst's own objects for most of its figures
            mass = {cls: entry[2] for cls, entry in summary.phases[peak_phase].lives_by_class.items()}
            for r in records:
                mass[size_class(r[3])] = mass.get(size_class(r[3]), 0) - r[3] * r[5]
            mean_live = {cls: max(m, 0) / ticks for cls, m in mass.items()}
            # without a burst, the held objects the peak holds alone: freed after it from the phase's pool, a
            # random one of those left at each free before it, the peak held the pool's sizes, not theirs (cc1:
            # 246 of 425, 197 KB in the capture, twice that in the model)
            chosen = burst_objects(records, mean_live, col.peak_bytes, held) or sorted(held, key=lambda r: r[1])
            self._held_after_peak(g, peak_phase, held_ends)
            if not chosen:
                continue
            held_o = {r[1] for r in held}
            objects = []
            for record in chosen:
                r = _freed_object(record)
                objects.append(r)
                w, wd = r.at[0] // col.window, r.end // col.window
                if r.at[0] in held_o:
                    self._take_held(g, self._phase_of_window(w), peak_phase, w, wd, r.size, r.mk)
                    continue
                for thread_window in (summary.phases[peak_phase], summary.total):
                    _take_object(thread_window, r)
                if wd != w and wd in col.thread_windows[tid][w].dies:
                    entry = col.thread_windows[tid][w].dies[wd][size_class(r.size)]
                    _take_from_class(entry, r.size, r.life)
                    entry[4][r.mk] -= 1
            self.bursts[g.name] = (peak_phase, objects)
            self.notes.append(f"{len(objects)} objects of {g.name} live at the capture's peak of live bytes "
                              f"({sum(r.size for r in objects)} bytes), made in phase {peak_phase + 1} and freed "
                              f"after the peak, are made into the pool `burst` where they came and freed together "
                              f"(`free_all`) where the middle of their frees came")

    def _take_held(self, g: Group, pi: int, qi: int, w: int, wd: int, nbytes: int, mk) -> None:
        """One held object made in window w of phase pi and freed in window wd of phase qi out of the group's
        held objects (_take_held_objects): its size, its birth, its free."""
        sizes, births = self.held[g.name][pi, qi]
        _take(sizes, nbytes)
        births[w, mk] -= 1
        if births[w, mk] <= 0:
            del births[w, mk]
        frees = self.held_frees[g.name][qi]
        frees[wd] -= 1
        if frees[wd] <= 0:
            del frees[wd]
        if not births:
            del self.held[g.name][pi, qi]
            if not self.held[g.name]:
                del self.held[g.name]

    def _held_after_peak(self, g: Group, peak_phase: int, ends: list) -> None:
        """The held objects of group g live at the capture's peak and freed after it in the peak's phase (ends:
        (clock, ordinal, window) of each free): freed after the peak (self.held_after_peak: group name ->
        (phase, (clock, window) of their frees in order, the ordinal of the first)), not spread over the windows of their
        frees, where some came before it (sqlite3: a teardown right after its peak freed in the model from
        the start of its window; the model's peak 0.88x the capture's)."""
        frees = self.held_frees.get(g.name, {}).get(peak_phase)
        if not ends or not frees:
            return
        for _, _, wd in ends:
            frees[wd] -= 1
        for wd in [wd for wd, n in frees.items() if n <= 0]:
            del frees[wd]
        self.held_after_peak[g.name] = (peak_phase, sorted((c, wd) for c, _, wd in ends),
                                         min(o for _, o, _ in ends))

    # ---------------------------------------------------------------- places in the capture
    def part_of(self, w: int) -> Tuple[int, int]:
        """(phase, part) of window w: each phase cut in HELD_PARTS parts of as many windows (the last ones
        longer)."""
        pi = self._phase_of_window(w)
        p = self.phases[pi]
        return pi, min((w - p.start) * HELD_PARTS // max(p.end - p.start, 1), HELD_PARTS - 1)

    def _phase_of_window(self, w: int) -> int:
        return next((i for i, p in enumerate(self.phases) if p.start <= w < p.end), len(self.phases) - 1)

    def map_records(self, g: Group) -> Optional[list]:
        """The program's own writable mappings of a group of one thread, one by one (collect.MapRecord), when
        the collector kept them all; None otherwise (they are drawn from histograms, but for the big ones:
        self.big_maps)."""
        if g.n != 1:
            return None
        records = self.col.map_records.get(g.tids[0], [])
        return None if records is None else [r for r in records if r.size > 0]

    def _take_big_maps(self) -> None:
        """The big mappings of each single-thread group whose mappings are drawn from histograms (of
        BIG_OBJECT_SHARE of the capture's mapped peak or more, when the collector kept all of those) are written
        one by one (self.big_maps: group name -> MapRecords); they leave the thread's figures. Drawn at random,
        a handful of big ones among thousands of small ones came out as often as luck had it (ruby: a 32 MiB and
        a 20 MiB mapping among 3009 of 16 KiB; its model mapped 1.31x the capture's peak)."""
        self.big_maps: Dict[str, list] = {}
        col = self.col
        floor = col.mapped_writable_peak * BIG_OBJECT_SHARE
        for g, tid, summary in self._lone_threads():
            if self.map_records(g) is not None or floor <= 0 or col.big_maps_dropped[tid] >= floor:
                continue
            big = sorted((r for _, _, _, r in col.big_maps.get(tid, []) if r.size >= floor), key=lambda r: r.at)
            if not big:
                continue
            self.big_maps[g.name] = big
            for r in big:
                w = min(r.at[0] // col.window, len(col.thread_windows[tid]) - 1)
                for thread_window in (summary.phases[self._phase_of_window(w)], summary.total, col.thread_windows[tid][w]):
                    b = size_bucket(r.size)
                    if r.life is None:
                        thread_window.c["map_kept"] -= 1
                        thread_window.c["map_kept", b] -= 1
                        _take(thread_window.map_kept, r.size)
                    else:
                        thread_window.c["map"] -= 1
                        thread_window.c["map", b] -= 1
                        _take(thread_window.maps, r.size)
                        _take(thread_window.map_lives.get(b, {}), r.life, life_bucket)

    def phase_of(self, moment: Optional[tuple]) -> int:
        """The phase (index) of a call's moment (ordinal, clock); the last one for None (the end of the capture)."""
        if moment is None:
            return len(self.phases) - 1
        return self._phase_of_window(moment[0] // self.col.window)

    def clock_span(self, tid: int, pi: int) -> Tuple[int, int]:
        """Thread tid's `lives` clock where phase pi (0-based) begins, and its ticks in the phase (1 at least)."""
        thread_windows, p = self.col.thread_windows[tid], self.phases[pi]
        lo = sum(c.c["ticks"] for c in thread_windows[:p.start] if c is not None)
        return lo, max(sum(c.c["ticks"] for c in thread_windows[p.start:p.end] if c is not None), 1)

    def clock_at(self, tid: int, pi: int) -> Callable[[int], float]:
        """How far into phase pi (0-based) a moment of thread tid's `lives` clock comes, from 0 to 1 (a
        statement's `at`)."""
        lo, ticks = self.clock_span(tid, pi)
        return lambda clock: min(max(clock - 1 - lo, 0) / ticks, 1.0)

    def join_at_end(self) -> bool:
        """Whether every thread waits for the others at its end (a last barrier): when the model has several
        groups, none of them churning, and objects that `lives forever`. Such an object lives to the end of
        its thread, and in the capture its thread lived to the end (a program's main thread waits for its
        workers); a thread of the model ends when its statements are done, and one that is done early (a
        main thread that only sets up its tables) would free its objects while the others still run
        (mt_handoff_x_crashed: main's 5 KB, half the capture's peak, freed before the workers got going)."""
        if self.churn or len(self.groups) < 2:
            return False
        return any(s.total.c[k] > 0 for g in self.groups for s in g.summaries for k in list(s.total.c)
                   if isinstance(k, tuple) and k[0] == "kept") or any(self.big_objects.values())


def _freed_object(record: tuple) -> BigObject:
    """A Collector.peak_freed record (owner, ordinal, clock, bytes, kind, lifetime, ordinal of its free) as the
    record of an object freed by its own thread."""
    _, o, t, nbytes, mk, life, end = record
    r = BigObject((o, t), nbytes, mk)
    r.how, r.life, r.end = "local", life, end
    return r


def _take_object(thread_window: ThreadWindow, r) -> None:
    """A big object (model_collect.BigObject) out of a thread_window's figures: its size, and its lifetime or its
    place among the objects kept to the end."""
    _take(thread_window.sizes, r.size)
    if r.how == "kept":
        thread_window.c["kept", r.mk] -= 1
        thread_window.c["kept_ticks"] -= r.at[1]
        thread_window.c["censored"] -= 1
        _take(thread_window.kept, r.size)
        return
    cls = size_class(r.size)
    thread_window.c["lives", r.mk] -= 1
    thread_window.c["lives_class", r.mk, cls] -= 1
    _take(thread_window.lives, r.life, life_bucket)
    _take_from_class(thread_window.lives_by_class[cls], r.size, r.life)
    if not thread_window.lives_by_class[cls][0]:
        del thread_window.lives_by_class[cls]


def _outlives_part(p: Phase, w: int, wd: int) -> bool:
    """Whether an object made in window w of phase p and freed in window wd is held (ModelShape.
    _take_held_objects): freed in a later phase, or in its own phase a part of it later at least (HELD_PARTS;
    two windows at least: a short-lived object freed across a window's bound stays a `lives` one)."""
    return not p.start <= wd < p.end or (wd - w >= 2 and (wd - w) * HELD_PARTS >= p.end - p.start)


def _take_from_class(entry: list, nbytes: int, life: int) -> None:
    """One object out of a size class's figures (ThreadWindow.lives_by_class, ThreadWindow.dies)."""
    _take(entry[0], life, life_bucket)
    entry[1] -= nbytes
    entry[2] -= nbytes * life
    _take(entry[3], nbytes)


def _take_class(thread_window: ThreadWindow, cls: int, entry: list, kinds: Counter) -> None:
    """The objects of a size class's figures (a ThreadWindow.dies entry) out of a thread window's
    (sizes, lifetimes, counts)."""
    thread_window.sizes = hist_minus(thread_window.sizes, entry[3])
    thread_window.lives = hist_minus(thread_window.lives, entry[0])
    mine = thread_window.lives_by_class.get(cls)
    if mine is not None:
        for i in (0, 3):
            mine[i] = hist_minus(mine[i], entry[i])
        mine[1] -= entry[1]
        mine[2] -= entry[2]
        if not mine[0]:
            del thread_window.lives_by_class[cls]
    for mk, n in kinds.items():
        thread_window.c["lives", mk] -= n
        thread_window.c["lives_class", mk, cls] -= n


def _take(hist: dict, nbytes: int, bucket=size_bucket) -> None:
    """One object of nbytes (or one lifetime, with bucket=life_bucket) out of a histogram."""
    b = bucket(nbytes)
    h = hist.get(b)
    if h is None:
        return
    h[0] -= 1
    h[1] -= nbytes
    if h[0] <= 0:
        del hist[b]


def _dest(k):
    """The thread that frees the objects counted under key k, when another thread frees them."""
    if isinstance(k, tuple) and (k[0] == "send" or k[:2] == ("end", "send")):
        return k[2]
    return None
