"""`scenc compare A B C ...` and `--fail-if-worse PCT`: later files against the first, and the CI gate.

With two files, report/compare.py prints each allocator's means and a sentence. With more, each
param set's metrics are tables with one column per file (as pyperf's compare_to): A's mean, then
each later file's mean and how it compares with A's. Either way every later-against-A comparison
printed is one family (stats/claims.py: Holm, or Benjamini-Hochberg over several param sets), built
here as compare.py builds it for two. `--fail-if-worse PCT` asks the same test, over the same family,
whether anything is worse by more than PCT (its noise band set to ±PCT): `scenc compare` then exits 1.
"""

import json
import math
import re
from typing import List

from ..stats.claims import METHODS, CellClaims, Rule, judge_cells
from ..stats.rank import DEFAULT_NOISE, MIN_RUNS, Verdict
from . import metrics as metric_defs
from .analysis import analyze
from .compare import _differences
from .sentences import claim_phrase, percent, verdict_phrase
from .tables import family_line, scale_for, shown_metrics

__all__ = ["compare_several", "fail_if_worse"]


def _common_cells(analysis_a, later):
    """(A's cell, [each later file's cell or None]) for every cell of A that a later file has too."""
    for cell_a in analysis_a.cells:
        found = [next((x for x in analysis.cells if x.params == cell_a.params
                       and x.probe_set == cell_a.probe_set and x.target == cell_a.target), None)
                 for analysis in later]
        if any(found):
            yield cell_a, found


def _judged(analysis_a, later, labels, chosen, noise):
    """Every later-against-A comparison printed, judged as one family (stats/claims.py): Holm, or
    Benjamini-Hochberg when the files share several param sets. Each allocator of each cell is a
    "cell" of the files for the judge: A (its baseline), B, C ..."""
    cells, keys = [], []
    for cell_a, found in _common_cells(analysis_a, later):
        for sa in cell_a.allocators:
            sides = {label: cell.stats(sa.name) for label, cell in zip(labels[1:], found) if cell is not None}
            sides = {label: sb for label, sb in sides.items() if sb is not None}
            if not sides:
                continue
            runs = {}
            for m in chosen:
                if not (sa.samples.get(m) and m in sa.summaries):
                    continue
                mine = {label: sb.samples[m] for label, sb in sides.items()
                        if sb.samples.get(m) and m in sb.summaries}
                if mine:
                    runs[m] = {labels[0]: sa.samples[m], **mine}
            cells.append(runs)
            keys.append((cell_a, sa))
    rules = {m: Rule(metric_defs.metric(m).lower_is_better) for m in chosen}
    method = "bh" if len({json.dumps(b.params, sort_keys=True) for b, _ in keys}) > 1 else "holm"

    def judge(band):
        claims, family = judge_cells(cells, rules, labels[0], method=method, per_cell=False, noise=band)
        return {(id(cell_a), sa.name): claim for (cell_a, sa), claim in zip(keys, claims)}, family
    return judge(noise), judge


def _label(index: int) -> str:
    """A, B, ... Z, then F27, F28 ..."""
    return chr(ord("A") + index) if index < 26 else f"F{index + 1}"


def _what(analysis, cell) -> str:
    params = " ".join(f"{k}={v}" for k, v in cell.params.items())
    what = f"command {analysis.scenario}" if cell.target == "command" else analysis.scenario
    return f"{what}{' ' + params if params else ''}"


_THAN = "\x00"      # where a phrase names the file compared with, cut out of a table's cell


def _short_claim(c, word: str) -> str:
    """A comparison as a table cell: "2.14x slower (1.90–2.41)", "not significant (ratio 0.91–1.79)"."""
    if c.significant:
        phrase = claim_phrase(c, _THAN, word)
        return re.sub(r"^(is|uses|has) ", "", phrase).replace(f" than {_THAN}", "")
    if c.n_other < MIN_RUNS or c.n_baseline < MIN_RUNS:
        return f"too few runs (n={c.n_other})"
    return re.sub(rf"^(no significant difference from|equivalent to|not shown to differ from) {_THAN}",
                  lambda m: {"equivalent to": "equivalent", "not shown to differ from": "not shown to differ"}
                  .get(m.group(1), "not significant"), verdict_phrase(c, _THAN))


def _gate(worse, pct, later_labels, family) -> List[str]:
    """The --fail-if-worse verdict: which allocators are significantly worse by more than PCT, or none."""
    files = "B" if later_labels == ["B"] else f"{later_labels[0]}–{later_labels[-1]}"
    if not worse:
        return [f"fail-if-worse {percent(pct)}: passed: no allocator is significantly worse by more than "
                f"{percent(pct)} in {files} than in A (the same test with a ±{percent(pct)} band, "
                f"{METHODS[family.method]} over the {family.size} comparisons)"]
    lines = [f"fail-if-worse {percent(pct)}: FAILED: {len(worse)} significantly worse by more than "
             f"{percent(pct)} than in A (the same test with a ±{percent(pct)} band, "
             f"{METHODS[family.method]} over the {family.size} comparisons):"]
    for where, name, label, metric, c in worse:
        word = metric_defs.metric(metric)
        lines.append(f"  {where}: {name} in {label}: {word.label} {_short_claim(c, word.word)}")
    return lines


