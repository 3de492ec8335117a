"""Capture a program's allocator calls with the LD_PRELOAD tracer (runtime/tracer/tracer.c): `--method preload`.

    result = capture_preload(["./server", "--once"], "server.trace")
    result.ok, result.warnings, result.counts, result.threads

trace/native.py builds the tracer into the scenc cache; trace/tracerlog.py reads its log. What the tracer
records, what it cannot trace (static or setuid programs, a program with its own allocator), what a
killed, exec'ing or forking program leaves, and what it costs: docs/capture.md, "--method preload".
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence

from ...system.elf import inspect as inspect_elf
from ...system.process import signal_name
from ...system.process import run_in_own_session
from . import CaptureError, locate
from ..ltrace import TraceFormatError
from ..tracerlog import PreloadLog, PreloadLogInfo, missing_sentence, stop_sentence
from ..native import tracer_library

__all__ = ["capture_preload", "PreloadCapture"]


# --------------------------------------------------------------------------- capture
@dataclass
class PreloadCapture:
    path: Path                      # the log
    info: Optional[PreloadLogInfo]  # what the log holds (None when there is none, or it is unreadable)
    warnings: list                  # plain sentences: what went wrong or looks wrong, and what to do
    tracee_status: Optional[int]    # exit status; negative: killed by that signal; None: timeout
    signal: Optional[str]           # 'SIGSEGV' when the program was killed by a signal
    command: list                   # the program's argv as run
    environment: dict               # the variables the capture set: LD_PRELOAD, SCENC_TRACE_OUT
    library: Path                   # the tracer
    child_logs: list                # logs of forked or exec'ed processes (OUT.<pid>), not merged
    wall_s: float                   # the program's run time under the tracer
    stderr: str = ""                # the last 8 KB of the program's stderr
    method: str = "preload"

    @property
    def counts(self) -> dict:
        """Calls per AllocEvent kind."""
        return dict(self.info.calls_by_kind) if self.info is not None else {}

    @property
    def events(self) -> int:
        return self.info.records if self.info is not None else 0

    @property
    def threads(self) -> int:
        return len(self.info.threads) if self.info is not None else 0

    @property
    def complete(self) -> bool:
        """Every call of the process is in the log: it ended normally (end mark), no sequence number is missing."""
        return (self.info is not None and self.info.ended and self.info.missing == 0
                and self.tracee_status is not None and self.tracee_status >= 0)

    @property
    def ok(self) -> bool:
        """A complete capture that recorded allocator calls."""
        return self.complete and self.events > 0


def _resolve_program(argv: Sequence[str], cwd) -> tuple:
    """(path of argv[0], the ELF file that will run it: the interpreter of a '#!' script)."""
    prog = argv[0]
    path, real = locate(argv, cwd)
    for _ in range(4):
        elf = inspect_elf(real)
        if not elf.shebang:
            break
        interp = elf.shebang[0]
        found = interp if os.sep in interp else shutil.which(interp)
        if found is None or not os.path.exists(found):
            raise CaptureError(f"{prog}: its interpreter {interp} (from '#!') was not found")
        real = os.path.realpath(found)
    if not elf.is_elf:
        raise CaptureError(f"{prog} ({real}) is not an ELF executable (nor a '#!' script): nothing to run the "
                           f"tracer in")
    if not elf.dynamic:
        raise CaptureError(f"{prog} ({real}) is statically linked (no dynamic section): an LD_PRELOAD tracer cannot "
                           f"interpose its malloc (nor can ltrace). Rebuild it without -static")
    bits = elf.bits
    if bits != 8 * struct.calcsize("P"):
        raise CaptureError(f"{prog} ({real}) is a {bits}-bit program; the tracer is built for this machine's "
                           f"{8 * struct.calcsize('P')}-bit ABI and the loader would refuse it")
    mode = os.stat(real).st_mode
    if mode & (stat.S_ISUID | stat.S_ISGID):
        raise CaptureError(f"{prog} ({real}) is setuid/setgid: the dynamic loader ignores LD_PRELOAD for it. "
                           f"Trace a copy without the setuid bit")
    return path, elf


def _child_logs(out: Path) -> list:
    pattern = re.compile(re.escape(out.name) + r"\.\d+(\.\d+)?")
    return sorted(p for p in out.parent.glob(out.name + ".*") if pattern.fullmatch(p.name))


def capture_preload(argv: Sequence[str], out_path, env: Optional[Mapping[str, str]] = None,
                    timeout: Optional[float] = None, *, cc: str = "gcc", cwd=None, stdin=subprocess.DEVNULL,
                    stdout=None) -> PreloadCapture:
    """Run ``argv`` with the tracer preloaded, logging to ``out_path``; index the log and check it.

    env: the program's environment (default: this process's). An LD_PRELOAD in
    it is kept *after* the tracer, so ``env={"LD_PRELOAD": "libjemalloc.so.2"}``
    traces the program's calls to jemalloc. stdout: where the program's output
    goes (default: inherited); its stderr is collected into ``stderr``.

    Raises CaptureError when tracing is impossible (program not found, not ELF,
    statically linked, setuid) and BuildError when the tracer does not compile;
    otherwise returns a PreloadCapture whose ``warnings`` say what went wrong.
    """
    argv = [str(a) for a in argv]
    if not argv:
        raise ValueError("empty command")
    path, _elf = _resolve_program(argv, cwd)
    library = tracer_library(cc)
    if any(c in str(library) for c in " :"):
        raise CaptureError(f"the tracer's path {library} contains a space or a colon, which LD_PRELOAD cannot "
                           f"carry; set SCENC_CACHE to a folder without them")
    out = Path(out_path).absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    for old in [out] + _child_logs(out):     # the tracer never writes over a log (O_EXCL)
        if old.exists():
            old.unlink()
    run_env = dict(os.environ if env is None else env)
    preload = " ".join(p for p in [str(library), run_env.get("LD_PRELOAD", "").strip()] if p)
    added = {"LD_PRELOAD": preload, "SCENC_TRACE_OUT": str(out)}
    run_env.update(added)
    status, wall, stderr = run_in_own_session(argv, timeout, executable=path, cwd=cwd, env=run_env, stdin=stdin,
                                              stdout=stdout)
    result = PreloadCapture(out, None, [], status, None, argv, added, library, _child_logs(out), wall, stderr)
    if status is not None and status < 0:
        result.signal = signal_name(-status)
    _check(result, timeout)
    return result


def _check(r: PreloadCapture, timeout) -> None:
    w = r.warnings
    if r.tracee_status is None:
        w.append(f"the program was stopped after {timeout} s (timeout): the calls it made last are not in the log")
    elif r.signal:
        w.append(f"the program was killed by {r.signal}: the calls still buffered in its threads (a 32 KiB chunk, "
                 f"thousands of calls, per thread) are not in the log; if it also dies without the tracer, the crash "
                 f"is its own")
    elif r.tracee_status:
        w.append(f"the program exited with status {r.tracee_status} (the log is complete; the program may have "
                 f"failed before doing its usual work)")
    if not r.path.exists():
        why = ("the loader refused the tracer: " + next(line for line in r.stderr.splitlines() if "ld.so" in line)
               if "ld.so" in r.stderr else "the program did not start, or it exec'ed another program at once")
        w.append(f"no log was written at {r.path}: {why}")
    else:
        try:
            r.info = PreloadLog(r.path).info
        except TraceFormatError as e:
            w.append(f"the log is not readable: {e}")
    info = r.info
    if info is not None:
        if info.missing:
            w.append(f"{info.missing} call(s) are missing from the log ({missing_sentence(info)}): the process lost "
                     f"buffered records (killed, or it called exit from a signal handler) or threads were inside an "
                     f"allocator call when it exited")
        if not info.ended and info.stopped_at is None and r.tracee_status is not None and r.tracee_status >= 0:
            w.append("the log has no end mark: the process left without running the tracer's exit code (it was "
                     "killed by SIGKILL from outside, or a process image it exec'ed without the tracer); calls made "
                     "at the very end may be missing")
        if info.stopped_at is not None:
            w.append(f"{stop_sentence(info)}; the records before it are read (the disk filled up, or the log was "
                     f"cut or damaged after the capture)")
        if info.records == 0:
            w.append("the capture saw no allocator call: the program never allocates, or it has its own allocator "
                     "linked in (Go, a statically linked Rust/C++ allocator), which LD_PRELOAD cannot intercept")
    if r.child_logs:
        mine = str(info.pid) if info is not None else None
        before_exec = [p for p in r.child_logs if p.name[len(r.path.name) + 1:].split(".")[0] == mine]
        others = [p for p in r.child_logs if p not in before_exec]
        if before_exec:
            w.append(f"the program exec'ed another program (a wrapper such as env, a shell or a pyenv shim): the log "
                     f"holds the last program of process {mine}; the calls made before the exec are in "
                     f"{_names(before_exec)}")
        if others:
            w.append(f"{len(others)} child process(es) logged their own calls to {_names(others)}; they are not "
                     f"part of this capture (capture a child directly to replay it)")


def _names(paths: list) -> str:
    return ", ".join(p.name for p in paths[:4]) + (f" and {len(paths) - 4} more" if len(paths) > 4 else "")
