"""Exact replay: a capture becomes an ops file and a two-line `replay` scenario.

    report = write_replay("app.trace", "app.scn", "app.trace", touch="auto")   # or an ltrace log's AllocEvents
    report.calls, report.degraded, touch_line(report), threads_line(report)

The conversion itself is C, runtime/tools/convert.c, its only implementation: it reads a tracer log by
itself (convert_log) or takes an ltrace log's events packed on its stdin (convert_events), writes the ops
file (trace/opsfile.py) and reports what it converted as JSON, which becomes a ReplayReport here. This
module keeps the report, the `.scn` text and the summary's wording. What a replay keeps and what it
degrades: docs/capture.md, "scenc convert: exact replay"; its design: docs/architecture.md, "Inside the
subsystems".
"""

import json
import struct
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

from .events import AllocEvent, pack_events
from ..system.process import describe_status
from .ltrace import TraceFormatError
from .native import STOP_SIGNALS
from .opsfile import COUNTED_AS, TOUCH_MODES

# Trace kinds to the replay op that performs the same kind of call.
REPLAY_KIND = {
    "malloc": "malloc", "operator_new": "malloc", "operator_new_array": "malloc",
    "calloc": "calloc", "realloc": "realloc", "reallocarray": "realloc",
    "free": "free", "operator_delete": "free", "operator_delete_array": "free",
    "aligned_alloc": "aligned_alloc", "memalign": "memalign", "posix_memalign": "posix_memalign",
    "valloc": "valloc", "pvalloc": "valloc",
}


@dataclass
class ReplayReport:
    threads: int = 0
    calls: int = 0
    counts: List[Dict[str, int]] = field(default_factory=list)  # per replay thread, runtime counter kinds
    tids: List[int] = field(default_factory=list)                # captured tid of each replay thread
    cross_thread_waits: int = 0
    peak_live_bytes: int = 0
    peak_line: int = 0
    live_at_end: int = 0
    slots: int = 0
    degraded: Counter = field(default_factory=Counter)
    degraded_lines: Dict[str, List[int]] = field(default_factory=lambda: defaultdict(list))
    trace_kinds: Counter = field(default_factory=Counter)        # calls by their captured kind
    spawned: int = 0              # threads created during the replay, where the capture created them
    joined: int = 0               # threads joined before a later creation, where the capture had ended them
    peak_threads: int = 0         # most threads alive at once in the capture (as far as it shows)
    maps: int = 0                 # the program's own anonymous mappings replayed
    mapped_peak: int = 0          # most bytes of them mapped at once
    touch: str = "none"
    touch_auto: Optional[dict] = None   # --touch auto: each mode's pages, the faults measured, why (convert.c)
    window: Optional[dict] = None       # a capture's window (capture --server): convert.c's "window" object


# --------------------------------------------------------------------------- the converter (runtime/tools/convert.c)
#: Event kinds as the converter numbers them (runtime/tools/trace_read.h, EV_*): the allocator calls, then the rest.
EVENT_CODE = {k: i for i, k in enumerate((*REPLAY_KIND, "thread_start", "thread_exit", "mmap", "munmap", "mremap",
                                                          "window", "mprotect"))}
#: One event on the converter's stdin (runtime/tools/trace_read.h, tr_event).
EVENT = struct.Struct("<QQQQQQIBB2x")
_BATCH = 4096


class ConvertError(RuntimeError):
    """The converter could not write the ops file (disk full, unwritable folder); the message says why."""


def convert_events(events: Iterable[AllocEvent], ops_path, touch: str = "none",
                   main_tid: Optional[int] = None) -> ReplayReport:
    """Write the ops file for a stream of events; returns what was converted.

    The events are packed (EVENT) and piped to the converter. A tracer log read by
    scenc.trace.preload_log is not: the converter reads its file itself (see convert_log).
    """
    preload_log = sys.modules.get(f"{__package__}.tracerlog")   # a PreloadLog's module is loaded: not imported
    if preload_log is not None and isinstance(events, preload_log.PreloadLog):   # here for an ltrace log's sake
        return convert_log(events.path, ops_path, touch, main_tid, extra=events.extra_events)[0]
    return _run(["--events"], ops_path, touch, main_tid, lambda pipe: _feed(events, pipe))[0]


def convert_log(path, ops_path, touch: str = "none", main_tid: Optional[int] = None,
                extra: bool = True, whole: bool = False) -> Tuple[ReplayReport, dict]:
    """Convert a tracer log (runtime/tracer/tracer.c) in C, reading and merging it there: (report, what the log held:
    runtime/tools/convert.c's "log" object, PreloadLogInfo's fields). extra=False skips its thread and mapping records;
    whole: a log with a window (capture --server) converted whole, not its window.
    Raises TraceFormatError for a log that is not one or is damaged (nothing is written then)."""
    return _run(["--log", str(path)] + ([] if extra else ["--no-extra"]) + (["--whole"] if whole else []), ops_path,
                touch, main_tid, None, error_path=str(path))


