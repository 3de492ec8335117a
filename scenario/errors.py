"""Positioned diagnostics: `file:line:col: error: sentence`, the source line, a caret."""

import unicodedata
from dataclasses import dataclass
from typing import List, Optional

from .nodes import Pos


@dataclass(frozen=True)
class Diagnostic:
    severity: str  # "error" or "warning"
    message: str
    filename: str
    pos: Pos
    hint: Optional[str] = None
    usage: bool = False  # the command line is wrong (a missing file, an unknown --param), not the scenario

    def render(self, source: str = "") -> str:
        where = f"{self.filename}:{self.pos.line}:{self.pos.col}" if self.pos.line else self.filename
        out = [f"{where}: {self.severity}: {self.message}"]
        lines = source.split("\n")  # as the parser numbers them (not at \r, \x0c, \u2028 ...)
        if 0 < self.pos.line <= len(lines):
            text = lines[self.pos.line - 1].rstrip("\r").expandtabs(1)
            # A control character (an escape sequence, a NUL) is not echoed to the terminal.
            text = "".join("\ufffd" if unicodedata.category(ch) == "Cc" else ch for ch in text)
            out.append(f"    {text}")
            out.append("    " + " " * max(self.pos.col - 1, 0) + "^")
        if self.hint:
            out.append(f"    hint: {self.hint}")
        return "\n".join(out)


class ScenarioError(Exception):
    """One or more errors in a scenario; carries every diagnostic found."""

    def __init__(self, diagnostics: List[Diagnostic], source: str = ""):
        self.diagnostics = list(diagnostics)
        self.source = source
        super().__init__(self.render())

    @property
    def usage(self) -> bool:
        """The command line is at fault (exit 64, not 1): it names a file that cannot be read or a param
        the scenario does not have."""
        return any(d.usage for d in self.diagnostics)

    def render(self) -> str:
        return "\n".join(d.render(self.source) for d in self.diagnostics)


class Reporter:
    """Collects diagnostics for one file so a check can report many at once."""

    def __init__(self, filename: str, source: str):
        self.filename = filename
        self.source = source
        self.diagnostics: List[Diagnostic] = []

    def error(self, pos: Pos, message: str, hint: Optional[str] = None, usage: bool = False) -> None:
        self.diagnostics.append(Diagnostic("error", message, self.filename, pos, hint, usage))

    def warning(self, pos: Pos, message: str, hint: Optional[str] = None) -> None:
        self.diagnostics.append(Diagnostic("warning", message, self.filename, pos, hint))

    @property
    def errors(self) -> List[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    @property
    def warnings(self) -> List[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "warning"]

    def raise_if_errors(self) -> None:
        if self.errors:
            raise ScenarioError(self.errors, self.source)

    def fail(self, pos: Pos, message: str, hint: Optional[str] = None) -> "ScenarioError":
        self.error(pos, message, hint)
        return ScenarioError(self.errors, self.source)
