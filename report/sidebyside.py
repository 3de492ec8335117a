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


def _pairs(analysis):
    """(scenario block, program block) for every scenario block the command stands beside."""
    program = next((b for b in analysis.blocks if b.target == "command"), None)
    if program is None:
        return []
    return [(b, program) for b in analysis.blocks if b.target == "scenario" and b.probe_set == "time+memory"]


def _fmt(metric: str, value: float) -> str:
    from .tables import scale_for
    m = metric_defs.metric(metric)
    factor, unit = scale_for(m.unit, value)
    return f"{value * factor:.4g} {unit}"


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
            for scenario_block, program_block in _pairs(analysis)]


def format_side_by_side(analysis) -> str:
    parts = []
    for scenario_block, program_block in _pairs(analysis):
        parts.append(_format_pair(analysis, scenario_block, program_block))
    return "\n\n".join(p for p in parts if p)


def _format_pair(analysis, scenario_block, program_block) -> str:
    data = side_by_side(scenario_block, program_block)
    params = " ".join(f"{k}={v}" for k, v in scenario_block.params.items())
    lines = [f"== {analysis.scenario}{' ' + params if params else ''} beside the program "
             f"(same session, interleaved rounds) =="]
    verdicts = []
    for metric, found in data["metrics"].items():
        m = metric_defs.metric(metric)
        prog, scen = found["program"], found["scenario"]
        if not prog or not scen:
            continue
        lines.append("")
        lines.append(f"{m.label} ({m.direction}), best first")
        lines.append(f"  {'':4} {'scenario':<28} {'program':<28}")
        for i in range(max(len(prog), len(scen))):
            cells = [f"{r[i][0]} {_fmt(metric, r[i][1])}" if i < len(r) else "" for r in (scen, prog)]
            lines.append(f"  {i + 1:<4} {cells[0]:<28} {cells[1]:<28}")
        for end in found["ends"]:
            if end["agrees"] is None:
                verdicts.append(f"{end['word']}: in the program, {end['program']} is not significantly "
                                f"apart from the next allocator, so there is nothing to agree on "
                                f"(the scenario says {end['scenario']})")
            elif end["agrees"]:
                verdicts.append(f"{end['word']}: AGREE, {end['program']} for both (significant in the program)")
            else:
                verdicts.append(f"{end['word']}: DISAGREE, the program's is {end['program']} (significant), "
                                f"the scenario's is {end['scenario']}")
    if data["time_share"]:
        lines.append("")
        lines.append("share of the program's wall time the scenario takes: " + ", ".join(
            f"{name} {share:.0%}" for name, share in data["time_share"].items()))
    if verdicts:
        lines.append("")
        lines += verdicts
        judged = [v for v in verdicts if "AGREE" in v]
        if judged:
            bad = sum("DISAGREE" in v for v in judged)
            lines.append(f"=> the scenario {'agrees with' if not bad else 'DISAGREES with'} the program "
                         f"on {len(judged) - bad} of {len(judged)} significant ends")
    return "\n".join(lines)
