"""One allocator against another for one metric: the ratio, its interval, and whether it is significant.

Only the Mann-Whitney p-value needs :mod:`scipy.stats`, so it is computed
when first read, and a report that does not show it never pays for the import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence, Tuple

import numpy as np

from .summary import Interval, _as_samples, _check_confidence, _format_number, _t_quantile, format_values

__all__ = ["Comparison", "compare"]


# --------------------------------------------------------------------------

# metric_word -> (phrase when other < baseline, phrase when other > baseline,
# whether lower values are better).  The phrase follows the direction of the
# numbers, so a sentence is never wrong about which way the difference goes.
_VOCABULARY = {
    "time": ("is {f}x faster than", "is {f}x slower than", True),
    "memory": ("uses {f}x less memory than", "uses {f}x more memory than", True),
    "speed": ("is {f}x slower than", "is {f}x faster than", False),
    "throughput": ("has {f}x lower throughput than", "has {f}x higher throughput than", False),
}


def _fieller_interval(
    baseline: np.ndarray, other: np.ndarray, confidence: float
) -> Interval:
    """CI of mean(other) / mean(baseline) for independent samples.

    Fieller's theorem: the interval is the set of ratios R for which
    mean(other) - R * mean(baseline) is not significantly different from 0,
    i.e. (a - R b)^2 <= t^2 (va + R^2 vb).  We prefer it over a log-scale
    Welch interval because the latter estimates a ratio of *geometric* means
    (and needs positive data), whereas we report the ratio of arithmetic
    means; Fieller is exact for normal means, naturally asymmetric, and says
    so (returns None) when the baseline mean is too noisy for the ratio to be
    bounded.  Unequal variances are handled with a Welch-Satterthwaite df for
    the combined variance va + R^2 vb, evaluated at the observed ratio.
    """
    a, b = float(other.mean()), float(baseline.mean())
    na, nb = len(other), len(baseline)
    va = float(other.var(ddof=1)) / na  # variance of each mean
    vb = float(baseline.var(ddof=1)) / nb
    ratio = a / b
    if va == 0.0 and vb == 0.0:
        return (ratio, ratio)
    denominator = va**2 / (na - 1) + ratio**4 * vb**2 / (nb - 1)
    combined = va + ratio**2 * vb
    df = combined**2 / denominator if denominator > 0 else float(na + nb - 2)
    t = _t_quantile(confidence, df)
    g = t**2 * vb / b**2
    if g >= 1.0:
        return None  # interval is unbounded or the whole line minus a gap
    halfwidth = t / abs(b) * math.sqrt(max(va * (1.0 - g) + ratio**2 * vb, 0.0))
    low, high = (ratio - halfwidth) / (1.0 - g), (ratio + halfwidth) / (1.0 - g)
    return (min(low, high), max(low, high))


def _welch_terms(baseline: np.ndarray, other: np.ndarray) -> Tuple[float, float, Optional[float]]:
    """Welch's mean(other) - mean(baseline), the variance of that difference and its
    Welch-Satterthwaite df (None when both variances are 0): what the test and the interval share."""
    vo = float(other.var(ddof=1)) / len(other)
    vb = float(baseline.var(ddof=1)) / len(baseline)
    difference = float(other.mean()) - float(baseline.mean())
    if vo == 0.0 and vb == 0.0:
        return difference, 0.0, None
    df = (vo + vb) ** 2 / (vo**2 / (len(other) - 1) + vb**2 / (len(baseline) - 1))
    return difference, vo + vb, df


def _welch_p(baseline: np.ndarray, other: np.ndarray) -> Optional[float]:
    """Two-sided p of Welch's t-test, as scipy.stats.ttest_ind(equal_var=False) computes it."""
    from scipy.special import stdtr

    if baseline.var() == 0.0 and other.var() == 0.0:
        # Both constant: scipy gives NaN (equal) or 0 (different); make the
        # equal case explicit instead of leaking NaN.
        return 1.0 if baseline[0] == other[0] else 0.0
    difference, variance, df = _welch_terms(baseline, other)
    t = difference / math.sqrt(variance)
    p = float(2.0 * stdtr(df, -abs(t)))
    return min(p, 1.0) if math.isfinite(p) else None


def _mannwhitney_p(baseline: np.ndarray, other: np.ndarray) -> Optional[float]:
    from scipy import stats as scipy_stats

    p = float(scipy_stats.mannwhitneyu(other, baseline, alternative="two-sided").pvalue)
    return p if math.isfinite(p) else None


_UNSET = object()


def _constant(values: np.ndarray) -> bool:
    return len(values) >= 2 and bool(np.all(values == values[0]))


