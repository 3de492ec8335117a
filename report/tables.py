"""Terminal tables for an Analysis: one cell per param set, one table per metric.

Each table gives n, mean ± half-width of its 95% CI, median with its
bootstrap CI, CV and the number of MAD outliers; under it, one sentence per
allocator against the baseline, and at the end of the cell the winner of
each headline metric against the runner-up.
"""

import math
from typing import List, Optional, Sequence

from .. import probes  # noqa: F401  (registers the probes' metrics: labels, units, key figures)
from ..run.cells import machine_name
from ..run.plan import DEFAULT_PROBE_SET
from . import metrics as metric_defs
from . import sidebyside


# ------------------------------------------------------------------ numbers


def scale_for(unit: str, reference: Optional[float]):
    """(factor, unit text) so that values near `reference` print with a readable unit."""
    ref = abs(reference or 0.0)
    if ref == 0.0:
        return 1.0, unit
    if unit == "s":
        for factor, text in ((1.0, "s"), (1e3, "ms"), (1e6, "µs")):
            if ref * factor >= 1.0:
                return factor, text
        return 1e9, "ns"
    if unit == "KiB":
        if ref >= 1024 * 1024 * 10:
            return 1 / (1024 * 1024), "GiB"
        if ref >= 10240:
            return 1 / 1024, "MiB"
        return 1.0, "KiB"
    if unit == "ops/s":
        if ref >= 1e9:
            return 1e-9, "G ops/s"
        if ref >= 1e6:
            return 1e-6, "M ops/s"
        if ref >= 1e3:
            return 1e-3, "k ops/s"
    return 1.0, unit


def _decimals(reference: float) -> int:
    """Enough decimals for four significant digits of `reference`, at most 4."""
    if reference == 0 or not math.isfinite(reference):
        return 0
    return max(0, min(4, 3 - int(math.floor(math.log10(abs(reference))))))


def format_value(value: Optional[float], unit: str, reference: Optional[float] = None) -> str:
    if value is None:
        return "-"
    factor, text = scale_for(unit, reference if reference is not None else value)
    digits = _decimals((reference if reference is not None else value) * factor)
    return f"{value * factor:.{digits}f} {text}".strip()


# ------------------------------------------------------------------- layout