def _feed(events: Iterable[AllocEvent], pipe) -> None:
    """The events packed (EVENT), written about _BATCH at a time. An ltrace parser's stream packs them itself
    (EventStream.packed); other lists of events (batches()) are packed as they come (events.pack_events)."""
    pack, codes = EVENT.pack, EVENT_CODE
    if hasattr(events, "packed"):
        blocks = events.packed(pack, codes)
    else:
        batches = events.batches() if hasattr(events, "batches") else _batches(events)
        blocks = (pack_events(batch, pack, codes) for batch in batches)
    packed, size = [], 0
    try:
        for block in blocks:
            packed.append(block)
            size += len(block)
            if size >= _BATCH * EVENT.size:
                pipe.write(b"".join(packed))
                packed, size = [], 0
    except KeyError as e:
        raise ValueError(f"the replay cannot convert a {e.args[0]!r} event") from None
    if packed:
        pipe.write(b"".join(packed))


def _batches(events: Iterable[AllocEvent]) -> Iterable[list]:
    events = iter(events)
    while True:
        batch = list(islice(events, _BATCH))
        if not batch:
            return
        yield batch


def auto_touch(path, main_tid: Optional[int] = None) -> str:
    """The mode `--touch auto` chooses for a tracer log (a model's touch_new). When the tracer's sample of
    pages decides, the converter reads only the log's index, a small part of a whole conversion's work;
    otherwise it converts the whole log, into a folder removed afterwards."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="scenc-touch-") as tmp:
        return _convert(["--log", str(path), "--touch-only"], Path(tmp) / "auto.ops", "auto", main_tid, None,
                        error_path=str(path))["touch"]


def touch_figures(path, main_tid: Optional[int] = None) -> dict:
    """What `--touch auto` sees in a tracer log, from a whole conversion (into a folder removed afterwards):
    the mode it chooses ("touch") and its figures ("touch_auto": each mode's pages, of them the program's
    own writable mappings' pages ("map_pages"), the faults measured). A model's touch_new and the share of
    its mappings written (trace/model/fit.py, map_written_percent)."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="scenc-touch-") as tmp:
        data = _convert(["--log", str(path)], Path(tmp) / "auto.ops", "auto", main_tid, None, error_path=str(path))
    return {"touch": data["touch"], **({"touch_auto": data["touch_auto"]} if "touch_auto" in data else {})}


def _run(args: List[str], ops_path, touch: str, main_tid: Optional[int], feed, error_path: str = ""):
    data = _convert(args, ops_path, touch, main_tid, feed, error_path)
    return _report(data, touch), data.get("log")


def _convert(args: List[str], ops_path, touch: str, main_tid: Optional[int], feed, error_path: str = "") -> dict:
    """The converter's JSON report; its errors raised (TraceFormatError, ConvertError, KeyboardInterrupt)."""
    from .native import converter_program
    cmd = [str(converter_program()), *args, "--ops", str(ops_path), "--touch",
           "auto" if touch == "auto" else str(TOUCH_MODES.index(touch))]
    if main_tid is not None:
        cmd += ["--main-tid", str(main_tid)]
    ops_dir = Path(ops_path).parent
    spools_before = set(ops_dir.glob(".ops-*"))
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if feed else subprocess.DEVNULL, stdout=subprocess.PIPE)
    try:
        if feed:
            try:
                feed(proc.stdin)
                proc.stdin.close()
            except BrokenPipeError:           # the converter stopped early: its report says why
                pass
        out = proc.stdout.read()
        status = proc.wait()
    except BaseException:
        # A parse error in the events, or Ctrl-C: the converter removes its temporary files on SIGTERM.
        proc.terminate()
        proc.wait()
        raise
    finally:
        for pipe in (proc.stdin, proc.stdout):
            if pipe:
                try:
                    pipe.close()
                except BrokenPipeError:
                    pass
    data = json.loads(out) if out.strip() else {}
    if status or "error" in data:
        # 130: the converter stopped on SIGINT, SIGTERM or SIGHUP (its handler); killed by one of them before
        # the handler was set, the same. Any other signal is a crash, said as such.
        if status == 130 or -status in STOP_SIGNALS:
            raise KeyboardInterrupt
        if status:
            _remove_leftovers(ops_path, set(ops_dir.glob(".ops-*")) - spools_before)
        message = data.get("error") or f"the converter failed ({describe_status(status)})"
        if error_path and data.get("record"):
            raise TraceFormatError(error_path, data["record"], 1, message)
        raise ConvertError(message)
    return data


def _remove_leftovers(ops_path, spools) -> None:
    """What a converter that crashed (or was killed by SIGXFSZ as it wrote) left beside the ops file: its
    spool folder (those made while it ran) and its temporary ops file; it removes them itself on SIGTERM."""
    import shutil
    ops_path = Path(ops_path)
    for spool in spools:
        shutil.rmtree(spool, ignore_errors=True)
    try:
        (ops_path.parent / f".{ops_path.name}.tmp").unlink()
    except OSError:
        pass


