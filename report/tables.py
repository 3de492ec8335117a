"""Terminal tables for an Analysis: one cell per param set, one table per metric.

Each table gives n, mean ± half-width of its 95% CI, median with its
bootstrap CI, CV and the number of MAD outliers (descriptions); under it, one
sentence per allocator against the baseline, and at the end of the cell the
best and worst of each headline metric (the claims: report/analysis.py).
"""

import math
from typing import List, Optional, Sequence

from .. import probes  # noqa: F401  (registers the probes' metrics: labels, units, key figures)
from ..run.cells import machine_name
from ..run.plan import DEFAULT_PROBE_SET
from ..stats.rank import MIN_RUNS
from . import metrics as metric_defs
from . import sidebyside
from .advice import advice_lines
from .analysis import judged_metrics
from .because import family_note
from .sentences import percent


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


def metric_rows(cell, metric: str):
    """(title, rows (the header first), which columns align right) of one metric's table, or None when
    the cell has nothing to show for it; the terminal, markdown and HTML tables are all made of these."""
    d = metric_defs.metric(metric)
    present = [a for a in cell.allocators if metric in a.summaries]
    if not present and not any(a.failures for a in cell.allocators):
        return None
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
    return f"{d.label} ({d.direction})", rows, right


def _metric_table(cell, metric: str) -> List[str]:
    found = metric_rows(cell, metric)
    if found is None:
        return []
    title, rows, right = found
    lines = [title] + _table(rows, right)
    for a in cell.allocators:
        sentence = cell.comparison_sentence(metric, a.name)
        if sentence:
            lines.append("  " + sentence)
    return lines


def _cell_title(analysis, cell) -> str:
    if cell.target == "command":
        from ..run.program.target import target_of
        program = target_of(analysis.header)
        params = " ".join(f"{k}={v}" for k, v in cell.params.items())
        described = program.for_params(cell.params).describe() if program else "?"
        if program is not None and program.server is not None:
            return f"== {described}{f' ({params})' if params else ''} =="
        return f"== program: {described}{f' ({params})' if params else ''} =="
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
    return judged_metrics(analysis, None if all_metrics else [])


SERVER_NOTE = "wall time is the client's; peak RSS, CPU time and page faults are the server's"


def _serves(analysis, cell) -> bool:
    from ..run.program.target import target_of
    program = target_of(analysis.header) if cell.target == "command" else None
    return program is not None and program.server is not None


def format_cell(analysis, cell, metrics: Sequence[str]) -> str:
    lines = [_cell_title(analysis, cell)]
    if _serves(analysis, cell):
        lines.append(f"({SERVER_NOTE})")
    counts = sorted({a.n for a in cell.allocators})
    n_text = f"{counts[0]} runs per allocator" if len(counts) == 1 else \
        f"{counts[0]} to {counts[-1]} runs per allocator"
    if counts == [0]:
        lines.append("no successful run of any allocator: nothing to measure (problems below)")
    else:
        lines.append(f"{n_text}; * = baseline ({cell.baseline}); 95% confidence")
    for metric in metrics:
        table = _metric_table(cell, metric)
        if table:
            lines.append("")
            lines += table
    verdicts = [line for m in metrics for v in (cell.verdicts.get(m), cell.last.get(m)) if v
                for line in (v.sentence(), *cell.because_lines(v))]
    if verdicts:
        lines.append("")
        lines += verdicts
    failures = _failure_lines(cell)
    if failures:
        lines.append("")
        lines.append("problems:")
        lines += failures
    return "\n".join(lines)


def family_line(family, scope: str = "cell") -> str:
    """The one line that says which correction the sentences went through, and at what levels.
    `scope` "cell": Holm's family is a cell of the report (a param set's tables); "above": every comparison
    printed."""
    if family is None or family.size == 0:
        return f"(claims: none can be made: a claim needs at least {MIN_RUNS} runs of each allocator)"
    low, high = family.levels
    levels = percent(low) if percent(low) == percent(high) else f"{percent(low)}–{percent(high)}"
    noise = f"a difference within ±{percent(family.noise)} counts as noise (--noise)"
    if family.method == "bh":
        where = "above" if scope == "above" else "of the report"
        return (f"(claims: Benjamini–Hochberg over the {family.size} comparisons {where} (false "
                f"discovery rate {percent(1 - family.confidence)}); their intervals at {levels}; {noise})")
    if scope == "above" or family.families == 1:
        where = f"over the {family.size} comparisons {'above' if scope == 'above' else 'of the param set'}"
    else:
        sizes = f"{family.smallest}–{family.size}" if family.smallest != family.size else f"{family.size}"
        where = f"within each param set ({sizes} comparisons)"
    return f"(claims: Holm {where}, each interval at the level Holm grants it ({levels}); {noise})"


def format_analysis(analysis, all_metrics: bool = False, metrics: Optional[Sequence[str]] = None) -> str:
    chosen = shown_metrics(analysis, all_metrics, metrics)
    if list(chosen) != analysis.judged:    # the family is exactly what is printed
        analysis.judge(list(chosen))
    parts = [format_cell(analysis, b, chosen) for b in analysis.cells]
    if not parts:
        return f"{analysis.scenario}: no runs in {analysis.path}"
    parts += [format_side_by_side(analysis, scenario_cell, program_cell)
              for scenario_cell, program_cell in sidebyside.pairs(analysis)]
    if analysis.machines:
        parts.append(f"(these cells ran on {len(analysis.machines)} machines; each cell's figures "
                     f"compare allocators on one machine only: do not compare cells of different machines)")
    if any(a.n for c in analysis.cells for a in c.allocators):
        parts.append(family_line(analysis.family))
    else:
        parts.append("(claims: none: no run succeeded)")
    status = analysis.file_status
    if status and status != "complete":
        parts.append(f"(result file status: {status}; statistics cover the runs finished so far)")
    if analysis.because_size:     # the because: lines' own family, after the claims'
        parts.append(family_note(analysis.family.method, analysis.because_size))
    warnings = advice_lines(analysis, chosen, format_value)
    if warnings:
        parts.append("\n".join(warnings))
    return "\n\n".join(parts)