def _analyses(a, later_files, metrics, noise):
    """A's and the later files' analyses, the metrics compared, the labels and the noise (A's by default)."""
    noise = noise if noise is not None else a.header.get("noise", DEFAULT_NOISE)
    analysis_a = analyze(a, metrics=metrics or [])
    later = [analyze(x, metrics=metrics or []) for x in later_files]
    chosen = metrics or [m for m in shown_metrics(analysis_a) if any(m in x.metrics for x in later)]
    labels = [_label(i) for i in range(len(later_files) + 1)]
    return analysis_a, later, chosen, labels, noise


def compare_several(a, later_files, metrics=None, noise=None):
    """(lines, comparisons printed) for A and two or more later files: one table per param set and metric."""
    analysis_a, later, chosen, labels, noise = _analyses(a, later_files, metrics, noise)
    lines = [f"{label} = {f.path}" for label, f in zip(labels, [a] + list(later_files))]
    lines.append(f"warning: {', '.join(labels[:-1])} and {labels[-1]} are separate sessions: the machine may "
                 "have drifted between them (load, frequency, temperature), and a drift can look like a "
                 "significant difference. To compare a replay with its program, run both in one session: "
                 "`scenc run app.scn ... -- ./app args`.")
    for label, other in zip(labels[1:], later_files):
        notes = _differences(a, other)
        if notes:
            lines.append(f"note ({label}): " + "; ".join(notes))
    (claims, family), _ = _judged(analysis_a, later, labels, chosen, noise)
    common = 0
    for cell_a, found in _common_cells(analysis_a, later):
        count, body = _table(cell_a, found, labels, chosen, claims)
        if count:
            common += count
            lines += ["", f"== {_what(analysis_a, cell_a)} =="] + body
    if not common:
        lines += ["", "nothing to compare: no allocator and param set has successful runs in A and a later file"]
    else:
        lines += ["", family_line(family, scope="above")]
    return lines, common


def fail_if_worse(a, later_files, pct: float, metrics=None, noise=None):
    """(lines, worse) of `--fail-if-worse PCT`: every allocator, param set and metric significantly worse by
    more than `pct` (a fraction) in a later file than in A, judged over the family `scenc compare` prints."""
    analysis_a, later, chosen, labels, noise = _analyses(a, later_files, metrics, noise)
    _, judge = _judged(analysis_a, later, labels, chosen, noise)
    gate, family = judge(pct)
    worse = []
    for cell_a, _ in _common_cells(analysis_a, later):
        for sa in cell_a.allocators:
            for metric, by_label in gate.get((id(cell_a), sa.name), CellClaims()).comparisons.items():
                for label, pair in by_label.items():
                    if pair.result.verdict is Verdict.WORSE:
                        worse.append((_what(analysis_a, cell_a), sa.name, label, metric, pair.result))
    return _gate(worse, pct, labels[1:], family), worse


def _table(cell_a, found, labels, chosen, claims):
    """Several files: one row per allocator, one column per file (as pyperf's compare_to): A's mean,
    then each later file's mean and how it compares with A's."""
    count, lines = 0, []
    for metric in chosen:
        d = metric_defs.metric(metric)
        rows = []
        for sa in cell_a.allocators:
            judged = claims.get((id(cell_a), sa.name), CellClaims()).comparisons.get(metric, {})
            if not judged:
                continue
            row = [sa.name, None]
            for label, cell in zip(labels[1:], found):
                pair = judged.get(label)
                if pair is None:
                    row.append("-")
                    continue
                count += 1
                sb = cell.stats(sa.name)
                row.append((sb.summaries[metric].mean, sb.n, _short_claim(pair.result, d.word)))
            row[1] = (sa.summaries[metric].mean, sa.n, "")
            rows.append(row)
        if not rows:
            continue
        reference = min(abs(r[1][0]) or 1 for r in rows)
        factor, unit = scale_for(d.unit, reference)
        digits = max(0, min(4, 3 - math.floor(math.log10(reference * factor))))
        text = lambda v: v if isinstance(v, str) else (  # noqa: E731
            f"{v[0] * factor:.{digits}f} {unit} (n={v[1]})".replace("  ", " ") + (f": {v[2]}" if v[2] else ""))
        table = [["allocator", *labels]] + [[r[0]] + [text(v) for v in r[1:]] for r in rows]
        widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
        lines.append(f"{d.label} ({d.direction}): the means, and each later file against A")
        lines += [("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths))).rstrip() for r in table]
    return count, lines
