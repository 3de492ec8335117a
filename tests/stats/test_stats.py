"""Every figure from scenc.stats.summary is checked against an independent computation
(numpy/scipy called directly, or the formula written out by hand)."""

import json
import math
import statistics

import numpy as np
import pytest
from scipy import stats as st

from scenc.stats.summary import (Summary, outlier_indices, relative_ci_halfwidth,
                                 summarize)

# Wall-clock-like samples (seconds), deliberately a bit skewed.
TIMES = [0.1213, 0.1198, 0.1231, 0.1205, 0.1222, 0.1260, 0.1201, 0.1217,
         0.1209, 0.1244, 0.1211, 0.1226, 0.1195, 0.1238, 0.1219]


def _json_roundtrip(obj):
    # allow_nan=False is exactly what the result file does: NaN must not leak.
    return json.loads(json.dumps(obj, allow_nan=False))


# ---------------------------------------------------------------- summarize


@pytest.mark.parametrize("confidence", [0.95, 0.90, 0.99])
def test_summary_matches_numpy_and_scipy(confidence):
    x = np.array(TIMES)
    s = summarize(TIMES, confidence=confidence)
    assert s.n == len(TIMES)
    assert s.mean == pytest.approx(statistics.fmean(TIMES), rel=1e-12)
    assert s.median == pytest.approx(statistics.median(TIMES), rel=1e-12)
    assert s.stdev == pytest.approx(statistics.stdev(TIMES), rel=1e-12)
    assert s.cv == pytest.approx(statistics.stdev(TIMES) / statistics.fmean(TIMES), rel=1e-12)
    assert s.min == min(TIMES) and s.max == max(TIMES)

    lo, hi = st.t.interval(confidence, len(x) - 1, loc=x.mean(), scale=st.sem(x))
    assert s.ci_mean == pytest.approx((lo, hi), rel=1e-12)

    boot = st.bootstrap((x,), np.median, n_resamples=2000, method="percentile",
                        confidence_level=confidence, rng=np.random.default_rng(0),
                        vectorized=True)
    assert s.ci_median == pytest.approx(
        (boot.confidence_interval.low, boot.confidence_interval.high), rel=1e-12)
    assert s.ci_median[0] <= s.median <= s.ci_median[1]
    assert s.confidence == confidence


def test_bootstrap_median_interval_is_deterministic_per_seed():
    a = summarize(TIMES, seed=7)
    b = summarize(TIMES, seed=7)
    assert a == b
    boot = st.bootstrap((np.array(TIMES),), np.median, n_resamples=500,
                        method="percentile", rng=np.random.default_rng(7), vectorized=True)
    c = summarize(TIMES, seed=7, bootstrap_resamples=500)
    assert c.ci_median == pytest.approx(
        (boot.confidence_interval.low, boot.confidence_interval.high), rel=1e-12)


def test_summary_is_frozen_plain_data():
    s = summarize(TIMES)
    with pytest.raises(Exception):
        s.mean = 1.0  # type: ignore[misc]
    d = _json_roundtrip(s.to_dict())
    assert d["n"] == len(TIMES)
    assert d["ci_mean"] == list(s.ci_mean)
    assert isinstance(d["outliers"], list)
    assert all(type(v) in (float, int) for v in (d["mean"], d["median"], d["stdev"]))


def _modified_z(x):
    x = np.asarray(x, float)
    mad = st.median_abs_deviation(x)  # raw MAD, scale=1
    return np.abs(x - np.median(x)) / (1.4826 * mad)


def test_planted_outlier_is_flagged_and_only_it():
    rng = np.random.default_rng(42)
    x = list(rng.normal(100.0, 2.0, size=40))
    x[17] = 160.0
    flagged = summarize(x).outliers
    assert flagged == (17,)
    expected = tuple(int(i) for i in np.flatnonzero(_modified_z(x) > 3.5))
    assert flagged == expected


def test_outlier_rule_threshold_is_3_5_robust_z():
    # median 0, MAD 1 -> scale 1.4826; threshold 3.5 * 1.4826 = 5.1891
    base = [-2, -1, -1, 0, 0, 0, 1, 1, 2]
    assert outlier_indices(base + [5.18]) == ()
    # Adding a point shifts median/MAD, so compute the expectation by hand.
    x = base + [5.25]
    assert max(_modified_z(x)) > 3.5
    assert outlier_indices(x) == (9,)
    # Low outliers count too.
    assert outlier_indices([-9.0] + base) == (0,)


