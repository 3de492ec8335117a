"""A second ops-file encoder, for the tests only: the format's reference.

The package has one encoder, runtime/opsfmt.h's, which the converter uses.
This one is written from the format's description (trace/opsfile.py's module
doc) so test_opsfmt can check the C encoder byte for byte against it, and so
tests can write ops files by hand (test_replay_backpressure re-encodes a
converted file with its SYNC flags removed).
"""

import struct
from pathlib import Path
from typing import List, Optional, Tuple

from scenc.trace.opsfile import (AUX_KINDS, E_EXT, E_SIZE, HEADER, KIND_CODE, MAGIC, NONE, OP, SLOT_AUX, SYNC,
                                 THREAD_KINDS, TOUCH_MODES, WAIT, WAIT_OLD, X_AUX_FLIP, X_NO_SLOT,
                                 flags_table_size)


def _put(out: bytearray, v: int) -> None:
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)


def _zigzag(prev: int, slot: int) -> int:
    d = ((slot - prev + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
    return d << 1 if d >= 0 else (-d << 1) - 1


def encode_ops(records, out: bytearray, prev: int) -> int:
    """Append the OP records' encoding to `out`; prev: the thread's previous slot. Returns the new one."""
    put = _put
    for kind, flags, pos_hi, slot, aux, gen, aux_gen, pos_lo, size in OP.iter_unpack(records):
        ext = (flags >> 1 & 7) | (X_NO_SLOT if slot == NONE else 0) | \
            (X_AUX_FLIP if (aux != NONE) != (kind in AUX_KINDS) else 0)
        out.append(kind | (flags & WAIT) << 4 | (flags & SYNC) << 1 | (E_SIZE if size else 0) | (E_EXT if ext else 0))
        if ext:
            out.append(ext)
        if flags & SYNC:
            put(out, pos_hi << 32 | pos_lo)
        if slot != NONE:
            if kind in THREAD_KINDS:
                put(out, slot)
            else:
                put(out, _zigzag(prev, slot))
                prev = slot
        if flags & WAIT:
            put(out, gen)
        if aux != NONE:
            if kind in SLOT_AUX:
                put(out, _zigzag(prev, aux))
                prev = aux
            else:
                put(out, aux)
        if flags & WAIT_OLD:
            put(out, aux_gen)
        if size:
            put(out, size)
    return prev


def write_ops(path, threads: List[List[Tuple]], flags: Optional[List[int]] = None, touch: str = "none",
              window: int = 0) -> None:
    """An ops file from per-thread op tuples as `read_ops` gives them (tests, tools that edit ops files; the
    converter, runtime/tools/convert.c, writes its own with runtime/opsfmt.h)."""
    sections, slots = [], 0
    for ops in threads:
        records = bytearray()
        for kind, *fields in ops:
            records += OP.pack(KIND_CODE[kind], *fields)
            slot = fields[2] if kind not in ("spawn", "join") else NONE
            for s in (slot, fields[3] if kind in ("realloc", "remap") else NONE):
                if s != NONE:
                    slots = max(slots, s + 1)
        out = bytearray()
        encode_ops(records, out, 0)
        sections.append(bytes(out))
    offsets, at = [], 0
    for section in sections:
        offsets.append(at)
        at += len(section)
    offsets.append(at)
    data = HEADER.pack(MAGIC, len(threads), TOUCH_MODES.index(touch), slots, sum(map(len, threads)), window)
    data += struct.pack(f"<{len(offsets)}Q", *offsets) + _flags_table(flags or [0] * len(threads))
    tmp = Path(path).with_name(f".{Path(path).name}.tmp")
    tmp.write_bytes(data + b"".join(sections))
    tmp.replace(path)


def _flags_table(flags: List[int]) -> bytes:
    table = struct.pack(f"<{len(flags)}I", *flags)
    assert len(table) + (-len(table) % 8) == flags_table_size(len(flags))
    return table + b"\0" * (-len(table) % 8)
