"""`scenc play RESULT`: the heap of a layout run as an animated GIF, every allocator side by side."""

import json
from pathlib import Path

from ..errors import EXIT_OK, UsageError
from ..probes import heapmap, layoutfile
from ..probes.layout import FILE
from ..probes.rundata import kept_runs
from ..report.plots.probes import layout_maps
from ..run.resultfile import ResultFileError, load
from ..scenario.params import parse_params


def _maps_from(target: Path, params_filter):
    """Heap maps by allocator from a result file, a run directory or a layout.bin."""
    if not target.exists():
        raise UsageError(f"{target}: no such file or directory")
    if target.is_dir():
        target = target / FILE
    if target.suffix == ".bin":
        try:
            return {target.parent.name or "layout": heapmap.compute(layoutfile.read(target))}, target.stem
        except layoutfile.LayoutFileError as exc:
            raise UsageError(str(exc)) from None
    try:
        result = load(target)
    except ResultFileError as exc:
        raise UsageError(str(exc)) from None
    runs = [r for r in kept_runs(result) if "layout" in r.probe_set.split("+")]
    if params_filter:
        runs = [r for r in runs if all(str(r.params.get(k)) == str(v) for k, v in params_filter.items())]
    if not runs:
        raise UsageError(f"{target}: no layout run to play (run with --probes layout, e.g. "
                         f"`scenc run FILE --probes time,layout`)")
    param_sets = {json.dumps(r.params, sort_keys=True) for r in runs}
    if len(param_sets) > 1:
        choices = "; ".join(" ".join(f"{k}={v}" for k, v in json.loads(p).items()) for p in sorted(param_sets))
        raise UsageError(f"{target}: layout runs of several param sets ({choices}); pick one with --param")
    try:
        maps = layout_maps({r.allocator: r for r in runs})
    except layoutfile.LayoutFileError as exc:
        raise UsageError(str(exc)) from None
    return maps, result.header.get("scenario", target.stem)


def play(args) -> int:
    target = Path(args.result)
    maps, title = _maps_from(target, parse_params(args.param))
    out = Path(args.output) if args.output else target.with_name(
        (target.stem if target.is_file() else target.name) + "-heap.gif")
    frames = heapmap.animate(maps, out, fps=args.fps, frames=args.frames, title=title)
    print(f"{out} ({frames} frames, {', '.join(maps)})")
    if args.map:
        heapmap.draw(maps, args.map, title)
        print(args.map)
    return EXIT_OK
