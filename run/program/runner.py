"""One run of a real program, its preload proof, and the record of how it ended.

The program is started by a small launcher (runtime/tools/spawn.c, built into the
scenc cache): the launcher forks it, waits with wait4 and reports the wall
time, user and system CPU, peak RSS and page faults of the program and every
process it waited for. Forking from the launcher rather than from Python
keeps the interpreter's own size out of the peak RSS (Linux carries a
process's peak over from the address space it was forked from).

The program's stdout and stderr go to anonymous files, never to the
terminal; their tails are kept in the record of a failed run. Every process
of the program that loads the proof library (runtime/tools/proof.c, preloaded
after the allocator) writes which shared objects serve its malloc and free;
a run in which any of them names another object than the allocator's, or
in which none wrote, is recorded as "wrong-allocator", never under the
allocator's name.

Statuses are those of run/runner.py, plus "no-metric": the program ended well but
its output has no match for `--metric`.
"""

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import List, Mapping, Optional, Tuple

from ..record import RunRecord, Status
from .target import ProgramTarget
from ...system.process import signal_name, wait_and_clear_group
from ..runner import STDERR_TAIL_CHARS, ProgramRunner

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
        proof = cls()
        try:
            text = path.read_text("utf-8", "replace")
        except FileNotFoundError:
            return proof
        for line in text.splitlines():
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


def _tail(f, chars: int) -> str:
    f.seek(0, os.SEEK_END)
    f.seek(max(0, f.tell() - chars * 2))
    return f.read().decode("utf-8", "replace")[-chars:]


def _echo(f, stream) -> None:
    """A run's whole output file onto scenc's own stream (--show-output)."""
    f.seek(0)
    stream.flush()
    out = getattr(stream, "buffer", None)
    while True:
        chunk = f.read(1 << 16)
        if not chunk:
            break
        if out is not None:
            out.write(chunk)
        else:
            stream.write(chunk.decode("utf-8", "replace"))
    if out is not None:
        out.flush()


def _parse_launcher_report(text: str) -> Optional[dict]:
    fields = dict(item.split("=", 1) for item in text.split() if "=" in item)
    try:
        return {k: int(v) for k, v in fields.items()}
    except ValueError:
        return None


class LauncherRunner(ProgramRunner):
    """Runs real programs through the launcher (and, as a ProgramRunner, scenario programs) one at a time.

    Interruption is ProgramRunner's: the launcher is the process `interrupt`
    kills, with its whole process group (the program and its children).
    """

    def __init__(self, cc: str = "gcc"):
        super().__init__()
        self.cc = cc
        self._helpers: Optional[Tuple[Path, Path]] = None
        self._scratch = tempfile.TemporaryDirectory(prefix="scenc-program-")
        # The program's stdout and stderr: two files emptied before each run
        # (making new ones costs more than a short program's 1%).
        self._out = tempfile.TemporaryFile(dir=self._scratch.name)
        self._err = tempfile.TemporaryFile(dir=self._scratch.name)
        self.show_output = False      # --show-output: the program's stdout and stderr on scenc's, after each run

    @property
    def helpers(self) -> Tuple[Path, Path]:
        if self._helpers is None:
            self._helpers = helpers(self.cc)
        return self._helpers

    def environment(self, target: ProgramTarget, allocator, base_env: Mapping[str, str],
                    proof_file: Path, memory_limit: Optional[int]) -> dict:
        """The launcher's environment: the program's, with its preload set aside for the launcher."""
        env = dict(base_env)
        env.update(target.env_dict)
        env = allocator.preload_env(env)
        preload = [p for p in env.pop("LD_PRELOAD", "").replace(":", " ").split() if p]
        env["SCENC_SPAWN_PRELOAD"] = " ".join(preload + [str(self.helpers[1])])
        env["SCENC_PROOF_FILE"] = str(proof_file)
        if memory_limit is not None:
            env["SCENC_SPAWN_DATA_LIMIT"] = str(memory_limit)
        else:
            env.pop("SCENC_SPAWN_DATA_LIMIT", None)
        return env

    def run_program(self, target: ProgramTarget, allocator, base_env: Mapping[str, str],
                    timeout_s: float, memory_limit: Optional[int] = None) -> ProgramOutcome:
        proof_file = Path(self._scratch.name) / "proof"
        proof_file.unlink(missing_ok=True)
        env = self.environment(target, allocator, base_env, proof_file, memory_limit)
        outcome = self.run_with_env(target, env, timeout_s)
        outcome.proof = Proof.read(proof_file)
        return outcome

    def run_with_env(self, target: ProgramTarget, env: Mapping[str, str], timeout_s: float) -> ProgramOutcome:
        """The program through the launcher with the launcher's environment `env` as it is."""
        for f in (self._out, self._err):
            f.seek(0)
            f.truncate()
        stdin = open(target.stdin, "rb") if target.stdin else subprocess.DEVNULL
        try:
            outcome = self._launch(target, env, stdin, timeout_s)
        finally:
            if stdin is not subprocess.DEVNULL:
                stdin.close()
        outcome.stdout = _tail(self._out, STDERR_TAIL_CHARS)
        outcome.stderr = _tail(self._err, STDERR_TAIL_CHARS)
        if target.reported and outcome.launched is not None:
            self._out.seek(0)
            self._err.seek(0)
            outcome.output = (self._out.read() + b"\n" + self._err.read()).decode("utf-8", "replace")
        if self.show_output:
            _echo(self._out, sys.stdout)
            _echo(self._err, sys.stderr)
        return outcome

    def _launch(self, target: ProgramTarget, env: Mapping[str, str], stdin, timeout_s: float) -> ProgramOutcome:
        """Start the launcher with the program, wait, and read the launcher's report."""
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
            launched = _parse_launcher_report(os.read(report_r, 4096).decode("ascii", "replace"))
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


