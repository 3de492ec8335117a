"""scenc.trace.profile: streaming statistics of parsed ltrace logs."""
import importlib.util
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from scenc.trace.events import ALLOC_KINDS, FREE_KINDS
from scenc.trace.ltrace import parse, parse_file
from scenc.trace.profile import TraceStats, bucket_label, format_trace_stats, trace_stats_file

from ltrace_samples import sample
from locations import REPO

ROOT = REPO
FIXTURES = ROOT / "tests" / "fixtures" / "trace"



def oracle(events):
    """Independent, slow replay: live blocks, peak bytes, cross-thread frees (no posix_memalign guessing)."""
    live, peak, cross, frees = {}, 0, 0, 0
    for e in events:
        freeing = e.kind in FREE_KINDS or (e.kind.startswith("realloc") and e.old_ptr and e.size == 0
                                           and not e.result_ptr)
        if freeing:
            if e.old_ptr and e.old_ptr in live:
                frees += 1
                cross += live.pop(e.old_ptr)[1] != e.tid
            continue
        if e.failed:
            continue
        if e.kind not in ALLOC_KINDS and e.old_ptr:
            live.pop(e.old_ptr, None)
        live[e.result_ptr] = (e.nbytes, e.tid)
        peak = max(peak, sum(b for b, _ in live.values()))
    return live, peak, cross, frees


def test_mt_pthread_exact_figures():
    stats = trace_stats_file(sample("mt_pthread_e.log"))
    assert stats.calls_by_kind == {"free": 1120, "malloc": 480, "calloc": 80, "realloc": 52}
    assert stats.threads == 5
    assert sum(sum(k.values()) for k in stats.calls_by_thread.values()) == 1732
    assert stats.free_null == 560 and stats.frees == 560 and stats.free_unknown == 0
    assert stats.cross_thread_frees == 560 and stats.cross_thread_share == 1.0
    assert stats.live_objects == 0 and stats.live_bytes == 0
    assert stats.failed_allocations == 0
    events = list(parse_file(sample("mt_pthread_e.log")))
    live, peak, cross, frees = oracle(events)
    assert (len(live), peak, cross, frees) == (0, stats.peak_bytes, 560, 560)
    peak_event = next(e for e in events if e.line == stats.peak_line)
    assert peak_event.kind not in FREE_KINDS and stats.peak_time == pytest.approx(peak_event.time_s)
    # every allocation got a size bucket, every freed block a lifetime (ops and time)
    allocations = sum(n for k, n in stats.calls_by_kind.items() if k != "free")
    assert sum(stats.size_hist.values()) == allocations
    assert sum(stats.lifetime_ops_hist.values()) == sum(stats.lifetime_us_hist.values()) == 560


@pytest.mark.slow
@pytest.mark.parametrize("name", ["python_json_e.log", "mt_pthread_crashed_e.log"])
def test_streaming_figures_match_an_independent_replay(name):
    stats = trace_stats_file(sample(name))
    live, peak, cross, frees = oracle(list(parse_file(sample(name))))
    assert stats.live_objects == len(live)
    assert stats.live_bytes == sum(b for b, _ in live.values())
    assert stats.peak_bytes == peak
    assert (stats.cross_thread_frees, stats.frees) == (cross, frees)


def test_x_log_chains_failures_and_posix_memalign():
    stats = trace_stats_file(sample("alloc_mix_znow_x.log"))
    length, _line = stats.longest
    assert length == 12                                   # the README: realloc chains up to 12 long
    assert max(stats.chains) == 12
    assert stats.failed == {"malloc": 15, "calloc": 15}
    assert stats.realloc_as_free == 150                   # realloc(p, 0), its inner free not counted twice
    # the 150 posix_memalign(64, 200) results are invisible to ltrace; each is matched to a 64-aligned free
    assert stats.posix_memalign_guessed == 150 and stats.free_unknown == 0
    assert stats.report.count("free-unknown-pointer") == 0
    assert stats.cross_thread_frees == 0 and stats.threads == 1


def test_crashed_log_report():
    stats = trace_stats_file(sample("mt_pthread_crashed_e.log"))
    text = format_trace_stats(stats)
    assert "INCOMPLETE capture: the tracee was killed by SIGSEGV; ltrace lost breakpoints; 1 calls never returned" \
        in text
    assert "error   tracee-crashed" in text and "lines 2984, 2985, 2986, 2987, 2988" in text
    assert "warning unfinished-never-resumed" in text and "lines 2980" in text


