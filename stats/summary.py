"""Descriptive statistics of one metric over repeated runs: mean, median, spread, intervals, outliers.

Plain sequences of floats in (one value per run), frozen dataclasses of plain
data out, so results go straight into a JSON result file: undefined
quantities are ``None``, never NaN. The t distribution comes from
:mod:`scipy.special`, which loads in a fraction of the time of :mod:`scipy.stats`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Optional, Tuple

import numpy as np

__all__ = ["Summary", "summarize", "relative_ci_halfwidth", "outlier_indices", "format_values"]

Interval = Optional[Tuple[float, float]]

# Iglewicz & Hoaglin's modified z-score: 1.4826 * MAD estimates the standard
# deviation of a normal sample, and 3.5 is their recommended cut-off.
MAD_TO_SIGMA = 1.4826
# When more than half the runs are identical MAD is 0, which would flag every
# other run.  The mean absolute deviation scaled by sqrt(pi/2) is the usual
# fallback (it also estimates sigma for normal data).
MEAN_AD_TO_SIGMA = 1.253314
OUTLIER_CUTOFF = 3.5


def _as_samples(samples: Iterable[float], what: str = "samples") -> np.ndarray:
    values = np.asarray(list(samples), dtype=float)
    if values.ndim != 1:
        raise ValueError(f"{what} must be a flat sequence of numbers")
    if not np.all(np.isfinite(values)):
        # A NaN/inf would silently poison every statistic; the caller should
        # drop failed runs rather than feed placeholders in.
        raise ValueError(f"{what} contain NaN or infinity")
    return values


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")


def _t_quantile(confidence: float, df: float) -> float:
    from scipy.special import stdtrit  # what scipy.stats.t.ppf computes

    return float(stdtrit(df, (1.0 + confidence) / 2.0))


def _mean_interval(values: np.ndarray, confidence: float) -> Interval:
    n = len(values)
    if n < 2:
        return None
    mean = float(values.mean())
    stdev = float(values.std(ddof=1))
    if stdev == 0.0:
        # scipy returns (nan, nan) for a zero scale; the honest answer is
        # the single observed value.
        return (mean, mean)
    halfwidth = _t_quantile(confidence, n - 1) * stdev / math.sqrt(n)
    return (mean - halfwidth, mean + halfwidth)


def _min_n_for_median_interval(confidence: float) -> int:
    # A percentile-bootstrap interval for the median never leaves
    # [min, max], and [min, max] only contains the true median with
    # probability 1 - 2 * 0.5**n.  Below this n no interval built from the
    # data can honestly claim `confidence`, so we report none (n >= 6 at 95%).
    n = 1
    while 1.0 - 2.0 * 0.5**n < confidence:
        n += 1
    return n


def _median_interval(
    values: np.ndarray, confidence: float, resamples: int, seed: int
) -> Interval:
    n = len(values)
    if n < _min_n_for_median_interval(confidence):
        return None
    rng = np.random.default_rng(seed)
    # Same draw order as scipy.stats.bootstrap(method="percentile"), so the
    # two agree exactly for the same seed (the tests rely on this).
    indices = rng.integers(0, n, (resamples, n))
    medians = np.median(values[indices], axis=-1)
    alpha = 1.0 - confidence
    low, high = np.percentile(medians, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return (float(low), float(high))


def outlier_indices(samples: Iterable[float]) -> Tuple[int, ...]:
    """Indices whose robust z-score |x - median| / (1.4826 * MAD) exceeds 3.5.

    Outliers are reported, not removed: a slow run caused by the allocator
    (e.g. a page-fault storm) is a real result.
    """
    values = _as_samples(samples)
    if len(values) == 0:
        return ()
    deviations = np.abs(values - np.median(values))
    scale = MAD_TO_SIGMA * float(np.median(deviations))
    if scale == 0.0:
        scale = MEAN_AD_TO_SIGMA * float(deviations.mean())
    if scale == 0.0:
        return ()  # all runs identical
    return tuple(int(i) for i in np.flatnonzero(deviations / scale > OUTLIER_CUTOFF))


@dataclass(frozen=True)
class Summary:
    """Descriptive statistics of one metric over repeated runs.

    ``stdev`` is the sample standard deviation (ddof=1) and ``cv`` is
    stdev / |mean|.  ``ci_mean`` is a Student-t interval, ``ci_median`` a
    percentile-bootstrap interval; any of them is ``None`` when the sample is
    too small (or the mean is 0 for ``cv``).
    """

    n: int
    mean: Optional[float]
    median: Optional[float]
    stdev: Optional[float]
    cv: Optional[float]
    ci_mean: Interval
    ci_median: Interval
    min: Optional[float]
    max: Optional[float]
    outliers: Tuple[int, ...] = ()
    confidence: float = 0.95

    def to_dict(self) -> dict:
        return {
            "n": self.n,
            "mean": self.mean,
            "median": self.median,
            "stdev": self.stdev,
            "cv": self.cv,
            "ci_mean": list(self.ci_mean) if self.ci_mean is not None else None,
            "ci_median": list(self.ci_median) if self.ci_median is not None else None,
            "min": self.min,
            "max": self.max,
            "outliers": list(self.outliers),
            "confidence": self.confidence,
        }


def summarize(
    samples: Iterable[float],
    confidence: float = 0.95,
    bootstrap_resamples: int = 2000,
    seed: int = 0,
) -> Summary:
    """Summarize one metric; deterministic for a given ``seed``."""
    _check_confidence(confidence)
    if bootstrap_resamples < 1:
        raise ValueError("bootstrap_resamples must be >= 1")
    values = _as_samples(samples)
    n = len(values)
    if n == 0:
        return Summary(
            n=0, mean=None, median=None, stdev=None, cv=None, ci_mean=None,
            ci_median=None, min=None, max=None, outliers=(), confidence=confidence,
        )
    mean = float(values.mean())
    stdev = float(values.std(ddof=1)) if n >= 2 else None
    cv = stdev / abs(mean) if stdev is not None and mean != 0.0 else None
    return Summary(
        n=n,
        mean=mean,
        median=float(np.median(values)),
        stdev=stdev,
        cv=cv,
        ci_mean=_mean_interval(values, confidence),
        ci_median=_median_interval(values, confidence, bootstrap_resamples, seed),
        min=float(values.min()),
        max=float(values.max()),
        outliers=outlier_indices(values),
        confidence=confidence,
    )


def relative_ci_halfwidth(
    samples: Iterable[float], confidence: float = 0.95
) -> Optional[float]:
    """Half-width of the t interval of the mean, divided by |mean|.

    Drives "keep running until the CI is within ±2%": stop once this is
    <= 0.02.  ``None`` while it cannot be computed (n < 2 or mean 0), which a
    stopping rule should treat as "not yet".
    """
    _check_confidence(confidence)
    values = _as_samples(samples)
    interval = _mean_interval(values, confidence)
    mean = float(values.mean()) if len(values) else 0.0
    if interval is None or mean == 0.0:
        return None
    return (interval[1] - interval[0]) / 2.0 / abs(mean)


def _format_number(value: float, digits: int) -> str:
    return f"{value:.{digits}f}"


def format_values(*values: float) -> Tuple[str, ...]:
    """Several figures printed alike: integers as integers, otherwise four significant digits of
    the largest (at most six decimals), e.g. (0.0, 2/3) -> ("0.0000", "0.6667")."""
    if all(float(v).is_integer() and abs(v) < 1e15 for v in values):
        return tuple(str(int(v)) for v in values)
    largest = max(abs(v) for v in values)
    digits = min(6, max(0, 3 - math.floor(math.log10(largest)))) if largest > 0 else 4
    return tuple(_format_number(v, digits) for v in values)
