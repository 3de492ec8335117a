"""Result files as pandas DataFrames, for a notebook or a script.

    from scenc.report.frames import load_frame, load_summary
    runs = load_frame("results/larson-20261122-012442.json")
    runs.groupby(["threads", "allocator"])["wall_s"].median()
    load_summary("results/larson-20261122-012442.json")      # the rows of --summary-csv

pandas is an optional extra, not a dependency of scenc: `pip install 'scenc[pandas]'` (or any
pandas). Nothing else of scenc needs it, and without it these functions say so.
"""

from typing import List, Optional

from ..run.resultfile import ResultFile, load
from . import metrics as metric_defs
from .exports import columns_of, param_columns, summary_rows

__all__ = ["load_frame", "load_summary", "PANDAS_HINT"]

PANDAS_HINT = "pip install 'scenc[pandas]'"
# The columns every run has; the params' columns come after `target`, the metrics' at the end.
RUN_COLUMNS = ("run", "allocator", "probe_set", "round", "warmup", "status", "started", "duration_s", "provider")


def _pandas():
    try:
        import pandas
    except ImportError:
        raise ImportError(f"scenc.report.frames needs pandas, an optional extra of scenc: {PANDAS_HINT}") from None
    return pandas


def _result(source) -> ResultFile:
    return source if isinstance(source, ResultFile) else load(source)


def load_frame(source, *, all_runs: bool = False):
    """One row per run: `run` (its position in the file), `allocator`, one column per param (named
    after it, or `parameter_<name>` when a run's column has that name), `target`, `probe_set`, `round`,
    `warmup`, `status`, `started`, `duration_s`, `provider`, and one float column per metric (NaN
    where a run lacks it).

    By default only the runs the statistics use (successful, not warm-ups); `all_runs` keeps every
    run of the file, failed runs and saved warm-ups too. `source` is a path or a loaded ResultFile."""
    pandas = _pandas()
    result = _result(source)
    runs = list(result.runs)
    names: List[str] = []
    for r in runs:
        names += [k for k in r.params if k not in names]
    metrics = metric_defs.order({m for r in runs for m in r.metrics})
    params = param_columns(names, ("target",) + RUN_COLUMNS + tuple(metrics))
    rows = []
    for index, r in enumerate(runs):
        if not all_runs and not r.is_measurement:
            continue
        row = {"run": index, "allocator": r.allocator,
               **{column: r.params.get(name) for name, column in params.items()},
               "target": r.target, "probe_set": r.probe_set, "round": r.round, "warmup": r.warmup,
               "status": r.status.value, "started": r.started, "duration_s": r.duration_s,
               "provider": r.provider}
        row.update({m: r.metrics.get(m) for m in metrics})
        rows.append(row)
    columns = ["run", "allocator", *params.values(), "target", *RUN_COLUMNS[2:], *metrics]
    frame = pandas.DataFrame(rows, columns=columns)
    for m in metrics:
        frame[m] = pandas.to_numeric(frame[m], errors="coerce").astype(float)
    return frame


def load_summary(source, *, baseline: Optional[str] = None):
    """The rows of `scenc report --summary-csv` (report/exports.py): one per allocator, param set
    and metric, with n, mean, sd, median, min, max and the 95% intervals of the mean and the median."""
    pandas = _pandas()
    from .analysis import analyze
    analysis = analyze(_result(source), baseline=baseline, metrics=None)
    return pandas.DataFrame(summary_rows(analysis), columns=columns_of(analysis))
