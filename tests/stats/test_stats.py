"""Every figure from scenc.stats.summary is checked against an independent computation
(numpy/scipy called directly, or the formula written out by hand)."""

import json
import math
import statistics

import numpy as np
import pytest
from scipy import stats as st

from scenc.stats.comparison import Comparison, compare
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


# ------------------------------------------------------------------ compare

BASE = [1.000, 1.021, 0.987, 1.012, 0.995, 1.030, 0.978, 1.004, 1.016, 0.991]
FAST = [0.762, 0.771, 0.755, 0.780, 0.768, 0.759, 0.774, 0.765, 0.770, 0.761]


def _fieller_by_quadratic(base, other, confidence=0.95):
    """Fieller bounds as the roots of (a - R b)^2 = t^2 (va + R^2 vb)."""
    base, other = np.asarray(base, float), np.asarray(other, float)
    a, b = other.mean(), base.mean()
    va, vb = other.var(ddof=1) / len(other), base.var(ddof=1) / len(base)
    r = a / b
    df = (va + r * r * vb) ** 2 / (va**2 / (len(other) - 1) + r**4 * vb**2 / (len(base) - 1))
    t = st.t.ppf((1 + confidence) / 2, df)
    roots = np.roots([b * b - t * t * vb, -2 * a * b, a * a - t * t * va])
    return tuple(sorted(float(v) for v in roots.real))


def test_compare_matches_scipy_and_fieller():
    c = compare(BASE, FAST)
    assert c.baseline_n == 10 and c.other_n == 10
    assert c.ratio == pytest.approx(np.mean(FAST) / np.mean(BASE), rel=1e-12)
    assert c.p_welch == pytest.approx(
        st.ttest_ind(FAST, BASE, equal_var=False).pvalue, rel=1e-9)
    assert c.p_mannwhitney == pytest.approx(
        st.mannwhitneyu(FAST, BASE, alternative="two-sided").pvalue, rel=1e-9)
    assert c.ratio_ci == pytest.approx(_fieller_by_quadratic(BASE, FAST), rel=1e-9)
    assert c.ratio_ci[0] < c.ratio < c.ratio_ci[1]
    assert c.significant and c.other_is_better is True
    _json_roundtrip(c.to_dict())


def test_fieller_with_unequal_sizes_and_variances():
    rng = np.random.default_rng(3)
    base = rng.normal(50.0, 6.0, 8)
    other = rng.normal(53.0, 1.0, 30)
    c = compare(base, other, confidence=0.90)
    assert c.ratio_ci == pytest.approx(_fieller_by_quadratic(base, other, 0.90), rel=1e-9)
    assert c.p_welch == pytest.approx(st.ttest_ind(other, base, equal_var=False).pvalue)


def test_fieller_interval_has_nominal_coverage():
    # Simulated allocator timings with a known true ratio 1.1: the 95%
    # interval must contain it about 95% of the time (binomial sd ~0.7%).
    rng = np.random.default_rng(2024)
    trials, hits = 1000, 0
    for _ in range(trials):
        base = rng.normal(10.0, 1.5, 12)
        other = rng.normal(11.0, 0.6, 7)
        lo, hi = compare(base, other).ratio_ci
        hits += lo <= 1.1 <= hi
    assert 0.93 <= hits / trials <= 0.97


def test_unbounded_ratio_interval_when_baseline_mean_is_noisy():
    c = compare([-1.0, 2.0, -0.5, 1.2], [1.0, 1.1, 0.9, 1.0])
    assert c.ratio is not None
    assert c.ratio_ci is None and not c.significant
    assert c.sentence("jemalloc", "glibc") == (
        "jemalloc: no significant difference from glibc (ratio interval unbounded)")
    _json_roundtrip(c.to_dict())


def test_no_difference_is_not_significant():
    rng = np.random.default_rng(5)
    base = rng.normal(1.0, 0.02, 30)
    other = rng.normal(1.0, 0.02, 30)
    c = compare(base, other)
    assert c.p_welch > 0.05
    assert c.ratio_ci[0] < 1.0 < c.ratio_ci[1]
    assert not c.significant and c.other_is_better is None


def test_significance_rule_uses_confidence_level():
    # Shift chosen so that 0.01 < p < 0.05: significant at 95%, not at 99%.
    base = np.array(BASE)
    other = base[::-1] + 0.0168
    p = st.ttest_ind(other, base, equal_var=False).pvalue
    assert 0.01 < p < 0.05
    strict = compare(base, other, confidence=0.95)
    assert strict.significant
    assert not (strict.ratio_ci[0] <= 1.0 <= strict.ratio_ci[1])
    loose = compare(base, other, confidence=0.99)
    assert not loose.significant
    assert loose.ratio_ci[0] <= 1.0 <= loose.ratio_ci[1]


