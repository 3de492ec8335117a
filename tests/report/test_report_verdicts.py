"""What a report claims and how it says it: stats/claims.py (the family of every comparison a report
prints), report/verdicts.py and report/sentences.py, on runs built here (nothing is run).

The error rates are measured on the report's own claim logic (stats.claims.judge_cells, which
report/analysis.py calls for every table), not on the two-sample test alone (test_verdicts.py).
"""

import json
import re
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats as scipy_stats

from scenc.report.analysis import analyze
from scenc.report.sentences import comparison_sentence
from scenc.report.tables import format_analysis
from scenc.stats.claims import Rule, judge_cells
from scenc.stats.rank import compare
from scenc.run.record import RunRecord
from locations import TESTS

FIXTURES = TESTS / "fixtures" / "verdicts"
HEADLINE = {"wall_s": Rule(True, True), "peak_rss_kib": Rule(True, True)}


def clopper_pearson_upper(k, n, confidence=0.95):
    return 1.0 if k == n else float(scipy_stats.beta.ppf(1 - (1 - confidence) / 2, k + 1, n - k))


def claims_made(cell_claims) -> bool:
    """Whether a report would print any claim: a significant sentence against the baseline, or a
    fastest/slowest/leanest/fattest that names someone."""
    against_baseline = any(p.result.significant for by in cell_claims.comparisons.values() for p in by.values())
    return against_baseline or any(r.best or r.worst for r in cell_claims.rankings.values())


def skewed(rng, shape, sigma):
    """Lognormal runs with about one in ten multiplied by 2-3 (a run disturbed by the machine)."""
    runs = rng.lognormal(0.0, sigma, shape)
    return np.where(rng.random(shape) < 0.1, runs * rng.uniform(2.0, 3.0, shape), runs)


def identical_cell(rng, names):
    """Wall times (skewed, CV 10-30%) and peak RSS in whole pages (ties), one distribution for all."""
    sigma = rng.uniform(0.1, 0.3)
    wall = skewed(rng, (len(names), 10), sigma)
    rss = 4000.0 + 4 * rng.integers(0, 4, (len(names), 10))
    return {"wall_s": dict(zip(names, wall)), "peak_rss_kib": dict(zip(names, rss))}


def _result(per_allocator, header_extra=None):
    """A result with one param set; `per_allocator` maps name -> {metric: [value per run]}."""
    runs = [{"allocator": name, "params": {}, "probe_set": "time+memory", "status": "ok", "round": i + 1,
             "metrics": {m: values[i] for m, values in metrics.items()}}
            for name, metrics in per_allocator.items() for i in range(len(next(iter(metrics.values()))))]
    header = {"scenario": "s", "allocators": {name: {} for name in per_allocator}, "baseline": next(iter(per_allocator)),
              **(header_extra or {})}
    return SimpleNamespace(header=header, runs=[RunRecord.from_json(r) for r in runs], path="s.json")


# ---------------------------------------------------------------- error rates of the report's claims

@pytest.mark.parametrize("names", [("a", "b"), ("a", "b", "c", "d")])
def test_identical_allocators_rarely_get_any_claim(names):
    """Two names: the claims of one comparison per metric; four: any claim of the whole report
    (6 pairs x 2 metrics, both ends named). Today's Fieller/Welch report: 15% of A/A reports."""
    rng = np.random.default_rng(26 + len(names))
    trials = 2000
    claims = 0
    for _ in range(trials):
        [cell], _ = judge_cells([identical_cell(rng, names)], HEADLINE, names[0])
        claims += claims_made(cell)
    assert claims / trials <= 0.05 and clopper_pearson_upper(claims, trials) <= 0.065, claims


def test_one_tripled_run_never_removes_a_real_difference():
    """1.4x apart at 10 runs each, one run of either allocator tripled: still "fastest", still significant."""
    rng = np.random.default_rng(14)
    for cv in np.linspace(0.05, 0.10, 12):
        fast, slow = rng.normal(1.0, cv, 10), rng.normal(1.4, 1.4 * cv, 10)
        rss = {"fast": np.full(10, 4000.0), "slow": np.full(10, 4000.0)}
        for side, i in [(None, None)] + [(s, i) for s in (0, 1) for i in range(10)]:
            runs = [fast.copy(), slow.copy()]
            if side is not None:
                runs[side][i] *= 3
            [cell], _ = judge_cells([{"wall_s": {"fast": runs[0], "slow": runs[1]}, "peak_rss_kib": rss}],
                                      HEADLINE, "fast")
            assert cell.rankings["wall_s"].best == ("fast",), (cv, side, i)
            assert cell.comparisons["wall_s"]["slow"].result.significant


