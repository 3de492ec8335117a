"""`scenc run -- COMMAND`: real programs under real allocators, and a scenario beside its program.

The commands are real: a threaded C program compiled here (tests/fixtures/threaded_alloc.c)
and Debian's `sort`. No test asserts that one allocator is faster than another."""

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from scenc.allocators import registry
from harness_support import build_library_without_malloc, measured, read_lines, scenc, start_scenc, write_scenario
from locations import TESTS

pytestmark = pytest.mark.slow  # builds and runs programs: seconds each


FIXTURES = TESTS / "fixtures"
TWO = "glibc,jemalloc"


def _library(name):
    found = registry.resolve(name)[0]
    return None if found.library is None else os.path.realpath(found.library)


def _assert_proven(header, run):
    """Every process's malloc and free came from the allocator the run is labelled with."""
    assert run.proof["processes"] >= 1
    expected = header["allocators"][run.allocator]["path"]
    for obj in run.proof["objects"]:
        if expected is None:
            assert os.path.basename(obj).startswith("libc.so"), obj
        else:
            assert os.path.realpath(obj) == os.path.realpath(expected)


def test_a_threaded_program_is_measured_and_proven_under_each_allocator(tmp_path, threaded):
    out = tmp_path / "r.json"
    done = scenc("run", "--allocators", TWO, "--runs", 2, "-o", out, "-q",
                 "--metric", r"rtime: ([0-9.]+)", "--", threaded, 2, 20000, 64)
    assert done.returncode == 0, done.stderr
    header, *runs = read_lines(out)
    assert header["schema"] == "scenc-result/2" and header["status"] == "complete"
    assert header["targets"]["command"]["argv"] == [str(threaded), "2", "20000", "64"]
    assert len(measured(runs)) == 4
    for r in measured(runs):
        assert r.target == "command" and r.status == "ok" and r.exit_code == 0
        m = r.metrics
        # 64 MiB touched page by page: the peak is at least that, and not the Python parent's.
        assert 64 * 1024 <= m["peak_rss_kib"] < 200 * 1024
        assert m["wall_s"] > 0 and m["user_s"] + m["sys_s"] > 0 and m["minflt"] >= 64 * 256
        assert m["majflt"] >= 0 and m["reported:rtime"] > 0
        _assert_proven(header, r)
    assert {os.path.realpath(r.provider) for r in measured(runs) if r.allocator == "jemalloc"} == \
        {_library("jemalloc")}
    # The program's output stays out of the terminal.
    assert "checksum" not in done.stdout + done.stderr
    assert "== program: " in done.stdout and "reported by the program" in done.stdout


def test_a_non_pie_program_that_takes_mallocs_address_is_proven_under_its_allocator(tmp_path):
    """Debian's python3 is built so: its own symbol for malloc is undefined but has an address (a
    canonical PLT stub in the program), which is where dlsym points; the proof looks past it."""
    program = tmp_path / "address_taken"
    subprocess.run(["gcc", "-O2", "-no-pie", "-fno-pic", "-Wall", "-Wextra", "-Werror", "-o", str(program),
                    str(FIXTURES / "address_taken_malloc.c")], check=True)
    out = tmp_path / "r.json"
    done = scenc("run", "--allocators", TWO, "--runs", 1, "--warmup", 0, "-o", out, "-q", "--", program)
    assert done.returncode == 0, done.stderr
    header, *runs = read_lines(out)
    assert sorted(r.allocator for r in runs) == ["glibc", "jemalloc"]
    for r in runs:
        assert r.status == "ok"
        _assert_proven(header, r)


def test_a_debian_tool_reads_stdin_in_its_cwd_with_its_env(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "in.txt").write_text("".join(f"{(i * 7919) % 10007}\n" for i in range(20000)))
    out = tmp_path / "r.json"
    done = scenc("run", "--allocators", TWO, "--runs", 2, "--warmup", 0, "-o", out, "-q",
                 "--cwd", data, "--stdin", data / "in.txt", "--env", "LC_ALL=C",
                 "--", "sort", "-n", "-o", "sorted.txt")
    assert done.returncode == 0, done.stderr
    header, *runs = read_lines(out)
    assert len(runs) == 4 and all(r.status == "ok" and r.exit_code == 0 for r in runs)
    for r in runs:
        _assert_proven(header, r)
    lines = (data / "sorted.txt").read_text().split()
    assert len(lines) == 20000 and [int(x) for x in lines] == sorted(int(x) for x in lines)
    assert header["targets"]["command"]["env"] == {"LC_ALL": "C"}


