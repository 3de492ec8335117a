"""The exact-replay converter (runtime/tools/convert.c, called by scenc.trace.replay).

It replaced a Python loop; before that loop was removed, both converted every
capture below and wrote the same bytes and the same report. What the Python
converter wrote then is kept in tests/fixtures/trace/converted.json (a digest
of the decoded ops file and the whole report, per capture and options), so the
C converter is still held to it (but for the rules changed since, after which the figures of the
cases they touch were written anew: the ops of the single-threaded cases are still the Python
converter's, and for 21 of the 53 cases the whole file and report are):
- a thread's freed slots stay its own, taken by another thread without a wait only once the replay
  has joined it, and with a wait only when the slots would outgrow twice the live objects; a creator
  joins only as many ended threads as keep the replay within the capture's most threads alive;
- back-pressure counts each thread's returns (its blocks freed by other threads): SYNC steps, the
  header's window and the aux and size of cross-thread frees changed in every multi-threaded case,
  and the window of single-threaded ones with mappings or a large peak;
- the ltrace logs of tests/fixtures/trace and tests/fixtures/ltrace-samples;
- small real tracer logs (tests/fixtures/trace/*.trace, captured with scenc's
  tracer: mt_handoff.c 3 threads x 20 rounds, cxx_new.cc, and the OWN_MAPS_C
  and MAIN_EXITS_C programs of tests/test_replay_fidelity.py): threads, thread
  lifetimes, the program's own mappings, C++ operators;
- random event streams (every kind, failed calls, unknown pointers, pointers
  returned twice, thread records in any order, overlapping and partial mappings);
- a hand-made log whose moved realloc must be put before the reuse of its block.
Fresh captures (which differ from run to run) check that a tracer log read by
the converter itself converts exactly as the same events streamed to it.
"""

import hashlib
import json
import lzma
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scenc.trace.ltrace import parse_file
from scenc.trace.opsfile import read_header, read_ops
from scenc.trace.capture.preload import capture_preload
from scenc.trace.tracerlog import HEADER, first_chunk, parse_preload_log
from scenc.trace.replay import EVENT, EVENT_CODE, convert_events, convert_log
from scenc.trace.native import converter_program
from locations import REPO
from converter_inputs import TRACES, race_log, random_events

ROOT = REPO
FIXTURES = ROOT / "tests" / "fixtures" / "trace"
SAMPLES = ROOT / "tests" / "fixtures" / "ltrace-samples"
EXPECTED = FIXTURES / "converted.json"
PROGRAMS = ROOT / "bench" / "programs"


# --------------------------------------------------------------------------- what a conversion gives
def ops_digest(path: Path) -> str:
    """The ops file decoded (header, thread flags, every op): the same whatever the file's encoding."""
    data = path.read_bytes()
    h = read_header(data, path)
    slots, threads = read_ops(path)
    return hashlib.sha256(repr((h.threads, h.touch, slots, h.ops, h.window, h.flags, threads)).encode()).hexdigest()


def report_dict(report) -> dict:
    return {"threads": report.threads, "calls": report.calls, "counts": report.counts, "tids": report.tids,
            "cross_thread_waits": report.cross_thread_waits, "peak_live_bytes": report.peak_live_bytes,
            "peak_line": report.peak_line, "live_at_end": report.live_at_end, "slots": report.slots,
            "degraded": [[what, n, list(report.degraded_lines[what])] for what, n in report.degraded.items()],
            "trace_kinds": dict(sorted(report.trace_kinds.items())), "spawned": report.spawned,
            "joined": report.joined, "peak_threads": report.peak_threads, "maps": report.maps,
            "mapped_peak": report.mapped_peak, "touch": report.touch}


def ltrace_events(name: str, tmp: Path) -> list:
    if name.endswith(".xz"):
        plain = tmp / name[:-3]
        plain.write_bytes(lzma.decompress((SAMPLES / name).read_bytes()))
        return list(parse_file(plain))
    return list(parse_file(FIXTURES / name))


