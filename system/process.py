"""Child processes as scenc sees them: how one ended, in words, and killing one with all it started.

Stdlib only: the runner, `scenc exec`, `scenc run` and the trace capture all use it.
"""

import os
import signal
from typing import Optional


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