def _table(rows: Sequence[Sequence[str]], right: Sequence[bool], indent: str = "  ") -> List[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for r in rows:
        cells = [c.rjust(w) if right[i] else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        lines.append((indent + "  ".join(cells)).rstrip())
    return lines


def _failure_cell(a) -> str:
    return ", ".join(f"{n} {status}" for status, n in a.failures.items())


def _metric_table(cell, metric: str) -> List[str]:
    d = metric_defs.metric(metric)
    present = [a for a in cell.allocators if metric in a.summaries]
    if not present and not any(a.failures for a in cell.allocators):
        return []
    means = [a.summaries[metric].mean for a in present if a.summaries[metric].mean is not None]
    reference = min((abs(m) for m in means if m), default=None)
    factor, unit_text = scale_for(d.unit, reference)
    digits = _decimals(reference * factor) if reference else 0

    def num(v):
        return "-" if v is None else f"{v * factor:.{digits}f}"

    rows = [["allocator", "n", f"mean ± 95% CI ({unit_text})" if unit_text else "mean ± 95% CI",
             "median [95% CI]", "sd", "CV", "outliers", "failed runs"]]
    for a in cell.allocators:
        s = a.summaries.get(metric)
        if s is None:
            rows.append([a.name, str(a.n), "-", "-", "-", "-", "", _failure_cell(a)])
            continue
        if s.ci_mean is not None:
            half = (s.ci_mean[1] - s.ci_mean[0]) / 2
            mean = f"{num(s.mean)} ± {num(half)}"
        else:
            mean = num(s.mean)
        median = num(s.median)
        if s.ci_median is not None:
            median += f" [{num(s.ci_median[0])}, {num(s.ci_median[1])}]"
        cv = f"{s.cv:.1%}" if s.cv is not None else "-"
        outliers = str(len(s.outliers)) if s.outliers else ""
        rows.append([a.name + (" *" if a.name == cell.baseline else ""), str(s.n), mean, median,
                     num(s.stdev), cv, outliers, _failure_cell(a)])
    right = [False, True, True, True, True, True, True, False]
    for column in (7, 6):  # drop the outliers and failures columns when empty
        if not any(r[column] for r in rows[1:]):
            rows = [r[:column] + r[column + 1:] for r in rows]
            right = right[:column] + right[column + 1:]
    lines = [f"{d.label} ({d.direction})"]
    lines += _table(rows, right)
    for a in cell.allocators:
        sentence = cell.comparison_sentence(metric, a.name)
        if sentence:
            lines.append("  " + sentence)
    return lines


def _cell_title(analysis, cell) -> str:
    if cell.target == "command":
        from ..run.program.target import target_of
        command = target_of(analysis.header)
        return f"== command: {command.describe() if command else '?'} =="
    params = " ".join(f"{k}={v}" for k, v in cell.params.items())
    probe = f" [{cell.probe_set}]" if cell.probe_set != DEFAULT_PROBE_SET else ""
    machine = ""
    if cell.machine and analysis.machines:
        machine = f" (machine {cell.machine}: {machine_name(analysis.machines[cell.machine])})"
    return f"== {analysis.scenario}{' ' + params if params else ''}{probe}{machine} =="


# What a failed run did, for people; none of these runs is in the statistics.
_FAILED_RUNS = {
    "crashed": "crashed",
    "timeout": "timed out",
    "wrong-allocator": "ran under the wrong allocator",
    "failed-allocs": "finished with failed allocations",
    "out-of-memory": "ran out of memory",
    "no-metric": "printed no --metric figure",
}
# Failures that make the allocator's name in the table a lie or hide a limit: shouted.
_LOUD = {"wrong-allocator": "WRONG ALLOCATOR", "out-of-memory": "OUT OF MEMORY"}


def _failure_lines(cell) -> List[str]:
    lines = []
    for a in cell.allocators:
        if not a.failures:
            continue
        what = ", ".join(f"{n} run{'s' * (n != 1)} {_FAILED_RUNS.get(status, status)}"
                         for status, n in a.failures.items())
        loud = "".join(f"{word}: " for status, word in _LOUD.items() if status in a.failures)
        lines.append(f"  {loud}{a.name}: {what} — {'; '.join(a.problems) or 'no detail'}")
        tail = [l for l in a.stderr_tail.strip().splitlines() if l.strip()][-3:]
        for line in tail:
            lines.append(f"      stderr: {line[:160]}")
    for a in cell.allocators:
        # Result files from before "failed-allocs" was a status of its own.
        failed = a.samples.get("failed_allocs", [])
        if any(failed):
            lines.append(f"  {a.name}: allocations returned NULL in {sum(1 for v in failed if v)} of "
                         f"{len(failed)} runs ({int(sum(failed))} calls); those runs did less work, "
                         f"so their times are not comparable")
    return lines


def shown_metrics(analysis, all_metrics: bool = False, only: Optional[Sequence[str]] = None) -> List[str]:
    if only:
        return [m for m in only]
    if all_metrics:
        return list(analysis.metrics)
    headline = [m for m in metric_defs.headline_names() if m in analysis.metrics]
    return headline + [m for m in analysis.metrics if metric_defs.shown_by_default(m) and m not in headline]


def format_cell(analysis, cell, metrics: Sequence[str]) -> str:
    lines = [_cell_title(analysis, cell)]
    counts = sorted({a.n for a in cell.allocators})
    n_text = f"{counts[0]} runs per allocator" if len(counts) == 1 else \
        f"{counts[0]} to {counts[-1]} runs per allocator"
    lines.append(f"{n_text}; * = baseline ({cell.baseline}); 95% confidence")
    for metric in metrics:
        table = _metric_table(cell, metric)
        if table:
            lines.append("")
            lines += table
    verdicts = [v.sentence() for m in metrics for v in (cell.verdicts.get(m), cell.last.get(m)) if v]
    if verdicts:
        lines.append("")
        lines += verdicts
    failures = _failure_lines(cell)
    if failures:
        lines.append("")
        lines.append("problems:")
        lines += failures
    return "\n".join(lines)


def format_analysis(analysis, all_metrics: bool = False, metrics: Optional[Sequence[str]] = None) -> str:
    chosen = shown_metrics(analysis, all_metrics, metrics)
    parts = [format_cell(analysis, b, chosen) for b in analysis.cells]
    if not parts:
        return f"{analysis.scenario}: no runs in {analysis.path}"
    parts += [format_side_by_side(analysis, scenario_cell, program_cell)
              for scenario_cell, program_cell in sidebyside.pairs(analysis)]
    if analysis.machines:
        parts.append(f"(these cells ran on {len(analysis.machines)} machines; each cell's figures "
                     f"compare allocators on one machine only: do not compare cells of different machines)")
    status = analysis.file_status
    if status and status != "complete":
        parts.append(f"(result file status: {status}; statistics cover the runs finished so far)")
    return "\n\n".join(parts)


# ----------------------------------------------------------- a scenario beside its program


def _end_sentence(end: dict) -> str:
    if end["agrees"] is None:
        return (f"{end['word']}: in the program, {end['program']} is not significantly apart from the "
                f"next allocator, so there is nothing to agree on (the scenario says {end['scenario']})")
    if end["agrees"]:
        return f"{end['word']}: AGREE, {end['program']} for both (significant in the program)"
    return (f"{end['word']}: DISAGREE, the program's is {end['program']} (significant), the scenario's "
            f"is {end['scenario']}")


def format_side_by_side(analysis, scenario_cell, program_cell) -> str:
    """Rankings of both, agreement at each significant end, the scenario's share of the program's time."""
    data = sidebyside.side_by_side(scenario_cell, program_cell)
    params = " ".join(f"{k}={v}" for k, v in scenario_cell.params.items())
    lines = [f"== {analysis.scenario}{' ' + params if params else ''} beside the program "
             f"(same session, interleaved rounds) =="]
    ends = []
    for metric, found in data["metrics"].items():
        m = metric_defs.metric(metric)
        prog, scen = found["program"], found["scenario"]
        if not prog or not scen:
            continue
        factor, unit = scale_for(m.unit, min(v for _, v in prog + scen))
        lines += ["", f"{m.label} ({m.direction}), best first", f"  {'':4} {'scenario':<28} program"]
        for i in range(max(len(prog), len(scen))):
            cells = [f"{r[i][0]} {r[i][1] * factor:.4g} {unit}" if i < len(r) else "" for r in (scen, prog)]
            lines.append(f"  {i + 1:<4} {cells[0]:<28} {cells[1]:<28}".rstrip())
        ends += found["ends"]
    if data["time_share"]:
        lines += ["", "share of the program's wall time the scenario takes: " + ", ".join(
            f"{name} {share:.0%}" for name, share in data["time_share"].items())]
    if ends:
        lines += [""] + [_end_sentence(e) for e in ends]
        judged = [e for e in ends if e["agrees"] is not None]
        if judged:
            agree = sum(e["agrees"] for e in judged)
            lines.append(f"=> the scenario {'agrees with' if agree == len(judged) else 'DISAGREES with'} "
                         f"the program on {agree} of {len(judged)} significant ends")
    return "\n".join(lines)

