"""The layout probe's binary file: reading it, and the record format.

The format is defined by probes/probe_layout.h: a 16-byte header
("SCNLAYT1", u32 version, u32 record size) and 40-byte little-endian records.
"""

import struct
from pathlib import Path

import numpy as np

MAGIC = b"SCNLAYT1"
VERSION = 1
HEADER = struct.Struct("<8sII")

DTYPE = np.dtype([
    ("seq", "<u8"), ("addr", "<u8"), ("size", "<u8"), ("usable", "<u8"),
    ("op_index", "<u4"), ("thread", "<u2"), ("op", "u1"), ("event", "u1"),
])
assert DTYPE.itemsize == 40

ALLOC, FREE = 0, 1
OP_NAMES = ("malloc", "calloc", "realloc", "aligned_alloc", "memalign", "posix_memalign", "free")


class LayoutFileError(ValueError):
    """A layout file that cannot be read; the message names the file."""


def read(path) -> np.ndarray:
    """All records, sorted by seq (the order of events across threads)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LayoutFileError(f"{path}: cannot read the layout file ({exc.strerror})") from None
    if len(data) < HEADER.size:
        raise LayoutFileError(f"{path}: too short for a layout file")
    magic, version, record_size = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise LayoutFileError(f"{path}: not a scenc layout file")
    if version != VERSION or record_size != DTYPE.itemsize:
        raise LayoutFileError(f"{path}: layout format {version} with {record_size}-byte records; "
                              f"this scenc reads format {VERSION} ({DTYPE.itemsize} bytes)")
    body = len(data) - HEADER.size
    if body % record_size:
        raise LayoutFileError(f"{path}: ends inside a record (the program stopped while writing?)")
    records = np.frombuffer(data, dtype=DTYPE, offset=HEADER.size)
    return np.sort(records, order="seq", kind="stable")


def write(path, records: np.ndarray) -> None:
    """The file the C side would write for these records (for tools and tests)."""
    with open(path, "wb") as f:
        f.write(HEADER.pack(MAGIC, VERSION, DTYPE.itemsize))
        f.write(np.asarray(records, dtype=DTYPE).tobytes())