def _report(data: dict, touch: str) -> ReplayReport:
    report = ReplayReport(touch=data.get("touch", touch), touch_auto=data.get("touch_auto"), window=data.get("window"))
    for name in ("threads", "tids", "cross_thread_waits", "peak_live_bytes", "peak_line", "live_at_end", "slots",
                 "spawned", "joined", "peak_threads", "maps", "mapped_peak"):
        setattr(report, name, data[name])
    for row in data["by_kind"]:
        counts: Dict[str, int] = {}
        for kind, n in zip(REPLAY_KIND, row):
            if n:
                replayed = REPLAY_KIND[kind]
                counted = COUNTED_AS.get(replayed, replayed)
                counts[counted] = counts.get(counted, 0) + n
                report.trace_kinds[kind] += n
        report.counts.append(counts)
    report.calls = sum(report.trace_kinds.values())
    for what, count, lines in data["notes"]:
        report.degraded[what] = count
        report.degraded_lines[what] = lines
    return report


def scenario_text(name: str, ops_file: str, source: str, report: ReplayReport) -> str:
    """The short `.scn` file that replays an ops file."""
    lines = [
        f"# Exact replay of {source}: {report.threads} thread(s), {report.calls} allocator calls,",
        f"# {report.cross_thread_waits} ops wait for another thread (cross-thread frees and slot reuse),",
        f"# peak live {report.peak_live_bytes} bytes (line {report.peak_line}), {report.live_at_end} live at the end.",
        f"# {threads_line(report)}; each new block {TOUCH_TEXT[report.touch]}.",
    ]
    if report.touch_auto:
        lines.append(f"# --touch auto: {touch_line(report)}.")
    if report.window and report.window.get("opened"):
        lines.append(f"# {window_line(report)}.")
    if report.maps:
        lines.append(f"# {report.maps} anonymous mapping(s) of the program's own, at most {report.mapped_peak} bytes "
                     f"mapped at once, are mapped, touched and unmapped as captured.")
    for what, count in sorted(report.degraded.items()):
        lines.append(f"# degraded: {count} x {what}")
    safe_name = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name) or "replay"
    lines += [f'scenario "{safe_name}"', f'replay "{ops_file}"', ""]
    return "\n".join(lines)


def window_line(report: ReplayReport) -> str:
    """What a capture's window kept and left out, in one line."""
    w = report.window
    maps = (f" and {w['setup_maps']} mapping(s) ({w['setup_mapped']} bytes)" if w["setup_maps"] else "")
    closed = (f", {w['after_calls']} after its client's end left out" if w["closed"] else
              ", the window never closed (the client's end is not marked): the calls up to the log's end are kept")
    return (f"the server's window from ready to its client's end: {w['setup_objects']} objects ({w['setup_bytes']} "
            f"bytes){maps} live at ready are made by an untimed set-up; {w['before_calls']} calls before ready"
            f"{closed}")


#: What the replay does to each new block (and to the grown part of a realloc), per --touch mode.
TOUCH_TEXT = {"none": "is not written", "first": "gets its first and last byte written",
              "pages": "gets one byte written in each page and its last byte", "all": "is written whole"}


def touch_line(report: ReplayReport) -> str:
    """Which touch mode --touch auto chose, and why, in one line."""
    a = report.touch_auto
    if a["heap_faults"] < 0:
        return f"{report.touch} ({a['why']})"
    counted = ", ".join(f"{m} {a['pages'][m]}" for m in ("none", "first", "pages"))
    sampled = f"{a['written_pages']} of {a['fresh_pages']} fresh inner pages of sampled blocks written before " \
              f"their free; "
    return (f"{report.touch}, {a['why']} ({sampled}{a['heap_faults']} faults (the program's {a['page_faults']}, less "
            f"{a['tracer_pages']} of the tracer's buffers and {a['allowance']} allowed for its stack and libraries) "
            f"against the captured heap's pages each mode faults in: {counted})")


def threads_line(report: ReplayReport) -> str:
    if not report.spawned:
        return "every thread starts with the replay"
    return (f"{report.spawned} thread(s) created during the replay where the capture created them, "
            f"{report.joined} joined before a later creation; at most {report.peak_threads} alive at once")


def write_replay(events, scn_path, source_name: str, ops_path: Optional[Path] = None, touch: str = "none",
                 main_tid: Optional[int] = None, found=None, whole: bool = False) -> ReplayReport:
    """events: AllocEvents, or the path of a tracer log (runtime/tools/convert.c reads it itself; `found` then gets
    what the log held, convert_log's second value). main_tid: the captured process's main thread (its pid),
    replayed on the replay's main thread."""
    scn_path = Path(scn_path)
    ops_path = Path(ops_path) if ops_path else scn_path.with_suffix(".ops")
    if isinstance(events, (str, Path)):
        report, log = convert_log(events, ops_path, touch, main_tid, whole=whole)
        if found:
            found(log)
    else:
        report = convert_events(events, ops_path, touch, main_tid)
    try:
        ref = ops_path.resolve().relative_to(scn_path.resolve().parent)
    except ValueError:
        ref = ops_path.resolve()
    scn_path.write_text(scenario_text(scn_path.stem, str(ref), source_name, report))
    return report
