"""`scenc trace-stats` prints the same bytes whichever pass reads a tracer log: the C pass
(runtime/tools/tracestats.c, trace/profile_native.py) or profile.py's TraceStats over the Python reader's events
(SCENC_TRACE_STATS=python), text and --json, exit status included: on every tracer fixture, and on real captures
of tests/fixtures/model/collector_mix.c (threads, realloc chains, every aligned kind, the program's own
mappings), whole and cut short, and of a server's window (tests/fixtures/alloc_server.c, whose window the
Python pass reads; --whole, the C pass). A damaged log is refused by both in the same words; a C pass that
crashes is said in a sentence and an exit status, not a traceback.
"""

import random
import socket
import subprocess
import sys

import pytest

from scenc.cli import main
from scenc.errors import EXIT_RUN
from scenc.trace import profile_native
from scenc.trace.source import TraceSource
from scenc.trace.tracerlog import HEADER, KIND_END, RECORD

from locations import FIXTURES

TRACER_FIXTURES = sorted(p.name for p in (FIXTURES / "trace").glob("*.trace"))


def trace_stats(capsys, monkeypatch, argv, python: bool):
    """(exit status, stdout, stderr) of `scenc trace-stats ARGV` by one pass."""
    if python:
        monkeypatch.setenv("SCENC_TRACE_STATS", "python")
    else:
        monkeypatch.delenv("SCENC_TRACE_STATS", raising=False)
    capsys.readouterr()
    status = main(["trace-stats", *map(str, argv)])
    out, err = capsys.readouterr()
    return status, out, err


def assert_same(capsys, monkeypatch, trace, *flags):
    """The text's (exit status, stdout, stderr), once both passes printed the same text and JSON."""
    got = []
    for argv in ([*flags, trace], [*flags, "--json", trace]):
        c = trace_stats(capsys, monkeypatch, argv, python=False)
        py = trace_stats(capsys, monkeypatch, argv, python=True)
        assert c == py, argv
        got.append(c)
    return got[0]


def native(trace, whole=False):
    return profile_native.native_trace_stats(TraceSource(trace, extra_events=True, index=False), whole=whole)


@pytest.mark.parametrize("name", TRACER_FIXTURES)
def test_both_passes_print_the_same_bytes_on_the_tracer_fixtures(name, capsys, monkeypatch):
    trace = FIXTURES / "trace" / name
    assert isinstance(native(trace), profile_native.NativeTraceStats)      # the C pass does read it
    assert_same(capsys, monkeypatch, trace)


def random_log(path, seed: int, calls: int = 3000):
    """A version 2 log made up (no program makes every odd call on demand): a few threads; every allocator
    function, its failures (NULL, a throw, posix_memalign's error), realloc(p, 0), realloc(NULL, n), frees of
    NULL and of pointers never allocated, pointers returned while still live; thread starts (by threads seen
    or not) and exits; the program's mappings, unmapped in part and remapped; times from equal to seconds apart;
    the end mark, or not."""
    rnd = random.Random(seed)
    tids = [100 + i for i in range(rnd.randint(1, 5))]
    pool = [0x10000 + 0x40 * i for i in range(rnd.randint(4, 60))]
    pages = [0x7f0000000000 + 0x1000 * i for i in range(24)]
    by_thread = {tid: [] for tid in tids}
    ns = 10 ** 9
    for seq in range(calls):
        ns += rnd.choice([0, 1, 50, 999, 1000, 1500, 10 ** 5, 10 ** 7, 3 * 10 ** 9])
        tid = rnd.choice(tids)
        code = rnd.choice(list(range(1, 31)) * 3 + [40, 41, 42, 43, 44, 46])
        a = [rnd.choice([0, 1, 8, 24, 100, 4096, 5000, 1 << 20, 1 << 27]) for _ in range(3)]
        result, flags, err = rnd.choice(pool + [0]), int(rnd.random() < 0.03), int(rnd.random() < 0.1)
        if code in (3, 4, 5, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30):
            a[0] = rnd.choice(pool + [0, 0x999990])       # the block freed or reallocated
        if code == 3 and rnd.random() < 0.3:
            result = a[0]                                 # in place
        if code == 40:
            a[0] = rnd.choice(tids + [0, 999])            # the creator
        if code in (42, 43, 44):
            a[0], a[1], a[2] = rnd.choice(pages), 0x1000 * rnd.randint(0, 6), 0x1000 * rnd.randint(0, 4)
            result = rnd.choice(pages + [0])
            if code == 42:
                a[0] = 0x1000 * rnd.randint(1, 6)         # mmap's length
        by_thread[tid].append((seq, ns, tid, code, flags, err, 0, 0, *a, result))
    recs = []
    while any(by_thread.values()):                        # runs of a thread's records, threads interleaved
        tid = rnd.choice([t for t in tids if by_thread[t]])
        n = rnd.randint(1, 200)
        recs += by_thread[tid][:n]
        del by_thread[tid][:n]
    if rnd.random() < 0.7:
        recs.append((calls, ns, tids[0], KIND_END, 0, 0, 0, 0, 0, 0, 0, 0))
    path.write_bytes(HEADER.pack(b"SCNTRACE", 2, 64, tids[0], 1, 0, 0) + b"".join(RECORD.pack(*r) for r in recs))
    return path


