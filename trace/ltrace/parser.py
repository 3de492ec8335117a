"""The ltrace log parser proper: lines in, AllocEvents out, in chunks (docs/capture.md, "The ltrace logs scenc
reads", says what it does with each kind of line). Its main loop reads the common lines itself (the fast path,
trace/ltrace/lex.py), pairs unfinished and resumed calls (trace/ltrace/pending.py) and hands thread starts and exits
to trace/ltrace/threads.py."""
from __future__ import annotations

import re
from itertools import chain
from typing import Iterable, Iterator, Optional

from ..events import ALLOC_KINDS, FREE_KINDS, AllocEvent
from .calls import (A_NMEMB_SIZE, A_OLD, A_OLD_SIZE, A_SIZE, _T_ALLOC_ALIAS, _T_LIBC_PLT, _TOKEN, _args,
                    _classify, _ptr)
from .lex import (_DEMANGLED_CALL, _GENERAL_ANY, _GENERAL_NL, _PREFIX_ONLY, _RESUMED, _RET_TAIL, _SPACE_RUNS,
                  _decoded, _FastPath)
from .pending import (F_EMITTED, F_IGNORED, F_NESTED, F_NORETURN, P_FLAGS, P_INNER, P_KIND, P_NAME, P_PARENT,
                      P_START, _MAX_PENDING_PER_THREAD, _Pending)
from .report import ParseReport, TraceFormatError
from .threads import _CREATES, _LIFE_CALLS, _ThreadLives


_CHUNK = 256                       # events in each list the parser hands out


