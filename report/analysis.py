"""From a result file to numbers a person can act on.

Groups the measured runs by param set (and probe set), summarizes every
metric per allocator (stats/summary.py), compares each allocator with
the baseline (stats/comparison.py), and names the winner of each headline
metric against the runner-up, so "fastest" is only called significant when
it is. Warm-up records and failed runs never enter a statistic; failures are
counted and described instead.

Everything here is plain data (`to_json`) so `scenc report --json` can
print it and the tables and plots only format it.
"""

import json
import warnings
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional

from .. import probes  # noqa: F401  (registers the probes' metrics: labels, units, key figures)
from ..run.cells import cell_key, machine_of_cells, machines as machines_of
from ..run.record import RunRecord
from ..run.plan import DEFAULT_PROBE_SET, SCENARIO
from ..run.program.target import register_reported_metrics
from ..stats.comparison import compare
from ..stats.summary import format_values, summarize
from . import metrics as metric_defs
from .sidebyside import pairs_json

MIN_RUNS_TO_COMPARE = 2


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

    def to_json(self) -> dict:
        return {"n": self.n, "failures": self.failures, "problems": self.problems,
                "stderr_tail": self.stderr_tail, "providers": self.providers,
                "metrics": {m: s.to_dict() for m, s in self.summaries.items()},
                "samples": self.samples}


@dataclass
class Verdict:
    """The best allocator for one metric, measured against the runner-up (or, with `ahead`
    False, the worst one against the next worst)."""
    metric: str
    word: str                 # "fastest" ("slowest")
    best: str
    runner_up: Optional[str]
    comparison: Optional[object]   # stats.Comparison of best against runner_up
    ahead: bool = True

    def sentence(self) -> str:
        m = metric_defs.metric(self.metric)
        if self.runner_up is None or self.comparison is None:
            return f"{self.word}: {self.best} (the only allocator with enough runs)"
        c = self.comparison
        if c.significant:
            label = "the runner-up" if self.ahead else f"the next {self.word}"
            return f"{self.word}: " + c.sentence(self.best, f"{label}, {self.runner_up}", m.word)
        if c.both_constant:
            [value] = format_values(c.other_mean)
            return (f"{self.word}: {self.best} and {self.runner_up} tie, {value} in every run "
                    f"(n={c.other_n} vs n={c.baseline_n})")
        sides = f"{self.best}/{self.runner_up}" if c.by_ratio else f"{self.best} − {self.runner_up}"
        return (f"{self.word}: {self.best} by its mean, but not significantly "
                f"{'ahead of' if self.ahead else 'behind'} {self.runner_up} ({sides} {c.interval_text()})")

    def to_json(self) -> dict:
        return {"metric": self.metric, "word": self.word, "best": self.best, "ahead": self.ahead,
                "runner_up": self.runner_up, "sentence": self.sentence(),
                "comparison": self.comparison.to_dict() if self.comparison else None}


