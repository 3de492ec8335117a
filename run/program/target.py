"""A real program as something `scenc run` measures: `scenc run ... -- ./prog args`.

A `ProgramTarget` is everything needed to run the program again in the same
way (argv, working directory, stdin file, extra environment, the figure to
take from its output, the commands run before and after each run, whether a
non-zero exit is still a measured run) and is saved in the result file's
header, so `--resume` runs the same program. Its argv (and --prepare,
--cleanup) may hold `{name}` placeholders: `for_params` fills them with a
`--param` sweep's values, one cell per value (`scenc run --param n=1,2,4 --
./prog {n}`). Before any run, `refusal` reads the
program's ELF file: a statically linked program, or one that brings its own
malloc, cannot be measured under a preloaded allocator, and is refused with
the reason instead of being reported under an allocator's name it never used.
(Every run proves its allocator all the same: run/program/runner.py.)

A program's runs are RunConfigs with target "command"; the scenario beside
it, if any, keeps target "scenario". With `--server`, the program after `--`
is the client of a server (`server`, run/program/server.py): the server is
what runs under the allocator, the client runs without any preload.
"""

import dataclasses
import os
import re
import shlex
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ...report import metrics as metric_defs
from ...system.elf import inspect as inspect_elf
from ...system.process import ProgramNotFound, locate_program
from ..plan import COMMAND
from .server import ServerSpec, ServerSpecError

REPORTED_PREFIX = "reported"          # metric family of figures taken from the program's output
_MALLOC_SYMBOLS = ("malloc", "free", "calloc", "realloc")
# `{name}` in the program's arguments: a --param's value (a name that is no --param stays as it is).
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ProgramError(ValueError):
    """A program that cannot be measured; the message says why."""


@dataclass(frozen=True)
class ReportedMetric:
    """`--metric 'rtime: ([0-9.]+)'`: a figure the program prints about itself."""
    pattern: str
    name: str
    lower_is_better: bool = True

    @classmethod
    def parse(cls, pattern: str, lower_is_better: bool = True) -> "ReportedMetric":
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise ProgramError(f"--metric {pattern!r} is not a regular expression: {exc}") from None
        if compiled.groups < 1:
            raise ProgramError(f"--metric {pattern!r} needs a group around the number, "
                               f"like 'rtime: ([0-9.]+)'")
        named = next(iter(compiled.groupindex), None)
        words = re.sub(r"[^A-Za-z0-9_]+", " ", pattern.split("(", 1)[0]).split()
        name = named or (words[0] if words else "figure")
        return cls(pattern, name, lower_is_better)

    @property
    def metric_name(self) -> str:
        return f"{REPORTED_PREFIX}:{self.name}"

    def find(self, output: str) -> Optional[float]:
        """The last match in the output (a benchmark's summary comes last), or None."""
        value = None
        for match in re.finditer(self.pattern, output, re.MULTILINE):
            group = match.group(self.name) if self.name in match.re.groupindex else match.group(1)
            try:
                value = float(group)
            except (TypeError, ValueError):
                continue
        return value

    def to_json(self) -> dict:
        return {"pattern": self.pattern, "name": self.name, "lower_is_better": self.lower_is_better}

    @classmethod
    def from_json(cls, data: Mapping) -> "ReportedMetric":
        return cls(data["pattern"], data["name"], bool(data.get("lower_is_better", True)))


