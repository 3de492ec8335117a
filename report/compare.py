"""`scenc compare`'s figures: B against A for every allocator and param set both result files have."""

import json

from ..run.cells import machine_name, machines
from ..stats.claims import CellClaims, Rule, judge_cells
from ..stats.rank import DEFAULT_NOISE
from . import metrics as metric_defs
from .analysis import analyze
from .sentences import comparison_sentence
from .tables import family_line, format_value, shown_metrics

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


def _common_cells(analysis_a, analysis_b):
    for cell_a in analysis_a.cells:
        cell_b = next((x for x in analysis_b.cells if x.params == cell_a.params
                        and x.probe_set == cell_a.probe_set and x.target == cell_a.target), None)
        if cell_b is not None:
            yield cell_a, cell_b


def _judged(analysis_a, analysis_b, chosen, noise):
    """Every B-against-A comparison printed, judged as one family (stats/claims.py): Holm, or
    Benjamini-Hochberg when the files share several param sets. Each allocator of each cell is a
    "cell" of two allocators, A and B, for the judge."""
    cells, keys = [], []
    for cell_a, cell_b in _common_cells(analysis_a, analysis_b):
        for sa in cell_a.allocators:
            sb = cell_b.stats(sa.name)
            if sb is None:
                continue
            runs = {m: {"A": sa.samples[m], "B": sb.samples[m]} for m in chosen
                    if sa.samples.get(m) and sb.samples.get(m) and m in sa.summaries and m in sb.summaries}
            cells.append(runs)
            keys.append((cell_a, sa, sb))
    rules = {m: Rule(metric_defs.metric(m).lower_is_better) for m in chosen}
    method = "bh" if len({json.dumps(b.params, sort_keys=True) for b, _, _ in keys}) > 1 else "holm"
    claims, family = judge_cells(cells, rules, "A", method=method, per_cell=False, noise=noise)
    return {(id(cell_a), sa.name): claim for (cell_a, sa, _), claim in zip(keys, claims)}, family


def _set_label(cell) -> str:
    params = " ".join(f"{k}={v}" for k, v in cell.params.items()) or "no params"
    return params + (f" [{cell.probe_set}]" if cell.probe_set else "") + \
        (" (the program)" if cell.target == "command" else "")


def _nothing_in_common(analysis_a, analysis_b):
    """Why nothing could be compared, with what each file holds."""
    pairs = list(_common_cells(analysis_a, analysis_b))
    if not pairs:
        out = ["nothing to compare: the files have no param set in common (the same params, probes and target)"]
        for label, analysis in (("A", analysis_a), ("B", analysis_b)):
            sets = [_set_label(c) for c in analysis.cells]
            out.append(f"  {label} has {len(sets)}: {'; '.join(sets) or 'none (no successful run)'}")
        out.append("  run B with A's --param values (or A with B's) to compare them")
        return out
    out = ["nothing to compare: no allocator has successful runs of the same param set in both files"]
    for cell_a, cell_b in pairs:
        ok_a = [s.name for s in cell_a.allocators if s.n] or ["none"]
        ok_b = [s.name for s in cell_b.allocators if s.n] or ["none"]
        out.append(f"  {_set_label(cell_a)}: A has {', '.join(ok_a)}; B has {', '.join(ok_b)}")
    return out


def compare_files(a, b, metrics=None, name_a="A", name_b="B", noise=None):
    """Lines comparing B with A for every (params, allocator) both have; `noise` by default A's (--noise)."""
    noise = noise if noise is not None else a.header.get("noise", DEFAULT_NOISE)
    analysis_a, analysis_b = analyze(a, metrics=metrics or []), analyze(b, metrics=metrics or [])
    chosen = metrics or [m for m in shown_metrics(analysis_a) if m in analysis_b.metrics]
    lines = [f"A = {a.path}", f"B = {b.path}"]
    lines.append("warning: A and B are separate sessions: the machine may have drifted between them "
                 "(load, frequency, temperature), and a drift can look like a significant difference. "
                 "To compare a replay with its program, run both in one session: "
                 "`scenc run app.scn ... -- ./app args`.")
    notes = _differences(a, b)
    if notes:
        lines.append("note: " + "; ".join(notes))
    claims, family = _judged(analysis_a, analysis_b, chosen, noise)
    common = 0
    for cell_a, cell_b in _common_cells(analysis_a, analysis_b):
        params = " ".join(f"{k}={v}" for k, v in cell_a.params.items())
        lines.append("")
        what = f"command {analysis_a.scenario}" if cell_a.target == "command" else analysis_a.scenario
        lines.append(f"== {what}{' ' + params if params else ''} ==")
        for metric in chosen:
            d = metric_defs.metric(metric)
            pairs = [(sa, cell_b.stats(sa.name)) for sa in cell_a.allocators
                     if metric in claims.get((id(cell_a), sa.name), CellClaims()).comparisons]
            if not pairs:
                continue
            lines.append(f"{d.label} ({d.direction})")
            for sa, sb in pairs:
                common += 1
                c = claims[(id(cell_a), sa.name)].comparisons[metric]["B"].result
                ma, mb = sa.summaries[metric].mean, sb.summaries[metric].mean
                # A and B of an allocator in one unit, scaled to them (KiB, MiB, GiB ...), four digits
                reference = min(abs(ma), abs(mb)) or max(abs(ma), abs(mb)) or None
                lines.append(f"  {sa.name}: A {format_value(ma, d.unit, reference)} (n={sa.n}), "
                             f"B {format_value(mb, d.unit, reference)} (n={sb.n})")
                lines.append("    " + comparison_sentence(c, f"{sa.name} in B", f"{sa.name} in A", d.word))
    if not common:
        lines.append("")
        lines += _nothing_in_common(analysis_a, analysis_b)
    else:
        lines += ["", family_line(family, scope="above")]
    return lines, common