def test_compare_with_too_few_runs():
    for base, other in [([], [1.0, 2.0]), ([1.0], [1.0, 2.0]), ([1.0, 2.0], [3.0])]:
        c = compare(base, other)
        assert c.p_welch is None and c.p_mannwhitney is None and c.ratio_ci is None
        assert not c.significant
        assert ("no runs to compare" if base == [] else "cannot be compared") in c.sentence("tcmalloc", "glibc")
        _json_roundtrip(c.to_dict())


def test_compare_zero_variance():
    c = compare([2.0] * 5, [1.0] * 5)
    assert c.ratio == 0.5 and c.ratio_ci == (0.5, 0.5)
    assert c.p_welch == 0.0 and c.significant
    assert c.sentence("tcmalloc", "glibc") == "tcmalloc is 2.00x faster than glibc: 1 vs 2 in every run (n=5 vs n=5)"
    same = compare([2.0] * 5, [2.0] * 5)
    assert same.p_welch == 1.0 and not same.significant
    assert same.p_mannwhitney == pytest.approx(1.0)
    _json_roundtrip(same.to_dict())


def test_compare_zero_baseline_mean():
    c = compare([-1.0, 1.0], [1.0, 2.0])
    assert c.ratio is None and c.ratio_ci is None and not c.significant
    _json_roundtrip(c.to_dict())


# ---------------------------------------------------------------- sentences


def _fmt_interval(lo, hi, digits=2):
    return f"{lo:.{digits}f}–{hi:.{digits}f}"


def test_sentence_faster_uses_baseline_over_other():
    c = compare(BASE, FAST)
    lo, hi = _fieller_by_quadratic(BASE, FAST)
    factor = np.mean(BASE) / np.mean(FAST)
    assert factor > 1
    expected = (f"tcmalloc is {factor:.2f}x faster than glibc "
                f"({_fmt_interval(1 / hi, 1 / lo)}), significant")
    assert c.sentence("tcmalloc", "glibc", "time") == expected
    assert c.sentence("tcmalloc", "glibc") == expected  # "time" is the default


def test_sentence_slower_and_reverse_comparison_agree():
    c = compare(FAST, BASE)  # baseline is the fast one now
    factor = np.mean(BASE) / np.mean(FAST)
    lo, hi = _fieller_by_quadratic(FAST, BASE)
    assert c.other_is_better is False
    assert c.sentence("glibc", "tcmalloc") == (
        f"glibc is {factor:.2f}x slower than tcmalloc ({_fmt_interval(lo, hi)}), significant")


def test_sentence_more_memory():
    base = [2048.0, 2050.0, 2047.0, 2052.0, 2049.0, 2051.0]
    other = [v * 1.2 for v in base]
    c = compare(base, other)
    lo, hi = c.ratio_ci
    assert c.sentence("mimalloc", "glibc", "memory") == (
        f"mimalloc uses 1.20x more memory than glibc ({_fmt_interval(lo, hi)}), significant")
    less = compare(other, base)
    assert less.sentence("glibc", "mimalloc", "memory").startswith(
        "glibc uses 1.20x less memory than mimalloc (")


def test_sentence_no_significant_difference_shows_ratio_interval():
    base = [1.00, 1.02, 0.98, 1.01, 0.99, 1.00]
    other = [1.01, 0.99, 1.00, 1.02, 0.98, 1.00]
    c = compare(base, other)
    lo, hi = c.ratio_ci
    assert c.sentence("jemalloc", "glibc") == (
        f"jemalloc: no significant difference from glibc ({_fmt_interval(lo, hi)})")


def test_sentence_higher_is_better_and_generic_nouns():
    base = [100.0, 101.0, 99.0, 100.5, 99.5]
    other = [130.0, 131.0, 129.0, 130.5, 129.5]
    c = compare(base, other, lower_is_better=False)
    assert c.other_is_better is True
    assert c.sentence("tcmalloc", "glibc", "throughput").startswith(
        "tcmalloc has 1.30x higher throughput than glibc (")
    assert c.sentence("tcmalloc", "glibc", "speed").startswith("tcmalloc is 1.30x faster than glibc (")
    faults = compare(other, base)  # lower is better: page faults
    assert faults.sentence("jemalloc", "glibc", "page faults").startswith(
        "jemalloc has 1.30x lower page faults than glibc (")
    with pytest.raises(ValueError):
        c.sentence("tcmalloc", "glibc", "time")  # time is lower-is-better


def test_sentence_small_significant_difference_keeps_three_digits():
    base = [1.000, 1.001, 0.999, 1.000, 1.001, 0.999] * 3
    other = [v * 0.995 for v in base]
    c = compare(base, other)
    assert c.significant
    assert c.sentence("tcmalloc", "glibc").startswith("tcmalloc is 1.005x faster than glibc (")


def test_types_are_exported_dataclasses():
    assert isinstance(summarize(TIMES), Summary)
    assert isinstance(compare(BASE, FAST), Comparison)


# ------------------------------------------- constant and near-constant figures, few runs

def test_sentence_no_runs_on_one_side():
    assert compare([], [1.0, 2.0]).sentence("tcmalloc", "glibc") == \
        "tcmalloc: no runs to compare with glibc (n=2 vs n=0)"
    assert compare([1.0, 2.0], []).sentence("tcmalloc", "glibc") == \
        "tcmalloc: no runs to compare with glibc (n=0 vs n=2)"


