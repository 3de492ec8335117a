"""The text of a fitted model: the header, the channels, a `thread` block per group, its phases' blocks.

The model's shape (phases, groups, flows) comes from trace/model/shape.py, each group's statements from
trace/model/plan.py (their sizes from trace/model/sizes.py, which writes the histogram files beside the
scenario); this module only lays them out. Every statement carries what one execution does (allocator
calls, objects left to `lives`, objects handed to another thread), so the header's model column is
computed from the statements actually written, not from the capture.
"""

import re
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from ..events import FREE_KINDS, PAGE, REALLOC_KINDS
from .collect import DENSE_GAP_NS, MAX_MAP_RECORDS, MODEL_KIND, Collector, hist_totals, merge_hist
from .files import HistogramFiles, safe_name
from .image import ProgramImage
from .plan import GroupPlan, GroupPlanner, PhasePlan
from .stmt import Stmt, alloc_text
from .shape import MAX_CAPACITY, Group, ModelShape
from .work import MEASURE_RUNS, NO_WORK_WHY, SEVERAL_THREADS_WHY, TRACER_CALL_NS, WorkCost, capture_gap_ns

NOT_MEASURED = "not measured"
PEAK_HOW = "one run of this file under glibc with the `live` probe, made by scenc convert"
BARRIER = "    barrier             # phases follow one another in every thread, as captured"
END_BARRIER = "    barrier             # the threads end together, as captured: what `lives forever` lives as long"
LINE = 110                  # longer statements are split over several lines
LEFT_OUT = ("alloc_failed", "realloc_failed", "free_unknown", "free_missed", "censored", "realloc_as_free")


def spread(count_expr: str, rounds: int, rounded: bool = False) -> str:
    """Runs in round r of `for r in 0 .. rounds`: count_expr in all, evenly spread (Bresenham). Rounded, the
    k-th run comes k - 1/2 n-ths into the rounds, not at the end of its share of them: in a group of several
    threads, which all run the same rounds, the last runs of every statement would else meet in the last
    round, in every thread at once (mt_pthread_crashed_e: four threads each grew and handed on two 1 KB
    blocks there, most of the model's peaks)."""
    if not rounded:
        return f"(r + 1) * {count_expr} / {rounds} - r * {count_expr} / {rounds}"
    half = rounds // 2
    return f"((r + 1) * {count_expr} + {half}) / {rounds} - (r * {count_expr} + {half}) / {rounds}"


SPREAD_NOTES = {
    False: ["    # `repeat (r + 1) * n / R - r * n / R` over `for r in 0 .. R`: n times, evenly spread"],
    True: ["    # `repeat ((r + 1) * n + R / 2) / R - (r * n + R / 2) / R` over `for r in 0 .. R`: n times, evenly",
           "    #   spread, rounded (the threads' last runs do not all meet in the last round)"],
}


def runtime_kind(trace_kind: str) -> str:
    """The runtime's counter for a captured kind, as the model makes it."""
    if trace_kind in FREE_KINDS:
        return "free"
    if trace_kind in REALLOC_KINDS:
        return "realloc"
    return MODEL_KIND.get(trace_kind, trace_kind)


class _Tally:
    """What the written statements make, summed over every thread."""

    def __init__(self):
        self.calls: Counter = Counter()
        self.sent = self.known_frees = self.draws = self.maps = 0
        self.bytes = 0.0

    def add(self, s: Stmt, threads: int, mean_size: float, handed_mean: float, kept_mean: float = 0.0) -> None:
        total = s.total(threads)
        for kind, n in s.calls.items():
            self.calls[kind] += n * total
        # `lives forever` under `leaks keep`: never freed, as the capture never freed it
        lives = 0 if s.text.endswith("lives forever") else s.lives
        self.calls["free"] += lives * total
        self.sent += s.sent * total
        self.known_frees += (lives + s.sent + s.local_frees) * total
        self.draws += s.draws * total
        self.maps += s.maps * total
        self.bytes += s.draws * total * (s.mean if s.mean is not None else kept_mean if s.kept and s.handed
                                         else handed_mean if s.handed else mean_size)


