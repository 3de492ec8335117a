"""Why an end verdict holds: the other measured figures that moved significantly the same way.

After "fastest: tcmalloc is 1.56x faster than the runner-up, jemalloc", the
other figures of the same runs (minor faults, CPU time, RSS, probe figures)
are compared for the same two allocators, the two the verdict's sentence
names, by the same rank procedure (stats/rank.py, with the report's noise
band). A figure explains the verdict when its difference is significant and
points the verdict's way: the named allocator better on it (fewer faults, less
CPU time) for "fastest" and "leanest", worse for "slowest" and "fattest".

Which figures can explain which verdict (`candidates`): a time verdict is
explained by anything but time itself restated (calls per second, a thread's or
a region's time, the program's own figure); its CPU time (user, system, both)
and per-call latencies are causes, not restatements. A memory verdict is
explained by memory figures (bytes, pages, faults, internal fragmentation).
The peak RSS restated (the heap's share of it, the sampler's peak, overhead
and fragmentation, computed from it) explains nothing: the peak RSS itself
counts once, for a time verdict. Figures without a
direction (a property of the scenario: `live:peak_bytes`,
`layout:allocations`) explain nothing, nor does a count of failures.

The comparisons of every `because:` line of a report form a family of their
own, corrected as the report's claims are (Holm within each param set, or
Benjamini-Hochberg over all of them for a sweep and --json), but apart from
them: an explanation never widens a verdict's interval nor costs it a claim.
"""

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from .. import probes
from ..stats import family as fam
from ..stats import rank
from ..system.units import fmt_bytes
from . import metrics as metric_defs

__all__ = ["Figure", "Because", "candidates", "explain", "family_size", "family_note", "MAX_FIGURES"]

MAX_FIGURES = 4          # figures a because: line names; --json has them all

_NOT_CAUSES = {"ops_per_s", "failed_allocs"}          # the wall time restated; a failure count
_PARTS = ("time:thread.", "time:region.", "region:", "reported:")   # parts of the same time, or the program's
_CPU = {"user_s", "sys_s", "time:cpu_s"}
_PEAK_RESTATED = {"heap_rss_kib", "memory:sampled_peak_rss_kib", "memory:overhead_kib", "memory:fragmentation"}
_MEMORY_UNITS = ("KiB", "B", "faults")                 # what a memory verdict can be explained by
_MEMORY_WORDS = ("internal fragmentation",)
_TIME_UNITS = ("s", "ns", "ops/s")
_AMOUNT_UNITS = ("s", "ns", "KiB", "B")               # "less", where counts say "fewer"
_PLAIN_UNITS = ("ratio", "", "GHz", "per call")        # "lower"/"higher"


def _direction(name: str) -> Optional[bool]:
    """lower_is_better of a figure that scores an allocator; None for one without a direction."""
    if name in {m.name for m in metric_defs.all_metrics()}:
        return metric_defs.metric(name).lower_is_better
    kind = probes.metric_kind(name)
    if kind is None or kind.better not in ("lower", "higher"):
        return None
    return kind.better == "lower"


def candidates(verdict_metric: str, names: Sequence[str]) -> List[str]:
    """The figures of `names` that may explain a verdict on `verdict_metric` (the module's rule)."""
    timed = metric_defs.metric(verdict_metric).unit in _TIME_UNITS
    found = []
    for name in names:
        if name == verdict_metric or name in _NOT_CAUSES or name.startswith(_PARTS):
            continue
        if _direction(name) is None:
            continue
        m = metric_defs.metric(name)
        if timed and m.unit in _TIME_UNITS and m.unit != "ns" and name not in _CPU:
            continue
        if not timed and not (m.unit in _MEMORY_UNITS or m.word in _MEMORY_WORDS) or name in _PEAK_RESTATED:
            continue
        found.append(name)
    return found


# ------------------------------------------------------------------ words


def _show_seconds(values: Sequence[float]) -> List[str]:
    top = max(abs(v) for v in values)
    factor, unit = next(((f, u) for f, u in ((1.0, "s"), (1e3, "ms"), (1e6, "µs")) if top * f >= 1), (1e9, "ns"))
    return [f"{v * factor:.3g} {unit}" for v in values]


def _show(values: Sequence[float], unit: str) -> List[str]:
    """The two medians (or a difference) alike: "12,210" and "20,730", "1.20 ms", "1,782 KiB"."""
    if unit == "s":
        return _show_seconds(values)
    if unit == "B":
        return [fmt_bytes(v) for v in values]
    if unit == "KiB" and max(abs(v) for v in values) >= 10240:
        return [f"{v / 1024:,.1f} MiB" for v in values]
    suffix = f" {unit}" if unit in ("KiB", "ns", "GHz") else ""
    top = max(abs(v) for v in values)
    digits = 1 if top >= 100 else (2 if top >= 1 else 4)       # a median of counts may end in .5
    return [f"{v:,.{0 if float(v).is_integer() else digits}f}{suffix}" for v in values]


def _percent(fraction: float) -> str:
    pct = fraction * 100
    text = f"{pct:.0f}" if pct >= 9.5 else f"{pct:.1f}" if pct >= 0.95 else f"{pct:.2g}"
    return f"{text}%"