def test_sentence_one_run_shows_the_values_and_says_why_not():
    c = compare([2.0, 2.0, 2.0], [1.0])
    assert not c.significant and c.other_is_better is None
    assert c.sentence("tcmalloc", "glibc") == (
        "tcmalloc: 1 vs 2 for glibc, but one run cannot be compared: at least 2 on each side "
        "(n=1 vs n=3)")
    assert compare([0.5], [0.25, 0.75]).sentence("jemalloc", "glibc", "memory") == (
        "jemalloc: 0.5000 vs 0.5000 for glibc, but one run cannot be compared: at least 2 on "
        "each side (n=2 vs n=1)")


def test_sentence_both_constant_and_equal():
    c = compare([4096.0] * 3, [4096.0] * 3)
    assert not c.significant and c.both_constant and c.other_is_better is None
    assert c.sentence("tcmalloc", "glibc", "memory") == \
        "tcmalloc: the same as glibc, 4096 in every run (n=3 vs n=3)"
    zeros = compare([0.0, 0.0], [0.0, 0.0, 0.0])            # a ratio of 0/0: still the same
    assert zeros.sentence("mimalloc", "glibc", "lines shared") == \
        "mimalloc: the same as glibc, 0 in every run (n=3 vs n=2)"


def test_sentence_both_constant_and_different_is_a_difference():
    # The case: internal fragmentation 0.0000 (mimalloc) vs 0.6667 (glibc) in every run.
    c = compare([2 / 3] * 3, [0.0] * 3, lower_is_better=True)
    assert c.significant and c.other_is_better is True and c.ratio == 0.0
    assert c.sentence("mimalloc", "glibc", "fragmentation") == \
        "mimalloc has lower fragmentation than glibc: 0.0000 vs 0.6667 in every run (n=3 vs n=3)"
    # Shared cache lines 1 vs 0 in every run: the baseline's mean is 0, no ratio exists.
    lines = compare([0.0] * 3, [1.0] * 3)
    assert lines.ratio is None and lines.significant and lines.other_is_better is False
    assert lines.sentence("tcmalloc", "glibc", "shared lines") == \
        "tcmalloc has higher shared lines than glibc: 1 vs 0 in every run (n=3 vs n=3)"
    # With a ratio, the factor too.
    assert compare([3.0, 3.0], [4.5, 4.5]).sentence("jemalloc", "glibc", "memory") == \
        "jemalloc uses 1.50x more memory than glibc: 4.500 vs 3.000 in every run (n=2 vs n=2)"


def test_sentence_one_side_constant_the_other_varies():
    # Baseline 0 in every run, the other side varies: no ratio, a difference with its interval.
    c = compare([0.0] * 6, [1.0, 2.0, 1.0, 2.0, 1.0, 2.0])
    assert c.ratio is None and c.significant
    low, high = c.difference_ci
    assert low > 0 and abs((low + high) / 2 - 1.5) < 1e-9
    assert c.sentence("tcmalloc", "glibc", "shared lines") == (
        f"tcmalloc has higher shared lines than glibc: 1.500 vs 0.000 on average "
        f"(difference {low:.3f}–{high:.3f}), significant")
    noisy = compare([0.0] * 3, [0.0, 3.0, 0.0])
    assert not noisy.significant and noisy.sentence("tcmalloc", "glibc", "shared lines") == (
        "tcmalloc: no significant difference from glibc (1 vs 0 on average, difference "
        + "–".join(f"{v:.0f}" if float(v).is_integer() else f"{v:.3f}" for v in noisy.difference_ci) + ")")
    # Nonzero constant baseline, varying other side: the usual ratio, bounded by the other's spread.
    r = compare([2.0] * 5, [1.0, 1.1, 0.9, 1.0, 1.0])
    assert r.significant and r.sentence("tcmalloc", "glibc").startswith("tcmalloc is 2.00x faster than glibc (")


def test_sentence_two_runs_each():
    c = compare([1.0, 1.2], [2.0, 2.2])
    assert c.p_welch is not None and c.ratio_ci is not None
    expected = ("jemalloc is 1.91x slower than glibc (" if c.significant
                else "jemalloc: no significant difference from glibc (")
    assert c.sentence("jemalloc", "glibc").startswith(expected)
    same = compare([1.0, 1.0], [1.0, 1.0])
    assert same.sentence("jemalloc", "glibc") == "jemalloc: the same as glibc, 1 in every run (n=2 vs n=2)"


def test_format_values_prints_a_pair_alike():
    from scenc.stats.summary import format_values
    assert format_values(0.0, 2 / 3) == ("0.0000", "0.6667")
    assert format_values(1.0, 0.0) == ("1", "0")
    assert format_values(12345.6, 12.0) == ("12346", "12")
    assert format_values(0.000123456, 0.0) == ("0.000123", "0.000000")
