"""Capture a program's allocator calls with ltrace 0.7.3, and say plainly when it failed.

    result = capture(["./server", "--once"], "server.log")          # mode='auto': -x, then -e
    result.ok, result.warnings, result.report, result.stats

What ltrace's -e and -x see and miss, how they crash threaded programs and what they cost, as checked
on Debian 12 (glibc 2.36, gcc 12) with real programs (tests/test_trace_capture.py,
tests/fixtures/trace/make_logs.sh): docs/capture.md, "--method ltrace". trace/ltrace/ reads the log.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from ...system.elf import ElfInfo, inspect as inspect_elf
from ...system.process import run_in_own_session, signal_name
from ..ltrace import ParseReport, TraceFormatError, parse_file
from ..profile import TraceStats
from . import CaptureError, locate

__all__ = ["capture", "CaptureResult", "DEFAULT_FUNCTIONS"]

C_FUNCTIONS = ("malloc", "calloc", "realloc", "reallocarray", "free", "posix_memalign", "aligned_alloc",
               "memalign", "valloc", "pvalloc")
CXX_FUNCTIONS = ("_Znwm", "_Znam", "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm", "_ZnwmRKSt9nothrow_t",
                 "_ZnamRKSt9nothrow_t", "_ZnwmSt11align_val_t", "_ZnamSt11align_val_t", "_ZdlPvSt11align_val_t",
                 "_ZdaPvSt11align_val_t", "_ZdlPvmSt11align_val_t", "_ZdaPvmSt11align_val_t")
#: What capture() asks ltrace to trace by default: the allocator, and pthread_create, whose caller is the next
#: new thread's creator (trace/ltrace/threads.py). Without it an ltrace log does not say who created a thread
#: (no clone without -S), and the thread that printed the line before stood for its creator:
#: bench/programs/thread_churn.c's worker k for main, which then created worker k + 1 in the replay where
#: worker k had got to in the capture, not where main had.
DEFAULT_FUNCTIONS = C_FUNCTIONS + CXX_FUNCTIONS + ("pthread_create",)


# --------------------------------------------------------------------------- result
@dataclass
class CaptureResult:
    path: Path                          # the ltrace log
    report: Optional[ParseReport]       # parse report of the log (None if it could not be read)
    stats: Optional[TraceStats]
    warnings: list                      # plain sentences: what went wrong or looks wrong, and what to do
    ltrace_status: Optional[int]        # ltrace's exit status (negative: killed by that signal; None: timeout)
    tracee_status: Optional[int]        # the program's exit status, from the log's '+++ exited' line
    mode: str                           # 'x' (-L -x) or 'e' (-e) for the capture kept
    command: list                       # the ltrace command line of the capture kept
    attempts: int                       # ltrace runs made
    crashed: bool                       # the capture kept is broken (crash, lost breakpoints, truncated)
    ltrace_stderr: str = ""             # the last 8 KB of ltrace's (and the program's) stderr

    @property
    def events(self) -> int:
        return self.stats.ops if self.stats is not None else 0

    @property
    def ok(self) -> bool:
        """A complete capture that recorded allocator calls."""
        return not self.crashed and self.report is not None and not self.report.incomplete and self.events > 0


def _interpreted(argv: list, cwd, warnings: list, depth: int = 0) -> tuple:
    """(argv, ElfInfo of the real executable) -- follows '#!' lines, which ltrace cannot trace."""
    path, real = locate(argv, cwd)
    elf = inspect_elf(real)
    if elf.shebang and depth < 4:
        interp = elf.shebang
        new = interp + [path] + list(argv[1:])
        if os.path.basename(interp[0]) == "env" and len(interp) > 1:
            new = interp[1:] + [path] + list(argv[1:])
        warnings.append(f"{argv[0]} is a script ('#!{' '.join(interp)}'), which ltrace cannot trace; tracing its "
                        f"interpreter instead: {' '.join(new[:len(new) - len(argv) + 1])} ... (if the script execs "
                        f"another program, that program's calls are mixed into the same thread of the log)")
        return _interpreted(new, cwd, warnings, depth + 1)
    if not elf.is_elf:
        raise CaptureError(f"{argv[0]} ({real}) is not an ELF executable; ltrace can only trace ELF programs")
    if not elf.dynamic:
        raise CaptureError(f"{argv[0]} ({real}) is statically linked (no dynamic section): ltrace cannot trace a "
                           f"static program, nor can the preload tracer (LD_PRELOAD needs the dynamic loader). What "
                           f"works: rebuild it dynamically linked (without -static) and capture that build")
    return [path] + list(argv[1:]), elf


# --------------------------------------------------------------------------- capture
def capture(argv: Sequence[str], out_path, method: str = "ltrace", *, mode: str = "auto", retries: int = 0,
            functions: Sequence[str] = DEFAULT_FUNCTIONS, follow_threads: bool = True, timeout: Optional[float] = None,
            cwd=None, env=None, stdin=subprocess.DEVNULL, stdout=None, ltrace: str = "ltrace",
            extra_args: Sequence[str] = ()) -> CaptureResult:
    """Run ``argv`` under ltrace, writing the log to ``out_path``; parse and check the log.

    mode: 'x' (``-L -x``: sees every call, but crashes most multithreaded programs),
    'e' (``-e``: PLT calls only, more robust) or 'auto' ('x', then 'e' if every 'x'
    attempt crashed).  retries: extra attempts per mode when a capture crashed.
    stdout: where the program's output goes (default: inherited); ltrace's own
    messages and the program's stderr are collected into ``ltrace_stderr``.

    Raises CaptureError when tracing is impossible (program not found, not ELF,
    statically linked, ltrace missing); otherwise returns a CaptureResult whose
    ``warnings`` say what went wrong and what to try.
    """
    if method != "ltrace":
        raise CaptureError(f"capture method {method!r}: this function runs only 'ltrace'; the LD_PRELOAD "
                           f"tracer is trace/capture/preload.py's capture_preload")
    if mode not in ("auto", "x", "e"):
        raise ValueError(f"mode must be 'auto', 'x' or 'e', not {mode!r}")
    if not argv:
        raise ValueError("empty command")
    ltrace_path = shutil.which(ltrace)
    if ltrace_path is None:
        raise CaptureError(f"{ltrace}: not installed (Debian: apt-get install ltrace)")
    out_path = Path(out_path)
    warnings: list = []
    argv, elf = _interpreted(list(argv), cwd, warnings)
    modes = ["x", "e"] if mode == "auto" else [mode]
    attempts = 0
    result = None
    for m in modes:
        for _attempt in range(1 + max(0, retries)):
            attempts += 1
            result = _run_once(argv, out_path, m, functions, follow_threads, timeout, cwd, env, stdin, stdout,
                               ltrace_path, extra_args)
            if not result.crashed:
                break
            warnings.append(f"attempt {attempts} (mode {m}): {_crash_sentence(result)}")
        if not result.crashed:
            break
        if m == "x" and "e" in modes:
            warnings.append("every -x capture crashed (ltrace 0.7.3 -x and threads do not mix); "
                            "falling back to -e, which misses calls made from inside libc")
    result.attempts = attempts
    result.warnings = warnings + result.warnings
    if result.crashed:
        result.warnings.append("the log is incomplete: figures from it cover only what was seen before the crash. "
                               "Retry (retries=N), reduce the workload or the number of threads, try the other mode"
                               + ("" if mode == "auto" else f" (mode={'e' if mode == 'x' else 'x'})")
                               + "; if the program also crashes without ltrace, the crash is the program's own")
    if not result.crashed:
        result.warnings += _suspicions(result, elf)
    return result


def _run_once(argv, out_path: Path, mode: str, functions, follow_threads, timeout, cwd, env, stdin, stdout,
              ltrace_path, extra_args) -> CaptureResult:
    pattern = "+".join(functions)
    cmd = [ltrace_path]
    if follow_threads:
        cmd.append("-f")
    cmd += ["-tt", "-T"]
    cmd += ["-L", "-x", pattern] if mode == "x" else ["-e", pattern]
    cmd += list(extra_args) + ["-o", str(out_path), "--"] + list(argv)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    if out_path.exists():
        out_path.unlink()
    status, _seconds, stderr = run_in_own_session(cmd, timeout, cwd=cwd, env=env, stdin=stdin, stdout=stdout)
    warnings = []
    report = stats = None
    if out_path.exists():
        try:
            events = parse_file(out_path)
            stats = TraceStats(events.report).consume(events)
            report = events.report
        except TraceFormatError as e:
            warnings.append(f"the log is not readable as an ltrace log: {e}")
    crashed = (status != 0 or report is None or report.crashed or report.truncated or not report.exits
               or report.pending_at_end > 0 or "unexpected breakpoint" in stderr)
    if status is None:
        warnings.append(f"the capture was stopped after {timeout} s (timeout); ltrace makes programs 100-1000x "
                        f"slower")
    result = CaptureResult(out_path, report, stats, warnings, status,
                           report.exit_status if report is not None else None, mode, cmd, 1, crashed, stderr)
    return result


def _crash_sentence(r: CaptureResult) -> str:
    rep = r.report
    parts = []
    if r.ltrace_status is None:
        parts.append("timed out")
    elif r.ltrace_status < 0 or r.ltrace_status in (128 + signal.SIGSEGV, 128 + signal.SIGABRT):
        sig = -r.ltrace_status if r.ltrace_status < 0 else r.ltrace_status - 128
        parts.append(f"ltrace itself died of {signal_name(sig)}")
        assertion = [line for line in r.ltrace_stderr.splitlines() if "Assertion" in line]
        if assertion:
            parts.append(f"its assertion failed: {assertion[-1].strip()}")
        if "vfork" in r.ltrace_stderr:
            parts.append("ltrace 0.7.3 cannot follow a vfork (shells, system(), posix_spawn): trace the child "
                         "program directly")
    elif r.ltrace_status != 0:
        first = r.ltrace_stderr.strip().splitlines()[-1] if r.ltrace_stderr.strip() else "no message"
        parts.append(f"ltrace failed (exit status {r.ltrace_status}: {first})")
    if rep is not None:
        if rep.killed_by:
            parts.append(f"the program was killed by {rep.killed_by} under ltrace")
        if rep.count("unexpected-breakpoint"):
            parts.append(f"ltrace lost {rep.count('unexpected-breakpoint')} breakpoint(s) "
                         f"('unexpected breakpoint', line {rep.first_lines('unexpected-breakpoint')[0]})")
        if rep.pending_at_end:
            parts.append(f"{rep.pending_at_end} call(s) never returned")
        if rep.truncated:
            parts.append("the log's last line is cut off")
        if not rep.exits and r.ltrace_status == 0:
            parts.append("the log has no exit line")
    elif r.ltrace_status == 0:
        parts.append("no log was written")
    return "; ".join(parts) or "the capture is incomplete"


def _suspicions(r: CaptureResult, elf: ElfInfo) -> list:
    """Warnings about a capture that worked but saw nothing or suspiciously little."""
    out = []
    stats, rep = r.stats, r.report
    if stats is None or rep is None:
        return out
    allocs = sum(n for k, n in stats.calls_by_kind.items()
                 if k not in ("free", "operator_delete", "operator_delete_array"))
    frees = stats.ops - allocs
    c_funcs = [f for f in ("malloc", "free", "calloc", "realloc") if f in elf.got_symbols]
    if r.mode == "e":
        why = []
        if c_funcs:
            why.append(f"the program reaches {', '.join(c_funcs)} only through the GOT, without a PLT slot (it takes "
                       f"their address, or it was built with -fno-plt), so -e breakpoints on them never fire")
        elif not any(f in elf.plt_symbols for f in C_FUNCTIONS):
            why.append("the program itself calls no allocator function through its PLT (it allocates from inside "
                       "other libraries, or it does not allocate)")
        if elf.bind_now and stats.ops == 0 and not why:
            why.append("it is linked with -z now (BIND_NOW), which some ltrace builds cannot follow (this one can)")
        if rep.count("libc-internal-plt") and stats.ops == 0:
            why.append(f"its only lines ({rep.count('libc-internal-plt')}) are libc.so.6-> entries, which ltrace "
                       f"mislabels and are not allocator calls")
        advice = ("capture with mode='x' (-L -x breakpoints on the functions themselves), or with an LD_PRELOAD "
                  "tracer (method='preload')")
        if stats.ops == 0:
            out.append("the capture saw no allocator call. " + ("Why: " + "; ".join(why) + ". " if why else
                       "The program may not allocate at all, or only from inside libc, which -e cannot see. ")
                       + "To see them: " + advice + ".")
        elif allocs >= 10 and frees == 0:
            out.append(f"the capture saw {allocs} allocations but no free: "
                       + ("; ".join(why) + ". " if why else "free may be called from inside libc or through a pointer "
                          "(its address taken), which -e cannot see. ")
                       + "To see them: " + advice + ".")
        elif c_funcs:
            out.append(f"the program reaches {', '.join(c_funcs)} only through the GOT (their address is taken, or "
                       f"-fno-plt): those calls are missing from this -e capture; {advice}.")
    else:
        if stats.ops == 0:
            out.append("the capture saw no allocator call although -x traces malloc/free in every library: the "
                       "program links its own allocator statically, or never allocates")
        elif allocs >= 10 and frees == 0:
            out.append(f"the capture saw {allocs} allocations but no free: the program exits without freeing")
    if stats.cross_thread_frees:
        # ltrace's lockstep changes how many objects are in flight between threads: bench/programs/prodcons.c
        # peaks far lower under ltrace than under the preload tracer, and the replay of the ltrace log named
        # the wrong fastest and fattest allocator where the preload capture's replay named the program's
        # (docs/capture.md, "--method ltrace").
        out.append(f"{stats.cross_thread_frees} objects were freed by another thread than their own: ltrace stops "
                   f"the program at every call, so its threads ran in ltrace's lockstep, and how many objects were "
                   f"in flight between them (a queue's depth, the peak of live bytes) is ltrace's, not the "
                   f"program's; a replay keeps it. For a verdict on a threaded program, capture it with the "
                   f"LD_PRELOAD tracer (--method preload)")
    if stats.free_unknown:
        out.append(f"{stats.free_unknown} free(s) of pointers never seen allocated (first at line "
                   f"{rep.first_lines('free-unknown-pointer')[0]}): allocated before the capture started, by a "
                   f"call ltrace missed, or freed twice")
    return out
