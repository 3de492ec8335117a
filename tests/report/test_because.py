"""The because: line under each end verdict (report/because.py): the other figures that moved
significantly the verdict's way, by the same rank test, corrected as a family of their own.

Real figures: tests/fixtures/results/costs.json (a real session, saved: its README says how it was
made) for what the lines say, and one real session here (slow) of an allocator built to fault more.
Only test_the_words_of_a_figure makes up its samples (to reach every form of the words).
"""

import re

import pytest

from harness_support import build_fault_allocator, scenc, write_scenario
from locations import FIXTURES
from scenc.report.analysis import analyze
from scenc.report.because import Figure, candidates
from scenc.report.tables import format_analysis
from scenc.run import resultfile
from scenc.stats import rank

COSTS = FIXTURES / "results" / "costs.json"


def _analysis():
    return analyze(resultfile.load(COSTS), metrics=[])


def _after(text: str, start: str) -> str:
    lines = text.splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith(start))
    return lines[index + 1]


def test_the_slowest_is_explained_by_its_minor_faults():
    text = format_analysis(_analysis())
    assert "slowest: faulty is 2.49x slower than the next slowest, sleepy" in text
    because = _after(text, "slowest: faulty")
    assert because.startswith("  because: faulty against sleepy, medians: ")
    # faulty touches 16 fresh pages every 200th allocation: 8,000 more faults in 100,000 allocations
    # (78.5: the median of 10 runs)
    assert "103x more minor page faults: 8,079 vs 78.5" in because
    assert "more system CPU time" in because


def test_a_verdict_no_measured_figure_explains_says_so():
    # sleepy sleeps 10 ms once: slower, with no CPU time, fault or byte to show for it
    text = format_analysis(_analysis())
    assert "fastest: plain is 2.73x faster than the runner-up, sleepy" in text
    because = _after(text, "fastest: plain")
    assert because.startswith("  because: no measured figure explains it (plain against sleepy: none of "
                              "user CPU time, system CPU time")
    assert "differs significantly the same way" in because


def test_a_verdict_that_names_no_one_has_no_because_line():
    text = format_analysis(_analysis())
    assert _after(text, "leanest: none").startswith("fattest: none")
    assert not _after(text, "fattest: none").startswith("  because")


def test_each_figure_is_the_rank_test_at_the_level_its_family_grants():
    analysis = _analysis()
    cell = analysis.cells[0]
    because = cell.because[("wall_s", False)]
    assert (because.named, because.against, because.word) == ("faulty", "sleepy", "slowest")
    assert [f.metric for f in because.figures][0] == "minflt"
    for figure in because.figures:
        c = figure.comparison
        again = rank.compare(cell.stats("sleepy").samples[figure.metric], cell.stats("faulty").samples[figure.metric],
                             lower_is_better=True, noise=analysis.noise, confidence=c.confidence)
        assert again == c
        assert c.other_is_better is False and figure.p_adjusted <= 0.05      # worse, as "slowest" is
        assert c.confidence > 0.95                                           # Holm's level, not 95%


def test_the_because_family_is_apart_from_the_claims():
    analysis = _analysis()
    # the claims: 3 pairs x 2 metrics; the because: lines, their own 14 (7 figures under each of 2 verdicts)
    assert analysis.family.size == 6
    assert analysis.because_size == 14
    assert ("(because: the same test on the 14 figures compared for the verdicts' because: lines, corrected as "
            "a family of their own (Holm within each param set), apart from the claims)") in format_analysis(analysis)


def test_json_gives_each_verdict_its_because():
    data = _analysis().to_json()
    slowest = data["blocks"][0]["last"]["wall_s"]["because"]
    assert slowest["named"] == "faulty" and slowest["against"] == "sleepy"
    first = slowest["figures"][0]
    assert first["metric"] == "minflt" and first["words"].endswith("minor page faults: 8,079 vs 78.5")
    assert first["median"] == 8079 and first["other_median"] == 78.5 and first["p_adjusted"] <= 0.05
    assert "minflt" in slowest["checked"] and "ops_per_s" not in slowest["checked"]
    assert data["blocks"][0]["verdicts"]["peak_rss_kib"]["because"] is None     # "leanest: none"


def test_which_figures_can_explain_which_verdict():
    names = ["wall_s", "ops_per_s", "user_s", "sys_s", "time:cpu_s", "time:thread.worker[0].wall_s",
             "peak_rss_kib", "heap_rss_kib", "minflt", "failed_allocs", "memory:sampled_peak_rss_kib",
             "memory:baseline_rss_kib", "memory:major_faults", "live:peak_bytes", "latency:malloc.p99_ns",
             "latency:tsc_ghz", "layout:touched_kib", "layout:internal_frag", "counters:context_switches",
             "region:x", "reported:rtime"]
    # time: causes, not the time restated (calls per second, a thread's time, a region, the program's figure)
    assert candidates("wall_s", names) == [
        "user_s", "sys_s", "time:cpu_s", "peak_rss_kib", "minflt", "memory:major_faults", "latency:malloc.p99_ns",
        "layout:touched_kib", "layout:internal_frag", "counters:context_switches"]
    # memory: memory figures, not the peak restated; no figure without a direction
    assert candidates("peak_rss_kib", names) == ["minflt", "memory:major_faults", "layout:touched_kib",
                                                 "layout:internal_frag"]


def test_the_words_of_a_figure():
    """Made-up samples, to reach every form: a share below 1, a share above, a factor, a difference."""
    base = [100.0, 101.0, 102.0, 103.0, 104.0, 105.0]

    def words(metric, other, baseline=base):
        c = rank.compare(baseline, other, noise=0.01)
        assert c.significant
        return Figure(metric, c, 0.01, (sorted(other)[3], sorted(baseline)[3])).words()

    assert words("minflt", [v * 0.59 for v in base]) == "41% fewer minor page faults: 60.8 vs 103"
    assert words("minflt", [v * 1.5 for v in base]) == "50% more minor page faults: 154.5 vs 103"
    assert words("minflt", [v * 3 for v in base]) == "3.0x more minor page faults: 309 vs 103"
    assert words("user_s", [v / 1e3 for v in base], [v / 1e2 for v in base]).startswith("90% less user CPU time: ")
    assert words("peak_rss_kib", [v * 200 for v in base], [v * 100 for v in base]) == \
        "2.0x more peak RSS: 20.1 MiB vs 10.1 MiB"
    assert words("sys_s", [0.002, 0.003, 0.002, 0.003, 0.002], [0.0] * 5) == "more system CPU time: 3 ms vs 0 ms"


@pytest.mark.slow
def test_an_allocator_built_to_fault_more_is_explained_by_its_faults(tmp_path):
    """A real session: the same library twice, one touching 16 fresh pages every 100th allocation."""
    library = build_fault_allocator("cost", tmp_path)
    config = tmp_path / "costs.ini"
    config.write_text(f"[plain]\nlibrary = {library}\n\n[faulty]\nlibrary = {library}\n"
                      f"env = COSTALLOC_PAGES_EVERY=100\n")
    out = tmp_path / "r.json"
    done = scenc("run", write_scenario(tmp_path), "--allocator-config", config, "--allocators", "plain,faulty",
                 "--runs", 8, "-o", out, "-q")
    assert done.returncode == 0, done.stderr
    because = _after(done.stdout, "fastest: plain")
    assert re.match(r"  because: plain against faulty, medians: 9\d% fewer minor page faults: [\d,.]+ vs [\d,.]+",
                    because), because
    assert scenc("report", out).stdout == done.stdout
