"""Facts about the machine a benchmark ran on, stored in every result file.

Allocator timings depend on the CPU, the kernel (page-fault and THP
behaviour), the C library and the compiler, so results are only comparable
when these are recorded next to them.  Every probe is cheap (a few file reads
and at most one short subprocess) and none of them raises: a value that
cannot be determined is ``None``.
"""

from __future__ import annotations

import ctypes
import os
import platform
import re
import socket
import subprocess
import sys
from typing import Callable, Dict, List, Optional, TypeVar

__all__ = ["collect_machine", "compiler_version"]

T = TypeVar("T")

_SUBPROCESS_TIMEOUT_S = 5.0


def _safe(probe: Callable[[], Optional[T]]) -> Optional[T]:
    # Metadata is a courtesy to the reader of the results; a missing /proc
    # file or odd container must never abort a benchmark run.
    try:
        return probe()
    except Exception:
        return None


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def _cpu_model() -> Optional[str]:
    # x86 says "model name"; some ARM kernels only give "Hardware"/"Processor".
    fields: Dict[str, str] = {}
    for line in _read_text("/proc/cpuinfo").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    for key in ("model name", "Hardware", "Processor", "cpu model", "cpu"):
        if fields.get(key):
            return fields[key]
    return platform.processor() or None


def _mem_total_kib() -> Optional[int]:
    for line in _read_text("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1])  # the kernel always reports kB
    return None


def _os_pretty_name() -> Optional[str]:
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            text = _read_text(path)
        except OSError:
            continue
        match = re.search(r'^PRETTY_NAME=(["\']?)(.*)\1\s*$', text, re.MULTILINE)
        if match:
            return match.group(2)
    return None


def _libc_version() -> Optional[str]:
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION")  # e.g. "glibc 2.36"
        if version:
            return version
    except (AttributeError, ValueError, OSError):
        pass
    try:
        libc = ctypes.CDLL(None)
        gnu_get_libc_version = libc.gnu_get_libc_version
        gnu_get_libc_version.restype = ctypes.c_char_p
        return "glibc " + gnu_get_libc_version().decode()
    except (AttributeError, OSError):
        pass
    name, version = platform.libc_ver()
    return f"{name} {version}".strip() or None


def _first_line_of(path: str) -> Optional[str]:
    line = _read_text(path).strip().splitlines()
    return line[0].strip() if line else None


def _selected_option(path: str) -> Optional[str]:
    # sysfs shows choices as "always [madvise] never"; keep the chosen one.
    line = _first_line_of(path)
    if line is None:
        return None
    match = re.search(r"\[([^\]]+)\]", line)
    return match.group(1) if match else line


def _scenc_version() -> Optional[str]:
    from scenc import __version__

    return __version__


def compiler_version(cc: str = "cc") -> Optional[str]:
    """First line of ``<cc> --version`` ("gcc (Debian 12.2.0-14) 12.2.0"), or None."""
    try:
        completed = subprocess.run(
            [cc, "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=_SUBPROCESS_TIMEOUT_S,
        )
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    if completed.returncode != 0:
        return None
    for line in completed.stdout.splitlines():
        if line.strip():
            return line.strip()
    return None


def collect_machine(cc: Optional[str] = None) -> Dict[str, object]:
    """Describe this machine as a JSON-ready dict; never raises.

    Keys: hostname, cpu_model, logical_cpus, usable_cpus, mem_total_kib, arch, kernel,
    os, python_version, python_implementation, scenc_version, libc_version,
    and the kernel settings that change allocator behaviour:
    transparent_hugepage, aslr (randomize_va_space) and cpu_governor; load_average.
    With ``cc`` given, also ``compiler`` (see :func:`compiler_version`).
    """
    uname = _safe(platform.uname)
    machine: Dict[str, object] = {
        "hostname": _safe(socket.gethostname),
        "cpu_model": _safe(_cpu_model),
        "logical_cpus": _safe(os.cpu_count),
        # Fewer than logical_cpus under taskset/cgroups; threaded scenarios
        # cannot scale beyond it.
        "usable_cpus": _safe(lambda: len(os.sched_getaffinity(0))),
        "mem_total_kib": _safe(_mem_total_kib),
        "arch": uname.machine if uname else None,
        "kernel": f"{uname.system} {uname.release} {uname.version}" if uname else None,
        "os": _safe(_os_pretty_name),
        "python_version": _safe(platform.python_version),
        "python_implementation": _safe(platform.python_implementation),
        "scenc_version": _safe(_scenc_version),
        "libc_version": _safe(_libc_version),
        # THP can change peak RSS of the same allocator by megabytes.
        "transparent_hugepage": _safe(
            lambda: _selected_option("/sys/kernel/mm/transparent_hugepage/enabled")),
        # ASLR changes addresses (and so cache/TLB behaviour) from run to run.
        "aslr": _safe(lambda: _first_line_of("/proc/sys/kernel/randomize_va_space")),
        # A power-saving governor makes wall times noisy.
        "cpu_governor": _safe(
            lambda: _first_line_of("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")),
        # The 1, 5 and 15 minute load averages as the session starts: a report warns of noisy
        # runs with it (the load at the end is the header's status_load_average).
        "load_average": load_averages(),
    }
    if cc is not None:
        machine["compiler"] = compiler_version(cc)
    return machine


if __name__ == "__main__":  # pragma: no cover - handy for bug reports
    import json

    json.dump(collect_machine(cc="cc"), sys.stdout, indent=2)
    print()


def load_averages() -> Optional[List[float]]:
    """The 1, 5 and 15 minute load averages, to 2 decimals; None where the system gives none."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None
