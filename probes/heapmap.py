"""The heap map: how full each stretch of the address space is, over time.

The address space a scenario touches is scattered (a main heap, thread
arenas, mmapped chunks far apart), so the map drops what was never touched:
the 4 KiB pages that ever held a block are laid end to end and cut into at
most `rows` rows of equal size (whole cache lines); rows where the addresses
jump are marked.
Time is the order of events (`seq`), cut into at most `bins` steps; the
colour of a cell is the fraction of the row's bytes held by live blocks
(requested bytes) after the last event of that step -- in the spirit of
Figure 9 of the jemalloc paper.

`draw` puts one map per allocator side by side; `animate` is the "player":
a GIF of the heap filling and emptying, each frame the rows of one time step
wrapped into a square.
"""

import math
from dataclasses import dataclass
from typing import List, Mapping

import numpy as np

from .layoutstats import CACHE_LINE as LINE, PAGE, Blocks, blocks, live_curve
from ..system.units import fmt_bytes


@dataclass
class HeapMap:
    fullness: np.ndarray      # [time step, row] in 0..1
    step_end: np.ndarray      # [time step]: seq of the step's last event (exclusive bound)
    row_addr: np.ndarray      # [row]: first address of the row
    row_bytes: int            # bytes per row
    jumps: np.ndarray         # rows whose first address does not follow the previous row's
    live_bytes: np.ndarray    # [time step]: requested bytes alive at the end of the step
    touched_bytes: int


def _page_runs(lo: np.ndarray, hi: np.ndarray):
    """Maximal runs of consecutive touched pages: (first page, last page) arrays."""
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    reach = np.maximum.accumulate(hi)
    new = np.ones(len(lo), bool)
    new[1:] = lo[1:] > reach[:-1] + 1  # adjacent pages join a run
    heads = np.flatnonzero(new)
    return lo[heads], np.maximum.reduceat(hi, heads)


