"""What scenc needs to know about this machine's memory: /proc/meminfo fields, and what no allocation can mean."""

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