@dataclass(frozen=True)
class ProgramTarget:
    argv: Tuple[str, ...]
    cwd: Optional[str] = None
    stdin: Optional[str] = None               # a file, or None for /dev/null
    env: Tuple[Tuple[str, str], ...] = ()     # set on top of scenc's environment
    metric: Optional[ReportedMetric] = None
    prepare: Optional[str] = None             # a shell command run before each run (not timed)
    cleanup: Optional[str] = None             # ... and after each run
    ignore_failure: bool = False              # a non-zero exit status is still a measured run
    server: Optional[ServerSpec] = None       # --server: argv is the client, the server is measured
    more_metrics: Tuple[ReportedMetric, ...] = ()   # a second --metric and after (redis-benchmark's SET, GET)

    @property
    def reported(self) -> Tuple[ReportedMetric, ...]:
        """Every --metric, in the order given."""
        return ((self.metric,) if self.metric is not None else ()) + self.more_metrics

    @property
    def name(self) -> str:
        if self.server is not None:
            return self.server.name
        return os.path.basename(self.argv[0]) or self.argv[0]

    @property
    def env_dict(self) -> Dict[str, str]:
        return dict(self.env)

    def describe(self) -> str:
        client = " ".join(shlex.quote(a) for a in self.argv)
        if self.server is not None:
            return f"server {self.server.describe()}, client {client}"
        return client

    def placeholders(self) -> List[str]:
        """The `{name}`s of the argv, --prepare and --cleanup, in order of appearance."""
        names: List[str] = []
        server = self.server.texts() if self.server is not None else ()
        for text in (*server, *self.argv, self.prepare or "", self.cleanup or ""):
            names += [n for n in PLACEHOLDER.findall(text) if n not in names]
        return names

    def for_params(self, params: Mapping) -> "ProgramTarget":
        """The program with each `{name}` of a param in `params` replaced by its value."""
        if not params:
            return self

        def fill(text: Optional[str]) -> Optional[str]:
            if text is None:
                return None
            return PLACEHOLDER.sub(lambda m: str(params[m.group(1)]) if m.group(1) in params else m.group(0), text)
        return dataclasses.replace(self, argv=tuple(fill(a) for a in self.argv), prepare=fill(self.prepare),
                                   cleanup=fill(self.cleanup),
                                   server=self.server.filled(fill) if self.server is not None else None)

    def to_json(self) -> dict:
        data = {"argv": list(self.argv), "cwd": self.cwd, "stdin": self.stdin,
                "env": self.env_dict, "metric": self.metric.to_json() if self.metric else None}
        # Only when set: a file of a program without them reads as before.
        data.update({k: v for k, v in (("prepare", self.prepare), ("cleanup", self.cleanup),
                                       ("ignore_failure", self.ignore_failure)) if v})
        if self.server is not None:
            data["server"] = self.server.to_json()
        if self.more_metrics:
            data["more_metrics"] = [m.to_json() for m in self.more_metrics]
        return data

    @classmethod
    def from_json(cls, data: Mapping) -> "ProgramTarget":
        metric, server = data.get("metric"), data.get("server")
        return cls(tuple(data["argv"]), data.get("cwd"), data.get("stdin"),
                   tuple((data.get("env") or {}).items()),
                   ReportedMetric.from_json(metric) if metric else None,
                   data.get("prepare"), data.get("cleanup"), bool(data.get("ignore_failure")),
                   ServerSpec.from_json(server) if server else None,
                   tuple(ReportedMetric.from_json(m) for m in data.get("more_metrics") or ()))

    @classmethod
    def from_options(cls, argv: Sequence[str], cwd: Optional[str] = None, stdin: Optional[str] = None,
                     env: Sequence[str] = (), metric=None,
                     higher_is_better: bool = False, prepare: Optional[str] = None,
                     cleanup: Optional[str] = None, ignore_failure: bool = False,
                     server: Optional[str] = None, ready: Optional[str] = None, stop: Optional[str] = None,
                     stop_grace_s: Optional[float] = None,
                     ready_timeout_s: Optional[float] = None) -> "ProgramTarget":
        if not argv:
            if server is not None:
                raise ProgramError("--server needs its client after `--`: `scenc run --server 'redis-server "
                                   "--port 7000' --ready tcp:7000 -- redis-benchmark -p 7000 -q`")
            raise ProgramError("nothing after `--`: give the program to run, like `-- ./app args`")
        spec = None
        if server is not None:
            try:
                spec = ServerSpec.from_options(server, ready, stop, stop_grace_s, ready_timeout_s)
            except ServerSpecError as exc:
                raise ProgramError(str(exc)) from None
        pairs = []
        for item in env or ():
            key, sep, value = item.partition("=")
            if not sep or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
                raise ProgramError(f"--env {item!r}: give KEY=VALUE")
            if key == "LD_PRELOAD":
                raise ProgramError("--env LD_PRELOAD: scenc sets LD_PRELOAD for each allocator; "
                                   "define your own allocator with NAME=/path/lib.so instead")
            pairs.append((key, value))
        cwd = os.path.abspath(cwd) if cwd else os.getcwd()
        if not os.path.isdir(cwd):
            raise ProgramError(f"--cwd {cwd}: no such directory")
        if stdin is not None:
            stdin = os.path.abspath(stdin)
            if not os.path.isfile(stdin):
                raise ProgramError(f"--stdin {stdin}: no such file")
        patterns = [metric] if isinstance(metric, str) else list(metric or ())
        reported = [ReportedMetric.parse(p, not higher_is_better) for p in patterns]
        names = [m.name for m in reported]
        twice = next((n for n in names if names.count(n) > 1), None)
        if twice:
            raise ProgramError(f"two --metric figures would both be named {twice!r}: name them with a named "
                               f"group, like --metric '(?P<set_rps>[0-9.]+) requests' ")
        for option, command in (("--prepare", prepare), ("--cleanup", cleanup)):
            if command is not None and not command.strip():
                raise ProgramError(f"{option} is empty: give a shell command, like {option} 'rm -f out.dat'")
        return cls(tuple(argv), cwd, stdin, tuple(pairs), reported[0] if reported else None, prepare, cleanup,
                   ignore_failure, spec, tuple(reported[1:]))


