"""report.analysis: the sentences under the tables and the verdicts for constant figures and few
runs, on records as `scenc run` saves them (built here, nothing run)."""
from types import SimpleNamespace

from scenc.report.analysis import analyze
from scenc.run.record import RunRecord


def _result(per_allocator):
    """A result with one param set; `per_allocator` maps name -> list of {metric: value}."""
    runs = [RunRecord.from_json({"allocator": name, "params": {}, "probe_set": "layout", "status": "ok",
                                 "round": i + 1, "metrics": metrics})
            for name, values in per_allocator.items() for i, metrics in enumerate(values)]
    header = {"scenario": "s", "allocators": {name: {} for name in per_allocator}, "baseline": "glibc"}
    return SimpleNamespace(header=header, runs=runs, path="s.json")


def _cell(per_allocator, metric):
    [cell] = analyze(_result(per_allocator), metrics=[metric]).cells
    return cell


def test_constant_and_different_in_every_run_is_reported_as_a_difference():
    # The case: internal fragmentation 0.6667 (glibc) vs 0.0000 (mimalloc) in every run.
    m = "layout:internal_frag"
    cell = _cell({"glibc": [{m: 2 / 3}] * 4, "mimalloc": [{m: 0.0}] * 4}, m)
    assert cell.comparison_sentence(m, "mimalloc") == (
        "mimalloc has lower internal fragmentation than glibc: 0.0000 vs 0.6667 in every run (n=4 vs n=4), "
        "significant")
    # With 3 runs a side the rank test cannot reach 5% (2/20): no claim, however constant the runs.
    few = _cell({"glibc": [{m: 2 / 3}] * 3, "mimalloc": [{m: 0.0}] * 3}, m)
    assert few.comparison_sentence(m, "mimalloc") == (
        "mimalloc: 0.0000 vs 0.6667 in every run (n=3 vs n=3), but too few runs to tell: 3 "
        "(a claim needs 4 on each side)")


def test_shared_lines_one_vs_zero_in_every_run():
    m = "layout:shared_lines"
    cell = _cell({"glibc": [{m: 0.0}] * 4, "tcmalloc": [{m: 1.0}] * 4}, m)
    sentence = cell.comparison_sentence(m, "tcmalloc")
    assert sentence == "tcmalloc has higher false sharing than glibc: 1 vs 0 in every run (n=4 vs n=4), significant"


def test_verdict_of_constant_figures_names_the_winner_or_a_tie():
    m = "peak_rss_kib"
    cell = _cell({"glibc": [{m: 2048.0}] * 4, "tcmalloc": [{m: 1024.0}] * 4,
                    "jemalloc": [{m: 4096.0}] * 2}, m)
    assert cell.verdicts[m].sentence() == (
        "leanest: tcmalloc uses 2.00x less memory than the runner-up, glibc: 1024 vs 2048 in every run "
        "(n=4 vs n=4), significant (among the allocators with at least 4 runs; jemalloc 2)")
    tie = _cell({"glibc": [{m: 2048.0}] * 4, "tcmalloc": [{m: 2048.0}] * 4}, m)
    assert tie.verdicts[m].sentence() == "leanest: none: glibc and tcmalloc give 2048 in every run"
    assert tie.comparison_sentence(m, "tcmalloc") == "tcmalloc: the same as glibc, 2048 in every run (n=4 vs n=4)"


def test_one_varying_side_against_a_zero_baseline_gives_a_difference_interval():
    m = "layout:shared_lines"
    cell = _cell({"glibc": [{m: 0.0}] * 4, "tcmalloc": [{m: v} for v in (0.0, 2.0, 0.0, 2.0)]}, m)
    sentence = cell.comparison_sentence(m, "tcmalloc")
    assert sentence == "tcmalloc: no significant difference from glibc (difference 0–2)"


def test_an_allocator_with_too_few_runs_is_not_compared():
    m = "wall_s"
    cell = _cell({"glibc": [{m: 1.0}, {m: 1.1}], "tcmalloc": [{m: 0.5}]}, m)
    assert cell.comparison_sentence(m, "tcmalloc") == (
        "tcmalloc: too few runs to tell: 1 (a claim needs 4 on each side; n=1 vs n=2)")
    assert cell.verdicts[m].sentence() == (
        "fastest: too few runs to tell (glibc 2, tcmalloc 1; a claim needs 4 per allocator)")
    more = _cell({"glibc": [{m: v} for v in (1.0, 1.1, 1.0, 0.9)], "tcmalloc": [{m: 0.5}]}, m)
    assert more.verdicts[m].sentence() == (
        "fastest: glibc (the only allocator with enough runs) (among the allocators with at least 4 runs; "
        "tcmalloc 1)")


def test_with_three_allocators_or_more_the_last_is_named_too():
    m = "wall_s"
    # 5 runs each: six pairs under Holm need p <= 0.05/6, and 4 against 4 cannot go below 2/70.
    runs = {"glibc": [1.00, 1.02, 0.98, 1.01, 1.0], "tcmalloc": [0.50, 0.52, 0.49, 0.51, 0.5],
            "jemalloc": [1.00, 1.01, 0.99, 1.02, 1.0], "mimalloc": [2.0, 2.1, 1.9, 2.0, 2.0]}
    cell = _cell({name: [{m: v} for v in values] for name, values in runs.items()}, m)
    assert cell.verdicts[m].sentence().startswith("fastest: tcmalloc is 2.00x faster than the runner-up, ")
    assert cell.last[m].sentence().startswith("slowest: mimalloc is 2.00x slower than the next slowest, ")
    close = _cell({name: [{m: v} for v in values] for name, values in
                    {"glibc": [1.0, 1.2, 0.8, 1.0, 1.05], "tcmalloc": [0.5, 0.5, 0.52, 0.51, 0.5],
                     "jemalloc": [1.1, 0.9, 1.3, 1.0, 1.15]}.items()}, m)
    # glibc and jemalloc cannot be told apart, and both are behind tcmalloc: the slowest are both.
    assert close.last[m].sentence().startswith("slowest: jemalloc and glibc, tied; glibc is ")
    two = _cell({"glibc": [{m: 1.0}, {m: 1.1}], "tcmalloc": [{m: 0.5}, {m: 0.6}]}, m)
    assert m not in two.last                                   # the runner-up says it already
