"""Back-pressure in exact replays: a thread that allocates waits for the frees of its blocks by other threads
(its returns), as far behind the capture's as the window allows, and for nothing else.

* A real producer/consumer (bench/programs/prodcons.c, 2 pairs of 100,000 blocks, queues of 64),
  captured with the preload tracer and replayed: the replay's peak of live bytes
  (the `live` probe, exact) is never more than 10% above the capture's, and the best of three
  replays reaches 0.8x of it (a replay's consumers may keep up better). Without back-pressure the
  producers ran ahead of their consumers (3.6x the capture's peak on 2 x 100,000 blocks).
* Made-up events (a capture cannot be made to interleave this way on demand; the conversion,
  build and replay are the real ones): a producer whose consumer lags gets SYNC ops, its consumer's
  frees name it with what they give back, a thread that only works on its own blocks gets none and
  so is not held to the capture's interleaving; the replay finishes, and the same ops file with one
  SYNC asking for more than the consumer ever gives back hangs, which shows that the replay waits.
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
from scenc.trace.capture.preload import capture_preload
from scenc.trace.replay import write_replay

from ops_reference import write_ops
from locations import REPO

ROOT = REPO
PROGRAMS = ROOT / "bench" / "programs"

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")


def live_peak(scn: Path, timeout: float = 120) -> int:
    binary = build(scn, probes=probes.c_parts("live")).binary
    out = subprocess.run([str(binary)], stdout=subprocess.PIPE, check=True, timeout=timeout).stdout
    return int(json.loads(out)["probes"]["live"]["peak_bytes"])


@pytest.mark.slow
def test_a_producer_consumer_replay_holds_the_live_bytes_its_capture_held(tmp_path):
    prodcons = tmp_path / "prodcons"
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(prodcons), str(PROGRAMS / "prodcons.c")], check=True)
    trace = tmp_path / "pc.trace"
    assert capture_preload([str(prodcons), "2", "100000"], trace).ok
    from scenc.trace.tracerlog import parse_preload_log
    report = write_replay(parse_preload_log(trace, extra_events=True), tmp_path / "pc.scn", "pc.trace",
                          touch="none")
    assert report.threads == 5 and report.peak_live_bytes > 64 * 1024
    # Each producer holds at most about 3/32 of its own peak more than in the capture (its window and a half):
    # the upper bound holds in every run. Nothing holds a replay's consumer back as the program's full queue
    # held its producer, so a replay's queues may stay shallower: 0.995-1.032x over 8 replays of 2 captures in
    # one session, but 0.60-0.80x in 5 of 32 replays in the next (before and after its changes alike, quiet
    # machine). So the lower bound asks it of the best of three replays (the queues do fill as the program's).
    # On 2 x 20,000 blocks, a tenth of a second, the capture's peak is partly its start: 0.55-0.93x.
    peaks = [live_peak(tmp_path / "pc.scn") for _ in range(3)]
    assert max(peaks) <= 1.1 * report.peak_live_bytes, (peaks, report.peak_live_bytes)
    assert max(peaks) >= 0.8 * report.peak_live_bytes, (peaks, report.peak_live_bytes)


def ev(line, tid, kind, size=None, old=None, res=None):
    return AllocEvent(line, tid, None, kind, size, 1, None, old, res, False, line, None)


def lagging_consumer_events(rounds=400):
    """P (tid 1) allocates a 4096-byte block a round that C (tid 2) frees 50 rounds later; Q (tid 3) allocates
    and frees a block of its own each round."""
    events = []
    def add(tid, kind, size=None, old=None, res=None):
        events.append(ev(len(events) + 1, tid, kind, size, old, res))
    for i in range(rounds):
        add(1, "malloc", 4096, res=0x100000 + i * 0x2000)
        add(3, "malloc", 512, res=0x900000 + i * 0x1000)
        add(3, "free", old=0x900000 + i * 0x1000)
        if i >= 50:
            add(2, "free", old=0x100000 + (i - 50) * 0x2000)
    for i in range(rounds - 50, rounds):
        add(2, "free", old=0x100000 + i * 0x2000)
    return events


@pytest.mark.slow
def test_a_producer_waits_for_its_consumer_and_for_nothing_else(tmp_path):
    scn = tmp_path / "lag.scn"
    report = write_replay(lagging_consumer_events(), scn, "made-up events")
    assert report.threads == 3
    ops = scn.with_suffix(".ops")
    h = read_header(ops.read_bytes(), ops)
    _, threads = read_ops(ops)
    producer, other, consumer = threads     # in order of first appearance: P (tid 1), Q (tid 3), C (tid 2)
    assert [op[0] for op in consumer] == ["free"] * 400 and all(op[0] == "malloc" for op in producer)

    # Each free of P's block gives back 1 + its 4096 bytes to P (thread 0).
    assert {(op[4], op[8]) for op in consumer} == {(0, 4097)}
    returns = 400 * 4097
    # P is 50 blocks (204,850 positions) ahead of its consumer in the capture, 16 windows (its W is 1/16 of its
    # own peak, 51 blocks live; the header has the widest thread's): it waits, each time its needs grew by more
    # than half a window, for what C had given back by then less W, never for more than C gives back in all.
    steps = [op[2] << 32 | op[7] for op in producer if op[1] & SYNC]
    assert h.window == 51 * 4097 // 16 and len(steps) > 100
    assert all(step > h.window // 2 for step in steps)
    assert sum(steps) <= returns - h.window
    # Q hands nothing to anyone: no SYNC, so it runs at its own pace; C only frees.
    assert not any(op[1] & SYNC for op in other + consumer)
    assert live_peak(scn, timeout=60) > 0          # it finishes

    # The same file with P's last SYNC asking for more than C ever gives back: P waits for ever.
    last = max(k for k, op in enumerate(producer) if op[1] & SYNC)
    op = producer[last]
    more = (op[2] << 32 | op[7]) + returns
    producer[last] = op[:2] + (more >> 32,) + op[3:7] + (more & 0xFFFFFFFF,) + op[8:]
    stuck = tmp_path / "stuck"
    stuck.mkdir()
    write_ops(stuck / "lag.ops", threads, h.flags, h.touch, h.window)
    assert read_ops(stuck / "lag.ops")[1] == threads
    (stuck / "lag.scn").write_text(scn.read_text())
    with pytest.raises(subprocess.TimeoutExpired):
        live_peak(stuck / "lag.scn", timeout=5)


@pytest.mark.slow
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


def test_a_failed_allocation_counts_for_nothing(tmp_path):
    """malloc(1 << 62) failing in the capture allocated nothing: it is replayed, and counts for no live bytes
    nor returns (bench/bench_convert.py's logs have such calls; positions once overflowed the SYNC step's 48
    bits on them)."""
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
