"""Capture a program's allocator calls with ltrace 0.7.3, and say plainly when it failed.

    result = capture(["./server", "--once"], "server.log")          # mode='auto': -x, then -e
    result.ok, result.warnings, result.report, result.stats

What ltrace 0.7.3 sees on this machine (Debian 12, glibc 2.36, gcc 12, checked with
real programs, see tests/test_trace_capture.py and tests/fixtures/trace/make_logs.sh)
-------------------------------------------------------------------------------------
``-e FUNCS`` (PLT breakpoints, lines ``prog->malloc(16) = 0x...``)
    sees the program's calls through its PLT, and calls of other libraries through
    theirs (``libstdc++.so.6->malloc`` inside ``operator new``).  It does NOT see:
    calls from inside libc (strdup, fopen, printf's buffer, qsort...); programs that
    take the address of malloc/free (GOT-only relocations, no PLT slot: ``sort``,
    ``ls``, ``git`` on Debian) or are built with ``-fno-plt``: those record nothing
    at all; ``aligned_alloc`` is seen under its own name.  ``libc.so.6->realloc`` /
    ``->calloc`` lines are libc's own IRELATIVE PLT slots mislabelled (results like
    ``= 0x6``): the parser skips them.  A binary linked with ``-z now`` (BIND_NOW) is
    traced normally by this ltrace build.  Multithreaded programs survive -e more
    often than -x, not always: mt_handoff with 3 threads x 20 rounds crashed in 3 of
    10 runs, with 8 threads x 200 rounds in 5 of 5 (once ltrace itself segfaulted).
``-L -x FUNCS`` (breakpoints on the functions themselves, ``malloc@libc.so.6(16)``)
    sees every call, including those from inside libc and from programs that take
    malloc's address; calls an allocator makes internally show up *nested* inside
    the outer ``<unfinished ...>`` call (realloc(NULL, n) -> malloc, realloc(p, 0) ->
    free, posix_memalign(16, n) -> malloc, reallocarray -> realloc, new[] -> new ->
    malloc, delete -> free; the parser drops them).  ``aligned_alloc`` is printed as
    ``memalign`` (same function in glibc 2.36).  C++ ``_Znwm``/``_Znam``/``_ZdlPv``/
    ``_ZdaPv``/``_ZdlPvm`` and the aligned/nothrow variants are found in
    libstdc++.so.6 (``-x`` without ``-L`` also traces every PLT call: duplicates).
    On multithreaded programs ltrace 0.7.3 -x nearly always crashes the tracee
    (``unexpected breakpoint``, ``+++ killed by SIGSEGV +++``: mt_handoff with 3
    threads x 20 rounds crashed in 10 of 10 runs): mode='auto' falls back to -e.
Both:
    ltrace exits 0 even when the tracee dies of a signal or exits non-zero: the
    outcome is only in the log (``+++ exited (status N) +++`` / ``+++ killed by``).
    ltrace itself may abort (``process_vfork_on_event: Assertion`` on /bin/sh
    running a pipeline: exit 134) or crash (139).  Statically linked programs
    cannot be traced (ltrace: "Couldn't find .dynsym"; nothing is recorded).
    Scripts (``#!``) are not ELF files: ltrace refuses them; the interpreter is
    traced instead.  Each breakpoint costs 50-300 us, so traced programs run
    100-1000x slower and timing-dependent behaviour changes.
"""
from __future__ import annotations

import mmap
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from .ltrace import ParseReport, TraceFormatError, parse_file
from .stats import TraceStats

__all__ = ["capture", "CaptureResult", "CaptureError", "ElfInfo", "inspect_elf", "DEFAULT_FUNCTIONS"]

C_FUNCTIONS = ("malloc", "calloc", "realloc", "reallocarray", "free", "posix_memalign", "aligned_alloc",
               "memalign", "valloc", "pvalloc")
CXX_FUNCTIONS = ("_Znwm", "_Znam", "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm", "_ZnwmRKSt9nothrow_t",
                 "_ZnamRKSt9nothrow_t", "_ZnwmSt11align_val_t", "_ZnamSt11align_val_t", "_ZdlPvSt11align_val_t",
                 "_ZdaPvSt11align_val_t", "_ZdlPvmSt11align_val_t", "_ZdaPvmSt11align_val_t")
#: What capture() asks ltrace to trace by default.
DEFAULT_FUNCTIONS = C_FUNCTIONS + CXX_FUNCTIONS


