"""bench/fidelity.py's machinery on one tiny program, so the bench cannot rot unnoticed.

A small run of bench/programs/alloc_heavy.c under glibc and one preloaded
allocator, 2 runs each: it is built, captured with the preload tracer,
converted, its replay built and captured, then the replay runs beside the
program in one `scenc run REPLAY.scn -- PROGRAM` session and the report is
printed from `scenc report --json`. No ranking is asserted (timings here mean
nothing); what is asserted is what the bench's machinery promises.
"""
import importlib.util
import json
from pathlib import Path

import pytest

from scenc.allocators import registry as allocators
from harness_support import write_scenario

pytestmark = pytest.mark.slow  # builds and runs programs: seconds each


BENCH = Path(__file__).resolve().parents[1] / "bench" / "fidelity.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("fidelity", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def two_allocators():
    for other in ("jemalloc", "mimalloc", "tcmalloc"):
        try:
            return [a.name for a in allocators.resolve(f"glibc,{other}")]
        except allocators.AllocatorError:
            continue
    pytest.skip("no allocator to preload besides glibc (install libjemalloc2, libmimalloc2.0 or libtcmalloc-minimal4)")


def test_fidelity_machinery_on_a_tiny_program(tmp_path):
    fidelity = load_bench()
    chosen = two_allocators()
    tiny = fidelity.Program("tiny", "alloc_heavy.c, 3000 iterations", "alloc_heavy.c", ("3000",))
    lines, summary = fidelity.measure(tiny, tmp_path, [], chosen, runs=2, seed=3, progress=lambda *_: None)
    capture, replay = summary["trace"]["capture"], summary["trace"]["replay"]
    # the replay makes the capture's calls (and a few of its own runtime's) with the same peak of live bytes
    assert capture["threads"] == 1 and capture["cross_thread_share"] == 0.0
    assert 7000 < capture["calls"] <= replay["calls"] < capture["calls"] + 100
    assert abs(replay["peak_live_bytes"] - capture["peak_live_bytes"]) < 64 << 10
    # one session: the replay and the program, 2 measured runs each under both allocators, every program
    # run proven to have had its allocator
    result = Path(summary["result_file"])
    header, *runs = [json.loads(line) for line in result.read_text().splitlines()]
    measured = [r for r in runs if not r.get("warmup")]
    assert sorted((r.get("target", "scenario"), r["allocator"]) for r in measured) == sorted(
        (t, a) for t in ("scenario", "command") for a in chosen for _ in range(2))
    assert all(r["status"] == "ok" for r in measured)
    assert all(r["proof"]["processes"] >= 1 for r in measured if r.get("target") == "command")
    # the figures are the programs' own: a few MiB, not the Python bench's 50+
    rss = summary["side_by_side"]["metrics"]["peak_rss_kib"]
    for _, kib in rss["program"] + rss["scenario"]:
        assert 500 < kib < 40 << 10
    text = "\n".join(lines)
    assert "ranking  real:" in text and "replay peak RSS within 20% + 2 MiB" in text
    assert f"{chosen[1]:<10}" in text and "x glibc" in text
    assert set(summary["verdicts"]) == {"fastest", "slowest", "leanest", "fattest"}
    assert summary["rss_checks"] == 3       # 2 allocators x replay-vs-real, 1 difference from glibc
    assert "tiny" in "\n".join(fidelity.summary_table([summary]))


def test_a_failing_program_is_reported_not_hidden(tmp_path):
    fidelity = load_bench()
    scn = write_scenario(tmp_path)
    with pytest.raises(RuntimeError, match="failed") as caught:
        fidelity.run_session(["/bin/sh", "-c", "echo broken >&2; exit 3"], scn, ["glibc"], 1, 1,
                             tmp_path / "r.json")
    assert "r.json" in str(caught.value)