# name -> (how to get the capture, touch, main_tid, extra records)
LTRACE = sorted(p.name for p in FIXTURES.glob("*.log")) + sorted(p.name for p in SAMPLES.glob("*.log.xz"))
CASES = ([(f"ltrace:{n}", touch, tid) for n in LTRACE for touch, tid in (("pages", None), ("none", 0))]
         + [(f"log:{n}", touch, extra) for n in TRACES for touch, extra in (("pages", True), ("first", False))]
         + [(f"random:{seed}", touch, tid) for seed in range(8) for touch, tid in (("all", 100), ("none", None))]
         + [("race", "pages", 42)])


def log_pid(path: Path) -> int:
    return HEADER.unpack(path.read_bytes()[:HEADER.size])[3]


def convert_case(case, tmp: Path, convert=convert_events):
    """(ops digest, report) of one case; `convert` is the event converter (the Python one when the expected
    figures were made)."""
    name, touch, option = case
    ops = tmp / "case.ops"
    if name.startswith("ltrace:"):
        report = convert(iter(ltrace_events(name[7:], tmp)), ops, touch, option)
    elif name.startswith("log:"):
        path = FIXTURES / name[4:]
        tid = log_pid(path) if option else None
        if convert is convert_events:
            report = convert_log(path, ops, touch, tid, extra=option)[0]
        else:
            report = convert(parse_preload_log(path, extra_events=option), ops, touch, tid)
    elif name.startswith("random:"):
        report = convert(iter(random_events(int(name[7:]))), ops, touch, option)
    else:
        path = race_log(tmp / "race.trace")
        report = convert_log(path, ops, touch, option)[0] if convert is convert_events else \
            convert(parse_preload_log(path), ops, touch, option)
    return ops_digest(ops), report_dict(report)


def case_id(case) -> str:
    return f"{case[0]}-{case[1]}-{case[2]}"


@pytest.fixture(scope="module")
def expected():
    return json.loads(EXPECTED.read_text())


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_the_converter_writes_what_the_python_converter_wrote(case, expected, tmp_path):
    digest, report = convert_case(case, tmp_path)
    want = expected[case_id(case)]
    assert report == want["report"]
    assert digest == want["ops"]


# --------------------------------------------------------------------------- fresh captures
@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    d = tmp_path_factory.mktemp("captures")
    out = {}
    for name, source, args in (("mt_handoff", FIXTURES / "mt_handoff.c", ["4", "300"]),
                               ("prodcons", PROGRAMS / "prodcons.c", ["2", "5000"]),
                               ("thread_churn", PROGRAMS / "thread_churn.c", ["40", "200"])):
        binary = d / name
        subprocess.run(["gcc", "-O2", "-pthread", "-fno-builtin", "-o", str(binary), str(source)], check=True)
        assert capture_preload([str(binary), *args], d / f"{name}.trace").ok
        out[name] = d / f"{name}.trace"
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mt_handoff", "prodcons", "thread_churn"])
def test_a_tracer_log_read_by_the_converter_converts_as_its_events_streamed(captures, name, tmp_path):
    path = captures[name]
    pid = log_pid(path)
    read, log = convert_log(path, tmp_path / "read.ops", "pages", pid)
    streamed = convert_events(iter(list(parse_preload_log(path, extra_events=True))), tmp_path / "streamed.ops",
                              "pages", pid)
    assert (tmp_path / "read.ops").read_bytes() == (tmp_path / "streamed.ops").read_bytes()
    assert report_dict(read) == report_dict(streamed)
    info = parse_preload_log(path).info
    assert (log["records"], log["threads"], log["missing"], log["ended"], log["chunks"]) == \
        (info.records, info.threads, info.missing, info.ended, info.chunks)
    assert read.calls == info.records and read.spawned == len(info.threads) - 1


