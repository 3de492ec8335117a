"""`scenc run` under faults: every one gives a sentence, a non-zero exit, and a result
file that still holds every run finished before it (checked after each).

Real allocators (the fault allocators of tests/fixtures/allocators are real
LD_PRELOAD libraries), real signals, a real full file system (a 64 KiB tmpfs
when this test may mount one; otherwise RLIMIT_FSIZE stands in, see there) and
real memory limits. Faked: nothing, except that stand-in.
"""

import os
import resource
import signal
import subprocess
import time
from pathlib import Path

import pytest

from scenc.run import resultfile
from scenc.system.machine import mem_total
from harness_support import (SCENC, build_fault_allocator, processes_mapping, read_lines, scenc,

                             start_scenc, write_scenario)

pytestmark = pytest.mark.slow  # builds and runs programs: seconds each


def saved(path):
    """The result file, validated line by line as `scenc report` would read it."""
    result = resultfile.load(path)
    assert result.ignored_tail_bytes == 0, "no half-written record at the end"
    return result


def no_traceback(done):
    assert "Traceback" not in done.stderr, done.stderr


def measured(result, allocator=None):
    return [r for r in result.runs if not r.warmup
            and (allocator is None or r.allocator == allocator)]


# --------------------------------------------------------------- allocators


def test_a_crashing_allocator(tmp_path):
    scenario = write_scenario(tmp_path)
    lib = build_fault_allocator("crash", tmp_path)
    out = tmp_path / "r.json"
    done = scenc("run", scenario, "--allocators", f"glibc,crash={lib}", "--runs", 4, "--warmup", 0,
                 "-o", out)
    assert done.returncode == 3
    no_traceback(done)
    assert "scenc: run 1 of crash crashed: killed by SIGSEGV" in done.stderr
    assert "no more runs of crash: it crashed 3 times in a row" in done.stderr
    assert "crash: 3 runs crashed — killed by SIGSEGV" in done.stdout
    result = saved(out)
    assert result.status == "complete"
    assert [r.status for r in measured(result, "glibc")] == ["ok"] * 4
    assert [(r.status, r.signal) for r in measured(result, "crash")] == [("crashed", "SIGSEGV")] * 3


def test_a_hanging_allocator_times_out_and_its_process_group_is_killed(tmp_path):
    scenario = write_scenario(tmp_path)
    lib = build_fault_allocator("hang", tmp_path)
    out = tmp_path / "r.json"
    done = scenc("run", scenario, "--allocators", f"glibc,hang={lib}", "--runs", 3, "--timeout", "1s",
                 "-o", out)
    assert done.returncode == 3
    no_traceback(done)
    assert "scenc: warm-up run of hang timed out: no result after 1 s; killed (process group)" in done.stderr
    assert "no more runs of hang: it timed out, and every further run would do the same" in done.stderr
    assert "hang: 1 run timed out" in done.stdout
    result = saved(out)
    [hang] = [r for r in result.runs if r.allocator == "hang"]
    assert hang.status == "timeout" and hang.warmup and 1.0 <= hang.duration_s < 5.0
    assert [r.status for r in measured(result, "glibc")] == ["ok"] * 3
    assert processes_mapping(lib) == [], "a program sleeping in the hung allocator was left behind"


def test_an_allocator_returning_null_is_a_failed_run_not_a_measurement(tmp_path):
    scenario = write_scenario(tmp_path)
    lib = build_fault_allocator("null", tmp_path)
    out = tmp_path / "r.json"
    done = scenc("run", scenario, "--allocators", f"glibc,null={lib}", "--runs", 3, "-o", out)
    assert done.returncode == 3
    no_traceback(done)
    # nullalloc fails every allocation from the 1000th on (counting libc's own).
    assert "scenc: warm-up run of null had failed allocations: " in done.stderr
    assert "allocation calls returned NULL, so the run did less work than the scenario; its " \
           "figures are left out of the statistics" in done.stderr
    assert "some runs failed (1 failed-allocs)" in done.stderr
    assert "null: 1 run finished with failed allocations" in done.stdout
    null_row = next(line for line in done.stdout.splitlines() if line.split()[:2] == ["null", "0"])
    assert "1 failed-allocs" in null_row, "n = 0: none of its figures is in the statistics"
    result = saved(out)
    [null] = [r for r in result.runs if r.allocator == "null"]
    # The record keeps what the program measured, the count of NULLs included.
    assert null.status == "failed-allocs" and null.metrics["failed_allocs"] > 0
    assert null.metrics["wall_s"] > 0 and null.exit_code == 0
    calls = int(null.problem.split(" of ")[1].split()[0])
    assert int(null.metrics["failed_allocs"]) == int(null.problem.split()[0]) < calls
    assert [r.status for r in measured(result, "glibc")] == ["ok"] * 3


