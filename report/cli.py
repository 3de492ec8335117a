"""`scenc report RESULT` and `scenc compare A B`: look at saved results again."""

import json
import sys

EXIT_OK, EXIT_BAD_INPUT = 0, 64


def register(subparsers) -> None:
    p = subparsers.add_parser("report", help="re-render the tables (and plots, CSV) of a result file",
                              description="Recompute every statistic from the raw runs saved in a "
                                          "result file and print the tables of `scenc run`.")
    p.add_argument("result", help="a result file written by `scenc run`")
    p.add_argument("--baseline", metavar="NAME", help="compare against this allocator instead")
    p.add_argument("--metric", action="append", metavar="NAME",
                   help="show this metric (repeatable; default wall time and peak RSS)")
    p.add_argument("--all-metrics", action="store_true", help="a table for every metric")
    p.add_argument("--plots", metavar="DIR", help="draw plots (PNG and SVG) into DIR")
    p.add_argument("--csv", metavar="FILE", help="export the runs as CSV")
    p.add_argument("--json", action="store_true", help="print the statistics as JSON instead of tables")
    p.set_defaults(func=cmd_report)

    p = subparsers.add_parser("compare", help="compare two result files (before/after, two machines)",
                              description="For every allocator and param set found in both files, "
                                          "the ratio B/A of the means with its 95% CI and a "
                                          "significance test.")
    p.add_argument("a", metavar="A.json", help="the reference result")
    p.add_argument("b", metavar="B.json", help="the result compared with it")
    p.add_argument("--metric", action="append", metavar="NAME",
                   help="metric to compare (repeatable; default wall time and peak RSS)")
    p.set_defaults(func=cmd_compare)


def _load(path):
    from ..resultfile import ResultFileError, load
    try:
        return load(path)
    except FileNotFoundError:
        print(f"scenc: {path}: no such file", file=sys.stderr)
    except IsADirectoryError:
        print(f"scenc: {path} is a directory, not a result file", file=sys.stderr)
    except ResultFileError as exc:
        print(f"scenc: {exc}", file=sys.stderr)
    return None


def _unknown_metrics(analysis, wanted):
    return [m for m in wanted or [] if m not in analysis.metrics]


def cmd_report(args) -> int:
    from ..resultfile import export_csv
    from .analysis import analyze
    from .tables import format_analysis
    result = _load(args.result)
    if result is None:
        return EXIT_BAD_INPUT
    try:
        everything = args.json or args.all_metrics
        analysis = analyze(result, baseline=args.baseline, metrics=None if everything else (args.metric or []))
    except ValueError as exc:
        print(f"scenc: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    unknown = _unknown_metrics(analysis, args.metric)
    if unknown:
        print(f"scenc: no metric {', '.join(unknown)} in {args.result}; it has "
              f"{', '.join(analysis.metrics)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json:
        print(json.dumps(analysis.to_json(), indent=1))
    else:
        print(format_analysis(analysis, all_metrics=args.all_metrics, metrics=args.metric))
    if args.csv:
        rows = export_csv(result, args.csv)
        print(f"CSV: {args.csv} ({rows} rows)", file=sys.stderr)
    if args.plots:
        from ..probes.plots import write_probe_plots
        from .plots import write_plots
        paths = write_plots(analysis, args.plots, all_metrics=args.all_metrics, metrics=args.metric)
        paths += write_probe_plots(result, args.plots)  # the same pictures `scenc run --plots` draws
        print(f"plots: {len(paths)} files in {args.plots}", file=sys.stderr)
    return EXIT_OK


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
    for name in set(ha.get("allocators", {})) & set(hb.get("allocators", {})):
        va = ha["allocators"][name].get("version")
        vb = hb["allocators"][name].get("version")
        if va != vb:
            notes.append(f"{name} version: {va} vs {vb}")
    return notes


def compare_files(a, b, metrics=None, name_a="A", name_b="B"):
    """Lines comparing B with A for every (params, allocator) both have."""
    from .. import stats
    from . import metrics as metric_defs
    from .analysis import analyze
    from .tables import scale_for, shown_metrics
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
    for block_a in analysis_a.blocks:
        block_b = next((x for x in analysis_b.blocks if x.params == block_a.params
                        and x.probe_set == block_a.probe_set and x.target == block_a.target), None)
        if block_b is None:
            continue
        params = " ".join(f"{k}={v}" for k, v in block_a.params.items())
        what = f"command {analysis_a.scenario}" if block_a.target == "command" else analysis_a.scenario
        lines.append("")
        lines.append(f"== {what}{' ' + params if params else ''} ==")
        for metric in chosen:
            d = metric_defs.metric(metric)
            pairs = []
            for sa in block_a.allocators:
                sb = block_b.stats(sa.name)
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
                c = stats.compare(sa.samples[metric], sb.samples[metric], lower_is_better=d.lower_is_better)
                ma, mb = sa.summaries[metric].mean, sb.summaries[metric].mean
                lines.append(f"  {sa.name}: A {ma * factor:.4g} {unit} (n={sa.n}), "
                             f"B {mb * factor:.4g} {unit} (n={sb.n})")
                lines.append("    " + c.sentence(f"{sa.name} in B", f"{sa.name} in A", d.word))
    if not common:
        lines.append("")
        lines.append("nothing to compare: no allocator and param set has successful runs in both files")
    return lines, common


def cmd_compare(args) -> int:
    a, b = _load(args.a), _load(args.b)
    if a is None or b is None:
        return EXIT_BAD_INPUT
    lines, common = compare_files(a, b, metrics=args.metric)
    print("\n".join(lines))
    return EXIT_OK if common else EXIT_BAD_INPUT
