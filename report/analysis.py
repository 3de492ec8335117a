"""From a result file to numbers a person can act on.

Groups the measured runs by param set (and probe set), summarizes every
metric per allocator (stats/summary.py), and judges what the report may
claim (stats/claims.py: each allocator against the baseline, and the best
and worst of each headline metric, as one corrected family). Warm-up
records and failed runs never enter a statistic; failures are counted and
described instead.

Everything here is plain data (`to_json`) so `scenc report --json` can
print it and the tables and plots only format it.
"""

import json
import warnings
from dataclasses import dataclass, field, replace
from typing import Dict, List, Mapping, Optional

from .. import probes  # noqa: F401  (registers the probes' metrics: labels, units, key figures)
from ..run.cells import cell_key, machine_of_cells, machines as machines_of
from ..run.plan import DEFAULT_PROBE_SET, SCENARIO
from ..run.program.target import register_reported_metrics
from ..run.record import RunRecord
from ..stats.summary import summarize
from ..stats.claims import CellClaims, Family, Rule, judge_cells
from ..stats.rank import DEFAULT_NOISE
from . import metrics as metric_defs
from .because import explain, family_size
from .sentences import comparison_sentence
from .sidebyside import pairs_json
from .verdicts import Verdict, comparison_json, constant_value, verdicts_of

@dataclass
class AllocatorStats:
    name: str
    n: int
    summaries: Dict[str, object]              # metric -> stats.Summary
    samples: Dict[str, List[float]]
    failures: Dict[str, int] = field(default_factory=dict)   # status -> count
    problems: List[str] = field(default_factory=list)        # distinct problem sentences
    stderr_tail: str = ""                                     # of the last failure
    providers: List[str] = field(default_factory=list)       # malloc providers seen in ok runs
    rounds: Dict[str, List[int]] = field(default_factory=dict)   # metric -> the round of each sample

    def to_json(self) -> dict:
        return {"n": self.n, "failures": self.failures, "problems": self.problems,
                "stderr_tail": self.stderr_tail, "providers": self.providers,
                "metrics": {m: s.to_dict() for m, s in self.summaries.items()},
                "samples": self.samples}


@dataclass
class Cell:
    """Everything measured with one param set (and probe set), and what the report claims of it."""
    params: Dict[str, object]
    probe_set: str
    allocators: List[AllocatorStats]
    baseline: Optional[str]
    target: str = "scenario"                    # or "command": the real program (run/program/target.py)
    machine: Optional[str] = None               # which machine ran it, in a merge of several
    claims: CellClaims = field(default_factory=CellClaims)   # stats/claims.py, set by Analysis.judge
    because: Dict[tuple, object] = field(default_factory=dict)  # (metric, ahead) -> because.Because, ditto

    def stats(self, name: str) -> Optional[AllocatorStats]:
        return next((a for a in self.allocators if a.name == name), None)

    def runs(self, metric: str) -> Dict[str, List[float]]:
        """allocator -> its runs of `metric`, in display order, for the allocators that have any."""
        return {a.name: a.samples[metric] for a in self.allocators if a.samples.get(metric)}

    @property
    def comparisons(self) -> Dict[str, Dict[str, object]]:
        """metric -> allocator -> stats.rank.Comparison against the baseline, at its granted level."""
        return {m: {name: pair.result for name, pair in by_name.items()}
                for m, by_name in self.claims.comparisons.items()}

    @property
    def verdicts(self) -> Dict[str, Verdict]:
        """metric -> the best allocators (report/verdicts.py)."""
        return self._verdicts()["verdicts"]

    @property
    def last(self) -> Dict[str, Verdict]:
        """metric -> the worst allocators, with three or more."""
        return self._verdicts()["last"]

    def _verdicts(self) -> Dict[str, Dict[str, Verdict]]:
        runs = {m: self.runs(m) for m in self.claims.rankings}
        return verdicts_of(self.claims.rankings, self.claims.few, runs)

    def because_lines(self, verdict) -> List[str]:
        """The `because:` line under an end verdict (report/because.py), indented; [] when it names no one."""
        because = self.because.get((verdict.metric, verdict.ahead))
        return ["  " + because.sentence()] if because else []

    def comparison_sentence(self, metric: str, name: str) -> str:
        pair = self.claims.comparisons.get(metric, {}).get(name)
        if pair is None:
            return ""
        mine, base = self.stats(name).samples[metric], self.stats(self.baseline).samples[metric]
        both = (constant_value(mine), constant_value(base))
        return comparison_sentence(pair.result, name, self.baseline, metric_defs.metric(metric).word,
                                   constant=both if None not in both else None)

    def comparison_json(self, metric: str, name: str) -> dict:
        pair = self.claims.comparisons[metric][name]
        described = {f"{side}_{what}": getattr(self.stats(n).summaries.get(metric), what, None)
                     for side, n in (("baseline", self.baseline), ("other", name)) for what in ("mean", "median")}
        return comparison_json(pair.result, **described, p_adjusted=pair.p_adjusted,
                               sentence=self.comparison_sentence(metric, name))

    def _verdict_json(self, verdict) -> dict:
        because = self.because.get((verdict.metric, verdict.ahead))
        return dict(verdict.to_json(), because=because.to_json() if because else None)

    def to_json(self) -> dict:
        return {
            "params": self.params, "probe_set": self.probe_set, "target": self.target,
            "baseline": self.baseline,
            **({"machine": self.machine} if self.machine else {}),
            "allocators": {a.name: a.to_json() for a in self.allocators},
            "comparisons": {m: {name: self.comparison_json(m, name) for name in by_name}
                            for m, by_name in self.claims.comparisons.items()},
            "verdicts": {m: self._verdict_json(v) for m, v in self.verdicts.items()},
            "last": {m: self._verdict_json(v) for m, v in self.last.items()},
        }


