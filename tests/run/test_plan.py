"""The pieces of `scenc run` that need no program: plans, sweeps, orders, option parsing,
metric extraction and the run classification (on outcomes written here, since a
real crash or timeout is tested in test_harness_run.py)."""

import argparse

import pytest

from scenc.allocators import registry
from scenc.run import plan as harness_plan, runner
from scenc.commands import options
from scenc.report import metrics as metric_defs
from scenc.report.tables import format_value


def test_sweep_is_the_cartesian_product_in_command_line_order():
    combos = harness_plan.sweep({"threads": [1, 2], "size": [8, 64, 512]})
    assert len(combos) == 6
    assert combos[0] == {"threads": 1, "size": 8}
    assert combos[-1] == {"threads": 2, "size": 512}
    assert harness_plan.sweep({}) == [{}]


def test_plan_describes_itself_like_the_issue_says():
    plan = harness_plan.plan_runs(["glibc", "tcmalloc", "jemalloc", "mimalloc"],
                             harness_plan.sweep({"threads": [1, 2, 4]}), runs=10, warmup=1)
    assert len(plan.configs) == 12
    assert plan.describe() == "4 allocators x 3 param sets x 10 runs + 1 warm-up each = 132 runs"
    auto = harness_plan.plan_runs(["glibc"], [{}], runs=None, min_runs=5, max_runs=20, ci=0.02)
    assert "5 to 20 runs" in auto.describe() and "±2.0%" in auto.describe()
    auto.time_budget_s = 45.0
    assert auto.describe().endswith(" runs, no new round after 45 s")


def test_plan_survives_json_and_keeps_the_order_of_configs():
    plan = harness_plan.plan_runs(["glibc", "jemalloc"], harness_plan.sweep({"threads": [1, 2]}),
                             runs=None, ci=0.05, min_runs=3, max_runs=9, seed=11, timeout_s=4.0)
    again = harness_plan.Plan.from_json(plan.to_json())
    assert again == plan
    assert [c.label() for c in again.configs] == ["glibc threads=1", "jemalloc threads=1",
                                                  "glibc threads=2", "jemalloc threads=2"]


def test_every_round_has_a_new_order_that_the_seed_fixes():
    plan = harness_plan.plan_runs(["a", "b", "c", "d", "e"], [{}], seed=3)
    orders = [tuple(c.allocator for c in plan.round_order(r, plan.configs)) for r in range(1, 9)]
    assert all(sorted(o) == ["a", "b", "c", "d", "e"] for o in orders)
    assert len(set(orders)) > 1
    assert orders == [tuple(c.allocator for c in plan.round_order(r, plan.configs)) for r in range(1, 9)]
    other = harness_plan.plan_runs(["a", "b", "c", "d", "e"], [{}], seed=4)
    assert orders != [tuple(c.allocator for c in other.round_order(r, other.configs)) for r in range(1, 9)]


@pytest.mark.parametrize("text, value", [("2%", 0.02), ("0.5%", 0.005), ("0.1", 0.1)])
def test_ci_option(text, value):
    assert options.parse_fraction(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["0%", "150%", "two"])
def test_ci_option_rejects_nonsense(text):
    with pytest.raises(argparse.ArgumentTypeError):
        options.parse_fraction(text)


@pytest.mark.parametrize("text, seconds", [("90", 90), ("30s", 30), ("2m", 120), ("1.5h", 5400)])
def test_durations(text, seconds):
    assert options.parse_seconds(text) == pytest.approx(seconds)


def _report(wall_ns=2_000_000, provider="/lib/x86_64-linux-gnu/libc.so.6", peak=1500):
    return {
        "scenario": "t", "seed": 1, "provider": provider, "wall_ns": wall_ns,
        "rusage": {"user_s": 0.002, "sys_s": 0.0, "minflt": 90, "majflt": 0},
        "memory": {"peak_rss_kib": peak, "final_rss_kib": 1400},
        "threads": [
            {"group": "w", "index": 0, "ops": {"malloc": 500, "free": 500}, "failed": 0,
             "regions": {"hot": {"ns": 1_000_000, "entries": 4}}},
            {"group": "w", "index": 1, "ops": {"malloc": 500, "free": 500}, "failed": 0,
             "regions": {"hot": {"ns": 1_500_000, "entries": 4}, "cold": {"ns": 0, "entries": 0}}},
        ],
    }


def test_metrics_from_a_program_report():
    values = metric_defs.from_report(_report())
    assert values["wall_s"] == pytest.approx(0.002)
    assert values["ops_per_s"] == pytest.approx(2000 / 0.002)
    assert values["peak_rss_kib"] == 1500 and values["minflt"] == 90
    # A region's time is its slowest thread's; a region nobody entered is absent.
    assert values["region:hot"] == pytest.approx(0.0015)
    assert "region:cold" not in values
    assert metric_defs.metric("region:hot").lower_is_better


def test_unreadable_memory_is_missing_not_minus_one():
    assert "peak_rss_kib" not in metric_defs.from_report(_report(peak=-1))


def test_every_metric_has_a_direction_and_unit():
    for m in metric_defs.all_metrics():
        assert isinstance(m.lower_is_better, bool) and m.label
    assert not metric_defs.metric("ops_per_s").lower_is_better
    assert set(metric_defs.headline_names()) == {"wall_s", "peak_rss_kib"}


def _outcome(returncode=0, stdout="", stderr="", timed_out=False):
    return runner.Outcome("2024-01-01T00:00:00+00:00", 0.01, returncode, stdout, stderr, timed_out)


def test_run_classification():
    import json
    glibc = registry.resolve("glibc")[0]
    jemalloc = registry.resolve("jemalloc")[0]
    config = harness_plan.RunConfig.make("glibc", {"threads": 2})
    ok = runner.make_record(config, glibc, 1, _outcome(stdout=json.dumps(_report())), 10)
    assert ok.status == "ok" and ok.metrics["wall_s"] == pytest.approx(0.002)
    # glibc did the work although the run is labelled jemalloc: never filed under jemalloc.
    wrong = runner.make_record(harness_plan.RunConfig.make("jemalloc", {}), jemalloc, 1,
                               _outcome(stdout=json.dumps(_report())), 10)
    assert wrong.status == "wrong-allocator" and "jemalloc" in wrong.problem
    crash = runner.make_record(config, glibc, 1, _outcome(returncode=-11, stderr="x\n" * 5000), 10)
    assert crash.status == "crashed" and crash.signal == "SIGSEGV"
    assert len(crash.stderr_tail) <= runner.STDERR_TAIL_CHARS
    hang = runner.make_record(config, glibc, 1, _outcome(returncode=-9, timed_out=True), 3)
    assert hang.status == "timeout" and "3 s" in hang.problem
    garbage = runner.make_record(config, glibc, 1, _outcome(stdout="not json"), 10)
    assert garbage.status == "crashed" and "JSON" in garbage.problem


@pytest.mark.parametrize("value, unit, text", [
    (0.0123, "s", "12.30 ms"), (2.5, "s", "2.500 s"), (4.2e-6, "s", "4.200 µs"),
    (2048, "KiB", "2048 KiB"), (204800, "KiB", "200.0 MiB"), (3.2e7, "ops/s", "32.00 M ops/s"),
])
def test_units_scale_for_people(value, unit, text):
    assert format_value(value, unit) == text
