"""`scenc report RESULT --summary-csv FILE`: one row per allocator, param set and metric.

Where `--csv` gives every run (one row per run and metric, params packed as `k=v;k2=v2`), this
gives what the tables describe: n, mean, sd, median, min, max and the 95% intervals of the mean and
the median, for every metric of the file, with one column per param (as hyperfine's `parameter_*`
columns, named after the param itself: `threads`). Units are the result file's own (s, KiB, ...),
never scaled. The rows are report/frames.py's `load_summary` too.
"""

import csv
import io
import os
from typing import Dict, List, Sequence

from ..stats.summary import summarize
from . import metrics as metric_defs

__all__ = ["SUMMARY_COLUMNS", "param_columns", "summary_rows", "write_summary_csv"]

# The columns every summary has; the params' columns come after `target`.
SUMMARY_COLUMNS = ("allocator", "metric", "unit", "lower_is_better", "n", "mean", "sd", "median", "min",
                   "max", "mean_ci_low", "mean_ci_high", "median_ci_low", "median_ci_high", "cv", "outliers",
                   "failed_runs", "confidence", "probe_set", "machine")


def param_columns(names: Sequence[str], taken: Sequence[str]) -> Dict[str, str]:
    """param -> its column: its own name, or `parameter_<name>` when that name is another column's."""
    return {n: f"parameter_{n}" if n in taken else n for n in names}


def _params_of(analysis) -> List[str]:
    names: List[str] = []
    for cell in analysis.cells:
        names += [k for k in cell.params if k not in names]
    return names


def summary_rows(analysis) -> List[dict]:
    """Every (cell, allocator, metric) with runs, as {column: value} (None where nothing can be said).

    An allocator with no successful run in a cell still gets one row, with no metric and n = 0, so a
    configuration that only failed stays visible."""
    params = param_columns(_params_of(analysis), ("target",) + SUMMARY_COLUMNS)
    rows = []
    for cell in analysis.cells:
        fixed = {"target": cell.target, **{column: cell.params.get(name) for name, column in params.items()}}
        for a in cell.allocators:
            failed = sum(a.failures.values())
            metrics = [m for m in metric_defs.order(a.samples) if a.samples[m]]
            if not metrics:
                rows.append(dict(fixed, allocator=a.name, metric=None, n=0, failed_runs=failed,
                                 probe_set=cell.probe_set, machine=cell.machine))
                continue
            for m in metrics:
                s = a.summaries.get(m) or summarize(a.samples[m], confidence=analysis.confidence)
                d = metric_defs.metric(m)
                rows.append(dict(
                    fixed, allocator=a.name, metric=m, unit=d.unit, lower_is_better=d.lower_is_better,
                    n=s.n, mean=s.mean, sd=s.stdev, median=s.median, min=s.min, max=s.max,
                    mean_ci_low=s.ci_mean[0] if s.ci_mean else None, mean_ci_high=s.ci_mean[1] if s.ci_mean else None,
                    median_ci_low=s.ci_median[0] if s.ci_median else None,
                    median_ci_high=s.ci_median[1] if s.ci_median else None,
                    cv=s.cv, outliers=len(s.outliers), failed_runs=failed, confidence=s.confidence,
                    probe_set=cell.probe_set, machine=cell.machine))
    return rows


def columns_of(analysis) -> List[str]:
    names = param_columns(_params_of(analysis), ("target",) + SUMMARY_COLUMNS)
    return ["target", *names.values(), *SUMMARY_COLUMNS]


def _cell_text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def write_summary_csv(analysis, path: str) -> int:
    """Write the summary CSV (replacing the file at once); returns its number of rows."""
    columns = columns_of(analysis)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    rows = summary_rows(analysis)
    for row in rows:
        writer.writerow([_cell_text(row.get(c)) for c in columns])
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        f.write(buffer.getvalue())
    os.replace(tmp, path)
    return len(rows)
