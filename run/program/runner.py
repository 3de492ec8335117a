"""One run of a real program, its preload proof, and the record of how it ended.

The program is started by a small launcher (runtime/tools/spawn.c, built into the
scenc cache): the launcher forks it, waits with wait4 and reports the wall
time, user and system CPU, peak RSS and page faults of the program and every
process it waited for. Forking from the launcher rather than from Python
keeps the interpreter's own size out of the peak RSS (Linux carries a
process's peak over from the address space it was forked from). The launcher
stays up for the whole session (`Launcher`): a run is a request on a pipe and
two fixed binary records back (the program's pid, then its report with the proof's
lines), so scenc spends no fork and exec of its own between runs, and little parsing;
a launcher that dies is started again for the next run.

The program's stdout and stderr go to anonymous files, never to the
terminal; their tails are kept in the record of a failed run. Every process
of the program that loads the proof library (runtime/tools/proof.c, preloaded
after the allocator) writes which shared objects serve its malloc and free;
a run in which any of them names another object than the allocator's, or
in which none wrote, is recorded as "wrong-allocator", never under the
allocator's name (`ProofChecks`: every run's every line, each object compared with
the allocator's library once per session).

Statuses are those of run/runner.py, plus "no-metric": the program ended well but
its output has no match for `--metric`.
"""

import os
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
import weakref
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import List, Mapping, Optional, Tuple

from ..record import RunRecord, Status
from .output import echo_output, read_span, span_tail, whole_span
from .target import ProgramTarget
from ...system.process import IdleWatch, signal_name, wait_and_clear_group
from ..plan import WATCH_EVERY_S
from ..runner import STDERR_TAIL_CHARS, ProgramRunner, stuck_problem

SPAWN_SOURCE = "spawn.c"
PROOF_SOURCE = "proof.c"
_HELPER_FLAGS = ("-O2", "-g", "-std=gnu11")
_PROOF_FLAGS = ("-fPIC", "-shared", "-fvisibility=hidden")


def helpers(cc: str = "gcc") -> Tuple[Path, Path]:
    """(the launcher, the proof library), compiled once per compiler into the scenc cache."""
    from ...compiler.build import TOOLS, WARNINGS, helper_build
    spawn = helper_build(cc, TOOLS / SPAWN_SOURCE, "scenc-spawn", (*_HELPER_FLAGS, *WARNINGS))
    proof = helper_build(cc, TOOLS / PROOF_SOURCE, "libscnproof.so",
                         (*_HELPER_FLAGS, *_PROOF_FLAGS, *WARNINGS), ("-ldl",))
    return spawn, proof


@dataclass
class Proof:
    """What each process of the program said about its malloc and free."""
    lines: List[Tuple[int, str, str]] = field(default_factory=list)   # (pid, malloc's object, free's)

    @classmethod
    def read(cls, path: Path) -> "Proof":
        try:
            return cls.parse(path.read_bytes())
        except FileNotFoundError:
            return cls()

    @classmethod
    def parse(cls, data: bytes) -> "Proof":
        """proof.c's lines, as the launcher sends them after a run's record (or as its file holds them)."""
        proof = cls()
        for line in data.decode("utf-8", "replace").splitlines():
            parts = line.split("\t")
            if len(parts) == 3 and parts[0].isdigit():
                proof.lines.append((int(parts[0]), parts[1], parts[2]))
        return proof

    def objects(self) -> List[str]:
        return sorted({obj for _, m, f in self.lines for obj in (m, f)})

    def to_json(self) -> dict:
        return {"processes": len({pid for pid, _, _ in self.lines}), "objects": self.objects()}


@dataclass
class ProgramOutcome:
    started: str
    duration_s: float                 # scenc's view: launcher started to launcher reaped
    timed_out: bool = False
    launched: Optional[dict] = None   # the launcher's report; None when it was killed or failed
    stdout: str = ""                  # tails
    stderr: str = ""
    output: str = ""                  # stdout and stderr whole, when a figure is taken from them
    proof: Proof = field(default_factory=Proof)
    problem: Optional[str] = None     # the launcher itself failed
    checks: Optional["ProofChecks"] = None   # the session's checks of proofs so far (None: a check of its own)
    stuck: Optional[float] = None     # it timed out sooner: almost no CPU time in its group for this idle limit
    out_span: Tuple[int, int] = (0, 0)    # where its stdout is in the runner's file: (start, bytes)
    err_span: Tuple[int, int] = (0, 0)

    @property
    def wait_status(self) -> Optional[int]:
        return wait_status(self.launched)


