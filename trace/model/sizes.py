"""The sizes a fitted model's statements draw, per thread group and phase: which histogram files they
read (written beside the scenario, trace/model/files.py) and their means, for trace/model/plan.py.

The objects handed to another thread, those kept to the end and the large ones freed by their own thread
get sizes of their own; the others the rest of the phase's sizes.
"""

from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .collect import SIZE_CLASS_BOUNDS, ThreadWindow, hist_minus, hist_totals, merge_hist, size_class
from .files import HistogramFiles
from .fit import class_bound, class_kinds, fit_lifetimes, large_class, large_realloc_class, paired_class
from .shape import Group, ModelShape

#: At most this many objects kept to the end (or reallocs) in a phase are written one by one with their sizes.
FEW_KEPT = 32
#: A band of size classes of large objects (one statement, its sizes and lifetimes together) holds this many at least
MIN_BAND = 64


@dataclass
class Sizes:
    """The size expressions of one group's statements in one phase, and the means the header sums."""
    size: str                   # the sizes its own objects are drawn from
    rsize: str = "0"            # realloc sizes
    lives: str = "0"            # lifetimes of the objects freed by their own thread
    handed: str = ""            # sizes of the objects handed to another thread (default: size) ...
    handed_to: Dict[str, Tuple[str, float]] = field(default_factory=dict)   # ... per partner when several
    kept: str = ""              # sizes of the objects kept to the end (default: size)
    start: str = ""             # sizes of the blocks a realloc chain starts with (default: size)
    large: Optional[list] = None           # [(size expr, lives expr, count per kind, mean)]: PhaseSizer._large_objects
    large_realloc: Optional[tuple] = None  # (size expr, count, K, slots): PhaseSizer.large_reallocs
    mean: float = 64.0
    handed_mean: float = 64.0
    kept_mean: float = 64.0
    comment: str = ""           # the lifetimes' fit, for the comment above the phase's block

    def handed_for(self, dest: str) -> Tuple[str, dict]:
        """The size expression of the objects handed to group dest, and the Stmt fields that go with it."""
        if dest in self.handed_to:
            return self.handed_to[dest][0], dict(mean=self.handed_to[dest][1])
        return self.handed or self.size, dict(handed=bool(self.handed))


