"""stats/rank.py: the rank test, its Hodges-Lehmann estimate and its inverted interval."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats as scipy_stats

from scenc.stats import rank as verdicts

Verdict = verdicts.Verdict
compare = verdicts.compare


def clopper_pearson_upper(k, n, confidence=0.95):
    """Upper end of the two-sided Clopper-Pearson interval of a binomial proportion."""
    return 1.0 if k == n else float(scipy_stats.beta.ppf(1 - (1 - confidence) / 2, k + 1, n - k))


def skewed_runs(rng, trials, n, sigma, outlier_rate=0.1):
    """Lognormal runs (one sigma per trial), about one run in ten multiplied by 2-3."""
    runs = rng.lognormal(0.0, np.asarray(sigma)[:, None], (trials, n))
    hit = rng.random((trials, n)) < outlier_rate
    return np.where(hit, runs * rng.uniform(2.0, 3.0, (trials, n)), runs)


def _sample_with_u(m, n, u):
    """other (m runs) and baseline 0..n-1 (n runs) with exactly u pairs other > baseline."""
    counts, left = [], u
    for _ in range(m):
        counts.append(min(n, left))
        left -= counts[-1]
    return np.array(counts) - 0.5, np.arange(float(n))


SIZES = [(4, 4), (4, 9), (5, 5), (6, 11), (10, 10), (13, 7), (20, 25), (32, 32), (4, 150)]


# ---------------------------------------------------------------- the null distribution

@pytest.mark.parametrize("m,n", SIZES)
def test_exact_p_values_are_scipys(m, n):
    two_sided = verdicts.null_two_sided(m, n)
    for u in range(m * n + 1):
        other, base = _sample_with_u(m, n, u)
        expected = scipy_stats.mannwhitneyu(other, base, method="exact").pvalue
        assert two_sided(min(u, m * n - u)) == pytest.approx(expected, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("alpha", [0.1, 0.05, 0.01, 0.05 / 6])
@pytest.mark.parametrize("m,n", SIZES)
def test_critical_counts_are_scipys(m, n, alpha):
    """c is the last count scipy's exact test rejects at alpha; c + 1 it does not."""
    c = verdicts.critical_count(verdicts.null_two_sided(m, n), m * n, alpha)
    p = lambda u: scipy_stats.mannwhitneyu(*_sample_with_u(m, n, u), method="exact").pvalue  # noqa: E731
    if c >= 0:
        assert p(c) <= alpha
    assert p(c + 1) > alpha


def test_asymptotic_p_is_scipys_without_ties_across_samples():
    rng = np.random.default_rng(3)
    base = np.round(rng.lognormal(0, 0.1, 40), 2)        # ties inside each sample
    other = np.round(rng.lognormal(0.03, 0.1, 30), 2) + 0.001
    result = compare(base, other)
    assert result.method == "normal"
    expected = scipy_stats.mannwhitneyu(other, base, method="asymptotic").pvalue
    assert result.p_value == pytest.approx(expected, rel=1e-9)


# ---------------------------------------------------------------- estimate and interval

def _brute_force_interval(base_log, other_log, confidence, method):
    """Accepted shifts, found by running scipy's test at shifts between pairwise differences."""
    d = np.unique(np.subtract.outer(other_log, base_log))
    probes = np.concatenate([[d[0] - 1], (d[:-1] + d[1:]) / 2, [d[-1] + 1]])
    accepted = [s for s in probes
                if scipy_stats.mannwhitneyu(other_log - s, base_log, method=method).pvalue
                > 1 - confidence]
    if not accepted:
        return None
    # The closed interval runs from the difference below the first accepted probe
    # to the one above the last.
    return d[np.searchsorted(d, accepted[0]) - 1], d[np.searchsorted(d, accepted[-1])]


@pytest.mark.parametrize("seed,m,n,confidence", [
    (1, 4, 4, 0.95), (2, 6, 9, 0.95), (3, 10, 10, 0.99), (4, 12, 8, 0.9), (5, 25, 20, 0.95),
    (6, 30, 40, 0.95), (7, 40, 40, 0.99), (8, 33, 33, 0.95)])