def wait_status(launched: Optional[Mapping]) -> Optional[int]:
    """The wait status in the launcher's report (None without a report)."""
    return None if launched is None else launched.get("status")


def returncode(status: Optional[int]) -> Optional[int]:
    """A wait status as Popen says it: the exit status, or minus the signal that killed it."""
    if status is None:
        return None
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def parse_launcher_report(text: str) -> Optional[dict]:
    """The one-run launcher's report line (`scenc-spawn REPORT_FD PROGRAM`: a server and its client)."""
    fields = dict(item.split("=", 1) for item in text.split() if "=" in item)
    try:
        return {k: int(v) for k, v in fields.items()}
    except ValueError:
        return None


class LauncherGone(Exception):
    """The launcher ended (killed, or a bug) before it reported on a run."""


# spawn.c's records to scenc (native byte order): `struct started`, then `struct ended` and the proof's bytes.
_STARTED = struct.Struct("=Ii")
_ENDED = struct.Struct("=Ii6qiI4q")
_STARTED_KIND, _ENDED_KIND = 0x50435353, 0x45435353
_REPORT_KEYS = ("status", "wall_ns", "user_us", "sys_us", "maxrss_kib", "minflt", "majflt", "exec_errno")


class Launcher:
    """runtime/tools/spawn.c serving a session: one request per run (spawn.c says the protocol).

    The launcher runs in a session of its own, without LD_PRELOAD, with the command's stdout, stderr and proof
    files; each program it forks is a session of its own too, whose process group `kill_program` kills."""

    def __init__(self, path: Path, out: int, err: int, proof: int):
        req_r, self._req = os.pipe()
        self._rep, rep_w = os.pipe()
        os.set_inheritable(self._req, False)
        os.set_inheritable(self._rep, False)
        try:
            self.proc = subprocess.Popen(
                [str(path), "--serve", str(req_r), str(rep_w), str(out), str(err), str(proof)],
                pass_fds=(req_r, rep_w, out, err, proof), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, env={"PATH": os.environ.get("PATH", os.defpath)},
                start_new_session=True)
        except BaseException:
            for fd in (self._req, self._rep):
                os.close(fd)
            raise
        finally:
            os.close(req_r)
            os.close(rep_w)
        self._buffer = b""
        self._closer = weakref.finalize(self, Launcher._end, self.proc, [self._req, self._rep])

    @staticmethod
    def request(argv, env: Mapping[str, str], cwd: Optional[str], stdin: Optional[str],
                memory_limit: Optional[int]) -> bytes:
        fields = [cwd or "", stdin or "", "" if memory_limit is None else str(memory_limit), str(len(argv)), *argv,
                  str(len(env)), *(f"{k}={v}" for k, v in env.items())]
        body = b"".join(os.fsencode(f) + b"\0" for f in fields)
        return struct.pack("<I", len(body)) + body

    def send(self, request: bytes) -> None:
        try:
            view = memoryview(request)
            while view:
                view = view[os.write(self._req, view):]
        except (BrokenPipeError, OSError) as exc:
            raise LauncherGone(f"cannot send it the run: {exc.strerror or exc}") from None

    def read(self, size: int, timeout_s: Optional[float]) -> Optional[bytes]:
        """The launcher's next `size` bytes; None when `timeout_s` passed first. LauncherGone at its end."""
        deadline = None
        while len(self._buffer) < size:
            if timeout_s is not None:
                # poll is retried after a signal handler (PEP 475) with the time left.
                if deadline is None:
                    deadline = time.monotonic() + timeout_s
                    left = timeout_s
                else:
                    left = deadline - time.monotonic()
                if left <= 0 or not select.select([self._rep], [], [], left)[0]:
                    return None
            chunk = os.read(self._rep, max(size - len(self._buffer), 4096))
            if not chunk:
                raise LauncherGone(f"it ended with status {self.proc.wait()} without a report")
            self._buffer += chunk
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    def started(self) -> int:
        """The pid of the program forked for the request sent."""
        kind, pid = _STARTED.unpack(self.read(_STARTED.size, None))
        if kind != _STARTED_KIND:
            raise LauncherGone(f"it sent {kind:#x} instead of the program's pid")
        return pid

    def ended(self, timeout_s: Optional[float]) -> Optional[Tuple[dict, Tuple[int, int], Tuple[int, int], bytes]]:
        """(the report of wait4, where the run's stdout and stderr are in their files, the proof's lines) of the
        program, or None when `timeout_s` passed first."""
        data = self.read(_ENDED.size, timeout_s)
        if data is None:
            return None
        kind, *figures, proof_bytes, out_from, out_bytes, err_from, err_bytes = _ENDED.unpack(data)
        if kind != _ENDED_KIND:
            raise LauncherGone(f"it sent {kind:#x} instead of the program's report")
        return (dict(zip(_REPORT_KEYS, figures)), (out_from, out_bytes), (err_from, err_bytes),
                self.read(proof_bytes, None))

    def close(self) -> None:
        self._closer()

    @staticmethod
    def _end(proc: subprocess.Popen, fds: list) -> None:
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            proc.wait(timeout=5)      # the end of its requests ends it
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def kill_program(pid: int) -> None:
    """SIGKILL a program the launcher forked, and its process group (from the moment it has made one)."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class LauncherRunner(ProgramRunner):
    """Runs real programs through the launcher (and, as a ProgramRunner, scenario programs) one at a time.

    Interruption is ProgramRunner's, and for a real program: the program's process group (the program and its
    children) is killed, not the launcher, which goes on to the session's next run.
    """

    def __init__(self, cc: str = "gcc"):
        super().__init__()
        self.cc = cc
        self._helpers: Optional[Tuple[Path, Path]] = None
        self._scratch = tempfile.TemporaryDirectory(prefix="scenc-program-")
        # The program's stdout and stderr: two files the launcher appends each run's to (making new ones costs
        # more than a short program's 1%; spawn.c says when it empties them). Unbuffered: it moves their offset.
        self._out = tempfile.TemporaryFile(dir=self._scratch.name, buffering=0)
        self._err = tempfile.TemporaryFile(dir=self._scratch.name, buffering=0)
        self._proof = Path(self._scratch.name) / "proof"
        self._proof_fd = os.open(self._proof, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        weakref.finalize(self, os.close, self._proof_fd)
        self._launcher: Optional[Launcher] = None
        self._pid: Optional[int] = None          # the program running now
        self._requests: dict = {}                # (program, allocator, memory limit, env) -> (request, env)
        self._last: tuple = (None, None, None, None, b"")   # the last run's (target, allocator, limit, env, request)
        self._proven = ProofChecks()
        self.show_output = False      # --show-output: the program's stdout and stderr on scenc's, after each run

    @property
    def helpers(self) -> Tuple[Path, Path]:
        if self._helpers is None:
            self._helpers = helpers(self.cc)
        return self._helpers

    def served_environment(self, target: ProgramTarget, allocator, base_env: Mapping[str, str],
                           proof_file: Path) -> dict:
        """The program's environment, in the session launcher's request: its own, the allocator's preload
        and the proof library after it."""
        env = dict(base_env)
        env.update(target.env_dict)
        env = allocator.preload_env(env)
        preload = [p for p in env.pop("LD_PRELOAD", "").replace(":", " ").split() if p]
        env["LD_PRELOAD"] = " ".join(preload + [str(self.helpers[1])])
        env["SCENC_PROOF_FILE"] = str(proof_file)
        return env

    def environment(self, target: ProgramTarget, allocator, base_env: Mapping[str, str],
                    proof_file: Path, memory_limit: Optional[int]) -> dict:
        """A launcher's environment for one run (run_with_env): the program's, with its preload set aside
        for the launcher."""
        env = self.served_environment(target, allocator, base_env, proof_file)
        env["SCENC_SPAWN_PRELOAD"] = env.pop("LD_PRELOAD")
        if memory_limit is not None:
            env["SCENC_SPAWN_DATA_LIMIT"] = str(memory_limit)
        else:
            env.pop("SCENC_SPAWN_DATA_LIMIT", None)
        return env

    def _request(self, target: ProgramTarget, allocator, base_env: Mapping[str, str],
                 memory_limit: Optional[int]) -> bytes:
        """The launcher's request for a run, made once per program, allocator, limit and environment."""
        last = self._last
        if last[0] is target and last[1] is allocator and last[2] == memory_limit and last[3] is base_env:
            return last[4]
        # The program by content (a swept program's target is made anew for each run, by for_params); the
        # environment by identity, kept alive with its request so that its id stays its own.
        key = (target, getattr(allocator, "name", None) or id(allocator), memory_limit, id(base_env))
        cached = self._requests.get(key)
        if cached is None or cached[1] is not base_env:
            env = self.served_environment(target, allocator, base_env, self._proof)
            cached = self._requests[key] = (Launcher.request(target.argv, env, target.cwd, target.stdin,
                                                             memory_limit), base_env)
        self._last = (target, allocator, memory_limit, base_env, cached[0])
        return cached[0]

    def run_program(self, target: ProgramTarget, allocator, base_env: Mapping[str, str],
                    timeout_s: float, memory_limit: Optional[int] = None,
                    idle_s: Optional[float] = None) -> ProgramOutcome:
        """One run; ended after `timeout_s`, or sooner when `idle_s` is given and the program's process group
        uses almost no CPU time that long (system/process.py's IdleWatch)."""
        outcome = self._launch(self._request(target, allocator, base_env, memory_limit), timeout_s, idle_s)
        outcome.checks = self._proven
        if target.reported or self.show_output:
            return self._finish(target, outcome)
        return outcome

    def run_with_env(self, target: ProgramTarget, env: Mapping[str, str], timeout_s: float) -> ProgramOutcome:
        """The program through a launcher of its own (one run: a server's client), with the launcher's
        environment `env` as it is (SCENC_SPAWN_* variables: runtime/tools/spawn.c)."""
        for f in (self._out, self._err):
            f.seek(0)
            f.truncate()
        stdin = open(target.stdin, "rb") if target.stdin else subprocess.DEVNULL
        try:
            outcome = self._launch_once(target, env, stdin, timeout_s)
        finally:
            if stdin is not subprocess.DEVNULL:
                stdin.close()
        outcome.out_span, outcome.err_span = whole_span(self._out), whole_span(self._err)
        outcome.stdout = span_tail(self._out.fileno(), outcome.out_span, STDERR_TAIL_CHARS)
        outcome.stderr = span_tail(self._err.fileno(), outcome.err_span, STDERR_TAIL_CHARS)
        return self._finish(target, outcome)

    def _finish(self, target: ProgramTarget, outcome: ProgramOutcome) -> ProgramOutcome:
        """The run's output whole for --metric, and on scenc's own streams with --show-output."""
        if target.reported and outcome.launched is not None:
            outcome.output = (read_span(self._out.fileno(), outcome.out_span) + b"\n"
                              + read_span(self._err.fileno(), outcome.err_span)).decode("utf-8", "replace")
        if self.show_output:
            echo_output(self._out, sys.stdout, outcome.out_span)
            echo_output(self._err, sys.stderr, outcome.err_span)
        return outcome

    def _launch(self, request: bytes, timeout_s: float, idle_s: Optional[float] = None) -> ProgramOutcome:
        """One run through the launcher (started for the first run, and again after one died): the program's pid,
        then its report, or a kill of its process group when `timeout_s` passed first."""
        if self._launcher is None:
            self._launcher = Launcher(self.helpers[0], self._out.fileno(), self._err.fileno(), self._proof_fd)
        launcher = self._launcher
        started = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        t0 = time.perf_counter()
        timed_out, stuck = False, None
        try:
            launcher.send(request)
            self._pid = launcher.started()
            if self.interrupted:
                kill_program(self._pid)
            if idle_s is None:
                ended = launcher.ended(timeout_s)
            else:
                ended, stuck = self._watched(launcher, timeout_s, idle_s)
            if ended is None:
                timed_out = True
                kill_program(self._pid)
                ended = launcher.ended(None)
        except LauncherGone as exc:
            self._drop_launcher()
            outcome = ProgramOutcome(started, time.perf_counter() - t0)
            if not self.interrupted:
                outcome.problem = f"the scenc launcher {self.helpers[0]} failed: {exc}"
            return outcome
        finally:
            self._pid = None
        launched, out_span, err_span, proof = ended
        outcome = ProgramOutcome(started, time.perf_counter() - t0, timed_out, None if timed_out else launched,
                                 span_tail(self._out.fileno(), out_span, STDERR_TAIL_CHARS),
                                 span_tail(self._err.fileno(), err_span, STDERR_TAIL_CHARS), stuck=stuck,
                                 out_span=out_span, err_span=err_span)
        if proof:
            outcome.proof = Proof.parse(proof)
        return outcome

    def _watched(self, launcher: Launcher, timeout_s: float, idle_s: float) -> Tuple[Optional[tuple],
                                                                                    Optional[float]]:
        """(the launcher's report, or None after `timeout_s`; `idle_s` when it was stuck: its process group
        used almost no CPU time that long, read about once a second)."""
        watch = IdleWatch(self._pid, idle_s)
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            ended = launcher.ended(min(left, WATCH_EVERY_S)) if left > 0 else None
            if ended is not None or left <= WATCH_EVERY_S:
                return ended, None
            if watch.stuck():
                return None, idle_s

    def _launch_once(self, target: ProgramTarget, env: Mapping[str, str], stdin, timeout_s: float) -> ProgramOutcome:
        """Start a launcher with the program alone, wait, and read its report."""
        spawn, _ = self.helpers
        started = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        report_r, report_w = os.pipe()
        try:
            t0 = time.perf_counter()
            proc = subprocess.Popen([str(spawn), str(report_w), *target.argv], env=env, cwd=target.cwd,
                                    stdin=stdin, stdout=self._out, stderr=self._err,
                                    pass_fds=(report_w,), start_new_session=True)
            os.close(report_w)
            report_w = -1
            timed_out = self._wait(proc, timeout_s)
            duration = time.perf_counter() - t0
            launched = parse_launcher_report(os.read(report_r, 4096).decode("ascii", "replace"))
        finally:
            os.close(report_r)
            if report_w >= 0:
                os.close(report_w)
        outcome = ProgramOutcome(started, duration, timed_out, None if timed_out else launched)
        if not timed_out and launched is None and not self.interrupted:
            outcome.problem = f"the scenc launcher {spawn} ended with status {proc.returncode} without a report"
        return outcome

    def _wait(self, proc: subprocess.Popen, timeout_s: float) -> bool:
        """Wait for the launcher without polling; True when it timed out. Its group is killed either way
        (wait_and_clear_group): nothing the program started outlives the run."""
        self._current = proc
        try:
            if self.interrupted:
                self._kill(proc)
            return wait_and_clear_group(proc, timeout_s)
        finally:
            self._current = None

    def _drop_launcher(self) -> None:
        if self._launcher is not None:
            launcher, self._launcher = self._launcher, None
            try:
                launcher.proc.kill()
            except OSError:
                pass
            launcher.close()

    def interrupt(self, signum=None, _frame=None):
        super().interrupt(signum, _frame)
        pid = self._pid
        if pid is not None:
            kill_program(pid)

    def close(self) -> None:
        """End the launcher (it also ends by itself when scenc does)."""
        if self._launcher is not None:
            launcher, self._launcher = self._launcher, None
            launcher.close()


