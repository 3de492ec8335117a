"""The warnings after the tables (report/advice.py): a report whose runs are too few for
any claim says how many to ask for (issue 28: `--runs 3` never gets a verdict, silently)."""

from types import SimpleNamespace

from scenc.report.analysis import analyze
from scenc.report.tables import format_analysis
from scenc.run.record import RunRecord


def _result(runs_per_allocator):
    runs = [RunRecord.from_json({"allocator": name, "params": {}, "probe_set": "time+memory", "status": "ok",
                                 "round": i + 1, "metrics": {"wall_s": 0.3 + 0.01 * i, "peak_rss_kib": 2000.0 + i}})
            for name in ("glibc", "jemalloc") for i in range(runs_per_allocator)]
    header = {"scenario": "s", "allocators": {"glibc": {}, "jemalloc": {}}, "baseline": "glibc"}
    return SimpleNamespace(header=header, runs=runs, path="s.json")


def test_too_few_runs_say_how_many_to_ask_for():
    text = format_analysis(analyze(_result(3)))
    assert "too few runs: 3 per allocator, and a claim needs at least 4 of each" in text
    assert "run again with --runs 20" in text


def test_enough_runs_say_nothing_of_it():
    assert "too few runs:" not in format_analysis(analyze(_result(8)))
