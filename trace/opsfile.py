"""The replay data file that `replay "app.ops"` scenarios read (runtime/replay.h).

Layout, little-endian:
    header   magic "SCNOPS1\\0", u32 threads, u32 reserved, u64 slots, u64 ops
    sections u64[threads + 1]: index of each thread's first op, then the total
    ops      32-byte records, thread 0's in order, then thread 1's, ...
             u8 kind, u8 flags, u16 0, u32 slot, u32 aux, u32 gen, u32 aux_gen, u32 0, u64 size

Ops arrive interleaved across threads; the writer spools each thread's ops to
its own temporary file (through a 64 KiB buffer) and concatenates them at the
end, so memory stays constant however long the trace is.
"""

import os
import shutil
import struct
import tempfile
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

MAGIC = b"SCNOPS1\0"
HEADER = struct.Struct("<8sIIQQ")
OP = struct.Struct("<BBHIIIIIQ")
NONE = 0xFFFFFFFF

# Op kinds (runtime/replay.h enum) and the runtime's counter each one lands in.
KINDS = ("malloc", "calloc", "realloc", "free", "aligned_alloc", "memalign", "posix_memalign", "valloc")
KIND_CODE = {k: i for i, k in enumerate(KINDS)}
COUNTED_AS = {"valloc": "memalign"}
WAIT, WAIT_OLD = 1, 2


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
        self.slots = 0

    def add_thread(self) -> int:
        index = len(self._files)
        self._files.append(open(self._spool / f"t{index}", "wb"))
        self._buffers.append(bytearray())
        self._counts.append(0)
        return index

    def buffer(self, thread: int) -> bytearray:
        return self._buffers[thread]

    def spill(self, thread: int) -> None:
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
                out.write(HEADER.pack(MAGIC, len(self._files), 0, self.slots, sum(self._counts)))
                offset = 0
                for count in self._counts:
                    out.write(struct.pack("<Q", offset))
                    offset += count
                out.write(struct.pack("<Q", offset))
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


def read_ops(path) -> Tuple[int, List[List[Tuple]]]:
    """(slots, ops per thread) — for tests and `scenc trace-stats` on .ops files."""
    data = Path(path).read_bytes()
    if len(data) < HEADER.size:
        raise OpsFileError(f"{path}: too short for a scenc ops file")
    magic, threads, _, slots, total = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise OpsFileError(f"{path}: not a scenc ops file")
    sections = struct.unpack_from(f"<{threads + 1}Q", data, HEADER.size)
    base = HEADER.size + 8 * (threads + 1)
    if len(data) != base + OP.size * total:
        raise OpsFileError(f"{path}: truncated or damaged")
    per_thread = []
    for t in range(threads):
        ops = [OP.unpack_from(data, base + OP.size * i) for i in range(sections[t], sections[t + 1])]
        per_thread.append([(KINDS[o[0]],) + o[1:] for o in ops])
    return slots, per_thread


def iter_counts(path) -> Iterator[Dict[str, int]]:
    """Calls per runtime counter kind, per thread, as the replay program will report them."""
    _, threads = read_ops(path)
    for ops in threads:
        counts: Dict[str, int] = {}
        for op in ops:
            kind = COUNTED_AS.get(op[0], op[0])
            counts[kind] = counts.get(kind, 0) + 1
        yield counts
