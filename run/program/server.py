"""A server measured under load: `scenc run --server 'CMD ARGS' --ready tcp:PORT ... -- CLIENT ARGS`.

A `ServerSpec` says how to start the server (its argv, split from one shell-like string),
how to know it is ready (`Readiness`: a TCP connect, a file appearing, or a delay), how to
stop it (a signal, then SIGKILL of its process group after a grace period) and how long it
may take to get ready. It lives in the program's `ProgramTarget` (run/program/target.py)
and in the result file's header; the client is the target's argv. `{name}`s in the server's
command and in `--ready` take a `--param` sweep's values, as the client's arguments do.
How one run goes is run/program/serving.py's.
"""

import dataclasses
import shlex
import signal
from dataclasses import dataclass
from typing import Mapping, Optional, Tuple

DEFAULT_READY_TIMEOUT_S = 60.0
DEFAULT_STOP_GRACE_S = 10.0
_READY_FORMS = "tcp:PORT (or tcp:HOST:PORT), file:PATH or after:SECONDS"


class ServerSpecError(ValueError):
    """A --server, --ready or --stop that cannot be used; the message says why."""


@dataclass(frozen=True)
class Readiness:
    """When the server is ready for its client."""
    kind: str                  # "tcp", "file" or "after"
    host: str = "127.0.0.1"    # tcp
    port: int = 0              # tcp
    path: str = ""             # file
    seconds: float = 0.0       # after

    @classmethod
    def parse(cls, text: str) -> "Readiness":
        kind, sep, rest = text.partition(":")
        if not sep or not rest:
            raise ServerSpecError(f"--ready {text!r}: give {_READY_FORMS}")
        if kind == "tcp":
            host, _, port = rest.rpartition(":")
            host = host.strip("[]") or "127.0.0.1"
            if not port.isdigit() or not 0 < int(port) < 65536:
                raise ServerSpecError(f"--ready {text!r}: the port must be a number from 1 to 65535")
            return cls("tcp", host=host, port=int(port))
        if kind == "file":
            return cls("file", path=rest)
        if kind == "after":
            try:
                seconds = float(rest.rstrip("s"))
            except ValueError:
                seconds = -1.0
            if not seconds >= 0:
                raise ServerSpecError(f"--ready {text!r}: give the seconds to wait, like after:2")
            return cls("after", seconds=seconds)
        raise ServerSpecError(f"--ready {text!r}: {kind!r} is not a way to wait; give {_READY_FORMS}")

    def describe(self) -> str:
        if self.kind == "tcp":
            return f"a connection to {self.host}:{self.port}"
        if self.kind == "file":
            return f"the file {self.path}"
        return f"{self.seconds:g} s"


def parse_signal(text: str) -> int:
    """"TERM", "SIGTERM", "15" -> 15."""
    name = text.strip().upper()
    if name.isdigit():
        number = int(name)
        if number in {s.value for s in signal.Signals}:
            return number
    else:
        try:
            return signal.Signals[name if name.startswith("SIG") else "SIG" + name].value
        except KeyError:
            pass
    raise ServerSpecError(f"--stop {text!r}: not a signal (give a name like SIGTERM or SIGINT, or a number)")


@dataclass(frozen=True)
class ServerSpec:
    argv: Tuple[str, ...]
    ready: str                                  # as given: it may hold `{name}`s
    stop_signal: int = signal.SIGTERM
    stop_grace_s: float = DEFAULT_STOP_GRACE_S
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S

    @classmethod
    def from_options(cls, command: str, ready: Optional[str], stop: Optional[str] = None,
                     stop_grace_s: Optional[float] = None,
                     ready_timeout_s: Optional[float] = None) -> "ServerSpec":
        try:
            argv = tuple(shlex.split(command))
        except ValueError as exc:
            raise ServerSpecError(f"--server {command!r}: {exc}") from None
        if not argv:
            raise ServerSpecError("--server is empty: give the server's command, like --server 'redis-server "
                                  "--port 7000'")
        if not ready:
            raise ServerSpecError("--server needs --ready: when the server can take its client "
                                  f"({_READY_FORMS})")
        if "{" not in ready:
            Readiness.parse(ready)   # checked now; one with `{name}`s when its values are known
        return cls(argv, ready, parse_signal(stop) if stop else signal.SIGTERM,
                   DEFAULT_STOP_GRACE_S if stop_grace_s is None else stop_grace_s,
                   DEFAULT_READY_TIMEOUT_S if ready_timeout_s is None else ready_timeout_s)

    @property
    def readiness(self) -> Readiness:
        return Readiness.parse(self.ready)

    @property
    def name(self) -> str:
        return self.argv[0].rsplit("/", 1)[-1] or self.argv[0]

    def describe(self) -> str:
        return " ".join(shlex.quote(a) for a in self.argv)

    def texts(self) -> Tuple[str, ...]:
        """Every text that may hold a `{name}`."""
        return (*self.argv, self.ready)

    def filled(self, fill) -> "ServerSpec":
        return dataclasses.replace(self, argv=tuple(fill(a) for a in self.argv), ready=fill(self.ready))

    def to_json(self) -> dict:
        return {"argv": list(self.argv), "ready": self.ready, "stop_signal": signal.Signals(self.stop_signal).name,
                "stop_grace_s": self.stop_grace_s, "ready_timeout_s": self.ready_timeout_s}

    @classmethod
    def from_json(cls, data: Mapping) -> "ServerSpec":
        return cls(tuple(data["argv"]), data["ready"], parse_signal(data.get("stop_signal", "SIGTERM")),
                   float(data.get("stop_grace_s", DEFAULT_STOP_GRACE_S)),
                   float(data.get("ready_timeout_s", DEFAULT_READY_TIMEOUT_S)))

