"""stats/family.py: Holm and Benjamini-Hochberg adjustments, the levels they grant, k-way rankings.

The ranking receives the two-sample procedure (stats/rank.py's compare) as an argument."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats as scipy_stats

from scenc.stats import family
from scenc.stats import rank as verdicts


def rank(samples, **options):
    return family.rank(samples, verdicts.compare, **options)


# ---------------------------------------------------------------- adjusted p-values
# Expected values worked by hand with statsmodels' multipletests formulas:
# holm: sorted p_(i) -> max_{j<=i} min(1, (m-j) p_(j)); fdr_bh: min_{j>=i} min(1, m p_(j)/j).

@pytest.mark.parametrize("p,expected", [
    ([0.01, 0.04, 0.03, 0.005], [0.03, 0.06, 0.06, 0.02]),
    ([0.01, 0.02, 0.03, 0.04, 0.05], [0.05, 0.08, 0.09, 0.09, 0.09]),
    ([0.5, 0.9, 0.5], [1.0, 1.0, 1.0]),
    ([0.2], [0.2]),
    ([], []),
])
def test_holm(p, expected):
    assert family.holm(p) == pytest.approx(expected)


@pytest.mark.parametrize("p,expected", [
    ([0.01, 0.04, 0.03, 0.005], [0.02, 0.04, 0.04, 0.02]),
    ([0.01, 0.02, 0.03, 0.04, 0.05], [0.05] * 5),
    ([0.5, 0.9, 0.5], [0.75, 0.9, 0.75]),
    ([0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205],
     [0.008, 0.032, 0.0672, 0.0672, 0.0672, 0.08, 0.0845714, 0.205]),
])
def test_benjamini_hochberg(p, expected):
    assert family.benjamini_hochberg(p) == pytest.approx(expected, rel=1e-6)


def test_none_counts_as_a_p_of_one():
    assert family.holm([None, 0.01]) == pytest.approx([1.0, 0.02])


@pytest.mark.parametrize("p,expected", [
    ([0.001, 0.02, 0.013, 0.5], [0.05 / 4, 0.05 / 2, 0.05 / 3, 0.05]),
    # Step 2 (0.02 > 0.05/3) stops Holm: the rest keep 0.05/3, though 0.04 < 0.05.
    ([0.001, 0.03, 0.02, 0.04], [0.05 / 4, 0.05 / 3, 0.05 / 3, 0.05 / 3]),
])
def test_holm_levels(p, expected):
    assert family.holm_levels(p, 0.05) == pytest.approx(expected)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=12), st.sampled_from([0.01, 0.05, 0.1]))
def test_holm_rejects_exactly_where_the_granted_level_does(p, alpha):
    for p_i, adjusted, level in zip(p, family.holm(p), family.holm_levels(p, alpha)):
        assert (adjusted <= alpha) == (p_i <= level)


# ---------------------------------------------------------------- rankings

def _runs(seed, **medians):
    rng = np.random.default_rng(seed)
    return {name: median * rng.lognormal(0, 0.05, 10) for name, median in medians.items()}


def test_a_clear_winner_and_loser():
    r = rank(_runs(1, glibc=1.0, tcmalloc=0.6, mimalloc=0.8, jemalloc=1.3))
    assert r.best == ("tcmalloc",) and r.worst == ("jemalloc",)
    assert family.group_sentence("fastest", r.best) == "fastest: tcmalloc"
    assert len(r.pairs) == 6 and len(r.claims()) == 6


def test_two_that_cannot_be_separated_are_tied():
    r = rank(_runs(2, glibc=1.0, tcmalloc=0.7, mimalloc=0.7, jemalloc=1.0))
    assert set(r.best) == {"tcmalloc", "mimalloc"} and set(r.worst) == {"glibc", "jemalloc"}
    assert family.group_sentence("fastest", ("tcmalloc", "mimalloc")) == \
        "fastest: tcmalloc and mimalloc, tied"


def test_higher_is_better_turns_the_ranking_round():
    r = rank(_runs(1, glibc=1.0, tcmalloc=0.6, mimalloc=0.8, jemalloc=1.3), lower_is_better=False)
    assert r.best == ("jemalloc",) and r.worst == ("tcmalloc",)


def test_no_claim_without_enough_runs_or_without_a_difference():
    few = {name: [1.0, 2.0, 3.0] for name in "abc"}
    assert rank(few).best == () and rank(few).worst == ()
    same = _runs(3, a=1.0, b=1.0)
    assert rank(same).best == () and family.group_sentence("fastest", ()).startswith("fastest: none")
    assert rank({"a": [1.0] * 5}).best == ()


def test_a_chain_of_non_separations_joins_the_group():
    """a beats c, but b is inseparable from both: no single winner, and c cannot be left out."""
    beats = {("a", "c"): True}
    won = lambda x, y: beats.get((x, y), False)  # noqa: E731
    assert family._top_group(["a", "b", "c", "d"], lambda x, y: won(x, y) or y == "d") == ("a", "b", "c")
    cycle = {("a", "b"), ("b", "c"), ("c", "a")}
    assert family._top_group(["a", "b", "c"], lambda x, y: (x, y) in cycle) == ()


def test_each_pair_is_judged_at_its_holm_level():
    for noise in (0.0, 0.01):
        _judged_at_their_levels(rank(_runs(5, a=1.0, b=1.02, c=1.05, d=1.3), noise=noise))


def _judged_at_their_levels(r):
    alpha = 0.05
    for pair in r.pairs:
        level = 1 - pair.confidence
        assert pair.result.confidence == pytest.approx(pair.confidence)
        if pair.result.ci is not None:       # the interval lies beyond the noise band iff Holm rejects
            low, high = pair.result.ci
            beyond = low > pair.result.band[1] or high < pair.result.band[0]
            assert beyond == (pair.p_adjusted <= alpha) == (pair.result.p_beyond <= level)
        if pair.result.other_is_better is not None:
            assert pair.p_adjusted <= alpha
    assert r.to_dict()["pairs"][0]["result"]["verdict"] in {v.value for v in verdicts.Verdict}


def test_four_identical_allocators_rarely_get_any_claim():
    rng = np.random.default_rng(4)
    trials, n = 2000, 10
    sigma = rng.uniform(0.1, 0.3, trials)[:, None]
    runs = rng.lognormal(0.0, sigma, (4, trials, n))
    runs = np.where(rng.random(runs.shape) < 0.1, runs * rng.uniform(2, 3, runs.shape), runs)
    claims = 0
    for t in range(trials):
        r = rank({name: runs[i, t] for i, name in enumerate("abcd")})
        claims += bool(r.best or r.worst or r.claims())
    upper = scipy_stats.beta.ppf(0.975, claims + 1, trials - claims)
    assert claims / trials <= 0.05 and upper <= 0.065


# ---------------------------------------------------------------- Benjamini-Hochberg's levels

@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=30), st.sampled_from([0.01, 0.05, 0.1]))
def test_bh_rejects_exactly_where_the_granted_level_does(p, alpha):
    for adjusted, p_i, level in zip(family.benjamini_hochberg(p), p, family.bh_levels(p, alpha)):
        assert (adjusted <= alpha) == (p_i <= level)


def test_judge_by_bh_gives_every_question_one_level():
    rng = np.random.default_rng(6)
    questions = [family.Question("a", x, rng.lognormal(0, 0.05, 10), rng.lognormal(shift, 0.05, 10))
                 for x, shift in (("b", 0.0), ("c", 0.3), ("d", 0.5), ("e", 0.0))]
    pairs = family.judge(questions, verdicts.compare, method="bh")
    assert len({p.confidence for p in pairs}) == 1
    assert pairs[0].confidence == pytest.approx(1 - 0.05 * 2 / 4)        # two claims of four
    assert [p.result.other_is_better is not None for p in pairs] == [False, True, True, False]
    with pytest.raises(ValueError):
        family.judge(questions, verdicts.compare, method="bonferroni")
