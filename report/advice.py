"""Warnings printed once, after the tables (as hyperfine and pyperf do), and what to do about them.

Too few runs for a claim (and how many to ask for), outlier runs (which
allocator, which run, how far out), runs too short to time, and noisy figures with the load average at the start and the end of
the session (no word of a "machine": a merge of shards names its machines). They explain a report; they never change what it claims.
"""

from typing import List, Optional, Sequence

from ..stats.rank import MIN_RUNS
from . import metrics as metric_defs

__all__ = ["advice_lines", "SHORT_RUN_S", "NOISY_CV"]

SHORT_RUN_S = 0.005     # below ~5 ms, process start-up and the clock weigh on a run's time
NOISY_CV = 0.10         # runs of one allocator spread this much: the machine, more than the allocator
MAX_OUTLIER_LINES = 6
# A run is named as an outlier when its robust z-score says so (stats/summary.py) AND it is this far
# from the median: peak RSS often varies by a page or two, which is "far" only for the z-score.
OUTLIER_MIN_DEVIATION = 0.05


def _where(analysis, cell) -> str:
    """" [threads=2]" when the report has several cells, else ""."""
    if len(analysis.cells) < 2:
        return ""
    if cell.target == "command":
        params = " ".join(f"{k}={v}" for k, v in cell.params.items())
        return f" [the program{' ' + params if params else ''}]"
    return " [" + (" ".join(f"{k}={v}" for k, v in cell.params.items()) or "the scenario") + "]"


def _plain(value: float, unit: str) -> str:
    return f"{value:.4g} {unit}".strip()


def _outliers(analysis, metrics: Sequence[str], fmt) -> List[str]:
    found = []
    for cell in analysis.cells:
        for metric in metrics:
            for a in cell.allocators:
                s = a.summaries.get(metric)
                if s is None or not s.outliers or not s.median:
                    continue
                rounds = a.rounds.get(metric, [])
                for i in s.outliers:
                    value = a.samples[metric][i]
                    if abs(value / s.median - 1) < OUTLIER_MIN_DEVIATION:
                        continue
                    round_ = f" (round {rounds[i]})" if i < len(rounds) and rounds[i] is not None else ""
                    unit = metric_defs.metric(metric).unit
                    found.append(f"outlier: {a.name}'s run {i + 1} of {s.n}{round_}{_where(analysis, cell)}: "
                                 f"{metric_defs.metric(metric).label} {fmt(value, unit)}, "
                                 f"{value / s.median:.2f}x its median ({fmt(s.median, unit)})")
    if len(found) > MAX_OUTLIER_LINES:
        found = found[:MAX_OUTLIER_LINES] + [f"... and {len(found) - MAX_OUTLIER_LINES} more outlier runs "
                                             f"(`scenc report --json` lists them all)"]
    if found:
        found.append("  (outliers stay in the statistics: the rank test weighs a run by its rank, "
                     "not its size, so one wild run moves a verdict little)")
    return found


def _short(analysis, fmt) -> List[str]:
    short = []
    for cell in analysis.cells:
        for a in cell.allocators:
            s = a.summaries.get("wall_s")
            if s is not None and s.median is not None and s.median < SHORT_RUN_S:
                short.append(f"{a.name}{_where(analysis, cell)} {fmt(s.median, 's')}")
    if not short:
        return []
    return [f"short runs: median wall time under {SHORT_RUN_S * 1000:g} ms ({', '.join(short[:6])}"
            f"{', ...' if len(short) > 6 else ''}): start-up and the clock weigh on so little work; "
            f"give the scenario more (a larger param, more iterations)"]


def _too_few(analysis) -> List[str]:
    """Allocators with some runs, but fewer than a claim needs: say how many to ask for."""
    few = sorted({a.n for cell in analysis.cells for a in cell.allocators if 0 < a.n < MIN_RUNS})
    if not few:
        return []
    counts = f"{few[0]}" if len(few) == 1 else f"{few[0]} to {few[-1]}"
    return [f"too few runs: {counts} per allocator, and a claim needs at least {MIN_RUNS} of each, so no "
            f"verdict is given; run again with --runs 20 (10 to 30 give most comparisons a verdict), or "
            f"without --runs: rounds until the intervals are tight (45 s per param set at most)"]


def _load(values) -> Optional[float]:
    try:
        return float(values[0])
    except (TypeError, IndexError, ValueError, KeyError):
        return None


def load_sentence(header, status: Optional[str]) -> str:
    """"load average 2.36 at the start and 2.39 at the end of the session, on 2 CPUs"."""
    machine = header.get("machine") or {}
    start, end = _load(machine.get("load_average")), _load(header.get("status_load_average"))
    cpus = machine.get("usable_cpus") or machine.get("logical_cpus")
    on = f", on {cpus} CPUs" if cpus else ""
    if start is None and end is None:
        return f"the load average was not recorded (a result file of an older scenc){on}"
    at_end = "at the end" if status == "complete" else f"when the file became {status}"
    fmt = lambda v: "not recorded" if v is None else f"{v:.2f}"  # noqa: E731
    return f"load average {fmt(start)} at the start and {fmt(end)} {at_end} of the session{on}"


def _noisy(analysis, metrics: Sequence[str]) -> List[str]:
    noisy = []
    for cell in analysis.cells:
        for metric in metrics:
            spread = [f"{a.name} {a.summaries[metric].cv:.0%}" for a in cell.allocators
                      if metric in a.summaries and (a.summaries[metric].cv or 0) > NOISY_CV]
            if spread:
                noisy.append(f"{metric_defs.metric(metric).label}{_where(analysis, cell)}: {', '.join(spread)}")
    if not noisy:
        return []
    return [f"noisy runs: CV above {NOISY_CV:.0%} ({'; '.join(noisy[:4])}{'; ...' if len(noisy) > 4 else ''}); "
            f"{load_sentence(analysis.header, analysis.file_status)}"]


def advice_lines(analysis, metrics: Sequence[str], format_value=_plain) -> List[str]:
    """The warnings for the metrics shown, and what to do; [] when there is nothing to say.
    `format_value(value, unit)` prints a figure (report/tables.py passes its own)."""
    shown = [m for m in metrics if m in analysis.metrics]
    found = (_too_few(analysis) + _outliers(analysis, shown, format_value) + _short(analysis, format_value)
             + _noisy(analysis, shown))
    if not found:
        return []
    todo = ("what to do: more runs narrow every interval (--runs 30, or --runs auto with a longer "
            "--time-budget); quieter conditions narrow the runs themselves (a load under the CPU count, "
            "nothing else benchmarking)")
    return ["warnings:"] + ["  " + line for line in found] + ["  " + todo]