class _Parser:
    #: Lines of the common shapes are read with str.split (the fast path); every line it does not take with
    #: certainty goes to the regexes. False: every line to the regexes (tests compare both ways).
    fast_path = True

    def __init__(self, filename: str, report: ParseReport, sniff_lines: int, extra_events: bool = False,
                 leader: Optional[int] = None, times: bool = True):
        self.filename = filename
        self.times = times             # read the timestamps (parse's `times`)
        self.packer = None             # (pack, codes) of EventStream.packed: calls handed out packed
        self.lives = _ThreadLives(leader) if extra_events else None
        self.report = report
        self.sniff_lines = sniff_lines
        self.recognised = False
        self.unrecognised = 0          # non-empty lines before the first recognised one
        self.first_bad = None          # (line, col, text) of the first of them
        self.newline_mode = None
        self.pending = _Pending(report)   # the calls started and not finished, by thread
        # time
        self.t0 = None
        self.day = 0.0
        self.prev_abs = None
        self.rel_sum = None            # -r: running sum of relative stamps

    # ---- time ---------------------------------------------------------------------
    def time(self, ts: str):
        """(t, key, keylen, base) with t seconds since the first stamp; later stamps that start
        with ``key`` are ``base + float(stamp[keylen:])``."""
        try:
            if len(ts) >= 8 and ts[2] == ":" and ts[5] == ":":          # -t / -tt
                minute = int(ts[0:2]) * 3600 + int(ts[3:5]) * 60
                absolute = self.day + minute + float(ts[6:])
                if self.prev_abs is not None and absolute < self.prev_abs - 43200:
                    self.day += 86400.0                                  # midnight
                    absolute += 86400.0
                self.prev_abs = absolute
                if self.t0 is None:
                    self.t0 = absolute
                return absolute - self.t0, ts[:6], 6, self.day + minute - self.t0
            if ":" in ts:
                return None, "\0", 1, 0.0
            value = float(ts)
            if self.rel_sum is not None or (self.t0 is None and value < 1e6):  # -r relative
                self.rel_sum = (self.rel_sum or 0.0) + value
                return self.rel_sum, "\0", 1, 0.0
            if self.t0 is None:                                            # -ttt epoch
                self.t0 = value
            ipart = ts.split(".")[0]
            keylen = max(len(ipart) - 3, 1)
            return value - self.t0, ts[:keylen], keylen, int(ts[:keylen]) * 10 ** (len(ipart) - keylen) - self.t0
        except ValueError:
            return None, "\0", 1, 0.0

    # ---- rare lines ----------------------------------------------------------------------
    def slow(self, raw, lineno: int):
        """Lines the fast regexes do not take.  Returns the 11 groups of a call/resume line, or None
        when the line was fully handled here (blank, exit, signal, garbage ...)."""
        rep = self.report
        if not isinstance(raw, str):
            raw = bytes(raw).decode("utf-8", "replace")
        if self.newline_mode and not raw.endswith("\n"):
            if raw.strip():
                rep.truncated = True
                rep.add("truncated-line", lineno, f"last line has no newline, ignored: {raw!r}")
            return None
        s = raw.rstrip("\r\n")
        if not s.strip():
            rep.blank_lines += 1
            return None
        m = _PREFIX_ONLY.match(s)
        tid_s, pid_s, ts = m.group(1), m.group(2), m.group(3)
        body = s[m.end():]
        if body.startswith("+++ ") or body.startswith("--- ") or body.startswith("unexpected breakpoint"):
            self.recognised = True
            if ts and self.rel_sum is not None:
                self.time(ts)                   # -r stamps are relative to the previous line, whatever it is
            tid = int(tid_s or pid_s or 0)
            self.special(tid, body, lineno, s)
            if self.lives is not None:
                t = self.time(ts)[0] if ts and self.times and self.rel_sum is None else None
                self.lives.special_line(tid, body, lineno, t, tid in self.seen)
            return None
        g = None
        if body.startswith("<... "):
            rm = _RESUMED.match(body)
            if rm:
                name, rest = rm.groups()
                if rest.rstrip().endswith("<unfinished ...>"):
                    self.recognised = True      # resumed and interrupted again: wait for the next resume
                    return None
                tm = _RET_TAIL.search(rest)
                if tm:
                    g = (tid_s, pid_s, ts, None, None, None, None, None, name, tm.group(1), tm.group(2))
        else:
            g = self.slow_call(tid_s, pid_s, ts, body)
        if g is None:
            self.unparsable(lineno, s, m.end())
            return None
        return g

    def slow_call(self, tid_s, pid_s, ts, body):
        dm = _DEMANGLED_CALL.match(body)
        if dm:
            token, tail = dm.groups()
        else:
            token, sep, tail = body.partition("(")
            if not sep or not _TOKEN.fullmatch(token):
                return None
        tail = tail.rstrip()
        for unf in ("unfinished", "no return"):
            if tail.endswith(f"<{unf} ...>"):
                args = tail[: -len(unf) - 6].rstrip()
                return (tid_s, pid_s, ts, token, args, None, None, unf, None, None, None)
        tm = _RET_TAIL.search(tail)
        if tm is None:
            return None
        return (tid_s, pid_s, ts, token, tail[: tm.start()], tm.group(1), tm.group(2), None, None, None, None)

    def unparsable(self, lineno: int, s: str, col0: int = 0):
        if not self.recognised:
            self.unrecognised += 1
            if self.first_bad is None:
                self.first_bad = (lineno, col0 + 1, s)
            if self.unrecognised >= self.sniff_lines:
                self.format_error()
        self.report.add("unparsable-line", lineno, s)

    def format_error(self):
        line, col, text = self.first_bad
        shown = text if len(text) <= 60 else text[:57] + "..."
        raise TraceFormatError(
            self.filename, line, col,
            f"not an ltrace log: none of the first {self.unrecognised} non-empty lines looks like ltrace "
            f"output (expected e.g. '1234 12:00:00.000001 prog->malloc(16) = 0x55d0c0a0b2a0'); "
            f"line {line} is {shown!r}")

    def special(self, tid: int, body: str, lineno: int, s: str):
        rep = self.report
        rep.threads.add(tid)
        if body.startswith("+++ "):
            if tid not in self.seen:
                rep.add("thread-only-in-exit-line", lineno, s)
            self.pending.thread_exited(tid, lineno)
            what = body[4:].rstrip(" +")
            if what.startswith("exited"):
                m = re.search(r"status (-?\d+)", what)
                status = int(m.group(1)) if m else None
                rep.exits[tid] = f"exited {status}"
                rep.exit_status = status
            elif what.startswith("killed by"):
                sig = what[len("killed by"):].split()[0] if what[len("killed by"):].split() else "?"
                rep.exits[tid] = f"killed by {sig}"
                if rep.killed_by is None:
                    rep.killed_by = sig
                rep.add("tracee-crashed", lineno, s)
            else:
                rep.exits[tid] = what
        elif body.startswith("--- "):
            self.seen.add(tid)
            rep.add("signal", lineno, s)
        else:
            self.seen.add(tid)
            rep.add("unexpected-breakpoint", lineno, s)

    # ---- classification and fallback -------------------------------------------------------
    def classify(self, tok: str, cache: dict):
        """Cached _classify; ValueError when ``tok`` is not a function name."""
        info = _classify(tok)
        if info is None:
            raise ValueError(tok)
        name, kind, layout, cls, notation, alias = info
        if notation == 1:
            self.report.plt_notation = True
        elif notation == 2:
            self.report.symbol_notation = True
        info = (name, kind, layout, _T_ALLOC_ALIAS if alias else cls)
        if len(cache) < 4096:
            cache[tok] = info
        return info

    def fallback(self, raw, lineno: int, fn_cache: dict):
        """A line the split fast path did not take: the general regex, then the slow path.
        Returns (tid, ts, info, args, ret, dur, unf, rname) or None when the line is done with.
        What the general regex reads teaches the fast path (self.fast)."""
        if not isinstance(raw, str):
            raw = bytes(raw).decode("utf-8", "replace")
        m = self.general(raw)
        if m is not None:
            tid_s, pid_s, ts, tok, args, ret, dur, unf, rname, rret, rdur = m.groups()
        else:
            g = self.slow(raw, lineno)
            if g is None:
                return None
            tid_s, pid_s, ts, tok, args, ret, dur, unf, rname, rret, rdur = g
        info = None
        if tok is None:
            ret, dur = rret, rdur
        else:
            try:
                info = fn_cache.get(tok) or self.classify(tok, fn_cache)
            except ValueError:
                self.unparsable(lineno, raw.rstrip("\r\n"))
                return None
        if m is not None and self.fast is not None:
            self.fast.learn(raw, m, info)
        self.recognised = True
        try:
            dur = float(dur) if dur else None
        except ValueError:
            dur = None
        return int(tid_s or pid_s or 0), ts, info, args, ret, dur, unf, rname

    # ---- main loop -------------------------------------------------------------------------
    def run(self, lines: Iterable, close=None, newlines: Optional[bool] = None,
            whole_lines: bool = False) -> Iterator[list]:
        """The events, in lists. whole_lines: no line holds a newline before its end (lines of a file, or of
        one string split here)."""
        # The fast path reads only whole lines that end in a newline (a newline inside one would pass it).
        self.fast = _FastPath() if self.fast_path and whole_lines else None
        rep = self.report
        pending = self.pending
        stacks = pending.stacks
        self.seen = seen = set()            # tids that appear in a non-exit line
        lives = self.lives
        fresh = False
        new = tuple.__new__
        Event = AllocEvent
        fn_cache: dict = {}
        times = self.times
        fallback = self.fallback
        push = pending.push
        resumed = pending.resumed
        note = rep.add
        outer_call = pending.outer_call
        alloc_kinds, free_kinds = ALLOC_KINDS, FREE_KINDS
        lineno = events = other = 0
        out: list = []                     # events are handed out in chunks of _CHUNK (cheaper than one by one)
        append = out.append
        flush_at = _CHUNK
        packer = None                      # self.packer, read at each flush
        has_ts = has_dur = False
        tkey, tklen, tbase = "\0", 1, 0.0
        it, newline_mode = self.text_lines(lines, newlines)
        if not newline_mode:
            self.fast = None
        fast = self.fast
        if fast is not None:
            fast_fn, fast_rnames, tids, pids, heads = fast.fn, fast.rnames, fast.tids, fast.pids, fast.heads
        nsplit = tid_i = ts_i = -1         # the prefix layout (_FastPath.layout), once known
        dot = False
        try:
            for raw in it:
                lineno += 1
                # ------------------------------------------- fast path: the common shapes, read with str.split
                # It takes a line only when the general regex would read it, into the same groups (see the
                # class doc); anything else raises, and the line goes to the regexes.
                try:
                    if dot:                           # 'TID HH:MM:SS.uuuuuu ' (-tt; -ttt, -r alike)
                        head, rest = raw.split(".", 1)
                        tid, ts = heads[head]         # KeyError: a thread or second not seen yet
                        micro, body = rest.split(" ", 1)
                        if not micro.isdecimal():
                            raise ValueError
                        ts = ts + "." + micro if times else None
                    elif nsplit < 0:
                        raise ValueError              # prefix layout not known yet
                    else:                             # 'TID ', '[pid TID] ', a stamp without a dot, or nothing
                        parts = raw.split(" ", nsplit)
                        body = parts[nsplit]
                        if tid_i == 0:
                            tid = tids[parts[0]]      # KeyError: a new thread
                        elif tid_i < 0:
                            tid = 0
                        elif parts[0] == "[pid":
                            tid = pids[parts[1]]
                        else:
                            raise ValueError
                        ts = parts[ts_i] if ts_i >= 0 else None
                        if ts is not None:
                            if ts.strip("0123456789:.") or not ts[0].isdigit():     # (\d[\d:.]*)
                                raise ValueError
                            if not times:
                                ts = None
                    # The line ends in a newline where it is read below (the cut-off last line: the slow path).
                    if body[0] == "<":                # <... NAME resumed> )   = RET <DUR>
                        head, _, rest = body.partition(" resumed> ")
                        rname = head[5:]
                        if rname not in fast_rnames or head[:5] != "<... ":
                            raise ValueError
                        pad, sep, rest = rest.partition("= ")
                        if not sep or "=" in pad or "<" in pad:
                            raise ValueError          # not ' [^=<]*= '
                        info = unf = None
                    else:                             # CALL(ARGS) = RET <DUR>  |  CALL(ARGS <unfinished ...>
                        tok, _, rest = body.partition("(")
                        info = fast_fn[tok]           # KeyError: a token the general regex has not read yet
                        args, sep, rest = rest.partition(")")
                        if sep:                       # ltrace pads the call to a column: ')    = '
                            pad, _, rest = rest.partition("= ")
                            if pad not in _SPACE_RUNS:
                                raise ValueError      # not '\) +='
                            unf = None
                        elif args[-18:] == " <unfinished ...>\n":
                            args, unf, rest = args[:-18], "unfinished", None
                        elif args[-17:] == " <no return ...>\n":
                            args, unf, rest = args[:-17], "no return", None
                        else:
                            raise ValueError
                        if "<" in args:
                            raise ValueError          # not ([^)<]*): the partition found no ')' before
                    if rest is None:
                        ret = dur = None
                    else:                             # what follows '= ': 'RET <DUR>\n' or 'RET\n'
                        ret, sep, d = rest.partition(" <")
                        if sep:
                            if " " in ret or d[-2:] != ">\n":
                                raise ValueError
                            d = d[:-2]
                            if not d.replace(".", "", 1).isdecimal():
                                raise ValueError      # not [\d.]+ (or not a number: the regexes read it as None)
                            dur = float(d)
                        elif " " in rest or rest[-1] != "\n":
                            raise ValueError
                        else:
                            ret, dur = rest[:-1], None
                except (ValueError, IndexError, KeyError, AttributeError, TypeError):
                    # ---------------------------------------------- general regex, then the slow path
                    r = fallback(raw, lineno, fn_cache)
                    if r is None:
                        if lives is not None and lives.out:
                            out += lives.out
                            lives.out.clear()
                        continue
                    tid, ts, info, args, ret, dur, unf, rname = r
                    if not times:
                        ts = None
                    if tid not in seen:
                        seen.add(tid)
                        rep.threads.add(tid)
                        fresh = lives is not None
                    if nsplit < 0 and fast is not None and fast.layout is not None:
                        nsplit, tid_i, ts_i, dot = fast.layout
                if ts is not None:
                    try:
                        if ts[:tklen] != tkey:
                            raise ValueError
                        t = tbase + float(ts[tklen:])
                    except ValueError:
                        t, tkey, tklen, tbase = self.time(ts)
                        if t is not None:
                            has_ts = True
                else:
                    t = None
                if lives is not None:
                    if fresh:
                        lives.appeared(tid, lineno, t)
                        fresh = False
                        if lives.out:             # only appeared() (and the lines the fallback ends) add there
                            out += lives.out
                            lives.out.clear()
                    else:
                        lives.last = tid

                if info is not None:
                    # ------------------------------------------------ a call starts
                    name, kind, layout, cls = info
                    if cls:
                        if cls == _T_ALLOC_ALIAS:
                            note("memalign-may-be-aligned-alloc", lineno, raw)
                        else:
                            if cls == _T_LIBC_PLT:
                                note("libc-internal-plt", lineno, raw)
                            else:
                                other += 1
                                if lives is not None and name in _LIFE_CALLS:
                                    lives.call(tid, name, ret, unf, lineno, t, out)
                            if unf:
                                push(tid, [name, None, lineno, t, None, 1, None, None, F_IGNORED, None, None])
                            continue
                    try:
                        if layout == A_SIZE:
                            size = int(args, 0)
                            nmemb, align, old = 1, None, None
                            if size < 0:
                                raise ValueError
                        elif layout == A_OLD:
                            old = int(args, 0)
                            size, nmemb, align = None, 1, None
                        elif layout == A_OLD_SIZE:    # realloc: two numbers, read here (raising costs more)
                            old, _, size = args.partition(",")
                            old, size = int(old, 0), int(size, 0)
                            nmemb, align = 1, None
                            if old < 0 or size < 0:
                                raise ValueError
                        elif layout == A_NMEMB_SIZE:  # calloc
                            nmemb, _, size = args.partition(",")
                            nmemb, size = int(nmemb, 0), int(size, 0)
                            align = old = None
                            if nmemb < 0 or size < 0:
                                raise ValueError
                        else:
                            size, nmemb, align, old = _args(layout, args)
                    except (ValueError, IndexError, TypeError):
                        try:
                            size, nmemb, align, old = _args(layout, args)
                        except (ValueError, IndexError, TypeError):
                            note("unparsable-line", lineno, "unreadable arguments: " + str(raw))
                            if unf:
                                push(tid, [name, None, lineno, t, None, 1, None, None, F_IGNORED, None, None])
                            continue
                    st = stacks.get(tid)
                    if st:
                        parent = outer_call(st, kind, size, nmemb, align, old)
                        if parent is not None:
                            note("nested-inner-call", lineno,
                                 f"{str(raw).strip()}  (inside {parent[P_NAME]} of line {parent[P_START]})")
                            if unf:
                                push(tid, [name, kind, lineno, t, size, nmemb, align, old, F_NESTED, parent, None])
                            elif kind in alloc_kinds and parent[P_INNER] is None:
                                parent[P_INNER] = _ptr(ret)
                            continue
                    if dur is not None:
                        has_dur = True
                    if kind in free_kinds:
                        # A free takes effect where it starts: its event now, even if it is unfinished.
                        if not old:
                            note("free-null", lineno, raw)
                        if unf:
                            e = [name, kind, lineno, t, size, nmemb, align, old,
                                 F_EMITTED | (F_NORETURN if unf == "no return" else 0), None, None]
                            if st is not None and len(st) < _MAX_PENDING_PER_THREAD:
                                st.append(e)      # push() inlined: its common case
                            else:
                                push(tid, e)
                        res, failed, start = None, False, lineno
                    elif unf:
                        e = [name, kind, lineno, t, size, nmemb, align, old, F_NORETURN if unf == "no return" else 0,
                             None, None]
                        if st is not None and len(st) < _MAX_PENDING_PER_THREAD:
                            st.append(e)
                        else:
                            push(tid, e)
                        continue
                    else:
                        start, inner, res = lineno, None, 0
                else:
                    # ------------------------------------------------ a call resumes
                    st = stacks.get(tid)
                    if st and st[-1][0] == rname:
                        e = st.pop()                  # resumed() inlined: its common case
                    else:
                        e = resumed(tid, rname)
                    if e is None:
                        note("resumed-without-start", lineno, raw)
                        continue
                    flags = e[P_FLAGS]
                    if flags & (F_IGNORED | F_EMITTED):
                        if lives is not None and e[P_NAME] in _CREATES:
                            lives.call(tid, e[P_NAME], ret, None, lineno, t, out, resumed=True)
                        continue
                    kind = e[P_KIND]
                    if flags & F_NESTED:
                        parent = e[P_PARENT]
                        if kind in alloc_kinds and parent[P_INNER] is None:
                            parent[P_INNER] = _ptr(ret)
                        continue
                    if dur is not None:
                        has_dur = True
                    _, _, start, _, size, nmemb, align, old, _, _, inner = e
                    res = 0
                # ---------------------------------------------------- an allocation/realloc completes
                if res is None:
                    pass                          # a free: nothing returned
                elif kind == "posix_memalign":
                    res = inner
                    failed = _ptr(ret) != 0
                    if not failed and res is None:
                        note("posix-memalign-result-unknown", lineno, raw)
                else:
                    try:
                        res = int(ret, 0)
                    except (ValueError, TypeError):
                        res = _ptr(ret)
                    # NULL is a failure, except from realloc(p, 0), which frees p
                    failed = res == 0 and not (old and size == 0)
                if failed:
                    note("failed-allocation", lineno, raw)
                events += 1
                if packer is None:
                    append(new(Event, (lineno, tid, t, kind, size, nmemb, align, old, res, failed, start, dur, None)))
                else:
                    append(pack(lineno, size or 0, nmemb, align or 0, old or 0, res or 0, tid, codes[kind], failed))
                if events >= flush_at:
                    yield out
                    out = []
                    append = out.append
                    flush_at = events + _CHUNK
                    packer = self.packer
                    if packer is not None:
                        pack, codes = packer
            # ---------------------------------------------------------------- end of input
            if out:
                yield out
                out = []
            self.finish(lineno)
        finally:
            if close is not None:
                close()
            rep.lines += lineno
            rep.events += events
            rep.other_calls += other
            rep.has_timestamps = rep.has_timestamps or has_ts
            rep.has_durations = rep.has_durations or has_dur

    def text_lines(self, lines: Iterable, newlines: Optional[bool]):
        """(the lines as str, do they end in newlines?), from the first line unless `newlines` says."""
        newline_mode = False
        it = iter(lines)
        for first in it:
            if isinstance(first, str):
                it = chain((first,), it)
                newline_mode = first.endswith("\n") if newlines is None else newlines
            else:
                it = _decoded(chain((first,), it))
                newline_mode = bytes(first).endswith(b"\n") if newlines is None else newlines
            break
        self.newline_mode = newline_mode
        self.general = (_GENERAL_NL if newline_mode else _GENERAL_ANY).match
        return it, newline_mode


    def finish(self, lineno: int) -> None:
        """End of input: a log nothing was recognised in, and the calls never resumed."""
        if not self.recognised and self.first_bad is not None:
            line, _, text = self.first_bad
            if lineno == 1 and not self.newline_mode and re.match(r"\d|\[pid", text):
                self.report.truncated = True     # a single, unterminated line: a log cut right at its start
                self.report.add("truncated-line", 1, f"only line has no newline, ignored: {text!r}")
            else:
                self.format_error()
        self.pending.log_ended()
