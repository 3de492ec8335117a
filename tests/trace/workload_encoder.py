"""The tests' own writer of DJ Delorie workloads (.wl), independent of scenc.trace.workload.

Written from the format's description (glibc's trace2wl and trace_run), not from scenc's reader:

    wl = Recorder()                       # calls in the traced program's order, as trace2wl reads a trace
    wl.malloc(tid=1, ptr=0x1000, size=16); wl.free(tid=2, ptr=0x1000)
    wl.save(path)                         # the main stream, then each thread's stream

    raw(threads=[[("MALLOC", 1, 16), ("DONE",)], ...], slots=2, syncs=0)   # exact bytes, for damaged files
"""

OP = {"NOP": 0, "DONE": 1, "MALLOC": 2, "CALLOC": 3, "REALLOC": 4, "FREE": 5, "SYNC_W": 6, "SYNC_R": 7,
      "ALLOC_PTRS": 8, "ALLOC_SYNCS": 9, "NTHREADS": 10, "START_THREAD": 11, "MEMALIGN": 12, "VALLOC": 13,
      "PVALLOC": 14}


def varint(n: int) -> bytes:
    """Big-endian groups of 7 bits, bit 7 set on every byte but the last."""
    groups = [n & 0x7F]
    n >>= 7
    while n:
        groups.append(0x80 | (n & 0x7F))
        n >>= 7
    return bytes(reversed(groups))


def op_bytes(name: str, *numbers: int) -> bytes:
    return bytes([OP[name]]) + b"".join(varint(n) for n in numbers)


def layout(streams, slots: int, syncs: int) -> bytes:
    """The main stream (its length found by iterating, as trace2wl does) and the threads' streams after it."""
    length = 0
    while True:
        main = op_bytes("ALLOC_PTRS", slots) + op_bytes("ALLOC_SYNCS", syncs) + op_bytes("NTHREADS", len(streams))
        offset = length
        for s in streams:
            main += op_bytes("START_THREAD", offset)
            offset += len(s)
        main += op_bytes("DONE")
        if len(main) == length:
            return main + b"".join(streams)
        length = len(main)


def raw(threads, slots: int, syncs: int) -> bytes:
    """threads: per thread, a list of (OPNAME, numbers...)."""
    return layout([b"".join(op_bytes(name, *nums) for name, *nums in ops) for ops in threads], slots, syncs)


class Recorder:
    """A traced program's calls, turned into a workload the way trace2wl does it: a slot per address, and a
    SYNC_W/SYNC_R pair whenever a thread takes an address over from another, or makes its first call."""

    def __init__(self):
        self.streams = {}        # tid -> bytearray, in order of first call
        self.slot_of = {}        # address -> slot
        self.owner = {}          # address -> tid
        self.syncs = 0
        self.master = None

    def _thread(self, tid: int) -> bytearray:
        if tid not in self.streams:
            self.streams[tid] = bytearray()
            if self.master is None:
                self.master = tid
            else:
                self._sync(self.master, tid)
        return self.streams[tid]

    def _sync(self, writer: int, reader: int) -> None:
        self.syncs += 1
        self.streams[writer] += op_bytes("SYNC_W", self.syncs)
        self.streams[reader] += op_bytes("SYNC_R", self.syncs)

    def _take(self, tid: int, ptr: int) -> int:
        if not ptr:
            return 0
        slot = self.slot_of.setdefault(ptr, len(self.slot_of) + 1)
        owner = self.owner.get(ptr)
        if owner is not None and owner != tid:
            self._sync(owner, tid)
        self.owner[ptr] = tid
        return slot

    def malloc(self, tid: int, ptr: int, size: int, name: str = "MALLOC") -> None:
        s = self._thread(tid)
        s += op_bytes(name, self._take(tid, ptr), size)

    def calloc(self, tid: int, ptr: int, size: int) -> None:
        self.malloc(tid, ptr, size, "CALLOC")

    def memalign(self, tid: int, ptr: int, align: int, size: int) -> None:
        s = self._thread(tid)
        s += op_bytes("MEMALIGN", self._take(tid, ptr), align, size)

    def free(self, tid: int, ptr: int) -> None:
        s = self._thread(tid)
        s += op_bytes("FREE", self._take(tid, ptr))

    def realloc(self, tid: int, old: int, new: int, size: int) -> None:
        s = self._thread(tid)
        o = self._take(tid, old)
        s += op_bytes("REALLOC", self._take(tid, new), o, size)

    def to_bytes(self) -> bytes:
        streams = [bytes(s) + op_bytes("DONE") for s in self.streams.values()]
        return layout(streams, len(self.slot_of) + 1, self.syncs)

    def save(self, path) -> None:
        with open(path, "wb") as f:
            f.write(self.to_bytes())
