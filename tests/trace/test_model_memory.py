"""A fitted model holds its program's memory (issue 27): real captures, with the preload tracer, of small C
programs built here by gcc (tests/fixtures/model/), turned into models and run.

- lua_like.c makes its heap as lua 5.4 does: realloc(NULL, n) allocates, realloc(p, n) grows, realloc(p, 0)
  frees. Those are an allocation and a free in the model, with their sizes and lifetimes; as realloc chains
  (a thread held at most 4096 at once) the model of a 40000-object table peaked far below the capture.
- own_maps.c keeps its memory in mappings of its own (mmap, munmap, mremap outside the allocator): the
  model maps them with `map(n) lives L` (one by one for a lone thread, from histograms past 256), so its
  mapped peak is the capture's and its RSS the program's heap plus its mappings. Before, a model left them
  out (cc1's 245 MB of GC pages, ruby's 126 MB of heap pages).
- reserved.c reserves address space (PROT_NONE) and makes parts of it writable with mprotect, as V8 does:
  those parts are memory, mappings of the model's own. Before, the model dropped the reservation as address
  space, and node's model peaked at 0.16x node's RSS.
- burst.c and teardown.c peak at a burst freed together after it, and at a table torn down right after it:
  objects made close together are made and freed together in the model, and held objects live at the peak
  are freed after it (node's model held 0.70x of node's peak, sqlite3's 0.88x of its live bytes).
- kept_tables.c peaks at its end, most of its bytes still live then (gcc's cc1): its big tables kept to the end
  are written one by one, its long-lived large blocks keep their lifetimes by size class, and the model's
  peak is the capture's whatever the seed (cc1's ranged over 0.75x-1.11x from one seed to the next).
"""

import json
import subprocess

import pytest

from scenc.compiler.pipeline import build
from scenc.trace.capture.preload import capture_preload
from scenc.trace.model import measure_peak, write_model
from scenc.trace.profile import TraceStats
from scenc.trace.source import TraceSource

from locations import FIXTURES

pytestmark = pytest.mark.slow

MIB = 1 << 20


def program(tmp_path, name: str):
    out = tmp_path / name
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(out), str(FIXTURES / "model" / f"{name}.c")],
                   check=True, capture_output=True)
    return out


def capture(tmp_path, name: str, *args):
    trace = tmp_path / f"{name}.trace"
    assert capture_preload([str(program(tmp_path, name)), *args], trace).ok
    source = TraceSource(trace, extra_events=True)
    return trace, TraceStats(source.report).consume(source.events).to_dict()


def model(trace, tmp_path, touch="none"):
    result = write_model(TraceSource(trace, extra_events=True).events, tmp_path / "model.scn",
                         source_name=trace.name, touch=touch)
    measure_peak(result)
    return result


def model_by_both_collectors(trace, tmp_path):
    """The model of a tracer log as collect.py writes it, checked to be modelcollect.c's byte for byte."""
    from scenc.trace.model.native import collect_tracer_log
    (tmp_path / "c").mkdir()
    c = write_model(None, tmp_path / "c" / "model.scn", source_name=trace.name, touch="none",
                    collector=collect_tracer_log(trace))
    m = write_model(TraceSource(trace, extra_events=True).events, tmp_path / "model.scn", source_name=trace.name,
                    touch="none")
    assert c.scn_path.read_text() == m.scn_path.read_text()
    return m


def test_a_lua_like_capture_keeps_its_peak_in_the_model(tmp_path):
    trace, stats = capture(tmp_path, "lua_like")
    assert stats["realloc"]["as_malloc"] == 160000 and stats["realloc"]["as_free"] == 160000, stats["realloc"]
    captured = stats["peak"]["bytes"]
    assert captured > 40000 * 16
    m = model(trace, tmp_path)
    peak = m.figures[[f[0] for f in m.figures].index("live bytes, peak")][2]
    assert 0.9 * captured <= int(peak) <= 1.1 * captured, (peak, captured)
    # realloc(NULL, n) written as what it is, an allocation (with a lifetime); realloc(p, 0) as a free
    assert "realloc(none[0], " in m.text and " lives " in m.text
    reallocs = stats["calls_by_kind"]["realloc"]
    assert m.model_calls["realloc"] == reallocs - 160000
    assert m.model_calls["free"] >= 160000
    assert any("160000 realloc(p, 0)" in note for note in m.notes)