def test_interval_is_the_inverted_test(seed, m, n, confidence):
    rng = np.random.default_rng(seed)
    base, other = rng.lognormal(0, 0.2, n), rng.lognormal(0.1, 0.2, m)
    result = compare(base, other, confidence=confidence)
    method = "exact" if result.method == "exact" else "asymptotic"
    expected = _brute_force_interval(np.log(base), np.log(other), confidence, method)
    if expected is None:
        assert result.ci is None
    else:
        assert np.log(result.ci) == pytest.approx(expected, rel=1e-12)
    pairwise = [math.log(o) - math.log(b) for o in other for b in base]
    assert result.estimate == pytest.approx(math.exp(float(np.median(pairwise))), rel=1e-12)


@pytest.mark.parametrize("m,n", SIZES)
def test_achieved_confidence_is_at_least_the_nominal(m, n):
    for confidence in (0.9, 0.95, 0.99):
        result = compare(np.arange(1.0, n + 1), np.arange(1.5, m + 1.5), confidence=confidence)
        assert result.achieved_confidence is None or result.achieved_confidence >= confidence


def test_values_at_or_below_zero_fall_back_to_a_shift():
    base, other = [0.0, 1.0, 2.0, 3.0, 1.5], [5.0, 6.0, 7.5, 5.5, 6.5]
    result = compare(base, other)
    assert result.scale == "difference"
    assert result.estimate == pytest.approx(np.median(np.subtract.outer(other, base)))
    assert result.ci[0] > 0 and result.verdict is Verdict.WORSE
    assert "higher" in result.message() and result.band == pytest.approx((-0.015, 0.015))


# ---------------------------------------------------------------- small and constant samples

def test_two_constant_runs_each_are_never_significant():
    for x, y in [(1.0, 2.0), (1.0, 1000.0), (5.0, 5.0)]:
        result = compare([x, x], [y, y])
        assert result.verdict is Verdict.TOO_FEW and not result.significant
        assert result.message() == "too few runs to tell: 2"


def test_four_separated_constant_runs_each_are_significant():
    result = compare([10.0] * 4, [15.0] * 4)
    assert result.p_value == pytest.approx(2 / 70)
    assert result.ci == pytest.approx((1.5, 1.5)) and result.verdict is Verdict.WORSE
    assert compare([10.0] * 4, [15.0] * 4, lower_is_better=False).verdict is Verdict.BETTER
    assert compare([10.0] * 4, [10.0] * 4).verdict is Verdict.EQUIVALENT


def test_fewer_than_four_runs_on_a_side_make_no_claim():
    result = compare([1.0, 1.1, 0.9], [2.0] * 10)
    assert result.verdict is Verdict.TOO_FEW and result.ci is None and result.p_value is None
    assert result.message() == "too few runs to tell: 3"
    assert result.to_dict()["verdict"] == "too_few"


# ---------------------------------------------------------------- the noise band

def test_a_tiny_difference_is_not_called_significant():
    band = verdicts.noise_band("ratio", 0.01, np.ones(1))
    assert verdicts.decide((1.002, 1.015), band, True) is Verdict.NO_DIFFERENCE
    assert verdicts.decide((1.004, 1.02), band, True) is Verdict.NO_DIFFERENCE  # estimate beyond 1%
    assert verdicts.decide((0.995, 1.006), band, True) is Verdict.EQUIVALENT
    assert verdicts.decide((1.011, 1.03), band, True) is Verdict.WORSE
    assert verdicts.decide((0.97, 0.989), band, True) is Verdict.BETTER
    assert verdicts.decide((1.002, 1.015), (1.0, 1.0), True) is Verdict.WORSE  # noise 0


def test_identical_allocators_with_a_tiny_rss_difference():
    rng = np.random.default_rng(11)
    base = 50_000 * (1 + 0.002 * rng.standard_normal(20))
    other = 1.007 * 50_000 * (1 + 0.002 * rng.standard_normal(20))
    result = compare(base, other)
    assert 1.0 < result.ci[0] < result.ci[1] < 1.02      # excludes 1, inside or across the band
    assert result.p_value < 0.05 and not result.significant


# ---------------------------------------------------------------- robustness and error rates

@pytest.mark.parametrize("n", [10, 40])   # exact and normal null distributions
def test_false_claims_between_identical_skewed_allocators(n):
    rng = np.random.default_rng(2026 + n)
    trials = 2000
    sigma = rng.uniform(0.1, 0.3, trials)
    base, other = skewed_runs(rng, trials, n, sigma), skewed_runs(rng, trials, n, sigma)
    claims = sum(compare(b, o).significant for b, o in zip(base, other))
    assert claims / trials <= 0.05 and clopper_pearson_upper(claims, trials) <= 0.065


