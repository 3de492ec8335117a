"""A scenario (or replay) beside the real program it stands for, from one session.

`scenc run app.scn ... -- ./app args` runs both in the same shuffled rounds,
so a drift of the machine falls on both alike. This puts them side by side
for wall time and peak RSS: each one's ranking of the allocators, whether
they agree on the best and the worst allocator wherever the program's own
difference is significant (a scenario is worth exactly its agreement with
the program), and the share of the program's wall time the scenario takes.
"""

from dataclasses import dataclass
from typing import List, Optional

# The text is report/tables.py's (format_side_by_side); here are the numbers.

from . import metrics as metric_defs

_METRICS = ("wall_s", "peak_rss_kib")
_ENDS = {"wall_s": ("fastest", "slowest"), "peak_rss_kib": ("leanest", "fattest")}


@dataclass
class _End:
    word: str                     # "fastest"
    program: Optional[str]
    scenario: Optional[str]
    significant: bool             # the program's own difference at this end

    @property
    def agrees(self) -> Optional[bool]:
        """True or False where the program's difference is significant; None where it is not."""
        return self.program == self.scenario if self.significant else None


def _ranking(block, metric: str) -> List[tuple]:
    """[(allocator, mean)] best first; only allocators with enough good runs."""
    m = metric_defs.metric(metric)
    ranked = [(a.name, sum(a.samples[metric]) / len(a.samples[metric])) for a in block.allocators
              if len(a.samples.get(metric, [])) >= 2]
    return sorted(ranked, key=lambda x: x[1], reverse=not m.lower_is_better)


def _ends(program_block, scenario_block, metric: str) -> List[_End]:
    from .. import stats
    m = metric_defs.metric(metric)
    prog, scen = _ranking(program_block, metric), _ranking(scenario_block, metric)
    if len(prog) < 2 or len(scen) < 2:
        return []
    ends = []
    for word, (first, second), scen_pick in ((_ENDS[metric][0], (prog[0], prog[1]), scen[0]),
                                             (_ENDS[metric][1], (prog[-1], prog[-2]), scen[-1])):
        a, b = program_block.stats(first[0]), program_block.stats(second[0])
        c = stats.compare(b.samples[metric], a.samples[metric], lower_is_better=m.lower_is_better)
        ends.append(_End(word, first[0], scen_pick[0], bool(c.significant)))
    return ends


def pairs(analysis):
    """(scenario block, program block) for every scenario block the command stands beside."""
    program = next((b for b in analysis.blocks if b.target == "command"), None)
    if program is None:
        return []
    return [(b, program) for b in analysis.blocks if b.target == "scenario" and b.probe_set == "time+memory"]


def side_by_side(scenario_block, program_block) -> dict:
    """Plain data: rankings, ends and agreement per metric, and the time share per allocator."""
    out = {"metrics": {}, "time_share": {}}
    for metric in _METRICS:
        ends = _ends(program_block, scenario_block, metric)
        out["metrics"][metric] = {
            "program": _ranking(program_block, metric), "scenario": _ranking(scenario_block, metric),
            "ends": [{"word": e.word, "program": e.program, "scenario": e.scenario,
                      "significant": e.significant, "agrees": e.agrees} for e in ends]}
    for a in program_block.allocators:
        s = scenario_block.stats(a.name)
        prog, scen = a.samples.get("wall_s"), s.samples.get("wall_s") if s else None
        if prog and scen:
            out["time_share"][a.name] = (sum(scen) / len(scen)) / (sum(prog) / len(prog))
    return out


def pairs_json(analysis) -> list:
    return [dict(side_by_side(scenario_block, program_block), params=scenario_block.params)
            for scenario_block, program_block in pairs(analysis)]