@pytest.mark.parametrize("args, one_by_one, at_least", [((), True, 12), (("600", "16"), False, 4)])
def test_the_programs_own_mappings_keep_their_peak_in_the_model(tmp_path, args, one_by_one, at_least):
    """48 arenas of 1-4 MiB: one by one where they came; 600 of 16-64 KiB: by size and part of the phase (the big
    two, 1 and 2 MiB, one by one)."""
    trace, stats = capture(tmp_path, "own_maps", *args)
    mapped = stats["own_mappings"]["peak_bytes"] - 64 * MIB        # the reservation is mapped all along
    calls = stats["own_mappings"]["calls"]
    assert mapped >= at_least * MIB and calls["mremap"] == 1, stats["own_mappings"]
    m = model(trace, tmp_path, touch="pages")
    figures = {a: (b, c) for a, b, c in m.figures}
    writable = calls["mmap"] - 1
    assert figures["own mappings (map)"] == (str(writable), str(writable))
    assert int(figures["mapped bytes, peak"][0]) == mapped         # the writable ones: all modelled
    assert 0.9 * mapped <= m.mapped_peak <= 1.1 * mapped, (m.mapped_peak, mapped)
    assert int(figures["mapped bytes, peak"][1]) == m.mapped_peak
    # the arenas unmapped at the program's teardown, after its last call, live to the end of their thread
    assert "lives forever" in m.text and " lives " in m.text.replace("lives forever", "")
    # the header says what the model kept and what it dropped
    header = " ".join(line[1:].strip() for line in m.text.splitlines() if line.startswith("#"))
    assert "What the model keeps and drops: threads: kept: 1 captured thread(s) as 1 group(s)" in header
    assert f"mappings: kept: {writable} writable mapping(s)" in header
    assert f"{writable if one_by_one else 2} one by one" in header
    assert "dropped: 1 reservation(s) mapped never writable" in header
    assert "KS distance to the capture's requested sizes at most" in header
    assert "lifetimes: kept:" in header and ("main, phase 1, part 1, mappings of 32768 bytes: lifetimes of" in header) != one_by_one
    # the model's RSS is its heap (a few hundred bytes) and its mappings, touched as the program wrote them
    out = subprocess.run([str(build(m.scn_path).binary)], stdout=subprocess.PIPE, check=True, timeout=120).stdout
    report = json.loads(out)
    above = (report["memory"]["peak_rss_kib"] - report["memory"]["baseline_rss_kib"]) << 10
    assert 0.85 * mapped <= above <= 1.2 * mapped + 4 * MIB, (above, mapped)


def test_a_reservation_made_writable_by_mprotect_keeps_its_touched_bytes_in_the_model(tmp_path):
    """24 parts of 1 MiB of a 64 MiB PROT_NONE reservation made writable (mprotect) and written; 6 given back
    (mmap PROT_NONE over them), 6 made read-only (still resident). The tracer records mprotect; the model maps
    each part made writable as a mapping of its own, so its mapped peak is the program's 24 MiB and its RSS above
    its start about as much (the program's: 25 MiB, /usr/bin/time; its model's 26 MiB, `scenc exec`)."""
    trace, stats = capture(tmp_path, "reserved")
    m = model(trace, tmp_path, touch="pages")
    figures = {a: (b, c) for a, b, c in m.figures}
    assert figures["own mappings (map)"] == ("24", "24"), figures
    assert int(figures["mapped bytes, peak"][0]) == 24 * MIB
    assert 0.95 * 24 * MIB <= m.mapped_peak <= 1.05 * 24 * MIB, m.mapped_peak
    header = " ".join(line[1:].strip() for line in m.text.splitlines() if line.startswith("#"))
    assert "24 of them parts of reservations that mprotect made writable" in header
    out = subprocess.run([str(build(m.scn_path).binary)], stdout=subprocess.PIPE, check=True, timeout=120).stdout
    report = json.loads(out)
    # `scenc convert --model` reads a tracer log with the C collector (runtime/tools/modelcollect.c): the same
    from scenc.cli import main
    out = tmp_path / "cli-model.scn"
    assert main(["convert", str(trace), "--model", "--no-measure", "-o", str(out)]) == 0
    cli_header = " ".join(line[1:].strip() for line in out.read_text().splitlines() if line.startswith("#"))
    assert "24 of them parts of reservations that mprotect made writable" in cli_header
    assert "written: 100% of each mapping's pages" in cli_header      # reserved.c writes every part whole
    # the program wrote every part it made writable: 24 MiB of RSS above its heap of a few hundred bytes
    above = (report["memory"]["peak_rss_kib"] - report["memory"]["baseline_rss_kib"]) << 10
    assert 0.9 * 24 * MIB <= above <= 1.2 * 24 * MIB + 4 * MIB, above



def test_the_page_sample_sees_blocks_that_realloc_returns(tmp_path):
    """lua allocates with realloc(NULL, n) and grows with realloc: the tracer sampled malloc's blocks only, saw
    none of lua's, and `--touch auto` chose `first` from the fault count; lua's replay and model then named
    tcmalloc fattest where lua names glibc (with `pages` they agree). The blocks realloc returns are sampled."""
    from scenc.trace.replay import touch_figures
    trace, _ = capture(tmp_path, "realloc_pages")
    figures = touch_figures(trace, TraceSource(trace).main_tid())
    auto = figures["touch_auto"]
    assert auto["fresh_pages"] >= 16 and auto["written_pages"] >= 0.9 * auto["fresh_pages"], auto
    assert figures["touch"] == "pages"


