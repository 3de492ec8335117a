"""Plots of an Analysis with matplotlib (Agg: no display needed), as PNG and SVG.

Per metric shown:
* `<stem>-<metric>-bars`: mean per allocator with its 95% CI as error bars,
  grouped by param set;
* `<stem>-<metric>-box`: the samples themselves, one box per allocator,
  one panel per param set (a box plot shows skew and outliers a mean hides),
  with each run drawn as a point when there are 5 or fewer;
* for a sweep, `<stem>-<metric>-vs-<param>`: the mean against the param,
  one line per allocator, the 95% CI as a band, a tick at each value swept
  (a log axis when they span an order of magnitude or more); when other
  params vary too, one panel per combination of them.
"""

import dataclasses
import math
import os
import re
from typing import Dict, List, Sequence

from ...run.cells import machine_name
from .. import metrics as metric_defs
from ..analysis import sweep_cells
from ..tables import scale_for, shown_metrics

FORMATS = ("png", "svg")
MAX_PANELS = 12
FEW_RUNS = 5             # box plots of this many runs or fewer show the runs as points
LOG_SPAN = 10            # a sweep whose largest value is this many times its smallest: log axis


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _colors(names: Sequence[str]) -> Dict[str, str]:
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
               "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
    return {n: palette[i % len(palette)] for i, n in enumerate(names)}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "metric"


def _params_text(params) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items()) or "defaults"


def _scenario_cells(analysis) -> list:
    """The cells a sweep is drawn from: the scenario's, or a program's alone (report/analysis.py)."""
    return sweep_cells(analysis.cells)


def _cell_text(cell, params) -> str:
    """A group's name on an axis: its params, or "the program" (with its params) for a real command's runs."""
    if cell.target == "command":
        return "the program" + (f" {_params_text(params)}" if params else "")
    return _params_text(params)


def _axis_label(metric: str, factor_unit) -> str:
    d = metric_defs.metric(metric)
    unit = factor_unit[1]
    return f"{d.label}{f' ({unit})' if unit else ''}, {d.direction}"


def _reference(analysis, metric):
    means = [a.summaries[metric].mean for b in analysis.cells for a in b.allocators
             if metric in a.summaries and a.summaries[metric].mean]
    return min((abs(m) for m in means), default=None)


def _save(fig, directory: str, name: str) -> List[str]:
    paths = []
    for ext in FORMATS:
        path = os.path.join(directory, f"{name}.{ext}")
        fig.savefig(path, dpi=110, bbox_inches="tight")
        paths.append(path)
    return paths


def _allocator_names(analysis) -> List[str]:
    names = []
    for b in analysis.cells:
        for a in b.allocators:
            if a.name not in names:
                names.append(a.name)
    return names


def _cells_with(analysis, metric: str):
    """The cells (param set x probe set) that measured this metric: a probe
    set that does not measure it would only leave an empty group."""
    return [b for b in analysis.cells if any(metric in a.summaries for a in b.allocators)]


def bar_chart(analysis, metric: str, directory: str, stem: str) -> List[str]:
    plt = _pyplot()
    names = _allocator_names(analysis)
    colors = _colors(names)
    factor, unit = scale_for(metric_defs.metric(metric).unit, _reference(analysis, metric))
    cells = _cells_with(analysis, metric)
    width = 0.8 / max(1, len(names))
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 + 0.5 * len(cells) * len(names)), 3.8))
    for i, name in enumerate(names):
        xs, ys, lo, hi = [], [], [], []
        for j, b in enumerate(cells):
            a = b.stats(name)
            s = a.summaries.get(metric) if a else None
            if s is None or s.mean is None:
                continue
            xs.append(j + (i - (len(names) - 1) / 2) * width)
            ys.append(s.mean * factor)
            ci = s.ci_mean or (s.mean, s.mean)
            lo.append((s.mean - ci[0]) * factor)
            hi.append((ci[1] - s.mean) * factor)
        if xs:
            ax.bar(xs, ys, width * 0.95, yerr=[lo, hi], capsize=3, label=name, color=colors[name])
    ax.set_xticks(range(len(cells)))
    # Name only the params that change from group to group; the others are in the title.
    shown = analysis.varying or None
    ax.set_xticklabels([_cell_text(b, {k: v for k, v in b.params.items() if shown is None or k in shown})
                        for b in cells], rotation=20 if len(cells) > 3 else 0)
    ax.set_ylabel(_axis_label(metric, (factor, unit)))
    fixed = {k: v for k, v in cells[0].params.items() if k not in analysis.varying} if cells else {}
    ax.set_title(f"{analysis.scenario}: {metric_defs.metric(metric).label} (mean, 95% CI)"
                 + (f"\n{_params_text(fixed)}" if fixed and len(cells) > 1 else ""))
    ax.legend(fontsize="small")
    paths = _save(fig, directory, f"{stem}-{_slug(metric)}-bars")
    plt.close(fig)
    return paths


