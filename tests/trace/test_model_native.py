"""The model's two collectors agree: collect.py's Collector over a tracer log's events (the one ltrace logs,
workloads and mtrace logs keep) and runtime/tools/modelcollect.c reading the log itself (`scenc convert
--model` on a tracer log, trace/model/native.py), compared field by field and in their dicts' order (the
writer reads them in it), on the tracer fixtures and on a real capture of tests/fixtures/model/collector_mix.c
(four threads, realloc chains short and past 512 steps, handoffs, every aligned kind, big objects, the
program's own mappings; about 31000 calls, so the windows merge), whole and cut short; and the models
written from each are the same bytes.
"""

import subprocess

import pytest

from scenc.trace.capture.preload import capture_preload
from scenc.trace.ltrace import TraceFormatError
from scenc.trace.model import write_model
from scenc.trace.model.collect import Collector
from scenc.trace.model.native import collect_tracer_log
from scenc.trace.source import TraceSource

from locations import FIXTURES

#: Collector fields the writer reads, compared with their dicts' order
ORDERED = ("window", "ordinal", "live_bytes", "peak_bytes", "peak_line", "first_line", "last_line", "has_time",
           "cross_frees", "known_frees", "handoff_count", "thread_starts", "chain_span_count", "live_at_end",
           "mapped_now", "mapped_peak", "mapped_writable", "mapped_writable_peak", "maps_made", "trace_kinds",
           "map_calls", "maps_left_out", "born", "died", "max_chains", "chain_held", "trail_dropped", "big_dropped",
           "big_maps_dropped", "max_chain_classes", "handoffs", "wins", "thread_windows", "peak_ordinal",
           "peak_freed", "peak_overflow", "kept_big", "kept_overflow")
#: ... and those the writer reads only by key (per thread): compared as dicts
BY_KEY = ("big_objects", "trails", "map_records", "big_maps")


def plain(x):
    """x as nested lists and tuples that keep every dict's order (a dict is ("dict", its items))."""
    if isinstance(x, dict):
        return ("dict", [(plain(k), plain(v)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if hasattr(x, "__slots__"):
        return (type(x).__name__, [(s, plain(getattr(x, s, None))) for s in x.__slots__])
    if hasattr(x, "tolist"):
        return x.tolist()
    if isinstance(x, float):          # 2.0 is not 2: a float printed by the writer must stay one
        return ("float", x)
    return x


def figures(col: Collector) -> dict:
    out = {name: plain(getattr(col, name)) for name in ORDERED}
    out.update((name, sorted((k, plain(v)) for k, v in getattr(col, name).items())) for name in BY_KEY)
    return out


def python_collector(trace) -> Collector:
    col = Collector().consume(TraceSource(trace, extra_events=True).events)
    col.finish()
    return col


def assert_same(trace):
    py, c = figures(python_collector(trace)), figures(collect_tracer_log(trace))
    assert [name for name in py if py[name] != c[name]] == []
    return py


@pytest.mark.parametrize("name", sorted(p.name for p in (FIXTURES / "trace").glob("*.trace")))
def test_both_collectors_agree_on_the_tracer_fixtures(name):
    assert_same(FIXTURES / "trace" / name)


@pytest.fixture(scope="module")
def mix(tmp_path_factory):
    d = tmp_path_factory.mktemp("collector_mix")
    binary = d / "collector_mix"
    subprocess.run(["gcc", "-O2", "-pthread", "-Wall", "-Wextra", "-Werror", "-o", str(binary),
                    str(FIXTURES / "model" / "collector_mix.c")], check=True, capture_output=True)
    trace = d / "mix.trace"
    assert capture_preload([str(binary)], trace).ok
    return trace


@pytest.mark.slow          # a build and a capture of a real program, and the Python collector over it
def test_both_collectors_agree_on_a_capture_that_takes_every_path(mix):
    fig = assert_same(mix)
    # the capture does take the paths it is for (a change to the program that lost one would fail here)
    assert fig["window"] > 64 and len(fig["born"][1]) == 4 and fig["handoff_count"] > 100
    assert fig["maps_made"] >= 20 and fig["maps_left_out"] == ("dict", [("reserved", 1)])
    assert any(trail.steps is None for tid, heap in collect_tracer_log(mix).trails.items() for _, _, trail in heap)
    assert any(key[0] == "map_kept" for tws in fig["thread_windows"][1] for tw in tws[1] if tw
               for key, _ in dict(tw[1])["c"][1] if isinstance(key, list))


@pytest.mark.slow
def test_both_collectors_agree_on_a_log_cut_short(mix, tmp_path):
    data = mix.read_bytes()
    cut = tmp_path / "cut.trace"
    cut.write_bytes(data[:len(data) * 2 // 3 + 5])
    assert_same(cut)


def test_a_damaged_log_is_refused_by_the_c_collector_as_by_the_reader(tmp_path):
    bad = tmp_path / "bad.trace"
    bad.write_bytes(b"SCNTRACE" + bytes(56))
    with pytest.raises(TraceFormatError):
        collect_tracer_log(bad)


@pytest.mark.slow
def test_the_models_from_either_collector_are_the_same_bytes(mix, tmp_path):
    (tmp_path / "py").mkdir()
    (tmp_path / "c").mkdir()
    a = write_model(TraceSource(mix, extra_events=True).events, tmp_path / "py" / "m.scn", source_name=mix.name)
    b = write_model(None, tmp_path / "c" / "m.scn", source_name=mix.name, collector=collect_tracer_log(mix))
    assert [p.name for p in a.data_files] == [p.name for p in b.data_files]
    for p, q in zip([a.scn_path, *a.data_files], [b.scn_path, *b.data_files]):
        assert p.read_bytes() == q.read_bytes(), p.name


def test_past_its_bound_the_collector_keeps_no_object_of_the_peak(monkeypatch):
    """The objects live at the capture's peak and freed after it are kept up to MAX_PEAK_FREED (lua's teardown
    freed 886K of them: 360 MB of records in Python); past it, none, and the collector says so. Its bound made
    small here (the C collector's is compiled in: its fixtures stay under it)."""
    import scenc.trace.model.collect as collect
    trace = FIXTURES / "trace" / "mt_handoff_3x20.trace"
    assert len(python_collector(trace).peak_freed) == 3
    monkeypatch.setattr(collect, "MAX_PEAK_FREED", 2)
    col = python_collector(trace)
    assert col.peak_overflow and col.peak_freed == []