class ModelWriter:
    """Collected figures -> the .scn text and its .csv files (write(), again after each calibration step)."""

    def __init__(self, col: Collector, scn_path: Path, source_name: str, max_phases: int, touch: str = "none",
                 map_written: Optional[Tuple[int, str]] = None, image: Optional[ProgramImage] = None,
                 clock: Optional[str] = None):
        self.col = col
        # the program's code and files resident at its end, stood in by a mapping (trace/model/image.py); None:
        # the caller says nothing of it (the header neither)
        self.image = image
        self.image_group: Optional[str] = None    # the group whose thread(s) make the stand-in (None: none does)
        self.image_mapped = 0                     # the bytes its `map`s hold, all its threads together
        # The program's time between calls (trace/model/work.py): the capture's format, whose clock gives it
        # ('preload') or not (NO_WORK_WHY); what a unit and a call cost, once measured (None: no `work` written)
        self.clock = clock
        self.threads_at_once = col.alive_at_most(col.born)
        self.work_cost: Optional[WorkCost] = None
        self.work_why = "not measured (convert --no-measure): no `work`"
        self.work_written = 0               # `work` units the model's threads make, all threads
        self.work_by_group: Dict[str, int] = {}   # group -> `work` units one of its threads makes
        self.touch = touch                    # `touch_new`: what the program did to its new blocks
        # (percent of the pages of each of the program's own mappings written, how it was estimated), or None:
        # its mappings get touch_new as blocks do
        self.map_written = map_written
        self.scn_path = scn_path
        self.stem = scn_path.stem
        self.source_name = source_name
        self.shape = ModelShape(col, max_phases)
        self.phases, self.groups = self.shape.phases, self.shape.groups
        self.notes: List[str] = list(self.shape.notes)
        self.fits: List[str] = []
        self.data_files: List[Path] = []
        self.figures: List[Tuple[str, str, str]] = []
        self.tally_calls: Dict[str, int] = {}
        self.kept_dropped: List[str] = []     # what the model keeps and drops, for the header
        self._explained: set = set()    # each spreading formula is explained once, at its first use
        # Calibration (trace/model/__init__.py): the lifetimes of the objects freed by their own thread, in percent of the
        # fitted ones, as `param life_scale`; None: not calibrated, the fitted lifetimes as they are.
        self.life_scale: Optional[int] = None
        self.calibration: str = ""      # how the scale was found, above the param
        # The scenario's seed: 1, or the one calibrate_peak chose among those it measured (seed_why says so)
        self.seed = 1
        self.seed_why: str = ""

    # ---------------------------------------------------------------- the whole text
    def write(self) -> str:
        files = HistogramFiles(self.scn_path, self.source_name, len(self.groups) > 1, len(self.phases) > 1)
        self.fits, self.data_files, self.notes, self._explained = [], files.paths, list(self.shape.notes), set()
        tally = _Tally()
        body: List[str] = []
        rings: Dict[str, int] = {}
        written = self.map_written[0] if self.map_written else None
        self.work_written, self.work_by_group = 0, {}
        planners = [(g, GroupPlanner(self.shape, files, g, self.life_scale, written, self.work_cost))
                    for g in self.groups]
        plans = [(g, planner.plan()) for g, planner in planners]
        # A churning group's threads never meet at a last barrier: those waiting there would hold the slots
        # the group's later threads need (docs/language.md, `at most`), and the model would hang.
        join = not self.shape.churn and (self.shape.join_at_end() or any(
            s.place == "end" for _, plan in plans for phase in plan.phases for s in phase.stmts))
        self.image_group, self.image_mapped = self._image_group(plans), 0
        if self.image is not None and self.image.standin_bytes and self.image_group is None:
            self.notes.append("the stand-in for the program's image is not made: no thread makes a call of its own")
        for g, plan in plans:
            lines, ring_per_thread = self._group_text(g, plan, tally, join)
            if lines:
                body += lines + [""]
                if ring_per_thread:
                    rings[g.name] = ring_per_thread
        self.tally_calls = dict(tally.calls)
        self.fits += [fit for _, planner in planners for fit in planner.map_fits]
        text = self._header(tally)
        text += [f'scenario "{safe_name(self.stem)}"']
        text += (_wrap(self.seed_why, "# ", "#   ") if self.seed_why else []) + [f"seed {self.seed}"]
        if self.touch != "none":
            text += [f"touch_new {self.touch}    # every new block, as the program wrote them (convert --touch)"]
        # what the capture never freed (`lives forever`, blocks still grown or held at the end) the model never
        # frees: the program exited holding it, and freeing it would add calls the program never made
        text += ["leaks keep    # what the program still held at its end is never freed, as in the capture"]
        if self.life_scale is not None:
            text += _wrap(self.calibration, "# ", "#   ") + [f"param life_scale = {self.life_scale}"]
        text += self._channels(rings) + [""] + body
        return "\n".join(text).rstrip() + "\n"

    def _channels(self, rings: Dict[str, int]) -> List[str]:
        """The channels between groups, then each group's ring (rings: group -> handoffs per thread)."""
        shape = self.shape
        decls = []
        for (src, dst), total in sorted(shape.edges.items()):
            cap = shape.capacity[src, dst]
            paired = (src, dst) in shape.paired
            array, i, each = (f"[{shape.group_named(src).n}]", "[i]", " in a pair") if paired else ("", "", "")
            batch = shape.batch.get((src, dst), 0)
            most = f"at most {cap + batch} in flight at once{each}: {batch} received at a time, {cap} more waiting" \
                if batch else f"at most {cap} in flight at once{each}"
            if (src, dst) in shape.carry:
                most = (f"as many as its statements leave in it at a barrier{each}, where its receivers hold no "
                        f"batch" + (f" ({batch} received at a time)" if batch else ""))
            if shape.unbounded:
                most = f"room for all of them{each} (no back-pressure: see the notes)"
            decls.append(f"channel {src}_to_{dst}{array} capacity {cap}    # {total} objects allocated by {src}{i}, "
                         f"freed by {dst}{i}, {most}")
        for name, per_thread in sorted(rings.items()):
            n = shape.ring_channels(name)
            decls.append(f"channel {name}_ring[{n}] capacity {max(1, min(per_thread, MAX_CAPACITY))}"
                         f"    # {name}[i] hands objects to {name}[i + 1], which frees them")
        return decls

    # ---------------------------------------------------------------- a group's block
    def _group_text(self, g: Group, plan: GroupPlan, tally: _Tally, join: bool) -> Tuple[List[str], int]:
        """The `thread` block of one group (none when it makes no call of its own); how many ring handoffs
        per thread. With join, every thread ends at a last barrier, and then makes its statements placed
        'end'."""
        blocks: List[str] = []
        variables: List[str] = []
        ring_per_thread = 0
        at_end: List[Stmt] = []
        for pi, (p, phase) in enumerate(zip(self.phases, plan.phases), 1):
            if pi > 1:
                blocks.append(BARRIER)
            at_end += [s for s in phase.stmts if s.place == "end"]
            for s in phase.stmts:
                tally.add(s, g.n, phase.sizes.mean, phase.sizes.handed_mean, phase.sizes.kept_mean)
            if all(s.place == "end" for s in phase.stmts):
                why = f" (its {phase.waiting} receives wait for the other threads to end the phase)" \
                    if phase.waiting else " (its objects' `lives` end them)" if phase.events else ""
                blocks += _wrap(f"phase {pi}, lines {p.first_line}-{p.last_line}: no call of its own here{why}",
                                "    # ", "    #   ")
                continue
            variables += phase.variables
            self.work_written += phase.work * g.n
            self.work_by_group[g.name] = self.work_by_group.get(g.name, 0) + phase.work
            for s in phase.stmts:
                if "_ring[" in s.text and s.sent:
                    ring_per_thread += s.max_count(g.n)
            blocks += self._phase_block(g, pi, p, phase)
        if not any(b.startswith("    measure") for b in blocks):
            return [], 0
        blocks = _drop_trailing_barriers(blocks)
        head = self._thread_head(g, plan, blocks, variables, tally)
        head[1:1] = self._image_lines(g)
        end = self._thread_end(g, plan, tally)
        if join:
            blocks.append(END_BARRIER)
        if at_end:
            if any(not s.local_frees for s in at_end):
                blocks.append("    # the objects in flight when the capture ended (their frees lost), once every thread is done")
            if any(s.local_frees for s in at_end):
                blocks.append("    # what this thread freed once the other threads had ended (after joining them)")
            blocks += [line for s in at_end for line in (_statement_lines(s.text, 4) if s.max_count(g.n) == 1 else
                       [f"    repeat {s.per_thread} {{"] + _statement_lines(s.text, 8) + ["    }"])]
        return head + blocks + end + ["}"], ring_per_thread

    def _image_group(self, plans) -> Optional[str]:
        """The group that maps the stand-in for the program's image: the first-born thread's, each of its threads
        a share when it has several, else the first group of one thread, else the first; not one that makes no call
        of its own (it has no block to map it in). Under the model's `leaks keep` a `lives forever` mapping stays
        to the end of the process, whenever its thread ends."""
        if self.image is None or not self.image.standin_bytes:
            return None
        leader = min(self.col.thread_windows) if self.col.thread_windows else 0
        ready = [g for g, plan in plans if any(any(s.place != "end" for s in phase.stmts) for phase in plan.phases)]
        ready.sort(key=lambda g: (leader not in g.tids, g.n > 1))
        return ready[0].name if ready else None

    def _image_lines(self, g: Group) -> List[str]:
        """The stand-in for the program's image, in its group's thread(s), before the phases."""
        if g.name != self.image_group:
            return []
        pages = -(-self.image.standin_bytes // PAGE // g.n)
        self.image_mapped = pages * PAGE * g.n
        share = f", 1/{g.n} of it in each thread of the group" if g.n > 1 else ""
        return _wrap(f"the program's image: its code and files resident at its end, less a model's own (the "
                     f"header's `image`){share}: written whole, never unmapped, the same under every "
                     f"allocator", "    # ", "    #   ") + \
            [f"    map({pages * PAGE}, percent_written = 100) lives forever"]

    def _phase_block(self, g: Group, pi: int, p, phase: PhasePlan) -> List[str]:
        """A phase's comment (its lifetimes' fit, also in the summary) and its `measure` block."""
        has_lives = any(s.lives and not s.kept for s in phase.stmts)
        # a group that frees none of its objects itself in the capture may still keep those whose
        # handoff was cut: they have no lifetimes to fit and are freed at once
        comment = (phase.sizes.comment or "objects whose handoff was cut are freed at once (`lives 0`)") \
            if has_lives else ""
        if has_lives:
            self.fits.append(f"{g.name}, phase {pi}: {comment}")
        out = _wrap(f"phase {pi}, lines {p.first_line}-{p.last_line}" + (f": {comment}" if has_lives else ""),
                    "    # ", "    #   ")
        return out + [f'    measure "phase {pi}" {{'] + _phase_body(phase.stmts, g.n, phase.work) + ["    }"]

    def _thread_head(self, g: Group, plan: GroupPlan, blocks: List[str], variables: List[str],
                     tally: _Tally) -> List[str]:
        """`thread NAME ...` and the declarations before the phases: pools, counts, the first grown block."""
        chains = plan.chains
        tids = ", ".join(map(str, g.tids[:8])) + (", ..." if g.n > 8 else "")
        churn = f" at most {self.shape.churn[g.name]}" if g.name in self.shape.churn else ""
        out = [f"thread {g.name}{f' * {g.n}' if g.n > 1 else ''}{churn} {{    # captured thread(s) {tids}"]
        if churn:
            out.append(f"    # at most {self.shape.churn[g.name]} of these threads were alive at once in the capture")
        if any("none[0]" in b for b in blocks):
            out.append("    pool none[1]        # stays empty: free(none[0]) is the capture's free(NULL)"
                       + (", realloc(none[0], n) its realloc(NULL, n)" if any("realloc(none[0]" in b for b in blocks)
                          else ""))
        out += [f"    {v}" for v in variables]
        if chains.in_pool and chains.slots > 1:
            out.append(f"    pool grow[{chains.slots}]        # the blocks this thread grows with realloc, as many as "
                       f"it held at once in the capture")
        elif chains.in_pool:
            out.append("    pool grow[1]        # the block this thread grows with realloc" + ("" if chains.initial
                                                                                         else "; empty at first"))
        for q, n in plan.held.items():
            out.append(f"    pool held_p{q}[{n}]        # objects made before phase {q} or early in it, freed in it: "
                       f"both where captured")
            out.append(f"    in_p{q} = 0")
            out.append(f"    out_p{q} = 0")
        if plan.burst:
            out.append(f"    pool burst[{plan.burst}]        # objects live at the peak of live bytes, made where "
                       f"captured and freed together after it")
            out.append("    in_burst = 0")
        for (src, dst), batch in sorted(self.shape.batch.items()):
            if dst == g.name and any(f"free_all(from_{src})" in b for b in blocks):
                out.append(f"    pool from_{src}[{batch}]        # {src}'s objects, received {batch} at a time as "
                           f"the capture freed them, then freed together")
        if chains.big_slots:
            out.append(f"    pool big[{chains.big_slots}]         # the big buffers grown by realloc, step by step "
                       f"as captured")
        if chains.initial:
            out.append(f"    {'grow[0]' if chains.in_pool else 'grow'} = "
                       f"{alloc_text(chains.start_mk, plan.first_size or '64')}"
                       + ("" if chains.in_pool else "    # the block this thread grows with realloc"))
            tally.calls[chains.start_mk[0]] += g.n
            tally.known_frees += g.n
        if any("(r + 1) * " in b for b in blocks) and (g.n > 1) not in self._explained:
            out += SPREAD_NOTES[g.n > 1]
            self._explained.add(g.n > 1)
        return out

    def _thread_end(self, g: Group, plan: GroupPlan, tally: _Tally) -> List[str]:
        """After the phases: the grown blocks freed, the big buffers still live freed."""
        chains = plan.chains
        end = []
        if chains.has_chain and chains.slots > 1:
            # The phases end every chain the capture ended: the blocks still grown at the end stay (`leaks
            # keep`), as the program's did (perl's model freed 100,021 slots here, 8% more calls than perl).
            # Only the one block made before the phases ends here.
            end = ["    # the blocks still grown at the end stay allocated, as in the capture (`leaks keep`)"]
            if chains.initial:
                end.append("    free(grow[0])       # the block made before the phases (free(NULL) if its chain ended)")
                tally.calls["free"] += g.n
        elif chains.has_chain and not chains.units:
            end = [f"    free({chains.grow})          # the last block grown (free(NULL) if a chain had just ended)"]
            tally.calls["free"] += g.n
        end += [f"    free_all(held_p{q})    # empty by now: its objects were freed in phase {q}" for q in plan.held]
        big = self.shape.big.get(g.name, [])
        if big:
            live_at_end = sum(t.how == "end" for t, _ in big)
            end.append(f"    # pool big: {live_at_end} big buffer(s) still live at the end of the capture stay "
                       f"allocated (`leaks keep`)" if live_at_end else
                       "    # pool big: empty by now, each big buffer was freed where the capture freed it")
        return end

    # ---------------------------------------------------------------- header
    def _header(self, tally: _Tally) -> List[str]:
        col = self.col
        rows = self._figures(tally)
        h = [f"# Model of {self.source_name}, written by `scenc convert --model`: a scenario with the",
             "# capture's statistics, not its call sequence (`scenc convert` without --model replays that).",
             "#",
             f"# Fitted from {col.ordinal} calls of {len(col.thread_windows)} thread(s), "
             f"lines {col.first_line}-{col.last_line}:",
             "#   groups     threads alike in calls per kind, sizes, partners and phases: "
             + ", ".join(f"{g.name} ({g.n})" for g in self.groups),
             "#              (per-thread counts are the group's averages)",
             "#   sizes      requested bytes per group and phase: the histogram files beside this one",
             "#   lifetimes  an object freed by its own thread `lives` as many of that thread's calls as in",
             "#              the capture (the `lives` clock; the fit of each phase is above its block)",
             "#   handoffs   an object freed by another thread is sent to that thread through a channel",
             "#   reallocs   each thread grows as many blocks (`grow`) at once as in the capture, with its sizes;",
             "#              a chain ends as in the capture (freed, or handed over) and a new block starts",
             f"#   phases     {len(self.phases)}, from windows of {col.window} calls compared for mean size, "
             f"live-byte growth" + (" and call rate" if col.has_time else "")]
        if self.image is not None:
            h[-1:-1] = _wrap(self.image.header_line(), "#   image      ", "#              ")
        for i, p in enumerate(self.phases, 1):
            h += _wrap(f"phase {i}: lines {p.first_line}-{p.last_line}, {p.events} calls"
                       + (f"; {p.why}" if p.why else ""), "#              ", "#                ")
        self.kept_dropped = self._kept_dropped()
        h += ["#", "# What the model keeps and drops:"]
        for line in self.kept_dropped:
            h += _wrap(line, "#   ", "#     ")
        h += ["#", f"#   {'':<26}{'capture':>12}{'model':>14}"]
        h += [f"#   {a:<26}{b:>12}{c:>14}" for a, b, c in rows]
        h += _wrap(f"(model peak: {PEAK_HOW}; it varies from run to run with the threads' timing)", "#   ", "#   ")
        self.notes = self._left_out() + self.notes
        for note in self.notes:
            h += _wrap(note, "#   note: ", "#         ")
        return h + [""]

    def _kept_dropped(self) -> List[str]:
        """What the model keeps of the capture and what it drops, said in the header (and by convert): the
        threads, the phases, the program's own mappings, the fits of the sizes and of the lifetimes with
        their Kolmogorov-Smirnov distances. The notes below the table add what a particular capture lost."""
        col, shape = self.col, self.shape
        out = []
        threads = len(col.thread_windows)
        churn = [f"{name} at most {k} alive at once" for name, k in sorted(shape.churn.items())]
        out.append(f"threads: kept: {threads} captured thread(s) as {len(self.groups)} group(s) of threads alike, "
                   f"each thread making its group's average" + (f"; threads that come and go: {', '.join(churn)}"
                                                                 if churn else "")
                   + "; dropped: which thread of a group made which call")
        out.append(self._time_between_calls())
        out.append(f"phases: kept: {len(self.phases)} (at most --max-phases), each a `measure` block, in the "
                   f"capture's order; dropped: the order of calls inside a phase (its statements are spread evenly "
                   f"over its rounds, but for the big, held and kept objects, a burst at the peak, the big chains, "
                   f"a lone thread's mappings and its receives from other groups, placed where they came)")
        made = col.maps_made
        left = col.maps_left_out
        if col.map_calls:
            one_by_one = sum(len(self.shape.map_records(g) or self.shape.big_maps.get(g.name, ()))
                             for g in self.groups)
            out.append(f"mappings: kept: {made} writable mapping(s) of the program's own (mmap outside the "
                       f"allocator; {col.maps_protected} of them parts of reservations that mprotect made "
                       f"writable) as `map(n) lives L` (`forever` when still mapped at the end), {one_by_one} "
                       f"one by one with their sizes and lifetimes where they came (a thread alone in its group: all of "
                       f"its mappings when {MAX_MAP_RECORDS} at most, else its big ones, of 1/64 of the mapped peak "
                       f"or more), the others drawn from histograms of sizes and "
                       f"lifetimes per group and phase; a mapping trimmed before its thread's next call keeps what it kept, one grown by "
                       "mremap its largest size, and it lives until its last page is unmapped; dropped: "
                       f"{left['reserved']} reservation(s) mapped never writable (address space, not memory: "
                       f"but the parts mprotect made writable), "
                       f"{left['failed']} failed call(s), later partial munmaps (a mapping stays whole until its "
                       f"last page goes), mprotect taking the write permission away (the pages stay resident), "
                       f"madvise, file mappings, thread stacks and the allocator's own mappings (not recorded)"
                       + (f"; written: {self.map_written[0]}% of each mapping's pages (`percent_written`), "
                          f"{self.map_written[1]}" if self.map_written else
                          "; written: as `touch_new` writes a new block"))
        else:
            out.append("mappings: none of the program's own in the capture (an ltrace capture records none)")
        sizes: dict = {}
        for thread_windows in col.thread_windows.values():
            for thread_window in thread_windows:
                if thread_window is not None:
                    merge_hist(sizes, thread_window.sizes)
        n, _ = hist_totals(sizes)
        inexact = max((c for b, (c, _) in sizes.items() if b >= 1024), default=0)
        out.append(f"sizes: kept: histograms per group and phase, exact below 1 KiB, 16 classes per power of two "
                   f"above, each at its mean: KS distance to the capture's requested sizes at most "
                   f"{inexact / n if n else 0.0:.3f} (the largest share of one class drawn at its mean); "
                   f"dropped: a size's link to its lifetime beyond the handed, kept, large, big, held and burst "
                   f"objects")
        if self.image is not None:
            out.append(self.image.kept_dropped())
        if self.fits:
            out.append("lifetimes: kept: fitted per group and phase on each thread's `lives` clock (a geometric "
                       "when a KS test does not reject it, else a table of buckets): " + "; ".join(self.fits))
        return out

    def _no_clock(self) -> Optional[str]:
        """Why the capture's clocks give no time between calls (its format), or None when they do."""
        if self.clock != "preload" or not self.col.has_time:
            return NO_WORK_WHY.get(self.clock or "", "no clock in the capture")
        return None

    def work_refused(self) -> Optional[str]:
        """Why no `work` can be fitted to this capture whatever is measured (no clock, threads alive at once), or
        None."""
        several = self.threads_at_once > 1 and not self.col.has_cpu     # with CPU clocks, waits are not counted
        return self._no_clock() or (SEVERAL_THREADS_WHY if several else None)

    def _time_between_calls(self) -> str:
        """What the model keeps of the program's own time between its calls (trace/model/work.py)."""
        cost, no_clock = self.work_cost, self._no_clock()
        if no_clock:
            return (f"time between calls: dropped ({no_clock}): the model makes its calls one after another, so "
                    f"in less time than the program: an allocator that returns freed pages only after a delay "
                    f"(mimalloc's purge, jemalloc's decay) can hold more of them at the model's peak")
        gaps = capture_gap_ns(self.col)
        why = self.work_refused() or self.work_why
        if self.col.has_cpu:
            held = (f"{gaps / 1e6:.1f} ms on the threads' CPU clocks (the CPU time each thread ran between its "
                    f"calls, which the tracer reads about every 64 calls or 200 us, whichever is longer: its waits, "
                    f"blocked or descheduled, are not in it)")
        else:
            held = (f"{gaps / 1e6:.1f} ms in the capture's wall clocks, which have no CPU clock (a tracer log "
                    f"before version 6): the times between each thread's calls up to {DENSE_GAP_NS / 1e6:g} ms (a "
                    f"longer one is waiting, blocked in the kernel, and is dropped; the tracer spreads the time "
                    f"between two readings of its clock over their calls, so shorter waits count, and so does a "
                    f"busy machine's wait for a CPU)")
        if cost is None:
            return f"time between calls: dropped ({why}); the capture holds {held}"
        return (f"time between calls: kept as `work(n)` (CPU work on registers, no memory), per group and phase "
                f"spread over its rounds: {held}, each less "
                f"{self._tracer_words(cost)} and the model's own cost of a call (its phase's CPU time per call, the model "
                f"run without work under glibc as the capture ran, the least of {MEASURE_RUNS} runs or more; "
                f"{cost.call_ns:.1f} ns of CPU time a call over the whole model): {self.work_written} units at "
                f"{cost.unit_ns:.3f} ns ({self.work_written * cost.unit_ns / 1e6:.1f} ms, measured here"
                + ("; none: the model's own calls take as long as the program's time between them" if
                   not self.work_written else "") + "). Fitted to the capture's clocks, never to an allocator's "
                "result")

    @staticmethod
    def _tracer_words(cost: WorkCost) -> str:
        if cost.tracer_ns is None:
            return f"{TRACER_CALL_NS:g} ns for the tracer"
        pairs = cost.tracer_pairs
        spread = f", {pairs[0]:.1f}-{pairs[-1]:.1f} ns" if len(pairs) > 1 else ""
        return (f"{cost.tracer_ns:.1f} ns for the tracer (measured: the model's CPU time per call under it less "
                f"its CPU time per call alone, the median of {len(pairs)} pairs of runs{spread})")

    def _figures(self, tally: _Tally) -> List[Tuple[str, str, str]]:
        """(figure, capture, model) rows of the header's table (also self.figures); the peak is measured later."""
        col = self.col
        n_sizes = sum_sizes = 0
        for thread_windows in col.thread_windows.values():
            for thread_window in thread_windows:
                if thread_window is not None:
                    n, s = hist_totals(thread_window.sizes)
                    n_sizes += n
                    sum_sizes += s
        captured: Counter = Counter()
        for k, v in col.trace_kinds.items():
            captured[runtime_kind(k)] += v
        rows = [("calls", f"{col.ordinal}", f"{sum(tally.calls.values())}")]
        for k in sorted(set(captured) | set(tally.calls), key=lambda k: (-captured.get(k, 0), k)):
            rows.append((f"  {k}", f"{captured.get(k, 0)}", f"{tally.calls.get(k, 0)}"))
        rows.append(("mean requested size (B)", f"{sum_sizes / max(n_sizes, 1):.1f}",
                     f"{tally.bytes / max(tally.draws, 1):.1f}"))
        share = col.cross_frees / col.known_frees if col.known_frees else 0.0
        model_share = tally.sent / tally.known_frees if tally.known_frees else 0.0
        rows.append(("cross-thread frees", f"{100 * share:.1f}%", f"{100 * model_share:.1f}%"))
        if col.thread_starts:
            alive = sum(self.shape.churn.get(g.name, g.n) for g in self.groups)
            rows.append(("threads alive, at most", f"{self.threads_at_once}", f"{alive}"))
        rows.append(("live bytes, peak", f"{col.peak_bytes}", NOT_MEASURED))
        if col.map_calls:
            # the program's own writable mappings (`map`), apart from the heap: not allocator calls
            rows.append(("own mappings (map)", f"{col.maps_made}", f"{tally.maps}"))
            rows.append(("mapped bytes, peak", f"{col.mapped_writable_peak}", NOT_MEASURED))
        self.figures = rows
        return rows

    def _left_out(self) -> List[str]:
        """Notes on what the model leaves out or changes of the capture (failed calls, unknown frees, ...)."""
        left: Counter = Counter()
        for thread_windows in self.col.thread_windows.values():
            for thread_window in thread_windows:
                if thread_window is not None:
                    for k in LEFT_OUT:
                        left[k] += thread_window.c[k]
        notes = []
        if left["alloc_failed"] or left["realloc_failed"]:
            notes.append(f"{left['alloc_failed'] + left['realloc_failed']} failed allocations are left out")
        if left["free_unknown"]:
            notes.append(f"{left['free_unknown']} frees of pointers never seen allocated are left out")
        if left["free_missed"]:
            notes.append(f"{left['free_missed']} objects whose free the capture missed end where their address "
                         f"is handed out again")
        if left["realloc_as_free"]:
            notes.append(f"{left['realloc_as_free']} realloc(p, 0) that freed their block are frees in the model "
                         f"(realloc(p, 0) frees only under some allocators)")
        if left["censored"]:
            notes.append(f"{left['censored']} objects still live at the end of the capture are `lives forever` "
                         f"(never freed: `leaks keep`, as the program never freed them), with their own sizes")
        return notes


def _phase_body(stmts: List[Stmt], threads: int, work: int = 0) -> List[str]:
    """The statements of a phase: those placed before the rounds, then the rounds (bare when each runs
    once, in `repeat R` when all run R times, else spread evenly over `for r in 0 .. R` rounds), then
    those placed after them. work: `work` units per thread, spread over the rounds (at the end of each)."""
    def once_each(group: List[Stmt]) -> List[str]:
        out: List[str] = []
        for s in group:
            if s.share is None and s.per_thread == 1:
                out += _statement_lines(s.text, 8)
            elif s.share is None:
                out += [f"        repeat {s.per_thread} {{"] + _statement_lines(s.text, 12) + ["        }"]
            else:
                out += [f"        repeat {s.share[0]} {{"] + _statement_lines(s.text, 12) + ["        }"]
        return out

    pre = [s for s in stmts if s.place == "pre"]
    post = [s for s in stmts if s.place == "post"]
    timed = sorted((s for s in stmts if s.at is not None), key=lambda s: s.order)
    stmts = [s for s in stmts if s.place == "loop" and s.at is None and s.max_count(threads) > 0]
    if not stmts:           # one round: the statements placed in it run in their order, no loop needed
        return once_each(pre) + once_each(_work(work, 1)) + once_each(_merged(timed)) + once_each(post)
    rounds = max([s.max_count(threads) for s in stmts] + [1])
    stmts = stmts + _work(work, rounds)
    spread_work = work > 0 and work % rounds != 0          # round r's share: needs `for r`
    if timed:
        return once_each(pre) + _rounds(stmts, rounds, threads) + _timed(timed, rounds) + ["        }"] + once_each(post)
    if rounds == 1:
        return once_each(pre) + once_each(stmts) + once_each(post)
    if all(s.share is None and s.per_thread == rounds for s in stmts) and not spread_work:
        return (once_each(pre) + [f"        repeat {rounds} {{"]
                + [line for s in stmts for line in _statement_lines(s.text, 12)] + ["        }"] + once_each(post))
    return once_each(pre) + _rounds(stmts, rounds, threads) + ["        }"] + once_each(post)


def _work(units: int, rounds: int) -> List[Stmt]:
    """The phase's `work` as a statement that runs once a round: the same units each round when they divide
    evenly, else spread over the rounds (round r's share: only in a `for r` loop)."""
    if units <= 0:
        return []
    if units % rounds == 0:
        return [Stmt(f"work({units // rounds})", per_thread=rounds)]
    return [Stmt(f"work({spread(str(units), rounds)})", per_thread=rounds)]


def _rounds(stmts: List[Stmt], rounds: int, threads: int) -> List[str]:
    """`for r in 0 .. rounds {` and the statements, each spread evenly over the rounds (the loop left open;
    rounded for a group of several threads: spread)."""
    out = [f"        for r in 0 .. {rounds} {{"]
    for s in stmts:
        if s.share is None and s.per_thread == rounds:
            out += _statement_lines(s.text, 12)
            continue
        head = f"            repeat {spread(s.share[0] if s.share else str(s.per_thread), rounds, threads > 1)} {{"
        if len(head) + len(s.text) + 3 <= LINE:
            out.append(f"{head} {s.text} }}")
        else:
            out += [head] + _statement_lines(s.text, 16) + ["            }"]
    return out


def _timed(stmts: List[Stmt], rounds: int) -> List[str]:
    """Statements that run once, in the round as far into the phase as they came in the capture (a big
    chain's steps), in the capture's order; those of one round under one `if`."""
    by_round: Dict[int, List[Stmt]] = {}
    spans = []
    for s in stmts:
        a = min(rounds - 1, int(s.at * rounds))
        if s.until is None or max(a + 1, min(rounds, int(s.until * rounds))) == a + 1:
            by_round.setdefault(a, []).append(s)        # a span of one round: `if r == a`
        else:
            spans.append(s)
    out = []
    for s in spans:
        # spread evenly over rounds a .. b - 1: n times in all, none outside
        a = min(rounds - 1, int(s.at * rounds))
        b = max(a + 1, min(rounds, int(s.until * rounds)))
        head = f"            if r >= {a} {{ if r < {b} {{ repeat " + \
            (f"{spread(str(s.per_thread), b)} {{" if a == 0 else
             f"(r + 1 - {a}) * {s.per_thread} / {b - a} - (r - {a}) * {s.per_thread} / {b - a} {{")
        out += [head.replace("if r >= 0 { ", "")] + _statement_lines(s.text, 16) + \
            ["            } }" if a == 0 else "            } } }"]
    for r, group in sorted(by_round.items()):
        texts = [s.text if s.per_thread == 1 else f"repeat {s.per_thread} {{ {s.text} }}" for s in _merged(group)]
        line = f"            if r == {r} {{ " + "  ".join(texts) + " }"
        out += [line] if len(line) <= LINE else \
            [f"            if r == {r} {{"] + [f"                {t}" for t in texts] + ["            }"]
    return out


def _merged(stmts: List[Stmt]) -> List[Stmt]:
    """Placed statements in their order, neighbours with the same text made one that runs as often as both
    (the frees of held objects from neighbouring windows of the capture that fall in one round); those
    that run once each stay apart."""
    out: List[Stmt] = []
    for s in stmts:
        if out and out[-1].text == s.text and s.share is None and out[-1].share is None \
                and max(s.per_thread, out[-1].per_thread) > 1:      # objects written one by one stay so
            out[-1] = replace(out[-1], per_thread=out[-1].per_thread + s.per_thread)
        else:
            out.append(s)
    return out


def _drop_trailing_barriers(blocks: List[str]) -> List[str]:
    """After a group's last measure block there is nothing to wait for: the barriers go, the comments stay."""
    last = max(i for i, b in enumerate(blocks) if b.startswith("    measure"))
    return blocks[:last] + [b for b in blocks[last:] if b != BARRIER]


def _statement_lines(text: str, indent: int) -> List[str]:
    """A statement on one line, or its parts (separated by two spaces) one per line when too long."""
    pad = " " * indent
    if indent + len(text) <= LINE:
        return [pad + text]
    out = []
    for part in _top_level_parts(text):
        guarded = re.fullmatch(r"(if [^{}]*\{) (.*) \}", part)
        if indent + len(part) > LINE and guarded:
            out += [pad + guarded.group(1)] + _statement_lines(guarded.group(2), indent + 4) + [pad + "}"]
        elif indent + len(part) > LINE and " lives " in part:
            alloc, lives = part.split(" lives ", 1)
            out.append(pad + alloc)
            line = pad + "    lives "
            words = lives.split(", ")
            for i, word in enumerate(words):     # a long weighted table goes on over several lines
                word += "," if i + 1 < len(words) else ""
                if len(line) + len(word) > LINE and line.strip() != "lives":
                    out.append(line.rstrip())
                    line = pad + "        "
                line += word + " "
            out.append(line.rstrip())
        else:
            out.append(pad + part)
    return out


def _top_level_parts(text: str) -> List[str]:
    """text split at its two-space separators outside braces (an `if ... { a  b }` stays one part)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "{") - (ch == "}")
        if depth == 0 and text.startswith("  ", i) and i > start:
            parts.append(text[start:i])
            start = i + 2
    return parts + [text[start:]]


def _wrap(text: str, first: str, rest: str, width: int = LINE) -> List[str]:
    out, line = [], first
    for word in text.split():
        if len(line) + len(word) + 1 > width and line != first:
            out.append(line.rstrip())
            line = rest
        line += word + " "
    out.append(line.rstrip())
    return out