@dataclass
class Figure:
    """One figure that moved significantly the verdict's way: the named allocator against the other."""
    metric: str
    comparison: object            # stats.rank.Comparison, named (other) against the other (baseline)
    p_adjusted: float
    medians: tuple                # (named's, the other's)

    def words(self) -> str:
        """"41% fewer minor page faults: 12,210 vs 20,730"."""
        m, c = metric_defs.metric(self.metric), self.comparison
        unit = m.unit
        lower = c.estimate < (1.0 if c.scale == "ratio" else 0.0)
        less, more = (("fewer", "more") if unit not in _AMOUNT_UNITS + _PLAIN_UNITS else
                      ("less", "more") if unit in _AMOUNT_UNITS else ("lower", "higher"))
        word = less if lower else more
        medians = _show(list(self.medians), unit)
        if c.scale != "ratio":          # a side at 0: the medians say how far apart they are
            return f"{word} {m.label}: {medians[0]} vs {medians[1]}"
        r = c.estimate
        size = (_percent(1 - r) if lower else _percent(r - 1) if r < 2 else
                f"{r:.1f}x" if r < 10 else f"{r:.0f}x")
        return f"{size} {word} {m.label}: {medians[0]} vs {medians[1]}"

    def to_json(self) -> dict:
        c = self.comparison
        return {"metric": self.metric, "words": self.words(), "estimate": c.estimate,
                "ci": list(c.ci) if c.ci else None, "scale": c.scale, "confidence": c.confidence,
                "p_value": c.p_beyond, "p_adjusted": self.p_adjusted,
                "median": self.medians[0], "other_median": self.medians[1]}


@dataclass
class Because:
    """Why `named` is the verdict's `word` against `against`: the figures that moved its way."""
    metric: str
    word: str                     # "fastest", "slowest", ...
    ahead: bool
    named: str
    against: str
    figures: List[Figure] = field(default_factory=list)      # strongest first
    checked: List[str] = field(default_factory=list)         # every figure compared

    def sentence(self) -> str:
        if self.figures:
            shown = "; ".join(f.words() for f in self.figures[:MAX_FIGURES])
            more = len(self.figures) - MAX_FIGURES
            rest = f"; and {more} more (`scenc report --json` lists them)" if more > 0 else ""
            return f"because: {self.named} against {self.against}, medians: {shown}{rest}"
        if not self.checked:
            return "because: no measured figure explains it (no other figure was measured)"
        labels = [metric_defs.metric(m).label for m in self.checked]
        listed = (", ".join(labels[:4]) + f" and {len(labels) - 4} more" if len(labels) > 5 else
                  labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1])
        return (f"because: no measured figure explains it ({self.named} against {self.against}: "
                f"none of {listed} differs significantly the same way)")

    def to_json(self) -> dict:
        return {"named": self.named, "against": self.against, "sentence": self.sentence(),
                "figures": [f.to_json() for f in self.figures], "checked": self.checked}


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def explain(cells, method: str, confidence: float, noise: float) -> List[Dict[tuple, Because]]:
    """For each cell, {(metric, ahead): Because} for every verdict that names allocators.

    `cells` are report/analysis.py's Cells with their claims judged; `method` "holm" corrects the
    comparisons of each cell together, "bh" all of them (the report's own choice for its claims)."""
    wanted, questions = [], []
    for index, cell in enumerate(cells):
        mine: Dict[tuple, Because] = {}
        for verdict in [*cell.verdicts.values(), *cell.last.values()]:
            pair = verdict.margin
            if not verdict.group or pair is None:
                continue
            named, against = pair
            a, b = cell.stats(named), cell.stats(against)
            both = [m for m in a.samples if b.samples.get(m) and a.samples[m]]
            because = Because(verdict.metric, verdict.word, verdict.ahead, named, against,
                              checked=candidates(verdict.metric, both))
            mine[(verdict.metric, verdict.ahead)] = because
            for m in because.checked:
                questions.append(fam.Question(against, named, b.samples[m], a.samples[m], _direction(m),
                                              family=index if method == "holm" else 0,
                                              tag=(index, verdict.metric, verdict.ahead, m)))
        wanted.append(mine)
    pairs = fam.judge(questions, rank.compare, method=method, confidence=confidence, noise=noise)
    for q, pair in zip(questions, pairs):
        index, metric, ahead, figure = q.tag
        because = wanted[index][(metric, ahead)]
        if pair.result.other_is_better is ahead:
            medians = (_median(q.other_runs), _median(q.baseline_runs))
            because.figures.append(Figure(figure, pair.result, pair.p_adjusted, medians))
    for mine in wanted:
        for because in mine.values():
            because.figures.sort(key=lambda f: (f.p_adjusted, -abs(_log_size(f.comparison))))
    return wanted


def _log_size(c) -> float:
    return math.log(c.estimate) if c.scale == "ratio" and c.estimate > 0 else 0.0


def family_note(method: str, size: int) -> str:
    """The line under the report's correction line that says how the because: lines were judged."""
    name = {"holm": "Holm within each param set", "bh": "Benjamini–Hochberg over the report"}[method]
    return (f"(because: the same test on the {size} figures compared for the verdicts' because: lines, "
            f"corrected as a family of their own ({name}), apart from the claims)")


def family_size(explained: Sequence[Dict[tuple, Because]]) -> int:
    """How many comparisons the because: lines were corrected over."""
    return sum(len(b.checked) for mine in explained for b in mine.values())