@dataclass
class Analysis:
    header: Mapping
    path: str
    cells: List[Cell]
    metrics: List[str]          # every metric present, in display order
    baseline: Optional[str]
    varying: List[str]          # params that take more than one value
    machines: Dict[str, Mapping] = field(default_factory=dict)  # id -> description, if several
    confidence: float = 0.95
    noise: float = DEFAULT_NOISE
    family: Optional[Family] = None     # the correction of the claims the cells hold
    judged: List[str] = field(default_factory=list)   # the metrics judged (the ones shown)
    because_size: int = 0       # the comparisons behind the because: lines, corrected as a family of their own

    def by_machine(self) -> List[tuple]:
        """[(machine id or None, its cells)]: the groups a figure may compare within."""
        groups: Dict[Optional[str], List[Cell]] = {}
        for b in self.cells:
            groups.setdefault(b.machine, []).append(b)
        return list(groups.items())

    @property
    def scenario(self) -> str:
        return self.header.get("scenario", "?")

    @property
    def file_status(self) -> Optional[str]:
        """The result file's status: "complete", or "running" / "interrupted" with runs still to make."""
        return self.header.get("status")

    @property
    def sweep(self) -> bool:
        """More than one param set of the scenario, or of a program after `--` (its `{name}`s): the report's
        claims are then one family."""
        return any(len({json.dumps(b.params, sort_keys=True) for b in self.cells if b.target == target}) > 1
                   for target in ("scenario", "command"))

    def judge(self, metrics: List[str], method: Optional[str] = None) -> "Analysis":
        """Set every cell's claims for `metrics` (stats/claims.py): Holm per cell, or
        Benjamini-Hochberg over all cells for a sweep or when `method` is "bh"."""
        method = method or ("bh" if self.sweep else "holm")
        rules = {m: Rule(metric_defs.metric(m).lower_is_better, bool(metric_defs.metric(m).best))
                 for m in metrics}
        runs = [{m: b.runs(m) for m in metrics if any(m in a.summaries for a in b.allocators)}
                for b in self.cells]
        claims, self.family = judge_cells(runs, rules, self.baseline, method=method,
                                           confidence=self.confidence, noise=self.noise)
        for cell, mine in zip(self.cells, claims):
            cell.claims = mine
        explained = explain(self.cells, method, self.confidence, self.noise)
        for cell, mine in zip(self.cells, explained):
            cell.because = mine
        self.because_size = family_size(explained)
        self.judged = list(metrics)
        return self

    def to_json(self) -> dict:
        """Every metric with statistics, judged as one family by Benjamini-Hochberg."""
        every = [m for m in self.metrics if any(m in a.summaries for b in self.cells for a in b.allocators)]
        mine = replace(self, cells=[replace(b) for b in self.cells]).judge(every, "bh")
        return {"schema": "scenc-analysis/2", "result_file": self.path, "scenario": self.scenario,
                "status": self.file_status, "baseline": self.baseline,
                "metrics": {m: _metric_json(m) for m in self.metrics},
                "varying_params": self.varying,
                "correction": mine.family.to_dict(),
                **({"machines": self.machines} if self.machines else {}),
                "blocks": [b.to_json() for b in mine.cells],
                "side_by_side": _side_by_side_json(mine)}


def _side_by_side_json(analysis) -> list:
    """A scenario beside its program (report/sidebyside.py); [] without a program."""
    return pairs_json(analysis)


def _metric_json(name: str) -> dict:
    m = metric_defs.metric(name)
    return {"label": m.label, "unit": m.unit, "lower_is_better": m.lower_is_better}


def sweep_cells(cells) -> list:
    """The cells a sweep is about: the scenario's, or without a scenario those of the program after `--`
    (its params fill its `{name}`s); a program beside a scenario is not swept on its own."""
    scenario = [b for b in cells if b.target == "scenario"]
    return scenario or [b for b in cells if b.target == "command"]


def _point(record: RunRecord) -> tuple:
    """(params, probe set, target) of a run record."""
    return record.params, record.probe_set, record.target


def _planned_point(config: Mapping) -> tuple:
    """(params, probe set, target) of a planned configuration, as a header saves it."""
    return config.get("params", {}), config.get("probe_set", DEFAULT_PROBE_SET), config.get("target", SCENARIO)