class PhaseSizer:
    """The size expressions of one group, phase by phase; their histogram files are written on the way."""

    def __init__(self, shape: ModelShape, files: HistogramFiles, g: Group):
        self.shape, self.col, self.files, self.g = shape, shape.col, files, g
        self.rsize = "0"        # the realloc sizes' expression: a phase without reallocs keeps the last one's
        self.first_size: Optional[str] = None   # the first size expression (a phase without sizes uses it)
        self.group_starts: Optional[str] = None  # the chains' start sizes over all phases, once written

    def start_reallocs(self, rsizes: dict) -> None:
        """The group's realloc sizes (all phases): their file when the model has one phase."""
        if rsizes and len(self.shape.phases) == 1:
            self.rsize = self.files.expr(rsizes, "realloc-sizes", "realloc sizes", self.g.name, None)

    def realloc_sizes(self, agg: ThreadWindow, pi: int, slots: int) -> Tuple[str, Optional[tuple]]:
        """The realloc sizes' expression in phase pi, and the large realloc sizes (large_reallocs) or None.
        Realloc sizes are per phase, as the sizes (a program that builds one big buffer late, e.g. a JSON
        text, grows its blocks far more in that phase); per group when there is one phase."""
        large_realloc, small_rsizes = self.large_reallocs(agg, pi, slots)
        if large_realloc:
            self.rsize = f'histogram("{small_rsizes}")'
        elif len(self.shape.phases) > 1 and agg.rsizes:
            self.rsize = self.files.expr(agg.rsizes, "realloc-sizes", "realloc sizes", self.g.name, pi)
        return self.rsize, large_realloc

    def sizes(self, agg: ThreadWindow, pi: int, group_fit) -> Sizes:
        """The size expressions of group g in phase pi (their files written). The objects handed to another
        thread get the sizes they had in the capture, the objects kept to the end and the large objects
        theirs, the others the rest."""
        g = self.g
        own_sizes = hist_minus(agg.sizes, agg.sent) if agg.sent else agg.sizes
        own_sizes = hist_minus(own_sizes, agg.kept) if agg.kept else own_sizes
        large, large_hists, large_comment = self._large_objects(agg, pi)
        if large:
            own_sizes = hist_minus(own_sizes, large_hists[1])
        n_sizes, sum_sizes = hist_totals(own_sizes)
        n_sent, sum_sent = hist_totals(agg.sent)
        n_kept, sum_kept = hist_totals(agg.kept)
        kept_size = ""
        one_by_one = g.n == 1 and few_sizes(agg.kept)          # then the planner writes them with their sizes
        if n_kept and (n_sizes or n_sent) and not one_by_one:
            kept_size = self.files.expr(agg.kept, "kept-sizes", "sizes of the objects still live at the end",
                                        g.name, pi)
        elif n_kept and not n_sizes and not n_sent:
            n_sizes, sum_sizes, own_sizes = n_kept, sum_kept, agg.kept
        size = self.files.expr(own_sizes, "sizes", "requested sizes", g.name, pi) if n_sizes \
            else (self.first_size or "64")
        handed, handed_to = "", self._handed_to(agg, pi) if n_sent and n_sizes else {}
        if n_sent and n_sizes and not handed_to:
            handed = self.files.expr(agg.sent, "handed-sizes", "sizes of the objects handed to another thread",
                                     g.name, pi)
        if n_sent and not n_sizes:
            n_sizes, sum_sizes = n_sent, sum_sent
            size = self.files.expr(agg.sent, "sizes", "requested sizes", g.name, pi)
        self.first_size = self.first_size or (size if n_sizes else None)
        mean_size = sum_sizes / n_sizes if n_sizes else 64.0
        fit = fit_lifetimes(hist_minus(agg.lives, large_hists[0]) if large else agg.lives) or group_fit
        return Sizes(size, lives=fit.expr if fit else "0", handed=handed, handed_to=handed_to, kept=kept_size,
                     start=self._start_sizes(agg, pi),
                     large=large, mean=mean_size, handed_mean=sum_sent / n_sent if n_sent else mean_size,
                     kept_mean=sum_kept / n_kept if n_kept else mean_size,
                     comment=(fit.comment() if fit else "") + large_comment)

    def _start_sizes(self, agg: ThreadWindow, pi: int) -> str:
        """The sizes a new realloc chain starts with in phase pi: those the capture's chains started with there,
        else over all phases. A chain that ends starts a new one; drawn from the phase's sizes, a phase whose
        few allocations are big (a program's last output buffer) restarted every chain ending there at that
        size (a lua-like capture's model: 1.21x its peak, 1892 blocks of 4096 bytes)."""
        if agg.starts:
            return self.files.expr(agg.starts, "chain-start-sizes", "sizes of the blocks realloc chains start with",
                                   self.g.name, pi)
        if self.group_starts is None:
            starts: dict = {}
            for s in self.g.summaries:
                merge_hist(starts, s.total.starts)
            self.group_starts = self.files.expr(starts, "chain-start-sizes", "sizes of the blocks realloc chains "
                                                "start with", self.g.name, None) if starts else ""
        return self.group_starts

    def held_sizes(self, hist: dict, pi: int, until: Optional[int]) -> Tuple[str, float]:
        """The size expression and mean size of the objects of phase pi freed in a later phase (phase
        `until`, when it is not the only one: model_shape._take_held_objects)."""
        n, total = hist_totals(hist)
        what, label = ("held-sizes", "sizes of the objects freed in a later phase") if until is None else \
            (f"held-sizes-until-p{until}", f"sizes of the objects freed in phase {until}")
        expr = self.files.expr(hist, what, label, self.g.name, pi)
        return expr, total / n

    def _handed_to(self, agg: ThreadWindow, pi: int) -> Dict[str, Tuple[str, float]]:
        """Destination group -> (size expression, mean size) of the objects group g hands to it in phase pi,
        when it hands them to several (its ring and another group, ...): a program often hands bigger
        objects to one partner than to another (mt_pthread_e: 314 bytes on average to main, 264 around the
        workers' ring), and one histogram for all would give each partner the others' sizes."""
        g = self.g
        by_dest: Dict[str, dict] = {}
        for tid, hist in agg.sent_to.items():
            dest = self.shape.group_of[tid]
            if dest is g or (g.name, dest.name) in self.shape.edges:
                merge_hist(by_dest.setdefault(dest.name, {}), hist)
        if len(by_dest) < 2:
            return {}
        out = {}
        for dest, hist in sorted(by_dest.items()):
            n, total = hist_totals(hist)
            what = "ring" if dest == g.name else dest
            expr = self.files.expr(hist, f"handed-sizes-to-{what}", f"sizes of the objects handed to {what}",
                                   g.name, pi)
            out[dest] = (expr, total / n)
        return out

    def _large_objects(self, agg: ThreadWindow, pi: int):
        """The few large objects freed by their own thread that weigh on the live bytes (model_fit.large_class),
        or from where sizes and lifetimes drawn apart would misjudge the live bytes (model_fit.paired_class):
        statements of their own, their sizes and lifetimes kept together, their number exact (not a chance of
        each draw), one per band of size classes (large_bands). Returns a list of (size expression, lives
        expression, count per kind, mean size) or None, their (lifetime, size) histograms together, and a
        comment for the phase."""
        large_from = large_class(agg.lives_by_class) if agg.lives_by_class else None
        paired_from = paired_class(agg.lives_by_class) if agg.lives_by_class else None
        if paired_from is not None and (large_from is None or paired_from < large_from):
            large_from = paired_from
        if large_from is None:
            return None, None, ""
        all_lives: dict = {}
        all_sizes: dict = {}
        out, comments = [], []
        bands = large_bands(agg.lives_by_class, large_from)
        kinds = class_kinds(agg.c)
        for band in bands:
            lives: dict = {}
            sizes: dict = {}
            for cls in band:
                lives_hist, _bytes, _mass, sizes_hist = agg.lives_by_class[cls]
                merge_hist(lives, lives_hist)
                merge_hist(sizes, sizes_hist)
            merge_hist(all_lives, lives)
            merge_hist(all_sizes, sizes)
            counts: Counter = Counter()
            for cls in band:
                counts.update(kinds.get(cls, {}))
            fit = fit_lifetimes(lives)
            n, total = hist_totals(sizes)
            bound = class_bound(band[0])
            upto = f" and under {class_bound(band[-1] + 1)}" if band[-1] + 1 <= len(SIZE_CLASS_BOUNDS) and \
                band is not bands[-1] else ""
            what = "large-sizes" if len(bands) == 1 else f"large-sizes-{bound}"
            label = f"sizes of the objects of {bound} bytes or more{upto} freed by their own thread"
            out.append((self.files.expr(sizes, what, label, self.g.name, pi), fit.expr, counts, total / n))
            comments.append(f"the {n} objects of {bound} bytes or more{upto}, sizes and lifetimes of their own: "
                            f"{fit.comment()}")
        return out, (all_lives, all_sizes), "; " + "; ".join(comments)

    def large_reallocs(self, agg: ThreadWindow, pi: int, slots: int):
        """Large realloc sizes (model_fit.large_realloc_class) grow only the first K blocks of the pool, K the
        most blocks of that size the group's threads held at once in the capture. Returns (size expression,
        count, K, slots) and the file of the other realloc sizes, or (None, None)."""
        large_from = large_realloc_class(agg.rsizes) if slots > 1 and agg.rsizes else None
        if large_from is None:
            return None, None
        most = self.col.max_chain_classes
        k = max([most[t][large_from] for t in self.g.tids if t in most] + [1])
        if k >= slots:
            return None, None
        part = {b: h for b, h in agg.rsizes.items() if size_class(round(h[1] / h[0])) >= large_from}
        label = f"realloc sizes of {class_bound(large_from)} bytes or more"
        expr = self.files.expr(part, "large-realloc-sizes", label, self.g.name, pi)
        small = self.files.write(hist_minus(agg.rsizes, part), "realloc-sizes", "realloc sizes", self.g.name, pi)
        return (expr, hist_totals(part)[0], k, slots), small


def few_sizes(hist: dict) -> Optional[List[int]]:
    """The sizes of a histogram's objects one by one (each class at its mean), when there are few."""
    n, _ = hist_totals(hist)
    if not n or n > FEW_KEPT:
        return None
    return [round(s / c) for _, (c, s) in sorted(hist.items()) for _ in range(c)]


def large_bands(by_class: dict, large_from: int) -> List[List[int]]:
    """The size classes of the large objects (large_from and above, by_class: ThreadWindow.lives_by_class) in
    bands, from the smallest: a class of MIN_BAND objects or more is a band of its own, the classes above the
    last such one join it. Sizes and lifetimes go together by class: drawn from one size table and one lifetime
    table for all large objects, gcc's cc1's thousand blocks of 64-256 KiB that lived 28,000 calls on average
    lived as long as its 60,000 of 1-4 KiB (224 calls), and its model held on average a tenth of the bytes
    its large objects held in the capture. A band of a few objects would be made once a phase, in its last
    round: it joins the one below."""
    bands: List[List[int]] = []
    for cls in sorted(c for c in by_class if c >= large_from):
        if bands and hist_totals(by_class[cls][0])[0] < MIN_BAND:
            bands[-1].append(cls)
        else:
            bands.append([cls])
    return bands
