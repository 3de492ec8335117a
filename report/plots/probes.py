"""The probes' pictures, one chart per param set with every allocator on it:

* memory: RSS (solid) and live bytes (dashed, when `live` shared the run)
  over time;
* latency: the cost of a call at each percentile, one panel per kind;
* layout: the heap maps side by side (probes/heapmap.py).

They are drawn from the runs whose directories the harness kept
(probes/rundata.py); matplotlib is imported only here.
"""

import json
from pathlib import Path
from typing import Dict, List, Mapping, Sequence

from ...probes import heapmap, latency, layoutfile, memory
from ...probes.layout import FILE as LAYOUT_FILE
from ...probes.rundata import KeptRun, kept_runs

QUANTILES = (0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 0.9999)


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def memory_chart(reports: Mapping[str, Mapping], path, title: str = "") -> bool:
    """RSS and live bytes over time, every allocator on one chart. False: nothing to draw."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5), constrained_layout=True)
    drawn = False
    for i, (name, report) in enumerate(reports.items()):
        samples = memory.timeline(report)
        if not samples:
            continue
        colour = f"C{i}"
        t = [s[0] * 1000 for s in samples]
        ax.plot(t, [s[1] / 1024 for s in samples], color=colour, label=f"{name} RSS")
        if all(s[2] is not None for s in samples):
            ax.plot(t, [s[2] / 2**20 for s in samples], color=colour, linestyle="--",
                    label=f"{name} live bytes")
        drawn = True
    if drawn:
        ax.set_xlabel("time since the program started (ms)")
        ax.set_ylabel("MiB")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(title or "resident memory (solid) and live requested bytes (dashed)")
        fig.savefig(path, dpi=110)
    plt.close(fig)
    return drawn


def latency_chart(reports: Mapping[str, Sequence[Mapping]], path, title: str = "") -> bool:
    """Percentile curves per kind of call; each allocator's runs are merged."""
    import math
    merged: Dict[str, Dict] = {}
    for name, runs in reports.items():
        own = [r["probes"]["latency"] for r in runs if (r.get("probes") or {}).get("latency")]
        if own:
            merged[name] = {"threads": [t for o in own for t in o["threads"]],
                            "overhead_cycles": own[0]["overhead_cycles"],
                            "sub_bits": own[0].get("sub_bits", latency.SUB_BITS)}
    kinds = sorted({op for o in merged.values() for t in o["threads"] for op in t["ops"]},
                   key=lambda op: layoutfile.OP_NAMES.index(op) if op in layoutfile.OP_NAMES else 99)
    if not kinds:
        return False
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(kinds), figsize=(4.5 * len(kinds), 4), squeeze=False,
                             constrained_layout=True)
    x = [-math.log10(1 - q) for q in QUANTILES]
    for ax, op in zip(axes[0], kinds):
        for i, (name, own) in enumerate(merged.items()):
            ns = latency.percentile_curve(own, op, list(QUANTILES))
            ax.plot(x, ns, marker="o", color=f"C{i}", label=name)
        ax.set_xticks(x)
        ax.set_xticklabels([f"p{q * 100:g}" for q in QUANTILES], fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("ns per call")
        ax.set_title(op)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def layout_maps(runs: Mapping[str, KeptRun]) -> Dict[str, heapmap.HeapMap]:
    return {name: heapmap.compute(layoutfile.read(run.directory / LAYOUT_FILE))
            for name, run in runs.items() if (run.directory / LAYOUT_FILE).is_file()}


def _by_params(runs: List[KeptRun]) -> Dict[str, List[KeptRun]]:
    groups: Dict[str, List[KeptRun]] = {}
    for run in runs:
        groups.setdefault(json.dumps(run.params, sort_keys=True), []).append(run)
    return groups


def _label(params: Mapping) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


def _slug(params: Mapping) -> str:
    text = "-".join(f"{k}{v}" for k, v in params.items())
    return ("-" + "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)) if text else ""


def write_probe_plots(result, out_dir) -> List[Path]:
    """Every probe picture a result file's kept runs allow, as PNG files in out_dir."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    scenario = result.header.get("scenario", "scenario")
    written: List[Path] = []
    order = list(result.header.get("allocators") or {})
    rank = lambda run: order.index(run.allocator) if run.allocator in order else len(order)
    for runs in _by_params(sorted(kept_runs(result), key=rank)).values():
        params = runs[0].params
        title = f"{scenario} {_label(params)}".strip()
        mem = {r.allocator: r.report for r in runs if r.report and "memory" in r.probe_set.split("+")}
        path = out_dir / f"probe-memory{_slug(params)}.png"
        if mem and memory_chart(mem, path, f"{title}: RSS (solid) and live bytes (dashed)"):
            written.append(path)
        lat: Dict[str, List[Mapping]] = {}
        for r in runs:
            if r.report and "latency" in r.probe_set.split("+"):
                lat.setdefault(r.allocator, []).append(r.report)
        path = out_dir / f"probe-latency{_slug(params)}.png"
        if lat and latency_chart(lat, path, f"{title}: cost of one call"):
            written.append(path)
        layout_runs = {r.allocator: r for r in runs if "layout" in r.probe_set.split("+")}
        maps = layout_maps(layout_runs)
        if maps:
            path = out_dir / f"probe-layout{_slug(params)}.png"
            heapmap.draw(maps, path, f"{title}: heap map")
            written.append(path)
    return written