@pytest.mark.parametrize("metrics,least", [(("wall_s",), 0.80), (("wall_s", "peak_rss_kib"), 0.70)])
def test_power_for_ten_percent_at_cv_five_percent_and_eight_runs(metrics, least):
    """A true 10% difference at CV 5% and 8 runs each, found as "fastest". With wall time alone in the
    family it is the two-sample test's power (87.5% in test_verdicts.py); judged together with peak RSS
    (the default report: Holm over two comparisons, the first at 2.5%) it is 75%: the price of the family."""
    rng = np.random.default_rng(8)
    trials, found = 500, 0
    for _ in range(trials):
        wall = {"a": rng.normal(1.0, 0.05, 8), "b": 1.1 * rng.normal(1.0, 0.05, 8)}
        rss = {"a": 4000.0 + 4 * rng.integers(0, 4, 8), "b": 4000.0 + 4 * rng.integers(0, 4, 8)}
        [cell], _ = judge_cells([{"wall_s": wall, "peak_rss_kib": rss}], {m: HEADLINE[m] for m in metrics}, "a")
        found += cell.rankings["wall_s"].best == ("a",)
    assert found / trials >= least, found


def test_a_near_tie_in_peak_rss_decides_nothing():
    """0.2% apart in every run, very tight: within the 1% noise band, so no "fattest" and an
    "equivalent" sentence, whatever the p-value."""
    rng = np.random.default_rng(3)
    runs = {n: 4096.0 * f + rng.integers(0, 2, 10) for n, f in (("a", 1.0), ("b", 1.002), ("c", 1.0))}
    [cell], _ = judge_cells([{"peak_rss_kib": runs}], {"peak_rss_kib": Rule(True, True)}, "a")
    assert not claims_made(cell)
    c = cell.comparisons["peak_rss_kib"]["b"].result
    assert c.p_value < 0.05 and comparison_sentence(c, "b", "a", "memory").startswith("b: equivalent to a within 1%")


# ---------------------------------------------------------------- the producer/consumer case

def test_a_slow_allocator_with_one_outlier_of_the_fast_one_is_still_the_slowest():
    """The issue's producer/consumer case from real runs (tests/fixtures/verdicts/ says how they were
    made). Faked, because this machine did not give it: the names glibc and jemalloc are swapped (here
    glibc was the slow one), and one glibc run, in turn each of the eight, is made 3, 5 or 10 times
    slower (a glibc run of bench/scenarios/prodcons.scn took 4.4x its median here). The Fieller/Welch
    report called jemalloc "not significantly behind glibc" in 5 of the 8 at 5x and in all 8 at 10x."""
    saved = json.loads((FIXTURES / "prodcons-4-allocators.json").read_text())
    swap = {"glibc": "jemalloc", "jemalloc": "glibc"}
    runs = {metric: {swap.get(n, n): v for n, v in by.items()} for metric, by in saved.items() if metric != "note"}
    slow, fast = np.median(runs["wall_s"]["jemalloc"]), np.median(runs["wall_s"]["glibc"])
    assert slow / fast > 2.0       # jemalloc twice as slow as glibc, as in the issue
    for i, factor in ((i, f) for i in range(8) for f in (3, 5, 10)):
        wall = {n: list(v) for n, v in runs["wall_s"].items()}
        wall["glibc"][i] *= factor
        per = {n: {"wall_s": wall[n], "peak_rss_kib": runs["peak_rss_kib"][n]}
               for n in ("glibc", "tcmalloc", "jemalloc", "mimalloc")}
        [cell] = analyze(_result(per)).cells
        sentence = cell.last["wall_s"].sentence()
        assert sentence.startswith("slowest: jemalloc is ") and sentence.endswith(", significant"), (i, factor)
        assert " slower than the next slowest, glibc (" in sentence


