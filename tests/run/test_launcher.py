"""The launcher that stays up for a session (run/program/runner.py's Launcher, runtime/tools/spawn.c --serve).

One launcher serves every run of a session: each run's figures must still be the program's own (its
wait4, not the launcher's nor the run before's), a program that crashes or is killed must leave it
serving, a launcher that dies must cost one run and no more, and Ctrl-C or a timeout must kill the
program's process group and nothing else."""

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from scenc.allocators import registry
from scenc.run.program.runner import LauncherRunner, make_program_record
from scenc.run.program.target import ProgramTarget, ReportedMetric

pytestmark = pytest.mark.slow  # builds and runs programs

# burn MS: MS ms of CPU; sleep MS; hold MB: touch MB MiB and keep them; child MS: a child burns MS ms, waited
# for; crash: SIGSEGV; exit N
WORK_C = r"""
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
/* the process's CPU time: a burn of MS ms uses MS ms of CPU however busy the machine is */
static double now(void) { struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void burn(double ms) { volatile unsigned long x = 0; double end = now() + ms / 1000; while (now() < end) x++; }
int main(int argc, char **argv) {
    const char *what = argv[1];
    long n = argc > 2 ? atol(argv[2]) : 0;
    if (!strcmp(what, "burn")) burn((double)n);
    else if (!strcmp(what, "sleep")) usleep((useconds_t)(n * 1000));
    else if (!strcmp(what, "hold")) { char *p = malloc((size_t)n << 20); memset(p, 1, (size_t)n << 20); printf("%d\n", p[n]); }
    else if (!strcmp(what, "child")) { pid_t pid = fork(); if (!pid) { burn((double)n); _exit(0); } waitpid(pid, NULL, 0); }
    else if (!strcmp(what, "crash")) raise(SIGSEGV);
    else if (!strcmp(what, "exit")) return (int)n;
    return 0;
}
"""


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("launcher")
    (folder / "work.c").write_text(WORK_C)
    subprocess.run(["gcc", "-O1", "-Wall", "-o", str(folder / "work"), str(folder / "work.c")], check=True)
    return str(folder / "work")


@pytest.fixture
def runner():
    r = LauncherRunner()
    yield r
    r.close()


def glibc():
    return registry.resolve("glibc")[0]


def run(runner, work, *args, timeout=30.0):
    return runner.run_program(ProgramTarget((work, *map(str, args))), glibc(), dict(os.environ), timeout)


def figures(outcome):
    assert outcome.launched is not None, outcome.problem
    return outcome.launched


def test_each_run_reports_its_own_wait4_figures_from_one_launcher(runner, work):
    burn = figures(run(runner, work, "burn", 120))
    launcher = runner._launcher.proc.pid
    sleep = figures(run(runner, work, "sleep", 150))
    hold = figures(run(runner, work, "hold", 64))
    quick = figures(run(runner, work, "exit", 0))
    child = figures(run(runner, work, "child", 120))
    assert runner._launcher.proc.pid == launcher          # one launcher served them all
    # Wall time from fork to wait4 of this run's program only.
    assert burn["wall_ns"] >= 120e6 and sleep["wall_ns"] >= 150e6 and quick["wall_ns"] < 100e6
    # CPU: the burner's, not the sleeper's; the child a program waited for is counted with it.
    assert burn["user_us"] + burn["sys_us"] >= 80_000
    assert sleep["user_us"] + sleep["sys_us"] < 50_000
    assert child["user_us"] + child["sys_us"] >= 80_000
    # Peak RSS: the holder's 64 MiB, and the next program's own small peak (neither the launcher's nor the
    # run before's: the launcher stays small).
    assert hold["maxrss_kib"] >= 64 * 1024 and quick["maxrss_kib"] < 16 * 1024
    assert hold["minflt"] >= 64 * 256 and quick["minflt"] < 2000


def test_a_program_that_crashes_mid_session_leaves_the_launcher_serving(runner, work):
    assert figures(run(runner, work, "exit", 0))["status"] == 0
    launcher = runner._launcher.proc.pid
    crashed = run(runner, work, "crash")
    failed = run(runner, work, "exit", 3)
    missing = run(runner, work[:-1] + "no-such-program")
    after = run(runner, work, "burn", 20)
    assert runner._launcher.proc.pid == launcher and runner._launcher.proc.poll() is None
    assert os.WIFSIGNALED(figures(crashed)["status"]) and os.WTERMSIG(crashed.launched["status"]) == signal.SIGSEGV
    assert os.WEXITSTATUS(figures(failed)["status"]) == 3
    assert figures(missing)["exec_errno"] == 2                           # ENOENT, said by the launcher
    assert figures(after)["status"] == 0 and after.launched["wall_ns"] >= 20e6
    record = make_program_record(_config(), glibc(), 1, crashed, ProgramTarget((work, "crash")), 30.0)
    assert record.status == "crashed" and record.signal == "SIGSEGV"


def _config():
    from scenc.run.plan import COMMAND, RunConfig
    return RunConfig.make("glibc", {}, target=COMMAND)


def test_a_launcher_that_dies_costs_one_run_and_the_next_run_starts_another(runner, work):
    figures(run(runner, work, "exit", 0))
    first = runner._launcher.proc.pid

    def kill_the_launcher_once_the_program_runs():     # not after a fixed delay: a loaded machine may be late
        deadline = time.monotonic() + 30
        while runner._pid is None and time.monotonic() < deadline:
            time.sleep(0.005)
        os.kill(first, signal.SIGKILL)
    threading.Thread(target=kill_the_launcher_once_the_program_runs).start()
    lost = run(runner, work, "sleep", 2000)
    assert lost.launched is None and "launcher" in lost.problem
    again = run(runner, work, "burn", 10)
    assert figures(again)["status"] == 0 and runner._launcher.proc.pid != first