def test_a_failing_command_is_reported_plainly_and_every_run_is_kept(tmp_path):
    script = tmp_path / "fails.sh"
    script.write_text("#!/bin/sh\necho 'some progress'\necho 'input.dat: no such file' >&2\nexit 3\n")
    script.chmod(0o755)
    out = tmp_path / "r.json"
    done = scenc("run", "--allocators", TWO, "--runs", 2, "--warmup", 0, "-o", out, "--", script)
    assert done.returncode == 3
    assert "exit status 3" in done.stderr and "input.dat: no such file" in done.stderr
    header, *runs = read_lines(out)
    # Three failures in a row stop a configuration; two runs each are all kept.
    assert len(runs) == 4 and all(r.status == "crashed" and r.exit_code == 3 for r in runs)
    assert all("input.dat: no such file" in r.stderr_tail and "some progress" in r.stdout_tail
               for r in runs)
    assert "crashed" in done.stdout


def test_a_preload_that_does_not_take_is_wrong_allocator_never_a_result(tmp_path):
    lib = build_library_without_malloc(tmp_path)
    out = tmp_path / "r.json"
    done = scenc("run", "--allocators", f"glibc,fake={lib}", "--runs", 2, "-o", out, "--", "sort", "/dev/null")
    assert done.returncode == 3
    assert "WRONG ALLOCATOR" in done.stderr and "fake" in done.stderr
    header, *runs = read_lines(out)
    fake = [r for r in runs if r.allocator == "fake"]
    assert len(fake) == 1 and fake[0].status == "wrong-allocator" and not fake[0].metrics == {}
    assert "libc.so" in fake[0].problem
    assert [r.status for r in runs if r.allocator == "glibc"] == ["ok", "ok"]


def test_a_missing_allocator_library_is_refused_before_any_run(tmp_path):
    out = tmp_path / "r.json"
    done = scenc("run", "--allocators", "glibc,fake=/nonexistent/libfake.so", "-o", out, "--", "sort", "/dev/null")
    assert done.returncode == 64 and "/nonexistent/libfake.so" in done.stderr
    assert not out.exists()


def _static_program(tmp_path) -> Path:
    src = tmp_path / "static.c"
    src.write_text("#include <stdlib.h>\nint main(void) { free(malloc(10)); return 0; }\n")
    out = tmp_path / "static"
    built = subprocess.run(["gcc", "-static", "-o", str(out), str(src)], capture_output=True)
    if built.returncode != 0:
        pytest.skip("gcc -static failed (no libc.a: apt-get install libc6-dev): " + built.stderr.decode()[-200:])
    return out


def test_a_static_program_is_refused_with_the_reason(tmp_path):
    out = tmp_path / "r.json"
    done = scenc("run", "--allocators", TWO, "-o", out, "--", _static_program(tmp_path))
    assert done.returncode == 64
    assert "statically linked" in done.stderr and "LD_PRELOAD" in done.stderr
    assert not out.exists()


def test_a_program_with_its_own_malloc_is_refused_with_the_reason(tmp_path):
    src = tmp_path / "own.c"
    src.write_text("#include <stddef.h>\nstatic char heap[1 << 16]; static size_t top;\n"
                   "void *malloc(size_t n) { void *p = heap + top; top += (n + 15) & ~(size_t)15; return p; }\n"
                   "void free(void *p) { (void)p; }\nint main(void) { return malloc(1) == NULL; }\n")
    prog = tmp_path / "own"
    subprocess.run(["gcc", "-O1", "-o", str(prog), str(src)], check=True)
    done = scenc("run", "--allocators", TWO, "-o", tmp_path / "r.json", "--", prog)
    assert done.returncode == 64 and "its own allocator" in done.stderr and "malloc" in done.stderr


