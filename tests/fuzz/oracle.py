"""What must hold for any input to the front end, and the checks that enforce it.

Every input ends in exactly one of:

- a built program: the front end accepts it, the generated C compiles with
  -Wall -Wextra -Werror under gcc and clang, and the program either runs to
  its JSON report or stops with the runtime's own one-line message
  ("scenc runtime: ...", exit 3: an index out of range, a division by zero
  only known at run time);
- a positioned error: `ScenarioError` whose every diagnostic names the file
  and, apart from `--param` problems, a line and column inside it.

Anything else is a `Finding`: a Python exception other than ScenarioError
(the user would see a traceback), C that does not compile (a BuildError on
generated code is always scenc's bug), a program killed by a signal, a
program that hangs, or a front end that takes more than FRONT_END_SECONDS.
"""

import contextlib
import hashlib
import json
import signal
import subprocess
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from scenc.compiler import build as builder
from scenc.compiler.codegen import render
from scenc.compiler.lower import lower
from scenc.compiler.pipeline import load
from scenc.scenario.errors import ScenarioError

FRONT_END_SECONDS = 30
RUN_SECONDS = 30


class Finding(AssertionError):
    """An input that broke one of the front end's promises; the message says which."""


class _TooSlow(BaseException):
    """Not an Exception, so that no `except Exception` in scenc can swallow it."""


@contextlib.contextmanager
def time_limit(seconds: int):
    """Interrupt the block after `seconds` (SIGALRM: main thread only, as under pytest)."""
    def fire(signum, frame):
        raise _TooSlow()
    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Outcome:
    accepted: bool
    c_text: Optional[str] = None
    scenario_name: Optional[str] = None
    error: Optional[ScenarioError] = None


def check_positioned(exc: ScenarioError, filename: str, raw: bytes = b"") -> None:
    """Every diagnostic names the file, and a line and column that exist in it.

    Without decoded source (a file that is not UTF-8) lines and columns are
    checked against the raw bytes, which is what they count then.
    """
    if not exc.diagnostics:
        raise Finding("ScenarioError without a diagnostic")
    lines = exc.source.split("\n") if exc.source else raw.split(b"\n")  # lines end at '\n' only
    rendered = exc.render()     # must not raise either
    for d in exc.diagnostics:
        if d.filename != filename:
            raise Finding(f"diagnostic names {d.filename!r}, not the file {filename!r}: {d.message}")
        if not d.message or "Traceback" in d.message:
            raise Finding(f"empty or traceback message: {d!r}")
        if d.message.startswith("--param"):
            continue
        if not (0 < d.pos.line <= len(lines)) or d.pos.col < 1:
            raise Finding(f"diagnostic at {d.pos.line}:{d.pos.col} outside the file "
                          f"({len(lines)} lines): {d.message}")
        if d.pos.col > len(lines[d.pos.line - 1]) + 1:
            raise Finding(f"column {d.pos.col} past the end of line {d.pos.line}: {d.message}")
        where = f"{filename}:{d.pos.line}:{d.pos.col}: {d.severity}: "
        if where not in rendered:
            raise Finding(f"rendered diagnostics lack {where!r}:\n{rendered}")


def front_end(path: Path, params: Optional[Dict[str, object]] = None) -> Outcome:
    """Parse, check, lower and render `path`; a Finding for anything but C text or a positioned error."""
    path = Path(path)
    raw = path.read_bytes() if path.is_file() else b""
    try:
        with time_limit(FRONT_END_SECONDS):
            loaded = load(path, params or {})
            c_text = render(lower(loaded.resolved, path.resolve().parent))
    except ScenarioError as exc:
        check_positioned(exc, str(path), raw)
        return Outcome(False, error=exc)
    except _TooSlow:
        raise Finding(f"the front end took more than {FRONT_END_SECONDS} s") from None
    except Exception:
        raise Finding("the front end raised instead of reporting a positioned error:\n"
                      + traceback.format_exc()) from None
    return Outcome(True, c_text, loaded.resolved.scenario.name)


def compile_c(c_text: str, cc: str, extra_flags=()) -> Path:
    """The program for generated C; a Finding when the compiler rejects it."""
    key = hashlib.sha256((cc + "\0" + " ".join(extra_flags) + "\0" + c_text).encode()).hexdigest()[:24]
    hit = builder.cached_build("fuzz-" + key)
    if hit is not None:
        return hit.binary
    try:
        return builder.compile_program(c_text, "fuzz-" + key, cc, extra_flags).binary
    except builder.BuildError as exc:
        raise Finding(f"generated C does not compile with {cc}:\n{exc}") from None


@dataclass
class RunResult:
    returncode: int
    report: Optional[dict] = None
    stderr: str = ""


def run_program(binary: Path, scenario_name: Optional[str] = None, timeout: int = RUN_SECONDS,
                env: Optional[dict] = None) -> RunResult:
    """Run a built scenario: a JSON report, or the runtime's own message and exit 3."""
    try:
        proc = subprocess.run([str(binary)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise Finding(f"the program ran longer than {timeout} s (a hang?)") from None
    stderr = proc.stderr.decode("utf-8", "replace")
    if proc.returncode == 3 and stderr.startswith("scenc runtime: ") and stderr.count("\n") == 1:
        return RunResult(3, None, stderr)
    if proc.returncode != 0:
        raise Finding(f"the program failed with status {proc.returncode}:\n{stderr[-3000:]}")
    try:
        report = json.loads(proc.stdout.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise Finding(f"the program's report is not JSON ({exc}):\n{proc.stdout[:2000]!r}") from None
    if scenario_name is not None and report.get("scenario") != scenario_name:
        raise Finding(f"the report names the scenario {report.get('scenario')!r}, "
                      f"the source {scenario_name!r}")
    return RunResult(0, report, stderr)


@dataclass
class Tally:
    """What a fuzz run tried and what became of it."""
    tried: int = 0
    accepted: int = 0
    rejected: int = 0
    built: int = 0
    ran: int = 0
    crashed: int = 0
    crashes: List[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"tried {self.tried}, accepted {self.accepted}, rejected {self.rejected}, "
                f"built {self.built}, ran {self.ran}, crashed {self.crashed}")
