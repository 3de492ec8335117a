"""`scenc run` with real programs under real allocators: the preload proof, the
shuffled rounds, crash and hang isolation, sweeps, `--runs auto` and the time budget.

No test asserts that one allocator is faster than another (the machine is shared)."""

import os
import time

import pytest

from scenc.allocators import registry
from scenc.run import plan as plan_module
from scenc.stats.summary import relative_ci_halfwidth
from harness_support import (build_fault_allocator, build_library_without_malloc, measured, processes_mapping,
                             read_lines, scenc, write_scenario)

ALL_FOUR = "glibc,tcmalloc,jemalloc,mimalloc"


@pytest.mark.slow
def test_each_run_is_served_by_the_allocator_it_is_labelled_with(tmp_path):
    scenario = write_scenario(tmp_path)
    out = tmp_path / "r.json"
    done = scenc("run", scenario, "--allocators", ALL_FOUR, "--runs", 2, "-o", out, "-q")
    assert done.returncode == 0, done.stderr
    header, *runs = read_lines(out)
    assert header["status"] == "complete"
    assert len(runs) == 8 and all(r.status == "ok" for r in runs)
    for r in runs:
        expected = header["allocators"][r.allocator]["path"]
        if expected is None:  # the system malloc: libc itself must have served the run
            assert os.path.basename(r.provider).startswith("libc.so")
        else:
            assert os.path.realpath(r.provider) == os.path.realpath(expected)
    assert len({os.path.realpath(r.provider) for r in runs}) == 4
    for name in ("tcmalloc", "jemalloc", "mimalloc"):
        assert header["allocators"][name]["version"]


@pytest.mark.slow
def test_a_preload_that_does_not_take_is_wrong_allocator_and_loud(tmp_path):
    scenario = write_scenario(tmp_path)
    lib = build_library_without_malloc(tmp_path)
    out = tmp_path / "r.json"
    done = scenc("run", scenario, "--allocators", f"glibc,fake={lib}", "--runs", 3, "-o", out)
    assert done.returncode == 3
    assert "WRONG ALLOCATOR" in done.stderr and "fake" in done.stderr
    assert "WRONG ALLOCATOR" in done.stdout  # also in the report itself
    header, *runs = read_lines(out)
    fake = [r for r in runs if r.allocator == "fake"]
    assert fake and all(r.status == "wrong-allocator" for r in fake)
    assert all(os.path.basename(r.provider).startswith("libc.so") for r in fake)
    # No more runs after the first proof that the preload does not work.
    assert len(fake) == 1
    assert len([r for r in runs if r.allocator == "glibc" and r.status == "ok"]) == 3


@pytest.mark.slow
def test_rounds_are_shuffled_and_complete(tmp_path):
    scenario = write_scenario(tmp_path)
    names = ["glibc", "glibc-notc", "jemalloc", "mimalloc"]
    out = tmp_path / "r.json"
    done = scenc("run", scenario, "--allocators", ",".join(names), "--runs", 6, "--seed", 5,
                 "-o", out, "-q")
    assert done.returncode == 0, done.stderr
    header, *runs = read_lines(out)
    by_round = {}
    for r in runs:  # the file is in the order the runs finished
        by_round.setdefault(r.round, []).append(r.allocator)
    assert sorted(by_round) == [1, 2, 3, 4, 5, 6]
    assert all(sorted(o) == sorted(names) for o in by_round.values()), "each allocator once a round"
    assert len({tuple(o) for o in by_round.values()}) > 1, "the order changes from round to round"
    started = [r.started for r in runs]
    assert started == sorted(started)
    # The order is the saved seed's, so it can be reproduced (and a resume follows it).
    plan = plan_module.Plan.from_json(header["plan"])
    assert plan.seed == 5
    for round_, order in by_round.items():
        assert order == [c.allocator for c in plan.round_order(round_, plan.configs)]


