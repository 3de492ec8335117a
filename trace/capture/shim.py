"""Following a shim to the program that finally runs: `env`, a `#!` shell script, a pyenv shim, which
exec the real program after running a few helper commands of their own.

The tracer already keeps what the launched process finally became in the main log (it moves an earlier
image's log aside, to OUT.<pid>, at each exec). The rule added here, as docs/capture.md ("Shims and
`#!` scripts") states it: when the launched process exec'ed, the logs of its earlier images and of every
process whose log was opened before its last program started are the shim's, and are left out; logs
opened later are the program's own children, kept. `split` applies it; `Followed` says what was done.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from ..tracerlog import HEADER, MAGIC

#: Interpreters that run other programs rather than being the program: a script of theirs that does not
#: exec leaves the real program in a child process.
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox"})

COMM_LENGTH = 15        # the kernel keeps this many characters of a process's name


@dataclass
class Followed:
    """The launched process exec'ed: what it was given as, what it ended as, what was left out."""
    shim: str                   # argv[0] as given
    script: Optional[str]       # its '#!' line when it is a script
    program: Optional[str]      # the kernel's name of the last program (None: the process was not seen end)
    images: int                 # earlier images of the launched process (one per exec)
    helpers: int                # the shim's other processes (an exec'ing one leaves a log per program)
    kept: list                  # the shim's logs when asked to keep them

    def sentence(self) -> str:
        shim = f"{self.shim} (a '{self.script}' script)" if self.script else self.shim
        to = self.program or "the program it exec'ed last"
        named = f", another file of that name" if self.program == os.path.basename(self.shim)[:COMM_LENGTH] else ""
        through = f" through {_count(self.images - 1, 'more program')}" if self.images > 1 else ""
        helpers = (f" and those of its {_count(self.helpers, 'helper process', 'helper processes')}"
                   if self.helpers else "")
        where = f" (kept in {_names(self.kept)})" if self.kept else " are left out"
        return (f"following the shim {shim}{through} to {to}{named}: the trace holds {to}'s calls only; the shim's own "
                f"calls{helpers}{where}")


def header(path: Path) -> Optional[tuple]:
    """(pid, CLOCK_MONOTONIC ns when the log was opened) from a tracer log's header; None if unreadable."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEADER.size)
    except OSError:
        return None
    if len(head) < HEADER.size or head[:8] != MAGIC:
        return None
    _magic, _version, _size, pid, _ppid, start_ns, _realtime = HEADER.unpack(head)
    return pid, start_ns


def split(main: Path, side_logs: Sequence[Path]) -> tuple:
    """(the shim's earlier images' logs, its helpers' logs, the program's children's logs).

    Nothing is the shim's unless the launched process exec'ed (a side log carries its pid)."""
    top = header(main)
    if top is None:
        return [], [], list(side_logs)
    pid, started = top
    heads = {p: header(p) for p in side_logs}
    images = [p for p, h in heads.items() if h is not None and h[0] == pid]
    if not images:
        return [], [], list(side_logs)
    helpers = [p for p, h in heads.items() if p not in images and h is not None and h[1] < started]
    children = [p for p in side_logs if p not in images and p not in helpers]
    return images, helpers, children


def processes(logs: Sequence[Path]) -> int:
    """How many processes wrote these logs."""
    return len({h[0] for h in map(header, logs) if h is not None})


def is_shell_script(script: Optional[list]) -> bool:
    """A '#!' line (as words) that runs a shell, directly or through env."""
    if not script:
        return False
    interp = script[1] if os.path.basename(script[0]) == "env" and len(script) > 1 else script[0]
    return os.path.basename(interp) in SHELLS


def kernel_name(path: str) -> str:
    """The name the kernel gives a process running the file `path` (a script's own name, not its shell's)."""
    return os.path.basename(path)[:COMM_LENGTH]


def _count(n: int, one: str, many: str = "") -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _names(paths: list) -> str:
    return ", ".join(p.name for p in paths[:4]) + (f" and {len(paths) - 4} more" if len(paths) > 4 else "")
