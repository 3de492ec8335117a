"""Child processes as scenc sees them: finding a program, running one in a session of its own, how one
ended in words, and killing one with all it started.

Stdlib only: the runner, `scenc exec`, `scenc run` and the trace capture all use it.
"""

import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
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


def run_in_own_session(cmd: Sequence[str], timeout: Optional[float], *,
                       on_exit: Optional[Callable[[int], None]] = None, **popen) -> tuple:
    """(exit status, or None after a timeout; seconds it ran; the last 8 KB of its stderr).

    The command gets a session of its own, so a timeout kills it with every
    process it started. on_exit(pid) is called once the command has ended and
    before it is reaped, while /proc/PID still says what it last was
    (process_name).
    """
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stderr=err, start_new_session=True, **popen)
        try:
            if on_exit is not None:
                if not _ended_unreaped(proc.pid, timeout):
                    raise subprocess.TimeoutExpired(cmd, timeout)
                on_exit(proc.pid)
            status = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc.pid)
            proc.wait()
            status = None
        seconds = time.perf_counter() - start
        err.seek(0, os.SEEK_END)
        err.seek(max(0, err.tell() - 8192))
        return status, seconds, err.read().decode("utf-8", "replace")


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