@pytest.mark.slow
def test_a_crashing_allocator_is_recorded_and_the_others_go_on(tmp_path):
    scenario = write_scenario(tmp_path)
    lib = build_fault_allocator("crash", tmp_path)
    out = tmp_path / "r.json"
    done = scenc("run", scenario, "--allocators", f"glibc,crash={lib},jemalloc", "--runs", 5,
                 "--warmup", 0, "-o", out)
    assert done.returncode == 3
    header, *runs = read_lines(out)
    crashes = [r for r in runs if r.allocator == "crash"]
    # Three crashes in a row are a pattern: no more runs of it after that.
    assert [r.status for r in crashes] == ["crashed"] * 3
    assert all(r.signal == "SIGSEGV" and r.metrics == {} for r in crashes)
    for name in ("glibc", "jemalloc"):
        assert [r.status for r in runs if r.allocator == name] == ["ok"] * 5
    assert "SIGSEGV" in done.stdout and "crashed" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_a_hanging_allocator_times_out_and_its_process_group_dies(tmp_path):
    scenario = write_scenario(tmp_path)
    lib = build_fault_allocator("hang", tmp_path)
    out = tmp_path / "r.json"
    started = time.monotonic()
    done = scenc("run", scenario, "--allocators", f"hang={lib},glibc", "--runs", 3,
                 "--timeout", "1s", "-o", out)
    took = time.monotonic() - started
    assert done.returncode == 3
    header, *runs = read_lines(out)
    hang = [r for r in runs if r.allocator == "hang"]
    assert len(hang) == 1 and hang[0].status == "timeout" and hang[0].warmup
    assert 1.0 <= hang[0].duration_s < 3.0
    assert [r.status for r in runs if r.allocator == "glibc"] == ["ok"] * 3
    assert took < 30
    # No program of this run is left behind sleeping in the hung allocator.
    assert processes_mapping(lib) == []


@pytest.mark.slow
def test_a_param_sweep_builds_once_per_combination_and_reports_each(tmp_path):
    scenario = write_scenario(tmp_path)
    out = tmp_path / "r.json"
    done = scenc("run", scenario, "--allocators", "glibc,jemalloc", "--runs", 2,
                 "--param", "threads=1,2", "--param", "iterations=5000,10000", "-o", out,
                 "--plots", tmp_path / "plots")
    assert done.returncode == 0, done.stderr
    assert "2 allocators x 4 param sets x 2 runs + 1 warm-up each = 24 runs" in done.stderr
    header, *runs = read_lines(out)
    assert header["params"] == {"threads": [1, 2], "iterations": [5000, 10000]}
    combos = {(r.params["threads"], r.params["iterations"]) for r in runs}
    assert combos == {(1, 5000), (1, 10000), (2, 5000), (2, 10000)}
    assert len(runs) == 2 * 4 * 2
    for resolved in header["param_sets"]:
        assert resolved["resolved"]["threads"] == resolved["params"]["threads"]
    for params in ("threads=1 iterations=5000", "threads=2 iterations=10000"):
        assert f"== tiny {params} ==" in done.stdout
    plots = {p.name for p in (tmp_path / "plots").iterdir()}
    assert "tiny-wall_s-vs-threads.png" in plots and "tiny-wall_s-vs-iterations.svg" in plots


@pytest.mark.slow
def test_runs_auto_stops_as_soon_as_every_ci_is_narrow_enough(tmp_path):
    scenario = write_scenario(tmp_path)
    out = tmp_path / "r.json"
    done = scenc("run", scenario, "--allocators", "glibc,jemalloc", "--runs", "auto", "--ci", "25%",
                 "--min-runs", 3, "--max-runs", 30, "-o", out, "-q")
    assert done.returncode == 0, done.stderr
    header, *runs = read_lines(out)
    n = max(r.round for r in runs)
    assert 3 <= n <= 30

    def converged(upto):
        for name in ("glibc", "jemalloc"):
            for metric in ("wall_s", "peak_rss_kib"):
                values = [r.metrics[metric] for r in runs if r.allocator == name and r.round <= upto]
                if relative_ci_halfwidth(values) > 0.25:
                    return False
        return True

    # It ran until the CI was narrow enough (or the cap) and not one round longer.
    assert converged(n) or n == 30
    assert not any(converged(k) for k in range(3, n))