def launched_metrics(launched: Mapping) -> dict:
    return {"wall_s": launched["wall_ns"] / 1e9, "user_s": launched["user_us"] / 1e6,
            "sys_s": launched["sys_us"] / 1e6, "peak_rss_kib": float(launched["maxrss_kib"]),
            "minflt": float(launched["minflt"]), "majflt": float(launched["majflt"])}


_UNCHECKED = object()


class ProofChecks:
    """A session's checks of its runs' proofs: every run's proof is checked whole, each process's line in it,
    but whether the objects a line names are the allocator's is worked out once per session.

    Deciding it takes a stat of the allocator's library and of the object, or the object's real path for the
    system malloc (allocators/registry.py's provider_matches): a few directory walks, which were a share of a
    short program's run when made for every run. A line naming the same objects as one checked before under
    the same allocator gets the same answer; a line naming anything else is checked afresh, so a run in which
    any process's malloc or free came from another object is still found, whatever the runs before it said.
    """

    def __init__(self):
        self._verdicts: dict = {}     # (allocator's name and library, malloc's object, free's) -> problem or None

    def problem(self, allocator, proof: Proof) -> Optional[str]:
        """Why the proof does not show the allocator serving every process's malloc and free."""
        if not proof.lines:
            return ("no process of the program reported where malloc came from (the proof library "
                    "was not loaded: a static or setuid program, or one that clears LD_PRELOAD), so "
                    "the allocator in use is unknown")
        which = (getattr(allocator, "name", None), allocator.library)
        for pid, malloc_from, free_from in proof.lines:
            key = (which, malloc_from, free_from)
            verdict = self._verdicts.get(key, _UNCHECKED)
            if verdict is _UNCHECKED:
                verdict = self._verdicts[key] = _objects_problem(allocator, malloc_from, free_from)
            if verdict is not None:
                return f"process {pid}: {verdict}"
        return None


