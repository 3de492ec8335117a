"""One run of a server under load (`scenc run --server ... -- CLIENT`), and the record of how it went.

A run: the server's port must be free (or its ready file absent); the server starts through the
launcher (runtime/tools/spawn.c in server mode: a process group of its own, its pid reported at
once, dying with scenc) under the allocator and the preload proof; scenc waits until it is ready
(`--ready`), checks the proof (every server process that loaded it named the allocator), runs the
client through the launcher without any preload (its wall time is the run's), and stops the
server: the `--stop` signal to its process group, SIGKILL after the grace period. The server's
wait4 gives its peak RSS, CPU time and page faults; the client's output gives `--metric`.

Each way a run can fail is a failed run with a sentence, the output of the process that failed
kept, and the other runs go on: a port in use, a server that ends or does not get ready in time
(`timeout`), a server under the wrong allocator, a client that fails, a server that dies under
load. Whatever happens, the server is stopped before the run's record is made, and Ctrl-C
(`ServedRunner.interrupt`) stops the client and the server at once.
"""

import os
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Mapping, Optional

from ..record import RunRecord, Status
from ..runner import STDERR_TAIL_CHARS
from ...system.process import signal_name
from .output import echo_output, span_tail, whole_span
from .runner import (LauncherRunner, ProgramOutcome, Proof, launched_metrics, make_program_record,
                     parse_launcher_report, returncode, wait_status)
from .server import Readiness, ServerSpec
from .target import ProgramTarget

_POLL_S = 0.02
_INTERRUPT_GRACE_S = 2.0       # after Ctrl-C a server gets this long to stop before SIGKILL
_DEATH_NOTICE_S = 1.0          # after a failed client, how long the server's end may take to be seen


@dataclass
class ServerOutcome:
    """What happened to the server in one run."""
    pid: Optional[int] = None
    problem: Optional[str] = None        # why the run failed because of the server (None: it did not)
    status: Optional[Status] = None      # and as what
    ready_s: Optional[float] = None      # from the server's start
    client_ended_s: Optional[float] = None
    stopped_by: Optional[str] = None     # "SIGTERM", "SIGTERM, then SIGKILL after 10 s"
    launched: Optional[dict] = None      # the launcher's report of the server
    stdout: str = ""
    stderr: str = ""
    proof: Proof = field(default_factory=Proof)

    @property
    def returncode(self) -> Optional[int]:
        """How the server ended: its exit status, minus the signal that killed it, or None (no report)."""
        return returncode(wait_status(self.launched))

    def ended(self) -> str:
        code = self.returncode
        if code is None:
            return "unknown"
        return f"killed by {signal_name(-code)}" if code < 0 else f"exit status {code}"


@dataclass
class ServedOutcome:
    server: ServerOutcome
    client: Optional[ProgramOutcome]     # None when the client never ran
    started: str
    duration_s: float                    # the whole run: server start to server reaped


