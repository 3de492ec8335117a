"""What the layout records say: peak live bytes, internal fragmentation,
address span, false sharing and address reuse.

Everything is computed from the records in `seq` order (one order of all
threads' events, see probes/probe_layout.h) with numpy, so a run of millions
of calls is summarised in seconds. Definitions:

* a block's *owner* is the thread that allocated it; it is alive from its
  allocation's seq to its free's seq (or to the end);
* a cache line is *shared* (active false sharing, cache-thrash) if at some
  moment it held bytes of live blocks of two or more owners; a block holds the
  lines its requested bytes cover (a zero-byte block holds none). Only a
  block's first and last line can hold another block's bytes, so only those
  are examined;
* an allocation *reuses* an address if an earlier block started at the same
  address; it is a *handoff* (passive false sharing, cache-scratch) if that
  earlier block had another owner: memory one thread used is given to another.
"""

from dataclasses import dataclass
from typing import Dict

import numpy as np

from .layoutfile import ALLOC, FREE

CACHE_LINE = 64
PAGE = 4096


@dataclass
class Blocks:
    """One entry per allocation, in seq order of allocation."""
    addr: np.ndarray
    size: np.ndarray
    usable: np.ndarray
    owner: np.ndarray
    start: np.ndarray       # seq of the allocation
    end: np.ndarray         # seq of the free, or `never` if not freed
    reused: np.ndarray      # bool: an earlier block started at this address
    handoff: np.ndarray     # bool: ... and it had another owner
    never: int              # larger than any seq
    unmatched_frees: int


def blocks(records: np.ndarray) -> Blocks:
    """Pair every allocation with its free (same address, next event there)."""
    n = len(records)
    never = int(records["seq"].max()) + 1 if n else 1
    order = np.lexsort((records["seq"], records["addr"]))  # by address, then time
    r = records[order]
    is_alloc = r["event"] == ALLOC
    same_next = np.zeros(n, bool)
    same_next[:-1] = r["addr"][1:] == r["addr"][:-1]
    freed = is_alloc & same_next & np.append(r["event"][1:] == FREE, False)
    end = np.full(n, never, dtype=np.int64)
    end[freed] = r["seq"][np.flatnonzero(freed) + 1].astype(np.int64)
    reused = is_alloc & np.insert(same_next[:-1], 0, False)
    # The earlier block at this address: two events back is its allocation.
    prev_owner = np.full(n, -1, dtype=np.int64)
    back2 = np.zeros(n, bool)
    back2[2:] = reused[2:] & (r["addr"][:-2] == r["addr"][2:]) & (r["event"][:-2] == ALLOC)
    prev_owner[back2] = r["thread"][np.flatnonzero(back2) - 2]
    handoff = back2 & (prev_owner != r["thread"])
    # Frees with no allocation before them at that address.
    is_free = ~is_alloc
    after_alloc = np.insert(is_alloc[:-1] & same_next[:-1], 0, False)
    unmatched = int(np.count_nonzero(is_free & ~after_alloc))

    pick = np.flatnonzero(is_alloc)
    by_time = pick[np.argsort(r["seq"][pick], kind="stable")]
    return Blocks(addr=r["addr"][by_time].astype(np.uint64), size=r["size"][by_time].astype(np.int64),
                  usable=r["usable"][by_time].astype(np.int64), owner=r["thread"][by_time].astype(np.int64),
                  start=r["seq"][by_time].astype(np.int64), end=end[by_time], reused=reused[by_time],
                  handoff=handoff[by_time], never=never, unmatched_frees=unmatched)


def live_curve(b: Blocks):
    """(seq of each event, live requested bytes after it, live usable bytes after it)."""
    seq = np.concatenate([b.start, b.end[b.end < b.never]])
    req = np.concatenate([b.size, -b.size[b.end < b.never]])
    use = np.concatenate([b.usable, -b.usable[b.end < b.never]])
    order = np.argsort(seq, kind="stable")
    return seq[order], np.cumsum(req[order]), np.cumsum(use[order])