def test_a_missing_figure_is_a_failed_run(tmp_path):
    out = tmp_path / "r.json"
    done = scenc("run", "--allocators", "glibc", "--runs", 1, "--warmup", 0, "-o", out,
                 "--metric", r"ops/s: ([0-9.]+)", "--higher-is-better", "--", "sort", "/dev/null")
    assert done.returncode == 3 and "no --metric figure" in done.stderr
    header, run = read_lines(out)
    assert run.status == "no-metric" and header["targets"]["command"]["metric"]["lower_is_better"] is False


def test_a_scenario_beside_its_program_in_one_session(tmp_path, threaded):
    scenario = write_scenario(tmp_path)
    out = tmp_path / "r.json"
    done = scenc("run", scenario, "--allocators", TWO, "--runs", 3, "-o", out,
                 "--", threaded, 1, 20000, 0)
    assert done.returncode == 0, done.stderr
    header, *runs = read_lines(out)
    rounds = {}
    for r in measured(runs):
        rounds.setdefault(r.round, []).append(r.target)
    # Interleaved: every round runs the scenario and the program under both allocators.
    assert sorted(rounds) == [1, 2, 3]
    assert all(sorted(t) == ["command", "command", "scenario", "scenario"] for t in rounds.values())
    text = done.stdout
    assert "beside the program (same session, interleaved rounds)" in text
    assert "share of the program's wall time the scenario takes: glibc" in text
    for word in ("fastest:", "slowest:", "leanest:", "fattest:"):
        assert word in text
    # `scenc report` shows the same, and --json keeps both cells apart.
    again = scenc("report", out)
    assert "beside the program" in again.stdout
    data = json.loads(scenc("report", out, "--json").stdout)
    assert [b["target"] for b in data["blocks"]] == ["scenario", "command"]
    beside, = data["side_by_side"]
    assert set(beside["time_share"]) == {"glibc", "jemalloc"}
    assert [e["word"] for e in beside["metrics"]["wall_s"]["ends"]] == ["fastest", "slowest"]
    # Ratios to the baseline, side by side, are the cells' own comparisons (one statistics path).
    assert beside["baseline"] == "glibc"
    scenario_cell, command_cell = data["blocks"]
    for metric in ("wall_s", "peak_rss_kib"):
        to_base = beside["metrics"][metric]["to_baseline"]
        for side, cell in (("scenario", scenario_cell), ("program", command_cell)):
            assert set(to_base[side]) == {"jemalloc"}
            c, mine = cell["comparisons"][metric]["jemalloc"], to_base[side]["jemalloc"]
            assert mine["ratio"] == c["ratio"] and mine["significant"] == c["significant"]
            assert mine["difference"] == pytest.approx(c["other_mean"] - c["baseline_mean"])
            assert mine["ratio_ci"] is None or mine["ratio_ci"][0] <= mine["ratio"] <= mine["ratio_ci"][1]


def test_an_interrupted_command_session_resumes(tmp_path):
    out = tmp_path / "r.json"
    done = scenc("run", "--allocators", TWO, "--runs", 3, "--warmup", 0, "-o", out, "-q", "--", "sort", "/dev/null")
    assert done.returncode == 0, done.stderr
    lines = out.read_text().splitlines()
    header = json.loads(lines[0])
    header["status"] = "interrupted"
    # As if Ctrl-C came after the fourth run.
    out.write_text("\n".join([json.dumps(header)] + lines[1:5]) + "\n")
    again = scenc("run", "--resume", out, "-q")
    assert again.returncode == 0, again.stderr
    header, *runs = read_lines(out)
    assert header["status"] == "complete" and len(runs) == 6
    assert all(r.target == "command" and r.status == "ok" for r in runs)


