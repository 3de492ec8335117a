"""A real program swept (`scenc run --param n=1,2,4 -- ./prog {n}`), its --prepare and --cleanup, --ignore-failure,
--show-output, shards of a program's sweep, words as a program's values; and `scenc exec --allocator`.

Real programs (tests/fixtures/threaded_alloc.c compiled here, /bin/sh), real allocators preloaded."""

import csv
import json
import subprocess
from pathlib import Path

import pytest

from scenc.run.plan import RunConfig
from scenc.run.program.target import ProgramTarget
from harness_support import measured, read_lines, scenc, write_scenario
from locations import REPO, TESTS

FIXTURES = TESTS / "fixtures"
TWO = "glibc,jemalloc"


# --------------------------------------------------------------------------- the placeholders, alone
def test_placeholders_take_the_params_values():
    target = ProgramTarget(("./prog", "{n}", "--size={size}", "{x}"), prepare="rm -f out.{n}", cleanup="true")
    assert target.placeholders() == ["n", "size", "x"]
    filled = target.for_params({"n": 4, "size": 64})
    assert filled.argv == ("./prog", "4", "--size=64", "{x}")          # not a param: left as it is
    assert filled.prepare == "rm -f out.4" and filled.cleanup == "true"
    assert target.for_params({}) is target
    assert ProgramTarget.from_json(filled.to_json()) == filled
    assert "prepare" not in ProgramTarget(("./prog",)).to_json()       # files of programs without them: unchanged


def test_a_commands_configurations_carry_their_params():
    a, b = RunConfig.make("glibc", {"n": 1}, target="command"), RunConfig.make("glibc", {"n": 2}, target="command")
    assert a.program_key != b.program_key and a.label() == "glibc n=1 [command]"
    assert RunConfig.make("glibc", {}, target="command").label() == "glibc [command]"


# --------------------------------------------------------------------------- runs
@pytest.mark.slow
def test_a_param_sweep_of_a_real_command_gives_one_cell_per_value(tmp_path, threaded):
    out = tmp_path / "r.json"
    done = scenc("run", "--param", "n=1,2", "--allocators", TWO, "--runs", 2, "--warmup", 0, "-o", out,
                 "-q", "--", threaded, "{n}", 20000, 0)
    assert done.returncode == 0, done.stderr
    header, *runs = read_lines(out)
    assert header["targets"]["command"]["argv"] == [str(threaded), "{n}", "20000", "0"]
    assert header["params"] == {"n": [1, 2]}
    cells = {(r.allocator, json.dumps(r.params)) for r in measured(runs)}
    assert cells == {(a, json.dumps({"n": n})) for a in ("glibc", "jemalloc") for n in (1, 2)}
    assert all(r.target == "command" and r.status == "ok" for r in measured(runs)) and len(measured(runs)) == 8
    # Each run ran the command with its value: n threads, each its own allocator calls.
    text = done.stdout
    assert f"== program: {threaded} 1 20000 0 (n=1) ==" in text and f"== program: {threaded} 2 20000 0 (n=2) ==" in text
    data = json.loads(scenc("report", out, "--json").stdout)
    assert [(b["target"], b["params"]) for b in data["blocks"]] == [("command", {"n": 1}), ("command", {"n": 2})]
    # Plots as for a scenario's sweep (a figure against n), and the summary CSV has a column for n.
    plots = tmp_path / "plots"
    assert scenc("report", out, "--plots", plots, "--summary-csv", tmp_path / "s.csv").returncode == 0
    assert (plots / "threaded_alloc-wall_s-vs-n.png").is_file()
    rows = list(csv.DictReader((tmp_path / "s.csv").open()))
    assert {(r["target"], r["parameter_n"]) for r in rows} == {("command", "1"), ("command", "2")}


