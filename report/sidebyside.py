"""A scenario (or replay) beside the real program it stands for, from one session.

`scenc run app.scn ... -- ./app args` runs both in the same shuffled rounds,
so a drift of the machine falls on both alike. This puts them side by side
for wall time and peak RSS: each one's ranking of the allocators, each
allocator's ratio to the baseline with its confidence interval, whether
they agree on the best and the worst allocator wherever the program's own
difference is significant (a scenario is worth exactly its agreement with
the program), and the share of the program's wall time the scenario takes.
"""

from typing import List, Optional, Tuple

from . import metrics as metric_defs
from ..run.plan import DEFAULT_PROBE_SET

# The text is report/tables.py's (format_side_by_side); here are the numbers.

_METRICS = ("wall_s", "peak_rss_kib")


def _ranking(cell, metric: str) -> List[tuple]:
    """[(allocator, mean)] best first: the order the cell's verdicts use."""
    m = metric_defs.metric(metric)
    ranked = [(a.name, a.summaries[metric].mean) for a in cell.allocators
              if metric in a.summaries and len(a.samples.get(metric, [])) >= 2]
    return sorted(ranked, key=lambda x: x[1], reverse=not m.lower_is_better)


def _first_and_last(cell, metric: str) -> Tuple[Optional[object], Optional[object]]:
    """The cell's verdicts on the best and the worst allocator (report/analysis.py).

    With two allocators there is no separate verdict on the last: it is the
    best's runner-up, and that comparison decides both ends.
    """
    best = cell.verdicts.get(metric)
    return best, cell.last.get(metric, best)


def _end(word: str, program_verdict, scenario_pick: Optional[str], worst: bool) -> dict:
    if program_verdict is None or program_verdict.runner_up is None:
        return {}
    name = program_verdict.runner_up if worst and program_verdict.word != word else program_verdict.best
    c = program_verdict.comparison
    significant = bool(c is not None and c.significant)
    return {"word": word, "program": name, "scenario": scenario_pick, "significant": significant,
            "agrees": (name == scenario_pick) if significant else None}


def _ends(program_cell, scenario_cell, metric: str) -> List[dict]:
    """Fastest and slowest (leanest and fattest): the program's, the scenario's, and whether they agree
    where the program's own difference is significant."""
    m = metric_defs.metric(metric)
    scen = _ranking(scenario_cell, metric)
    prog_best, prog_last = _first_and_last(program_cell, metric)
    if len(scen) < 2 or prog_best is None:
        return []
    ends = [_end(m.best, prog_best, scen[0][0], worst=False), _end(m.worst, prog_last, scen[-1][0], worst=True)]
    return [e for e in ends if e]


def _to_baseline(cell, metric: str) -> dict:
    """Each allocator's ratio to the cell's baseline, its interval, its significance and the difference
    of the means (the cell's own comparisons: report/analysis.py)."""
    return {name: {"ratio": c.ratio, "ratio_ci": list(c.ratio_ci) if c.ratio_ci else None,
                   "difference": c.other_mean - c.baseline_mean, "significant": bool(c.significant)}
            for name, c in cell.comparisons.get(metric, {}).items()}


def pairs(analysis):
    """(scenario cell, program cell) for every scenario cell the command stands beside."""
    program = next((b for b in analysis.cells if b.target == "command"), None)
    if program is None:
        return []
    return [(b, program) for b in analysis.cells if b.target == "scenario" and b.probe_set == DEFAULT_PROBE_SET]


def side_by_side(scenario_cell, program_cell) -> dict:
    """Plain data: rankings, ratios to the baseline, ends and agreement per metric, and the time share
    per allocator."""
    out = {"metrics": {}, "time_share": {}, "baseline": program_cell.baseline}
    for metric in _METRICS:
        ends = _ends(program_cell, scenario_cell, metric)
        out["metrics"][metric] = {
            "program": _ranking(program_cell, metric), "scenario": _ranking(scenario_cell, metric),
            "to_baseline": {"program": _to_baseline(program_cell, metric),
                            "scenario": _to_baseline(scenario_cell, metric)},
            "ends": ends}
    for a in program_cell.allocators:
        s = scenario_cell.stats(a.name)
        prog, scen = a.samples.get("wall_s"), s.samples.get("wall_s") if s else None
        if prog and scen:
            out["time_share"][a.name] = (sum(scen) / len(scen)) / (sum(prog) / len(prog))
    return out


def pairs_json(analysis) -> list:
    return [dict(side_by_side(scenario_cell, program_cell), params=scenario_cell.params)
            for scenario_cell, program_cell in pairs(analysis)]
