"""Calls started and not yet finished: ltrace prints a call another thread interrupts as
``<unfinished ...>`` and completes it later with ``<... NAME resumed>``; an allocator call made from inside
another (realloc(NULL, n) -> malloc, operator new -> malloc ...) is printed inside the outer one's
unfinished call. A pending call is a list indexed by the P_ constants."""
from __future__ import annotations

from ..events import ALLOC_KINDS, FREE_KINDS, REALLOC_KINDS
from .report import ParseReport


# Pending-call entry (a list, indexed by these constants).
P_NAME, P_KIND, P_START, P_TIME, P_SIZE, P_NMEMB, P_ALIGN, P_OLD, P_FLAGS, P_PARENT, P_INNER = range(11)
F_IGNORED, F_NESTED, F_EMITTED, F_NORETURN = 1, 2, 4, 8
_MAX_PENDING_PER_THREAD = 64


def _matches_outer(outer, kind: str, size, nmemb, align, old) -> bool:
    """Is an allocator call (kind, size...) plausibly made from inside the pending call ``outer``?"""
    okind = outer[P_KIND]
    if kind in FREE_KINDS:
        # delete -> free, realloc(p, 0) -> free(p), reallocarray -> realloc ... same pointer
        return (okind in FREE_KINDS or okind in REALLOC_KINDS) and old is not None and old == outer[P_OLD]
    osize = outer[P_SIZE]
    if osize is None or size is None:
        return False
    obytes = osize * outer[P_NMEMB]
    nbytes = size * nmemb
    if kind in REALLOC_KINDS:  # reallocarray -> realloc
        return okind in REALLOC_KINDS and old == outer[P_OLD] and nbytes == obytes
    if okind in REALLOC_KINDS:  # realloc(NULL, n) -> malloc(n)
        return nbytes == obytes
    if okind in ALLOC_KINDS:  # new -> malloc, new[] -> new, posix_memalign -> malloc, calloc -> malloc
        return obytes <= nbytes <= obytes + (outer[P_ALIGN] or 0)
    return False


class _Pending:
    """The allocator calls each thread has started and not finished (``<unfinished ...>``), innermost last:
    what a ``<... NAME resumed>`` line completes, and what a nested call is made from inside. The parser's
    main loop reads ``stacks`` directly for the common cases."""

    def __init__(self, report: ParseReport):
        self.report = report
        self.stacks: dict = {}         # tid -> list of pending entries

    def outer_call(self, st: list, kind: str, size, nmemb, align, old):
        """The pending call of this thread that an allocator call is made from inside, or None."""
        for e in reversed(st):
            if not e[P_FLAGS] & (F_IGNORED | F_NORETURN) and _matches_outer(e, kind, size, nmemb, align, old):
                return e
        return None

    def resumed(self, tid: int, rname: str):
        """The pending call of thread `tid` a '<... NAME resumed>' line completes (popped), or None."""
        st = self.stacks.get(tid)
        if not st:
            return None
        if st[-1][P_NAME] == rname:
            return st.pop()
        for i in range(len(st) - 2, -1, -1):
            if st[i][P_NAME] == rname:
                e = st[i]
                self.abandon(st[i + 1:], f"{rname} of line {e[P_START]} resumed first")
                del st[i:]
                return e
        return None

    def abandon(self, entries, why: str, at_end: bool = False):
        """Report pending calls that will never complete (nested and ignored ones are not calls of their own)."""
        for e in entries:
            if e[P_FLAGS] & (F_IGNORED | F_NESTED):
                continue
            if at_end:
                self.report.pending_at_end += 1
            what = "emitted at its start" if e[P_FLAGS] & F_EMITTED else "no event"
            self.report.add("unfinished-never-resumed", e[P_START],
                            f"{e[P_NAME]}() started at line {e[P_START]} never resumed before {why} ({what})")

    def push(self, tid: int, entry: list) -> None:
        """A call of thread ``tid`` is now pending; at most _MAX_PENDING_PER_THREAD are kept."""
        st = self.stacks.get(tid)
        if st is None:
            st = self.stacks[tid] = []
        st.append(entry)
        if len(st) > _MAX_PENDING_PER_THREAD:
            self.abandon(st[:1], "too many pending calls on this thread")
            del st[0]

    def thread_exited(self, tid: int, lineno: int) -> None:
        """Thread ``tid`` exited: the calls it left unfinished never complete."""
        pending = self.stacks.pop(tid, None)
        if pending:
            self.abandon(pending, f"the thread exited (line {lineno})", at_end=True)

    def log_ended(self) -> None:
        """The calls still unfinished at the end of the log never complete."""
        for tid, st in self.stacks.items():
            self.abandon(st, "the log ended", at_end=True)
