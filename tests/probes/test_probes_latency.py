"""The latency probe: its log-scale buckets, percentiles from them, and what a
real run records."""

import math

import pytest

from scenc.probes import latency
from scenc.probes.latency import bucket_bounds, bucket_of, percentile
from scenc.probes.single import run_once

LOOP = """\
scenario "loop"
seed 42
param iterations = 20_000
thread worker * 2 {
    repeat iterations {
        p = malloc(uniform(1, 1024))
        free(p)
    }
}
"""


def scenario(tmp_path, text=LOOP):
    path = tmp_path / "s.scn"
    path.write_text(text)
    return path


def test_buckets_cover_every_value_once_and_are_at_most_a_sixteenth_wide():
    previous_hi = -1
    for b in range(16 + 60 * 16):
        lo, hi = bucket_bounds(b)
        assert lo == previous_hi + 1            # no gap, no overlap
        previous_hi = hi
        assert bucket_of(lo) == b and bucket_of(hi) == b
        if lo >= 16:
            assert (hi - lo + 1) / lo <= 1 / 16
    assert previous_hi == 2**64 - 1


def test_percentiles_of_a_histogram_written_by_hand():
    # 90 samples of 5 cycles, 9 in the bucket of 100 (100..103), 1 in that of 1000 (992..1023).
    hist = {bucket_of(5): 90, bucket_of(100): 9, bucket_of(1000): 1}
    assert percentile(hist, 0.5, 1000) == 5
    assert percentile(hist, 0.9, 1000) == 5                  # the 90th smallest is still 5
    assert bucket_bounds(bucket_of(100)) == (100, 103)
    assert percentile(hist, 0.95, 1000) == 101.5
    assert percentile(hist, 0.999, 1000) == 1000             # the bucket's middle is past the max
    assert math.isnan(percentile({}, 0.5, 0))


@pytest.mark.slow
def test_every_call_timed_when_sampling_one_in_one(tmp_path):
    run = run_once(scenario(tmp_path), tmp_path / "run", probes=("latency",),
                   env={"SCENC_LATENCY_SAMPLE": "1"})
    own = run.report["probes"]["latency"]
    assert own["every"] == 1
    m = run.metrics
    assert m["latency:malloc.samples"] == 40_000 and m["latency:free.samples"] == 40_000
    for op in ("malloc", "free"):
        p = [m[f"latency:{op}.{q}_ns"] for q in ("p50", "p90", "p99", "p999")]
        assert p == sorted(p) and p[-1] <= m[f"latency:{op}.max_ns"]
        assert 0 <= m[f"latency:{op}.mean_ns"] <= m[f"latency:{op}.max_ns"]
    # The exact maximum lies in the highest bucket that holds a sample.
    for thread in own["threads"]:
        for figures in thread["ops"].values():
            assert bucket_of(figures["max"]) == max(b for b, _ in figures["hist"])
            assert sum(c for _, c in figures["hist"]) == figures["samples"]
    # Units: the timed calls of a thread took less than the thread's whole life.
    rate = m["latency:tsc_ghz"]
    assert 0.2 < rate < 10
    for t, own_t in zip(run.report["threads"], own["threads"]):
        timed_ns = sum(f["sum"] for f in own_t["ops"].values()) / rate
        assert timed_ns < t["end_ns"] - t["start_ns"]


@pytest.mark.slow
def test_one_in_n_sampling_times_about_one_call_in_n(tmp_path):
    # 13 is rounded up to 16.
    run = run_once(scenario(tmp_path), tmp_path / "run", probes=("latency",),
                   env={"SCENC_LATENCY_SAMPLE": "13"})
    assert run.report["probes"]["latency"]["every"] == 16
    # Gaps are drawn from 8..23 (mean 15.5) over all 80000 calls, malloc and free
    # alternating: about 5200 timed calls, half of each kind.
    total = run.metrics["latency:malloc.samples"] + run.metrics["latency:free.samples"]
    assert 80_000 / 24 < total < 80_000 / 8
    for op in ("malloc", "free"):
        assert 0.3 < run.metrics[f"latency:{op}.samples"] / total < 0.7


@pytest.mark.slow
def test_other_kinds_of_call_get_their_own_histogram(tmp_path):
    text = """\
scenario "kinds"
thread main {
    repeat 500 {
        p = calloc(4, 16)
        p = realloc(p, 300)
        free(p)
    }
}
"""
    run = run_once(scenario(tmp_path, text), tmp_path / "run", probes=("latency",),
                   env={"SCENC_LATENCY_SAMPLE": "1"})
    assert run.metrics["latency:calloc.samples"] == 500
    assert run.metrics["latency:realloc.samples"] == 500
    assert run.metrics["latency:free.samples"] == 500
    assert "latency:malloc.samples" not in run.metrics


@pytest.mark.slow
def test_latency_chart_is_drawn(tmp_path):
    from scenc.report.plots.probes import latency_chart
    run = run_once(scenario(tmp_path), tmp_path / "run", probes=("latency",))
    path = tmp_path / "latency.png"
    assert latency_chart({"glibc": [run.report]}, path)
    assert path.stat().st_size > 0
    assert latency.percentile_curve(run.report["probes"]["latency"], "malloc", [0.5])[0] > 0
