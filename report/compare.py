"""`scenc compare`'s figures: B against A for every allocator and param set both result files have."""

from ..stats.comparison import compare
from ..run.cells import machine_name, machines
from . import metrics as metric_defs
from .analysis import analyze
from .tables import scale_for, shown_metrics

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


def compare_files(a, b, metrics=None, name_a="A", name_b="B"):
    """Lines comparing B with A for every (params, allocator) both have."""
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
    common = 0
    for cell_a in analysis_a.cells:
        cell_b = next((x for x in analysis_b.cells if x.params == cell_a.params
                        and x.probe_set == cell_a.probe_set and x.target == cell_a.target), None)
        if cell_b is None:
            continue
        params = " ".join(f"{k}={v}" for k, v in cell_a.params.items())
        lines.append("")
        what = f"command {analysis_a.scenario}" if cell_a.target == "command" else analysis_a.scenario
        lines.append(f"== {what}{' ' + params if params else ''} ==")
        for metric in chosen:
            d = metric_defs.metric(metric)
            pairs = []
            for sa in cell_a.allocators:
                sb = cell_b.stats(sa.name)
                if sb is None or metric not in sa.samples or metric not in sb.samples:
                    continue
                pairs.append((sa, sb))
            if not pairs:
                continue
            reference = min(abs(sa.summaries[metric].mean) or 1 for sa, _ in pairs)
            factor, unit = scale_for(d.unit, reference)
            lines.append(f"{d.label} ({d.direction})")
            for sa, sb in pairs:
                common += 1
                c = compare(sa.samples[metric], sb.samples[metric], lower_is_better=d.lower_is_better)
                ma, mb = sa.summaries[metric].mean, sb.summaries[metric].mean
                lines.append(f"  {sa.name}: A {ma * factor:.4g} {unit} (n={sa.n}), "
                             f"B {mb * factor:.4g} {unit} (n={sb.n})")
                lines.append("    " + c.sentence(f"{sa.name} in B", f"{sa.name} in A", d.word))
    if not common:
        lines.append("")
        lines.append("nothing to compare: no allocator and param set has successful runs in both files")
    return lines, common