@pytest.mark.slow
def test_prepare_and_cleanup_run_around_each_run_untimed(tmp_path, threaded):
    out, log = tmp_path / "r.json", tmp_path / "hooks.log"
    done = scenc("run", "--param", "n=1,2", "--allocators", TWO, "--runs", 2, "--warmup", 1, "-o", out, "-q",
                 "--prepare", f"sleep 0.3; echo prepare {{n}} $PWD >> {log}", "--cleanup", f"echo cleanup {{n}} >> {log}",
                 "--cwd", tmp_path, "--", threaded, "{n}", 2000, 0)
    assert done.returncode == 0, done.stderr
    lines = log.read_text().splitlines()
    # 2 allocators x 2 values x (1 warm-up + 2 runs), each between its own prepare and cleanup, in its cwd.
    assert len(lines) == 2 * 2 * 2 * 3
    for before, after in zip(lines[::2], lines[1::2]):
        n = before.split()[1]
        assert before == f"prepare {n} {tmp_path}" and after == f"cleanup {n}"
    header, *runs = read_lines(out)
    assert header["targets"]["command"]["prepare"].startswith("sleep 0.3")
    assert all(r.metrics["wall_s"] < 0.3 for r in measured(runs))     # the prepare's sleep is not timed


@pytest.mark.slow
def test_a_failing_prepare_fails_its_run_and_says_why(tmp_path):
    out = tmp_path / "r.json"
    done = scenc("run", "--allocators", "glibc", "--runs", 2, "--warmup", 0, "-o", out, "-q",
                 "--prepare", "echo no input file >&2; exit 3", "--", "true")
    assert done.returncode == 3
    header, *runs = read_lines(out)
    assert runs and all(r.status == "crashed" for r in runs)
    assert "--prepare 'echo no input file >&2; exit 3' failed (exit status 3): no input file" in runs[0].problem


@pytest.mark.slow
def test_ignore_failure_measures_a_program_that_exits_non_zero(tmp_path):
    out = tmp_path / "r.json"
    failing = ["sh", "-c", "exit 1"]
    done = scenc("run", "--allocators", TWO, "--runs", 2, "--warmup", 0, "-o", out, "-q", "--", *failing)
    assert done.returncode == 3
    done = scenc("run", "--allocators", TWO, "--runs", 2, "--warmup", 0, "-o", tmp_path / "i.json", "-q",
                 "--ignore-failure", "--", *failing)
    assert done.returncode == 0, done.stderr
    header, *runs = read_lines(tmp_path / "i.json")
    assert header["targets"]["command"]["ignore_failure"] is True
    assert all(r.status == "ok" and r.exit_code == 1 and r.metrics["wall_s"] > 0 for r in measured(runs))


@pytest.mark.slow
def test_show_output_puts_the_programs_output_on_the_terminal(tmp_path):
    args = ("run", "--allocators", "glibc", "--runs", 2, "--warmup", 0, "-q")
    shown = scenc(*args, "-o", tmp_path / "a.json", "--show-output", "--", "sh", "-c", "echo to-out; echo to-err >&2")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines().count("to-out") == 2 and shown.stderr.splitlines().count("to-err") == 2
    quiet = scenc(*args, "-o", tmp_path / "b.json", "--", "sh", "-c", "echo to-out; echo to-err >&2")
    assert "to-out" not in quiet.stdout.splitlines() and "to-err" not in quiet.stderr


@pytest.mark.slow
def test_a_programs_sweep_in_shards_merges_back(tmp_path, threaded):
    parts = []
    for k in (1, 2):
        out = tmp_path / f"s{k}.json"
        done = scenc("run", "--param", "n=1,2", "--allocators", "glibc", "--runs", 2, "--warmup", 0, "--seed", 5,
                     "--shard", f"{k}/2", "-o", out, "-q", "--", threaded, "{n}", 2000, 0)
        assert done.returncode == 0, done.stderr
        parts.append(out)
        header, *runs = read_lines(out)
        assert len({json.dumps(r.params) for r in runs}) == 1          # one cell each
    merged = scenc("merge", *parts, "-o", tmp_path / "all.json")
    assert merged.returncode == 0, merged.stderr
    header, *runs = read_lines(tmp_path / "all.json")
    assert sorted(json.dumps(r.params) for r in runs) == [json.dumps({"n": 1})] * 2 + [json.dumps({"n": 2})] * 2


