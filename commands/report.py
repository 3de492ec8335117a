"""`scenc report RESULT` and `scenc compare A B`: look at saved results again."""

import argparse
import json
import sys

from ..errors import EXIT_OK, EXIT_USAGE, UsageError


def parse_noise(text: str) -> float:
    """--noise: "1%", "0.5%" or "0.01" -> 0.01; 0 turns the noise threshold off."""
    text = text.strip()
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage (like 1%)") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} should be at least 0% and below 100%")
    return value


NOISE_HELP = ("differences within PCT are noise: never called significant, \"equivalent\" when the whole "
              "interval lies within it (default 1%%; 0 turns it off)")


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
    p.add_argument("--noise", type=parse_noise, default=0.01, metavar="PCT", help=NOISE_HELP)
    p.add_argument("--across-machines", action="store_true",
                   help="in a merge of shards from several machines, draw their blocks in the same "
                        "figures (by default each machine gets its own: they are not comparable)")
    p.set_defaults(func=cmd_report)

    p = subparsers.add_parser("compare", help="compare two result files (before/after, two machines)",
                              description="For every allocator and param set found in both files, "
                                          "the ratio B/A (Hodges-Lehmann) with its interval from "
                                          "the rank test, Holm-corrected over the comparisons.")
    p.add_argument("a", metavar="A.json", help="the reference result")
    p.add_argument("b", metavar="B.json", help="the result compared with it")
    p.add_argument("--metric", action="append", metavar="NAME",
                   help="metric to compare (repeatable; default wall time and peak RSS)")
    p.add_argument("--noise", type=parse_noise, default=0.01, metavar="PCT", help=NOISE_HELP)
    p.set_defaults(func=cmd_compare)


def _load(*paths):
    """The result files, or a UsageError naming every one that cannot be read."""
    from ..run.resultfile import load_all
    results, problems = load_all(paths)
    if problems:
        raise UsageError("\nscenc: ".join(problems))
    return results


def _unknown_metrics(analysis, wanted):
    return [m for m in wanted or [] if m not in analysis.metrics]


def cmd_report(args) -> int:
    from ..run.resultfile import export_csv
    from ..report.analysis import analyze
    from ..report.tables import format_analysis
    result, = _load(args.result)
    try:
        everything = args.json or args.all_metrics
        analysis = analyze(result, baseline=args.baseline, metrics=None if everything else (args.metric or []),
                           noise=args.noise)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    unknown = _unknown_metrics(analysis, args.metric)
    if unknown:
        raise UsageError(f"no metric {', '.join(unknown)} in {args.result}; it has "
                         f"{', '.join(analysis.metrics)}")
    if args.json:
        print(json.dumps(analysis.to_json(), indent=1))
    else:
        print(format_analysis(analysis, all_metrics=args.all_metrics, metrics=args.metric))
    if args.csv:
        rows = export_csv(result, args.csv)
        print(f"CSV: {args.csv} ({rows} rows)", file=sys.stderr)
    if args.plots:
        from ..report.plots.probes import write_probe_plots
        from ..report.plots.charts import write_plots
        if analysis.machines and args.across_machines:
            print(f"scenc: warning: --across-machines: the plots put blocks of {len(analysis.machines)} "
                  f"machines side by side; differences between those blocks may be the machines'",
                  file=sys.stderr)
        paths = write_plots(analysis, args.plots, all_metrics=args.all_metrics, metrics=args.metric,
                            across_machines=args.across_machines)
        paths += write_probe_plots(result, args.plots)  # the same pictures `scenc run --plots` draws
        print(f"plots: {len(paths)} files in {args.plots}", file=sys.stderr)
    return EXIT_OK


def cmd_compare(args) -> int:
    from ..report.compare import compare_files
    a, b = _load(args.a, args.b)
    lines, common = compare_files(a, b, metrics=args.metric, noise=args.noise)
    print("\n".join(lines))
    return EXIT_OK if common else EXIT_USAGE