# ---------------------------------------------------------------- words and printed numbers

def test_two_constant_runs_each_are_not_significant():
    c = compare([1.0, 1.0], [2.0, 2.0])
    assert not c.significant
    assert comparison_sentence(c, "b", "a", constant=(2.0, 1.0)) == (
        "b: 2 vs 1 in every run (n=2 vs n=2), but too few runs to tell: 2 (a claim needs 4 on each side)")


def test_no_interval_prints_as_one_point_and_a_tiny_significant_one_keeps_its_digits():
    base = np.array([1.000, 1.001, 0.999, 1.000, 1.001, 0.999] * 3)
    same = compare(base, base[::-1] * 1.0003)
    assert "1.00–1.00" not in comparison_sentence(same, "b", "a")
    tiny = compare(base, base * 0.995, noise=0.0)
    assert tiny.significant
    assert comparison_sentence(tiny, "b", "a") == "b is 1.005x faster than a (1.004–1.006), significant"
    # A bound a hair above 1: printed with the digits that keep it above 1.
    close = compare(base, base * 1.0000004 + np.linspace(0, 1e-9, len(base)), noise=0.0)
    if close.significant:
        low = re.search(r"\(([0-9.]+)–", comparison_sentence(close, "b", "a")).group(1)
        assert float(low) > 1.0


_INTERVAL = re.compile(r"\((?:[^()]*?(?:ratio|difference) )?(-?[0-9.e+-]+?)–(-?[0-9.e+-]+)\)")


def _printed_interval(sentence):
    found = _INTERVAL.findall(sentence)
    return tuple(float(v) for v in found[-1]) if found else None


@st.composite
def two_samples(draw):
    centre = draw(st.floats(0.01, 1e6))
    spread = draw(st.sampled_from([0.0, 0.0005, 0.01, 0.05, 0.3]))
    factor = draw(st.sampled_from([1.0, 1.0001, 1.005, 1.0101, 1.1, 0.9, 2.0]) | st.floats(0.2, 5.0))
    shift = draw(st.sampled_from([0.0, 0.0, -1.0])) * centre
    jitter = st.lists(st.floats(-1.0, 1.0) | st.just(0.0), min_size=2, max_size=25)
    base = [centre * (1 + spread * j) + shift for j in draw(jitter)]
    other = [factor * centre * (1 + spread * j) + shift for j in draw(jitter)]
    return base, other


def _one_value(low: float, high: float) -> bool:
    """Ends the sentences print as one figure: equal to 12 significant digits (report/sentences.py's _faithful)."""
    return float(f"{low:.12g}") == float(f"{high:.12g}")


@settings(max_examples=400, deadline=None)
@given(samples=two_samples(), noise=st.sampled_from([0.0, 0.01, 0.05]),
       confidence=st.sampled_from([0.95, 0.99, 1 - 0.05 / 12]), lower=st.booleans())
def test_every_printed_significant_agrees_with_its_printed_interval(samples, noise, confidence, lower):
    base, other = samples
    c = compare(base, other, lower_is_better=lower, noise=noise, confidence=confidence)
    word = "time" if lower else "throughput"
    constant = (other[0], base[0]) if len(set(base)) == 1 and len(set(other)) == 1 else None
    sentence = comparison_sentence(c, "b", "a", word, constant=constant)
    null = 1.0 if c.scale == "ratio" else 0.0
    printed = _printed_interval(sentence)
    if sentence.endswith(", significant"):
        assert c.significant
        if printed is not None:
            low, high = printed
            if c.scale == "ratio":        # a factor >= 1 and its interval: both ends above 1
                assert low > 1.0 and high > 1.0, sentence
            else:
                assert low > 0 or high < 0, sentence
            assert low < high or _one_value(*c.ci), sentence
        else:
            assert "in every run" in sentence
            values = re.search(r": (\S+) vs (\S+) in every run", sentence).groups()
            assert values[0] != values[1], sentence
    else:
        assert not c.significant
        if printed is not None:
            low, high = printed
            assert low < high or _one_value(*c.ci), sentence
            if "no significant difference" in sentence:
                assert low <= null <= high, sentence
            if "not shown to differ" in sentence:
                assert low > null or high < null, sentence


