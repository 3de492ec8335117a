"""`scenc report RESULT` and `scenc compare A B`: look at saved results again."""

import json
import sys

from ..errors import EXIT_OK, EXIT_USAGE, EXIT_WORSE, UsageError
from ..report.analysis import analyze
from ..report.compare import compare_files
from ..report.several import compare_several, fail_if_worse
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
    csv_to_stdout = args.csv == "-"
    if args.json and csv_to_stdout:
        raise UsageError("--json and --csv - would both write to stdout; give --csv a file name")
    if args.json:
        print(json.dumps(analysis.to_json(), indent=1))
    else:  # with --csv -, stdout is the CSV's alone
        print(format_analysis(analysis, all_metrics=args.all_metrics, metrics=args.metric),
              file=sys.stderr if csv_to_stdout else sys.stdout)
    if args.csv:
        rows = export_csv(result, args.csv)
        print(f"CSV: {'stdout' if csv_to_stdout else args.csv} ({rows} rows)", file=sys.stderr)
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
    _write_exports(args, analysis)
    return EXIT_OK


def _write(path: str, what: str, write) -> None:
    """write(path) -> a description of what was written; a path that cannot be written is a usage error."""
    try:
        done = write(path)
    except OSError as exc:
        raise UsageError(f"cannot write the {what} to {path}: {exc.strerror or exc}") from None
    print(f"{what}: {path}{f' ({done})' if done else ''}", file=sys.stderr)


def _text_file(text: str):
    def write(path):
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    return write


def _write_exports(args, analysis) -> None:
    """--markdown, --html, --summary-csv: the report as files (report/markdown.py, page.py, exports.py)."""
    if not (args.markdown or args.html or args.summary_csv):
        return
    from ..report.document import chosen_metrics
    chosen = chosen_metrics(analysis, args.all_metrics, args.metric)
    if args.summary_csv:
        from ..report.exports import write_summary_csv
        _write(args.summary_csv, "summary CSV", lambda p: f"{write_summary_csv(analysis, p)} rows")
    if args.markdown:
        from ..report.markdown import markdown_report
        _write(args.markdown, "markdown", _text_file(markdown_report(analysis, chosen)))
    if args.html:
        from ..report.page import html_report
        page = html_report(analysis, chosen, all_metrics=args.all_metrics, only=args.metric,
                           across_machines=args.across_machines)
        _write(args.html, "HTML", lambda p: _text_file(page)(p) or f"{page.count('<svg')} plots inline")


def compare(args) -> int:
    a, *later = _load(args.a, *args.b)
    if len(later) == 1:
        lines, common = compare_files(a, later[0], metrics=args.metric, noise=args.noise)
    else:
        lines, common = compare_several(a, later, metrics=args.metric, noise=args.noise)
    worse = []
    if common and args.fail_if_worse is not None:
        gate, worse = fail_if_worse(a, later, args.fail_if_worse, metrics=args.metric, noise=args.noise)
        lines += gate
    print("\n".join(lines))
    if not common:
        return EXIT_USAGE
    return EXIT_WORSE if worse else EXIT_OK
