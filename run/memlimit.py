"""The memory limit a scenario program runs under, so a huge scenario fails instead of swapping.

The limit is RLIMIT_DATA, not RLIMIT_AS (docs/running.md has the smallest
limit of each kind that each allocator needs, as measured). RLIMIT_AS also counts address space that is only reserved (PROT_NONE:
mimalloc's arenas, glibc's per-thread heaps, a sanitizer's shadow), so it
charges allocators differently for memory none of them uses; mimalloc under
a tight RLIMIT_AS even fails every allocation where RLIMIT_DATA lets it run.
RLIMIT_DATA (since Linux 4.7) counts the private writable mappings: the
heap, every anonymous mmap and the thread stacks, i.e. what an allocator
actually hands out, touched or not. It is still an upper bound of the
memory used (a block never written costs address space, not RAM), which is
the safe side for "do not let the machine swap".

The limit is set from outside, right after the program starts
(`resource.prlimit`), not in a `preexec_fn`: a preexec_fn makes subprocess
fork the whole Python process instead of using vfork, which costs more per
run than the harness's own per-run work (bench/bench_harness.py). The child may
run for a moment before its limit is in place, so `apply` then reads what
it already uses (VmData, the very counter RLIMIT_DATA checks): a program
already over the limit is reported to the caller, to be killed. From then
on it cannot grow past the limit.
"""

import re
import resource
from typing import Optional

from ..system.machine import mem_total, proc_kib_field
from ..system.units import fmt_bytes

NO_LIMIT_GIVEN = object()  # --memory-limit absent (None is "--memory-limit none")

DEFAULT_FRACTION = 0.80

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)
_NO_LIMIT = ("none", "off", "unlimited")

# Less than this cannot even start a program under the allocators above.
MIN_LIMIT = 16 << 20


class LimitError(ValueError):
    """A --memory-limit that cannot be used; the message says why."""


def default() -> Optional[int]:
    """80% of MemTotal, or no limit where MemTotal is unknown."""
    total = mem_total()
    return int(total * DEFAULT_FRACTION) if total else None


def parse(text: str) -> Optional[int]:
    """"80%" (of MemTotal), "512M", "4G", "4GiB", "1073741824", or "none" -> bytes or None."""
    text = text.strip().lower()
    if text in _NO_LIMIT:
        return None
    if text.endswith("%"):
        try:
            fraction = float(text[:-1]) / 100
        except ValueError:
            raise LimitError(f"{text!r} is not a percentage (like 80%)") from None
        total = mem_total()
        if total is None:
            raise LimitError("this machine does not say how much memory it has (/proc/meminfo); "
                             "give the limit in bytes, like 8G")
        if not 0 < fraction <= 1:
            raise LimitError(f"{text!r} should be between 0% and 100% of this machine's memory")
        value = int(total * fraction)
    else:
        match = _SIZE.match(text)
        if not match:
            raise LimitError(f"{text!r} is not a size (like 4G, 512M or 80%)")
        value = int(float(match.group(1)) * _UNITS[match.group(2)])
    if value < MIN_LIMIT:
        raise LimitError(f"{text!r} is less than {fmt_bytes(MIN_LIMIT)}, too little for any "
                         f"allocator to start a program")
    return value


def describe(limit: Optional[int]) -> str:
    if limit is None:
        return "no memory limit"
    total = mem_total()
    share = f" ({limit / total:.0%} of this machine's {fmt_bytes(total)})" if total else ""
    return f"{fmt_bytes(limit)}{share}"


def data_size(pid: int) -> Optional[int]:
    """VmData of a live process in bytes, None when it is gone."""
    return proc_kib_field(f"/proc/{pid}/status", "VmData")


def apply(pid: int, limit: int) -> Optional[int]:
    """Hold process `pid` to `limit` bytes; returns its size if it is already over (kill it)."""
    try:
        _, hard = resource.prlimit(pid, resource.RLIMIT_DATA)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)  # a stricter limit from the user's shell stays
        resource.prlimit(pid, resource.RLIMIT_DATA, (limit, limit))
    except ProcessLookupError:
        return None  # finished already: nothing left to hold
    used = data_size(pid)
    return used if used is not None and used > limit else None


def parse_option(text: str) -> Optional[int]:
    """argparse type for --memory-limit."""
    import argparse
    try:
        return parse(text)
    except LimitError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
