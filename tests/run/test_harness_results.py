"""The result file round trip: what `scenc run` saves describes itself, and `scenc report`,
`--json`, CSV, plots and `scenc compare` are computed again from the raw samples."""

import csv
import json

import pytest

from scenc.run import resultfile
from scenc.stats.rank import compare
from scenc.stats.summary import summarize
from harness_support import read_lines, scenc, write_scenario

NAMES = ["glibc", "jemalloc", "mimalloc"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("results")
    scenario = write_scenario(tmp)
    out = tmp / "r.json"
    done = scenc("run", scenario, "--allocators", ",".join(NAMES), "--runs", 6, "--seed", 9,
                 "-o", out, "--csv", tmp / "r.csv", "--plots", tmp / "plots")
    assert done.returncode == 0, done.stderr
    return tmp, scenario, out, done


def test_the_header_describes_the_experiment(finished):
    tmp, scenario, out, done = finished
    header = read_lines(out)[0]
    assert header["schema"] == resultfile.SCHEMA and header["status"] == "complete"
    assert header["scenario"] == "tiny" and header["source"] == scenario.read_text()
    assert header["seed"] == 7 and header["plan"]["seed"] == 9
    assert header["plan"]["runs"] == 6 and header["plan"]["warmup"] == 1
    machine = header["machine"]
    assert machine["logical_cpus"] >= 1 and machine["kernel"] and machine["cpu_model"]
    assert header["compiler"].startswith("gcc") or "clang" in header["compiler"]
    assert list(header["allocators"]) == NAMES
    assert header["allocators"]["jemalloc"]["path"].endswith(".so.2")
    assert header["allocators"]["glibc"]["version"]
    assert header["param_sets"][0]["resolved"] == {"threads": 1, "iterations": 20000}
    assert header["metrics"]["wall_s"]["lower_is_better"] is True
    assert header["command"][:2] == ["scenc", "run"] or "run" in header["command"]


def test_runs_hold_raw_samples(finished):
    _, _, out, _ = finished
    runs = read_lines(out)[1:]
    assert len(runs) == 3 * 6
    for r in runs:
        m = r.metrics
        assert 0 < m["wall_s"] <= r.duration_s, "the program's own time is inside the process lifetime"
        assert m["peak_rss_kib"] > 0 and m["ops_per_s"] > 0
        assert r.status == "ok" and r.provider and r.stderr_tail == ""


def test_report_rerenders_the_same_table(finished):
    _, _, out, done = finished
    again = scenc("report", out)
    assert again.returncode == 0, again.stderr
    assert again.stdout == done.stdout
    assert "wall time (lower is better)" in again.stdout
    assert "fastest: " in again.stdout and "leanest: " in again.stdout


def test_report_json_is_computed_from_the_raw_samples(finished):
    _, _, out, _ = finished
    data = json.loads(scenc("report", out, "--json").stdout)
    [cell] = data["blocks"]
    saved = resultfile.load(out)
    for name in NAMES:
        samples = saved.metric_values("wall_s", name, {})
        summary = summarize(samples).to_dict()
        got = cell["allocators"][name]["metrics"]["wall_s"]
        assert got["n"] == 6 and got["mean"] == pytest.approx(summary["mean"])
        assert got["ci_mean"] == pytest.approx(summary["ci_mean"])
        assert cell["allocators"][name]["samples"]["wall_s"] == samples
    c = cell["comparisons"]["wall_s"]["jemalloc"]
    expected = compare(saved.metric_values("wall_s", "glibc", {}),    # at the level the correction granted
                       saved.metric_values("wall_s", "jemalloc", {}), confidence=c["confidence"])
    assert c["ratio"] == pytest.approx(expected.estimate) and c["significant"] == expected.significant
    assert c["sentence"].startswith("jemalloc")
    assert cell["verdicts"]["wall_s"]["word"] == "fastest"


def test_another_baseline(finished):
    _, _, out, _ = finished
    text = scenc("report", out, "--baseline", "mimalloc").stdout
    assert "* = baseline (mimalloc)" in text
    assert "than mimalloc" in text or "from mimalloc" in text
    bad = scenc("report", out, "--baseline", "nosuch")
    assert bad.returncode == 64 and "nosuch" in bad.stderr and "Traceback" not in bad.stderr


def test_csv_has_one_row_per_run_and_metric(finished):
    tmp, _, out, _ = finished
    runs = read_lines(out)[1:]
    with open(tmp / "r.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == sum(len(r.metrics) for r in runs)
    walls = [float(row["value"]) for row in rows if row["metric"] == "wall_s" and row["allocator"] == "glibc"]
    assert walls == [r.metrics["wall_s"] for r in runs if r.allocator == "glibc"]


def test_plots_are_real_png_and_svg(finished):
    tmp, _, _, _ = finished
    plots = tmp / "plots"
    for kind in ("bars", "box"):
        for metric in ("wall_s", "peak_rss_kib"):
            png = (plots / f"tiny-{metric}-{kind}.png").read_bytes()
            assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
            svg = (plots / f"tiny-{metric}-{kind}.svg").read_text()
            assert "<svg" in svg and "glibc" in svg


def test_compare_two_result_files(finished, tmp_path):
    tmp, scenario, out, _ = finished
    other = tmp_path / "b.json"
    assert scenc("run", scenario, "--allocators", "glibc,jemalloc", "--runs", 4, "-o", other,
                 "-q").returncode == 0
    done = scenc("compare", out, other)
    assert done.returncode == 0, done.stderr
    assert "glibc in B" in done.stdout and "jemalloc in B" in done.stdout
    assert "mimalloc in B" not in done.stdout  # only in A: nothing to compare
    missing = scenc("compare", out, tmp_path / "nope.json")
    assert missing.returncode == 64 and "no such file" in missing.stderr


def test_report_rejects_a_file_that_is_not_a_result(tmp_path):
    junk = tmp_path / "junk.json"
    junk.write_text('{"hello": 1}\n')
    done = scenc("report", junk)
    assert done.returncode == 64 and "junk.json" in done.stderr and "Traceback" not in done.stderr
