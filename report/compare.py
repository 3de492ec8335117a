"""`scenc compare`'s figures: B (and C ...) against A for every allocator and param set they have in common.

Two files: each allocator's means and a sentence. More: a table with one column per file, as
pyperf's compare_to. Every comparison printed is one family (Holm, or Benjamini-Hochberg over
several param sets); `--fail-if-worse PCT` asks the same test, over the same family, whether anything
is worse by more than PCT (the noise band set to ±PCT), and the command exits 1 when so."""

import json
import math
import re
from typing import List

from ..run.cells import machine_name, machines
from ..stats.claims import METHODS, CellClaims, Rule, judge_cells
from ..stats.rank import DEFAULT_NOISE, MIN_RUNS, Verdict
from . import metrics as metric_defs
from .analysis import analyze
from .sentences import claim_phrase, comparison_sentence, percent, verdict_phrase
from .tables import family_line, scale_for, shown_metrics

_MACHINE_KEYS = ("cpu_model", "logical_cpus", "kernel", "libc_version", "compiler", "transparent_hugepage")


def _differences(a, b):
    """Sentences about what differs between the two runs besides the allocators' speed."""
    notes = []
    ha, hb = a.header, b.header
    if ha.get("source_sha256") != hb.get("source_sha256"):
        notes.append("the scenario source differs (different sha256)")
    for key in _MACHINE_KEYS:
        va, vb = ha.get("machine", {}).get(key), hb.get("machine", {}).get(key)
        if va != vb:
            notes.append(f"machine {key}: {va} vs {vb}")
    for label, h in (("A", ha), ("B", hb)):
        found = machines(h)
        if found:
            notes.append(f"{label}'s cells ran on {len(found)} machines "
                         f"({', '.join(machine_name(d) for d in found.values())})")
    for name in set(ha.get("allocators", {})) & set(hb.get("allocators", {})):
        va = ha["allocators"][name].get("version")
        vb = hb["allocators"][name].get("version")
        if va != vb:
            notes.append(f"{name} version: {va} vs {vb}")
    return notes


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


_THAN = "\x00"


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


def compare_files(a, b, metrics=None, name_a="A", name_b="B", noise=None, fail_if_worse=None):
    """Lines comparing B (a file, or a list of later files) with A for every (params, allocator) they
    have in common; `noise` by default A's (--noise). Returns (lines, comparisons printed, worse): `worse`
    lists what is significantly worse by more than `fail_if_worse` (a fraction) in a later file."""
    later_files = list(b) if isinstance(b, (list, tuple)) else [b]
    labels = [_label(i) for i in range(len(later_files) + 1)]
    noise = noise if noise is not None else a.header.get("noise", DEFAULT_NOISE)
    analysis_a = analyze(a, metrics=metrics or [])
    later = [analyze(x, metrics=metrics or []) for x in later_files]
    chosen = metrics or [m for m in shown_metrics(analysis_a) if any(m in x.metrics for x in later)]
    lines = [f"{label} = {f.path}" for label, f in zip(labels, [a] + later_files)]
    lines.append(f"warning: {', '.join(labels[:-1])} and {labels[-1]} are separate "
                 "sessions: the machine may have drifted between them "
                 "(load, frequency, temperature), and a drift can look like a significant difference. "
                 "To compare a replay with its program, run both in one session: "
                 "`scenc run app.scn ... -- ./app args`.")
    for label, other in zip(labels[1:], later_files):
        notes = _differences(a, other)
        if notes:
            lines.append(("note: " if len(later_files) == 1 else f"note ({label}): ") + "; ".join(notes))
    (claims, family), judge = _judged(analysis_a, later, labels, chosen, noise)
    common = 0
    for cell_a, found in _common_cells(analysis_a, later):
        body = (_pairs if len(later) == 1 else _table)(cell_a, found, labels, chosen, claims)
        if body:
            common += body[0]
            lines += ["", f"== {_what(analysis_a, cell_a)} =="] + body[1]
    if not common:
        lines.append("")
        lines.append(f"nothing to compare: no allocator and param set has successful runs in "
                     f"{'both files' if len(later) == 1 else 'A and a later file'}")
        return lines, common, []
    lines += ["", family_line(family, scope="above")]
    worse = []
    if fail_if_worse is not None:
        gate, gate_family = judge(fail_if_worse) if fail_if_worse != noise else (claims, family)
        for cell_a, _ in _common_cells(analysis_a, later):
            for sa in cell_a.allocators:
                for metric, by_label in gate.get((id(cell_a), sa.name), CellClaims()).comparisons.items():
                    for label, pair in by_label.items():
                        if pair.result.verdict is Verdict.WORSE:
                            worse.append((_what(analysis_a, cell_a), sa.name, label, metric, pair.result))
        lines += _gate(worse, fail_if_worse, labels[1:], gate_family)
    return lines, common, worse


def _pairs(cell_a, found, labels, chosen, claims):
    """Two files: each allocator's means, and a sentence (the form of `scenc compare A B`)."""
    cell_b, = found
    count, lines = 0, []
    for metric in chosen:
        d = metric_defs.metric(metric)
        pairs = [(sa, cell_b.stats(sa.name)) for sa in cell_a.allocators
                 if metric in claims.get((id(cell_a), sa.name), CellClaims()).comparisons]
        if not pairs:
            continue
        reference = min(abs(sa.summaries[metric].mean) or 1 for sa, _ in pairs)
        factor, unit = scale_for(d.unit, reference)
        lines.append(f"{d.label} ({d.direction})")
        for sa, sb in pairs:
            count += 1
            c = claims[(id(cell_a), sa.name)].comparisons[metric]["B"].result
            ma, mb = sa.summaries[metric].mean, sb.summaries[metric].mean
            lines.append(f"  {sa.name}: A {ma * factor:.4g} {unit} (n={sa.n}), "
                         f"B {mb * factor:.4g} {unit} (n={sb.n})")
            lines.append("    " + comparison_sentence(c, f"{sa.name} in B", f"{sa.name} in A", d.word))
    return count, lines


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
