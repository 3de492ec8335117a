"""`scenc report RESULT` and `scenc compare A B`: look at saved results again."""

import json
import sys

from ..errors import EXIT_OK, EXIT_USAGE, UsageError
from ..report.analysis import analyze
from ..report.compare import compare_files
from ..report.tables import format_analysis
from ..run.resultfile import export_csv, load_all


def _load(*paths):
    """The result files, or a UsageError naming every one that cannot be read."""
    results, problems = load_all(paths)
    if problems:
        raise UsageError("\nscenc: ".join(problems))
    return results


def _unknown_metrics(analysis, wanted):
    return [m for m in wanted or [] if m not in analysis.metrics]


def report(args) -> int:
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
        from ..report.plots.charts import write_plots
        from ..report.plots.probes import write_probe_plots
        if analysis.machines and args.across_machines:
            print(f"scenc: warning: --across-machines: the plots put cells of {len(analysis.machines)} "
                  f"machines side by side; differences between those cells may be the machines'",
                  file=sys.stderr)
        paths = write_plots(analysis, args.plots, all_metrics=args.all_metrics, metrics=args.metric,
                            across_machines=args.across_machines)
        paths += write_probe_plots(result, args.plots)  # the same pictures `scenc run --plots` draws
        print(f"plots: {len(paths)} files in {args.plots}", file=sys.stderr)
    return EXIT_OK


def compare(args) -> int:
    a, b = _load(args.a, args.b)
    lines, common = compare_files(a, b, metrics=args.metric, noise=args.noise)
    print("\n".join(lines))
    return EXIT_OK if common else EXIT_USAGE
