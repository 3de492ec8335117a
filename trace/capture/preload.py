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
from ...system.process import process_name, run_in_own_session, signal_name
from . import CaptureError, locate
from . import shim as shims
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
    followed: Optional[shims.Followed] = None   # the launched process exec'ed: a shim, followed (shim.py)
    script: Optional[list] = None   # the '#!' line of argv[0] when it is a script
    last_name: Optional[str] = None  # the kernel's name of the process when it ended (None: not seen end)
    executable: str = ""            # argv[0]'s file, as run
    holds_program: bool = True      # False: the trace holds a shell script's calls, not the program it ran

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
        """A complete capture that recorded allocator calls, of the program (not of a shell that ran it)."""
        return self.complete and self.events > 0 and self.holds_program


def _resolve_program(argv: Sequence[str], cwd) -> tuple:
    """(path of argv[0], the ELF file that will run it: the interpreter of a '#!' script, argv[0]'s '#!' line)."""
    prog = argv[0]
    path, real = locate(argv, cwd)
    script = None
    for _ in range(4):
        elf = inspect_elf(real)
        if not elf.shebang:
            break
        script = script or elf.shebang
        interp = elf.shebang[0]
        found = interp if os.sep in interp else shutil.which(interp)
        if found is None or not os.path.exists(found):
            raise CaptureError(f"{prog}: its interpreter {interp} (from '#!') was not found")
        real = os.path.realpath(found)
    if not elf.is_elf:
        raise CaptureError(f"{prog} ({real}) is not an ELF executable (nor a '#!' script): nothing to run the "
                           f"tracer in")
    if not elf.dynamic:
        raise CaptureError(f"{prog} ({real}) is statically linked (no dynamic section): the preload tracer (the "
                           f"default --method) cannot trace a static program, since the loader that honours "
                           f"LD_PRELOAD never runs for it, and --method ltrace cannot either. What works: rebuild it "
                           f"dynamically linked (without -static) and capture that build")
    bits = elf.bits
    if bits != 8 * struct.calcsize("P"):
        raise CaptureError(f"{prog} ({real}) is a {bits}-bit program; the tracer is built for this machine's "
                           f"{8 * struct.calcsize('P')}-bit ABI and the loader would refuse it")
    mode = os.stat(real).st_mode
    if mode & (stat.S_ISUID | stat.S_ISGID):
        raise CaptureError(f"{prog} ({real}) is setuid/setgid: the dynamic loader ignores LD_PRELOAD for it. "
                           f"Trace a copy without the setuid bit")
    return path, elf, script


def _child_logs(out: Path) -> list:
    pattern = re.compile(re.escape(out.name) + r"\.\d+(\.\d+)?")
    return sorted(p for p in out.parent.glob(out.name + ".*") if pattern.fullmatch(p.name))


def capture_preload(argv: Sequence[str], out_path, env: Optional[Mapping[str, str]] = None,
                    timeout: Optional[float] = None, *, cc: str = "gcc", cwd=None, stdin=subprocess.DEVNULL,
                    stdout=None, keep_shim_logs: bool = False) -> PreloadCapture:
    """Run ``argv`` with the tracer preloaded, logging to ``out_path``; index the log and check it.

    env: the program's environment (default: this process's). An LD_PRELOAD in
    it is kept *after* the tracer, so ``env={"LD_PRELOAD": "libjemalloc.so.2"}``
    traces the program's calls to jemalloc. stdout: where the program's output
    goes (default: inherited); its stderr is collected into ``stderr``.
    A launched process that exec's (a shim) is followed to its last program
    (shim.py; ``followed`` says so); the logs of the shim's own processes are
    deleted, unless keep_shim_logs.

    Raises CaptureError when tracing is impossible (program not found, not ELF,
    statically linked, setuid) and BuildError when the tracer does not compile;
    otherwise returns a PreloadCapture whose ``warnings`` say what went wrong.
    """
    argv = [str(a) for a in argv]
    if not argv:
        raise ValueError("empty command")
    path, library, out, run_env, added, script = prepare_preload(argv, out_path, env, cc=cc, cwd=cwd)
    names = []
    status, wall, stderr = run_in_own_session(argv, timeout, executable=path, cwd=cwd, env=run_env, stdin=stdin,
                                              stdout=stdout, on_exit=lambda pid: names.append(process_name(pid)))
    return checked_capture(out, argv, added, library, status, wall, stderr, timeout, script=script,
                           last_name=names[0] if names else None, executable=path, keep_shim_logs=keep_shim_logs)


