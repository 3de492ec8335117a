"""What the checks need to know about this machine, and how to print byte counts."""

import functools
from typing import Optional

TiB = 1 << 40

# One allocation above this is a typo, whatever the machine (a missing `/`, a K too many).
ABSURD_ALLOCATION = TiB


def proc_kib_field(path: str, key: str) -> Optional[int]:
    """The `key:  N kB` line of a /proc file, in bytes; None where the file or the line is missing."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


@functools.lru_cache(maxsize=None)
def mem_total() -> Optional[int]:
    """MemTotal from /proc/meminfo in bytes; None where there is no such file."""
    return proc_kib_field("/proc/meminfo", "MemTotal")


def fmt_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'; whole bytes below 1 KiB; one decimal above."""
    if n < 1024:
        return f"{int(n)} bytes" if n != 1 else "1 byte"
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        n /= 1024
        if n < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}"
    raise AssertionError("unreachable")