def test_compare_of_two_sessions_warns_about_drift(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for out in (a, b):
        done = scenc("run", "--allocators", "glibc", "--runs", 2, "--warmup", 0, "-o", out, "-q",
                     "--", "sort", "/dev/null")
        assert done.returncode == 0, done.stderr
    compared = scenc("compare", a, b)
    assert "separate sessions" in compared.stdout and "drift" in compared.stdout


def test_a_version_1_result_file_still_reads(tmp_path):
    scenario = write_scenario(tmp_path)
    out = tmp_path / "r.json"
    assert scenc("run", scenario, "--allocators", "glibc", "--runs", 2, "-o", out, "-q").returncode == 0
    lines = out.read_text().splitlines()
    header = json.loads(lines[0])
    header["schema"] = "scenc-result/1"
    out.write_text("\n".join([json.dumps(header)] + lines[1:]) + "\n")
    shown = scenc("report", out)
    assert shown.returncode == 0 and "wall time" in shown.stdout


def test_options_for_a_command_need_one(tmp_path):
    scenario = write_scenario(tmp_path)
    done = scenc("run", scenario, "--cwd", tmp_path, "-o", tmp_path / "r.json")
    assert done.returncode == 64 and "go with a program" in done.stderr
    done = scenc("run", "--allocators", "glibc", "--param", "threads=2", "--", "sort", "/dev/null")
    assert done.returncode == 64 and "--param threads: the program's arguments have no {threads}" in done.stderr
    done = scenc("run", "--allocators", "glibc", "--", "no-such-command-here")
    assert done.returncode == 64 and "command not found" in done.stderr


@pytest.mark.skipif(shutil.which("sort") is None, reason="coreutils sort not installed")
def test_help_shows_the_program_form():
    done = scenc("run", "--help")
    assert "-- PROGRAM" in done.stdout and "--metric" in done.stdout


def test_a_command_over_its_timeout_is_killed_with_its_process_group(tmp_path):
    script = tmp_path / "slow.sh"
    marker = tmp_path / "child-alive"
    # The child of the script outlives a kill of the script alone; the group kill takes both.
    script.write_text(f"#!/bin/sh\n(sleep 30; touch {marker}) &\nsleep 30\n")
    script.chmod(0o755)
    out = tmp_path / "r.json"
    started = time.monotonic()
    done = scenc("run", "--allocators", "glibc", "--runs", 1, "--warmup", 0, "--timeout", "1s", "-o", out,
                 "--", script)
    assert done.returncode == 3 and time.monotonic() - started < 20
    header, run = read_lines(out)
    assert run.status == "timeout" and "killed (process group)" in run.problem
    time.sleep(0.2)
    assert _processes_running(str(script)) == [] and not marker.exists()


def _processes_running(word: str) -> list:
    """pids whose command line mentions `word` (read from /proc)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if word.encode() in f.read():
                    found.append(pid)
        except OSError:
            pass
    return found


def test_ctrl_c_mid_command_keeps_the_finished_runs(tmp_path):
    out = tmp_path / "r.json"
    proc = start_scenc("run", "--allocators", "glibc", "--runs", 50, "--warmup", 0, "-o", out,
                       "--", "sleep", "0.3")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 3):
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "--resume" in err
    header, *runs = read_lines(out)
    assert header["status"] == "interrupted" and len(runs) >= 2
    assert all(r.status == "ok" and r.target == "command" for r in runs)


def test_a_reported_figure_is_the_last_match_and_named_by_its_words():
    from scenc.run.program.target import ProgramError, ReportedMetric
    m = ReportedMetric.parse(r"rtime: ([0-9.]+)")
    assert m.metric_name == "reported:rtime" and m.lower_is_better
    assert m.find("rtime: 1.5\nwarm\nrtime: 2.25\n") == 2.25 and m.find("nothing here") is None
    named = ReportedMetric.parse(r"(?P<ops>[0-9]+) ops/s", lower_is_better=False)
    assert named.name == "ops" and named.find("run 1: 120 ops/s") == 120.0
    for bad in ("rtime: [0-9.]+", "rtime: ([0-9.]+"):
        with pytest.raises(ProgramError):
            ReportedMetric.parse(bad)


def test_a_script_is_judged_by_its_interpreter(tmp_path):
    from scenc.run.program.target import ProgramTarget, refusal
    script = tmp_path / "job.sh"
    script.write_text("#!/usr/bin/env sh\nexit 0\n")
    script.chmod(0o755)
    assert refusal(ProgramTarget.from_options([str(script)])) is None
    static = _static_program(tmp_path)
    wrapper = tmp_path / "wrapper"
    wrapper.write_text(f"#!{static}\n")
    wrapper.chmod(0o755)
    reason = refusal(ProgramTarget.from_options([str(wrapper)]))
    assert "statically linked" in reason and "the interpreter of" in reason
