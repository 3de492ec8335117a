"""What a report claims: every comparison it prints, judged as one family.

A cell (one param set) compares each allocator with the baseline and, for
metrics that name a best and a worst, every allocator with every other.
All of them, for every metric shown, form one family, corrected by Holm
(per cell) or Benjamini-Hochberg (over the whole report: a sweep, --json).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from . import family as fam
from . import rank

__all__ = ["Rule", "CellClaims", "Family", "judge_cells", "METHODS"]

METHODS = {"holm": "Holm", "bh": "Benjamini-Hochberg"}

Runs = Mapping[str, Sequence[float]]            # allocator -> one value per run


@dataclass(frozen=True)
class Rule:
    """How one metric is judged: its direction, and whether the report names its best and worst."""
    lower_is_better: bool = True
    ranked: bool = False


@dataclass
class CellClaims:
    """The claims of one cell: each allocator against the baseline, and the rankings.

    ``comparisons[metric][name]`` is a family.Pair (baseline against name);
    ``rankings[metric]`` a family.Ranking of the allocators with enough runs;
    ``few[metric]`` the allocators left out of the ranking for too few runs.
    """
    comparisons: Dict[str, Dict[str, fam.Pair]] = field(default_factory=dict)
    rankings: Dict[str, fam.Ranking] = field(default_factory=dict)
    few: Dict[str, List[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Family:
    """Which correction was used, over how many comparisons, and the levels it granted."""
    method: str                     # "holm" or "bh"
    size: int                       # comparisons corrected together (the largest family's)
    families: int                   # families corrected apart (Holm: cells with a comparison)
    confidence: float
    noise: float
    levels: Tuple[float, float] = (0.0, 0.0)   # lowest and highest confidence granted
    smallest: int = 0               # the smallest family's size (Holm per cell)

    def to_dict(self) -> dict:
        return {"method": self.method, "name": METHODS[self.method], "size": self.size,
                "families": self.families, "confidence": self.confidence, "noise": self.noise,
                "granted_confidence": list(self.levels), "smallest": self.smallest}


def _enough(runs: Runs) -> List[str]:
    return [name for name, values in runs.items() if len(values) >= rank.MIN_RUNS]


def _questions(index: int, family: int, metric: str, runs: Runs, rule: Rule,
               baseline: Optional[str]) -> List[fam.Question]:
    """The comparisons of one metric of one cell that can be claimed (enough runs on both sides)."""
    names = _enough(runs)
    if rule.ranked:
        couples = [(a, b) if b != baseline else (b, a) for a, b in combinations(names, 2)]
    else:
        couples = [(baseline, x) for x in names if x != baseline] if baseline in names else []
    return [fam.Question(a, b, runs[a], runs[b], rule.lower_is_better, family=family, tag=(index, metric))
            for a, b in couples]


def _outside(metric: str, runs: Runs, rule: Rule, baseline: str, confidence: float, noise: float):
    """Comparisons with the baseline no claim can come from (too few runs): said, not corrected."""
    for name, values in runs.items():
        if name != baseline and min(len(values), len(runs[baseline])) < rank.MIN_RUNS:
            result = rank.compare(runs[baseline], values, lower_is_better=rule.lower_is_better,
                                  noise=noise, confidence=confidence)
            yield name, fam.Pair(baseline, name, result, confidence, 1.0)


def judge_cells(cells: Sequence[Mapping[str, Runs]], rules: Mapping[str, Rule], baseline: Optional[str], *,
                 method: str = "holm", per_cell: bool = True, confidence: float = 0.95,
                 noise: float = rank.DEFAULT_NOISE) -> Tuple[List[CellClaims], Family]:
    """Judge the cells' comparisons: Holm within each cell (``per_cell``) or over all of them,
    or Benjamini-Hochberg over all of them (``method`` "bh").

    ``cells[i][metric][allocator]`` are the runs, allocators in display order;
    only the metrics in ``rules`` are judged.  This is the whole of what a
    report may call significant: the tables and sentences only print it.
    """
    questions = [q for i, cell in enumerate(cells) for metric, runs in cell.items() if metric in rules
                 for q in _questions(i, i if per_cell else 0, metric, runs, rules[metric], baseline)]
    pairs = fam.judge(questions, rank.compare, method=method, confidence=confidence, noise=noise)
    out = [CellClaims() for _ in cells]
    for q, pair in zip(questions, pairs):
        index, metric = q.tag
        if pair.baseline == baseline:          # _questions puts the baseline first
            out[index].comparisons.setdefault(metric, {})[pair.other] = pair
    for i, cell in enumerate(cells):
        for metric, runs in cell.items():
            rule = rules.get(metric)
            if rule is None:
                continue
            if baseline in runs:
                for name, pair in _outside(metric, runs, rule, baseline, confidence, noise):
                    out[i].comparisons.setdefault(metric, {})[name] = pair
                order = out[i].comparisons.get(metric, {})
                out[i].comparisons[metric] = {n: order[n] for n in runs if n in order}
            if rule.ranked:
                mine = [p for q, p in zip(questions, pairs) if q.tag == (i, metric)]
                enough = {n: runs[n] for n in _enough(runs)}
                out[i].rankings[metric] = fam.groups(fam.by_median(enough, rule.lower_is_better), mine)
                out[i].few[metric] = [n for n in runs if n not in enough]
    return out, _family(method, questions, pairs, confidence, noise)


def _family(method, questions, pairs, confidence, noise) -> Family:
    sizes: Dict[object, int] = {}
    for q in questions:
        sizes[q.family] = sizes.get(q.family, 0) + 1
    size = len(questions) if method == "bh" else max(sizes.values(), default=0)
    granted = [p.confidence for p in pairs] or [confidence]
    families = 1 if method == "bh" and sizes else len(sizes)
    smallest = size if method == "bh" else min(sizes.values(), default=0)
    return Family(method, size, families, confidence, noise, (min(granted), max(granted)), smallest)