# ----------------------------------------------------------------- full disk


@pytest.fixture
def tiny_filesystem(tmp_path):
    """A 64 KiB tmpfs: the result file really runs out of room. Skips where it cannot be mounted."""
    mountpoint = tmp_path / "full"
    mountpoint.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root; test_a_file_size_limit_* stands in")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mountpoint)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}); "
                    f"test_a_file_size_limit_* stands in")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False)


def _check_stopped_for_room(done, out, reason):
    assert done.returncode == 3
    no_traceback(done)
    assert f"scenc: cannot save to {out}: {reason}" in done.stderr
    result = saved(out)
    kept = len(measured(result))
    assert kept >= 10, "runs went on until the file had no more room"
    assert f"the {kept} runs finished before are saved in {out}" in done.stderr
    assert f"continue with: scenc run --resume {out}" in done.stderr
    assert all(r.status == "ok" for r in result.runs)
    return result


def _resume_completes(out, runs):
    done = scenc("run", "--resume", out, "-q")
    assert done.returncode == 0, done.stderr
    result = saved(out)
    assert result.status == "complete"
    for name in ("glibc", "jemalloc"):
        assert sorted(r.round for r in measured(result, name)) == list(range(1, runs + 1))


def test_a_full_disk_stops_cleanly_and_resume_completes_the_file(tiny_filesystem):
    scenario = write_scenario(tiny_filesystem.parent)
    out = tiny_filesystem / "r.json"
    runs = 150  # ~100 records fit in 64 KiB
    done = scenc("run", scenario, "--allocators", "glibc,jemalloc", "--runs", runs, "-o", out, "-q")
    _check_stopped_for_room(done, out, "the disk is full (No space left on device)")
    assert "make room, then continue with" in done.stderr
    # Rewriting the header needs room for a copy of the file: there was none.
    assert 'its header still says "running"' in done.stderr
    subprocess.run(["mount", "-o", "remount,size=4m", str(tiny_filesystem)], check=True)
    _resume_completes(out, runs)


def test_a_file_size_limit_stops_cleanly_and_resume_completes_the_file(tmp_path):
    """Stand-in for a full disk where no file system can be mounted: RLIMIT_FSIZE on scenc.

    What it fakes: a write past the limit fails with EFBIG (Python ignores
    SIGXFSZ) instead of ENOSPC, per file rather than for the whole file
    system; the harness's handling (the record cut off, the file valid, the
    count of saved runs, --resume) is the same code.
    """
    scenario = write_scenario(tmp_path)
    out = tmp_path / "r.json"
    runs = 150

    def limit_file_size():
        resource.setrlimit(resource.RLIMIT_FSIZE, (48 * 1024, resource.RLIM_INFINITY))

    done = subprocess.run([*SCENC, "run", str(scenario), "--allocators", "glibc,jemalloc", "--runs",
                           str(runs), "-o", str(out), "-q"],
                          capture_output=True, text=True, timeout=300, preexec_fn=limit_file_size)
    _check_stopped_for_room(done, out, "the file system refused (File too large)")
    _resume_completes(out, runs)


# --------------------------------------------------------------- huge scenario

# 512 blocks of 64 MiB, each written once: 32 GiB live, more than any test machine has.
HUGE = """\
scenario "faults_huge"
seed 11
param blocks = 512
thread hog {
    pool held[blocks]
    for i in 0 .. blocks {
        held[i] = malloc(64M)
        write(held[i], 1)
    }
    free_all(held)
}
"""


def test_a_scenario_that_cannot_fit_is_refused_before_it_runs(tmp_path):
    if mem_total() is None or mem_total() >= 32 << 30:
        pytest.skip("this machine has 32 GiB or more: the scenario would fit")
    scenario = write_scenario(tmp_path, HUGE, "huge.scn")
    out = tmp_path / "r.json"
    check, run = scenc("check", scenario), scenc("run", scenario, "-o", out)
    for done in (check, run, scenc("exec", scenario)):
        assert done.returncode == 1
        no_traceback(done)
        assert "huge.scn:4:8: error: the scenario needs at least 32.0 GiB live at its peak" in done.stderr
    assert "to run it anyway, add --allow-huge: each run is then held to --memory-limit" in run.stderr
    assert not out.exists(), "refused before any file or run"