def _ordered_points(header: Mapping, runs) -> List[tuple]:
    """(params, probe_set, target) in plan order, then any only found in the runs."""
    points, seen = [], set()
    plan_configs = (header.get("plan") or {}).get("configs", []) if isinstance(header.get("plan"), Mapping) else []
    for params, probe_set, target in [_planned_point(c) for c in plan_configs] + [_point(r) for r in runs]:
        k = json.dumps([dict(params), probe_set, target], sort_keys=True)
        if k not in seen:
            seen.add(k)
            points.append((dict(params), probe_set, target))
    return points


def _allocator_order(header: Mapping, runs) -> List[str]:
    names = list(header.get("allocators", {}))
    for r in runs:
        if r.allocator not in names:
            names.append(r.allocator)
    return names


def analyze(result, baseline: Optional[str] = None, confidence: float = 0.95,
            metrics: Optional[List[str]] = None, noise: Optional[float] = None) -> Analysis:
    """`result` is a resultfile.ResultFile (or anything with .header, .runs and .path).

    With `metrics`, only those and the ones shown by default get statistics:
    the bootstrap is the costly part, and a table that shows two metrics need
    not pay for eight. The raw samples are kept for all. The claims are judged
    for the metrics a report shows: `metrics` if given, else the default ones
    (every metric with statistics when `metrics` is None). `noise`: differences
    within it are never called significant (--noise; by default the one the result file was made with).
    """
    with warnings.catch_warnings():
        # scipy warns about nearly identical samples (peak RSS often is); the
        # numbers it returns are still right for our use and the warning would
        # only alarm the reader.
        warnings.simplefilter("ignore", RuntimeWarning)
        analysis = _analyze(result, baseline, confidence, metrics)
        analysis.noise = noise if noise is not None else result.header.get("noise", DEFAULT_NOISE)
        return analysis.judge(judged_metrics(analysis, metrics))


def judged_metrics(analysis: Analysis, wanted: Optional[List[str]]) -> List[str]:
    """The metrics a report prints for `wanted` (as report/tables.py's shown_metrics chooses)."""
    if wanted:
        return [m for m in wanted if m in analysis.metrics]
    if wanted is None:
        return list(analysis.metrics)
    headline = [m for m in metric_defs.headline_names() if m in analysis.metrics]
    return headline + [m for m in analysis.metrics if metric_defs.shown_by_default(m) and m not in headline]


def _analyze(result, baseline, confidence, wanted) -> Analysis:
    header, runs = result.header, list(result.runs)
    register_reported_metrics(header)
    names = _allocator_order(header, runs)
    baseline = baseline or header.get("baseline") or (names[0] if names else None)
    if baseline is not None and baseline not in names:
        raise ValueError(f"baseline {baseline!r} is not in this result (allocators: {', '.join(names)})")
    present_metrics = set()
    machine_of = machine_of_cells(header)
    cells = []
    for point in _ordered_points(header, runs):
        params, probe_set, target = point
        here = [r for r in runs if _point(r) == point]
        per_allocator = []
        for name in names:
            mine = [r for r in here if r.allocator == name]
            if not mine and not any(c.get("allocator") == name and _planned_point(c) == point for c in
                                    (header.get("plan") or {}).get("configs", [])):
                continue
            ok = [r for r in mine if r.is_measurement]
            samples: Dict[str, List[float]] = {}
            rounds: Dict[str, List[int]] = {}
            for r in ok:
                for m, v in r.metrics.items():
                    if v is not None:
                        samples.setdefault(m, []).append(v)
                        rounds.setdefault(m, []).append(r.round)
            present_metrics.update(samples)
            failed = [r for r in mine if r.status != "ok"]
            failures: Dict[str, int] = {}
            problems: List[str] = []
            for r in failed:
                failures[r.status] = failures.get(r.status, 0) + 1
                if r.problem and r.problem not in problems:
                    problems.append(r.problem)
            providers = sorted({r.provider for r in ok if r.provider})
            per_allocator.append(AllocatorStats(
                name=name, n=len(ok),
                summaries={m: summarize(v, confidence=confidence) for m, v in samples.items()
                           if wanted is None or m in wanted or metric_defs.shown_by_default(m)},
                samples=samples, failures=failures, problems=problems[:5],
                stderr_tail=failed[-1].stderr_tail if failed else "",
                providers=providers, rounds=rounds))
        cells.append(Cell(params, probe_set, per_allocator, baseline, target,
                            machine_of.get(cell_key(params, probe_set))))
    varying = []
    swept = sweep_cells(cells)
    for k in {k for b in swept for k in b.params}:
        if len({json.dumps(b.params.get(k)) for b in swept}) > 1:
            varying.append(k)
    order = [k for b in cells for k in b.params]
    varying.sort(key=order.index)
    return Analysis(header, getattr(result, "path", ""), cells, metric_defs.order(present_metrics),
                    baseline, varying, machines_of(header), confidence)