SMALL = """\
100 12:00:00.000000 p->malloc(100) = 0x1000 <0.000001>
100 12:00:00.000010 p->malloc(3000) = 0x2000 <0.000001>
101 12:00:00.000020 p->free(0x1000) = <void> <0.000001>
100 12:00:00.000030 p->realloc(0x2000, 5000) = 0x3000 <0.000001>
100 12:00:00.001030 p->calloc(10, 10) = 0x1000 <0.000001>
101 12:00:01.001030 p->free(0x3000 <unfinished ...>
100 12:00:01.001040 p->free(0x9999) = <void> <0.000001>
101 12:00:01.001050 <... free resumed> ) = <void> <0.000030>
100 12:00:01.001060 p->malloc(64) = 0 <0.000001>
100 12:00:01.001070 p->free(0) = <void> <0.000001>
101 12:00:01.001080 +++ exited (status 0) +++
100 12:00:01.001090 +++ exited (status 0) +++
"""


def test_small_log_by_hand():
    events = parse(SMALL.splitlines(keepends=True), "small.log")
    stats = TraceStats(events.report).consume(events)
    assert (stats.peak_bytes, stats.peak_line, stats.peak_objects) == (5100, 5, 2)
    assert stats.peak_time == pytest.approx(0.00103)
    assert stats.size_hist == {7: 2, 12: 1, 13: 1}        # 100, 100 | 3000 | 5000
    # 0x1000: 2 operations and 20 us; 0x2000 -> 0x3000: 4 operations and 1.00102 s
    assert stats.lifetime_ops_hist == {2: 1, 3: 1}
    assert stats.lifetime_us_hist == {5: 1, 20: 1}
    assert stats.cross_thread_frees == 2 and stats.frees == 2
    assert stats.free_unknown == 1 and stats.report.first_lines("free-unknown-pointer") == [7]
    assert (stats.realloc_moved, stats.realloc_in_place, stats.chains, stats.longest) == (1, 0, {1: 1}, (1, 2))
    assert (stats.live_objects, stats.live_bytes) == (1, 100)
    assert stats.failed == {"malloc": 1} and stats.free_null == 1
    assert stats.calls_by_thread == {100: {"malloc": 3, "realloc": 1, "calloc": 1, "free": 2}, 101: {"free": 2}}
    d = json.loads(json.dumps(stats.to_dict()))
    assert d["peak"] == {"bytes": 5100, "objects": 2, "line": 5, "time_s": pytest.approx(0.00103)}
    assert d["frees"]["cross_thread_share"] == 1.0
    assert d["size_hist_log2"] == {"7": 2, "12": 1, "13": 1}
    assert d["parse"]["anomalies"]["free-unknown-pointer"]["first_lines"] == [7]
    text = format_trace_stats(stats)
    assert "peak live: 5100 bytes in 2 blocks at line 5 (t=0.001030 s)" in text
    assert "cross-thread frees: 2 of 2 (100.0%)" in text
    assert "[4K, 8K)" in text and "[16, 32)us" in text and "[524, 1049)ms" in text
    assert "INCOMPLETE" not in text


def test_bucket_labels():
    assert [bucket_label(b) for b in (0, 1, 2, 11, 21)] == ["0", "1", "[2, 4)", "[1K, 2K)", "[1M, 2M)"]


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_trace_parse", ROOT / "bench" / "bench_trace_parse.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_memory_does_not_grow_with_log_length(tmp_path):
    """Parse + stats of a 10x longer synthetic log (same live-object bound) needs no more memory:
    peak RSS of a fresh process per log (a parser that kept its events would need ~30 MB more)."""
    bench = load_bench()
    rss = {}
    for n in (20_000, 200_000):
        path = tmp_path / f"{n}.log"
        bench.generate(str(path), n, threads=4, live_per_thread=100)
        out = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_trace_parse.py"), "--measure", str(path)],
                             capture_output=True, text=True, check=True).stdout
        r = json.loads(out)
        assert r["lines"] == sum(1 for _ in open(path))
        assert set(r["anomalies"]) <= {"free-null", "failed-allocation", "libc-internal-plt"}, r["anomalies"]
        rss[n] = r["maxrss_kb"]
    assert rss[200_000] <= 1.2 * rss[20_000], rss
    assert rss[200_000] - rss[20_000] < 8 * 1024, rss


