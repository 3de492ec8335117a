"""A fitted model of a capture: a short scenario with the capture's statistics, not its sequence.

    model = write_model(events, "app-model.scn", source_name="app.ltrace")
    print("\\n".join(model.summary_lines()))

`scenc convert --model` writes it; `scenc convert` without --model replays the
capture call by call (trace/replay.py). The model is for reading, editing and
scaling: what the program does to the heap, in a page.

What is fitted
--------------
* **Thread groups.** Threads whose calls per kind, mean size, cross-thread
  traffic and activity per phase are alike form one `thread NAME * N` group;
  its counts are the per-thread averages. The process's first thread (lowest
  tid) is `main` when it is alone in its group.
* **Phases.** The trace is cut into windows of events (at most MAX_WINDOWS;
  they double in length as the trace grows). A window range is split in two
  where the mean requested size, the net growth of live bytes or the call rate
  (with timestamps) changes most, if that change passes a threshold (2x in
  size, 0.5 in growth, 8x in rate between parts of 50 ms or more); then
  again in each part, up to
  ``max_phases``. Each phase is one `measure "phase N"` block with its own counts.
* **Sizes.** The requested bytes of each group in each phase, as a
  `histogram("...csv")` beside the scenario (exact below 1 KiB; above, 16
  classes per power of two, each at its mean). Realloc targets get their own.
* **Lifetimes.** An object freed by the thread that allocated it is a `lives`
  allocation. Its lifetime is counted as the `lives` clock counts: in
  allocator calls of that thread that the model makes with statements
  (allocations, reallocs, free(NULL), frees of received objects, ends of realloc
  chains); the `lives` frees themselves do not count. Objects still live at
  the end count as living to the end. A geometric of the same mean is used
  when a Kolmogorov-Smirnov test does not reject it (distance below
  max(0.05, 1.36/sqrt(n))); otherwise a weighted table of the log2-bucketed
  lifetimes (each bucket's mass exact, at its mean).
* **Cross-thread frees.** An object freed by another thread is sent to it:
  inside a group through a ring of channels (thread i hands one object to
  i+1 and frees one from i-1, so the ring cannot deadlock), between groups
  through one channel per direction. If the groups' traffic forms a cycle, its
  smallest flow is modelled as local frees instead (a cycle of waits could
  deadlock), and the header says so.
* **Reallocs.** Each thread grows one block at a time in `grow`: the capture's
  reallocs, with its realloc sizes, and chain ends (free, or handed to the
  thread that freed it) followed by a new block.
* **Counts.** Exact per thread: `for r in 0 .. R` rounds, a statement made n
  times runs `(r + 1) * n / R - r * n / R` times in round r (n in all, evenly
  spread). Channel totals between groups are split over the threads with the
  same formula on `self`, so sends and receives match exactly.

Streaming: one pass; memory holds the live objects, the per-thread clocks and,
per thread and window, counters and bucketed histograms (bounded in number).
Left out: failed allocations, frees of pointers never seen allocated, time
between calls, and which object a realloc grows when a thread grows several.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Tuple

from .model_collect import Collector
from .model_fit import Phase
from .model_write import NOT_MEASURED, Group, ModelWriter

__all__ = ["write_model", "measure_peak", "ModelResult", "ModelRunError"]


class ModelRunError(RuntimeError):
    """The model does not build or run: a bug of the model writer, said plainly."""


@dataclass
class ModelResult:
    scn_path: Path
    text: str
    data_files: List[Path]          # the histogram files written beside the scenario
    calls: int                      # calls in the capture
    model_calls: Dict[str, int]     # calls the model makes, by runtime counter (as `scenc exec` reports them)
    groups: List[Group]
    phases: List[Phase]
    figures: List[Tuple[str, str, str]]   # (figure, capture, model), as in the header
    fits: List[str]
    notes: List[str]

    def summary_lines(self) -> List[str]:
        out = ["groups: " + ", ".join(f"{g.name} x{g.n} (tid {', '.join(map(str, g.tids[:6]))}"
                                      f"{', ...' if g.n > 6 else ''})" for g in self.groups)]
        out.append(f"phases: {len(self.phases)}")
        for i, p in enumerate(self.phases, 1):
            out.append(f"  phase {i}: lines {p.first_line}-{p.last_line}, {p.events} calls"
                       + (f"; starts where the {p.why}" if p.why else ""))
        out += self.fits
        out.append(f"{'':<26}{'capture':>12}{'model':>14}")
        out += [f"{a:<26}{b:>12}{c:>14}" for a, b, c in self.figures]
        out += [f"note: {n}" for n in self.notes]
        return out

    def record_peak(self, peak_bytes: int) -> None:
        """Put the measured peak in the header's table (and the file)."""
        self.figures = [(a, b, str(peak_bytes) if c == NOT_MEASURED else c) for a, b, c in self.figures]
        lines = self.text.split("\n")
        for i, line in enumerate(lines):
            if line.startswith("#   live bytes, peak") and line.endswith(NOT_MEASURED):
                lines[i] = line[:-len(NOT_MEASURED)].rstrip().ljust(len(line) - len(NOT_MEASURED)) + \
                    f"{peak_bytes:>{len(NOT_MEASURED)}}"
        self.text = "\n".join(lines)
        self.scn_path.write_text(self.text)


def measure_peak(result: ModelResult, cc: str = "gcc", timeout: float = 120.0) -> int:
    """Build the model with the `live` probe, run it once, record its peak of live bytes; returns it.

    Also proves that the model builds and finishes (its channels cannot deadlock)."""
    import json
    import subprocess
    from .. import probes
    from ..compiler.pipeline import build
    b = build(result.scn_path, cc=cc, probes=probes.c_parts("live"))
    try:
        proc = subprocess.run([str(b.binary)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ModelRunError(f"the model {result.scn_path} did not finish within {timeout:.0f} s (a model "
                            f"should never wait forever: a bug of scenc's model writer)") from None
    if proc.returncode != 0:
        raise ModelRunError(f"the model {result.scn_path} failed (status {proc.returncode}): "
                            f"{proc.stderr.strip()[-500:]}")
    peak = int(json.loads(proc.stdout)["probes"]["live"]["peak_bytes"])
    result.record_peak(peak)
    return peak


def write_model(events: Iterable, scn_path, source_name: str, max_phases: int = 4) -> ModelResult:
    """Fit a model to a stream of AllocEvents; write the scenario and its histogram files beside it."""
    col = Collector().consume(events)
    col.finish()
    scn_path = Path(scn_path)
    writer = ModelWriter(col, scn_path, source_name, max_phases)
    text = writer.write()
    scn_path.write_text(text)
    return ModelResult(scn_path, text, writer.data_files, col.ordinal, dict(writer.tally_calls), writer.groups,
                       writer.phases, writer.figures, writer.fits, writer.notes)
