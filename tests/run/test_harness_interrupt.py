"""Ctrl-C on a real `scenc run`: the result file stays valid with every finished run,
says it was interrupted, and `--resume` completes it."""

import pytest
import signal
import time

from scenc.run import resultfile
from harness_support import read_lines, scenc, start_scenc, write_scenario

pytestmark = pytest.mark.slow  # builds and runs programs: seconds each


# About 20 ms per run, so SIGINT lands while a program is running.
SLOW = """\
scenario "slowish"
seed 3
param iterations = 1_500_000
thread worker {
    repeat iterations {
        p = malloc(uniform(1, 256))
        free(p)
    }
}
"""
RUNS = 12


def _wait_for_runs(path, count, proc, limit_s=60):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if path.exists() and len(path.read_text().splitlines()) >= 1 + count:
            return
        time.sleep(0.02)
    raise AssertionError(f"fewer than {count} runs saved after {limit_s} s")


def test_ctrl_c_leaves_a_valid_file_and_resume_completes_it(tmp_path):
    scenario = write_scenario(tmp_path, SLOW, "slowish.scn")
    out = tmp_path / "r.json"
    proc = start_scenc("run", scenario, "--allocators", "glibc,jemalloc", "--runs", RUNS,
                       "--seed", 1, "-o", out)
    _wait_for_runs(out, 3, proc)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert f"scenc run --resume {out}" in stderr
    assert "Traceback" not in stderr

    saved = resultfile.load(out)  # validates every line
    assert saved.status == "interrupted"
    assert saved.ignored_tail_bytes == 0
    before = [r for r in saved.runs if not r.warmup]
    assert 3 <= len(before) < 2 * RUNS
    assert all(r.status == "ok" for r in before), "the killed run must not be saved as a crash"
    assert f"{len(before)} finished runs are saved" in stderr

    done = scenc("run", "--resume", out, "-q")
    assert done.returncode == 0, done.stderr
    header, *runs = read_lines(out)
    assert header["status"] == "complete"
    assert runs[: len(before)] == before, "resume appends; it never rewrites saved runs"
    for name in ("glibc", "jemalloc"):
        rounds = sorted(r.round for r in runs if r.allocator == name)
        assert rounds == list(range(1, RUNS + 1)), "each round exactly once per allocator"
    assert "== slowish ==" in done.stdout and f"{RUNS} runs per allocator" in done.stdout


def test_resume_refuses_a_changed_scenario_and_plan_options(tmp_path):
    scenario = write_scenario(tmp_path)
    out = tmp_path / "r.json"
    assert scenc("run", scenario, "--allocators", "glibc", "--runs", 2, "-o", out, "-q").returncode == 0
    again = scenc("run", "--resume", out, "--runs", 5)
    assert again.returncode == 64 and "--runs" in again.stderr
    scenario.write_text(scenario.read_text().replace("seed 7", "seed 8"))
    changed = scenc("run", "--resume", out)
    assert changed.returncode == 64 and "changed since" in changed.stderr
    assert "Traceback" not in changed.stderr + again.stderr
