"""Families of comparisons: multiplicity corrections and k-way rankings.

A four-way report makes six pairwise comparisons; at 5% each, identical
allocators would be "significantly different" somewhere far more often than
5% of the time.  Holm's step-down procedure (Holm 1979) keeps the chance of
ANY false claim in the family at or below alpha; Benjamini-Hochberg (1995)
keeps the expected share of false claims among the claims at alpha instead.

numpy/stdlib only and nothing from the package: :func:`rank` receives the
two-sample procedure as an argument (see its docstring for what it must
return), so this module never imports the one in verdicts.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

__all__ = ["holm", "benjamini_hochberg", "holm_levels", "Pair", "Ranking", "rank", "group_sentence"]


def _p_array(p_values: Sequence[Optional[float]]) -> np.ndarray:
    """p-values as floats; None (no test possible) counts as 1, a claim never made."""
    p = np.array([1.0 if v is None else float(v) for v in p_values], dtype=float)
    if np.any((p < 0) | (p > 1)) or np.any(np.isnan(p)):
        raise ValueError("p-values must lie in [0, 1]")
    return p


def holm(p_values: Sequence[Optional[float]]) -> List[float]:
    """Holm (1979) step-down adjusted p-values, in the order given.

    Sorted ascending, the i-th (0-based) of m becomes max_{j<=i} min(1, (m-j) p_(j)):
    statsmodels' multipletests(method="holm").  A hypothesis is rejected in the
    family at level alpha exactly when its adjusted p is <= alpha.
    """
    p = _p_array(p_values)
    m = len(p)
    order = np.argsort(p, kind="stable")
    stepped = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(stepped) if m else stepped
    return adjusted.tolist()


def benjamini_hochberg(p_values: Sequence[Optional[float]]) -> List[float]:
    """Benjamini & Hochberg (1995) adjusted p-values (false discovery rate), in the order given.

    Sorted ascending, the i-th (1-based) of m becomes min_{j>=i} min(1, m p_(j) / j):
    statsmodels' multipletests(method="fdr_bh").
    """
    p = _p_array(p_values)
    m = len(p)
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, m * p[order] / np.arange(1, m + 1))
    adjusted = np.empty(m)
    adjusted[order] = np.minimum.accumulate(scaled[::-1])[::-1] if m else scaled
    return adjusted.tolist()


def holm_levels(p_values: Sequence[Optional[float]], alpha: float) -> List[float]:
    """The significance level Holm grants each hypothesis, in the order given.

    Step i (0-based, p ascending) tests p_(i) against alpha/(m-i) while every
    earlier step rejected; from the first step s that does not reject, every
    later hypothesis keeps alpha/(m-s).  An interval recomputed at 1 - level
    therefore excludes the null exactly when Holm rejects (for a test whose
    interval excludes the null iff p <= level): rejected ones because
    p_(i) <= alpha/(m-i), the rest because p_(i) >= p_(s) > alpha/(m-s).
    The claims keep Holm's family-wise guarantee; the intervals are the ones
    those claims rest on, not simultaneous intervals (for those, use alpha/m).
    """
    p = _p_array(p_values)
    m = len(p)
    levels = np.empty(m)
    stopped = None
    for step, index in enumerate(np.argsort(p, kind="stable")):
        if stopped is None and p[index] > alpha / (m - step):
            stopped = step
        levels[index] = alpha / (m - (step if stopped is None else stopped))
    return levels.tolist()


@dataclass(frozen=True)
class Pair:
    """``other`` against ``baseline`` within a family, at the level Holm granted it."""
    baseline: str
    other: str
    result: Any                 # what the two-sample procedure returned, at `confidence`
    confidence: float           # 1 - the Holm level of this comparison
    p_adjusted: float           # Holm-adjusted p-value

    def to_dict(self) -> dict:
        return {"baseline": self.baseline, "other": self.other, "confidence": self.confidence,
                "p_adjusted": self.p_adjusted, "result": self.result.to_dict()}


@dataclass(frozen=True)
class Ranking:
    """The best and worst groups of a k-way comparison; () where no claim can be made.

    A group of one is ahead of (behind) every other allocator after Holm.  A
    larger group cannot be separated internally, yet each of its members is
    ahead of (behind) every allocator outside it.  ``pairs`` holds every
    comparison the verdicts rest on.
    """
    best: Tuple[str, ...]
    worst: Tuple[str, ...]
    pairs: Tuple[Pair, ...]

    def claims(self) -> List[Pair]:
        """The pairs with a significant difference after Holm."""
        return [p for p in self.pairs if p.result.other_is_better is not None]

    def to_dict(self) -> dict:
        return {"best": list(self.best), "worst": list(self.worst),
                "pairs": [p.to_dict() for p in self.pairs]}


def _beats(pairs: Sequence[Pair]) -> Dict[Tuple[str, str], bool]:
    """(x, y) -> True when x is significantly better than y (after Holm)."""
    beats = {}
    for pair in pairs:
        better = pair.result.other_is_better
        beats[(pair.other, pair.baseline)] = better is True
        beats[(pair.baseline, pair.other)] = better is False
    return beats


def _top_group(order: Sequence[str], beats: Callable[[str, str], bool]) -> Tuple[str, ...]:
    """The smallest group, grown from the leader, whose members all beat everyone outside.

    The leader is the first allocator in ``order`` that nobody beats.  Anyone a
    member fails to beat joins the group; a group of everyone is no claim.
    """
    leader = next((x for x in order if not any(beats(y, x) for y in order)), None)
    if leader is None:
        return ()
    group = [leader]
    grown = True
    while grown:
        outside = [x for x in order if x not in group]
        joining = [x for x in outside if not all(beats(g, x) for g in group)]
        group += joining
        grown = bool(joining)
    return () if len(group) == len(order) else tuple(x for x in order if x in group)


def rank(samples: Mapping[str, Sequence[float]], compare: Callable[..., Any], *,
         lower_is_better: bool = True, confidence: float = 0.95, noise: float = 0.01) -> Ranking:
    """Rank k allocators by all k(k-1)/2 pairwise comparisons, Holm-corrected.

    ``compare(baseline, other, lower_is_better=, noise=, confidence=)`` is the
    two-sample procedure (verdicts.compare); its result needs ``p_value``
    (None when no test was possible), ``other_is_better`` (True/False for a
    significant difference, None otherwise) and ``to_dict()``.  Every pair is
    compared once at ``confidence`` for its p-value, then again at the level
    Holm grants it (:func:`holm_levels`), so each pair's verdict and printed
    interval agree with Holm's decision.  Allocators are ordered by median
    (best first) only to pick the leader and to list groups.
    """
    names = sorted(samples, key=lambda a: float(np.median(samples[a])) if len(samples[a]) else np.inf,
                   reverse=not lower_is_better)
    if len(names) < 2:
        return Ranking((), (), ())
    options = dict(lower_is_better=lower_is_better, noise=noise)
    couples = list(combinations(names, 2))
    first = [compare(samples[a], samples[b], confidence=confidence, **options) for a, b in couples]
    p_values = [r.p_value for r in first]
    levels = holm_levels(p_values, 1.0 - confidence)
    pairs = tuple(
        Pair(a, b, r if level == 1.0 - confidence else
             compare(samples[a], samples[b], confidence=1.0 - level, **options), 1.0 - level, adj)
        for (a, b), r, level, adj in zip(couples, first, levels, holm(p_values)))
    beats = _beats(pairs)
    won = lambda x, y: beats.get((x, y), False)  # noqa: E731
    best = _top_group(names, won)
    worst = _top_group(names[::-1], lambda x, y: won(y, x))
    return Ranking(best, tuple(reversed(worst)), pairs)


def group_sentence(word: str, group: Sequence[str]) -> str:
    """"fastest: tcmalloc", "fastest: tcmalloc and mimalloc, tied", or no claim."""
    if not group:
        return f"{word}: none, no allocator is ahead of all the others"
    if len(group) == 1:
        return f"{word}: {group[0]}"
    return f"{word}: {', '.join(group[:-1])} and {group[-1]}, tied"
