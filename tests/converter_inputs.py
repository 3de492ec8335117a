"""Inputs the exact-replay converter is tested on, shared by tests/trace/test_trace_converter.py and the
sanitizer run of the converter (tests/runtime/test_sanitizers.py)."""

import random
from pathlib import Path

from scenc.trace.events import AllocEvent
from scenc.trace.replay import REPLAY_KIND
from scenc.trace.tracerlog import HEADER, RECORD

# Small real tracer logs in tests/fixtures/trace (version 2: see test_trace_converter.py's docstring).
TRACES = ["cxx_new.trace", "main_exits.trace", "mt_handoff_3x20.trace", "own_maps.trace"]


def random_events(seed: int, n: int = 3000) -> list:
    """Every kind of event, with pointers drawn from a small pool (unknown frees, pointers returned twice),
    failures, thread records in any order and mappings that overlap, are cut in pieces or remapped."""
    rnd = random.Random(seed)
    tids = [100, 101, 102, 103, 104]
    pool = [0x1000 * i for i in range(1, 40)]
    sizes = [None, 0, 16, 100, 4096] + ([] if seed % 2 else [1 << 20, 3 << 30])
    out = []
    for line in range(1, n + 1):
        tid, r = rnd.choice(tids), rnd.random()
        if r < 0.05:
            kind = rnd.choice(["thread_start", "thread_exit"])
            size = rnd.choice([tid, rnd.choice(tids), 0, 105 + rnd.randrange(3)])
            out.append(AllocEvent(line, rnd.choice([tid, 105, 106, 107]), None, kind, size, 1, None, None, None,
                                  False, line, None))
        elif r < 0.15:
            kind = rnd.choice(["mmap", "munmap", "mremap"])
            base = 0x7f0000000000 + 0x1000 * rnd.randrange(64)
            size = rnd.choice([4096, 8192, 3 * 4096 + 5, 16 * 4096])
            if kind == "mmap":
                res = rnd.choice([base, None])
                ev = (size, rnd.choice([1, 3]), rnd.choice([0x22, 0x32]), None, res)
            elif kind == "munmap":
                res, ev = None, (size, 1, None, base, None)
            else:
                res = rnd.choice([base + 0x100000, base, None])
                ev = (size, 1, rnd.choice([4096, 16 * 4096, 8192]), base, res)
            out.append(AllocEvent(line, tid, None, kind, *ev, kind != "munmap" and res is None, line, None))
        else:
            out.append(AllocEvent(line, tid, None, rnd.choice(list(REPLAY_KIND)), rnd.choice(sizes),
                                  rnd.choice([1, 1, 0, 3]), rnd.choice([None, 0, 64, 1 << 33]),
                                  rnd.choice([None, 0] + pool), rnd.choice([None, 0] + pool), rnd.random() < 0.1,
                                  line, None))
    return out


def race_log(path: Path) -> Path:
    """Thread 1 reallocs block A to B; it released A with number 1, then thread 2's malloc got A (number 2)
    before the realloc took its final number 3 (the race is too rare to provoke)."""
    A, B, C = 0x1000, 0x2000, 0x3000
    recs = [(0, 100, 1, 1, 0, 0, 5, 0, 64, 0, 0, A), (3, 400, 1, 3, 0, 0, 5, 2, A, 128, 0, B),
            (4, 500, 1, 5, 0, 0, 5, 0, B, 0, 0, 0), (2, 300, 2, 1, 0, 0, 5, 0, 32, 0, 0, A),
            (5, 600, 2, 5, 0, 0, 5, 0, A, 0, 0, 0), (6, 700, 2, 1, 0, 0, 5, 0, 16, 0, 0, C)]
    path.write_bytes(HEADER.pack(b"SCNTRACE", 1, 64, 42, 1, 0, 0) + b"".join(RECORD.pack(*r) for r in recs))
    return path