def _metrics(launched: Mapping) -> dict:
    return {"wall_s": launched["wall_ns"] / 1e9, "user_s": launched["user_us"] / 1e6,
            "sys_s": launched["sys_us"] / 1e6, "peak_rss_kib": float(launched["maxrss_kib"]),
            "minflt": float(launched["minflt"]), "majflt": float(launched["majflt"])}


def _proof_problem(allocator, proof: Proof) -> Optional[str]:
    """Why the proof does not show the allocator serving every process's malloc and free."""
    from ...allocators import registry
    if not proof.lines:
        return ("no process of the program reported where malloc came from (the proof library "
                "was not loaded: a static or setuid program, or one that clears LD_PRELOAD), so "
                "the allocator in use is unknown")
    for pid, malloc_from, free_from in proof.lines:
        for what, obj in (("malloc", malloc_from), ("free", free_from)):
            if registry.provider_matches(allocator, obj):
                continue
            if allocator.library is None and obj != "?":
                # The launcher sets LD_PRELOAD itself, so no preload left over: the program brings it.
                return (f"process {pid}: {what} came from {obj}, not from libc.so: the program (or a library "
                        f"it links) brings that allocator itself, so the run labelled {allocator.name!r} would "
                        f"measure {os.path.basename(obj)}; to measure the system malloc, preload a library that "
                        f"forwards to it (docs/servers.md)")
            return f"process {pid}: {what}: " + registry.explain_mismatch(allocator, obj)
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
        record.fail(Status.TIMEOUT, problem=f"no result after {timeout_s:g} s; killed (process group)")
        return _with_stdout(record, outcome)
    if outcome.launched is None:
        record.fail(Status.CRASHED, problem=outcome.problem or "the launcher was killed")
        return _with_stdout(record, outcome)
    launched = outcome.launched
    record.metrics = _metrics(launched)
    record.duration_s = round(launched["wall_ns"] / 1e9, 6)
    status = outcome.wait_status
    under_limit = (f" (under a memory limit of {fmt_bytes(memory_limit)} per run)"
                   if memory_limit is not None else "")
    if launched.get("exec_errno"):
        record.fail(Status.CRASHED, exit_code=127,
                    problem=f"cannot start {target.argv[0]}: {os.strerror(launched['exec_errno'])}")
        return _with_stdout(record, outcome)
    if os.WIFSIGNALED(status):
        name = signal_name(os.WTERMSIG(status))
        record.fail(Status.CRASHED, signal=name, problem=f"killed by {name}{under_limit}")
        return _with_stdout(record, outcome)
    record.exit_code = os.WEXITSTATUS(status)
    if record.exit_code != 0 and not target.ignore_failure:     # --ignore-failure: still a measured run
        record.fail(Status.CRASHED, problem=f"exit status {record.exit_code}")
        return _with_stdout(record, outcome)
    problem = _proof_problem(allocator, outcome.proof) if prove else None
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
