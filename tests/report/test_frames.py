"""scenc.report.frames: result files as pandas DataFrames, pandas being an optional extra.

pandas comes with the test extra (`pip install -e '.[test]'`, as scripts/setup.sh does), so these
tests run wherever the suite is set up that way; without pandas they skip, and say so. The figures
are real: tests/fixtures/results/costs.json, a real session, saved.
"""

import builtins
import csv

import pytest

from harness_support import scenc
from locations import FIXTURES
from scenc.report import frames
from scenc.run import resultfile

COSTS = FIXTURES / "results" / "costs.json"


def _pandas():
    return pytest.importorskip("pandas", reason="pandas is not installed: pip install 'scenc[pandas]' "
                                                "(the test extra brings it)")


def test_one_row_per_measured_run_with_a_column_per_param_and_metric():
    _pandas()
    frame = frames.load_frame(COSTS)
    saved = resultfile.load(COSTS)
    measured = [r for r in saved.runs if r.is_measurement]
    assert len(frame) == len(measured) == 30
    assert list(frame.columns[:3]) == ["run", "allocator", "iterations"]
    assert {"wall_s", "peak_rss_kib", "minflt", "time:cpu_s"} <= set(frame.columns)
    assert frame["wall_s"].dtype == float and set(frame["iterations"]) == {100000}
    assert list(frame[frame.allocator == "faulty"]["minflt"]) == [r.metrics["minflt"] for r in measured
                                                                   if r.allocator == "faulty"]
    medians = frame.groupby("allocator")["wall_s"].median()
    assert medians["plain"] < medians["sleepy"] < medians["faulty"]


def test_every_run_with_all_runs():
    _pandas()
    saved = resultfile.load(COSTS)
    frame = frames.load_frame(saved, all_runs=True)
    assert len(frame) == len(list(saved.runs))
    assert set(frame["status"]) == {"ok"} and frame["run"].tolist() == list(range(len(frame)))


def test_the_summary_frame_is_the_summary_csv(tmp_path):
    _pandas()
    summary = frames.load_summary(COSTS)
    assert scenc("report", COSTS, "--summary-csv", tmp_path / "s.csv").returncode == 0
    with open(tmp_path / "s.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(summary.columns) == list(rows[0]) and len(summary) == len(rows)
    faulty = summary[(summary.allocator == "faulty") & (summary.metric == "minflt")].iloc[0]
    row = next(r for r in rows if r["allocator"] == "faulty" and r["metric"] == "minflt")
    assert faulty["median"] == float(row["median"]) and faulty["n"] == int(row["n"]) == 10


def test_without_pandas_the_error_says_how_to_get_it(monkeypatch):
    """Faked: pandas made unimportable, whether or not it is installed."""
    real_import = builtins.__import__

    def no_pandas(name, *args, **kwargs):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("No module named 'pandas'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    with pytest.raises(ImportError, match=r"pip install 'scenc\[pandas\]'"):
        frames.load_frame(COSTS)
