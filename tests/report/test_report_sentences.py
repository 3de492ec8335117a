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
    cell = _cell({"glibc": [{m: 2 / 3}] * 3, "mimalloc": [{m: 0.0}] * 3}, m)
    assert cell.comparison_sentence(m, "mimalloc") == (
        "mimalloc has lower internal fragmentation than glibc: 0.0000 vs 0.6667 in every run (n=3 vs n=3)")


def test_shared_lines_one_vs_zero_in_every_run():
    m = "layout:shared_lines"
    cell = _cell({"glibc": [{m: 0.0}] * 3, "tcmalloc": [{m: 1.0}] * 3}, m)
    sentence = cell.comparison_sentence(m, "tcmalloc")
    assert sentence == "tcmalloc has higher false sharing than glibc: 1 vs 0 in every run (n=3 vs n=3)"


def test_verdict_of_constant_figures_names_the_winner_or_a_tie():
    m = "peak_rss_kib"
    cell = _cell({"glibc": [{m: 2048.0}] * 3, "tcmalloc": [{m: 1024.0}] * 3,
                    "jemalloc": [{m: 4096.0}] * 2}, m)
    assert cell.verdicts[m].sentence() == (
        "leanest: tcmalloc uses 2.00x less memory than the runner-up, glibc: 1024 vs 2048 in every run "
        "(n=3 vs n=3)")
    tie = _cell({"glibc": [{m: 2048.0}] * 3, "tcmalloc": [{m: 2048.0}] * 2}, m)
    assert tie.verdicts[m].sentence() in (
        "leanest: glibc and tcmalloc tie, 2048 in every run (n=3 vs n=2)",
        "leanest: tcmalloc and glibc tie, 2048 in every run (n=2 vs n=3)")
    assert tie.comparison_sentence(m, "tcmalloc") == "tcmalloc: the same as glibc, 2048 in every run (n=2 vs n=3)"


def test_one_varying_side_against_a_zero_baseline_gives_a_difference_interval():
    m = "layout:shared_lines"
    cell = _cell({"glibc": [{m: 0.0}] * 4, "tcmalloc": [{m: v} for v in (0.0, 2.0, 0.0, 2.0)]}, m)
    sentence = cell.comparison_sentence(m, "tcmalloc")
    assert sentence.startswith("tcmalloc: no significant difference from glibc (1 vs 0 on average, difference -")


def test_an_allocator_with_one_run_is_not_compared():
    m = "wall_s"
    cell = _cell({"glibc": [{m: 1.0}, {m: 1.1}], "tcmalloc": [{m: 0.5}]}, m)
    assert cell.comparison_sentence(m, "tcmalloc") == ""        # the table leaves it out
    assert cell.verdicts[m].sentence() == "fastest: glibc (the only allocator with enough runs)"


def test_with_three_allocators_or_more_the_last_is_named_too():
    m = "wall_s"
    runs = {"glibc": [1.00, 1.02, 0.98, 1.01], "tcmalloc": [0.50, 0.52, 0.49, 0.51],
            "jemalloc": [1.00, 1.01, 0.99, 1.02], "mimalloc": [2.0, 2.1, 1.9, 2.0]}
    cell = _cell({name: [{m: v} for v in values] for name, values in runs.items()}, m)
    assert cell.verdicts[m].sentence().startswith("fastest: tcmalloc is 1.99x faster than the runner-up, ")
    assert cell.last[m].sentence().startswith("slowest: mimalloc is 1.99x slower than the next slowest, ")
    close = _cell({name: [{m: v} for v in values] for name, values in
                    {"glibc": [1.0, 1.2, 0.8], "tcmalloc": [0.5, 0.5, 0.52], "jemalloc": [1.1, 0.9, 1.3]}.items()}, m)
    assert close.last[m].sentence().startswith("slowest: jemalloc by its mean, but not significantly behind glibc (")
    two = _cell({"glibc": [{m: 1.0}, {m: 1.1}], "tcmalloc": [{m: 0.5}, {m: 0.6}]}, m)
    assert m not in two.last                                   # the runner-up says it already