def _group_running_max(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Running maximum of `values` (>= 0) restarting at each new group; rows are
    sorted by group. Offsetting each group above all earlier ones lets one
    np.maximum.accumulate do it."""
    if not len(values):
        return values
    span = int(values.max()) + 1
    _, group_id = np.unique(groups, return_inverse=True)
    offset = group_id.astype(np.int64) * span
    return np.maximum.accumulate(values + offset) - offset


def _covered(lo: np.ndarray, hi: np.ndarray) -> int:
    """How many units the union of the inclusive ranges [lo, hi] covers."""
    if not len(lo):
        return 0
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    reach = np.maximum.accumulate(hi)
    new = np.ones(len(lo), bool)
    new[1:] = lo[1:] > reach[:-1]
    heads = np.flatnonzero(new)
    return int(np.sum(np.maximum.reduceat(hi, heads) - lo[heads] + 1))


def shared_lines(b: Blocks, line: int = CACHE_LINE):
    """(lines that ever held live bytes of two owners at once, lines that ever held bytes)."""
    has_bytes = b.size > 0
    first = (b.addr[has_bytes] // line).astype(np.int64)
    last = ((b.addr[has_bytes] + b.size[has_bytes].astype(np.uint64) - 1) // line).astype(np.int64)
    owner, start, end = b.owner[has_bytes], b.start[has_bytes], b.end[has_bytes]
    used = _covered(first, last)
    two = last != first
    lines = np.concatenate([first, last[two]])
    owners = np.concatenate([owner, owner[two]])
    starts = np.concatenate([start, start[two]])
    ends = np.concatenate([end, end[two]])
    if len(lines) < 2:
        return 0, used
    # 1. Merge each owner's overlapping stays on a line, so that two stays
    #    that overlap afterwards must belong to different owners.
    order = np.lexsort((starts, owners, lines))
    lines, owners, starts, ends = lines[order], owners[order], starts[order], ends[order]
    key = lines * (int(owners.max()) + 1) + owners
    reach = _group_running_max(ends, key)
    new = np.ones(len(lines), bool)
    new[1:] = (key[1:] != key[:-1]) | (starts[1:] > reach[:-1])
    heads = np.flatnonzero(new)
    m_lines, m_starts = lines[heads], starts[heads]
    m_ends = np.maximum.reduceat(ends, heads)
    # 2. On each line, a stay that begins before an earlier stay ended overlaps it.
    order = np.lexsort((m_starts, m_lines))
    m_lines, m_starts, m_ends = m_lines[order], m_starts[order], m_ends[order]
    reach = _group_running_max(m_ends, m_lines)
    overlap = np.zeros(len(m_lines), bool)
    overlap[1:] = (m_lines[1:] == m_lines[:-1]) & (m_starts[1:] < reach[:-1])
    return len(np.unique(m_lines[overlap])), used


def touched_bytes(b: Blocks, page: int = PAGE) -> int:
    """Bytes of the pages that ever held a block (its requested or usable bytes)."""
    if not len(b.addr):
        return 0
    extent = np.maximum(np.maximum(b.size, b.usable), 1).astype(np.uint64)
    lo = (b.addr // page).astype(np.int64)
    hi = ((b.addr + extent - 1) // page).astype(np.int64)
    return _covered(lo, hi) * page


def summarize(records: np.ndarray) -> Dict[str, float]:
    """The layout figures, named as the probe's metrics (without the prefix)."""
    b = blocks(records)
    n = len(b.addr)
    out: Dict[str, float] = {"allocations": float(n), "frees": float(np.count_nonzero(b.end < b.never)),
                             "unmatched_frees": float(b.unmatched_frees)}
    if n == 0:
        return out
    _, live_req, live_use = live_curve(b)
    peak_at = int(np.argmax(live_req))
    out["peak_live_bytes"] = float(max(0, live_req[peak_at]))
    out["peak_live_usable_bytes"] = float(max(0, live_use[peak_at]))
    total_usable = int(b.usable.sum())
    out["usable_short"] = float(np.count_nonzero(b.usable < b.size))
    if total_usable > 0:
        out["internal_frag"] = 1.0 - float(b.size.sum()) / total_usable
    if live_use[peak_at] > 0:
        out["internal_frag_at_peak"] = 1.0 - float(live_req[peak_at]) / float(live_use[peak_at])
    extent = np.maximum(b.size, b.usable).astype(np.uint64)
    out["address_span_bytes"] = float(int((b.addr + extent).max()) - int(b.addr.min()))
    out["touched_kib"] = touched_bytes(b) / 1024
    shared, used = shared_lines(b)
    out["shared_lines"] = float(shared)
    out["lines_used"] = float(used)
    if used:
        out["shared_line_fraction"] = shared / used
    out["reuse_fraction"] = float(np.count_nonzero(b.reused)) / n
    out["handoffs"] = float(np.count_nonzero(b.handoff))
    out["handoff_fraction"] = float(np.count_nonzero(b.handoff)) / n
    return out