# --------------------------------------------------------------------------- what is left behind
@pytest.mark.parametrize("name", ["prodcons", "thread_churn"])
def test_touch_only_chooses_as_the_whole_conversion_does(captures, name, tmp_path):
    """--touch-only (a model's touch_new): prodcons's sample of pages decides (it writes the first and last
    byte of blocks up to 32 KiB), so the converter reads the log's index only and writes nothing; thread_churn's
    blocks are too small to sample, so it converts the whole log as --touch auto does."""
    from scenc.trace.replay import auto_touch
    path = captures[name]
    whole, _ = convert_log(path, tmp_path / "whole.ops", "auto", log_pid(path))
    assert auto_touch(path, log_pid(path)) == whole.touch
    proc = subprocess.run([str(converter_program()), "--log", str(path), "--ops", str(tmp_path / "only.ops"),
                           "--touch", "auto", "--touch-only"], capture_output=True, text=True, check=True)
    data = json.loads(proc.stdout)
    sampled = whole.touch_auto["fresh_pages"] >= 16
    assert sampled == (name == "prodcons"), whole.touch_auto
    assert (set(data) == {"touch", "touch_auto"}) == sampled and data["touch"] == whole.touch
    assert (tmp_path / "only.ops").exists() != sampled
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]      # no spool or temporary file


def leftovers(folder: Path) -> list:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") or p.suffix == ".ops")


def test_an_event_source_that_fails_midway_leaves_no_ops_file(tmp_path):
    def events():
        yield from random_events(1, 500)
        raise ValueError("the parser gave up")
    with pytest.raises(ValueError, match="gave up"):
        convert_events(events(), tmp_path / "x.ops")
    assert leftovers(tmp_path) == []


