"""`scenc run --probes`: the plan is printed before any run, every run stores
only its own probes' figures, the first good run of each probe set keeps its
files for the pictures, and a forced mix that would give false figures is
refused before anything runs."""

import pytest
import json
import subprocess
import sys
from pathlib import Path
from scenc.run.record import RunRecord

SCENC = [sys.executable, "-c", "import sys; from scenc.cli import main; sys.exit(main())"]

TINY = """\
scenario "tiny"
seed 7
param iterations = 2_000
thread worker * 2 {
    repeat iterations {
        p = malloc(uniform(1, 512))
        free(p)
    }
}
"""


def scenc(*args, cwd=None):
    return subprocess.run([*SCENC, *map(str, args)], capture_output=True, text=True, timeout=300, cwd=cwd)


def lines(path):
    """The result file read as plain JSON lines: the header, then every run as a RunRecord."""
    header, *runs = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return [header, *(RunRecord.from_json(run) for run in runs)]


@pytest.mark.slow
def test_run_plans_the_probes_and_keeps_their_figures_apart(tmp_path):
    scn = tmp_path / "tiny.scn"
    scn.write_text(TINY)
    out = tmp_path / "r.json"
    done = scenc("run", scn, "--probes", "time,memory,live,layout", "--allocators", "glibc,jemalloc",
                 "--runs", "2", "--warmup", "0", "-o", out, "--plots", tmp_path / "plots")
    assert done.returncode == 0, done.stderr
    # The plan and its reasons come first, before the builds and the runs.
    assert "kept apart because" in done.stderr
    assert done.stderr.index("run 2:") < done.stderr.index("built")
    header, *runs = lines(out)
    # Two runs are the fewest: layout must not meet time (timing) nor memory (RSS),
    # and live must not meet time, so live goes with layout.
    assert header["probes"] == ["time+memory", "live+layout"]
    assert "note: memory gives the fragmentation ratio" in done.stderr
    assert header["probe_plan"]["runs"]
    by_set = {}
    for r in runs:
        by_set.setdefault(r.probe_set, []).append(r)
    assert set(by_set) == set(header["probes"])
    for probe_set, records in by_set.items():
        members = probe_set.split("+")
        for r in records:
            assert r.status == "ok", r
            m = r.metrics
            assert ("wall_s" in m) == ("time" in members)
            assert ("peak_rss_kib" in m) == ("memory" in members)
            assert any(k.startswith("layout:") for k in m) == ("layout" in members)
            if "live" in members:
                assert m["live:peak_bytes"] > 0
            assert ("memory:fragmentation" in m) == ("memory" in members and "live" in members)
        # One kept directory per allocator for sets that leave files or pictures.
        kept = [r for r in records if r.run_dir]
        if "layout" in members or "memory" in members:
            assert sorted(r.allocator for r in kept) == ["glibc", "jemalloc"]
            for r in kept:
                assert (out.parent / r.run_dir / "report.json").is_file()
                assert ("layout" in members) == (out.parent / r.run_dir / "layout.bin").is_file()
    runs_dir = out.parent / "r.runs"
    assert len(list(runs_dir.iterdir())) == sum(1 for r in runs if r.run_dir)
    pictures = {p.name for p in (tmp_path / "plots").iterdir()}
    assert any(n.startswith("probe-layout") for n in pictures)
    assert any(n.startswith("probe-memory") for n in pictures)
    # The player finds the layout runs through the result file.
    gif = tmp_path / "heap.gif"
    played = scenc("play", out, "-o", gif, "--frames", "4")
    assert played.returncode == 0, played.stderr
    assert gif.stat().st_size > 0 and "glibc" in played.stdout and "jemalloc" in played.stdout


@pytest.mark.slow
def test_a_forced_mix_is_refused_before_anything_runs(tmp_path):
    scn = tmp_path / "tiny.scn"
    scn.write_text(TINY)
    out = tmp_path / "r.json"
    done = scenc("run", scn, "--probes", "time+layout", "--allocators", "glibc", "--runs", "1", "-o", out)
    assert done.returncode == 64
    assert "refusing" in done.stderr and "layout perturbs" in done.stderr
    assert "Traceback" not in done.stderr
    assert not out.exists()


@pytest.mark.slow
def test_unknown_probe_is_a_usage_error(tmp_path):
    scn = tmp_path / "tiny.scn"
    scn.write_text(TINY)
    done = scenc("run", scn, "--probes", "time,heap", "--allocators", "glibc", "-o", tmp_path / "r.json")
    assert done.returncode == 64 and "unknown probe 'heap'" in done.stderr
