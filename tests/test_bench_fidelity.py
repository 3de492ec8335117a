"""bench/fidelity.py's machinery on one tiny program, so the bench cannot rot unnoticed.

A small run of bench/programs/alloc_heavy.c under glibc and one preloaded
allocator, 2 runs each, real program and replay in the same rounds: it is
built, captured with the preload tracer, converted, its replay built and
captured, every run measured through the launcher, and the report printed.
No ranking is asserted (timings here mean nothing); what is asserted is what
the bench's machinery promises.
"""
import importlib.util
from pathlib import Path

import pytest

from scenc import allocators

BENCH = Path(__file__).resolve().parents[1] / "bench" / "fidelity.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("fidelity", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def two_allocators():
    for other in ("jemalloc", "mimalloc", "tcmalloc"):
        try:
            return allocators.resolve(f"glibc,{other}")
        except allocators.AllocatorError:
            continue
    pytest.skip("no allocator to preload besides glibc (install libjemalloc2, libmimalloc2.0 or libtcmalloc-minimal4)")


def test_fidelity_machinery_on_a_tiny_program(tmp_path):
    fidelity = load_bench()
    chosen = two_allocators()
    tiny = fidelity.Program("tiny", "alloc_heavy.c, 3000 iterations", "alloc_heavy.c", ("3000",))
    runner = fidelity.Runner(tmp_path)
    units, figures = fidelity.prepare([tiny], tmp_path, [], progress=lambda *_: None)
    capture, replay = figures["tiny"]
    # the replay makes the capture's calls (and a few of its own runtime's) with the same peak of live bytes
    assert capture["threads"] == 1 and capture["cross_thread_share"] == 0.0
    assert 7000 < capture["calls"] <= replay["calls"] < capture["calls"] + 100
    assert abs(replay["peak_live_bytes"] - capture["peak_live_bytes"]) < 64 << 10
    results = fidelity.run_rounds(runner, units, chosen, runs=2, seed=3, progress=lambda *_: None)
    assert sorted(results) == sorted(("tiny", side, a.name) for side in ("real", "replay") for a in chosen)
    for samples in results.values():
        assert len(samples) == 2
        # the launcher's figures are the child's own: a few MiB, not the Python bench's 50+
        assert all(0 < s.wall_s < 30 and 500 < s.maxrss_kib < 40 << 10 and s.status == 0 for s in samples)
    lines, summary = fidelity.report(tiny, results, chosen, figures)
    text = "\n".join(lines)
    assert "ranking  real:" in text and "replay peak RSS within 20% + 2 MiB" in text
    assert set(summary["verdicts"]) == {"fastest", "slowest", "leanest", "fattest"}
    assert summary["rss_checks"] == 3       # 2 allocators x replay-vs-real, 1 difference from glibc
    assert "tiny" in "\n".join(fidelity.summary_table([summary]))


def test_a_failing_run_is_reported_not_hidden(tmp_path):
    fidelity = load_bench()
    [glibc] = allocators.resolve("glibc")
    runner = fidelity.Runner(tmp_path)
    with pytest.raises(RuntimeError, match="status 3"):
        runner.measure(["/bin/sh", "-c", "echo broken >&2; exit 3"], glibc)