def test_ctrl_c_leaves_no_ops_file(tmp_path):
    proc = subprocess.Popen([str(converter_program()), "--events", "--ops", str(tmp_path / "x.ops")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    events = random_events(2, 3000)
    proc.stdin.write(b"".join(EVENT.pack(e.line, e.size or 0, e.nmemb, e.align or 0, e.old_ptr or 0,
                                         e.result_ptr or 0, e.tid, EVENT_CODE[e.kind], e.failed) for e in events))
    proc.stdin.flush()
    deadline = time.monotonic() + 30
    while not any(p.name.startswith(".ops-") for p in tmp_path.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)                      # the events are being converted, the pipe still open
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 130
    proc.stdin.close()
    proc.stdout.close()
    assert leftovers(tmp_path) == []


def test_a_damaged_log_leaves_no_ops_file(tmp_path):
    data = (FIXTURES / "mt_handoff_3x20.trace").read_bytes()
    bad = tmp_path / "bad.trace"
    bad.write_bytes(data + data[64 * 3:64 * 4])        # a record of thread 1 again, at the end
    with pytest.raises(Exception, match="bad.trace:.*sequence number .* the log is damaged"):
        convert_log(bad, tmp_path / "bad.ops")
    assert leftovers(tmp_path) == []


def test_a_log_cut_inside_a_record_converts_what_it_holds_and_says_where(tmp_path):
    data = (FIXTURES / "mt_handoff_3x20.trace").read_bytes()
    whole = (len(data) - 64) // 64
    cut = tmp_path / "cut.trace"
    cut.write_bytes(data[:-40])
    proc = subprocess.run([sys.executable, "-m", "scenc.cli", "convert", str(cut), "-o", str(tmp_path / "cut.scn")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 4, proc.stderr
    where = f"reading stopped at byte {64 * whole} of {len(data) - 40}: the log is cut short inside a record " \
            f"(24 bytes of record {whole + 1})"
    assert where in proc.stderr and where in (tmp_path / "cut.scn").read_text()
    _, threads = read_ops(tmp_path / "cut.ops")
    assert sum(len(t) for t in threads) > 0


@pytest.mark.parametrize("version", [3, 6])
def test_a_compact_log_cut_anywhere_converts_what_the_python_reader_reads(captures, tmp_path, version):
    """The converter reads version 3 and 6 chunks with the one decoder (runtime/tracer/tracelog.h): a log cut at any
    byte converts the records the Python reader gives, in the same order, and both say where the log stops.
    Version 3: tests/fixtures/trace/mt_handoff_v3.trace; version 6 (4's chunks, window marks, CPU clocks and a
    chunk's trailer): a fresh capture."""
    data = (FIXTURES / "mt_handoff_v3.trace" if version == 3 else captures["mt_handoff"]).read_bytes()
    assert struct.unpack_from("<I", data, 8)[0] == version
    start = first_chunk(data[:64])
    for at in [start, start + 30, len(data) // 3, len(data) // 2 + 7, len(data) - 5, len(data)]:
        cut = tmp_path / "cut.trace"
        cut.write_bytes(data[:at])
        read, log = convert_log(cut, tmp_path / "read.ops", "pages", log_pid(cut))
        python = parse_preload_log(cut, extra_events=True)
        streamed = convert_events(iter(list(python)), tmp_path / "streamed.ops", "pages", log_pid(cut))
        assert (tmp_path / "read.ops").read_bytes() == (tmp_path / "streamed.ops").read_bytes(), at
        assert report_dict(read) == report_dict(streamed), at
        assert (log["stopped_at"], log["stop_reason"] or "", log["records"]) == \
            (python.info.stopped_at, python.info.stop_reason, python.info.records), at


def test_a_converter_that_crashes_is_a_convert_error_naming_the_signal_not_an_interrupt(tmp_path, monkeypatch):
    # Faked: the real converter cannot be made to crash on demand, so a script that kills itself with SIGSEGV
    # stands in for it. A Ctrl-C (exit 130) is an interrupt; any other signal is a crash, said as such.
    import scenc.trace.native as tracer_build
    from scenc.trace.replay import ConvertError, convert_events
    crash = tmp_path / "crash.sh"
    crash.write_text("#!/bin/sh\nkill -SEGV $$\n")
    crash.chmod(0o755)
    monkeypatch.setattr(tracer_build, "converter_program", lambda: crash)
    with pytest.raises(ConvertError, match=r"the converter failed \(signal SIGSEGV\)"):
        convert_events([], tmp_path / "x.ops")
    stop = tmp_path / "stop.sh"
    stop.write_text("#!/bin/sh\nexit 130\n")
    stop.chmod(0o755)
    monkeypatch.setattr(tracer_build, "converter_program", lambda: stop)
    with pytest.raises(KeyboardInterrupt):
        convert_events([], tmp_path / "x.ops")


@pytest.mark.parametrize("model", [False, True])
def test_a_converter_or_collector_that_fails_is_a_clear_message_and_exit_3(tmp_path, model):
    """A real failure, not a fake: under a file size limit of 1 KiB (RLIMIT_FSIZE) the converter (exact) and the
    model's collector (--model) are killed by SIGXFSZ as they write. `scenc convert` says so in one sentence,
    exits 3 and leaves nothing behind; it printed a Python traceback and exited 1."""
    import resource
    from scenc.trace.native import converter_program, model_collector_program
    converter_program(), model_collector_program()          # built before the limit, which would stop gcc too
    capture = FIXTURES / "mt_handoff_3x20.trace"
    out = tmp_path / "out.scn"
    argv = ["convert", str(capture), "-o", str(out)]
    argv += ["--model", "--touch", "first", "--no-measure"] if model else []

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))
    proc = subprocess.run([sys.executable, "-c", "import sys; from scenc.cli import main; sys.exit(main())", *argv],
                          capture_output=True, text=True, timeout=120, preexec_fn=limited)
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    tool = "the model's collector failed on" if model else "the converter failed"
    assert proc.stderr.startswith(f"scenc convert: {tool}") and "(signal SIGXFSZ); nothing written" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []
