"""The layout probe: what it records under real allocators, and what
layoutstats makes of it -- checked against hand-made cases and against a
plain event-by-event replay of the recorded addresses."""

import random
import subprocess
import sys

import numpy as np
import pytest

from scenc.probes import heapmap, layoutfile, layoutstats
from scenc.probes.layoutfile import ALLOC, DTYPE, FREE
from scenc.probes.single import run_once
from locations import REPO

ALLOCATORS = ["glibc", "jemalloc", "tcmalloc", "mimalloc"]

# Every kind of allocation call, sizes from tiny to above glibc's mmap threshold.
MIXED = """\
scenario "mixed"
seed 3
thread worker * 2 {
    pool objs[200]
    for i in 0 .. 200 { objs[i] = malloc(uniform(1, 3000)) }
    repeat 400 {
        i = random(200)
        free(objs[i])
        objs[i] = malloc(choice(8, 24, 100, 1000, 5000, 200_000))
    }
    a = calloc(7, 13)
    b = aligned_alloc(64, 256)
    c = memalign(4096, 100)
    d = posix_memalign(32, 40)
    a = realloc(a, 10_000)
    free(a)
    free(b)
    free(c)
    free(d)
    free_all(objs)
}
"""

# Hoard's cache-thrash with every thread started together: each thread owns
# one small block at a time and writes it.
THRASH = """\
scenario "thrash"
param threads = 4
thread worker * threads {
    barrier
    repeat 200 {
        p = malloc(8)
        write(p, 2000)
        free(p)
    }
}
"""


def scenario(tmp_path, text):
    path = tmp_path / "s.scn"
    path.write_text(text)
    return path


def records(rows):
    """Records from (seq, addr, size, usable, thread, event) tuples."""
    out = np.zeros(len(rows), dtype=DTYPE)
    for i, (seq, addr, size, usable, thread, event) in enumerate(rows):
        out[i] = (seq, addr, size, usable, 0, thread, 0 if event == ALLOC else 6, event)
    return np.sort(out, order="seq")


# ----------------------------------------------------- a plain replay, for reference