def test_outliers_when_mad_is_zero():
    # More than half the runs identical: MAD = 0; fall back to mean absolute
    # deviation * 1.253314 instead of flagging (or dividing by) zero.
    x = [5.0] * 7 + [9.0]
    mean_ad = np.mean(np.abs(np.array(x) - 5.0))
    assert 4.0 / (1.253314 * mean_ad) > 3.5
    assert outlier_indices(x) == (7,)
    assert summarize(x).outliers == (7,)
    assert outlier_indices([3.0] * 6) == ()


def test_n0():
    s = summarize([])
    assert s.n == 0
    assert s.mean is s.median is s.stdev is s.cv is s.min is s.max is None
    assert s.ci_mean is None and s.ci_median is None and s.outliers == ()
    _json_roundtrip(s.to_dict())


def test_n1():
    s = summarize([0.5])
    assert (s.n, s.mean, s.median, s.min, s.max) == (1, 0.5, 0.5, 0.5, 0.5)
    assert s.stdev is None and s.cv is None
    assert s.ci_mean is None and s.ci_median is None and s.outliers == ()
    _json_roundtrip(s.to_dict())


def test_n2():
    s = summarize([1.0, 3.0])
    assert s.stdev == pytest.approx(math.sqrt(2.0))
    assert s.cv == pytest.approx(math.sqrt(2.0) / 2.0)
    lo, hi = st.t.interval(0.95, 1, loc=2.0, scale=math.sqrt(2.0) / math.sqrt(2.0))
    assert s.ci_mean == pytest.approx((lo, hi))
    assert s.ci_median is None  # see test_median_interval_needs_enough_points
    _json_roundtrip(s.to_dict())


def test_median_interval_needs_enough_points():
    # [min, max] covers the median with prob 1 - 2 * 0.5**n: 0.9375 for
    # n=5 (< 0.95, so no honest 95% interval), 0.96875 for n=6.
    assert summarize(TIMES[:5]).ci_median is None
    assert summarize(TIMES[:6]).ci_median is not None
    assert summarize(TIMES[:4], confidence=0.80).ci_median is not None


def test_zero_variance():
    s = summarize([2.5] * 10)
    assert s.stdev == 0.0 and s.cv == 0.0
    assert s.ci_mean == (2.5, 2.5)
    assert s.ci_median == (2.5, 2.5)
    assert s.outliers == ()
    _json_roundtrip(s.to_dict())


def test_zero_mean_gives_no_cv():
    s = summarize([-1.0, 1.0, 0.0])
    assert s.mean == 0.0 and s.cv is None
    _json_roundtrip(s.to_dict())


@pytest.mark.parametrize("bad", [[1.0, float("nan")], [float("inf"), 1.0], [[1.0, 2.0]]])
def test_non_finite_or_nested_input_is_rejected(bad):
    with pytest.raises(ValueError):
        summarize(bad)


def test_bad_confidence_is_rejected():
    with pytest.raises(ValueError):
        summarize(TIMES, confidence=95)


def test_relative_ci_halfwidth():
    x = np.array(TIMES)
    lo, hi = st.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=st.sem(x))
    assert relative_ci_halfwidth(TIMES) == pytest.approx((hi - lo) / 2 / x.mean(), rel=1e-12)
    assert relative_ci_halfwidth([1.0]) is None
    assert relative_ci_halfwidth([]) is None
    assert relative_ci_halfwidth([4.0, 4.0, 4.0]) == 0.0
    assert relative_ci_halfwidth([-1.0, 1.0]) is None  # mean 0
    # Shrinks with n: the "run until within ±2%" loop must terminate.
    rng = np.random.default_rng(1)
    big = rng.normal(1.0, 0.05, 400)
    assert relative_ci_halfwidth(big[:10]) > 0.02 > relative_ci_halfwidth(big)


def test_types_are_exported_dataclasses():
    assert isinstance(summarize(TIMES), Summary)


# Comparisons (stats/rank.py) are tested in test_verdicts.py, their sentences in test_report_verdicts.py.


def test_format_values_prints_a_pair_alike():
    from scenc.stats.summary import format_values
    assert format_values(0.0, 2 / 3) == ("0.0000", "0.6667")
    assert format_values(1.0, 0.0) == ("1", "0")
    assert format_values(12345.6, 12.0) == ("12346", "12")
    assert format_values(0.000123456, 0.0) == ("0.000123", "0.000000")
