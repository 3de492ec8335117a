"""Figures print in the unit the docs promise (docs/running.md: KiB as KiB/MiB/GiB,
about four significant digits), in tables, `scenc compare` and `scenc exec`."""

from types import SimpleNamespace

from scenc.report.compare import compare_files
from scenc.report.execsummary import format_exec
from scenc.report.tables import format_value
from scenc.run.record import RunRecord


def _result(rss_by_allocator, path):
    runs = [RunRecord.from_json({"allocator": name, "params": {}, "probe_set": "time+memory", "status": "ok",
                                 "round": i + 1, "metrics": {"wall_s": 0.1 + i * 1e-3, "peak_rss_kib": v}})
            for name, values in rss_by_allocator.items() for i, v in enumerate(values)]
    header = {"scenario": "s", "allocators": {n: {} for n in rss_by_allocator}, "baseline": "glibc"}
    return SimpleNamespace(header=header, runs=runs, path=path)


def test_kib_scale_to_mib_and_gib():
    assert format_value(112_100, "KiB") == "109.5 MiB"
    assert format_value(1765, "KiB") == "1765 KiB"
    assert format_value(32_000_000, "KiB") == "30.52 GiB"


def test_compare_never_prints_an_exponent():
    # One allocator near 5 MiB, another near 110 MiB: each line scales to its own figures.
    a = _result({"glibc": [5000 + i for i in range(6)], "jemalloc": [112_100 + i for i in range(6)]}, "a.json")
    b = _result({"glibc": [5100 + i for i in range(6)], "jemalloc": [113_000 + i for i in range(6)]}, "b.json")
    lines, common = compare_files(a, b, metrics=["peak_rss_kib"])
    text = "\n".join(lines)
    assert common == 2
    assert "e+0" not in text, text
    assert "glibc: A 5002 KiB (n=6), B 5102 KiB (n=6)" in text
    assert "jemalloc: A 109.5 MiB (n=6), B 110.4 MiB (n=6)" in text


def test_exec_shows_every_count_the_program_reports():
    thread = {"group": "worker", "index": 0, "start_ns": 0, "end_ns": 2_000_000, "cpu_ns": 1_000_000,
              "ops": {"malloc": 10, "free": 10}, "sends": 0, "recvs": 0, "writes": 3, "touches": 7, "failed": 0,
              "regions": {}}
    text = format_exec({"scenario": "t", "provider": "libc.so.6", "wall_ns": 2_000_000, "threads": [thread],
                        "memory": {"peak_rss_kib": 1500}})
    head, row = text.splitlines()[1:3]
    assert head.split() == ["thread", "malloc", "free", "writes", "touches", "time", "ms", "cpu", "ms"]
    assert row.split()[:5] == ["worker[0]", "10", "10", "3", "7"]
    assert not any(line != line.rstrip() for line in text.splitlines())
