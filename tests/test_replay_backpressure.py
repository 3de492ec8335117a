"""Back-pressure in exact replays: threads stay within a window of each other in capture order.

* A real producer/consumer (bench/programs/prodcons.c, 2 pairs, queues of 64 blocks),
  captured with the preload tracer and replayed: the replay's peak of live bytes
  (the `live` probe, exact) is within 10% of the capture's. Without back-pressure the
  producers ran ahead of their consumers (3.6x the capture's peak on 2 x 100,000 blocks).
* A case that deadlocks unless a thread publishes its position before it waits on
  data: the converter is fed a made-up event stream (a capture cannot be made to
  interleave this way on demand; the conversion, build and replay are the real ones).
  The same ops file with that one SYNC flag cleared hangs, which the test shows too.
* A single-threaded capture gets no SYNC flag at all.
"""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from scenc import probes
from scenc.compiler.pipeline import build
from scenc.trace.events import AllocEvent
from scenc.trace.opsfile import HEADER, SYNC, read_header, read_ops
from scenc.trace.preload import capture_preload
from scenc.trace.replay import write_replay

from ops_reference import write_ops

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ROOT / "bench" / "programs"

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")


def live_peak(scn: Path, timeout: float = 120) -> int:
    binary = build(scn, probes=probes.c_parts("live")).binary
    out = subprocess.run([str(binary)], stdout=subprocess.PIPE, check=True, timeout=timeout).stdout
    return int(json.loads(out)["probes"]["live"]["peak_bytes"])


def test_a_producer_consumer_replay_holds_the_live_bytes_its_capture_held(tmp_path):
    prodcons = tmp_path / "prodcons"
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(prodcons), str(PROGRAMS / "prodcons.c")], check=True)
    trace = tmp_path / "pc.trace"
    assert capture_preload([str(prodcons), "2", "20000"], trace).ok
    from scenc.trace.preload_log import parse_preload_log
    report = write_replay(parse_preload_log(trace, extra_events=True), tmp_path / "pc.scn", "pc.trace",
                          touch="none")
    assert report.threads == 5 and report.peak_live_bytes > 64 * 1024
    for _ in range(2):   # the interleaving differs from run to run: the bound holds in each
        peak = live_peak(tmp_path / "pc.scn")
        assert abs(peak - report.peak_live_bytes) <= 0.10 * report.peak_live_bytes, (peak, report.peak_live_bytes)


def ev(line, tid, kind, size=None, old=None, res=None):
    return AllocEvent(line, tid, None, kind, size, 1, None, old, res, False, line, None)


def blocked_consumer_events(rounds=400):
    """C makes one call, then P allocates `rounds` blocks (kept) while Q allocates and frees as many,
    interleaved with P; then C frees P's last block, which it must wait for."""
    events, line = [ev(1, 3, "malloc", 100, res=0x10)], 1
    for i in range(rounds):
        events.append(ev(line + 1, 1, "malloc", 4096, res=0x100000 + i * 0x2000))
        events.append(ev(line + 2, 2, "malloc", 4096, res=0x900000 + i * 0x2000))
        events.append(ev(line + 3, 2, "free", old=0x900000 + i * 0x2000))
        line += 3
    last = 0x100000 + (rounds - 1) * 0x2000
    events.append(ev(line + 1, 3, "free", old=last))
    for i in range(rounds - 1):
        events.append(ev(line + 2 + i, 1, "free", old=0x100000 + i * 0x2000))
    events.append(ev(line + rounds + 1, 3, "free", old=0x10))
    return events


def test_a_thread_waiting_on_data_publishes_its_position_first(tmp_path):
    scn = tmp_path / "blocked.scn"
    report = write_replay(blocked_consumer_events(), scn, "made-up events")
    assert report.threads == 3
    _, threads = read_ops(scn.with_suffix(".ops"))
    consumer = threads[0]      # replay threads in order of first appearance: C (tid 3), P, Q
    assert [op[0] for op in consumer] == ["malloc", "free", "free"]
    # Its free of P's last block comes long after its only other call in capture order, with other threads'
    # calls between: it carries SYNC, so the consumer publishes its position before waiting for P's block.
    assert consumer[1][1] & SYNC
    assert live_peak(scn, timeout=60) > 0          # it finishes

    # Without that SYNC the consumer would wait on data with the position it started at, and P, more than the
    # window ahead of it, would wait for it forever: the replay hangs.
    ops = scn.with_suffix(".ops")
    h = read_header(ops.read_bytes(), ops)
    free = consumer[1]
    assert free[0] == "free" and free[2] << 32 | free[7] > 0             # its SYNC step
    consumer[1] = (free[0], free[1] & ~SYNC, 0) + free[3:7] + (0,) + free[8:]
    stale = tmp_path / "stale"
    stale.mkdir()
    write_ops(stale / "blocked.ops", threads, h.flags, h.touch, h.window)
    assert read_ops(stale / "blocked.ops")[1] == threads
    (stale / "blocked.scn").write_text(scn.read_text())
    with pytest.raises(subprocess.TimeoutExpired):
        live_peak(stale / "blocked.scn", timeout=5)


def test_a_single_threaded_capture_gets_no_sync_op(tmp_path):
    events, live = [], []
    for i in range(3000):
        events.append(ev(len(events) + 1, 7, "malloc", 16 + i % 500, res=0x1000 + i * 0x400))
        live.append(0x1000 + i * 0x400)
        if i % 3 == 2:
            events.append(ev(len(events) + 1, 7, "free", old=live.pop(0)))
    scn = tmp_path / "one.scn"
    write_replay(events, scn, "made-up events")
    data = scn.with_suffix(".ops").read_bytes()
    assert read_header(data, "one.ops").window > 0 and HEADER.size == 40
    _, threads = read_ops(scn.with_suffix(".ops"))
    assert len(threads) == 1 and not any(op[1] & SYNC for op in threads[0])


def test_a_failed_allocation_moves_no_position(tmp_path):
    """malloc(1 << 62) failing in the capture allocated nothing: it must not count 2^62 positions
    (bench/bench_convert.py's logs have such calls; the SYNC step then overflowed its 48 bits)."""
    events = []
    for i in range(200):
        tid = 7 + i % 2
        events.append(ev(len(events) + 1, tid, "malloc", 64, res=0x1000 + i * 0x100))
        if i == 100:
            events.append(AllocEvent(len(events) + 1, tid, None, "malloc", 1 << 62, 1, None, None, 0, True,
                                     len(events) + 1, None))
    scn = tmp_path / "failed.scn"
    report = write_replay(events, scn, "made-up events")
    assert report.calls == 201
    _, threads = read_ops(scn.with_suffix(".ops"))
    assert sum(map(len, threads)) == 201
