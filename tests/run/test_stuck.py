"""A scenario or program that stops making progress is ended by its timeout, or sooner when it uses almost no
CPU time, and nothing it started is left.

Real scenc processes, a real compiled scenario that deadlocks (a channel receive before a barrier the sender
waits at: the checker cannot see it), a real shell that forks a sleeping child; what is left is read from /proc.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCENC = [sys.executable, "-c", "import sys; from scenc.cli import main; sys.exit(main())"]
# The children's unusual sleep durations name them in /proc, apart from those of another run of these tests on the
# same machine (two suites at once saw each other's `sleep 987605` and failed)
_MARK_BASE = 10_000_000 + os.getpid() % 100_000 * 10


def _sleep(k: int) -> str:
    return f"sleep {_MARK_BASE + k}"


STUCK = '''scenario "stuck"
channel q capacity 1

thread a {
    barrier
    p = malloc(16)
    send(q, p)
}
thread b {
    free(recv(q))
    barrier
}
'''


def _processes_running(needle: str, first: bool = False) -> list:
    """Pids whose command line contains needle, or with first starts with it (scenc's own command line holds
    the program's too); zombies have none, so they do not count."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if cmdline.startswith(needle) if first else needle in cmdline:
            found.append(int(entry.name))
    return found


def _own_cache(tmp_path: Path) -> dict:
    """An environment whose build cache is in tmp_path: the scenario program runs from there, so the /proc
    search finds this test's program only, never another session's."""
    env = {k: v for k, v in os.environ.items() if k != "SCENC_CACHE"}   # CI points SCENC_CACHE at its own
    return dict(env, XDG_CACHE_HOME=str(tmp_path / "cache"))


def test_a_stuck_scenario_is_killed_by_exec_timeout(tmp_path):
    scenario = tmp_path / "stuck.scn"
    scenario.write_text(STUCK)
    t0 = time.monotonic()
    done = subprocess.run([*SCENC, "exec", str(scenario), "--timeout", "2s"], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=_own_cache(tmp_path))
    assert done.returncode == 3, done.stderr
    assert "did not finish within 2 s; killed (process group)" in done.stderr
    assert time.monotonic() - t0 < 60
    assert not _processes_running(f"{tmp_path}/cache/scenc/builds/"), "the program outlived exec --timeout"


def test_sigterm_to_scenc_exec_kills_the_scenario_program(tmp_path):
    """`timeout 40 scenc exec` sends SIGTERM to scenc only: the program (a session of its own) must go too."""
    scenario = tmp_path / "stuck.scn"
    scenario.write_text(STUCK)
    needle = f"{tmp_path}/cache/scenc/builds/"
    proc = subprocess.Popen([*SCENC, "exec", str(scenario)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path, env=_own_cache(tmp_path))
    deadline = time.monotonic() + 60
    while not _processes_running(needle) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_running(needle), "the scenario program never started"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "killed (process group)" in err
    time.sleep(0.2)
    assert not _processes_running(needle), "the scenario program outlived a SIGTERM to scenc exec"


def test_a_program_with_a_sleeping_child_is_killed_whole_by_run_timeout(tmp_path):
    marker = _sleep(1)      # an unusual duration names the child in /proc
    done = subprocess.run([*SCENC, "run", "--allocators", "glibc", "--runs", "1", "--warmup", "1",
                           "--timeout", "2s", "-o", str(tmp_path / "r.json"), "--",
                           "sh", "-c", f"{marker} & {_sleep(2)}"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert "timed out" in done.stdout + done.stderr, done.stdout + done.stderr
    time.sleep(0.2)
    assert not _processes_running(marker) and not _processes_running(_sleep(2))


def test_a_child_left_running_by_a_finished_program_is_killed(tmp_path):
    marker = _sleep(3)
    done = subprocess.run([*SCENC, "run", "--allocators", "glibc", "--runs", "1", "--warmup", "1",
                           "--timeout", "20s", "-o", str(tmp_path / "r.json"), "--",
                           "sh", "-c", f"{marker} & exit 0"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    time.sleep(0.2)
    assert not _processes_running(marker), "a child of the program outlived its run"


def test_sighup_to_scenc_run_kills_the_program_and_saves_the_session(tmp_path):
    """A closed terminal sends SIGHUP: the program (a session of its own) goes with scenc, as on Ctrl-C."""
    marker = _sleep(4)
    proc = subprocess.Popen([*SCENC, "run", "--allocators", "glibc", "--runs", "1", "-o", str(tmp_path / "r.json"),
                             "--", "sh", "-c", marker], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path)
    deadline = time.monotonic() + 60
    while not _processes_running(marker, first=True) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_running(marker, first=True), "the program never started"
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGHUP, err
    assert "interrupted by SIGHUP" in err
    time.sleep(0.2)
    assert not _processes_running(marker), "the program outlived a SIGHUP to scenc run"


@pytest.mark.slow   # about 12 s: the idle limit is 10 s
def test_a_stuck_scenario_is_ended_by_the_idle_limit_not_the_first_warmups_timeout(tmp_path):
    """Without --timeout the first warm-up may take 120 s; a scenario whose threads wait on one another uses almost
    no CPU time (its waits poll with a growing back-off), and is ended after about 10 s of that."""
    scenario = tmp_path / "stuck.scn"
    scenario.write_text(STUCK)
    t0 = time.monotonic()
    done = subprocess.run([*SCENC, "run", str(scenario), "--allocators", "glibc", "--runs", "2",
                           "-o", str(tmp_path / "r.json")], capture_output=True, text=True, timeout=200,
                          cwd=tmp_path, env=_own_cache(tmp_path))
    took = time.monotonic() - t0
    assert "warm-up run of glibc timed out: almost no CPU time used for 10 s" in done.stderr, done.stderr
    assert "no more runs of glibc" in done.stderr
    assert took < 60, f"{took:.0f} s: the idle limit did not end the run"
    assert not _processes_running(f"{tmp_path}/cache/scenc/builds/"), "the program outlived its run"


def test_a_program_that_waits_forever_is_ended_by_the_idle_limit(tmp_path):
    """A real program's run through the session's launcher, watched with a 1 s idle limit: a shell waiting on a
    sleeping child is stuck, and its group goes."""
    from scenc.allocators import registry
    from scenc.run.program.runner import LauncherRunner, make_program_record
    from scenc.run.program.target import ProgramTarget
    from scenc.run.plan import COMMAND, RunConfig
    glibc = registry.resolve("glibc")[0]
    waits = ProgramTarget(("sh", "-c", f"{_sleep(5)}; true"))
    runner = LauncherRunner()
    try:
        t0 = time.monotonic()
        stuck = runner.run_program(waits, glibc, dict(os.environ), 60.0, idle_s=1.0)
        took = time.monotonic() - t0
    finally:
        runner.close()
    assert stuck.timed_out and stuck.stuck == 1.0 and took < 30
    record = make_program_record(RunConfig.make("glibc", {}, target=COMMAND), glibc, 1, stuck, waits, 60.0)
    assert record.status == "timeout" and "almost no CPU time used for 1 s" in record.problem
    time.sleep(0.2)
    assert not _processes_running(_sleep(5))


def test_the_idle_watch_reads_the_whole_process_group():
    """Real process groups read from /proc; only the clock is faked (5 s a reading, so that a 10 s idle limit is
    reached in seconds of real time). A shell waiting on a child that burns CPU is not stuck (its leader is quiet,
    its child is not: watching the leader alone would say stuck at the fourth reading); a shell waiting on a
    sleeping child is, at the fourth (the leader's first reading, the group's, then 10 s)."""
    from scenc.system.process import IdleWatch
    burn = f"{sys.executable} -c 'import time\nend = time.process_time() + 30\nwhile time.process_time() < end: pass'"
    now = [0.0]
    groups = {name: subprocess.Popen(["sh", "-c", f"{child}; true"], start_new_session=True)
              for name, child in (("works", burn), ("waits", _sleep(6)))}
    try:
        watches = {name: IdleWatch(proc.pid, 10.0, lambda: now[0]) for name, proc in groups.items()}
        said = {name: [] for name in groups}
        for _ in range(4):
            time.sleep(0.6)                 # the burner uses up to 0.6 s of CPU (60 ticks) between readings
            now[0] += 5.0
            for name, watch in watches.items():
                said[name].append(watch.stuck())
    finally:
        for proc in groups.values():
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert said["works"] == [False] * 4, said
    assert said["waits"] == [False, False, False, True], said


def test_only_a_scenarios_runs_are_watched_for_idleness():
    """The decision alone (harness.py): a real program may wait on purpose from its first run on, so it is never
    ended as stuck; a scenario's runs are, unless --timeout is given."""
    from types import SimpleNamespace
    from scenc.harness import Session
    from scenc.run.plan import COMMAND, IDLE_LIMIT_S, RunConfig
    session = SimpleNamespace(plan=SimpleNamespace(timeout_s=None))
    assert Session._idle_limit(session, RunConfig.make("glibc", {})) == IDLE_LIMIT_S
    assert Session._idle_limit(session, RunConfig.make("glibc", {}, target=COMMAND)) is None
    session.plan.timeout_s = 30.0
    assert Session._idle_limit(session, RunConfig.make("glibc", {})) is None
