"""DJ Delorie's workloads (.wl): `scenc trace-stats` and `scenc convert` read them.

The files are written by the tests' own encoder (workload_encoder.py, from the format's description,
independent of scenc's reader); the exact replay and the model are built and run for real.
"""
import json
import subprocess
import sys

import pytest

from scenc.cli import main
from scenc.errors import EXIT_INCOMPLETE, EXIT_OK, EXIT_USAGE
from scenc.trace.source import TraceSource
from scenc.trace.workload import slot_pointer

from workload_encoder import Recorder, raw, varint


def scenc(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def stats_json(capsys, path):
    code, out, err = scenc(capsys, "trace-stats", path, "--json")
    return code, json.loads(out)


def handoff(path, n=1000):
    """1000 mallocs of 16 + 8i bytes in one thread, all freed afterwards by another."""
    wl = Recorder()
    for i in range(n):
        wl.malloc(1, 0x10000 + 0x1000 * i, 16 + 8 * i)
    for i in range(n):
        wl.free(2, 0x10000 + 0x1000 * i)
    wl.save(path)
    return path


def test_the_encoder_writes_big_endian_seven_bit_varints():
    assert varint(0) == b"\x00" and varint(127) == b"\x7f"
    assert varint(128) == b"\x81\x00" and varint(300) == b"\x82\x2c" and varint(16384) == b"\x81\x80\x00"


def test_two_threads_a_thousand_mallocs_freed_by_the_other(tmp_path, capsys):
    wl = handoff(tmp_path / "handoff.wl")
    code, d = stats_json(capsys, wl)
    assert code == EXIT_OK
    assert d["format"] == "workload" and d["has_times"] is False and d["has_threads"] is True
    assert d["calls_by_kind"] == {"malloc": 1000, "free": 1000}
    assert d["frees"]["cross_thread"] == 1000 and d["frees"]["of_known_blocks"] == 1000
    assert d["peak"]["bytes"] == 4_012_000 == sum(16 + 8 * i for i in range(1000))
    assert d["peak"]["objects"] == 1000 and d["live_at_end"] == {"objects": 0, "bytes": 0}
    assert d["threads"] == 2 and d["threads_alive"]["starts"] == 1
    assert d["workload"]["threads"] == 2 and d["workload"]["slots"] == 1001
    code, out, _ = scenc(capsys, "trace-stats", wl)
    assert code == EXIT_OK
    assert out.startswith(f"trace {wl}: DJ Delorie workload (glibc trace_run's .wl)")
    assert "a workload records no times" in out and "capture with -tt" not in out
    assert "peak live: 4012000 bytes in 1000 blocks" in out
    assert "cross-thread frees: 1000 of 1000 (100.0%)" in out


@pytest.mark.slow
def test_the_exact_replay_of_a_workload_builds_and_runs(tmp_path, capsys):
    wl = handoff(tmp_path / "handoff.wl")
    code, out, _ = scenc(capsys, "convert", wl, "-o", tmp_path / "x.scn")
    assert code == EXIT_OK, out
    assert "2000 calls" in out and "1 thread(s) created during the replay" in out
    assert "peak live: 4012000 bytes" in out
    # As a user runs it: its own process, the replay's program built and run.
    proc = subprocess.run([sys.executable, "-m", "scenc.cli", "exec", str(tmp_path / "x.scn")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines() if line.startswith("trace[")}
    assert rows == {"trace[0]": ["1000", "0", *rows["trace[0]"][2:]], "trace[1]": ["0", "1000", *rows["trace[1]"][2:]]}


@pytest.mark.slow
def test_a_workload_fits_a_model_that_runs(tmp_path, capsys):
    wl = handoff(tmp_path / "handoff.wl", n=300)
    code, out, err = scenc(capsys, "convert", wl, "--model", "--no-calibrate", "-o", tmp_path / "m.scn")
    assert code == EXIT_OK, err
    assert "modelled" in out and "cross-thread frees              100.0%        100.0%" in out


def test_a_thread_runs_when_the_sync_it_waits_for_is_written(tmp_path, capsys):
    """A producer and a consumer taking turns: each block is freed by the other thread right after it was
    made, so at most two are live (running the producer to its end first would make all 200 live)."""
    wl = Recorder()
    for i in range(200):
        wl.malloc(1, 0x1000 * (i + 1), 100)
        wl.free(2, 0x1000 * (i + 1))
    wl.save(tmp_path / "turns.wl")
    code, d = stats_json(capsys, tmp_path / "turns.wl")
    assert code == EXIT_OK
    assert d["frees"]["cross_thread"] == 200 and d["peak"]["bytes"] <= 200
    events = list(TraceSource(tmp_path / "turns.wl", extra_events=True).events)
    assert [e.kind for e in events[:4]] == ["malloc", "thread_start", "free", "malloc"]
    assert events[1].tid == 2 and events[1].size == 1          # started by the first thread (tid 1)
    assert [e.line for e in events] == list(range(1, len(events) + 1))


def test_calls_of_every_kind_and_their_slots(tmp_path):
    wl = Recorder()
    wl.malloc(1, 0xA0, 10)
    wl.realloc(1, 0xA0, 0xA0, 20)          # in place
    wl.realloc(1, 0xA0, 0xB0, 4000)        # moved
    wl.realloc(1, 0, 0xC0, 30)             # realloc(NULL, n)
    wl.realloc(1, 0xC0, 0, 0)              # realloc(p, 0) returned NULL: freed p
    wl.realloc(1, 0xB0, 0, 1 << 40)        # failed: p stays
    wl.calloc(1, 0xD0, 64)
    wl.memalign(1, 0xE0, 4096, 100)
    wl.malloc(1, 0, 1 << 50)               # failed malloc
    wl.free(1, 0)                          # free(NULL)
    for p in (0xB0, 0xD0, 0xE0):
        wl.free(1, p)
    wl.save(tmp_path / "kinds.wl")
    events = list(TraceSource(tmp_path / "kinds.wl").events)
    a, b, c, d, e = (slot_pointer(s) for s in (1, 2, 3, 4, 5))   # the encoder numbers addresses from slot 1
    got = [(ev.kind, ev.size, ev.align, ev.old_ptr, ev.result_ptr, ev.failed) for ev in events]
    assert got == [
        ("malloc", 10, None, None, a, False),
        ("realloc", 20, None, a, a, False),
        ("realloc", 4000, None, a, b, False),
        ("realloc", 30, None, 0, c, False),
        ("realloc", 0, None, c, 0, False),
        ("realloc", 1 << 40, None, b, 0, True),
        ("calloc", 64, None, None, d, False),
        ("memalign", 100, 4096, None, e, False),
        ("malloc", 1 << 50, None, None, 0, True),
        ("free", None, None, 0, None, False),
        ("free", None, None, b, None, False),
        ("free", None, None, d, None, False),
        ("free", None, None, e, None, False),
    ]
    assert {ev.tid for ev in events} == {1} and all(ev.time_s is None for ev in events)


def test_valloc_pvalloc_and_an_allocation_into_a_full_slot(tmp_path, capsys):
    data = raw([[("VALLOC", 1, 5000), ("PVALLOC", 2, 10), ("MALLOC", 1, 8), ("FREE", 1), ("FREE", 2), ("FREE", 3),
                 ("NOP",), ("DONE",)]], slots=4, syncs=0)
    (tmp_path / "v.wl").write_bytes(data)
    events = list(TraceSource(tmp_path / "v.wl").events)
    assert [(e.kind, e.old_ptr) for e in events] == [
        ("valloc", None), ("pvalloc", None), ("free", slot_pointer(1)), ("malloc", None),
        ("free", slot_pointer(1)), ("free", slot_pointer(2)), ("free", 0)]
    code, d = stats_json(capsys, tmp_path / "v.wl")
    assert code == EXIT_OK
    anomalies = d["parse"]["anomalies"]
    assert anomalies["wl-slot-refilled"]["count"] == 1 and anomalies["wl-free-of-empty-slot"]["count"] == 1
    assert d["live_at_end"]["objects"] == 0


def test_a_workload_is_known_by_its_first_byte_whatever_its_name(tmp_path, capsys):
    (tmp_path / "capture.bin").write_bytes(raw([[("MALLOC", 1, 8), ("FREE", 1), ("DONE",)]], slots=2, syncs=0))
    code, d = stats_json(capsys, tmp_path / "capture.bin")
    assert code == EXIT_OK and d["format"] == "workload" and d["calls_by_kind"] == {"malloc": 1, "free": 1}


def test_three_threads_each_started_by_the_first(tmp_path, capsys):
    wl = Recorder()
    for t in (1, 2, 3):
        wl.malloc(t, 0x100 * t, 8 * t)
    wl.free(3, 0x100)                       # each frees the block of the thread before it
    wl.free(1, 0x200)
    wl.free(2, 0x300)
    wl.save(tmp_path / "three.wl")
    code, d = stats_json(capsys, tmp_path / "three.wl")
    assert code == EXIT_OK
    assert d["threads"] == 3 and d["frees"]["cross_thread"] == 3 and d["threads_alive"]["starts"] == 2
    assert d["calls_by_thread"] == {str(t): {"malloc": 1, "free": 1} for t in (1, 2, 3)}
    assert TraceSource(tmp_path / "three.wl").main_tid() == 1


# --------------------------------------------------------------------------- damaged workloads
def test_a_cut_workload_is_read_up_to_the_cut_and_called_incomplete(tmp_path, capsys):
    whole = handoff(tmp_path / "whole.wl", n=50).read_bytes()
    (tmp_path / "cut.wl").write_bytes(whole[:-30])
    code, out, _ = scenc(capsys, "trace-stats", tmp_path / "cut.wl")
    assert code == EXIT_INCOMPLETE
    assert "INCOMPLETE capture: the workload is cut short: a thread's stream runs out at byte" in out
    code, d = stats_json(capsys, tmp_path / "cut.wl")
    assert d["calls_by_kind"]["malloc"] == 50 and 30 < d["calls_by_kind"]["free"] < 50


def test_threads_that_wait_for_ever_are_named(tmp_path, capsys):
    data = raw([[("MALLOC", 1, 8), ("DONE",)], [("SYNC_R", 1), ("FREE", 1), ("DONE",)],
                [("SYNC_R", 2), ("DONE",)]], slots=2, syncs=2)
    (tmp_path / "stuck.wl").write_bytes(data)
    code, out, _ = scenc(capsys, "trace-stats", tmp_path / "stuck.wl")
    assert code == EXIT_INCOMPLETE
    assert "2 thread(s) (tid 2, 3) wait for syncs no thread writes" in out


@pytest.mark.parametrize("data, words", [
    (b"\x05\x01", "byte 0: it starts with byte 0x05, not ALLOC_PTRS (0x08)"),
    (bytes([8, 2, 9, 0, 10, 1]), "the main stream has no DONE"),
    (bytes([8, 2, 9, 0, 10, 2, 11, 9, 1, 1]), "NTHREADS declares 2 threads but 1 START_THREADs follow"),
    (bytes([8, 2, 9, 0, 10, 1, 11, 99, 1]), "a thread starts at byte 99, outside the file"),
    (bytes([8, 2, 9, 0, 10, 1, 11, 9, 1, 0x42, 1]), "byte 9 (thread 1): opcode 0x42 in a thread's stream"),
    (bytes([8, 2, 9, 0, 10, 1, 11, 9, 1, 2, 7, 8, 1]), "byte 9 (thread 1): MALLOC into slot 7, beyond the 2 slots"),
    (bytes([8, 2, 9, 0, 10, 1, 11, 9, 1, 6, 3, 1]), "byte 9 (thread 1): SYNC_W 3: syncs are numbered 1 to 0"),
])
def test_a_damaged_workload_is_refused_with_the_byte(tmp_path, capsys, data, words):
    path = tmp_path / "bad.wl"
    path.write_bytes(data)
    code, out, err = scenc(capsys, "trace-stats", path)
    assert code == EXIT_USAGE, (out, err)
    assert err.startswith(f"{path}:") and words in err and "Traceback" not in err


def test_a_text_file_named_wl_is_refused_as_a_workload(tmp_path, capsys):
    (tmp_path / "notes.wl").write_text("= Start\n")
    code, _, err = scenc(capsys, "convert", tmp_path / "notes.wl", "-o", tmp_path / "x.scn")
    assert code == EXIT_USAGE and "not a DJ Delorie workload" in err
    assert not (tmp_path / "x.scn").exists()