@pytest.mark.slow
def test_a_scenario_and_its_program_swept_together_are_paired_by_value(tmp_path, threaded):
    scenario = write_scenario(tmp_path)       # param threads
    out = tmp_path / "r.json"
    done = scenc("run", scenario, "--param", "threads=1,2", "--allocators", TWO, "--runs", 2, "--warmup", 0,
                 "-o", out, "-q", "--", threaded, "{threads}", 5000, 0)
    assert done.returncode == 0, done.stderr
    data = json.loads(scenc("report", out, "--json").stdout)
    assert sorted((b["target"], b["params"]["threads"]) for b in data["blocks"]) == \
        [("command", 1), ("command", 2), ("scenario", 1), ("scenario", 2)]
    assert done.stdout.count("beside the program (same session, interleaved rounds)") == 2


@pytest.mark.slow
def test_a_programs_param_may_be_words_a_scenarios_may_not(tmp_path):
    out = tmp_path / "r.json"
    done = scenc("run", "--param", "word=small,large", "--allocators", "glibc", "--runs", 2, "--warmup", 0, "-o", out,
                 "-q", "--", "sh", "-c", 'test "$0" = small || test "$0" = large', "{word}")
    assert done.returncode == 0, done.stderr
    header, *runs = read_lines(out)
    assert sorted(r.params["word"] for r in measured(runs)) == ["large", "large", "small", "small"]
    plots = tmp_path / "plots"
    assert scenc("report", out, "--plots", plots, "--summary-csv", tmp_path / "s.csv").returncode == 0
    assert {r["word"] for r in csv.DictReader((tmp_path / "s.csv").open())} == {"small", "large"}
    refused = scenc("run", REPO / "examples" / "loop.scn", "--param", "iterations=many", "--allocators", "glibc")
    assert refused.returncode == 64 and "'many' is not a number" in refused.stderr


def test_a_param_the_program_does_not_use_is_refused(tmp_path):
    done = scenc("run", "--allocators", "glibc", "--param", "n=1,2", "--", "sort", "/dev/null")
    assert done.returncode == 64 and "--param n: the program's arguments have no {n}" in done.stderr
    done = scenc("run", "--allocators", "glibc", "--prepare", "true", "-o", tmp_path / "x.json", str(REPO / "examples" /
                                                                                                  "loop.scn"))
    assert done.returncode == 64 and "--prepare go with a program" in done.stderr


# --------------------------------------------------------------------------- exec --allocator
@pytest.mark.slow
def test_exec_runs_once_under_the_allocator_named(tmp_path):
    loop = REPO / "examples" / "loop.scn"
    done = scenc("exec", loop, "--param", "iterations=2000", "--allocator", "jemalloc[narenas:1]")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("allocator jemalloc[narenas:1] (MALLOC_CONF=narenas:1)\n")
    assert "malloc from " in done.stdout and "libjemalloc.so.2" in done.stdout
    data = json.loads(scenc("exec", loop, "--param", "iterations=2000", "--allocator", "tbbmalloc", "--json").stdout)
    assert data["allocator"] == "tbbmalloc" and data["provider"].endswith("libtbbmalloc_proxy.so.2")
    plain = scenc("exec", loop, "--param", "iterations=2000")
    assert "libc.so" in plain.stdout and plain.stdout.startswith("scenario 'loop'")
    bad = scenc("exec", loop, "--allocator", "jemalloc,mimalloc")
    assert bad.returncode == 64 and "one allocator" in bad.stderr
    bad = scenc("exec", loop, "--allocator", "jemalloc", "--sanitize", "address")
    assert bad.returncode == 64 and "the sanitizer brings its own malloc" in bad.stderr