def _objects_problem(allocator, malloc_from: str, free_from: str) -> Optional[str]:
    """Why a process whose malloc and free came from these objects did not run under the allocator."""
    from ...allocators import registry
    for what, obj in (("malloc", malloc_from), ("free", free_from)):
        if registry.provider_matches(allocator, obj):
            continue
        if allocator.library is None and obj != "?":
            # The launcher sets LD_PRELOAD itself, so no preload left over: the program brings it.
            return (f"{what} came from {obj}, not from libc.so: the program (or a library "
                    f"it links) brings that allocator itself, so the run labelled {allocator.name!r} would "
                    f"measure {os.path.basename(obj)}; to measure the system malloc, preload a library that "
                    f"forwards to it (docs/servers.md)")
        return f"{what}: " + registry.explain_mismatch(allocator, obj)
    return None


def make_program_record(config, allocator, round_: int, outcome: ProgramOutcome, target: ProgramTarget,
                        timeout_s: float, warmup: bool = False,
                        memory_limit: Optional[int] = None, prove: bool = True) -> RunRecord:
    """The saved record of one run of a program, its status decided from what happened (`prove`: the
    program ran under the allocator, so its proof must show it; a server's client runs under none)."""
    from ...system.units import fmt_bytes
    record = RunRecord.new(config, round_, warmup, stderr_tail=outcome.stderr, exit_code=None,
                           started=outcome.started, duration_s=outcome.duration_s)
    record.provider = outcome.proof.lines[0][1] if outcome.proof.lines else None
    record.proof = outcome.proof.to_json()
    if outcome.timed_out:
        record.fail(Status.TIMEOUT, problem=stuck_problem(outcome.stuck, timeout_s) if outcome.stuck
                    else f"no result after {timeout_s:g} s; killed (process group)")
        return _with_stdout(record, outcome)
    if outcome.launched is None:
        record.fail(Status.CRASHED, problem=outcome.problem or "the launcher was killed")
        return _with_stdout(record, outcome)
    launched = outcome.launched
    record.metrics = launched_metrics(launched)
    record.duration_s = round(launched["wall_ns"] / 1e9, 6)
    status = outcome.wait_status
    if launched.get("exec_errno"):
        record.fail(Status.CRASHED, exit_code=127,
                    problem=f"cannot start {target.argv[0]}: {os.strerror(launched['exec_errno'])}")
        return _with_stdout(record, outcome)
    if os.WIFSIGNALED(status):
        name = signal_name(os.WTERMSIG(status))
        under_limit = (f" (under a memory limit of {fmt_bytes(memory_limit)} per run)"
                       if memory_limit is not None else "")
        record.fail(Status.CRASHED, signal=name, problem=f"killed by {name}{under_limit}")
        return _with_stdout(record, outcome)
    record.exit_code = os.WEXITSTATUS(status)
    if record.exit_code != 0 and not target.ignore_failure:     # --ignore-failure: still a measured run
        record.fail(Status.CRASHED, problem=f"exit status {record.exit_code}")
        return _with_stdout(record, outcome)
    problem = (outcome.checks or ProofChecks()).problem(allocator, outcome.proof) if prove else None
    if problem:
        record.fail(Status.WRONG_ALLOCATOR, problem=problem)
        return record
    for reported in target.reported:
        value = reported.find(outcome.output)
        if value is None:
            record.fail(Status.NO_METRIC, f"exit status 0 but no match for --metric "
                                          f"{reported.pattern!r} in its output")
            return _with_stdout(record, outcome)
        record.metrics[reported.metric_name] = value
    return record


def _with_stdout(record: RunRecord, outcome: ProgramOutcome) -> RunRecord:
    """A failed run keeps the tail of stdout too: a program often says why there."""
    record.stdout_tail = outcome.stdout
    return record
