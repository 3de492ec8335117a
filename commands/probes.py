"""`scenc probes` (what can be measured, and the plan for a selection) and
`scenc play` (the heap of a layout run as an animated GIF).

Outside the probes package, like commands/allocators.py: cli.py imports every command module to build its
parser, and importing scenc.probes (every probe, the metrics) would cost each command, `scenc convert`
and `scenc --help` included, some tens of milliseconds; the commands here load it when they run."""

import json
import textwrap
from pathlib import Path

from ..errors import EXIT_OK, UsageError
from .options import parse_params


def format_probes() -> str:
    from ..probes import PROBES
    from ..probes.planner import conflict
    lines = []
    for name, p in PROBES.items():
        others = [o for o in PROBES if o != name and conflict(name, o)]
        lines.append(f"{name}{' (default)' if p.default else ''}")
        for label, text in (("measures", p.description), ("costs", p.cost),
                            ("perturbs", ", ".join(sorted(p.perturbs)) or "nothing measurable"),
                            ("sensitive to", ", ".join(sorted(p.sensitive_to)) or "nothing"),
                            ("not in a run with", ", ".join(others) or "-")):
            lines.extend(textwrap.wrap(text, 100, initial_indent=f"  {label + ':':<19}",
                                       subsequent_indent=" " * 21))
    lines.append("")
    lines.extend(textwrap.wrap(
        "Select with `scenc run FILE --probes time,memory,layout`: scenc plans the fewest runs in "
        "which no probe perturbs what another measures (`scenc probes --plan LIST` shows them). "
        "Join probes with '+' to force them into one run; that is refused when a figure would be "
        "false.", 100))
    return "\n".join(lines)


def cmd_probes(args) -> int:
    from ..probes import ProbeError
    from ..probes.planner import plan_spec
    if args.plan is None:
        print(format_probes())
        return EXIT_OK
    try:
        plan = plan_spec(args.plan)
    except ProbeError as exc:
        raise UsageError(str(exc)) from None
    print(plan.explain())
    return EXIT_OK


def _maps_from(target: Path, params_filter):
    """Heap maps by allocator from a result file, a run directory or a layout.bin."""
    from ..probes import heapmap, layoutfile  # numpy and matplotlib: for `scenc play` only
    from ..probes.layout import FILE
    if not target.exists():
        raise UsageError(f"{target}: no such file or directory")
    if target.is_dir():
        target = target / FILE
    if target.suffix == ".bin":
        try:
            return {target.parent.name or "layout": heapmap.compute(layoutfile.read(target))}, target.stem
        except layoutfile.LayoutFileError as exc:
            raise UsageError(str(exc)) from None
    from ..run.resultfile import ResultFileError, load
    from ..report.plots.probes import layout_maps
    from ..probes.rundata import kept_runs
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


def cmd_play(args) -> int:
    from ..probes import heapmap
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


def register(subparsers) -> None:
    p = subparsers.add_parser("probes", help="list what can be measured, or show the run plan for a selection",
                              description="List the probes with what each measures, costs and must not "
                                          "share a run with; with --plan, the runs scenc would make.")
    p.add_argument("--plan", metavar="LIST", help="show the runs for this --probes selection (time,layout ...)")
    p.set_defaults(func=cmd_probes)

    p = subparsers.add_parser("play", help="animate the heap of a layout run as a GIF (the 'player')",
                              description="Draw how each allocator's heap fills and empties over the "
                                          "scenario, side by side, as an animated GIF. RESULT is a result "
                                          "file of `scenc run --probes ...layout`, a run directory or a "
                                          "layout.bin file.")
    p.add_argument("result", metavar="RESULT")
    p.add_argument("-o", "--output", help="the GIF to write (default: RESULT-heap.gif)")
    p.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="with several param sets in RESULT: which one")
    p.add_argument("--fps", type=int, default=10, help="frames per second (default 10)")
    p.add_argument("--frames", type=int, default=80, help="at most this many frames (default 80)")
    p.add_argument("--map", metavar="PNG", help="also draw the static heap map here")
    p.set_defaults(func=cmd_play)