def _difference_interval(baseline: np.ndarray, other: np.ndarray, confidence: float) -> Interval:
    """Welch CI of mean(other) - mean(baseline): the comparison when a ratio means nothing
    (a baseline mean of 0, or an other mean of 0, which no "x times" can express)."""
    difference, variance, df = _welch_terms(baseline, other)
    if df is None:
        return (difference, difference)
    halfwidth = _t_quantile(confidence, df) * math.sqrt(variance)
    return (difference - halfwidth, difference + halfwidth)


@dataclass(frozen=True)
class Comparison:
    """``other`` measured against ``baseline`` for one metric.

    ``ratio`` is mean(other) / mean(baseline) and ``ratio_ci`` its Fieller
    interval.  ``significant`` is True only when BOTH the Welch t-test gives
    p < 1 - confidence AND ``ratio_ci`` excludes 1.  The two usually agree
    (Fieller at R = 1 is the Welch statistic); requiring both means a result
    is never called significant while the printed interval contains 1, or on
    a ratio too noisy to bound.  The Mann-Whitney p-value is reported as a
    distribution-free cross-check (timings are often skewed) but is not part
    of the rule, so the verdict stays consistent with the printed interval.

    Where no ratio can say it (a mean of 0 on either side) the interval is
    ``difference_ci``, Welch's CI of mean(other) - mean(baseline), and it
    takes the ratio's place in the rule.  When both sides give one value in
    every run (layout figures often do), the values differ or they do not:
    a difference that holds in every run (at least 2 on each side) is
    significant, with no test needed.
    """

    baseline_n: int
    other_n: int
    baseline_mean: Optional[float]
    other_mean: Optional[float]
    ratio: Optional[float]
    ratio_ci: Interval
    p_welch: Optional[float]
    significant: bool
    lower_is_better: bool = True
    confidence: float = 0.95
    difference_ci: Interval = None
    baseline_constant: bool = False     # at least 2 runs, all with the same value
    other_constant: bool = False
    # The two samples, kept for the Mann-Whitney p-value, which is computed on
    # first use (it needs scipy.stats; see the module docstring).
    _samples: Optional[Tuple[Tuple[float, ...], Tuple[float, ...]]] = field(
        default=None, repr=False, compare=False)

    @property
    def p_mannwhitney(self) -> Optional[float]:
        if self._samples is None:
            return None
        cached = self.__dict__.get("_p_mannwhitney", _UNSET)
        if cached is _UNSET:
            base, other = (np.asarray(s, dtype=float) for s in self._samples)
            cached = _mannwhitney_p(base, other)
            object.__setattr__(self, "_p_mannwhitney", cached)
        return cached

    @property
    def both_constant(self) -> bool:
        return self.baseline_constant and self.other_constant

    @property
    def by_ratio(self) -> bool:
        """Whether "x times" can state the difference (both means of one sign, neither 0)."""
        return self.ratio is not None and self.ratio > 0.0

    @property
    def other_is_better(self) -> Optional[bool]:
        """True/False when significant, None when there is no clear difference."""
        if not self.significant or self.other_mean is None or self.baseline_mean is None:
            return None
        return (self.other_mean < self.baseline_mean) == self.lower_is_better

    def to_dict(self) -> dict:
        return {
            "baseline_n": self.baseline_n,
            "other_n": self.other_n,
            "baseline_mean": self.baseline_mean,
            "other_mean": self.other_mean,
            "ratio": self.ratio,
            "ratio_ci": list(self.ratio_ci) if self.ratio_ci is not None else None,
            "difference_ci": list(self.difference_ci) if self.difference_ci is not None else None,
            "baseline_constant": self.baseline_constant,
            "other_constant": self.other_constant,
            "p_welch": self.p_welch,
            "p_mannwhitney": self.p_mannwhitney,
            "significant": self.significant,
            "other_is_better": self.other_is_better,
            "lower_is_better": self.lower_is_better,
            "confidence": self.confidence,
        }

    def sentence(self, name: str, baseline_name: str, metric_word: str = "time") -> str:
        """One plain-words line, e.g. "tcmalloc is 1.31x faster than glibc (1.27–1.35), significant".

        ``metric_word`` is "time" (faster/slower), "memory" (less/more
        memory), "speed" or "throughput" (higher is better), or any other
        noun, giving "has 1.20x higher <noun> than".  The factor is always
        >= 1: baseline/other when other is lower, other/baseline when higher.
        Every case has its own exact sentence (``docs/results.md`` lists them):
        too few runs, the same value in every run, different values in every
        run, a difference no ratio can state, and the usual ratio.
        """
        known = _VOCABULARY.get(metric_word)
        if known is not None and known[2] != self.lower_is_better:
            raise ValueError(
                f"metric_word {metric_word!r} implies lower_is_better={known[2]}, "
                f"but this comparison was made with lower_is_better={self.lower_is_better}"
            )
        counts = f"n={self.other_n} vs n={self.baseline_n}"
        if self.baseline_n == 0 or self.other_n == 0:
            return f"{name}: no runs to compare with {baseline_name} ({counts})"
        values = format_values(self.other_mean, self.baseline_mean)
        if self.baseline_n < 2 or self.other_n < 2:
            return (f"{name}: {values[0]} vs {values[1]} for {baseline_name}, but one run "
                    f"cannot be compared: at least 2 on each side ({counts})")
        lower, higher = known[:2] if known else (f"has {{f}}x lower {metric_word} than",
                                                  f"has {{f}}x higher {metric_word} than")
        template = lower if self.other_mean < self.baseline_mean else higher
        if self.both_constant:
            if self.other_mean == self.baseline_mean:
                return f"{name}: the same as {baseline_name}, {values[0]} in every run ({counts})"
            phrase = template.format(f=self._factor()[0]) if self.by_ratio else template.replace(" {f}x", "")
            return f"{name} {phrase} {baseline_name}: {values[0]} vs {values[1]} in every run ({counts})"
        if not self.by_ratio:
            interval = self.interval_text()
            if not self.significant:
                return (f"{name}: no significant difference from {baseline_name} "
                        f"({values[0]} vs {values[1]} on average, {interval})")
            phrase = template.replace(" {f}x", "")
            return (f"{name} {phrase} {baseline_name}: {values[0]} vs {values[1]} on average "
                    f"({interval}), significant")
        if not self.significant:
            if self.ratio_ci is None:
                interval = "ratio interval unbounded"
            else:
                interval = "–".join(_format_number(v, 2) for v in self.ratio_ci)
            return f"{name}: no significant difference from {baseline_name} ({interval})"

        assert self.ratio_ci is not None  # significant implies a bounded interval
        factor, bounds = self._factor()
        return f"{name} {template.format(f=factor)} {baseline_name} ({bounds}), significant"

    def interval_text(self) -> str:
        """The interval the significance rule reads, printed: "ratio 0.95–1.08" (other/baseline),
        "ratio interval unbounded", or, where no ratio can say it, "difference 0–2" (other − baseline)."""
        if self.by_ratio:
            return ("ratio " + "–".join(_format_number(v, 2) for v in self.ratio_ci) if self.ratio_ci
                    else "ratio interval unbounded")
        return ("difference " + "–".join(format_values(*self.difference_ci)) if self.difference_ci
                else "difference interval unknown")

    def _factor(self) -> Tuple[str, str]:
        """The ratio as a factor >= 1 and its interval, printed: ("1.31", "1.27–1.35")."""
        low, high = self.ratio_ci or (self.ratio, self.ratio)
        if self.ratio < 1.0:
            factor, interval = 1.0 / self.ratio, (1.0 / high, 1.0 / low)
        else:
            factor, interval = self.ratio, (low, high)
        # Tiny but significant differences would all print as "1.00x".
        digits = 3 if factor < 1.01 else 2
        return _format_number(factor, digits), "–".join(_format_number(v, digits) for v in interval)