# ---------------------------------------------------------------- the report as printed

def test_fastest_names_a_group_that_cannot_be_separated():
    rng = np.random.default_rng(2)
    per = {n: {"wall_s": list(m * rng.lognormal(0, 0.03, 10)), "peak_rss_kib": [4000.0] * 10}
           for n, m in (("glibc", 1.0), ("tcmalloc", 0.6), ("mimalloc", 0.6), ("jemalloc", 1.5))}
    text = format_analysis(analyze(_result(per)))
    assert re.search(r"^fastest: (tcmalloc and mimalloc|mimalloc and tcmalloc), tied; ", text, re.M), text
    assert re.search(r"^slowest: jemalloc is [0-9.]+x slower than the next slowest, glibc", text, re.M)
    assert "leanest: none: " in text
    assert re.search(r"^\(claims: Holm over the 12 comparisons of the param set", text, re.M)


def test_warnings_come_once_after_the_tables_with_the_load():
    rng = np.random.default_rng(5)
    per = {n: {"wall_s": list(0.002 * rng.lognormal(0, 0.2, 8)), "peak_rss_kib": [4000.0] * 8}
           for n in ("glibc", "jemalloc")}
    per["jemalloc"]["wall_s"][3] = 0.02
    header = {"machine": {"load_average": [2.5, 2.0, 1.0], "usable_cpus": 2}, "status": "complete",
              "status_load_average": [3.25, 2.1, 1.1]}
    text = format_analysis(analyze(_result(per, header)))
    warnings = text.split("\nwarnings:\n", 1)[1]
    assert text.count("warnings:") == 1 and "claims:" not in warnings
    assert re.search(r"outlier: jemalloc's run 4 of 8 \(round 4\): wall time 20.0+ ms, [0-9.]+x its median", warnings)
    assert "short runs: median wall time under 5 ms" in warnings
    assert "load average 2.50 at the start and 3.25 at the end of the session, on 2 CPUs" in warnings
    assert "--runs" in warnings
    old = format_analysis(analyze(_result(per)))           # a file from before the load was recorded
    assert "the load average was not recorded" in old


# ---------------------------------------------------------------- a scenario beside its program

def _side_by_side_result(program, scenario):
    """Runs of a program (target "command") and of its scenario, {name: (median wall, median RSS)}."""
    rng = np.random.default_rng(9)
    runs = []
    for target, medians in (("scenario", scenario), ("command", program)):
        for name, (wall, rss) in medians.items():
            for i in range(10):
                runs.append({"allocator": name, "params": {}, "probe_set": "time+memory", "status": "ok",
                             "round": i + 1, "target": target,
                             "metrics": {"wall_s": wall * rng.lognormal(0, 0.02), "peak_rss_kib": rss + i % 2}})
    header = {"scenario": "s", "allocators": {n: {} for n in program}, "baseline": "glibc",
              "targets": {"command": {"argv": ["./app"], "cwd": ".", "stdin": None, "env": {}, "metric": None}}}
    return SimpleNamespace(header=header, runs=[RunRecord.from_json(r) for r in runs], path="s.json")


def test_side_by_side_judges_every_significant_pair_and_counts_right():
    """The program orders all three pairs of wall time, the scenario reverses two of them; the ends
    alone (fastest glibc, slowest jemalloc in the program) would show one disagreement, and today's
    summary printed the count of agreements as the count of disagreements."""
    program = {"glibc": (1.0, 9000), "tcmalloc": (1.5, 9000), "jemalloc": (2.0, 9000)}
    scenario = {"glibc": (0.1, 2000), "tcmalloc": (0.25, 2000), "jemalloc": (0.05, 2000)}
    analysis = analyze(_side_by_side_result(program, scenario))
    text = format_analysis(analysis)
    assert "wall time: glibc ahead of tcmalloc in the program (1.50x, significant): AGREE" in text
    assert ("wall time: glibc ahead of jemalloc in the program (2.00x, significant): DISAGREE, "
            "the scenario puts jemalloc ahead (2.00x, significant)") in text
    assert "wall time: tcmalloc ahead of jemalloc in the program (1.33x, significant): DISAGREE" in text
    assert re.search(r"^=> the scenario \(\d+%–\d+% of the program's wall time\) DISAGREES with the program on 2 "
                     r"of the 3 pairs the program orders significantly \(agrees on 1\) \(wall time 1 of 3\)$",
                     text, re.M), text
    assert "its wall-time agreement says little: the scenario is under 20% of the program's wall time" in text
    [entry] = analysis.to_json()["side_by_side"]
    pairs = entry["metrics"]["wall_s"]["pairs"]
    assert [(p["better"], p["worse"], p["agrees"]) for p in pairs] == [
        ("glibc", "tcmalloc", True), ("glibc", "jemalloc", False), ("tcmalloc", "jemalloc", False)]
    assert entry["small_share"] and entry["metrics"]["peak_rss_kib"]["pairs"] == []