ALL_FOUR = ("glibc", "tcmalloc", "jemalloc", "mimalloc")


def test_a_forced_huge_scenario_is_held_by_the_memory_limit(tmp_path):
    if mem_total() is None or mem_total() >= 32 << 30:
        pytest.skip("this machine has 32 GiB or more: the scenario would fit")
    scenario = write_scenario(tmp_path, HUGE, "huge.scn")
    out = tmp_path / "r.json"
    done = scenc("run", scenario, "--allocators", ",".join(ALL_FOUR), "--allow-huge",
                 "--memory-limit", "160M", "--runs", 2, "-o", out)
    assert done.returncode == 3
    no_traceback(done)
    assert "memory limit per run: 160.0 MiB" in done.stderr
    result = saved(out)
    assert result.status == "complete" and result.header["allow_huge"] is True
    assert result.header["plan"]["memory_limit"] == 160 << 20
    for allocator in ALL_FOUR:
        assert (f"scenc: warm-up run of {allocator} ran out of memory: the scenario needs at least "
                f"32.0 GiB live, more than the memory limit of 160.0 MiB per run (--memory-limit)"
                in done.stderr)
        assert f"OUT OF MEMORY: {allocator}: 1 run ran out of memory" in done.stdout
        [record] = [r for r in result.runs if r.allocator == allocator]
        assert record.status == "out-of-memory", record
        if record.metrics:  # it finished, its allocations failing at the limit
            assert 0 < record.metrics["failed_allocs"] <= 512
            assert record.metrics["peak_rss_kib"] * 1024 < 160 << 20, "the limit held"


def test_exec_of_a_forced_huge_scenario_is_out_of_memory(tmp_path):
    if mem_total() is None or mem_total() >= 32 << 30:
        pytest.skip("this machine has 32 GiB or more: the scenario would fit")
    scenario = write_scenario(tmp_path, HUGE, "huge.scn")
    done = scenc("exec", scenario, "--allow-huge", "--memory-limit", "160M")
    assert done.returncode == 3
    no_traceback(done)
    assert "scenc: out of memory: " in done.stderr
    assert "allocations returned NULL under the memory limit of 160.0 MiB" in done.stderr


# --------------------------------------------------------------------- signals

# About 50 ms per run, so a signal lands while a program runs; a name of its own,
# so the program's path in the build cache is this test's alone (pgrep below).
SLOW = """\
scenario "faults_slow"
seed 12
param iterations = 3_000_000
thread worker {
    repeat iterations {
        p = malloc(uniform(1, 256))
        free(p)
    }
}
"""
RUNS = 12


def _pgrep(*args):
    done = subprocess.run(["pgrep", *args], capture_output=True, text=True)
    return [int(pid) for pid in done.stdout.split()]


def _running_program(scenc_pid):
    """(pid, binary) of the scenario program scenc is running now, if any."""
    for pid in _pgrep("-P", str(scenc_pid)):
        try:
            binary = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue
        if binary.endswith("/scenario"):  # compiler/build.py: <cache>/builds/<key>/scenario
            return pid, binary
    return None


def _wait(condition, proc, what, limit_s=60):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        value = condition()
        if value:
            return value
        time.sleep(0.005)
    raise AssertionError(f"no {what} after {limit_s} s")


