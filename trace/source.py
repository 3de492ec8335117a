"""A capture file, whichever tool wrote it: an ltrace log, the LD_PRELOAD tracer's log, a DJ Delorie workload
(trace/workload.py) or a glibc mtrace log (trace/mtrace.py).

`TraceSource` recognises the format by the file's first bytes, gives its
events (one stream, whatever the format) and, once they are consumed, its parse
report and what the capture lost, in sentences.
"""

from pathlib import Path
from types import SimpleNamespace

from .events import PRELOAD_MAGIC
from .ltrace import parse_file

# What an ltrace log lost, by anomaly kind, in the order `losses` tells it
# ("truncated" is the report's flag for a cut-off last line, not a count).
_LOSSES = (
    ("unexpected-breakpoint", "ltrace lost {n} breakpoint(s){first}: calls made at those moments were not recorded"),
    ("unfinished-never-resumed", "{n} call(s) started but never returned{first}: an allocation among them has no "
                                 "result and is lost (a free is kept: it takes effect where it starts)"),
    ("resumed-without-start", "{n} '<... resumed>' line(s) had no start{first}: those calls are lost"),
    ("thread-only-in-exit-line", "{n} thread(s) appear only in their exit line{first}: any call they made was lost"),
    ("truncated", "the last line is cut off: it is ignored"),
    ("unparsable-line", "{n} line(s) could not be read{first}: ignored"),
)


def _first(rep, kind) -> str:
    lines = rep.first_lines(kind)
    return f" (first at line {lines[0]})" if lines else ""


class TraceInputError(Exception):
    """A file or program the trace commands cannot use; the message says why."""


def _workload(path, extra_events):
    from .workload import open_workload
    return open_workload(path, extra_events)


def _mtrace(path, extra_events):
    from .mtrace import open_mtrace
    return open_mtrace(path)


#: Formats read by a reader of their own (an EventSource with report, losses() and master_tid), by name.
OTHER_FORMATS = {"workload": _workload, "mtrace": _mtrace}


def _other_format(head: bytes, path) -> str:
    """A capture that is not a tracer log: a workload, an mtrace log, or else an ltrace log."""
    from .mtrace import looks_like_mtrace
    from .workload import looks_like_workload
    if looks_like_workload(head, path):
        return "workload"
    if looks_like_mtrace(path):
        return "mtrace"
    return "ltrace"


# --------------------------------------------------------------------------- reading any log format
class TraceSource:
    """The events of a capture file, whichever tool wrote it; ``report`` is final once they are consumed."""

    def __init__(self, path, extra_events: bool = False, index: bool = True, times: bool = True,
                 window: bool = False):
        """extra_events: also the events that are not allocator calls: thread starts and exits (both
        formats), the program's own mappings (tracer logs); the exact replay, the statistics and the
        model read them. index=False: a tracer log is not read here (the converter reads it:
        `adopt_log_info` then gives what it found). times=False: an ltrace log's timestamps are not read
        (ltrace.parse's `times`: the exact replay has no use for them). window: a tracer log with window marks
        (capture --server) gives the window's events, what was live when it opened first (trace/window.py)."""
        self.path = Path(path)
        try:
            with open(self.path, "rb") as f:
                head = f.read(len(PRELOAD_MAGIC))
        except OSError as e:
            raise TraceInputError(f"{path}: {e.strerror.lower() if e.strerror else e}") from None
        if self.path.is_dir():
            raise TraceInputError(f"{path}: is a directory, not a capture")
        self.format = "preload" if head == PRELOAD_MAGIC else _other_format(head, self.path)
        if self.format in OTHER_FORMATS:
            # A workload or an mtrace log: its own reader, which says what it lost and which thread is the main one.
            self.events = OTHER_FORMATS[self.format](self.path, extra_events)
            self.report = self.events.report
        elif self.format == "preload":
            if index:
                # The tracer log's reader (ctypes over a decoder built on first use) loads for tracer logs only.
                from .tracerlog import parse_preload_log
                log = parse_preload_log(self.path, extra_events=extra_events, window=window)   # indexes: format
                                                                                               # errors raise here
                self._adopt(log, log.report)
        else:
            self.events = parse_file(self.path, extra_events=extra_events, times=times)
            self.report = self.events.report

    def _adopt(self, log, report) -> None:
        self.events, self.report = log, report
        info = log.info
        if info.missing:                        # records lost: the figures cover what was written
            self.report.pending_at_end = info.missing
            self.report.anomaly_counts["records-missing"] = info.missing

    def adopt_log_info(self, found: dict) -> None:
        """What the converter (runtime/tools/convert.c) found reading the tracer log itself, in place of indexing
        it here: ``events.info`` and ``report`` as a PreloadLog gives them."""
        from .tracerlog import PreloadLog, PreloadLogInfo
        names = {f for f in PreloadLogInfo.__dataclass_fields__}
        info = PreloadLogInfo(str(self.path), **{k: v for k, v in found.items() if k in names})
        if not found.get("has_ns"):
            info.first_ns = info.last_ns = None
        read = SimpleNamespace(path=str(self.path), info=info)      # what PreloadLog.report reads
        self._adopt(read, PreloadLog.report.fget(read))

    def main_tid(self):
        """The captured process's main thread, which the replay runs on its own main thread: the tracer log's
        pid (from its header: the log may not be indexed here); in an ltrace log read with extra_events, the
        thread whose exit line comes last (see ltrace._leader), else the thread that starts with the replay
        (the first one, whose creation the log does not show): the first event's thread, or the creator of
        the first thread start."""
        if self.format in OTHER_FORMATS:
            return self.events.master_tid
        if self.format == "preload":
            from .tracerlog import HEADER
            with open(self.path, "rb") as f:
                head = f.read(HEADER.size)
            return HEADER.unpack(head)[3] if len(head) == HEADER.size else None
        stream = self.events
        if stream.leader is not None:
            return stream.leader
        first = stream.first()
        if first is None:
            return None
        return first.size if first.kind == "thread_start" else first.tid

    def losses(self) -> list:
        """Plain sentences: what the capture lost or could not show (empty for a complete capture)."""
        rep = self.report
        if self.format in OTHER_FORMATS:
            return self.events.losses()
        if self.format == "preload":
            info = self.events.info
            out = []
            if info.missing:
                from .tracerlog import missing_sentence
                out.append(f"{info.missing} call(s) are missing from the tracer log ({missing_sentence(info)}): "
                           f"records still buffered when the process was killed")
            if info.stopped_at is not None:
                from .tracerlog import stop_sentence
                out.append(stop_sentence(info) + "; what comes before it is kept")
            elif not info.ended:
                out.append("the tracer log has no end mark: the process was killed, or exec'ed a program without "
                           "the tracer; the calls its threads still had buffered are lost")
            return out
        out = []
        if rep.killed_by:
            out.append(f"the program was killed by {rep.killed_by}{_first(rep, 'tracee-crashed')}: whatever it "
                       f"would have done after that is not in the log")
        for kind, sentence in _LOSSES:
            if kind == "truncated":
                if rep.truncated:
                    out.append(sentence)
            elif rep.count(kind):
                out.append(sentence.format(n=rep.count(kind), first=_first(rep, kind)))
        if not rep.exits and not rep.killed_by:
            out.append("the log has no '+++ exited' line: the capture may have stopped before the program ended")
        return out
