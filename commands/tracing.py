"""What the capture, trace-stats and convert commands share: their errors as one sentence, the lines
that list a capture's anomalies and its calls by kind."""

import sys

from ..errors import EXIT_RUN, UnusableInput
from ..trace.events import ANOMALY_KINDS
from ..trace.ltrace import ParseReport, TraceFormatError
from ..trace.model.native import CollectorError
from ..trace.replay import ConvertError
from ..trace.source import TraceInputError


def guarded(name):
    """User errors of `scenc NAME` as one clear sentence (cli.main gives them exit status 64), never a traceback;
    so is a failure of the C converter or the model's collector (a crash, a file size limit, a full disk),
    which ends in exit status 3: its output is gone, and the capture itself is not at fault (a damaged one is
    a TraceFormatError)."""
    def wrap(func):
        def run(args):
            try:
                return func(args)
            except (ConvertError, CollectorError) as e:
                print(f"scenc {name}: {e}; nothing written. A full disk or a file size limit stops it so; else it "
                      f"is a bug of scenc's (`scenc trace-stats {getattr(args, 'file', 'FILE')}` checks the "
                      f"capture)", file=sys.stderr)
                return EXIT_RUN
            except TraceFormatError as e:
                raise UnusableInput(str(e)) from None
            except TraceInputError as e:
                raise UnusableInput(f"scenc {name}: {e}") from None
            except BrokenPipeError:
                raise
            except OSError as e:
                where = f"{e.filename}: " if e.filename else ""
                raise UnusableInput(f"scenc {name}: {where}{e.strerror or e}") from None
        return run
    return wrap


def refuse_scenario(name: str, path) -> None:
    """A .scn file given where a capture is read: say what it is and what reads it."""
    if str(path).endswith(".scn"):
        raise UnusableInput(
            f"scenc {name}: {path} is a scenario, not a capture: {name} reads what `scenc capture` "
            f"recorded of a real program (a tracer log, or an ltrace log), e.g. "
            f"`scenc capture -o app.trace -- ./app` then `scenc {name} app.trace`; a scenario runs with "
            f"`scenc exec {path}` (its calls, counted) or `scenc run {path}`")


def anomaly_lines(report: ParseReport, max_lines: int = 5) -> list:
    """One line per anomaly kind: severity, kind, count, first lines (errors first)."""
    order = {"error": 0, "warning": 1, "info": 2}
    out = []
    for kind, n in sorted(report.anomaly_counts.items(),
                          key=lambda kv: (order[ANOMALY_KINDS.get(kv[0], ("warning",))[0]], kv[0])):
        sev = ANOMALY_KINDS.get(kind, ("warning", ""))[0]
        lines = report.first_lines(kind)[:max_lines]
        where = f"  lines {', '.join(map(str, lines))}{', ...' if n > len(lines) else ''}" if lines else ""
        out.append(f"{sev:<7} {kind:<30} {n:>8}{where}")
    return out


def kinds_line(counts: dict) -> str:
    return ", ".join(f"{k} {n}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))) or "none"