def replay(recs, line=64):
    """The figures by walking the events one by one, with every covered line."""
    live = {}                 # addr -> (size, owner)
    on_line = {}              # line -> {owner: live blocks touching it}
    shared, used = set(), set()
    last_owner = {}           # addr -> owner of the latest block that started there
    reuse = handoffs = 0
    live_bytes = peak = 0
    for r in recs:
        addr, size, owner = int(r["addr"]), int(r["size"]), int(r["thread"])
        if r["event"] == ALLOC:
            if addr in last_owner:
                reuse += 1
                handoffs += last_owner[addr] != owner
            last_owner[addr] = owner
            live[addr] = (size, owner)
            live_bytes += size
            peak = max(peak, live_bytes)
            for ln in range(addr // line, (addr + size - 1) // line + 1) if size else ():
                used.add(ln)
                owners = on_line.setdefault(ln, {})
                owners[owner] = owners.get(owner, 0) + 1
                if sum(1 for c in owners.values() if c) >= 2:
                    shared.add(ln)
        else:
            if addr not in live:
                continue
            size, owner = live.pop(addr)
            live_bytes -= size
            for ln in range(addr // line, (addr + size - 1) // line + 1) if size else ():
                on_line[ln][owner] -= 1
    return {"shared_lines": len(shared), "lines_used": len(used), "handoffs": handoffs,
            "reuse": reuse, "peak_live_bytes": peak}


def assert_matches_replay(recs):
    figures = layoutstats.summarize(recs)
    expected = replay(recs)
    assert figures["shared_lines"] == expected["shared_lines"]
    assert figures["lines_used"] == expected["lines_used"]
    assert figures["handoffs"] == expected["handoffs"]
    assert figures["peak_live_bytes"] == expected["peak_live_bytes"]
    assert round(figures["reuse_fraction"] * figures["allocations"]) == expected["reuse"]
    return figures


# -------------------------------------------------------------- known answers


def test_two_threads_on_one_line_at_once_share_it():
    figures = layoutstats.summarize(records([
        (0, 0x1000, 8, 16, 0, ALLOC),
        (1, 0x1010, 8, 16, 1, ALLOC),   # same line, other thread, both alive
        (2, 0x1000, 8, 0, 0, FREE),
        (3, 0x1010, 8, 0, 1, FREE),
    ]))
    assert figures["shared_lines"] == 1 and figures["lines_used"] == 1
    assert figures["peak_live_bytes"] == 16
    assert figures["internal_frag"] == pytest.approx(1 - 16 / 32)


def test_one_line_used_in_turn_is_not_shared():
    figures = layoutstats.summarize(records([
        (0, 0x1000, 8, 16, 0, ALLOC),
        (1, 0x1000, 8, 0, 0, FREE),
        (2, 0x1010, 8, 16, 1, ALLOC),   # same line, other thread, after the first was freed
        (3, 0x1010, 8, 0, 1, FREE),
        (4, 0x1020, 8, 16, 0, ALLOC),   # same thread as a live neighbour: not sharing
        (5, 0x1030, 8, 16, 0, ALLOC),
    ]))
    assert figures["shared_lines"] == 0
    assert figures["peak_live_bytes"] == 16


def test_only_the_edge_lines_of_a_big_block_can_be_shared():
    figures = layoutstats.summarize(records([
        (0, 0x1030, 200, 208, 0, ALLOC),   # lines 0x1000 .. 0x10c0: four lines
        (1, 0x1000, 16, 16, 1, ALLOC),     # first line, other thread
        (2, 0x10f8, 8, 8, 2, ALLOC),       # last line, a third thread
    ]))
    assert figures["lines_used"] == 4
    assert figures["shared_lines"] == 2


def test_a_block_given_to_another_thread_is_a_handoff():
    figures = layoutstats.summarize(records([
        (0, 0x2000, 32, 32, 0, ALLOC),
        (1, 0x2000, 32, 0, 1, FREE),       # freed by thread 1 (a cross-thread free)
        (2, 0x2000, 32, 32, 1, ALLOC),     # and allocated by thread 1: thread 0's memory
        (3, 0x2000, 32, 0, 1, FREE),
        (4, 0x2000, 32, 32, 1, ALLOC),     # again by thread 1: a reuse, not a handoff
    ]))
    assert figures["handoffs"] == 1
    assert figures["reuse_fraction"] == pytest.approx(2 / 3)
    assert figures["unmatched_frees"] == 0


def test_random_histories_match_the_plain_replay():
    rng = random.Random(11)
    for case in range(60):
        rows, live, seq = [], {}, 0
        for _ in range(rng.randint(1, 120)):
            thread = rng.randrange(4)
            if live and rng.random() < 0.45:
                addr = rng.choice(sorted(live))
                rows.append((seq, addr, live.pop(addr), 0, rng.randrange(4), FREE))
            else:
                size = rng.choice([0, 1, 8, 16, 40, 64, 100, 300])
                addr = 0x10000 + 8 * rng.randrange(200)
                end = addr + max(size, 1)
                if any(a < end and addr < a + max(s, 1) for a, s in live.items()):
                    continue
                live[addr] = size
                rows.append((seq, addr, size, size + rng.choice([0, 8]), thread, ALLOC))
            seq += rng.choice([1, 1, 2])
        if rows:
            assert_matches_replay(records(rows))


# ------------------------------------------------------------------ real runs


@pytest.mark.slow
@pytest.mark.parametrize("allocator", ALLOCATORS)
def test_usable_size_is_at_least_the_requested_size(tmp_path, allocator):
    run = run_once(scenario(tmp_path, MIXED), tmp_path / "run", probes=("layout",), allocator=allocator)
    recs = layoutfile.read(tmp_path / "run" / "layout.bin")
    allocs = recs[recs["event"] == ALLOC]
    ops = {int(op) for op in allocs["op"]}
    assert {0, 1, 2, 3, 4, 5} <= ops        # every kind of allocation was recorded
    assert np.all(allocs["usable"] >= allocs["size"])
    assert run.metrics["layout:usable_short"] == 0
    # Every call is in the file: the program's own counts say how many.
    threads = run.report["threads"]
    assert len(allocs) == sum(t["ops"][k] for t in threads for k in t["ops"] if k != "free")
    assert run.report["probes"]["layout"]["records"] == len(recs)
    assert run.metrics["layout:unmatched_frees"] == 0
    assert run.metrics["layout:frees"] == run.metrics["layout:allocations"]


@pytest.mark.parametrize("allocator", ALLOCATORS)
def test_false_sharing_figures_agree_with_the_recorded_addresses(tmp_path, allocator):
    run = run_once(scenario(tmp_path, THRASH), tmp_path / "run", probes=("layout",), allocator=allocator)
    recs = layoutfile.read(tmp_path / "run" / "layout.bin")
    figures = assert_matches_replay(recs)
    assert figures["allocations"] == 4 * 200
    if allocator == "glibc":
        # glibc gives every thread running at the same time an arena of its own,
        # so two threads' live blocks never meet on a line.
        assert figures["shared_lines"] == 0


def test_cache_scratch_under_glibc_hands_the_main_threads_blocks_to_the_workers(tmp_path):
    # The worker frees the block main allocated for it into its own tcache and
    # its next malloc of that size returns it: main's memory, now the worker's.
    from pathlib import Path
    example = REPO / "examples" / "cache-scratch.scn"
    run = run_once(example, tmp_path / "run", params={"threads": 3, "iterations": 50, "writes": 3000},
                   probes=("layout",))
    recs = layoutfile.read(tmp_path / "run" / "layout.bin")
    assert run.metrics["layout:handoffs"] >= 3
    assert_matches_replay(recs)


# ------------------------------------------------------------- heap map and player


def test_heap_map_cells_hold_the_fraction_of_live_bytes():
    recs = records([
        (0, 0x5000, 64, 64, 0, ALLOC),      # one full row while it lives
        (1, 0x5040, 32, 32, 0, ALLOC),      # half a row
        (2, 0x5000, 64, 0, 0, FREE),
        (3, 0x5040, 32, 0, 0, FREE),
    ])
    m = heapmap.compute(recs, rows=4096, bins=4)
    assert m.row_bytes == 64
    assert m.fullness.shape == (4, 4096 // 64)    # one touched page, rows of one line
    assert m.row_addr[0] == 0x5000
    assert m.fullness[1, 0] == 1.0 and m.fullness[1, 1] == 0.5   # after events 0 and 1
    assert m.fullness[3, 0] == 0.0 and m.fullness[3, 1] == 0.0   # all freed
    assert list(m.live_bytes) == [64, 96, 32, 0]


@pytest.mark.slow
def test_scenc_play_writes_an_animated_gif(tmp_path):
    from PIL import Image
    run_once(scenario(tmp_path, MIXED), tmp_path / "run", probes=("layout",))
    out = tmp_path / "heap.gif"
    done = subprocess.run([sys.executable, "-c", "import sys; from scenc.cli import main; sys.exit(main())",
                           "play", str(tmp_path / "run"), "-o", str(out), "--frames", "6",
                           "--map", str(tmp_path / "map.png")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    with Image.open(out) as gif:
        assert gif.n_frames == 6
    assert (tmp_path / "map.png").stat().st_size > 0
    missing = subprocess.run([sys.executable, "-c", "import sys; from scenc.cli import main; sys.exit(main())",
                              "play", str(tmp_path / "nothing-here")], capture_output=True, text=True)
    assert missing.returncode == 64 and "Traceback" not in missing.stderr
