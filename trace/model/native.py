"""The model's collector for a tracer log in C (runtime/tools/modelcollect.c), back as a finished Collector.

collect.py's Collector reads AllocEvents in Python, about 5 us a call; for a tracer log the same pass runs
in C (tens of millions of calls a minute less), reading the log itself as the exact converter does, and
hands over what the writer reads: the windows, each thread's ThreadWindows (their counters and histograms
in the order Python would have made them: the writer reads dicts in their order), big objects, realloc
chains, the program's own mappings, handoffs. `collect_tracer_log` rebuilds the Collector field by field;
tests/trace/test_model_native.py runs both collectors on the same captures and compares them. Other
captures (ltrace logs, workloads, mtrace logs) keep the Python collector.
"""

import json
import tempfile
from array import array
from collections import Counter
from pathlib import Path

from ...system.process import describe_status
from .collect import BigObject, Collector, MapRecord, ThreadWindow, Trail, Window

#: the C tool's counter keys (modelcollect.c, C_EVENTS ...): a name, or a tuple made from (mk, a, b)
_PLAIN = ("events", "free_null", "ticks", "free_unknown", "realloc_unknown", "realloc_failed", "alloc_failed",
          "realloc", "realloc_as_free", "free_missed", "censored", "kept_ticks", "map", "map_kept", "gaps", "gap_ns")
_HOW = ("", "local", "send", "chain", "kept", "end")
_NONE_TID = 0xFFFFFFFF
_LEFT_OUT = ("failed", "reserved")
_TUPLES = (lambda mks, a, b: ("lives", mks[a]), lambda mks, a, b: ("lives_class", mks[a], b),
           lambda mks, a, b: ("send", mks[a], b), lambda mks, a, b: ("kept", mks[a]),
           lambda mks, a, b: ("start", mks[a]), lambda mks, a, b: ("end", _HOW[a], None if b == _NONE_TID else b),
           lambda mks, a, b: ("recv", b), lambda mks, a, b: ("map", b), lambda mks, a, b: ("map_kept", b))


class CollectorError(RuntimeError):
    """The C collector failed otherwise than on the log (a crash, a signal): said plainly."""


def collect_tracer_log(path, progress: bool = False, cc: str = "gcc") -> Collector:
    """The finished Collector of a tracer log (Collector().consume(events) then finish(), as for the log's events
    read with extra_events). progress: the C tool writes the progress line on this process's stderr."""
    from ..native import model_collector_program, run_log_tool
    with tempfile.TemporaryDirectory(prefix="scenc-model-") as tmp:
        figures, spans = Path(tmp) / "figures.json", Path(tmp) / "spans.bin"
        cmd = [str(model_collector_program(cc)), "--log", str(path), "--out", str(figures), "--spans", str(spans)]
        status, _ = run_log_tool(cmd + (["--progress"] if progress else []), path)
        if status:
            raise CollectorError(f"the model's collector failed on {path} ({describe_status(status)})")
        try:
            with open(figures) as f:
                data = json.load(f)
        except ValueError as e:           # cut short by a full disk, say: what it wrote is no collector's
            raise CollectorError(f"the model's collector wrote figures that cannot be read ({e}) for {path}") from None
        ordinals = array("q")
        ordinals.frombytes(spans.read_bytes())
    return _collector(data, ordinals)


def _hist(flat) -> dict:
    return {flat[i]: [flat[i + 1], flat[i + 2]] for i in range(0, len(flat), 3)}


def _counter(flat, key=lambda k: k) -> Counter:
    return Counter({key(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)})


def _classes(entries, mks) -> dict:
    out = {}
    for entry in entries:
        figures = [_hist(entry[1]), entry[2], entry[3], _hist(entry[4])]
        if len(entry) > 5:
            figures.append(_counter(entry[5], lambda k: mks[k]))
        out[entry[0]] = figures
    return out


def _thread_window(d: dict, mks) -> ThreadWindow:
    tw = ThreadWindow()
    c, flat = tw.c, d["c"]
    for i in range(0, len(flat), 4):
        code, a, b, n = flat[i:i + 4]
        if code < len(_PLAIN):
            key = _PLAIN[code]
        else:
            key = _TUPLES[code - len(_PLAIN)](mks, a, b)
        c[key] = n
    for name in ("sizes", "rsizes", "lives", "sent", "kept", "maps", "map_kept", "starts"):
        if name in d:
            setattr(tw, name, _hist(d[name]))
    tw.sent_to = {k: _hist(h) for k, h in d.get("sent_to", ())}
    tw.map_lives = {k: _hist(h) for k, h in d.get("map_lives", ())}
    tw.lives_by_class = _classes(d.get("lives_by_class", ()), mks)
    tw.dies = {w: _classes(entries, mks) for w, entries in d.get("dies", ())}
    return tw


