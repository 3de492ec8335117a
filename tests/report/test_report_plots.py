"""report.plots: a sweep over orders of magnitude gets a log axis labelled with the values swept;
box plots of a few runs show the runs. The figures are inspected as matplotlib drew them (the
PNG/SVG files are checked in test_harness_results.py)."""
import pytest
from types import SimpleNamespace

from scenc.report.plots import charts as plots
from scenc.report.analysis import analyze
from scenc.run.record import RunRecord


def _sweep_result(param, values, runs_per_point):
    runs = [RunRecord.from_json({"allocator": name, "params": {param: v}, "probe_set": "time+memory",
                                 "status": "ok", "round": i + 1, "metrics": {"wall_s": 0.1 * (1 + k) + 0.01 * i}})
            for v in values for k, name in enumerate(("glibc", "jemalloc")) for i in range(runs_per_point)]
    header = {"scenario": "s", "allocators": {"glibc": {}, "jemalloc": {}}, "baseline": "glibc"}
    return analyze(SimpleNamespace(header=header, runs=runs, path="s.json"))


def _figures(monkeypatch, draw):
    drawn = []
    monkeypatch.setattr(plots, "_save", lambda fig, directory, name: drawn.append(fig) or [name])
    draw()
    return drawn


@pytest.mark.slow
def test_a_sweep_over_orders_of_magnitude_has_a_log_axis_labelled_with_the_values(monkeypatch, tmp_path):
    analysis = _sweep_result("maxsize", [64, 1024, 32768], 3)
    [fig] = _figures(monkeypatch, lambda: plots.sweep_plot(analysis, "wall_s", "maxsize", str(tmp_path), "s"))
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    assert list(ax.get_xticks()) == [64, 1024, 32768]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["64", "1024", "32768"]
    assert len(ax.xaxis.get_minorticklocs()) == 0       # no unlabelled 10^k ticks in between


def test_a_narrow_sweep_keeps_a_linear_axis(monkeypatch, tmp_path):
    analysis = _sweep_result("threads", [1, 2, 4], 3)
    [fig] = _figures(monkeypatch, lambda: plots.sweep_plot(analysis, "wall_s", "threads", str(tmp_path), "s"))
    assert fig.axes[0].get_xscale() == "linear"
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["1", "2", "4"]


def _points_drawn(ax):
    return sum(len(line.get_xdata()) for line in ax.get_lines() if line.get_marker() == "o"
               and line.get_linestyle() == "None" and line.get_color() == "#d62728")


def test_box_plots_of_a_few_runs_show_each_run_as_a_point(monkeypatch, tmp_path):
    few = _sweep_result("maxsize", [64], 3)
    [fig] = _figures(monkeypatch, lambda: plots.box_plot(few, "wall_s", str(tmp_path), "s"))
    assert _points_drawn(fig.axes[0]) == 2 * 3
    many = _sweep_result("maxsize", [64], 8)
    [fig] = _figures(monkeypatch, lambda: plots.box_plot(many, "wall_s", str(tmp_path), "s"))
    assert _points_drawn(fig.axes[0]) == 0               # the box says enough