def test_a_late_burst_freed_together_keeps_its_peak_in_the_model(tmp_path):
    """burst.c: a long steady churn, then 16 buffers of 512 KiB and 240 of 16 KiB made within 600 rounds and
    freed together 3000 rounds later (node's end). Spread over the phase with their own lifetimes, the 16 KiB
    ones were seldom live at once: the model peaked at 0.69x the capture's. Now they are made where they came
    and freed together."""
    trace, stats = capture(tmp_path, "burst")
    captured = stats["peak"]["bytes"]
    assert captured >= 16 * 512 * 1024 + 240 * 16 * 1024
    m = model(trace, tmp_path)
    figures = {a: (b, c) for a, b, c in m.figures}
    assert int(figures["live bytes, peak"][0]) == captured
    modelled = int(figures["live bytes, peak"][1])
    assert 0.9 * captured <= modelled <= 1.1 * captured, (modelled, captured)
    assert "pool burst[240]" in m.text and "free_all(burst)" in m.text
    assert m.model_calls["malloc"] == stats["calls_by_kind"]["malloc"]


def test_a_table_torn_down_right_after_the_peak_is_freed_after_it_in_the_model(tmp_path):
    """teardown.c: a table of 600 blocks of 16 KiB outlives the model's windows (held), and is freed in a row
    right after the capture's peak (sqlite3's end). Spread over the windows of those frees, some came before
    the peak, while the table's last blocks were still made: the model peaked at 0.87x the capture's. Now
    the held objects the peak holds are made where they came and freed together after it."""
    trace, stats = capture(tmp_path, "teardown")
    captured = stats["peak"]["bytes"]
    assert captured >= 600 * 16 * 1024
    m = model(trace, tmp_path)
    modelled = int({a: c for a, _, c in m.figures}["live bytes, peak"])
    assert 0.9 * captured <= modelled <= 1.1 * captured, (modelled, captured)
    assert "pool burst[600]" in m.text and "free_all(burst)" in m.text


def test_big_blocks_that_live_long_keep_their_peak_in_the_model(tmp_path):
    """long_blocks.c (espresso's shape): a small churn, a block of 16-24 KiB every 4 rounds that lives 8-23
    rounds, and 5 times 4 blocks of 40-60 KiB that live 2000 rounds (4% of the run). Drawn from the large
    objects' one size table and one lifetime table, their long lives went to blocks of 16-24 KiB: the model
    peaked at 0.65x the capture's. Now the large blocks of 1/64 of the peak or more that live 1/64 of their phase
    or more are written one by one; the models from either collector (collect.py's, modelcollect.c's) are the
    same."""
    trace, stats = capture(tmp_path, "long_blocks")
    captured = stats["peak"]["bytes"]
    assert captured >= (40 + 48 + 56 + 60) * 1024
    m = model_by_both_collectors(trace, tmp_path)
    measure_peak(m)
    modelled = int({a: c for a, _, c in m.figures}["live bytes, peak"])
    assert 0.9 * captured <= modelled <= 1.1 * captured, (modelled, captured)
    for n in (40, 48, 56, 60):
        assert m.text.count(f"malloc({n * 1024}) lives ") == 5, n
    assert any(note.startswith("20 large objects of main, of 1/64 of the capture's peak") for note in m.notes), m.notes


def test_a_peak_at_the_end_held_by_kept_tables_is_the_captures_whatever_the_seed(tmp_path):
    """kept_tables.c (gcc's cc1's shape): the peak at its end, 75% of it still live then: 4000 small blocks and 13
    tables of 64 KiB and 512 KiB kept to the end, 48 KiB blocks that live long among short-lived ones of 1-4 KiB,
    200 blocks from the start freed at the end. Drawn from the kept objects' sizes, the tables came out as often
    as luck had it: main's model peaked at 0.66x, 1.75x and 0.92x of the capture with seeds 1, 2 and 3. Now the
    largest kept objects are written one by one until the others' drawn sizes vary the peak by 1% at most, the
    large objects keep their lifetimes by band of size classes, and the held objects the peak holds are made into
    the burst; both collectors write the same model."""
    trace, stats = capture(tmp_path, "kept_tables")
    captured = stats["peak"]["bytes"]
    assert stats["live_at_end"]["bytes"] >= 0.7 * captured
    m = model_by_both_collectors(trace, tmp_path)
    assert m.text.count("malloc(65536) lives forever") == 12 and m.text.count("malloc(524288) lives forever") == 1
    peaks = []
    for seed in (1, 2, 3):
        m.writer.seed = seed                  # the seed measure_peak runs the model with (a knob of its build)
        peaks.append(measure_peak(m))
    assert all(0.9 * captured <= p <= 1.1 * captured for p in peaks), (peaks, captured)