class CaptureError(RuntimeError):
    """The program cannot be traced at all (not found, statically linked, ltrace missing ...)."""


# --------------------------------------------------------------------------- ELF
@dataclass
class ElfInfo:
    path: str
    is_elf: bool = False
    dynamic: bool = False                  # has a PT_DYNAMIC segment (else: statically linked)
    interpreter: Optional[str] = None      # PT_INTERP (ld.so)
    bind_now: bool = False                 # DT_BIND_NOW / DF_BIND_NOW / DF_1_NOW
    plt_symbols: set = field(default_factory=set)   # imported through a PLT slot (JUMP_SLOT)
    got_symbols: set = field(default_factory=set)   # imported through the GOT only (GLOB_DAT): address taken
    shebang: Optional[list] = None         # ['/usr/bin/env', 'python3'] for a '#!' script
    defined: set = field(default_factory=set)       # functions it defines itself (.dynsym/.symtab, global or weak)


_JUMP_SLOT = {62: 7, 3: 7, 183: 1026}      # EM_X86_64, EM_386, EM_AARCH64
_GLOB_DAT = {62: 6, 3: 6, 183: 1025}


def inspect_elf(path: str) -> ElfInfo:
    """What matters to ltrace about an executable: dynamic or static, BIND_NOW, which allocator
    functions it reaches through PLT slots and which only through the GOT.  Never raises on bad files."""
    info = ElfInfo(path)
    try:
        with open(path, "rb") as f:
            head = f.read(512)
            if head[:2] == b"#!":
                info.shebang = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split() or None
                return info
            if head[:4] != b"\x7fELF" or len(head) < 52:
                return info
            info.is_elf = True
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                _read_elf(data, info)
    except (OSError, ValueError, struct.error, IndexError, UnicodeDecodeError):
        pass
    return info


def _read_elf(data, info: ElfInfo) -> None:
    is64 = data[4] == 2
    end = "<" if data[5] == 1 else ">"
    if is64:
        (e_type, e_machine, _v, _entry, e_phoff, e_shoff, _fl, _ehs, e_phentsize, e_phnum, e_shentsize, e_shnum,
         _shstrndx) = struct.unpack_from(end + "HHIQQQIHHHHHH", data, 16)
    else:
        (e_type, e_machine, _v, _entry, e_phoff, e_shoff, _fl, _ehs, e_phentsize, e_phnum, e_shentsize, e_shnum,
         _shstrndx) = struct.unpack_from(end + "HHIIIIIHHHHHH", data, 16)
    for i in range(e_phnum):
        off = e_phoff + i * e_phentsize
        if is64:
            p_type, _pf, p_offset, _va, _pa, p_filesz = struct.unpack_from(end + "IIQQQQ", data, off)
        else:
            p_type, p_offset, _va, _pa, p_filesz = struct.unpack_from(end + "IIIII", data, off)
        if p_type == 2:
            info.dynamic = True
        elif p_type == 3:
            info.interpreter = data[p_offset:p_offset + p_filesz].split(b"\0")[0].decode()
    sections = []
    for i in range(e_shnum):
        off = e_shoff + i * e_shentsize
        if is64:
            _name, sh_type, _flags, _addr, sh_offset, sh_size, sh_link, _info, _align, sh_entsize = \
                struct.unpack_from(end + "IIQQQQIIQQ", data, off)
        else:
            _name, sh_type, _flags, _addr, sh_offset, sh_size, sh_link, _info, _align, sh_entsize = \
                struct.unpack_from(end + "IIIIIIIIII", data, off)
        sections.append((sh_type, sh_offset, sh_size, sh_link, sh_entsize))
    word = 8 if is64 else 4
    for sh_type, off, size, link, entsize in sections:
        if sh_type == 6:                                            # SHT_DYNAMIC
            for j in range(0, size - 2 * word + 1, 2 * word):
                tag, val = struct.unpack_from(end + ("qQ" if is64 else "iI"), data, off + j)
                if tag == 24 or (tag == 30 and val & 8) or (tag == 0x6FFFFFFB and val & 1):
                    info.bind_now = True
        elif sh_type in (2, 11) and entsize and 0 <= link < len(sections):   # SHT_SYMTAB / SHT_DYNSYM
            _defined_functions(data, end, is64, off, size, entsize, sections[link][1], info.defined)
        elif sh_type in (4, 9) and 0 <= link < len(sections):       # SHT_RELA / SHT_REL
            sym_type, sym_off, _sym_size, str_link, sym_entsize = sections[link]
            if sym_type != 11 or not (0 <= str_link < len(sections)) or not sym_entsize:   # SHT_DYNSYM
                continue
            str_off = sections[str_link][1]
            entsize = entsize or ((24 if sh_type == 4 else 16) if is64 else (12 if sh_type == 4 else 8))
            for j in range(0, size - entsize + 1, entsize):
                if is64:
                    _roff, r_info = struct.unpack_from(end + "QQ", data, off + j)
                    r_type, r_sym = r_info & 0xFFFFFFFF, r_info >> 32
                else:
                    _roff, r_info = struct.unpack_from(end + "II", data, off + j)
                    r_type, r_sym = r_info & 0xFF, r_info >> 8
                if not r_sym:
                    continue
                st_name = struct.unpack_from(end + "I", data, sym_off + r_sym * sym_entsize)[0]
                name = data[str_off + st_name:data.find(b"\0", str_off + st_name)].decode()
                if r_type == _JUMP_SLOT.get(e_machine):
                    info.plt_symbols.add(name)
                elif r_type == _GLOB_DAT.get(e_machine):
                    info.got_symbols.add(name)
    info.got_symbols -= info.plt_symbols