def _max_data_size(pid):
    with open(f"/proc/{pid}/limits") as f:
        line = next(l for l in f if l.startswith("Max data size"))
    return line.split()[3]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_mid_run_leaves_a_valid_file_no_orphans_and_resume_completes_it(tmp_path, signum):
    scenario = write_scenario(tmp_path, SLOW, "slow.scn")
    out = tmp_path / "r.json"
    proc = start_scenc("run", scenario, "--allocators", "glibc,jemalloc", "--runs", RUNS, "--seed", 1,
                       "-o", out)
    try:
        _wait(lambda: out.exists() and len(out.read_text().splitlines()) >= 1 + 3, proc, "3 saved runs")
        pid, binary = _wait(lambda: _running_program(proc.pid), proc, "running program")
        # The program runs under the default memory limit, 80% of MemTotal.
        try:
            limit = _max_data_size(pid)
            assert limit == str(int(mem_total() * 0.8)), limit
        except (OSError, StopIteration):
            pass  # that run ended meanwhile; the plan in the file is checked below
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signum, stderr
    assert "Traceback" not in stderr
    name = signal.Signals(signum).name
    result = saved(out)
    assert result.status == "interrupted"
    before = measured(result)
    assert 3 <= len(before) < 2 * RUNS
    assert all(r.status == "ok" for r in before), "the killed run is not saved as a failure"
    assert f"scenc: interrupted by {name}; {len(before)} finished runs are saved in {out}" in stderr
    assert f"continue with: scenc run --resume {out}" in stderr
    assert result.header["plan"]["memory_limit"] == int(mem_total() * 0.8)
    time.sleep(0.2)
    assert _pgrep("-f", binary) == [], "a scenario program outlived scenc"

    done = scenc("run", "--resume", out, "-q")
    assert done.returncode == 0, done.stderr
    header, *runs = read_lines(out)
    assert header["status"] == "complete"
    assert runs[: len(before)] == before, "resume appends; it never rewrites saved runs"
    for allocator in ("glibc", "jemalloc"):
        assert sorted(r.round for r in runs if r.allocator == allocator) == list(range(1, RUNS + 1))
    assert _pgrep("-f", binary) == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_kills_the_running_program_at_once(tmp_path, signum):
    # One run of many seconds: scenc must not wait for it to end.
    scenario = write_scenario(tmp_path, SLOW.replace("3_000_000", "500_000_000"), "long.scn")
    out = tmp_path / "r.json"
    proc = start_scenc("run", scenario, "--allocators", "glibc", "--runs", 1, "--warmup", 0, "-o", out)
    try:
        pid, binary = _wait(lambda: _running_program(proc.pid), proc, "running program")
        time.sleep(0.3)
        assert _pgrep("-f", binary) == [pid], "the program is running"
        sent = time.monotonic()
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signum, stderr
    assert took < 3, f"scenc took {took:.1f} s to stop: it waited for the program"
    assert _pgrep("-f", binary) == [], "the program outlived scenc"
    result = saved(out)
    assert result.status == "interrupted" and measured(result) == []
    assert f"interrupted by {signal.Signals(signum).name}; 0 finished runs are saved" in stderr


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_start_up_stops_scenc_cleanly(tmp_path, signum):
    """Whenever the signal comes after scenc started its work (allocator look-up, header,
    the first runs), scenc stops within seconds, without a traceback, leaving no file or a
    valid one.

    A signal handler that raised while the scipy preload thread was importing
    once left the import lock taken, and scenc hung for good.
    """
    scenario = write_scenario(tmp_path)
    for i, delay in enumerate((0.0, 0.05, 0.15, 0.3, 0.6)):
        out = tmp_path / f"r{i}.json"
        # Enough runs that the last delay still falls inside them on a fast,
        # idle machine (50 runs once finished in 0.5 s, before the signal came).
        proc = start_scenc("run", scenario, "--allocators", "glibc,jemalloc", "--runs", 2000, "-o", out)
        # "built ..." comes once scenc's own code runs, with the scipy preload
        # thread importing meanwhile: the window where a signal once hung scenc.
        first = proc.stderr.readline()
        assert first.startswith("built "), first + proc.communicate()[1]
        time.sleep(delay)
        proc.send_signal(signum)
        try:
            _, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise AssertionError(f"scenc did not stop within 30 s of a signal {delay} s after its build")
        assert proc.returncode == 128 + signum, (delay, proc.returncode, stderr)
        assert "Traceback" not in stderr, stderr
        assert f"interrupted by {signal.Signals(signum).name}" in stderr
        if out.exists():
            assert saved(out).status == "interrupted"


def test_the_memory_limit_catches_a_program_already_over_it(tmp_path):
    """memlimit.apply sets the limit after the start; a program that got past it by then is named."""
    import sys
    from scenc.run import memlimit
    # A real process holding 256 MiB of private writable memory (VmData) before its limit is set.
    hog = subprocess.Popen([sys.executable, "-c", "import mmap, sys; "
                            "m = mmap.mmap(-1, 256 << 20, flags=mmap.MAP_PRIVATE); "
                            "print('ready', flush=True); sys.stdin.read()"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert hog.stdout.readline().strip() == "ready"
        assert memlimit.apply(hog.pid, 1 << 30) is None, "within its limit: nothing to report"
        assert _max_data_size(hog.pid) == str(1 << 30)
        over = memlimit.apply(hog.pid, 128 << 20)
        assert over is not None and over > 256 << 20
        assert _max_data_size(hog.pid) == str(128 << 20)
    finally:
        hog.kill()
        hog.wait()
    assert memlimit.apply(hog.pid, 1 << 30) is None, "a finished process has nothing to hold"
