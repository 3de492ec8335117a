"""Thread starts and exits read from an ltrace log (parse's ``extra_events``; docs/capture.md, "scenc convert:
exact replay", says where a thread starts and ends), and the process's main thread, read from the log's end."""
from __future__ import annotations

import re
from typing import Optional

from ..events import AllocEvent
from .calls import _ptr


#: Calls that create a thread or process: their return value is its id (clone, clone3 = syscall 435, fork), or
#: (pthread_create) the next new thread is the caller's.
_CREATES = frozenset({"SYS_clone", "SYS_clone3", "SYS_56", "SYS_435", "SYS_fork", "SYS_vfork", "fork", "vfork",
                      "pthread_create"})
#: A thread's own exit (-S): it ends there; its '+++ exited' line may come after a later creation (ltrace hears
#: of the exit late), which would count one thread too many alive.
_EXITS = frozenset({"SYS_exit", "SYS_60"})
_LIFE_CALLS = _CREATES | _EXITS


class _ThreadLives:
    """Thread starts and exits as events (see the module doc), collected in ``out`` for the parser to hand out."""

    def __init__(self, leader: Optional[int] = None):
        """leader: the process's main thread if known (parse_file reads it from the log's end): alive from the
        start, even when its first line comes after other threads' (a main thread that only creates threads
        makes no traced call before them)."""
        self.out: list = []
        self.alive: dict = {} if leader is None else {leader: True}   # tid -> True, in order of appearance
        self.announced: set = set()    # threads whose start a creation's return value gave (exited ones too)
        self.creating: list = []       # callers of pthread_create (or of a clone still running), oldest first
        self.last = None               # the thread of the last line

    def _start(self, tid: int, creator, line: int, t) -> None:
        self.out.append(AllocEvent(line, tid, t, "thread_start", creator, 1, None, None, None, False, line, None))

    def appeared(self, tid: int, line: int, t) -> None:
        """The first line of thread ``tid`` (not its exit line)."""
        alive = self.alive
        if tid not in alive and alive:       # announced, the leader and the first thread: no start
            creator = None
            while self.creating and creator is None:
                c = self.creating.pop(0)
                creator = c if c in alive and c != tid else None
            if creator is None:
                creator = self.last if self.last in alive else next(reversed(alive))
            self._start(tid, creator, line, t)
        alive[tid] = True
        self.last = tid

    def call(self, tid: int, name: str, ret, unf, line: int, t, out: list, resumed: bool = False) -> None:
        """A call that creates a thread, started (``unf``), resumed, or whole; or a thread's own exit."""
        if name in _EXITS:
            self.exited(tid, line, t, out)
            return
        if unf:
            self.creating.append(tid)
            return
        child = _ptr(ret) if name != "pthread_create" else None
        if child is None or not 0 < child < 1 << 31:
            if name == "pthread_create" and not resumed and ret == "0":
                self.creating.append(tid)    # printed whole: its thread has not printed a line yet
            return
        if resumed and tid in self.creating:
            self.creating.remove(tid)
        if child not in self.alive and child not in self.announced:
            self.announced.add(child)
            self.alive[child] = True
            out.append(AllocEvent(line, child, t, "thread_start", tid, 1, None, None, None, False, line, None))

    def exited(self, tid: int, line: int, t, out: list) -> None:
        if self.alive.pop(tid, None):
            out.append(AllocEvent(line, tid, t, "thread_exit", None, 1, None, None, None, False, line, None))
            self.creating = [c for c in self.creating if c != tid]

    def special_line(self, tid: int, body: str, line: int, t, seen: bool) -> None:
        if body.startswith("+++ "):
            self.exited(tid, line, t, self.out)
        elif tid not in self.alive and seen:
            self.appeared(tid, line, t)      # a thread first seen in a signal line


_EXIT_LINE = re.compile(rb"^(?:(\d+) |\[pid (\d+)\] )[^\n]*?\+\+\+ (?:exited|killed)", re.M)


def _leader(path, tail: int = 1 << 16):
    """The process's main thread: the tid of the log's last '+++ exited/killed' line (the kernel reports a
    thread group leader's end only once its other threads are gone), read from the file's end; None when the
    log has no such line there (cut short, or no thread ids)."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - tail))
        data = f.read()
    last = None
    for last in _EXIT_LINE.finditer(data):
        pass
    return None if last is None else int(last.group(1) or last.group(2))
