"""The ops file that `replay "app.ops"` scenarios read (runtime/replay.h): the format's constants, and a reader.

    header = read_header(data, path)     # OpsHeader: threads, touch, slots, ops, thread flags, window
    slots, ops = read_ops(path)          # each thread's ops as tuples (tests, `scenc trace-stats` on .ops files)
    for counts in iter_counts(path): ... # calls per kind and thread, as the replay will report them

The only writer is the C converter, runtime/tools/convert.c, with runtime/opsfmt.h's encoder; the
replay decodes with opsfmt.h too, and tests/ops_reference.py is the tests' own encoder that checks it
byte for byte. The format (version 5; older ones are refused): docs/capture.md, "The ops file".
"""

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

from ..scenario.nodes import TOUCH_NEW_MODES

VERSION = 5
MAGIC = b"SCNOPS%d\0" % VERSION
HEADER = struct.Struct("<8sIIQQQ")
OP = struct.Struct("<BBHIIIIIQ")    # an op's fields (version 3's layout): read_ops' output, the C encoder's input
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
DEFERRED, MAIN, SETUP = 1, 2, 4     # thread flags (SETUP: a window's set-up, run before the clock starts)
# The encoding (docs/capture.md, "The ops file"; runtime/opsfmt.h): header and ext bits, and the kinds whose aux is usually set,
# whose slot is a thread, whose aux is a slot.
E_WAIT, E_SYNC, E_SIZE, E_EXT = 0x10, 0x20, 0x40, 0x80
X_NO_SLOT, X_AUX_FLIP = 8, 16       # ext bits 0-2 are flags WAIT_OLD, LAST_PIECE, WRITABLE shifted right by one
AUX_KINDS = frozenset(KIND_CODE[k] for k in ("calloc", "realloc", "aligned_alloc", "memalign", "posix_memalign",
                                             "valloc", "spawn", "exit", "unmap", "remap"))
THREAD_KINDS = frozenset((KIND_CODE["spawn"], KIND_CODE["join"]))
SLOT_AUX = frozenset((KIND_CODE["realloc"], KIND_CODE["remap"]))
TOUCH_MODES = TOUCH_NEW_MODES      # a scenario's `touch_new` modes, in one numbering (runtime/ops.h SCN_TOUCH_*)
#: The default of `scenc convert --touch`: auto, the converter chooses from the capture (first or pages;
#: pages, the mode whose rankings agree with most real programs, without a reading). docs/capture.md says why.
DEFAULT_TOUCH = "auto"


class OpsFileError(ValueError):
    pass


def flags_table_size(threads: int) -> int:
    """Bytes of the per-thread flags table: u32 each, padded to 8."""
    return 4 * threads + 4 * (threads % 2)


@dataclass
class OpsHeader:
    threads: int
    touch: str
    slots: int
    ops: int
    flags: List[int]        # per thread: DEFERRED, MAIN, SETUP
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
    ops_at = flags_at + flags_table_size(threads)
    flags = list(struct.unpack_from(f"<{threads}I", data, flags_at)) if len(data) >= ops_at else []
    return OpsHeader(threads, TOUCH_MODES[touch], slots, total, flags, ops_at, window)


def read_ops(path) -> Tuple[int, List[List[Tuple]]]:
    """(slots, ops per thread) — for tests and `scenc trace-stats` on .ops files. Each op is a tuple of
    OP's fields with its kind's name first: (kind, flags, pos_hi, slot, aux, gen, aux_gen, pos_lo, size)."""
    data = Path(path).read_bytes()
    h = read_header(data, path)
    sections = struct.unpack_from(f"<{h.threads + 1}Q", data, HEADER.size)
    if len(data) != h.ops_at + sections[-1] or any(a > b for a, b in zip(sections, sections[1:])):
        raise OpsFileError(f"{path}: truncated or damaged")
    per_thread = []
    for t in range(h.threads):
        try:
            per_thread.append(decode_ops(data, h.ops_at + sections[t], h.ops_at + sections[t + 1]))
        except (IndexError, ValueError):
            raise OpsFileError(f"{path}: thread {t}'s ops are damaged") from None
    if sum(map(len, per_thread)) != h.ops:
        raise OpsFileError(f"{path}: {h.ops} ops announced, {sum(map(len, per_thread))} found: damaged")
    return h.slots, per_thread


def _unzigzag(prev: int, z: int) -> int:
    return (prev + (-(z >> 1) - 1 if z & 1 else z >> 1)) & 0xFFFFFFFF


_FREES = frozenset(KIND_CODE[k] for k in ("free", "unmap"))    # the op ends the slot's life (unmap: LAST_PIECE)
_NOT_SLOTS = THREAD_KINDS | {KIND_CODE["exit"]}


def _with_generations(state: Dict[int, int], kind: int, flags: int, step: int, slot: int, aux: int,
                      gen, aux_gen, size: int) -> Tuple:
    """The op's tuple, its left-out generations filled in from `state` (slot -> 2g or 2g+1), which it updates."""
    if aux != NONE and kind in SLOT_AUX:            # the old block of a realloc or remap goes first
        was = 2 * aux_gen + 1 if aux_gen is not None else state.get(aux, 1)
        aux_gen, state[aux] = was >> 1, was + 1
    if slot != NONE and kind not in _NOT_SLOTS:
        if kind in _FREES:
            was = 2 * gen + 1 if gen is not None else state.get(slot, 1)
            state[slot] = was + 1 if kind == KIND_CODE["free"] or flags & LAST_PIECE else was
        else:
            was = 2 * gen if gen is not None else state.get(slot, 0)
            state[slot] = was + 1
        gen = was >> 1
    return (KINDS[kind], flags, step >> 32, slot, aux, gen or 0, aux_gen or 0, step & 0xFFFFFFFF, size)


def decode_ops(data: bytes, at: int, end: int) -> List[Tuple]:
    """One thread's section. The generations an op leaves out (it does not wait) come from the state
    its thread last left the slot in (2g: free for generation g, 2g+1: live), as in the replay."""
    ops, prev, state = [], 0, {}

    def get():
        nonlocal at
        v = shift = 0
        while True:
            b = data[at]
            at += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80 or shift >= 70:
                return v
    while at < end:
        h = data[at]
        at += 1
        ext = 0
        if h & E_EXT:
            ext = data[at]
            at += 1
        kind = h & 15
        if kind >= len(KINDS):
            raise ValueError(kind)
        flags = (h & E_WAIT) >> 4 | (h & E_SYNC) >> 1 | (ext & 7) << 1
        step = get() if h & E_SYNC else 0
        slot = aux = NONE
        if not ext & X_NO_SLOT:
            if kind in THREAD_KINDS:
                slot = get()
            else:
                slot = prev = _unzigzag(prev, get())
        gen = get() if h & E_WAIT else None
        if (kind in AUX_KINDS) != bool(ext & X_AUX_FLIP):
            aux = get()
            if kind in SLOT_AUX:
                aux = prev = _unzigzag(prev, aux)
        aux_gen = get() if flags & WAIT_OLD else None
        size = get() if h & E_SIZE else 0
        ops.append(_with_generations(state, kind, flags, step, slot, aux, gen, aux_gen, size))
    if at != end:
        raise ValueError("past the section's end")
    return ops
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