def test_a_sweep_is_one_family_by_benjamini_hochberg_and_json_always_is():
    rng = np.random.default_rng(4)
    runs = [{"allocator": name, "params": {"threads": t}, "probe_set": "time+memory", "status": "ok",
             "round": i + 1, "metrics": {"wall_s": m * rng.lognormal(0, 0.05), "peak_rss_kib": 4000.0}}
            for t in (1, 2) for name, m in (("glibc", 1.0), ("tcmalloc", 0.5)) for i in range(8)]
    result = SimpleNamespace(header={"scenario": "s", "allocators": {"glibc": {}, "tcmalloc": {}},
                                     "baseline": "glibc"}, runs=[RunRecord.from_json(r) for r in runs],
                             path="s.json")
    analysis = analyze(result)
    assert analysis.sweep and analysis.family.method == "bh" and analysis.family.size == 4
    assert "(claims: Benjamini–Hochberg over the 4 comparisons of the report" in format_analysis(analysis)
    one = analyze(SimpleNamespace(header=result.header, runs=[r for r in result.runs if r.params["threads"] == 1],
                                  path="s.json"))
    assert one.family.method == "holm"
    data = one.to_json()
    assert data["schema"] == "scenc-analysis/2" and data["correction"]["method"] == "bh"
    assert data["blocks"][0]["verdicts"]["wall_s"]["group"] == ["tcmalloc"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([1.0, 1.003, 1.02, 1.3, 0.7]), min_size=3, max_size=4),
       st.integers(4, 9), st.integers(0, 2**32 - 1))
def test_every_significant_line_of_a_report_prints_an_interval_beyond_one(factors, n, seed):
    """The whole printed report, verdicts included: a line that ends in "significant" prints its
    factor's interval wholly above 1, as printed."""
    rng = np.random.default_rng(seed)
    names = ["glibc", "tcmalloc", "jemalloc", "mimalloc"][:len(factors)]
    per = {name: {"wall_s": list(f * rng.lognormal(0, 0.05, n)),
                  "peak_rss_kib": list(4000.0 * f + 4 * rng.integers(0, 3, n))}
           for name, f in zip(names, factors)}
    for line in format_analysis(analyze(_result(per))).splitlines():
        if line.endswith(", significant") and "in every run" not in line:
            low, high = _printed_interval(line)
            assert 1.0 < low < high, line
        elif "no significant difference" in line or "not significantly" in line:
            low, high = _printed_interval(line) or (0.0, 2.0)
            assert low <= 1.0 <= high, line


def test_a_report_uses_the_noise_its_run_was_made_with_unless_told_otherwise():
    """`scenc run --noise 5%` saves it in the header; `scenc report` judges by it, `--noise` overrides it."""
    runs = {"glibc": {"wall_s": [1.00, 1.01, 0.99, 1.00, 1.02, 0.98, 1.00, 1.01]},
            "tcmalloc": {"wall_s": [0.97, 0.98, 0.96, 0.97, 0.99, 0.95, 0.97, 0.98]}}      # 3% faster
    made_with_5 = _result(runs, {"noise": 0.05})
    assert analyze(made_with_5).noise == 0.05
    assert "equivalent" in analyze(made_with_5).cells[0].comparison_sentence("wall_s", "tcmalloc")
    assert "significant" in analyze(made_with_5, noise=0.01).cells[0].comparison_sentence("wall_s", "tcmalloc")
    assert analyze(_result(runs)).noise == 0.01                 # a file from before --noise: 1%
