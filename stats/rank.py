"""One procedure per two-sample comparison: the rank test, its estimate and its interval.

Wilcoxon-Mann-Whitney test, Hodges-Lehmann estimate of the ratio (on logs),
and the interval that inverts the same test (Moses 1953, Bauer 1972), so
"significant" and "the interval lies beyond the noise band" are one
statement. numpy and scipy.special only; nothing else from the package.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Callable, Iterable, Optional, Tuple

import numpy as np

__all__ = ["Verdict", "Comparison", "compare", "decide", "noise_band", "null_two_sided",
           "critical_count", "exact_feasible", "pairwise_differences",
           "MIN_RUNS", "DEFAULT_NOISE", "DEFAULT_CONFIDENCE"]

# With 4 runs a side the smallest two-sided p of the rank test is 2/C(8,4) = 2/70
# = 0.029, the first that can pass 5%; 3 vs 3 (2/20) and 3 vs 4 (2/35) never can.
MIN_RUNS = 4
# The exact null distribution is used while its counts, at most C(m+n, m), stay
# exact in int64 (both sides up to 32 runs, or 4 against ~40000) and the table
# stays small; beyond that the normal approximation is good.
EXACT_MAX_COUNT = 2**62
EXACT_MAX_CELLS = 40_000
DEFAULT_NOISE = 0.01         # differences inside +-1% are noise (criterion.rs's default too)
DEFAULT_CONFIDENCE = 0.95

Interval = Optional[Tuple[float, float]]


class Verdict(str, enum.Enum):
    """What may be said of ``other`` against ``baseline``."""
    BETTER = "better"                  # interval wholly beyond the noise band, on the good side
    WORSE = "worse"                    # ... on the bad side
    EQUIVALENT = "equivalent"          # interval wholly inside the noise band
    NO_DIFFERENCE = "no_difference"    # neither: no difference beyond noise shown
    TOO_FEW = "too_few"                # fewer than MIN_RUNS on a side: no claim at all


# ---------------------------------------------------------------- null distribution

def exact_feasible(m: int, n: int) -> bool:
    return m * n <= EXACT_MAX_CELLS and math.comb(m + n, m) <= EXACT_MAX_COUNT


@lru_cache(maxsize=64)
def _exact_cdf(m: int, n: int) -> np.ndarray:
    """P(U <= u) for u = 0..mn, U the Mann-Whitney count under H0 without ties.

    The counts are the coefficients of the Gaussian binomial [m+n choose m]_q
    = prod_{j=1..m} (1 - q^(n+j)) / (1 - q^j) (Mann & Whitney 1947), built one
    factor at a time; every partial product is itself a polynomial with
    non-negative integer coefficients, so int64 arithmetic is exact.
    """
    small, big = min(m, n), max(m, n)
    top = m * n
    counts = np.zeros(top + 1, dtype=np.int64)
    counts[0] = 1
    for j in range(1, small + 1):
        shift = big + j
        if shift <= top:
            counts[shift:] = counts[shift:] - counts[:top + 1 - shift].copy()
        for r in range(j):                       # divide by (1 - q^j): running sums, stride j
            counts[r::j] = np.cumsum(counts[r::j])
    total = math.comb(m + n, m)
    assert int(counts.sum()) == total
    return np.cumsum(counts) / total


def _tie_term(*samples: np.ndarray) -> float:
    """sum(t^3 - t) over groups of equal values inside each sample.

    Only ties *within* a sample: at any shift that is not itself a pairwise
    difference there are no ties between the samples, so this is the variance
    correction of the test at every point of the interval but its ends.
    """
    total = 0.0
    for s in samples:
        _, t = np.unique(s, return_counts=True)
        total += float(np.sum(t.astype(float) ** 3 - t))
    return total


def null_two_sided(m: int, n: int, tie_term: float = 0.0) -> Callable[[int], float]:
    """x -> min(1, 2 P(U <= x)) under H0: exact when :func:`exact_feasible` (ties
    within samples ignored: conservative, Noether 1967), else normal with continuity
    correction and the within-sample tie correction of the variance."""
    if exact_feasible(m, n):
        cdf = _exact_cdf(m, n)
        return lambda x: 0.0 if x < 0 else min(1.0, 2.0 * float(cdf[min(int(x), m * n)]))
    from scipy.special import ndtr

    big_n = m + n
    var = m * n / 12.0 * ((big_n + 1) - tie_term / (big_n * (big_n - 1)))
    sd, mean = math.sqrt(max(var, 1e-300)), m * n / 2.0
    return lambda x: 0.0 if x < 0 else min(1.0, 2.0 * float(ndtr((x + 0.5 - mean) / sd)))


def critical_count(two_sided: Callable[[int], float], mn: int, alpha: float) -> int:
    """The largest count c with two_sided(c) <= alpha (-1 when there is none).

    The test rejects a shift s when at most c pairwise differences D are <= s, or
    at most c are >= s, so the shifts it keeps are [D_(c+1), D_(mn-c)] (1-based
    order statistics).  Bisection on a monotone function, with the comparison
    the p-value is judged by.  c < mn/2, as two_sided(mn//2) = 1.
    """
    low, high = -1, mn // 2                      # two_sided(-1) = 0 <= alpha
    while low < high:
        mid = (low + high + 1) // 2
        if two_sided(mid) <= alpha:
            low = mid
        else:
            high = mid - 1
    return low


# ---------------------------------------------------------------- the result

@dataclass(frozen=True)
class Comparison:
    """``other`` against ``baseline``: the Hodges-Lehmann estimate, its rank interval, the verdict.

    ``estimate`` and ``ci`` are other/baseline (``scale`` "ratio") or, when a
    value <= 0 rules out logs, other - baseline (``scale`` "difference").
    ``ci`` is None when no interval at ``confidence`` can be built from so few
    runs (and then there is no claim).  ``p_value`` is the smallest 1 -
    confidence at which ``ci`` would exclude the null, so ``p_value <= 1 -
    confidence`` exactly when it does.  ``achieved_confidence`` is the
    coverage of the discrete interval, >= ``confidence`` (exact method; the
    normal method's is approximate).  ``band`` is the noise band on the same
    scale as ``ci``.
    """

    estimate: Optional[float]
    ci: Interval
    p_value: Optional[float]
    verdict: Verdict
    n_baseline: int
    n_other: int
    lower_is_better: bool = True
    noise: float = DEFAULT_NOISE
    confidence: float = DEFAULT_CONFIDENCE
    scale: str = "ratio"
    band: Tuple[float, float] = (1.0, 1.0)
    achieved_confidence: Optional[float] = None
    method: str = "exact"
    # The smallest 1 - confidence at which ``ci`` would lie wholly beyond ``band``: the
    # p-value of the claim actually made, which multiplicity corrections take.
    p_beyond: Optional[float] = None

    @property
    def significant(self) -> bool:
        return self.verdict in (Verdict.BETTER, Verdict.WORSE)

    @property
    def other_is_better(self) -> Optional[bool]:
        """True/False for a significant verdict, None when there is no claim of a difference."""
        return {Verdict.BETTER: True, Verdict.WORSE: False}.get(self.verdict)

    def flipped(self) -> "Comparison":
        """``baseline`` against ``other``: the same test read the other way round.

        Exact, not recomputed: the null distribution is symmetric, so the
        interval of the reversed pair is the reversed interval; the band
        stays the one of this comparison (on a difference scale it comes
        from the baseline's median, and a verdict must not change with the
        side it is read from).
        """
        ratio = self.scale == "ratio"
        turn = (lambda v: 1.0 / v) if ratio else (lambda v: -v)
        swap = {Verdict.BETTER: Verdict.WORSE, Verdict.WORSE: Verdict.BETTER}
        return replace(
            self, estimate=None if self.estimate is None else turn(self.estimate),
            ci=None if self.ci is None else (turn(self.ci[1]), turn(self.ci[0])),
            band=(turn(self.band[1]), turn(self.band[0])), verdict=swap.get(self.verdict, self.verdict),
            n_baseline=self.n_other, n_other=self.n_baseline)

    def to_dict(self) -> dict:
        return {"estimate": self.estimate, "ci": list(self.ci) if self.ci else None,
                "p_value": self.p_value, "p_beyond": self.p_beyond, "verdict": self.verdict.value,
                "n_baseline": self.n_baseline, "n_other": self.n_other,
                "lower_is_better": self.lower_is_better, "noise": self.noise,
                "confidence": self.confidence, "scale": self.scale, "band": list(self.band),
                "achieved_confidence": self.achieved_confidence, "method": self.method,
                "message": self.message()}

    def message(self) -> str:
        """The verdict in words, with the interval it rests on: "1.50x lower (1.45–1.62), significant"."""
        if self.verdict is Verdict.TOO_FEW:
            return f"too few runs to tell: {min(self.n_baseline, self.n_other)}"
        if self.ci is None:
            return (f"no significant difference (no {self.confidence:.1%} interval from "
                    f"{self.n_other} vs {self.n_baseline} runs)")
        noise = f"{self.noise * 100:g}%" + ("" if self.scale == "ratio" else " of the baseline")
        if self.verdict is Verdict.EQUIVALENT:
            return f"equivalent within {noise} ({self._plain_interval()})"
        if self.verdict is Verdict.NO_DIFFERENCE:
            beyond = f" beyond {noise}" if self.noise > 0 else ""
            return f"no significant difference{beyond} ({self._plain_interval()})"
        size, bounds = (_show_ratio if self.scale == "ratio" else _show_difference)(self.estimate, self.ci)
        return f"{size} ({bounds}), significant"

    def _plain_interval(self) -> str:
        """The interval as it is, other/baseline or other - baseline: "ratio 0.970–1.020"."""
        if self.scale == "ratio":
            d = _digits(*self.ci)
            return f"ratio {self.ci[0]:.{d}f}–{self.ci[1]:.{d}f}"
        return f"difference {self.ci[0]:.4g} to {self.ci[1]:.4g}"

def _digits(*values: float) -> int:
    """Three decimals while the factors are small, so 1.007 does not print as 1.01."""
    return 3 if max(values) < 1.2 else 2


def _show_ratio(estimate: float, ci: Tuple[float, float]) -> Tuple[str, str]:
    """("1.50x lower", "1.45–1.62"): the estimate as a factor >= 1, and the interval alike."""
    low, high = ci
    if estimate < 1.0:
        factor, bounds, word = 1.0 / estimate, (1.0 / high, 1.0 / low), "lower"
    else:
        factor, bounds, word = estimate, (low, high), "higher"
    d = _digits(factor, *bounds)
    return f"{factor:.{d}f}x {word}", f"{bounds[0]:.{d}f}–{bounds[1]:.{d}f}"


def _show_difference(estimate: float, ci: Tuple[float, float]) -> Tuple[str, str]:
    """("12.5 lower", "difference -20 to -3"): other - baseline."""
    word = "lower" if estimate < 0 else "higher"
    return f"{abs(estimate):.4g} {word}", f"difference {ci[0]:.4g} to {ci[1]:.4g}"


# ---------------------------------------------------------------- the procedure

def _as_samples(values: Iterable[float], what: str) -> np.ndarray:
    array = np.asarray(list(values), dtype=float)
    if array.ndim != 1 or not np.all(np.isfinite(array)):
        raise ValueError(f"{what} must be a flat sequence of finite numbers")
    return array


def noise_band(scale: str, noise: float, baseline: np.ndarray) -> Tuple[float, float]:
    """Differences too small to matter: [1/(1+noise), 1+noise] for a ratio (symmetric in
    log), +-noise * |median(baseline)| for a difference."""
    if scale == "ratio":
        return (1.0 / (1.0 + noise), 1.0 + noise)
    half = noise * abs(float(np.median(baseline)))
    return (-half, half)


def decide(ci: Interval, band: Tuple[float, float], lower_is_better: bool) -> Verdict:
    """The verdict read off the interval alone, so words and interval cannot disagree.

    A difference is claimed only when the WHOLE interval lies beyond the noise
    band (as criterion.rs does): that is a test, at the interval's level, of
    "the difference exceeds the noise", and it implies the interval excludes
    1.  The other candidate, "excludes 1 and the estimate is beyond the band",
    would claim a true ratio of exactly 1+noise to be beyond it about half the
    time, and call 1.012x (1.004-1.02) significant though the interval admits
    0.4%.  Equivalence is claimed when the whole interval lies inside the band
    (two one-sided tests at the same level).  The price: a difference just
    beyond the band needs more runs to be claimed.
    """
    if ci is None:
        return Verdict.NO_DIFFERENCE
    (low, high), (band_low, band_high) = ci, band
    if low > band_high or high < band_low:
        return Verdict.WORSE if (low > band_high) == lower_is_better else Verdict.BETTER
    if band_low <= low and high <= band_high:
        return Verdict.EQUIVALENT
    return Verdict.NO_DIFFERENCE


def pairwise_differences(baseline: np.ndarray, other: np.ndarray) -> np.ndarray:
    """All o_i - b_j, sorted: what the estimate and the interval are read from."""
    return np.sort(np.subtract.outer(other, baseline), axis=None)


def _on_scale(base: np.ndarray, oth: np.ndarray) -> Tuple[str, np.ndarray, np.ndarray]:
    """Logs when every value is > 0 (a ratio), else the raw values (a difference)."""
    if np.all(base > 0) and np.all(oth > 0):
        return "ratio", np.log(base), np.log(oth)
    return "difference", base, oth


def _too_few(base: np.ndarray, oth: np.ndarray, scale: str, **common) -> Comparison:
    estimate = None
    if len(base) and len(oth):
        d = float(np.median(pairwise_differences(base, oth)))
        estimate = math.exp(d) if scale == "ratio" else d
    return Comparison(estimate, None, None, Verdict.TOO_FEW, len(base), len(oth), scale=scale, **common)


def compare(baseline: Iterable[float], other: Iterable[float], *, lower_is_better: bool = True,
            noise: float = DEFAULT_NOISE, confidence: float = DEFAULT_CONFIDENCE) -> Comparison:
    """``other`` against ``baseline`` (independent runs): one rank procedure for everything.

    estimate: Hodges-Lehmann (1963), the median of all log(o_i) - log(b_j),
    exponentiated: a ratio other/baseline that a single wild run cannot drag.
    interval: the shifts the two-sided rank-sum test does not reject at
    1 - confidence (Moses 1953; Bauer 1972), i.e. [D_(c+1), D_(mn-c)]; closed,
    so its coverage stays >= confidence with ties (Noether 1967).
    p-value: 2 P(U <= min(#D <= 0, #D >= 0)), ties at the null counted against
    the claim; it equals the usual Mann-Whitney p when no o_i equals a b_j.
    verdict: :func:`decide` on that interval and the noise band.
    """
    if not 0.0 < confidence < 1.0 or noise < 0.0:
        raise ValueError("confidence must be in (0, 1) and noise >= 0")
    raw = _as_samples(baseline, "baseline")
    scale, base, oth = _on_scale(raw, _as_samples(other, "other"))
    common = dict(lower_is_better=lower_is_better, noise=noise, confidence=confidence)
    if min(len(base), len(oth)) < MIN_RUNS:
        return _too_few(base, oth, scale, **common)
    m, n = len(oth), len(base)
    two_sided = null_two_sided(m, n, _tie_term(base, oth))
    c = critical_count(two_sided, m * n, 1.0 - confidence)
    # Every decision is read off these back-transformed differences, sorted like the
    # logs: the interval's ends are two of them, and the counts below compare the same
    # floats with the same thresholds, so the verdict, the p-values and the interval
    # cannot disagree even where a ratio lies on the edge of the band.
    d = pairwise_differences(base, oth)
    back = np.exp if scale == "ratio" else (lambda x: x)
    e = back(d)
    ci = (float(e[c]), float(e[-1 - c])) if c >= 0 else None
    band = noise_band(scale, noise, raw)
    null = 1.0 if scale == "ratio" else 0.0
    return Comparison(
        estimate=float(back(np.median(d))), ci=ci, p_value=two_sided(_fewest_beyond(e, null, null)),
        verdict=decide(ci, band, lower_is_better), n_baseline=n, n_other=m, scale=scale,
        band=band, achieved_confidence=(1.0 - two_sided(c)) if c >= 0 else None,
        method="exact" if exact_feasible(m, n) else "normal",
        p_beyond=two_sided(_fewest_beyond(e, band[0], band[1])), **common)


def _fewest_beyond(e: np.ndarray, low: float, high: float) -> int:
    """min(#e <= high, #e >= low): the interval at 1 - two_sided(c) lies above ``high``
    exactly when #e <= high is at most c (e[c] > high), and below ``low`` likewise."""
    at_most = int(np.searchsorted(e, high, "right"))
    at_least = int(len(e) - np.searchsorted(e, low, "left"))
    return min(at_most, at_least)