def _defined_functions(data, end: str, is64: bool, off: int, size: int, entsize: int, str_off: int,
                       into: set) -> None:
    """Names of the functions (or ifuncs) a symbol table defines, global or weak."""
    for j in range(off, off + size - entsize + 1, entsize):
        if is64:
            st_name, st_info, _other, st_shndx = struct.unpack_from(end + "IBBH", data, j)
        else:
            (st_name,) = struct.unpack_from(end + "I", data, j)
            st_info, _other, st_shndx = struct.unpack_from(end + "BBH", data, j + 12)
        if st_shndx == 0 or st_info >> 4 not in (1, 2) or st_info & 0xF not in (2, 10):
            continue                                    # undefined, local, or not a function
        start = str_off + st_name
        into.add(data[start:data.find(b"\0", start)].decode("ascii", "replace"))


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


def locate_program(argv: Sequence[str], cwd) -> tuple:
    """(path of argv[0] as given or found on PATH, the file it leads to); CaptureError if there is none."""
    prog = argv[0]
    if os.sep in prog:
        path = os.path.join(cwd or os.getcwd(), prog)
    else:
        path = shutil.which(prog)
        if path is None:
            raise CaptureError(f"{prog}: command not found (PATH={os.environ.get('PATH', '')})")
    if not os.path.exists(path):
        raise CaptureError(f"{prog}: no such file")
    return path, os.path.realpath(path)


def run_in_own_session(cmd: Sequence[str], timeout: Optional[float], **popen) -> tuple:
    """(exit status, or None after a timeout; seconds it ran; the last 8 KB of its stderr).

    The command gets a session of its own, so a timeout kills it with every
    process it started.
    """
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stderr=err, start_new_session=True, **popen)
        try:
            status = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            status = None
        seconds = time.perf_counter() - start
        err.seek(0, os.SEEK_END)
        err.seek(max(0, err.tell() - 8192))
        return status, seconds, err.read().decode("utf-8", "replace")


def _interpreted(argv: list, cwd, warnings: list, depth: int = 0) -> tuple:
    """(argv, ElfInfo of the real executable) -- follows '#!' lines, which ltrace cannot trace."""
    path, real = locate_program(argv, cwd)
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
        raise CaptureError(f"{argv[0]} ({real}) is statically linked (no dynamic section): ltrace cannot trace it; "
                           f"rebuild it without -static, or record its calls from inside the program")
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
        raise CaptureError(f"capture method {method!r} is not available; only 'ltrace' is implemented "
                           f"(an LD_PRELOAD tracer is planned as method 'preload')")
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
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        parts.append(f"ltrace itself died of {name}")
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
                  "tracer (method 'preload', planned)")
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
    if stats.free_unknown:
        out.append(f"{stats.free_unknown} free(s) of pointers never seen allocated (first at line "
                   f"{rep.first_lines('free-unknown-pointer')[0]}): allocated before the capture started, by a "
                   f"call ltrace missed, or freed twice")
    return out
