"""Reading an ltrace line: the regexes, and what the fast path knows (its loop is _Parser.run's, in
trace/ltrace/parser.py, where each line is read in place).

The general regex (_GENERAL_NL) reads every call and resume line, the slow path the
rest (exits, signals, odd spacing, demangled names). Most lines take a fast path first (str.split and
look-ups, _Parser.run with _FastPath), which takes a line only when the general regex would read it into
the same groups and hands any other to the regex: what it knows (the prefix layout, tid tokens, function
tokens, resumed names) it learnt from lines the regex read. tests/test_ltrace_fast_path.py parses every
fixture, the real samples, synthetic, hand-made and mutated logs both ways and compares.
"""
from __future__ import annotations

import re


# General line: groups (tid, pid, ts, token, args, ret, dur, unf, rname, rret, rdur).
_PREFIX = r"(?:(\d+) |\[pid (\d+)\] )? *(?:(\d[\d:.]*) +)?(?:\[[^\]\s]*\] )? *"
_BODY = (r"(?:([\w.+-]+(?:->[\w.+-]+)?(?:@[\w.+-]+)?)\(([^)<]*)(?:\) += ([^ \n]*)(?: +<([\d.]+)>)?| <(unfinished|no return) \.\.\.>)"
         r"|<\.\.\. (\w+) resumed> [^=<]*= ([^ \n]*)(?: +<([\d.]+)>)?)")
_GENERAL_NL = re.compile(_PREFIX + _BODY + r"\n\Z")
_GENERAL_ANY = re.compile(_PREFIX + _BODY + r"\n?\Z")
_PREFIX_ONLY = re.compile(_PREFIX)
_RET_TAIL = re.compile(r"\) *= ?([^ ]*)(?: +<([\d.]+)>)?\s*\Z")
_RESUMED = re.compile(r"<\.\.\. (.+?) resumed> ?(.*)\Z")
_DEMANGLED_CALL = re.compile(r"\s*((?:[\w.+-]+->)?operator (?:new|delete)(?:\[\])?\([^()]*\)(?:@[\w.+-]+)?)\((.*)\Z")
_SPACE_RUNS = frozenset(" " * n for n in range(1, 81))    # ltrace's padding before ' = ' (longer: the regexes)


class _FastPath:
    """What the fast path of _Parser.run knows, all of it learnt from lines the general regex read: it takes a
    line only when the regex would read it into the same groups.

    The prefix must be the plain one ('TID ' or '[pid TID] ', then 'STAMP ', each optional, one space apart) of
    the first line learnt (``layout``). A thread's tid token, a function token and a resumed call's name must have
    been read by the regex before. A stamp with one dot (-tt, -ttt, -r) is read with the tid: the line's text up
    to its first dot (e.g. '1234 12:00:05') must be one the regex read, the digits after it are checked."""

    def __init__(self):
        self.fn: dict = {}             # function token -> its info (_Parser.classify)
        self.rnames: set = set()       # NAME of '<... NAME resumed>'
        self.tids: dict = {}           # 'TID' -> tid
        self.pids: dict = {}           # 'TID]' of '[pid TID]' -> tid
        self.heads: dict = {}          # the text up to a dotted stamp's dot -> (tid, the stamp up to its dot)
        self.layout = None             # (nsplit, tid_i, ts_i, dot): see learn

    def learn(self, raw: str, m, info) -> None:
        """The general regex read ``raw`` (m; info: its function token's, or None)."""
        tid_s, pid_s, ts, tok = m.group(1, 2, 3, 4)
        if tok is not None:
            if info is not None and len(self.fn) < 4096:
                self.fn[tok] = info
        elif len(self.rnames) < 4096:
            self.rnames.add(m.group(9))
        who = f"{tid_s} " if tid_s else f"[pid {pid_s}] " if pid_s else ""
        body = m.start(4) if tok is not None else m.start(9) - 5           # '<... NAME resumed>'
        if raw[:body] != who + (f"{ts} " if ts else ""):
            return                                                          # not a plain prefix
        stamp, sep, micro = (ts or "").partition(".")
        dot = bool(sep) and micro.isdecimal()                               # one dot, digits after it
        if self.layout is None:
            # The prefix is `nsplit` tokens split at single spaces: the tid token ``tid_i`` (0: 'TID',
            # 1: '[pid' 'TID]', -1: none), the stamp ``ts_i`` (-1: none); dot: the stamp has one.
            tid_i = 0 if tid_s else 1 if pid_s else -1
            nsplit = tid_i + 1 + (1 if ts else 0)
            self.layout = (nsplit, tid_i, nsplit - 1 if ts else -1, dot)
        tid = int(tid_s or pid_s or 0)
        for cache, key, value in ((self.tids, tid_s, tid), (self.pids, pid_s and pid_s + "]", tid),
                                  (self.heads, dot and who + stamp, (tid, stamp))):
            if key:
                if len(cache) >= 65536:
                    cache.clear()
                cache[key] = value


def _decoded(lines):
    for raw in lines:
        yield raw if isinstance(raw, str) else bytes(raw).decode("utf-8", "replace")
