"""What the ltrace parser says besides the events: the ParseReport (counters, anomalies, exits, crash
flags) and TraceFormatError, raised when the input is not an ltrace log at all."""
from __future__ import annotations

from typing import Optional

from ..events import Anomaly


class TraceFormatError(ValueError):
    """The input is not an ltrace log.  ``line`` and ``col`` are 1-based."""

    def __init__(self, filename: str, line: int, col: int, message: str):
        self.filename, self.line, self.col, self.message = filename, line, col, message
        super().__init__(f"{filename}:{line}:{col}: {message}")


class ParseReport:
    """What the parser (and later the statistics) saw besides the events.

    Counters are plain attributes.  Anomalies are kept as a count per kind plus
    the first ``max_examples`` :class:`Anomaly` of each kind (bounded memory).
    """

    def __init__(self, filename: str = "<input>", max_examples: int = 5):
        self.filename = filename
        self.max_examples = max_examples
        self.lines = 0               # lines read
        self.blank_lines = 0
        self.events = 0              # AllocEvents yielded
        self.other_calls = 0         # lines of non-allocator functions (e.g. with -e '*' or without -L)
        self.anomaly_counts: dict = {}
        self.anomaly_examples: dict = {}
        self.threads: set = set()    # every tid that appears, exit lines included
        self.exits: dict = {}        # tid -> 'exited 0' | 'killed by SIGSEGV'
        self.exit_status: Optional[int] = None   # of the last '+++ exited' line (the process leader's)
        self.killed_by: Optional[str] = None     # first '+++ killed by SIGxxx' signal
        self.truncated = False
        self.pending_at_end = 0      # allocator calls still unfinished when their thread exited or the log ended
        self.has_timestamps = False
        self.has_durations = False
        self.plt_notation = False    # saw '-e' notation (CALLER->NAME)
        self.symbol_notation = False  # saw '-x' notation (NAME@LIB)

    # -- anomalies
    def add(self, kind: str, line: int, message: str = "") -> None:
        """Count an anomaly of ``kind`` at ``line``; keep it if fewer than max_examples are kept."""
        n = self.anomaly_counts.get(kind, 0)
        self.anomaly_counts[kind] = n + 1
        if n < self.max_examples:
            msg = message.strip()
            if len(msg) > 200:
                msg = msg[:197] + "..."
            self.anomaly_examples.setdefault(kind, []).append(Anomaly(line, kind, msg))

    def count(self, kind: str) -> int:
        return self.anomaly_counts.get(kind, 0)

    def first_lines(self, kind: str) -> list:
        return [a.line for a in self.anomaly_examples.get(kind, ())]

    @property
    def anomalies(self) -> list:
        """The kept examples of every kind, by line."""
        return sorted((a for lst in self.anomaly_examples.values() for a in lst), key=lambda a: a.line)

    # -- verdicts
    @property
    def crashed(self) -> bool:
        """The tracee was killed by a signal or ltrace lost breakpoints."""
        return self.killed_by is not None or self.count("unexpected-breakpoint") > 0

    @property
    def incomplete(self) -> bool:
        """The log does not cover the whole run: crash, truncation, calls left unfinished, or no exit line."""
        return self.crashed or self.truncated or self.pending_at_end > 0 or not self.exits

    @property
    def notation(self) -> Optional[str]:
        """'e' (PLT breakpoints: CALLER->NAME), 'x' (symbol breakpoints: NAME@LIB), 'mixed' or None."""
        if self.plt_notation and self.symbol_notation:
            return "mixed"
        return "e" if self.plt_notation else "x" if self.symbol_notation else None

    def to_dict(self) -> dict:
        return {
            "filename": self.filename, "lines": self.lines, "blank_lines": self.blank_lines,
            "events": self.events, "other_calls": self.other_calls,
            "threads": sorted(self.threads), "exits": {str(k): v for k, v in sorted(self.exits.items())},
            "exit_status": self.exit_status, "killed_by": self.killed_by, "truncated": self.truncated,
            "pending_at_end": self.pending_at_end, "crashed": self.crashed, "incomplete": self.incomplete,
            "has_timestamps": self.has_timestamps, "has_durations": self.has_durations,
            "notation": self.notation,
            "anomalies": {k: {"count": n, "first_lines": self.first_lines(k),
                              "examples": [a.message for a in self.anomaly_examples.get(k, ())]}
                          for k, n in sorted(self.anomaly_counts.items())},
        }
