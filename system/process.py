"""Child processes as scenc sees them: finding a program, running one in a session of its own, how one
ended in words, and killing one with all it started (on a timeout, and after it ended: what it forked and
left running goes too). SIGTERM and SIGHUP can be turned into an exception (signals_raise) so that scenc
kills its child's group before it exits; a run can be watched for progress (run_watched, IdleWatch: no CPU
time), and runs made in other threads ended at once by the thread that stops (RunningGroups).

Stdlib only: the runner, `scenc exec`, `scenc run`, the trace capture and convert --model all use it.
"""

import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from contextlib import contextmanager
from typing import Callable, Optional, Sequence


class ProgramNotFound(RuntimeError):
    """A command's argv[0] is not on PATH, or is no file."""


def _known_signal(number: int) -> Optional[str]:
    try:
        return signal.Signals(number).name
    except ValueError:
        return None


def signal_name(number: int) -> str:
    """"SIGSEGV", or "signal 99" for a number this system has no name for."""
    return _known_signal(number) or f"signal {number}"


def describe_status(code: int) -> str:
    """A Popen return code in words: "signal SIGSEGV" (negative: killed) or "exit status 3"."""
    if code < 0:
        return f"signal {_known_signal(-code) or -code}"
    return f"exit status {code}"


def kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` leads (a child started with start_new_session=True)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived (see `signals_raise`); a BaseException, as KeyboardInterrupt is, so that
    the code waiting for a child kills it on the way out."""

    def __init__(self, signum: int):
        super().__init__(signal_name(signum))
        self.signum = signum


@contextmanager
def signals_raise():
    """SIGTERM and SIGHUP raise Terminated inside the block. A child started in a session of its own is
    out of reach of a signal sent to scenc's group (`timeout 40 scenc exec`, a closed terminal): Python's
    default for SIGTERM ends scenc at once and leaves the child running; an exception lets the waiting code
    kill the child's group first."""
    def raise_terminated(signum, _frame):
        raise Terminated(signum)

    previous = {s: signal.signal(s, raise_terminated) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def locate_program(argv: Sequence[str], cwd) -> tuple:
    """(path of argv[0] as given or found on PATH, the file it leads to); ProgramNotFound if there is none."""
    prog = argv[0]
    if os.sep in prog:
        path = os.path.join(cwd or os.getcwd(), prog)
    else:
        path = shutil.which(prog)
        if path is None:
            raise ProgramNotFound(f"{prog}: command not found (PATH={os.environ.get('PATH', '')})")
    if not os.path.exists(path):
        raise ProgramNotFound(f"{prog}: no such file")
    return path, os.path.realpath(path)


def wait_and_clear_group(proc: subprocess.Popen, timeout: Optional[float],
                         on_exit: Optional[Callable[[int], None]] = None) -> bool:
    """Wait for `proc` (started with start_new_session=True) up to `timeout` seconds (None: for ever), then
    SIGKILL its process group and reap it; True when it timed out. The group is killed whether it timed
    out or not, before the leader is reaped (its zombie keeps the group's id from being reused): a child the
    program forked and left running (`sleep 1000 &`) would otherwise outlive the run. on_exit(pid) is called
    once it has ended and before it is reaped, while /proc/PID still says what it last was (process_name).
    Any exception while waiting (Ctrl-C, `Terminated`) kills the group too, then propagates."""
    try:
        ended = _ended_unreaped(proc.pid, timeout)
        if ended and on_exit is not None:
            on_exit(proc.pid)
    except BaseException:
        kill_group(proc.pid)
        proc.wait()
        raise
    kill_group(proc.pid)
    proc.wait()
    return not ended


def run_in_own_session(cmd: Sequence[str], timeout: Optional[float], *,
                       on_exit: Optional[Callable[[int], None]] = None, **popen) -> tuple:
    """(exit status, or None after a timeout; seconds it ran; the last 8 KB of its stderr).

    The command gets a session of its own, so a timeout kills it with every
    process it started, and so does its end (wait_and_clear_group, which also says what on_exit is).
    """
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stderr=err, start_new_session=True, **popen)
        timed_out = wait_and_clear_group(proc, timeout, on_exit)
        status = None if timed_out else proc.returncode
        seconds = time.perf_counter() - start
        err.seek(0, os.SEEK_END)
        err.seek(max(0, err.tell() - 8192))
        return status, seconds, err.read().decode("utf-8", "replace")


def cpu_ticks(pid: int) -> Optional[int]:
    """User plus system clock ticks of process `pid`, all its threads together; None once it is gone."""
    fields = _stat_fields(pid)
    return None if fields is None else int(fields[11]) + int(fields[12])   # utime, stime: fields 14, 15 of proc(5)


def _stat_fields(pid) -> Optional[list]:
    """/proc/PID/stat's fields after the command's name (state first), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def group_cpu_ticks(pgid: int) -> int:
    """Clock ticks of CPU time of process group `pgid`: every process in it, all its threads, with the
    children each has reaped (so a child that ends and is reaped moves its time within the group)."""
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = _stat_fields(name)
        if fields is not None and len(fields) > 14 and int(fields[2]) == pgid:
            total += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
    return total


class IdleWatch:
    """Has a process group used almost no CPU time (under IDLE_SHARE of one CPU) for `idle_s` seconds?
    `stuck()` is asked now and then (about once a second) while the group's leader runs.

    A program whose threads all wait on one another (a deadlocked scenario), or that waits for input
    that never comes, uses next to none: a wait that polls with a growing back-off still takes a clock
    tick now and then, so "none at all" would never be reached. A program at work uses some, in one
    process or another of its group. The leader's own figure (its threads and reaped children) is read
    each time; all of /proc is read for the rest of the group only while the leader is quiet (a shell
    waiting for the child that does the work)."""

    IDLE_SHARE = 0.01
    _TICKS_PER_S = os.sysconf("SC_CLK_TCK")

    def __init__(self, pgid: int, idle_s: float, clock: Callable[[], float] = time.monotonic):
        self.pgid, self.idle_s, self.clock = pgid, idle_s, clock
        # Since when the group has been quiet: (that time, the leader's ticks then, the group's then or None)
        self._quiet: Optional[tuple] = None

    def stuck(self) -> bool:
        now = self.clock()
        fields = _stat_fields(self.pgid)
        leader = None if fields is None else sum(int(v) for v in fields[11:15])
        if self._quiet is None or leader is None:
            self._quiet = (now, leader, None)
            return False
        since, leader_then, group_then = self._quiet
        allowed = self.IDLE_SHARE * self._TICKS_PER_S * max(now - since, self.idle_s)
        if leader - leader_then >= allowed:
            self._quiet = (now, leader, None)
            return False
        group = group_cpu_ticks(self.pgid)
        if group_then is None or group - group_then >= allowed:
            # From the first reading of the group too: what its other processes used before is unknown.
            self._quiet = (now, leader, group)
            return False
        return now - since >= self.idle_s


class RunningGroups:
    """The process groups of runs made in worker threads (run_watched's `groups`), so that the thread that
    stops (Ctrl-C, Terminated) ends them at once. A run in a session of its own is out of reach of the
    terminal's SIGINT; without this, the pool the workers belong to waits for their runs to end (seconds).
    After stop(), a run that starts is killed as it starts."""

    def __init__(self):
        self._lock = threading.Lock()
        self._pids: set = set()
        self.stopped = False

    def started(self, pid: int) -> None:
        with self._lock:
            if self.stopped:
                kill_group(pid)
            else:
                self._pids.add(pid)

    def ended(self, pid: int) -> None:
        """Called before the run's leader is reaped: its zombie keeps the group's id from being reused until then,
        so stop() never kills another program's group."""
        with self._lock:
            self._pids.discard(pid)

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            for pid in self._pids:
                kill_group(pid)


def run_watched(cmd: Sequence[str], timeout: float, idle_s: float, groups: Optional[RunningGroups] = None,
                **popen) -> tuple:
    """Run `cmd` in a session of its own: (exit status or None, stdout, stderr, why it was killed or None).

    why is "timeout" after `timeout` seconds, or "stuck" when the process used no CPU time for `idle_s`
    seconds: a program that never sleeps on purpose (a scenario program) whose threads all wait on futexes
    has stopped making progress (its channels and barriers wait on one another), and waiting for the timeout
    would only cost time. Its group is killed either way (wait_and_clear_group). groups: where a run made in a
    worker thread is known while it runs, for the thread that stops to end it (RunningGroups)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, start_new_session=True, **popen)
        why = None
        try:
            if groups is not None:
                groups.started(proc.pid)
            start = last_change = time.monotonic()
            ticks, look = None, 0.0
            # _ended_unreaped (waitid WNOWAIT) sees the end without reaping, the moment it comes (a model's run
            # of 30 ms is not rounded up to the 0.25 s between two looks at its CPU time): the group is killed
            # before its id can be reused
            while not _ended_unreaped(proc.pid, look):
                look = 0.25
                now = time.monotonic()
                seen = cpu_ticks(proc.pid)
                if seen != ticks:
                    ticks, last_change = seen, now
                if now - start >= timeout:
                    why = "timeout"
                elif now - last_change >= idle_s:
                    why = "stuck"
                if why:
                    break
        finally:
            kill_group(proc.pid)
            if groups is not None:
                groups.ended(proc.pid)
            proc.wait()
        out.seek(0)
        err.seek(0)
        return (None if why else proc.returncode), out.read().decode("utf-8", "replace"), \
            err.read().decode("utf-8", "replace"), why


def _ended_unreaped(pid: int, timeout: Optional[float]) -> bool:
    """Wait until child `pid` has ended, without reaping it; False when `timeout` seconds passed first."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):        # Python or Linux without pidfds (before 3.9, 5.3)
        deadline = None if timeout is None else time.monotonic() + timeout
        while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is None:
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(None if timeout is None else timeout * 1000))
    finally:
        os.close(fd)


def process_name(pid: int) -> Optional[str]:
    """The kernel's name of process `pid` (its comm: the file name of the program it last exec'ed, at most
    15 characters, or what it renamed itself), also while it is an unreaped zombie; None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    return stat[stat.find("(") + 1:stat.rfind(")")] or None