def prepare_preload(argv: Sequence[str], out_path, env: Optional[Mapping[str, str]] = None, *, cc: str = "gcc",
                    cwd=None) -> tuple:
    """(the program's path, the tracer, the log's path, the program's environment, the variables added to it,
    its '#!' line or None): the program checked, the tracer built, old logs at the same path removed."""
    path, _elf, script = _resolve_program(argv, cwd)
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
    return path, library, out, run_env, added, script


def checked_capture(out: Path, argv: Sequence[str], added: Mapping[str, str], library: Path,
                    status: Optional[int], wall: float, stderr: str, timeout, *, script=None, last_name=None,
                    executable: str = "", keep_shim_logs: bool = False) -> PreloadCapture:
    """The capture of a program that ran (`status`: Popen's return code, None after a timeout), checked."""
    result = PreloadCapture(out, None, [], status, None, list(argv), dict(added), library, _child_logs(out), wall,
                            stderr, script=script, last_name=last_name, executable=executable)
    if status is not None and status < 0:
        result.signal = signal_name(-status)
    _follow(result, keep_shim_logs)
    _check(result, timeout)
    return result


def _follow(r: PreloadCapture, keep: bool) -> None:
    """The rule of shim.py: the shim's logs left out, the program's children's kept; the shim named."""
    images, helpers, children = shims.split(r.path, r.child_logs)
    if not images:
        return
    r.followed = shims.Followed(r.command[0], "#!" + " ".join(r.script) if r.script else None, r.last_name,
                                len(images), shims.processes(helpers), images + helpers if keep else [])
    if not keep:
        for log in images + helpers:
            log.unlink()
    r.child_logs = children


def _check(r: PreloadCapture, timeout) -> None:
    w = r.warnings
    if r.tracee_status is None:
        w.append(f"the program was stopped after {timeout} s (timeout): the calls it made last are not in the log")
    elif r.signal:
        w.append(f"the program was killed by {r.signal}: the calls still buffered in its threads (a 128 KiB chunk, "
                 f"thousands of calls, per thread) are not in the log; if it also dies without the tracer, the crash "
                 f"is its own")
    elif r.tracee_status:
        w.append(f"the program exited with status {r.tracee_status} (the log is complete; the program may have "
                 f"failed before doing its usual work)")
    if r.tracee_status != 0 and stderr_tail(r.stderr):
        w.append("the program's stderr ended with:\n" + stderr_tail(r.stderr))
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
                     f"buffered records (killed, or it called exit from a signal handler) or a thread stayed inside "
                     f"an allocator call for over a second while the process exited")
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
    if not _which_program(r) and r.child_logs:
        w.append(f"{len(r.child_logs)} child process(es) logged their own calls to {_names(r.child_logs)}; "
                 f"they are not part of this capture (capture a child directly to replay it)")


def stderr_tail(stderr: str, lines: int = 6) -> str:
    """The last lines of a failed program's stderr, indented: capture keeps the program's stderr off the
    terminal (its own summary goes there), so a program that fails must still be heard."""
    kept = [line for line in stderr.splitlines() if line.strip()][-lines:]
    return "\n".join("    | " + line[:300] for line in kept)


def _which_program(r: PreloadCapture) -> bool:
    """A launched process that did not exec, or whose exec the tracer could not follow: whose calls the trace
    holds. A shell never renames itself: a shell script's process that ended under another name exec'ed a
    program the tracer did not see, and one that did not exec left its program in a child. True when the
    warning named the child logs."""
    if r.followed is not None:
        return False
    shell = shims.is_shell_script(r.script)
    given = shims.kernel_name(r.executable)
    prog = r.command[0]
    if r.last_name and r.last_name != given:
        r.warnings.append(f"the process ended as {r.last_name}, not {given}: if {prog} exec'ed {r.last_name}, the "
                          f"tracer could not follow it (a statically linked or setuid program, or LD_PRELOAD taken "
                          f"out of its environment), and the trace holds {prog}'s calls, not {r.last_name}'s; "
                          f"capture {r.last_name} directly")
        r.holds_program = not shell
        return False
    if shell and r.last_name:
        children = f"; its child processes' logs are {_names(r.child_logs)}" if r.child_logs else ""
        r.warnings.append(f"{prog} is a shell script ('#!{' '.join(r.script)}') that ran its programs as child "
                          f"processes, without exec: the trace holds the shell's own calls{children}. Capture "
                          f"the program itself, or end the script with `exec PROGRAM \"$@\"`, which scenc follows")
        r.holds_program = False
        return True
    return False


def _names(paths: list) -> str:
    return ", ".join(p.name for p in paths[:4]) + (f" and {len(paths) - 4} more" if len(paths) > 4 else "")