@dataclass
class Cell:
    """Everything measured with one param set (and probe set)."""
    params: Dict[str, object]
    probe_set: str
    allocators: List[AllocatorStats]
    baseline: Optional[str]
    comparisons: Dict[str, Dict[str, object]]   # metric -> allocator -> stats.Comparison
    verdicts: Dict[str, Verdict]                # metric -> the winner
    last: Dict[str, Verdict] = field(default_factory=dict)   # metric -> the last of three or more
    target: str = "scenario"                    # or "command": the real program (run/program/target.py)
    machine: Optional[str] = None               # which machine ran it, in a merge of several

    def stats(self, name: str) -> Optional[AllocatorStats]:
        return next((a for a in self.allocators if a.name == name), None)

    def comparison_sentence(self, metric: str, name: str) -> str:
        c = self.comparisons.get(metric, {}).get(name)
        if c is None:
            return ""
        return c.sentence(name, self.baseline, metric_defs.metric(metric).word)

    def to_json(self) -> dict:
        return {
            "params": self.params, "probe_set": self.probe_set, "target": self.target,
            "baseline": self.baseline,
            **({"machine": self.machine} if self.machine else {}),
            "allocators": {a.name: a.to_json() for a in self.allocators},
            "comparisons": {m: {name: dict(c.to_dict(), sentence=self.comparison_sentence(m, name))
                                for name, c in by_name.items()}
                            for m, by_name in self.comparisons.items()},
            "verdicts": {m: v.to_json() for m, v in self.verdicts.items()},
            "last": {m: v.to_json() for m, v in self.last.items()},
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

    def to_json(self) -> dict:
        return {"schema": "scenc-analysis/1", "result_file": self.path, "scenario": self.scenario,
                "status": self.file_status, "baseline": self.baseline,
                "metrics": {m: _metric_json(m) for m in self.metrics},
                "varying_params": self.varying,
                **({"machines": self.machines} if self.machines else {}),
                "blocks": [b.to_json() for b in self.cells],
                "side_by_side": _side_by_side_json(self)}


def _side_by_side_json(analysis) -> list:
    """A scenario beside its program (report/sidebyside.py); [] without a command."""
    return pairs_json(analysis)


def _metric_json(name: str) -> dict:
    m = metric_defs.metric(name)
    return {"label": m.label, "unit": m.unit, "lower_is_better": m.lower_is_better}


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
            metrics: Optional[List[str]] = None) -> Analysis:
    """`result` is a resultfile.ResultFile (or anything with .header, .runs and .path).

    With `metrics`, only those and the ones shown by default get statistics:
    the bootstrap is the costly part, and a table that shows two metrics need
    not pay for eight. The raw samples are kept for all.
    """
    with warnings.catch_warnings():
        # scipy warns about nearly identical samples (peak RSS often is); the
        # numbers it returns are still right for our use and the warning would
        # only alarm the reader.
        warnings.simplefilter("ignore", RuntimeWarning)
        return _analyze(result, baseline, confidence, metrics)


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
            for r in ok:
                for m, v in r.metrics.items():
                    if v is not None:
                        samples.setdefault(m, []).append(v)
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
                providers=providers))
        comparisons: Dict[str, Dict[str, object]] = {}
        base = next((a for a in per_allocator if a.name == baseline), None)
        if base is not None and base.n >= MIN_RUNS_TO_COMPARE:
            for m, base_values in base.samples.items():
                if m not in base.summaries:
                    continue
                d = metric_defs.metric(m)
                for a in per_allocator:
                    if a.name != baseline and len(a.samples.get(m, [])) >= MIN_RUNS_TO_COMPARE:
                        comparisons.setdefault(m, {})[a.name] = compare(
                            base_values, a.samples[m], lower_is_better=d.lower_is_better,
                            confidence=confidence)
        verdicts, last = {}, {}
        for d in metric_defs.all_metrics():
            if not d.best:
                continue
            candidates = [a for a in per_allocator if d.name in a.summaries
                          and len(a.samples[d.name]) >= MIN_RUNS_TO_COMPARE]
            if not candidates:
                continue
            candidates.sort(key=lambda a: a.summaries[d.name].mean, reverse=not d.lower_is_better)
            best = candidates[0]
            runner = candidates[1] if len(candidates) > 1 else None
            c = compare(runner.samples[d.name], best.samples[d.name],
                              lower_is_better=d.lower_is_better, confidence=confidence) if runner else None
            verdicts[d.name] = Verdict(d.name, d.best, best.name, runner.name if runner else None, c)
            if d.worst and len(candidates) >= 3:    # with two, the last is the runner-up above
                worst, next_worst = candidates[-1], candidates[-2]
                c = compare(next_worst.samples[d.name], worst.samples[d.name],
                                  lower_is_better=d.lower_is_better, confidence=confidence)
                last[d.name] = Verdict(d.name, d.worst, worst.name, next_worst.name, c, ahead=False)
        cells.append(Cell(params, probe_set, per_allocator, baseline, comparisons, verdicts, last, target,
                            machine_of.get(cell_key(params, probe_set))))
    varying = []
    scenario_cells = [b for b in cells if b.target == "scenario"]   # a command has no params
    for k in {k for b in scenario_cells for k in b.params}:
        if len({json.dumps(b.params.get(k)) for b in scenario_cells}) > 1:
            varying.append(k)
    order = [k for b in cells for k in b.params]
    varying.sort(key=order.index)
    return Analysis(header, getattr(result, "path", ""), cells, metric_defs.order(present_metrics),
                    baseline, varying, machines_of(header))
