"""A scenario (or replay) beside the real program it stands for, from one session.

`scenc run app.scn ... -- ./app args` runs both in the same shuffled rounds,
so a drift of the machine falls on both alike. This puts them side by side
for wall time and peak RSS: each one's ranking of the allocators, each
allocator's ratio to the baseline, and whether the scenario orders every
pair of allocators the program orders significantly the same way (a scenario
is worth exactly that agreement), with the scenario's share of the program's
time: a scenario that is a small part of the program says little of its speed.
"""

from typing import List, Optional

from . import metrics as metric_defs
from ..run.plan import DEFAULT_PROBE_SET

# The text is report/tables.py's (format_side_by_side); here are the numbers.

_METRICS = ("wall_s", "peak_rss_kib")
SMALL_SHARE = 0.20      # below this share of the program's time, the speed agreement says little


def _ranking(cell, metric: str) -> List[tuple]:
    """[(allocator, mean)] best first by median, the order the cell's verdicts use."""
    m = metric_defs.metric(metric)
    found = [a for a in cell.allocators if metric in a.summaries and a.samples.get(metric)]
    found.sort(key=lambda a: a.summaries[metric].median, reverse=not m.lower_is_better)
    return [(a.name, a.summaries[metric].mean) for a in found]


def _pair_json(c) -> Optional[dict]:
    if c is None:
        return None
    return {"ratio": c.estimate if c.scale == "ratio" else None, "ci": list(c.ci) if c.ci else None,
            "scale": c.scale, "significant": c.significant, "confidence": c.confidence}


def _agreement(program_cell, scenario_cell, metric: str) -> List[dict]:
    """Every pair the program orders significantly (better, worse), and the scenario's order of it:
    `agrees` when the scenario's estimate points the same way, None when it has too few runs."""
    ranking = program_cell.claims.rankings.get(metric)
    theirs = scenario_cell.claims.rankings.get(metric)
    found = []
    for pair in ranking.claims() if ranking else []:
        better, worse = (pair.other, pair.baseline) if pair.result.other_is_better else (pair.baseline, pair.other)
        mine = ranking.pair(better, worse).result
        scen = theirs.pair(better, worse) if theirs else None
        c = scen.result if scen else None
        agrees = None
        if c is not None and c.estimate is not None and c.ci is not None:
            null = 1.0 if c.scale == "ratio" else 0.0
            agrees = c.estimate != null and (c.estimate < null) == c.lower_is_better
        found.append({"better": better, "worse": worse, "program": _pair_json(mine), "scenario": _pair_json(c),
                      "agrees": agrees, "significant_in_scenario": bool(c is not None and c.significant)})
    return found


def _end(verdict, word: str, program_pick: str, scenario_pick: str) -> dict:
    """One end: the program's group (empty when it names none; "program" is then its pick by median),
    the scenario's pick by median, and whether the program had enough runs to name any."""
    group = list(verdict.group) if verdict is not None else []
    return {"word": word, "program": " and ".join(group) if group else program_pick, "program_group": group,
            "scenario": scenario_pick, "significant": bool(group), "agrees": (scenario_pick in group) if group else None,
            "too_few": verdict is None or len(verdict.order) < 2}


def _ends(program_cell, scenario_cell, metric: str) -> List[dict]:
    """Fastest and slowest (leanest and fattest): the program's group, the scenario's pick by median,
    and whether the pick is in the group where the program names one."""
    m = metric_defs.metric(metric)
    scen, prog = _ranking(scenario_cell, metric), _ranking(program_cell, metric)
    best, last = program_cell.verdicts.get(metric), program_cell.last.get(metric)
    if len(scen) < 2 or len(prog) < 2:
        return []
    if last is None and best is not None:      # two allocators: the worst is the best's runner-up
        from .verdicts import Verdict
        last = Verdict(metric, m.worst, best.ranking, best.runs, False, best.few)
    return [_end(best, m.best, prog[0][0], scen[0][0]), _end(last, m.worst, prog[-1][0], scen[-1][0])]


def _to_baseline(cell, metric: str) -> dict:
    """Each allocator's ratio to the cell's baseline, its interval, its significance and the difference
    of the means (the cell's own comparisons: report/analysis.py)."""
    out = {}
    for name, c in cell.comparisons.get(metric, {}).items():
        base, mine = cell.stats(cell.baseline).summaries[metric], cell.stats(name).summaries[metric]
        ratio = c.scale == "ratio"
        out[name] = {"ratio": c.estimate if ratio else None, "ratio_ci": list(c.ci) if ratio and c.ci else None,
                     "difference": mine.mean - base.mean, "significant": bool(c.significant)}
    return out


def pairs(analysis):
    """(scenario cell, program cell) for every scenario cell the command stands beside: the program's cell whose
    params (those its `{name}`s take) are the scenario cell's."""
    programs = [b for b in analysis.cells if b.target == "command"]
    out = []
    for b in analysis.cells:
        if b.target != "scenario" or b.probe_set != DEFAULT_PROBE_SET:
            continue
        program = next((p for p in programs if all(b.params.get(k) == v for k, v in p.params.items())), None)
        if program is not None:
            out.append((b, program))
    return out


def time_share(scenario_cell, program_cell) -> dict:
    """allocator -> mean wall time of the scenario / mean wall time of the program."""
    out = {}
    for a in program_cell.allocators:
        s = scenario_cell.stats(a.name)
        prog, scen = a.samples.get("wall_s"), s.samples.get("wall_s") if s else None
        if prog and scen:
            out[a.name] = (sum(scen) / len(scen)) / (sum(prog) / len(prog))
    return out


def side_by_side(scenario_cell, program_cell) -> dict:
    """Plain data: rankings, ratios to the baseline, the program's significant pairs and the scenario's
    agreement with each, the ends, and the time share per allocator."""
    out = {"metrics": {}, "time_share": time_share(scenario_cell, program_cell),
           "baseline": program_cell.baseline}
    shares = list(out["time_share"].values())
    out["small_share"] = bool(shares) and max(shares) < SMALL_SHARE
    for metric in _METRICS:
        out["metrics"][metric] = {
            "program": _ranking(program_cell, metric), "scenario": _ranking(scenario_cell, metric),
            "to_baseline": {"program": _to_baseline(program_cell, metric),
                            "scenario": _to_baseline(scenario_cell, metric)},
            "pairs": _agreement(program_cell, scenario_cell, metric),
            "ends": _ends(program_cell, scenario_cell, metric)}
    return out


def pairs_json(analysis) -> list:
    return [dict(side_by_side(scenario_cell, program_cell), params=scenario_cell.params)
            for scenario_cell, program_cell in pairs(analysis)]