def refusal(target: ProgramTarget) -> Optional[str]:
    """Why this program cannot be measured under a preloaded allocator, or None.

    A `#!` script is judged by its interpreter (through `/usr/bin/env NAME`).
    """
    argv, seen = list(target.argv), []
    while True:
        try:
            _, program = locate_program(argv, target.cwd)
        except ProgramNotFound as exc:
            raise ProgramError(str(exc)) from None
        elf = inspect_elf(program)
        seen.append(program)
        if not elf.shebang or len(seen) > 4:
            break
        argv = elf.shebang[1:] if os.path.basename(elf.shebang[0]) == "env" and len(elf.shebang) > 1 \
            else elf.shebang
    via = f" (the interpreter of {seen[0]})" if len(seen) > 1 else ""
    if not elf.is_elf:
        return None  # the kernel will say what it is; every run still proves its allocator
    if not elf.dynamic:
        return (f"{program}{via} is statically linked: LD_PRELOAD cannot replace its malloc, "
                f"so every allocator would really be the one built into it")
    own = [s for s in _MALLOC_SYMBOLS if s in elf.defined]
    if own:
        return (f"{program}{via} brings its own allocator (it defines {', '.join(own)} itself), "
                f"so a preloaded allocator would not serve its calls; rebuild it without its own "
                f"malloc to compare allocators")
    return None


def target_of(header: Mapping) -> Optional[ProgramTarget]:
    """The program of a result file's header, or None (a scenario alone, or a file from before programs)."""
    data = (header.get("targets") or {}).get(COMMAND)
    return ProgramTarget.from_json(data) if data else None


def register_reported_metrics(header: Mapping) -> None:
    """Make the figures a program reports known to the tables, with their direction."""
    program = target_of(header)
    for reported in (program.reported if program is not None else ()):
        metric_defs.register(metric_defs.Metric(
            reported.metric_name, f"{reported.name} (reported by the program)", "", reported.lower_is_better,
            reported.name, lambda _report: None, best=f"best {reported.name}"))