# ----------------------------------------------------------- a scenario beside its program


def _end_sentence(end: dict) -> str:
    if end["too_few"]:
        return (f"{end['word']}: the program has too few runs to tell, so there is nothing to agree on "
                f"(the scenario says {end['scenario']})")
    if end["agrees"] is None:
        return (f"{end['word']}: in the program, {end['program']} is not significantly apart from the "
                f"others, so there is nothing to agree on (the scenario says {end['scenario']})")
    if end["agrees"] and end["program"] == end["scenario"]:
        return f"{end['word']}: AGREE, {end['program']} for both (significant in the program)"
    if end["agrees"]:
        return (f"{end['word']}: AGREE, the program's are {end['program']}, tied (significant), "
                f"the scenario's is {end['scenario']}")
    return (f"{end['word']}: DISAGREE, the program's is {end['program']} (significant), the scenario's "
            f"is {end['scenario']}")


def _factor(side: dict) -> str:
    if side is None or side["ratio"] is None:
        return ""
    r = side["ratio"]
    return f"{max(r, 1 / r):.2f}x, " if r > 0 else ""


def _pair_sentence(label: str, pair: dict) -> str:
    program = f"{pair['better']} ahead of {pair['worse']} in the program ({_factor(pair['program'])}significant)"
    scen = pair["scenario"]
    if pair["agrees"] is None:
        return f"{label}: {program}: the scenario cannot tell (too few runs)"
    how = "significant" if pair["significant_in_scenario"] else "not significant"
    if pair["agrees"]:
        return f"{label}: {program}: AGREE, the scenario too ({_factor(scen)}{how})"
    if scen["ratio"] == 1.0:
        return f"{label}: {program}: DISAGREE, the scenario has them even ({how})"
    return f"{label}: {program}: DISAGREE, the scenario puts {pair['worse']} ahead ({_factor(scen)}{how})"


def _agreement_summary(data: dict) -> List[str]:
    """The count of agreements over every pair the program orders significantly, per metric too."""
    per_metric = {}
    for metric, found in data["metrics"].items():
        judged = [p for p in found["pairs"] if p["agrees"] is not None]
        if judged:
            per_metric[metric] = (sum(p["agrees"] for p in judged), len(judged))
    if not per_metric:
        return []
    agree = sum(a for a, _ in per_metric.values())
    total = sum(n for _, n in per_metric.values())
    detail = ", ".join(f"{metric_defs.metric(m).label} {a} of {n}" for m, (a, n) in per_metric.items())
    share = _share_text(data)
    if agree == total:
        head = (f"=> the scenario{share} agrees with the program on all {total} pairs the program orders "
                f"significantly")
    else:
        head = (f"=> the scenario{share} DISAGREES with the program on {total - agree} of the {total} pairs "
                f"the program orders significantly (agrees on {agree})")
    lines = [f"{head} ({detail})"]
    if data["small_share"] and "wall_s" in per_metric:
        lines.append(f"   its wall-time agreement says little: the scenario is under "
                     f"{sidebyside.SMALL_SHARE:.0%} of the program's wall time")
    return lines


def _share_text(data: dict) -> str:
    shares = list(data["time_share"].values())
    if not shares:
        return ""
    low, high = min(shares), max(shares)
    span = f"{low:.0%}" if f"{low:.0%}" == f"{high:.0%}" else f"{low:.0%}–{high:.0%}"
    return f" ({span} of the program's wall time)"


def _median_cell(cell, name: str, metric: str) -> str:
    return f"{name} {format_value(cell.stats(name).summaries[metric].median, metric_defs.metric(metric).unit)}"


def format_side_by_side(analysis, scenario_cell, program_cell) -> str:
    """Rankings of both, agreement on every pair the program orders significantly, and the
    scenario's share of the program's time."""
    data = sidebyside.side_by_side(scenario_cell, program_cell)
    params = " ".join(f"{k}={v}" for k, v in scenario_cell.params.items())
    lines = [f"== {analysis.scenario}{' ' + params if params else ''} beside the program "
             f"(same session, interleaved rounds) =="]
    ends, pair_lines = [], []
    for metric, found in data["metrics"].items():
        m = metric_defs.metric(metric)
        prog, scen = found["program"], found["scenario"]
        if not prog or not scen:
            continue
        lines += ["", f"{m.label} ({m.direction}), medians, best first",
                  f"  {'':4} {'scenario':<28} program"]
        for i in range(max(len(prog), len(scen))):
            cells = [_median_cell(cell, r[i][0], metric) if i < len(r) else ""
                     for cell, r in ((scenario_cell, scen), (program_cell, prog))]
            lines.append(f"  {i + 1:<4} {cells[0]:<28} {cells[1]:<28}".rstrip())
        ends += found["ends"]
        pair_lines += [_pair_sentence(m.label, p) for p in found["pairs"]]
    if data["time_share"]:
        lines += ["", "share of the program's wall time the scenario takes: " + ", ".join(
            f"{name} {share:.0%}" for name, share in data["time_share"].items())]
    if ends or pair_lines:
        lines += [""] + [_end_sentence(e) for e in ends] + pair_lines + _agreement_summary(data)
    return "\n".join(lines)