def compare(
    baseline: Sequence[float],
    other: Sequence[float],
    lower_is_better: bool = True,
    confidence: float = 0.95,
) -> Comparison:
    """Compare ``other`` against ``baseline`` (two independent sets of runs)."""
    _check_confidence(confidence)
    base = _as_samples(baseline, "baseline samples")
    oth = _as_samples(other, "other samples")
    base_mean = float(base.mean()) if len(base) else None
    other_mean = float(oth.mean()) if len(oth) else None
    ratio = (
        other_mean / base_mean
        if base_mean is not None and other_mean is not None and base_mean != 0.0
        else None
    )
    ratio_ci: Interval = None
    difference_ci: Interval = None
    p_welch = samples = None
    significant = False
    if len(base) >= 2 and len(oth) >= 2:
        p_welch = _welch_p(base, oth)
        samples = (tuple(base.tolist()), tuple(oth.tolist()))
        if ratio is not None:
            ratio_ci = _fieller_interval(base, oth, confidence)
        difference_ci = _difference_interval(base, oth, confidence)
        if _constant(base) and _constant(oth):
            significant = base[0] != oth[0]
        elif ratio is not None and ratio > 0.0:
            significant = (p_welch is not None and p_welch < 1.0 - confidence
                           and ratio_ci is not None and not (ratio_ci[0] <= 1.0 <= ratio_ci[1]))
        else:
            significant = (p_welch is not None and p_welch < 1.0 - confidence
                           and not (difference_ci[0] <= 0.0 <= difference_ci[1]))
    return Comparison(
        baseline_n=len(base),
        other_n=len(oth),
        baseline_mean=base_mean,
        other_mean=other_mean,
        ratio=ratio,
        ratio_ci=ratio_ci,
        p_welch=p_welch,
        significant=bool(significant),
        lower_is_better=lower_is_better,
        confidence=confidence,
        difference_ci=difference_ci,
        baseline_constant=_constant(base),
        other_constant=_constant(oth),
        _samples=samples,
    )