def compute(records, rows: int = 256, bins: int = 200) -> HeapMap:
    b: Blocks = blocks(records)
    keep = b.size > 0
    addr, size = b.addr[keep], b.size[keep].astype(np.uint64)
    start, end = b.start[keep], b.end[keep]
    never = b.never
    if not len(addr):
        empty = np.zeros((1, 1))
        return HeapMap(empty, np.array([never]), np.zeros(1, np.uint64), PAGE, np.zeros(0, int),
                       np.zeros(1), 0)
    lo_page = (addr // PAGE).astype(np.int64)
    hi_page = ((addr + size - 1) // PAGE).astype(np.int64)
    run_lo, run_hi = _page_runs(lo_page, hi_page)
    run_pages = run_hi - run_lo + 1
    run_offset = np.concatenate([[0], np.cumsum(run_pages)[:-1]])  # in pages, compressed
    total = int(run_pages.sum()) * PAGE
    # Rows of whole cache lines, never fewer bytes than one line.
    cap = max(LINE, math.ceil(total / rows / LINE) * LINE)
    n_rows = math.ceil(total / cap)

    # Compressed position of every block (a block lies inside one run).
    k = np.searchsorted(run_lo, lo_page, side="right") - 1
    pos = (run_offset[k] + (lo_page - run_lo[k])) * PAGE + (addr % PAGE).astype(np.int64)
    size_i = size.astype(np.int64)
    first_row = pos // cap
    last_row = (pos + size_i - 1) // cap

    n_steps = int(min(bins, never))
    step_of = lambda seq: np.minimum((seq.astype(np.float64) * n_steps / never).astype(np.int64), n_steps)

    # Spread blocks over the rows they cover (most cover one).
    spans = (last_row - first_row + 1).astype(np.int64)
    idx = np.repeat(np.arange(len(pos)), spans)
    row = first_row[idx] + (np.arange(len(idx)) - np.repeat(np.cumsum(spans) - spans, spans))
    row_lo = np.maximum(pos[idx], row * cap)
    row_hi = np.minimum(pos[idx] + size_i[idx], (row + 1) * cap)
    part = (row_hi - row_lo).astype(np.float64)

    delta = np.zeros((n_steps + 1, n_rows))
    np.add.at(delta, (step_of(start[idx]), row), part)
    freed = end[idx] < never
    np.add.at(delta, (step_of(end[idx][freed]), row[freed]), -part[freed])
    fullness = np.clip(np.cumsum(delta, axis=0)[:n_steps] / cap, 0.0, 1.0)

    step_end = np.ceil((np.arange(1, n_steps + 1)) * never / n_steps).astype(np.int64)
    seq, live, _ = live_curve(b)
    at = np.searchsorted(seq, step_end, side="left") - 1
    live_bytes = np.where(at >= 0, live[np.maximum(at, 0)], 0)

    first_byte = np.arange(n_rows, dtype=np.int64) * cap
    r = np.searchsorted(run_offset * PAGE, first_byte, side="right") - 1
    row_addr = (run_lo[r] * PAGE + (first_byte - run_offset[r] * PAGE)).astype(np.uint64)
    jumps = np.flatnonzero(np.diff(row_addr.astype(np.float64)) != cap) + 1
    return HeapMap(fullness, step_end, row_addr, cap, jumps, live_bytes.astype(np.float64), total)


def draw(maps: Mapping[str, HeapMap], path, title: str = "") -> None:
    """Address-space maps side by side, one per allocator, saved to `path`."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    n = len(maps)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n + 1, 5.2), squeeze=False, constrained_layout=True)
    image = None
    for ax, (name, m) in zip(axes[0], maps.items()):
        steps, n_rows = m.fullness.shape
        image = ax.imshow(m.fullness.T, origin="lower", aspect="auto", cmap="magma", vmin=0, vmax=1,
                          interpolation="nearest", extent=(0, float(m.step_end[-1]), 0, n_rows))
        for j in m.jumps:
            ax.axhline(j, color="#5fb3ff", linewidth=0.6, alpha=0.8)
        ticks = sorted({0, *m.jumps[:6].tolist()})
        ax.set_yticks([t + 0.5 for t in ticks])
        ax.set_yticklabels([f"{int(m.row_addr[t]):#x}" for t in ticks], fontsize=7)
        ax.set_xlabel("operation (all threads, in order)")
        ax.set_title(f"{name}\n{fmt_bytes(m.touched_bytes)} touched, rows of {fmt_bytes(m.row_bytes)}", fontsize=9)
    axes[0][0].set_ylabel("address (touched pages only; blue: a jump)")
    if image is not None:
        fig.colorbar(image, ax=axes[0].tolist(), label="fraction of the row held by live blocks")
    if title:
        fig.suptitle(title)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _grid(values: np.ndarray, width: int) -> np.ndarray:
    """Rows of one time step wrapped into a width-wide grid; padding is NaN (blank)."""
    height = math.ceil(len(values) / width)
    out = np.full(height * width, np.nan)
    out[:len(values)] = values
    return out.reshape(height, width)


def animate(maps: Mapping[str, HeapMap], path, fps: int = 10, frames: int = 100, title: str = "") -> int:
    """The player: an animated GIF of every allocator's heap over time. Returns the frame count."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import animation
    names = list(maps)
    n_frames = max(1, min(frames, max(m.fullness.shape[0] for m in maps.values())))
    fig, axes = plt.subplots(1, len(names), figsize=(3.4 * len(names), 3.9), squeeze=False)
    images, labels = [], []
    for ax, name in zip(axes[0], names):
        m = maps[name]
        width = max(1, math.ceil(math.sqrt(m.fullness.shape[1])))
        images.append((m, width, ax.imshow(_grid(m.fullness[0], width), cmap="magma", vmin=0, vmax=1,
                                           interpolation="nearest")))
        ax.set_axis_off()  # no ticks to lay out: drawing a frame stays cheap
        ax.set_title(f"{name}: {fmt_bytes(m.touched_bytes)} touched", fontsize=9)
        labels.append(ax.text(0.5, -0.04, "", transform=ax.transAxes, ha="center", va="top", fontsize=9))
    suptitle = fig.suptitle(title)

    def frame(i: int) -> List:
        for (m, width, image), label in zip(images, labels):
            step = min(m.fullness.shape[0] - 1, int(i * m.fullness.shape[0] / n_frames))
            image.set_data(_grid(m.fullness[step], width))
            label.set_text(f"live {fmt_bytes(m.live_bytes[step])}")
        suptitle.set_text(f"{title}  {100 * (i + 1) / n_frames:.0f}% of the operations".strip())
        return [im for _, _, im in images] + labels + [suptitle]

    anim = animation.FuncAnimation(fig, frame, frames=n_frames, blit=False)
    anim.save(str(path), writer=animation.PillowWriter(fps=fps))
    plt.close(fig)
    return n_frames