def test_bench_generator_log_is_consistent(tmp_path):
    bench = load_bench()
    path = tmp_path / "g.log"
    n = bench.generate(str(path), 5000, threads=3)
    lines = path.read_text().splitlines()
    assert len(lines) == n
    stats = trace_stats_file(path)
    k = Counter(l.split()[2].split("(")[0] for l in lines if "app->" in l)
    assert stats.calls_by_kind["malloc"] == k["app->malloc"]
    assert stats.report.count("libc-internal-plt") == sum("libc.so.6->" in l for l in lines)


def test_trace_stats_command(capsys, tmp_path):
    from scenc.trace.profile import main
    assert main([str(sample("mt_pthread_e.log"))]) == 0
    out = capsys.readouterr().out
    assert "cross-thread frees: 560 of 560 (100.0%)" in out and "live at end: 0 blocks, 0 bytes" in out
    assert main([str(sample("mt_pthread_crashed_e.log")), "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["parse"]["crashed"] and d["parse"]["killed_by"] == "SIGSEGV"
    bad = tmp_path / "notes.txt"
    bad.write_text("hello\n" * 30)
    assert main([str(bad)]) == 2
    assert "not an ltrace log" in capsys.readouterr().err


# --------------------------------------------------------------------------- threads and the program's mappings
def test_threads_alive_at_once_and_their_starts_and_exits():
    """An ltrace log read with its thread lifetimes: the main thread (whose first call comes after its
    workers exited, its exit line last) is alive from the start, so the 4 workers and it make 5."""
    from scenc.trace.source import TraceSource
    source = TraceSource(sample("mt_pthread_e.log"), extra_events=True)
    stats = TraceStats(source.report).consume(source.events)
    d = stats.to_dict()
    assert d["threads_alive"]["peak"] == 5 and d["threads_alive"]["starts"] == 4
    assert d["threads_alive"]["exits"] == 5
    plain = trace_stats_file(sample("mt_pthread_e.log")).to_dict()
    # the extra events change no figure of the calls
    for key in ("events", "calls_by_kind", "peak", "frees", "size_hist_log2", "lifetime_ops_hist_log2"):
        assert d[key] == plain[key], key
    text = format_trace_stats(stats)
    assert "threads alive at once: at most 5 at line 8" in text and "4 thread starts, 5 exits captured" in text


OWN_MAPS_C = r"""
#include <string.h>
#include <stdlib.h>
#include <sys/mman.h>
int main(void) {
  void *volatile small = malloc(1000);
  char *a = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  char *b = mmap(NULL, 3 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (a == MAP_FAILED || b == MAP_FAILED) return 1;
  memset(a, 1, 1 << 20);
  munmap(b + (1 << 20), 2 << 20);        /* two thirds of b go: 2 MiB mapped from here */
  munmap(a, 1 << 20);
  munmap(b, 1 << 20);
  free(small);
  return 0;
}
"""


@pytest.mark.skipif(not __import__("shutil").which("gcc"), reason="gcc is not installed")
def test_trace_stats_reports_the_programs_own_mappings_beside_the_heap(capsys, tmp_path):
    from scenc.cli import main
    from scenc.trace.capture.preload import capture_preload
    src = tmp_path / "maps.c"
    src.write_text(OWN_MAPS_C)
    subprocess.run(["gcc", "-O1", "-o", str(tmp_path / "maps"), str(src)], check=True)
    trace = tmp_path / "maps.trace"
    assert capture_preload([str(tmp_path / "maps")], trace).ok
    assert main(["trace-stats", "--json", str(trace)]) == 0
    d = json.loads(capsys.readouterr().out)
    own = d["own_mappings"]
    assert own["calls"] == {"mmap": 2, "munmap": 3, "mremap": 0}
    assert own["peak_bytes"] == 4 << 20 and own["mapped_at_end"] == 0
    assert d["peak"]["bytes"] == 1000 and own["peak_with_heap"] == (4 << 20) + 1000
    assert main(["trace-stats", str(trace)]) == 0
    assert "the program's own mappings: 2 mmap, 3 munmap, 0 mremap; peak 4194304 bytes" in capsys.readouterr().out