def box_plot(analysis, metric: str, directory: str, stem: str) -> List[str]:
    plt = _pyplot()
    cells = _cells_with(analysis, metric)[:MAX_PANELS]
    factor, unit = scale_for(metric_defs.metric(metric).unit, _reference(analysis, metric))
    cols = min(3, len(cells))
    rows = math.ceil(len(cells) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    for ax, b in zip(axes.flat, cells):
        data, labels = [], []
        for a in b.allocators:
            values = a.samples.get(metric)
            if values:
                data.append([v * factor for v in values])
                labels.append(a.name)
        if data:
            ax.boxplot(data, labels=labels) if _old_matplotlib() else ax.boxplot(data, tick_labels=labels)
            for x, values in enumerate(data, start=1):
                if len(values) <= FEW_RUNS:
                    # A box of a handful of runs hides how few they are: show each run.
                    offsets = [(k - (len(values) - 1) / 2) * 0.06 for k in range(len(values))]
                    ax.plot([x + o for o in offsets], values, "o", color="#d62728", markersize=4,
                            alpha=0.8, zorder=3)
        ax.set_title(_cell_text(b, b.params), fontsize="small")
        ax.set_ylabel(_axis_label(metric, (factor, unit)), fontsize="small")
        ax.tick_params(axis="x", labelrotation=20)
    for ax in list(axes.flat)[len(cells):]:
        ax.set_visible(False)
    fig.suptitle(f"{analysis.scenario}: {metric_defs.metric(metric).label}, every run")
    fig.tight_layout()
    paths = _save(fig, directory, f"{stem}-{_slug(metric)}-box")
    plt.close(fig)
    return paths


def _old_matplotlib() -> bool:
    import matplotlib
    major, minor = (int(x) for x in matplotlib.__version__.split(".")[:2])
    return (major, minor) < (3, 9)


def _numeric(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _sweep_axis(ax, values) -> None:
    """Ticks at the values swept, labelled as given; a log axis when they span an order of
    magnitude or more (64, 1024, 32768 would crowd into one corner of a linear axis)."""
    if values and min(values) > 0 and max(values) >= LOG_SPAN * min(values):
        from matplotlib.ticker import NullLocator
        ax.set_xscale("log")
        ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(values)
    ax.set_xticklabels([f"{v:g}" for v in values])


def sweep_plot(analysis, metric: str, param: str, directory: str, stem: str) -> List[str]:
    plt = _pyplot()
    names = _allocator_names(analysis)
    colors = _colors(names)
    factor, unit = scale_for(metric_defs.metric(metric).unit, _reference(analysis, metric))
    others = [p for p in analysis.varying if p != param]
    groups: Dict[str, list] = {}
    for b in _scenario_cells(analysis):
        label = " ".join(f"{p}={b.params.get(p)}" for p in others)
        groups.setdefault(label, []).append(b)
    panels = list(groups.items())[:MAX_PANELS]
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.6 * rows), squeeze=False)
    for ax, (label, cells) in zip(axes.flat, panels):
        cells = sorted(cells, key=lambda b: b.params.get(param))
        for name in names:
            xs, ys, lo, hi = [], [], [], []
            for b in cells:
                a = b.stats(name)
                s = a.summaries.get(metric) if a else None
                if s is None or s.mean is None:
                    continue
                ci = s.ci_mean or (s.mean, s.mean)
                xs.append(b.params.get(param))
                ys.append(s.mean * factor)
                lo.append(ci[0] * factor)
                hi.append(ci[1] * factor)
            if xs:
                ax.plot(xs, ys, marker="o", label=name, color=colors[name])
                ax.fill_between(xs, lo, hi, alpha=0.2, color=colors[name])
        ax.set_xlabel(param)
        _sweep_axis(ax, sorted({b.params.get(param) for b in cells}))
        ax.set_ylabel(_axis_label(metric, (factor, unit)), fontsize="small")
        if label:
            ax.set_title(label, fontsize="small")
        ax.legend(fontsize="small")
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(f"{analysis.scenario}: {metric_defs.metric(metric).label} against {param} "
                 f"(mean, 95% CI band)")
    fig.tight_layout()
    paths = _save(fig, directory, f"{stem}-{_slug(metric)}-vs-{_slug(param)}")
    plt.close(fig)
    return paths


def _plots_of(analysis, directory: str, stem: str, all_metrics: bool, metrics) -> List[str]:
    paths: List[str] = []
    for metric in shown_metrics(analysis, all_metrics, metrics):
        if not any(metric in a.summaries for b in analysis.cells for a in b.allocators):
            continue
        paths += bar_chart(analysis, metric, directory, stem)
        paths += box_plot(analysis, metric, directory, stem)
        for param in analysis.varying:
            if all(_numeric(b.params.get(param)) for b in _scenario_cells(analysis)):
                paths += sweep_plot(analysis, metric, param, directory, stem)
    return paths


def _titled(analysis, title: str, cells):
    """The analysis seen as `title`, with only `cells` (whose varying params are recomputed)."""
    varying = [p for p in analysis.varying
               if len({repr(b.params.get(p)) for b in cells}) > 1]
    return dataclasses.replace(analysis, header=dict(analysis.header, scenario=title),
                               cells=cells, varying=varying)


def write_plots(analysis, directory: str, all_metrics: bool = False, metrics=None,
                across_machines: bool = False) -> List[str]:
    """Every plot for the metrics a table would show; returns the files written.

    A merge of several machines' shards gets each machine's plots apart
    (no figure puts two machines' cells side by side) unless
    `across_machines`, which draws them together under a warning.
    """
    os.makedirs(directory, exist_ok=True)
    stem = _slug(analysis.scenario)
    if not analysis.machines:
        return _plots_of(analysis, directory, stem, all_metrics, metrics)
    if across_machines:
        title = (f"{analysis.scenario} -- WARNING: {len(analysis.machines)} machines, "
                 f"cells are not comparable")
        return _plots_of(_titled(analysis, title, analysis.cells), directory,
                         f"{stem}-across-machines", all_metrics, metrics)
    paths: List[str] = []
    for machine, cells in analysis.by_machine():
        title = f"{analysis.scenario} on {machine} ({machine_name(analysis.machines.get(machine, {}))})"
        paths += _plots_of(_titled(analysis, title, cells), directory, f"{stem}-{machine}",
                           all_metrics, metrics)
    return paths