def test_a_timeout_and_ctrl_c_kill_the_program_and_its_group_not_the_launcher(runner, work, tmp_path):
    figures(run(runner, work, "exit", 0))
    launcher = runner._launcher.proc.pid
    started = time.monotonic()
    late = run(runner, work, "sleep", 30_000, timeout=0.5)
    assert late.timed_out and time.monotonic() - started < 10
    script = tmp_path / "group.sh"
    marker = tmp_path / "child-alive"
    script.write_text(f"#!/bin/sh\n(sleep 5; touch {marker}) &\nsleep 30\n")
    script.chmod(0o755)
    threading.Timer(0.5, runner.interrupt, (signal.SIGINT, None)).start()
    started = time.monotonic()
    stopped = runner.run_program(ProgramTarget((str(script),)), glibc(), dict(os.environ), 60)
    assert runner.interrupted and time.monotonic() - started < 10
    assert stopped.launched is not None and os.WIFSIGNALED(stopped.launched["status"])
    assert runner._launcher.proc.pid == launcher and runner._launcher.proc.poll() is None
    time.sleep(5.5)
    assert not marker.exists()                     # the script's child went with its process group


def test_the_launcher_ends_with_its_session(work):
    r = LauncherRunner()
    figures(run(r, work, "exit", 0))
    proc = r._launcher.proc
    r.close()
    assert proc.poll() is not None


def test_a_swept_program_runs_with_each_runs_own_arguments(runner, work):
    """The request is made once per program, allocator and environment, by content: the targets of a sweep
    (one made per run, with its {n} filled) each get their own arguments, whatever ids they had."""
    template = ProgramTarget((work, "exit", "{n}"))
    codes = []
    for n in (3, 5, 3, 7, 5):
        outcome = runner.run_program(template.for_params({"n": n}), glibc(), dict(os.environ), 30.0)
        codes.append(os.WEXITSTATUS(figures(outcome)["status"]))
    assert codes == [3, 5, 3, 7, 5]


def test_each_run_gets_its_own_proof_lines_from_the_launcher(runner, work, tmp_path):
    """The proof file is appended to across a session's runs: each run's reply holds only the lines of its own
    processes, and a file grown past its limit is emptied (here filled beforehand, as a long session would)."""
    three = runner.run_program(ProgramTarget(("sh", "-c", f"{work} exit 0; {work} exit 0; true")), glibc(),
                               dict(os.environ), 30.0)                   # the shell and its two children
    one = run(runner, work, "exit", 0)
    with open(runner._proof, "ab") as f:
        f.write(b"1\t/not/this/run.so\t/not/this/run.so\n" * 40_000)     # 1.4 MB of someone else's lines
    after = run(runner, work, "exit", 0)
    pids = [{pid for pid, _, _ in o.proof.lines} for o in (three, one, after)]
    assert [len(p) for p in pids] == [3, 1, 1], pids
    assert not pids[0] & pids[1] and not pids[1] & pids[2]
    assert after.proof.objects() == one.proof.objects() and "/not/this/run.so" not in after.proof.objects()
    assert os.path.getsize(runner._proof) < 1_000_000


def test_a_process_under_another_allocator_is_caught_after_proven_runs(runner, work):
    """The proof's checks are worked out once per session and object, and every process of every run is still
    checked: a run in which one child process gets its malloc from jemalloc is wrong-allocator under glibc, after
    runs that were proven and before one that is proven again."""
    jemalloc = registry.resolve("jemalloc")[0].library
    if jemalloc is None:
        pytest.skip("jemalloc is not installed")
    plain = ProgramTarget(("sh", "-c", f"{work} exit 0; true"))
    mixed = ProgramTarget(("sh", "-c", f'LD_PRELOAD="{jemalloc} $LD_PRELOAD" {work} exit 0; true'))
    records = []
    for target in (plain, plain, mixed, plain, mixed):
        outcome = runner.run_program(target, glibc(), dict(os.environ), 30.0)
        records.append(make_program_record(_config(), glibc(), 1, outcome, target, 30.0))
    assert [r.status for r in records] == ["ok", "ok", "wrong-allocator", "ok", "wrong-allocator"]
    assert all(r.proof["processes"] == 2 for r in records)
    for wrong in (records[2], records[4]):
        assert wrong.problem.startswith("process ") and "jemalloc" in wrong.problem


def test_each_run_gets_its_own_output_from_the_files_the_launcher_appends_to(runner):
    """The program's stdout and stderr files are appended to across runs too (emptied past their limit): each run's
    tails and --metric output are its own."""
    def said(script):
        return runner.run_program(ProgramTarget(("sh", "-c", script), metric=ReportedMetric.parse(r"took (\d+)")),
                                  glibc(), dict(os.environ), 30.0)
    first = said("echo took 1; echo first >&2")
    second = said("echo took 2; echo second >&2")
    big = said("head -c 1100000 /dev/zero | tr '\\0' x; echo; echo took 3")
    third = said("echo took 4")
    assert (first.stdout, first.stderr, second.stdout, second.stderr) == ("took 1\n", "first\n", "took 2\n", "second\n")
    assert [o.output.split()[:2] for o in (first, second, third)] == [["took", "1"], ["took", "2"], ["took", "4"]]
    assert big.stdout.endswith("xxx\ntook 3\n") and len(big.stdout) == 2000 and third.stderr == ""
    assert os.path.getsize(f"/proc/self/fd/{runner._out.fileno()}") < 1000