def _connects(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _in_use(readiness: Readiness) -> Optional[str]:
    """Why the server's readiness would be true before it starts, or None."""
    if readiness.kind == "tcp" and _connects(readiness.host, readiness.port):
        return (f"port {readiness.port} on {readiness.host} is already in use before the server started "
                f"(another process answers there; a server left from an earlier run?), so it could "
                f"not be told apart from the server's")
    if readiness.kind == "file" and os.path.exists(readiness.path):
        return (f"{readiness.path} exists before the server started, so it cannot tell when the server "
                f"is ready; remove it before each run (--prepare 'rm -f {readiness.path}')")
    return None


class ServedRunner(LauncherRunner):
    """A LauncherRunner that also runs servers: one server at a time, stopped before each run ends."""

    def __init__(self, cc: str = "gcc"):
        super().__init__(cc)
        self._server_out = open(os.path.join(self._scratch.name, "server.out"), "w+b")
        self._server_err = open(os.path.join(self._scratch.name, "server.err"), "w+b")
        self._server_proc: Optional[subprocess.Popen] = None
        self._server_pid: Optional[int] = None
        self._server_spec: Optional[ServerSpec] = None
        self._server_started = 0.0

    # -- signals

    def interrupt(self, signum=None, _frame=None):
        """Ctrl-C: the client is killed (LauncherRunner's), the server is told to stop now; the run
        in progress then stops it for good (SIGKILL after a short grace) and is not saved."""
        super().interrupt(signum, _frame)
        if self._server_pid is not None and self._server_spec is not None:
            self._signal_server(self._server_spec.stop_signal)

    def _signal_server(self, signum: int) -> None:
        try:
            os.killpg(self._server_pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    # -- one run

    def run_served(self, target: ProgramTarget, allocator, base_env: Mapping[str, str], timeout_s: float,
                   memory_limit: Optional[int] = None, server_preload: Optional[Mapping[str, str]] = None,
                   on_ready: Optional[Callable[[], None]] = None,
                   on_client_end: Optional[Callable[[], None]] = None) -> ServedOutcome:
        """One run. `server_preload` (`scenc capture --server`): the server's LD_PRELOAD and variables
        instead of the allocator's and the proof (`allocator` is then not used). `on_ready` is called once the
        server is ready, before its client starts; `on_client_end` once the client has ended, before the
        server is stopped (capture's window marks)."""
        spec = target.server
        started = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        t0 = time.perf_counter()
        server = ServerOutcome()
        client = None
        readiness = spec.readiness
        busy = _in_use(readiness)
        if busy:
            server.problem, server.status = busy, Status.CRASHED
            return ServedOutcome(server, None, started, time.perf_counter() - t0)
        proof_file = Path(self._scratch.name) / "server-proof"
        proof_file.unlink(missing_ok=True)
        if server_preload is None:
            env = self.environment(target, allocator, base_env, proof_file, memory_limit)
        else:
            env = dict(base_env, **target.env_dict, **server_preload)
            env["SCENC_SPAWN_PRELOAD"] = env.pop("LD_PRELOAD")     # the server's, not the launcher's
        env["SCENC_SPAWN_SERVER"] = "1"
        report_r = self._start_server(spec, target, env, server)
        try:
            if server.pid is not None and not self.interrupted:
                self._wait_ready(spec, readiness, server)
            if server.problem is None and not self.interrupted and server_preload is None:
                server.proof = Proof.read(proof_file)
                problem = self._proven.problem(allocator, server.proof)
                if problem:
                    server.problem, server.status = f"the server: {problem}", Status.WRONG_ALLOCATOR
            if server.problem is None and not self.interrupted:
                if on_ready is not None:
                    on_ready()
                client = self._run_client(target, base_env, timeout_s)
                server.client_ended_s = round(time.monotonic() - self._server_started, 6)
                if on_client_end is not None and self._server_proc.poll() is None:
                    on_client_end()
                if client.wait_status != 0 and not self.interrupted:
                    # A client fails as soon as its server's socket closes, before the launcher has reaped
                    # the server: give it a moment, so that the server is blamed when it is the cause.
                    try:
                        self._server_proc.wait(timeout=_DEATH_NOTICE_S)
                    except subprocess.TimeoutExpired:
                        pass
                if self._server_proc.poll() is not None:
                    server.problem, server.status = "the server died under load", Status.CRASHED
        finally:
            self._stop_server(spec, server, report_r)
        code = server.returncode
        if server.problem is None and server.stopped_by and code is not None and code < 0 \
                and -code not in (spec.stop_signal, signal.SIGKILL) and not self.interrupted:
            server.problem, server.status = "the server crashed as it was stopped", Status.CRASHED
        server.proof = Proof.read(proof_file)
        if server.problem is None and server_preload is None and server.pid is not None and not self.interrupted:
            # Processes the server started after it was ready (workers, a fork) proved their allocator too.
            problem = self._proven.problem(allocator, server.proof)
            if problem:
                server.problem, server.status = f"the server: {problem}", Status.WRONG_ALLOCATOR
        spans = whole_span(self._server_out), whole_span(self._server_err)
        server.stdout = span_tail(self._server_out.fileno(), spans[0], STDERR_TAIL_CHARS)
        server.stderr = span_tail(self._server_err.fileno(), spans[1], STDERR_TAIL_CHARS)
        if self.show_output:
            echo_output(self._server_out, sys.stdout, spans[0])
            echo_output(self._server_err, sys.stderr, spans[1])
        return ServedOutcome(server, client, started, time.perf_counter() - t0)

    def _start_server(self, spec: ServerSpec, target: ProgramTarget, env: Mapping[str, str],
                      server: ServerOutcome) -> int:
        """Start the launcher with the server; its pid in `server.pid`; the report pipe's read end."""
        spawn, _ = self.helpers
        for f in (self._server_out, self._server_err):
            f.seek(0)
            f.truncate()
        report_r, report_w = os.pipe()
        self._server_started = time.monotonic()
        try:
            self._server_proc = subprocess.Popen([str(spawn), str(report_w), *spec.argv], env=dict(env),
                                                 cwd=target.cwd, stdin=subprocess.DEVNULL,
                                                 stdout=self._server_out, stderr=self._server_err,
                                                 pass_fds=(report_w,), start_new_session=True)
        finally:
            os.close(report_w)
        self._server_spec = spec
        line = b""
        deadline = time.monotonic() + 10.0
        while not line.endswith(b"\n") and time.monotonic() < deadline:
            ready, _, _ = select.select([report_r], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(report_r, 1)
            if not chunk:
                break
            line += chunk
        text = line.decode("ascii", "replace").strip()
        if text.startswith("pid=") and text[4:].isdigit():
            server.pid = self._server_pid = int(text[4:])
            if self.interrupted:
                self._signal_server(spec.stop_signal)
        else:
            server.problem, server.status = "the scenc launcher did not start the server", Status.CRASHED
        return report_r

    def _wait_ready(self, spec: ServerSpec, readiness: Readiness, server: ServerOutcome) -> None:
        t0 = self._server_started
        while not self.interrupted:
            waited = time.monotonic() - t0
            if self._server_proc.poll() is not None:
                server.problem, server.status = ("the server ended before it was ready "
                                                 f"(waiting for {readiness.describe()})"), Status.CRASHED
                return
            if (readiness.kind == "tcp" and _connects(readiness.host, readiness.port)) or \
                    (readiness.kind == "file" and os.path.exists(readiness.path)) or \
                    (readiness.kind == "after" and waited >= readiness.seconds):
                server.ready_s = round(waited, 6)
                return
            if waited > spec.ready_timeout_s:
                server.problem, server.status = (f"the server was not ready after {spec.ready_timeout_s:g} s "
                                                 f"(waiting for {readiness.describe()}; --ready-timeout); "
                                                 f"stopped"), Status.TIMEOUT
                return
            time.sleep(_POLL_S if readiness.kind != "tcp" else 2 * _POLL_S)

    def _run_client(self, target: ProgramTarget, base_env: Mapping[str, str], timeout_s: float) -> ProgramOutcome:
        """The client through the launcher, without any preload and without the proof."""
        env = dict(base_env)
        env.update(target.env_dict)
        for name in ("LD_PRELOAD", "SCENC_SPAWN_PRELOAD", "SCENC_PROOF_FILE", "SCENC_SPAWN_DATA_LIMIT",
                     "SCENC_SPAWN_SERVER"):
            env.pop(name, None)
        return self.run_with_env(target, env, timeout_s)

    def _stop_server(self, spec: ServerSpec, server: ServerOutcome, report_r: int) -> None:
        """The stop signal to the server's group, SIGKILL after the grace period; its report read."""
        proc = self._server_proc
        try:
            if proc is None:
                return
            if server.pid is None:
                self._kill(proc)           # the launcher with no server: nothing else to stop
                proc.wait()
                return
            if proc.poll() is None:
                self._signal_server(spec.stop_signal)
                server.stopped_by = signal_name(spec.stop_signal)
                grace = min(spec.stop_grace_s, _INTERRUPT_GRACE_S) if self.interrupted else spec.stop_grace_s
                try:
                    proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    self._signal_server(signal.SIGKILL)
                    server.stopped_by += f", then SIGKILL after {grace:g} s"
                    proc.wait()
            # Children the server left behind in its group (a fork that outlived it) go too.
            self._signal_server(signal.SIGKILL)
            report = b""
            while True:
                chunk = os.read(report_r, 4096)
                if not chunk:
                    break
                report += chunk
            lines = report.decode("ascii", "replace").strip().splitlines()
            server.launched = parse_launcher_report(lines[-1]) if lines else None
        finally:
            os.close(report_r)
            self._server_proc = self._server_pid = self._server_spec = None


def make_served_record(config, allocator, round_: int, outcome: ServedOutcome, target: ProgramTarget,
                       timeout_s: float, warmup: bool = False, memory_limit: Optional[int] = None) -> RunRecord:
    """The record of one served run: the client's wall time and figure, the server's memory and CPU."""
    server, client = outcome.server, outcome.client
    if client is not None:
        record = make_program_record(config, allocator, round_, client, target, timeout_s, warmup,
                                     memory_limit, prove=False)
        if not record.ok:
            record.problem = f"the client: {record.problem}"
    else:
        record = RunRecord.new(config, round_, warmup, stderr_tail="", exit_code=None,
                               started=outcome.started, duration_s=outcome.duration_s)
    record.started, record.duration_s = outcome.started, round(outcome.duration_s, 6)
    record.provider = server.proof.lines[0][1] if server.proof.lines else None
    record.proof = server.proof.to_json()
    record.server = {"pid": server.pid, "ready_s": server.ready_s, "stopped_by": server.stopped_by,
                     "ended": server.ended()}
    if server.problem is not None:
        ended = f" ({server.ended()})" if server.launched is not None and server.status is Status.CRASHED else ""
        record.fail(server.status or Status.CRASHED, problem=f"{server.problem}{ended}")
        record.stderr_tail, record.stdout_tail = server.stderr, server.stdout
        record.metrics = {}
        return record
    if server.launched is not None and record.metrics:
        client_figures = launched_metrics(client.launched) if client and client.launched else {}
        record.metrics.update({k: v for k, v in launched_metrics(server.launched).items() if k != "wall_s"})
        record.metrics.update({"ready_s": server.ready_s, "client_user_s": client_figures.get("user_s"),
                               "client_sys_s": client_figures.get("sys_s"),
                               "client_peak_rss_kib": client_figures.get("peak_rss_kib")})
        record.metrics = {k: v for k, v in record.metrics.items() if v is not None}
    elif record.ok:
        record.fail(Status.CRASHED, problem="the launcher gave no report of the server")
    if not record.ok:
        record.server.update(stdout_tail=server.stdout, stderr_tail=server.stderr)
    return record
