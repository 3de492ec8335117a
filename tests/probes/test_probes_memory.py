"""The memory and live probes on scenarios whose answers are known by hand:
the exact peak of live bytes, the fragmentation ratio, the RSS timeline."""

import pytest

from scenc.probes.single import run_once

# Live bytes after each line: 1000, 2024, 1024, 4024, 7096 (realloc 1024 -> 4096),
# 4096, 6096, 2000, 0. Peak 7096.
SEQUENTIAL = """\
scenario "peak-by-hand"
thread main {
    a = malloc(1000)
    b = calloc(16, 64)
    free(a)
    c = malloc(3000)
    b = realloc(b, 4096)
    free(c)
    d = malloc(2000)
    free(b)
    free(d)
}
"""

# Three threads each hold 1000 + 500 * (self + 1) bytes at the barrier:
# 3 * 1000 + 500 * (1 + 2 + 3) = 6000, all alive at once, and never more.
THREADS = """\
scenario "peak-threads"
param threads = 3
thread worker * threads {
    a = malloc(1000)
    b = malloc(500 * (self + 1))
    barrier
    free(a)
    free(b)
}
"""

# Grows to n pages of live data, written so they are resident, then frees all.
GROW = """\
scenario "grow"
param n = 2000
param passes = 10
thread main {
    pool objs[n]
    for i in 0 .. n {
        objs[i] = malloc(4096)
        write(objs[i], passes)
    }
    free_all(objs)
}
"""


def scenario(tmp_path, text, name="s.scn"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("allocator", ["glibc", "jemalloc"])
def test_peak_live_bytes_of_a_sequence_computed_by_hand(tmp_path, allocator):
    run = run_once(scenario(tmp_path, SEQUENTIAL), tmp_path / "run", probes=("memory", "live"),
                   allocator=allocator)
    assert run.metrics["live:peak_bytes"] == 7096
    assert run.metrics["live:final_bytes"] == 0


@pytest.mark.slow
def test_peak_live_bytes_over_threads_at_a_barrier(tmp_path):
    run = run_once(scenario(tmp_path, THREADS), tmp_path / "run", probes=("memory", "live"))
    assert run.metrics["live:peak_bytes"] == 6000
    # The same figure from the other method: the layout records in seq order.
    layout = run_once(scenario(tmp_path, THREADS), tmp_path / "layout", probes=("layout",))
    assert layout.metrics["layout:peak_live_bytes"] == 6000


def test_fragmentation_is_peak_rss_over_peak_live(tmp_path):
    run = run_once(scenario(tmp_path, GROW), tmp_path / "run", probes=("memory", "live"))
    m = run.metrics
    assert m["live:peak_bytes"] == 2000 * 4096
    mem = run.report["memory"]
    assert m["peak_rss_kib"] == mem["peak_rss_kib"]
    assert m["memory:fragmentation"] == pytest.approx(mem["peak_rss_kib"] * 1024 / (2000 * 4096))
    # 8000 KiB of pages were written: they were resident at the peak.
    assert m["peak_rss_kib"] >= m["memory:baseline_rss_kib"] + 8000 * 0.9
    assert m["memory:overhead_kib"] == pytest.approx(
        m["peak_rss_kib"] - m["memory:baseline_rss_kib"] - 8000)


@pytest.mark.slow
def test_without_live_there_is_no_ratio_and_the_plan_says_why(tmp_path):
    from scenc.probes.planner import plan_spec
    run = run_once(scenario(tmp_path, GROW), tmp_path / "run", probes=("time", "memory"))
    assert "memory:fragmentation" not in run.metrics
    assert "live:peak_bytes" not in run.metrics
    assert "fragmentation ratio" in plan_spec("time,memory,layout").explain()
    assert "fragmentation ratio" not in plan_spec("time,memory,live").explain()


def test_rss_timeline_is_sampled_and_consistent_with_the_peak(tmp_path):
    run = run_once(scenario(tmp_path, GROW), tmp_path / "run", probes=("memory", "live"),
                   env={"SCENC_MEMORY_SAMPLE_US": "1000"})
    samples = run.report["probes"]["memory"]["samples"]
    # At least the baseline (before any call) and the end (after every thread).
    assert len(samples) >= 2
    times = [s[0] for s in samples]
    assert times == sorted(times)
    baseline, end = samples[0], samples[-1]
    assert baseline[2] == 0 and end[2] == 0      # no live bytes before the start or after the end
    # VmHWM bounds every VmRSS sample up to the kernel's counter slack: RSS is
    # counted per CPU in batches, and pages dropped by madvise(MADV_DONTNEED)
    # leave the high-water mark behind (observed here: up to 52 KiB over).
    peak_rss = run.report["memory"]["peak_rss_kib"]
    slack = 512
    assert all(0 < s[1] <= peak_rss + slack for s in samples), (peak_rss, samples)
    assert run.metrics["memory:sampled_peak_rss_kib"] == max(s[1] for s in samples)
    assert all(0 <= s[2] <= run.metrics["live:peak_bytes"] for s in samples)


def test_no_sampler_thread_when_sampling_is_off(tmp_path):
    run = run_once(scenario(tmp_path, SEQUENTIAL), tmp_path / "run", probes=("memory",),
                   env={"SCENC_MEMORY_SAMPLE_US": "0"})
    own = run.report["probes"]["memory"]
    assert own["interval_us"] == 0
    assert len(own["samples"]) == 2  # start and end only
    assert own["samples"][0][2] == -1   # no live column without the live probe


def test_memory_figures_without_any_probe_report_are_the_runtimes(tmp_path):
    # The default set answers for the runtime's own figures under the report's names.
    run = run_once(scenario(tmp_path, SEQUENTIAL), tmp_path / "run", probes=("time", "memory"))
    assert run.metrics["peak_rss_kib"] == run.report["memory"]["peak_rss_kib"]
    assert run.metrics["final_rss_kib"] == run.report["memory"]["final_rss_kib"]
    assert run.metrics["minflt"] == run.report["rusage"]["minflt"]


# A channel of 2^20 cells (16 MiB) that carries 10 objects: only the cells reached are ever resident.
BIG_CHANNEL = """\
scenario "big-channel"
channel c capacity 1048576
thread producer {
    repeat 10 { p = malloc(64)  send(c, p) }
}
thread consumer {
    repeat 10 { free(recv(c)) }
}
"""


def test_a_channels_cells_are_resident_only_once_reached(tmp_path):
    """The runtime stores nothing into a new channel's cells (the arena's memory is zero, a cell's first
    sequence): a model's ring of 200 channels of 996 cells, a pair of threads at a time, had 3.2 MB resident
    before its first allocation."""
    run = run_once(scenario(tmp_path, BIG_CHANNEL), tmp_path / "run", probes=("memory",))
    mem = run.report["memory"]
    assert mem["peak_rss_kib"] < 16 * 1024 / 2, mem        # far from the 16 MiB the cells span
    assert mem["baseline_rss_kib"] < 8 * 1024, mem
