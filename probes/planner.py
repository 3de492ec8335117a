"""Which probes share a run: the fewest runs in which no probe's figures are
falsified by another probe of the same run.

Probe A must not share a run with probe B when A perturbs an aspect B is
sensitive to (or the other way round). Finding the fewest runs is colouring
that conflict graph with the fewest colours; with a handful of probes an
exhaustive search is instant and exact. Among the plans with the fewest runs
the planner takes the one that keeps the most `pairs_with` wishes (memory
with live, for the fragmentation ratio), then the first in registry order.

Spec syntax (`--probes`): probes separated by commas are planned freely;
probes joined by "+" are forced into one run ("time+layout"), which the
planner refuses, with the reason, when it would give false figures.
"""

import itertools
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from . import PROBES, DEFAULT, ProbeError, get, ordered


class ProbeConflict(ProbeError):
    """Probes forced into one run where one would falsify the other's figures."""


def conflict(a: str, b: str) -> Optional[str]:
    """Why probes a and b must not share a run, or None if they may."""
    for x, y in ((a, b), (b, a)):
        px, py = get(x), get(y)
        hit = sorted(px.perturbs & py.sensitive_to)
        if hit:
            how = f" ({px.perturbation})" if px.perturbation else ""
            return f"{x} perturbs {' and '.join(hit)}{how}, which {y} measures"
    return None


@dataclass(frozen=True)
class Plan:
    runs: Tuple[Tuple[str, ...], ...]   # probe names of each run, registry order
    reasons: Tuple[str, ...]            # why selected probes were kept apart

    @property
    def probe_sets(self) -> List[str]:
        return ["+".join(run) for run in self.runs]

    def explain(self) -> str:
        n = len(self.runs)
        lines = [f"probes: {n} run{'s' * (n != 1)} per allocator and param set"]
        for i, run in enumerate(self.runs, 1):
            lines.append(f"  run {i}: {'+'.join(run)}")
        if self.reasons:
            lines.append("  kept apart because:")
            lines.extend(f"    {reason}" for reason in self.reasons)
        selected = {n for run in self.runs for n in run}
        for run in self.runs:
            for name in run:
                for other in sorted(PROBES[name].pairs_with - set(run)):
                    where = ("it had to go to another run" if other in selected
                             else f"add {other} to --probes")
                    lines.append(f"  note: {name} gives {PROBES[name].paired_figures} only with {other} "
                                 f"in the same run ({where})")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"runs": [list(r) for r in self.runs], "reasons": list(self.reasons)}


def parse(spec: str) -> Tuple[List[str], List[List[str]]]:
    """"time,memory+live" -> (["time", "memory", "live"], [["memory", "live"]])."""
    selected: List[str] = []
    together: List[List[str]] = []
    for item in spec.split(","):
        names = [n.strip() for n in item.split("+") if n.strip()]
        if not names:
            raise ProbeError(f"--probes {spec!r}: an empty probe name")
        for n in names:
            get(n)
        selected.extend(names)
        if len(names) > 1:
            together.append(names)
    return selected, together


def plan(selected: Sequence[str], force: bool = False,
         together: Sequence[Sequence[str]] = ()) -> Plan:
    """The runs for these probes. `force` puts them all in one run; `together`
    lists groups that must share a run. Raises ProbeConflict when a forced
    group holds two probes that conflict."""
    names = ordered(selected) if selected else list(DEFAULT)
    groups = [ordered(g) for g in together]
    if force:
        groups.append(names)
    for group in groups:
        _refuse_conflicts(group, forced_all=force and group == names)
    # Contract each forced group into one node (a probe may be in several groups).
    node_of: Dict[str, int] = {n: i for i, n in enumerate(names)}
    for group in groups:
        target = node_of[group[0]]
        for n in group[1:]:
            old = node_of[n]
            for m, node in node_of.items():
                if node == old:
                    node_of[m] = target
    nodes = sorted(set(node_of.values()))
    members = {node: [n for n in names if node_of[n] == node] for node in nodes}
    clash = {(u, v) for u in nodes for v in nodes if u < v and any(
        conflict(a, b) for a in members[u] for b in members[v])}
    colouring = _best_colouring(nodes, members, clash)
    runs: Dict[int, List[str]] = {}
    for node in nodes:
        runs.setdefault(colouring[node], []).extend(members[node])
    run_list = tuple(tuple(ordered(run)) for _, run in sorted(runs.items()))
    return Plan(run_list, _reasons(names))


def _reasons(names: Sequence[str]) -> Tuple[str, ...]:
    """One line per probe that disturbs others of the selection: what, and whom."""
    lines = []
    for x in names:
        px = get(x)
        victims = [y for y in names if y != x and px.perturbs & get(y).sensitive_to]
        if not victims:
            continue
        hit = [a for a in sorted(px.perturbs) if any(a in get(y).sensitive_to for y in victims)]
        how = f" ({px.perturbation})" if px.perturbation else ""
        lines.append(f"{x} perturbs {', '.join(hit)}{how}: not with {', '.join(victims)}")
    return tuple(lines)


def plan_spec(spec: Optional[str], force: bool = False) -> Plan:
    if not spec:
        return plan(list(DEFAULT), force=force)
    selected, together = parse(spec)
    return plan(selected, force=force, together=together)


def _refuse_conflicts(group: Sequence[str], forced_all: bool) -> None:
    problems = [r for a, b in itertools.combinations(group, 2) for r in [conflict(a, b)] if r]
    if not problems:
        return
    how = "all in one run" if forced_all else "+".join(group)
    raise ProbeConflict(
        f"refusing to measure {how}: its figures would be false.\n"
        + "\n".join(f"  {p}" for p in problems)
        + f"\n  Separate them with commas (--probes {','.join(group)}) and scenc plans as many "
          f"runs as needed.")


def _pairs_kept(colouring: Dict[int, int], members: Dict[int, List[str]]) -> int:
    by_probe = {n: colouring[node] for node, ns in members.items() for n in ns}
    return sum(1 for n, run in by_probe.items() for m in PROBES[n].pairs_with
               if m in by_probe and by_probe[m] == run)


def _best_colouring(nodes: List[int], members: Dict[int, List[str]], clash) -> Dict[int, int]:
    """Fewest colours, then most pairs kept; colours numbered in order of first use."""
    for k in range(1, len(nodes) + 1):
        best, best_score = None, -1
        for colouring in _colourings(nodes, k, clash):
            score = _pairs_kept(colouring, members)
            if score > best_score:
                best, best_score = colouring, score
        if best is not None:
            return best
    return {}


def _colourings(nodes: List[int], k: int, clash):
    """Every proper colouring with at most k colours, each up to renaming once."""
    def extend(i: int, colouring: Dict[int, int], used: int):
        if i == len(nodes):
            yield dict(colouring)
            return
        node = nodes[i]
        for colour in range(min(used + 1, k)):
            if any(colouring.get(other) == colour and ((min(node, other), max(node, other)) in clash)
                   for other in nodes[:i]):
                continue
            colouring[node] = colour
            yield from extend(i + 1, colouring, max(used, colour + 1))
            del colouring[node]
    yield from extend(0, {}, 0)
