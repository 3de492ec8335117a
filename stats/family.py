"""Families of comparisons: Holm and Benjamini-Hochberg, the levels they grant, k-way rankings.

A report over four identical allocators makes six pairwise comparisons per
metric; at 5% each, some "difference" would turn up far more often than 5%
of the time.  Nothing here imports the two-sample procedure: it is passed in.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import combinations
from typing import Any, Callable, Dict, Hashable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

__all__ = ["holm", "benjamini_hochberg", "holm_levels", "bh_levels", "Question", "Pair", "judge",
           "Ranking", "top_group", "groups", "rank", "group_sentence"]


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


def bh_levels(p_values: Sequence[Optional[float]], alpha: float) -> List[float]:
    """The level Benjamini-Hochberg grants every hypothesis: alpha R / m, R its rejections (1 if none).

    BH rejects exactly the p <= alpha R / m, and every other p exceeds it (else
    R + 1 would qualify), so intervals at 1 - alpha R / m exclude the null
    exactly where BH rejects: Benjamini & Yekutieli's (2005) intervals for the
    selected, which keep the false coverage rate at alpha.
    """
    p = _p_array(p_values)
    m = len(p)
    if m == 0:
        return []
    rejected = int(np.sum(np.asarray(benjamini_hochberg(p)) <= alpha))
    return [alpha * max(rejected, 1) / m] * m


@dataclass(frozen=True)
class Question:
    """One comparison of a family: ``other``'s runs against ``baseline``'s.

    ``family`` groups the questions Holm corrects together (one cell of a
    report); ``tag`` is the caller's, handed back in the Pair (a metric name).
    """
    baseline: str
    other: str
    baseline_runs: Sequence[float]
    other_runs: Sequence[float]
    lower_is_better: bool = True
    family: Hashable = 0
    tag: Any = None


@dataclass(frozen=True)
class Pair:
    """``other`` against ``baseline`` within a family, at the level the correction granted it."""
    baseline: str
    other: str
    result: Any                 # what the two-sample procedure returned, at `confidence`
    confidence: float           # 1 - the level granted to this comparison
    p_adjusted: float           # Holm- or BH-adjusted p-value of its claim
    tag: Any = None

    def to_dict(self) -> dict:
        return {"baseline": self.baseline, "other": self.other, "confidence": self.confidence,
                "p_adjusted": self.p_adjusted, "result": self.result.to_dict()}


def _claim_p(result) -> Optional[float]:
    """The p-value of the claim a result can make: beyond the noise band when it says, else vs the null."""
    p = getattr(result, "p_beyond", None)
    return result.p_value if p is None else p


def judge(questions: Sequence[Question], compare: Callable[..., Any], *, method: str = "holm",
          confidence: float = 0.95, noise: float = 0.01) -> List[Pair]:
    """Every question answered at the level the correction grants it, in the order given.

    ``compare(baseline, other, lower_is_better=, noise=, confidence=)`` is the
    two-sample procedure; its result needs ``p_value`` (None when no test was
    possible), optionally ``p_beyond`` (the p-value of "the difference exceeds
    the noise", which is then what is corrected), ``other_is_better`` and
    ``to_dict()``.  Each question is answered once at ``confidence`` for its
    p-value, then again at its granted level, so its verdict and its interval
    agree with the correction's decision.  ``method``: "holm" (family-wise,
    within each ``family``) or "bh" (false discovery rate, over all questions).
    """
    alpha = 1.0 - confidence
    ask = lambda q, conf: compare(q.baseline_runs, q.other_runs, lower_is_better=q.lower_is_better,  # noqa: E731
                                  noise=noise, confidence=conf)
    first = [ask(q, confidence) for q in questions]
    p_values = [_claim_p(r) for r in first]
    levels, adjusted = [alpha] * len(questions), [1.0] * len(questions)
    if method == "bh":
        levels, adjusted = bh_levels(p_values, alpha), benjamini_hochberg(p_values)
    elif method == "holm":
        for family in dict.fromkeys(q.family for q in questions):
            where = [i for i, q in enumerate(questions) if q.family == family]
            mine = [p_values[i] for i in where]
            for i, level, adj in zip(where, holm_levels(mine, alpha), holm(mine)):
                levels[i], adjusted[i] = level, adj
    else:
        raise ValueError(f"method must be holm or bh, not {method!r}")
    return [Pair(q.baseline, q.other, r if level == alpha else ask(q, 1.0 - level), 1.0 - level, adj, q.tag)
            for q, r, level, adj in zip(questions, first, levels, adjusted)]


@dataclass(frozen=True)
class Ranking:
    """The best and worst groups of a k-way comparison; () where no claim can be made.

    A group of one is ahead of (behind) every other allocator after the
    correction.  A larger group cannot be separated internally, yet each of
    its members is ahead of (behind) every allocator outside it.  ``pairs``
    holds every comparison the verdicts rest on; ``order`` is by median, best first.
    """
    best: Tuple[str, ...]
    worst: Tuple[str, ...]
    pairs: Tuple[Pair, ...]
    order: Tuple[str, ...] = ()

    def claims(self) -> List[Pair]:
        """The pairs with a significant difference after the correction."""
        return [p for p in self.pairs if p.result.other_is_better is not None]

    def beats(self, x: str, y: str) -> bool:
        """Whether x is significantly better than y."""
        return _beats(self.pairs).get((x, y), False)

    def pair(self, x: str, y: str) -> Optional[Pair]:
        """The comparison of x and y, read as x (other) against y (baseline)."""
        for p in self.pairs:
            if (p.other, p.baseline) == (x, y):
                return p
            if (p.baseline, p.other) == (x, y):
                return replace(p, baseline=y, other=x, result=p.result.flipped())
        return None

    def to_dict(self) -> dict:
        return {"best": list(self.best), "worst": list(self.worst),
                "pairs": [p.to_dict() for p in self.pairs]}


def _beats(pairs: Sequence[Pair]) -> Dict[Tuple[str, str], bool]:
    """(x, y) -> True when x is significantly better than y (after the correction)."""
    beats = {}
    for pair in pairs:
        better = pair.result.other_is_better
        beats[(pair.other, pair.baseline)] = better is True
        beats[(pair.baseline, pair.other)] = better is False
    return beats


def top_group(order: Sequence[str], beats: Callable[[str, str], bool]) -> Tuple[str, ...]:
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


_top_group = top_group


def by_median(samples: Mapping[str, Sequence[float]], lower_is_better: bool) -> List[str]:
    """Names best first by median (ties keep the given order)."""
    return sorted(samples, key=lambda a: float(np.median(samples[a])) if len(samples[a]) else np.inf,
                  reverse=not lower_is_better)


def groups(order: Sequence[str], pairs: Sequence[Pair]) -> Ranking:
    """The best and worst groups of ``order`` (best first) from the judged pairs among them."""
    beats = _beats(pairs)
    won = lambda x, y: beats.get((x, y), False)  # noqa: E731
    best = top_group(order, won)
    worst = top_group(list(order)[::-1], lambda x, y: won(y, x))
    return Ranking(best, tuple(reversed(worst)), tuple(pairs), tuple(order))


def rank(samples: Mapping[str, Sequence[float]], compare: Callable[..., Any], *,
         lower_is_better: bool = True, confidence: float = 0.95, noise: float = 0.01) -> Ranking:
    """Rank k allocators by all k(k-1)/2 pairwise comparisons, Holm-corrected (see :func:`judge`).

    Allocators are ordered by median (best first) only to pick the leader and to list groups.
    """
    names = by_median(samples, lower_is_better)
    if len(names) < 2:
        return Ranking((), (), (), tuple(names))
    questions = [Question(a, b, samples[a], samples[b], lower_is_better) for a, b in combinations(names, 2)]
    return groups(names, judge(questions, compare, confidence=confidence, noise=noise))


def group_sentence(word: str, group: Sequence[str]) -> str:
    """"fastest: tcmalloc", "fastest: tcmalloc and mimalloc, tied", or no claim."""
    if not group:
        return f"{word}: none, no allocator is ahead of all the others"
    if len(group) == 1:
        return f"{word}: {group[0]}"
    return f"{word}: {', '.join(group[:-1])} and {group[-1]}, tied"