def _collector(d: dict, ordinals: array) -> Collector:
    col = Collector()
    mks = [tuple(mk) for mk in d["model_kinds"]]
    kinds = d["kinds"]
    for name in ("window", "ordinal", "live_bytes", "peak_bytes", "peak_line", "first_line", "last_line", "has_time",
                 "has_cpu", "cross_frees", "known_frees", "handoff_count", "thread_starts", "chain_span_count",
                 "live_at_end", "mapped_now", "mapped_peak", "mapped_writable", "mapped_writable_peak", "maps_made",
                 "maps_protected", "map_bytes_made"):
        setattr(col, name, d[name])
    col.trace_kinds = _counter(d["trace_kinds"], lambda k: kinds[k])
    col.map_calls = _counter(d["map_calls"], lambda k: kinds[k])
    col.maps_left_out = _counter(d["maps_left_out"], lambda k: _LEFT_OUT[k])
    col.born = dict(_counter(d["born"]))
    col.died = dict(_counter(d["died"]))
    for name in ("max_chains", "chain_held", "trail_dropped", "big_dropped", "big_maps_dropped"):
        setattr(col, name, _counter(d[name]))
    wins = []
    for events, allocs, frees, log_sizes, t_first, t_last, first_line in d["wins"]:
        w = Window(first_line, t_first)
        w.events, w.allocs, w.frees, w.log_sizes, w.t_last = events, allocs, frees, log_sizes, t_last
        wins.append(w)
    col.wins = wins
    col.thread_windows = {tid: [None if tw is None else _thread_window(tw, mks) for tw in tws]
                          for tid, tws in d["thread_windows"]}
    col.max_chain_classes = {row[0]: row[1:] for row in d["max_chain_classes"]}
    col.big_objects = {}
    for tid, heap in d["big_objects"]:
        items = []
        for at_o, at_t, size, mk, how, life, end in heap:
            rec = BigObject((at_o, at_t), size, mks[mk])
            rec.how, rec.life, rec.end = how, life, end
            items.append((size, at_o, rec))
        col.big_objects[tid] = items
    col.trails = {}
    for tid, heap in d["trails"]:
        items = []
        for largest, seq, start_o, start_t, mk, size, steps, end, how, last_o, last_t in heap:
            trail = Trail(tid, (start_o, start_t), mks[mk], size)
            trail.steps = None if steps is None else [((steps[i], steps[i + 1]), steps[i + 2])
                                                      for i in range(0, len(steps), 3)]
            trail.largest, trail.end, trail.how, trail.last = largest, None if end is None else tuple(end), how, \
                (last_o, last_t)
            items.append((largest, seq, trail))
        col.trails[tid] = items
    maps = []
    for tid, at_o, at_t, size, nbytes, life, seq in d["maps"]:
        rec = MapRecord(tid, (at_o, at_t), size, seq)
        rec.bytes, rec.life = nbytes, life
        maps.append(rec)
    col.map_records = {tid: None if recs is None else [maps[i] for i in recs] for tid, recs in d["map_records"]}
    col.big_maps = {tid: [(maps[i].size, maps[i].at[0], maps[i].seq, maps[i]) for i in heap]
                    for tid, heap in d["big_maps"]}
    col.handoffs, at = {}, 0
    for owner, freer, n in d["handoffs"]:
        col.handoffs[owner, freer] = ordinals[at:at + n]
        at += n
    col.peak_ordinal, col.peak_overflow = d["peak_ordinal"], d["peak_overflow"]
    col.peak_freed = [(tid, o, t, nbytes, mks[mk], life, end) for tid, o, t, nbytes, mk, life, end in d["peak_freed"]]
    col.kept_overflow = d["kept_overflow"]
    col.kept_big = [(tid, o, t, nbytes, mks[mk]) for tid, o, t, nbytes, mk in d["kept_big"]]
    col.live.clear()
    return col
