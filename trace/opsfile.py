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

Ops arrive interleaved across threads; the writer spools each thread's ops to
its own temporary file (through a 64 KiB buffer) and concatenates them at the
end, so memory stays constant however long the trace is.
"""

import os
import shutil
import struct
import tempfile
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


class OpsWriter:
    """Collects ops per thread; `close()` writes the final file atomically.

    Each thread's ops gather in a bytearray that spills to the thread's spool
    file past SPILL bytes. A converter in a hurry appends ``OP.pack(...)`` to
    ``buffer(thread)`` itself, calls ``spill(thread)`` when it grew past SPILL,
    and sets ``slots``; ``op()`` does all of that for one op.
    """

    SPILL = 1 << 16

    def __init__(self, path):
        self.path = Path(path)
        self._spool = Path(tempfile.mkdtemp(prefix=".ops-", dir=self.path.parent))
        self._files: List = []
        self._buffers: List[bytearray] = []
        self._counts: List[int] = []
        self.flags: List[int] = []
        self.slots = 0
        self.touch = "none"
        self.window = 0
        self.synced: List[int] = []          # per thread: the position its last SYNC op publishes
        self._pending: Dict[int, Tuple[int, int]] = {}    # thread -> (offset in its buffer, position before)

    def add_thread(self, flags: int = 0, position: int = 0) -> int:
        """position: where the replay thread starts (0, or its creation's position)."""
        index = len(self._files)
        self._files.append(open(self._spool / f"t{index}", "wb"))
        self._buffers.append(bytearray())
        self._counts.append(0)
        self.flags.append(flags)
        self.synced.append(position)
        return index

    def sync(self, thread: int, position: int) -> None:
        """The next op appended to the thread's buffer gets flag SYNC at `position`. Call `settle()`
        once the ops of that event are appended: an event that appended none leaves no SYNC."""
        self._pending[thread] = (len(self._buffers[thread]), self.synced[thread])
        self.synced[thread] = position

    def settle(self) -> None:
        for thread, (at, before) in self._pending.items():
            buf = self._buffers[thread]
            if len(buf) <= at:
                self.synced[thread] = before
                continue
            step = self.synced[thread] - before
            if not 0 < step < MAX_SYNC_STEP:
                raise ValueError(f"a thread's position moved by {step} between two SYNC ops")
            buf[at + 1] |= SYNC
            struct.pack_into("<H", buf, at + 2, step >> 32)
            struct.pack_into("<I", buf, at + 20, step & 0xFFFFFFFF)
        self._pending.clear()

    def buffer(self, thread: int) -> bytearray:
        return self._buffers[thread]

    def spill(self, thread: int) -> None:
        if self._pending:
            self.settle()
        buf = self._buffers[thread]
        self._files[thread].write(buf)
        self._counts[thread] += len(buf) // OP.size
        buf.clear()

    def op(self, thread: int, kind: str, flags: int = 0, slot: int = NONE, aux: int = NONE,
           gen: int = 0, aux_gen: int = 0, size: int = 0) -> None:
        buf = self._buffers[thread]
        buf += OP.pack(KIND_CODE[kind], flags, 0, slot, aux & 0xFFFFFFFF, gen, aux_gen, 0, size & 0xFFFFFFFFFFFFFFFF)
        if len(buf) >= self.SPILL:
            self.spill(thread)
        if slot != NONE and slot + 1 > self.slots:
            self.slots = slot + 1

    def close(self) -> None:
        for i, f in enumerate(self._files):
            self.spill(i)
            f.close()
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        try:
            with open(tmp, "wb") as out:
                out.write(HEADER.pack(MAGIC, len(self._files), TOUCH_MODES.index(self.touch), self.slots,
                                      sum(self._counts), self.window))
                offset = 0
                for count in self._counts:
                    out.write(struct.pack("<Q", offset))
                    offset += count
                out.write(struct.pack("<Q", offset))
                out.write(_flags_table(self.flags))
                for i in range(len(self._files)):
                    with open(self._spool / f"t{i}", "rb") as part:
                        shutil.copyfileobj(part, out, 1 << 20)
            os.replace(tmp, self.path)
        finally:
            shutil.rmtree(self._spool, ignore_errors=True)
            if tmp.exists():
                tmp.unlink()

    def abort(self) -> None:
        for f in self._files:
            f.close()
        shutil.rmtree(self._spool, ignore_errors=True)


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
