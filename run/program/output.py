"""A run's output, kept in files the launcher appends to: its tail for the record, its bytes for a metric, its
echo onto scenc's own streams (--show-output). The launcher says where each run's output lies (a span: start,
bytes); a server's files hold its one run."""

import os
from typing import Tuple


def whole_span(f) -> Tuple[int, int]:
    """The span of a whole file (a server's, a run of its own)."""
    return 0, os.fstat(f.fileno()).st_size


def span_tail(fd: int, span: Tuple[int, int], chars: int) -> str:
    """The last `chars` characters of the `span` (start, bytes) of a file (the launcher said where a run's are)."""
    start, size = span
    if size <= 0:
        return ""
    skip = max(0, size - chars * 2)
    return os.pread(fd, size - skip, start + skip).decode("utf-8", "replace")[-chars:]


def read_span(fd: int, span: Tuple[int, int]) -> bytes:
    start, size = span
    return os.pread(fd, size, start) if size > 0 else b""


def echo_output(f, stream, span: Tuple[int, int]) -> None:
    """A run's output, the `span` of its file, onto scenc's own stream (--show-output)."""
    start, size = span
    stream.flush()
    out = getattr(stream, "buffer", None)
    while size > 0:
        chunk = os.pread(f.fileno(), min(size, 1 << 16), start)
        if not chunk:
            break
        start, size = start + len(chunk), size - len(chunk)
        if out is not None:
            out.write(chunk)
        else:
            stream.write(chunk.decode("utf-8", "replace"))
    if out is not None:
        out.flush()
