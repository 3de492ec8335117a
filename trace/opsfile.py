"""The replay data file that `replay "app.ops"` scenarios read (runtime/replay.h).

Layout, little-endian (version 3):
    header   magic "SCNOPS3\\0", u32 threads, u32 touch, u64 slots, u64 ops, u64 window
    sections u64[threads + 1]: index of each thread's first op, then the total
    flags    u32[threads], then 4 zero bytes if threads is odd: bit 0 (DEFERRED) = the thread is
             started by a SPAWN op of another thread, not at the start of the replay; bit 1 (MAIN) = the
             process's main thread, replayed on the replay's main thread
    ops      32-byte records, thread 0's in order, then thread 1's, ...
             u8 kind, u8 flags, u16 pos_hi, u32 slot, u32 aux, u32 gen, u32 aux_gen, u32 pos_lo, u64 size

touch: what the replay stores into each new block and into the grown part of a
realloc (TOUCH_MODES: none, its first and last byte, one byte per page and the
last, every byte). Op kinds beyond the allocator calls: SPAWN (slot = the thread it
starts, aux = how many SPAWN ops precede it in the capture, size = its position), JOIN (slot = a
thread that ended before this point; waits until it has), EXIT (the thread's
end; aux = SPAWN ops that happened before it in the capture, which it waits
for). MAP (slot, gen, size: an anonymous mapping of the program's own), UNMAP
(slot, gen, aux = offset in 4 KiB pages, size: a piece of it; flag LAST_PIECE
when that ends the mapping), REMAP (like realloc: slot, aux = old slot, size).
Back-pressure (runtime/replay.h has the design and why it cannot deadlock):
positions count the capture's events in order, each adding 1 plus the bytes
it allocates, frees, maps or unmaps. An op with flag SYNC carries in pos_hi:pos_lo (48 bits)
how many positions lie between the thread's previous SYNC (or its start: 0,
or its SPAWN's size) and this op; there the replay thread publishes its
position and waits while it is more than `window` positions ahead of the
least published one.
Versions 1 (SCNOPS1: no touch, no thread lifetimes) and 2 (SCNOPS2: no
back-pressure) are refused with a message asking to convert again; the
runtime (runtime/replay.h) does the same.

The writer is the converter, runtime/convert.c (it spools each thread's ops to
a temporary file and concatenates them at the end, so its memory follows the
live objects, not the trace); this module reads ops files (tests, `scenc
trace-stats` on .ops files) and names the format's constants for Python.
"""

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

VERSION = 3
MAGIC = b"SCNOPS%d\0" % VERSION
HEADER = struct.Struct("<8sIIQQQ")
OP = struct.Struct("<BBHIIIIIQ")
NONE = 0xFFFFFFFF

# Op kinds (runtime/replay.h enum) and the runtime's counter each one lands in.
KINDS = ("malloc", "calloc", "realloc", "free", "aligned_alloc", "memalign", "posix_memalign", "valloc",
         "spawn", "join", "exit", "map", "unmap", "remap")
KIND_CODE = {k: i for i, k in enumerate(KINDS)}
NOT_CALLS = frozenset({"spawn", "join", "exit", "map", "unmap", "remap"})     # not allocator calls: not counted
COUNTED_AS = {"valloc": "memalign"}
WAIT, WAIT_OLD = 1, 2
LAST_PIECE, WRITABLE = 4, 8     # unmap: the slot's last mapped piece goes; map, remap: PROT_WRITE (touched)
SYNC = 16                       # publish the position and wait for the window (back-pressure)
MAX_SYNC_STEP = 1 << 48         # pos_hi:pos_lo
DEFERRED, MAIN = 1, 2     # thread flags
TOUCH_MODES = ("none", "first", "pages", "all")
#: The default of `scenc convert --touch`: the mode whose rankings agree with real programs (docs/capture.md).
DEFAULT_TOUCH = "pages"


class OpsFileError(ValueError):
    pass


def _flags_table(flags: List[int]) -> bytes:
    table = struct.pack(f"<{len(flags)}I", *flags)
    return table + b"\0" * (-len(table) % 8)


@dataclass
class OpsHeader:
    threads: int
    touch: str
    slots: int
    ops: int
    flags: List[int]        # per thread: DEFERRED, MAIN
    ops_at: int             # file offset of op 0
    window: int = 0         # back-pressure window, in positions


def read_header(data: bytes, path) -> OpsHeader:
    if len(data) < 8:
        raise OpsFileError(f"{path}: too short for a scenc ops file")
    magic = data[:8]
    if magic[:6] != b"SCNOPS" or magic[7:] != b"\0":
        raise OpsFileError(f"{path}: not a scenc ops file")
    if magic != MAGIC:
        raise OpsFileError(f"{path}: a version {magic[6:7].decode('latin-1')} ops file; this scenc reads version "
                           f"{VERSION}: convert the capture again")
    if len(data) < HEADER.size:
        raise OpsFileError(f"{path}: too short for a scenc ops file")
    _, threads, touch, slots, total, window = HEADER.unpack_from(data)
    if touch >= len(TOUCH_MODES):
        raise OpsFileError(f"{path}: unknown touch mode {touch}: damaged")
    flags_at = HEADER.size + 8 * (threads + 1)
    ops_at = flags_at + len(_flags_table([0] * threads))
    flags = list(struct.unpack_from(f"<{threads}I", data, flags_at)) if len(data) >= ops_at else []
    return OpsHeader(threads, TOUCH_MODES[touch], slots, total, flags, ops_at, window)


def read_ops(path) -> Tuple[int, List[List[Tuple]]]:
    """(slots, ops per thread) — for tests and `scenc trace-stats` on .ops files."""
    data = Path(path).read_bytes()
    h = read_header(data, path)
    if len(data) != h.ops_at + OP.size * h.ops:
        raise OpsFileError(f"{path}: truncated or damaged")
    sections = struct.unpack_from(f"<{h.threads + 1}Q", data, HEADER.size)
    per_thread = []
    for t in range(h.threads):
        ops = [OP.unpack_from(data, h.ops_at + OP.size * i) for i in range(sections[t], sections[t + 1])]
        per_thread.append([(KINDS[o[0]],) + o[1:] for o in ops])
    return h.slots, per_thread


def iter_counts(path) -> Iterator[Dict[str, int]]:
    """Calls per runtime counter kind, per thread, as the replay program will report them."""
    _, threads = read_ops(path)
    for ops in threads:
        counts: Dict[str, int] = {}
        for op in ops:
            if op[0] in NOT_CALLS:
                continue
            kind = COUNTED_AS.get(op[0], op[0])
            counts[kind] = counts.get(kind, 0) + 1
        yield counts