@pytest.mark.parametrize("seed", range(12))
def test_both_passes_print_the_same_bytes_on_made_up_logs_of_every_odd_call(seed, tmp_path, capsys, monkeypatch):
    trace = random_log(tmp_path / "odd.trace", seed)
    assert isinstance(native(trace), profile_native.NativeTraceStats)
    _, text, _ = assert_same(capsys, monkeypatch, trace)
    assert "free-unknown-pointer" in text and "alloc-returned-live-pointer" in text


def test_a_log_whose_sizes_pass_64_bits_is_counted_in_python(tmp_path, capsys, monkeypatch):
    # made up: calloc(2^33, 2^33) returned a block, and malloc(2^63) twice
    recs = [(0, 10, 7, 2, 0, 0, 0, 0, 1 << 33, 1 << 33, 0, 0x1000), (1, 20, 7, 1, 0, 0, 0, 0, 1 << 63, 0, 0, 0x2000),
            (2, 30, 7, 1, 0, 0, 0, 0, 1 << 63, 0, 0, 0x3000), (3, 40, 7, KIND_END, 0, 0, 0, 0, 0, 0, 0, 0)]
    trace = tmp_path / "huge.trace"
    trace.write_bytes(HEADER.pack(b"SCNTRACE", 2, 64, 7, 1, 0, 0) + b"".join(RECORD.pack(*r) for r in recs))
    assert native(trace) is None
    _, text, _ = assert_same(capsys, monkeypatch, trace)
    assert f"peak live: {(1 << 66) + (1 << 64)} bytes" in text


def test_a_damaged_log_is_refused_by_both_passes_in_the_same_words(tmp_path, capsys, monkeypatch):
    bad = tmp_path / "bad.trace"
    bad.write_bytes(b"SCNTRACE" + bytes(56))
    status, out, err = assert_same(capsys, monkeypatch, bad)
    assert status == 64 and out == "" and err.startswith(f"{bad}:1:1: ")


def test_a_crashing_c_pass_is_said_plainly(tmp_path, capsys, monkeypatch):
    # A C pass that crashes cannot be had on demand: a stand-in program that kills itself with SIGSEGV.
    crash = tmp_path / "scenc-tracestats"
    crash.write_text("#!/bin/sh\nkill -SEGV $$\n")
    crash.chmod(0o755)
    monkeypatch.setattr("scenc.trace.native.trace_stats_program", lambda cc="gcc": crash)
    status, out, err = trace_stats(capsys, monkeypatch, [FIXTURES / "trace" / "own_maps.trace"], python=False)
    assert status == EXIT_RUN and out == ""
    assert "the C pass over" in err and "signal SIGSEGV" in err and "Traceback" not in err


@pytest.fixture(scope="module")
def mix(tmp_path_factory):
    from scenc.trace.capture.preload import capture_preload
    d = tmp_path_factory.mktemp("stats_mix")
    binary = d / "collector_mix"
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(binary), str(FIXTURES / "model" / "collector_mix.c")],
                   check=True, capture_output=True)
    trace = d / "mix.trace"
    assert capture_preload([str(binary)], trace).ok
    return trace


@pytest.mark.slow          # a build and a capture of a real program, and the Python pass over 31000 calls
def test_both_passes_print_the_same_bytes_on_a_capture_that_takes_every_path(mix, capsys, monkeypatch):
    _, text, _ = assert_same(capsys, monkeypatch, mix)
    stats = native(mix)
    # the capture takes the paths it is for (a change to the program that lost one would fail here)
    assert stats.threads >= 4 and stats.cross_thread_frees and stats.longest[0] > 512
    assert stats.mapped.calls["mmap"] >= 20 and {"posix_memalign", "aligned_alloc", "memalign"} <= set(
        stats.calls_by_kind)
    assert "realloc chains:" in text and "the program's own mappings:" in text


@pytest.mark.slow
def test_both_passes_print_the_same_bytes_on_a_log_cut_short(mix, tmp_path, capsys, monkeypatch):
    data = mix.read_bytes()
    cut = tmp_path / "cut.trace"
    cut.write_bytes(data[:len(data) * 2 // 3 + 5])
    status, text, _ = assert_same(capsys, monkeypatch, cut)
    assert status == 4 and "INCOMPLETE capture" in text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow          # a server built, captured under its client's load
def test_a_servers_window_is_read_in_python_and_its_whole_life_in_c(tmp_path, capsys, monkeypatch):
    server = tmp_path / "alloc_server"
    subprocess.run(["gcc", "-O2", "-o", str(server), str(FIXTURES / "alloc_server.c")], check=True,
                   capture_output=True)
    port, trace = free_port(), tmp_path / "server.trace"
    assert main(["capture", "-o", str(trace), "--server", f"{server} {port} 8 0 50", "--ready", f"tcp:{port}",
                 "--", sys.executable, str(FIXTURES / "alloc_client.py"), str(port), "200", "100"]) == 0
    assert native(trace) is None                                # the window: the Python pass
    assert isinstance(native(trace, whole=True), profile_native.NativeTraceStats)
    _, windowed, _ = assert_same(capsys, monkeypatch, trace)
    _, whole, _ = assert_same(capsys, monkeypatch, trace, "--whole")
    assert "window: the server's window" in windowed and "window: none taken (--whole)" in whole