@pytest.mark.parametrize("n", [10, 40])
def test_false_claims_with_heavily_tied_values(n):
    """RSS-like figures in whole pages, three values in all: ties inside and across samples.
    Noise 0, so every claim rests on the test alone."""
    rng = np.random.default_rng(7 + n)
    trials = 2000
    base, other = (1000.0 + 4 * rng.integers(0, 3, (trials, n)) for _ in range(2))
    claims = sum(compare(b, o, noise=0.0).significant for b, o in zip(base, other))
    assert claims / trials <= 0.05 and clopper_pearson_upper(claims, trials) <= 0.065


def _tripled_sets():
    rng = np.random.default_rng(14)
    for cv in np.linspace(0.05, 0.10, 12):
        yield rng.normal(1.0, cv, 10), rng.normal(1.4, 1.4 * cv, 10)


def test_one_tripled_run_never_removes_a_real_difference():
    for fast, slow in _tripled_sets():
        assert compare(slow, fast).verdict is Verdict.BETTER
        for side in (0, 1):
            for i in range(10):
                changed = [fast.copy(), slow.copy()]
                changed[side][i] *= 3
                assert compare(changed[1], changed[0]).verdict is Verdict.BETTER, (side, i)


def test_power_for_ten_percent_at_cv_five_percent_and_eight_runs():
    rng = np.random.default_rng(8)
    trials = 1000
    base = rng.normal(1.0, 0.05, (trials, 8))
    other = 1.1 * rng.normal(1.0, 0.05, (trials, 8))
    found = sum(compare(b, o).verdict is Verdict.WORSE for b, o in zip(base, other))
    assert found / trials >= 0.80


# ---------------------------------------------------------------- words and interval agree

@st.composite
def two_samples(draw):
    """Two sets of runs around a centre, the second scaled by a factor; some cross zero, some tie."""
    centre = draw(st.floats(0.01, 1e6))
    spread = draw(st.sampled_from([0.0, 0.001, 0.01, 0.05, 0.3]))
    factor = draw(st.sampled_from([1.0, 1.005, 1.015, 1.1, 0.9, 2.0]) | st.floats(0.2, 5.0))
    shift = draw(st.sampled_from([0.0, 0.0, -1.0])) * centre      # -centre: values around 0
    jitter = st.lists(st.floats(-1.0, 1.0) | st.just(0.0), min_size=3, max_size=30)
    base = [centre * (1 + spread * j) + shift for j in draw(jitter)]
    other = [factor * centre * (1 + spread * j) + shift for j in draw(jitter)]
    return base, other


@settings(max_examples=400, deadline=None)
@given(samples=two_samples(), noise=st.sampled_from([0.0, 0.01, 0.05]),
       confidence=st.sampled_from([0.9, 0.95, 0.99, 1 - 0.05 / 6]), lower=st.booleans())
def test_every_verdict_agrees_with_its_interval(samples, noise, confidence, lower):
    base, other = samples
    r = compare(base, other, lower_is_better=lower, noise=noise, confidence=confidence)
    null = 1.0 if r.scale == "ratio" else 0.0
    if r.verdict is Verdict.TOO_FEW:
        assert min(len(base), len(other)) < verdicts.MIN_RUNS and r.ci is None
        return
    if r.scale == "ratio":
        assert r.band == pytest.approx((1 / (1 + noise), 1 + noise))
    if r.ci is None:
        assert r.verdict is Verdict.NO_DIFFERENCE
        return
    low, high = r.ci
    assert low <= r.estimate <= high
    if r.significant:
        assert (high < null) or (low > null)
        assert (high < r.band[0]) or (low > r.band[1])
        assert r.other_is_better == ((high < null) == lower)
        assert r.p_value <= 1 - confidence and r.message().endswith(", significant")
    else:
        assert not r.message().endswith(", significant")
    if r.verdict is Verdict.EQUIVALENT:
        assert r.band[0] <= low and high <= r.band[1]
    if low > null or high < null:                     # the interval excludes the null ...
        assert r.p_value <= 1 - confidence            # ... exactly when the test rejects
    if r.p_value <= 1 - confidence:
        assert not (low < null < high)