@pytest.mark.slow
def test_runs_auto_gives_up_at_max_runs_and_says_so(tmp_path):
    scenario = write_scenario(tmp_path)
    out = tmp_path / "r.json"
    done = scenc("run", scenario, "--allocators", "glibc", "--runs", "auto", "--ci", "0.001%",
                 "--min-runs", 2, "--max-runs", 4, "-o", out, "-q")
    assert done.returncode == 0, done.stderr
    assert "--max-runs 4 reached" in done.stderr
    assert len(read_lines(out)) == 1 + 4


@pytest.mark.slow
def test_time_budget_stops_between_rounds(tmp_path):
    scenario = write_scenario(tmp_path)
    out = tmp_path / "r.json"
    done = scenc("run", scenario, "--allocators", "glibc,jemalloc", "--runs", 100000,
                 "--time-budget", "2s", "-o", out, "-q", timeout=60)
    assert done.returncode == 0, done.stderr
    assert "time budget" in done.stderr
    header, *runs = read_lines(out)
    rounds = {}
    for r in runs:
        rounds.setdefault(r.round, []).append(r.allocator)
    assert 2 <= len(rounds) < 100000
    assert all(len(v) == 2 for v in rounds.values()), "whole rounds only, so n is equal"


@pytest.mark.slow
def test_with_runs_auto_the_time_budget_waits_for_min_runs(tmp_path):
    scenario = write_scenario(tmp_path)
    out = tmp_path / "r.json"
    done = scenc("run", scenario, "--allocators", "glibc", "--runs", "auto", "--ci", "0.001%",
                 "--min-runs", 3, "--time-budget", "0.01s", "-o", out, "-q", timeout=60)
    assert done.returncode == 0, done.stderr
    assert "time budget of 0.0 s reached before round 4" in done.stderr
    assert len(read_lines(out)) == 1 + 3


@pytest.mark.slow
def test_errors_are_sentences_with_the_right_exit_status(tmp_path):
    scenario = write_scenario(tmp_path)
    unknown = scenc("run", scenario, "--allocators", "glibc,nosuch", "-o", tmp_path / "x.json")
    assert unknown.returncode == 64 and "unknown allocator 'nosuch'" in unknown.stderr
    assert not (tmp_path / "x.json").exists()
    bad = write_scenario(tmp_path, 'scenario "bad"\nthread t {\n    free(q)\n}\n', "bad.scn")
    broken = scenc("run", bad, "--allocators", "glibc", "-o", tmp_path / "y.json")
    assert broken.returncode == 1 and "bad.scn:3:" in broken.stderr
    assert not (tmp_path / "y.json").exists(), "build errors come before any run or file"
    missing = scenc("run", tmp_path / "nope.scn")
    assert missing.returncode == 64 and "no such file" in missing.stderr
    for done in (unknown, broken, missing):
        assert "Traceback" not in done.stderr


@pytest.mark.parametrize("command", ["run", "report", "compare", "allocators"])
def test_help_works(command):
    done = scenc(command, "--help")
    assert done.returncode == 0 and "usage: scenc " + command in done.stdout, done.stderr


def test_allocators_command_lists_the_builtins(tmp_path):
    done = scenc("allocators")
    assert done.returncode == 0
    for a in registry.known():
        line = next(l for l in done.stdout.splitlines() if l.split()[0] == a.name)
        assert ("yes" if registry.problem(a) is None else "no") in line.split()
        if a.library:
            assert a.library in line
