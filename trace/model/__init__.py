"""A fitted model of a capture: a short scenario with the capture's statistics, not its sequence.

    model = write_model(events, "app-model.scn", source_name="app.ltrace")
    measure_peak(model)               # build with the `live` probe, run once, put the peak in the header
    print("\n".join(model.summary_lines()))

`scenc convert --model` does both; `scenc convert` without --model replays the
capture call by call (trace/replay.py). The model is for reading, editing and
scaling: what the program does to the heap, in a page. Its header compares the
capture with the model: calls per kind, mean requested size, share of
cross-thread frees (the model's column is computed from the statements
written, so `scenc exec` of the model reports exactly those calls) and the
peak of live bytes (measured: one run under glibc with the `live` probe).

What is fitted (trace/model/fit.py, trace/model/shape.py), and how it is written (trace/model/sizes.py, trace/model/plan.py,
trace/model/chains.py, trace/model/held.py, trace/model/stmt.py, trace/model/write.py)
----------------------------------------------------------------------------------------------------------
* **Phases.** The calls are cut into windows (at most 128; they double in
  length as the trace grows). Binary segmentation splits a range where the
  two sides differ most in typical size (geometric mean, 4x), growth
  ((allocations - frees) / (allocations + frees), 0.5 apart) or call rate
  (8x, between parts of 50 ms or more), if a side holds 2% of the calls at
  least; up to ``max_phases``. Each phase is a `measure "phase N"` block with
  its own counts; a `barrier` separates phases, so they follow one another in
  every thread as they did in the capture. A phase where a group makes no
  call of its own (a teardown that only frees) is a comment.
* **Thread groups.** Threads within 2x in calls and mean size, 0.15 in each
  share of calls (allocations, reallocs, free(NULL), frees of others'
  objects, objects sent) and alike in activity per phase form one `thread
  NAME * N` group with the per-thread averages; the lowest tid is `main` when
  alone.
* **Thread lifetimes** (captures with thread starts and exits: tracer logs,
  ltrace logs): a group whose threads were not all alive at once churns,
  `thread NAME * N at most K` with K the most of them alive at once in the
  capture, its threads in the order they started. Its ring of handoffs does
  not close (thread i hands to i + 1, the last frees its own: thread 0 would
  wait for the last thread, which starts only after it ends), each channel
  holds a thread's sends, and the ring's depth is divided among the K threads
  alive, not all N. A barrier would wait for threads not yet started, so such
  a model has one phase. A flow that the capture's first (or last) thread of
  a group made alone stays that thread's (`T * (1 / (self + 1))`), not spread
  over the group: a churning group's first thread takes what came before it.
* **Sizes.** Requested bytes per group and phase, in `histogram("...csv")`
  files beside the scenario: exact below 1 KiB, above 16 classes per power of
  two at their mean. Objects handed to another thread (`handed-sizes`) and
  objects still live at the end (`kept-sizes`) have histograms of their own:
  in programs they are often not the short-lived ones (a thread's results, a
  queue's items, a program's tables). Realloc targets per group and phase in
  their own file (a late burst of growth, e.g. a JSON text, stays in its phase).
  With one thread, a phase's few (at most 32) objects kept to the end and
  reallocs are written one by one with their sizes: drawn at random, the one
  big size among them could come out twice, or not at all. A group that hands
  objects to several partners (its ring and another group) has a histogram per
  partner (`handed-sizes-to-NAME`): mt_pthread_e's workers hand 314-byte
  objects to main on average, 264-byte ones to one another.
* **Where in a phase.** Statements are spread evenly over the phase's rounds,
  and one made once a phase runs in its last round; in a group of several
  threads rounded (the k-th of n runs k - 1/2 n-ths in: one made once runs in
  the middle round), as its threads run the same rounds and the last runs of
  all would meet in the last round in every thread at once. Some run once where they
  came instead (`if r == R0 { ... }`, R0 as far into the rounds as the call
  came into the phase on its thread's `lives` clock, whose ticks the rounds
  spread evenly): the big objects and big chains below, and a statement that
  makes one object kept to the end per thread (with one thread, the few kept
  ones written one by one), at the mean place of the phase's kept objects (a
  crashed capture's last objects came at its very end; a program's tables at
  its start).
* **Big objects.** With one thread, the objects of 1/64 of the capture's peak
  of live bytes or more, when at most 16 (trace/model/fit.py, big_objects),
  are written one by one: `malloc(SIZE) lives L` with their own size and
  lifetime, where they came. A few big blocks make much of a peak, and drawn
  from one size table and one lifetime table, the largest size would meet the
  longest lifetime by chance (python_json_e: a 296 KB block that lives 1635
  calls).
* **Large objects.** In each group and phase, the few objects freed by their own
  thread that weigh on the live bytes (from the lowest size class, of 64 B, 256 B,
  1 KiB, ... 1 MiB, on which they are at most 5% of those objects and hold a quarter
  of their sum of size x lifetime at least: trace/model/fit.py, large_class) have a
  statement of their own, `malloc(histogram("...-large-sizes.csv")) lives ...`, with
  their sizes, their lifetimes and their exact count, spread evenly over the phase.
  Drawn from one histogram and one lifetime table with the others, a 64 KiB block
  would get a small block's lifetime as often as its own, and their number (which
  makes the peak of live bytes) would be a chance of each draw.
* **Held objects.** With one thread, the objects freed by their own thread in a
  later phase than their own, or a quarter of their phase later at least (two
  windows at least), are held (model_shape._take_held_objects): allocated into
  a pool of the phase that frees them, `held_pN[in_pN] = malloc(...)  in_pN =
  in_pN + 1`, with sizes of their own (`held-sizes` files; the few of 1/64 of
  the capture's peak or more freed in a later phase one by one, at the phase's
  end), in each quarter of their phase as many as the capture made there,
  spread over the windows of the middle 90% of them; freed likewise in each
  quarter of the phase that frees them, a random one of those in the pool each
  time. A start-up builds objects that live to the teardown: drawn from the
  phase's lifetime table wherever they came, as many died inside the phase as
  outlived it (python3's start-up: 800 objects live at the peak, not 1400).
  The objects of one thread still live at the end are placed by quarter too.
  The held objects' frees move the model's `lives` clock, which the capture's
  does not count them on.
* **Lifetimes.** An object freed by its own thread is a `lives` allocation; its
  lifetime is counted as the `lives` clock counts: in the thread's calls that
  the model makes with statements (allocations, reallocs, free(NULL), frees of
  received objects, ends of realloc chains), the `lives` frees not counted.
  Objects still live at the end are `lives forever`. A geometric
  of the capture's mean (`geometric(mean = m + 1) - 1`) when a
  Kolmogorov-Smirnov test does not reject it (distance below
  max(0.05, 1.36/sqrt(n))), else a `weighted` table of the lifetime buckets,
  neighbours merged to 16 entries, each at its mean (same mean; its KS
  distance is in the comment above the phase).
* **Cross-thread frees.** An object freed by another thread is sent to it:
  inside a group over a ring of channels (thread i hands one object to i+1 and
  frees one from i-1 in one step, so the ring cannot deadlock; the threads
  first send, all together, as many objects as the group's threads had handed
  to one another and not yet freed most of the time in the capture (the median
  over its calls) less n - 1, spread by `self`, and each frees as many as it
  sent first after its rounds, so they stay in flight: a thread waiting
  mid-step holds one more, and all but one wait most of the time; a churning
  group: the most in flight per thread alive, less one, per thread), between
  groups over one channel per direction, with totals split over the threads by
  `self` so that sends and receives match exactly, phase by phase. The
  receives the capture made only after the senders' last allocation of the
  phase for them (a main thread that frees its workers' results once it has
  joined them) come at the start of the next phase, after its barrier: a
  receive of the model runs as soon as its object is sent. A channel
  between groups holds at most as many objects as were in flight at once
  between them in the capture (allocated by one, not yet freed by the other):
  that back-pressure keeps a producer from running ahead of its consumer, so
  the model's peak of live bytes is not the whole flow's. Bounded channels
  whose statements are spread evenly could wait on each other around any loop
  of channels, whatever their directions, so the channels between groups form
  a forest: the heaviest flows that close no loop keep their channel, the
  others are freed by their owner itself (`lives`), and the header says so.
* **Reallocs.** A thread holds a chain from its start to its end, or to its
  last realloc when another thread frees it (then it is in flight, counted
  with the handoffs above, and handed over in the phase of that realloc). Each thread grows as many blocks at once (`pool
  grow[K]`) as it held realloc chains at once in the capture (at most 4096), a
  random one
  at each realloc, with the capture's realloc sizes; a chain ends as in the
  capture (freed, or handed to the thread that freed it) and a new block
  starts, of each kind as often as the capture's chains started with it (an
  empty pool slot when they started with realloc(NULL, n)). After the phases
  every slot is freed (free(NULL) for an empty one). realloc(p, 0) that freed
  its block is a free. Large realloc sizes (from the lowest size class on which
  they are at most a quarter of a phase's reallocs and hold half their bytes at
  least: model_fit.large_realloc_class) grow only the first K blocks of the pool,
  K the most blocks of that class or above the thread held at once in the
  capture, and the other sizes the rest: a program grows one big buffer among many
  small blocks, and drawn for any block the big sizes would pile up in several.
  Big chains: with one thread, the chains whose largest size is a large realloc
  size, when at most 16 with 1024 reallocs in all, freed by the thread or live
  at the end (model_fit.big_chains), are written step by step in a pool of
  their own (`big[K]`), each start, realloc and free where it came, sizes in
  their order (a start frees its empty slot first, free(NULL), one of the
  capture's when it has one: the checker cannot follow a slot through the
  rounds' `if`s): a buffer grown from 600 bytes to 2.2 MB stands at its
  largest when the capture's did, not at a random one of its sizes
  (python_json_e: 0.7x). Brief chains: when a group's threads, growing one
  block at a time, held it less than half of the time (their `lives` clock),
  each chain is one statement, `grow = malloc(n)  grow = realloc(grow, m) ...`
  then freed or handed on (around the ring, or over a channel to another
  group), and no block is held between chains (mt_pthread_crashed_e: a 32-byte
  block grown to 1 KB now and then and handed on at once; held all along, four
  threads held 4 KB where the capture's peak is 3.8 KB; mt_pthread_e: each
  block grown once, its reallocs drawn apart from its ends, half the blocks
  handed to main had not been grown).
* **Threads end together** when the model has several groups, none churning,
  and objects that `lives forever`: a last `barrier` in every thread. Such an
  object lives to its thread's end; in the capture its thread lived to the
  end (a main thread waits for its workers), but a thread of the model ends
  when its statements are done (mt_handoff_x_crashed: main's 5 KB, half the
  peak, was freed before the workers got going). Also when a group's objects
  live at the end were lost handoffs (it hands over more than it frees itself:
  a crash or a cut lost their frees; no group churning): those come after the
  last barrier, once every thread has drained the ring and channels, not on top
  of the others' last objects in flight.
* **Calibration** (calibrate_peak; `scenc convert --model` unless --no-measure or
  --no-calibrate). The peak of live bytes is a statistic of the trace, like its
  sizes and lifetimes, so the model is fitted to it too (never to an allocator's
  result): the model is run with the `live` probe, once with each of the seeds 1-3,
  and when the mean of their peaks is more than 5% off the capture's, the lifetimes
  of the objects freed by their own thread are scaled (`lives (fit) * life_scale /
  100`, `param life_scale` in percent, 67 to 150) by bisection until it is not, or
  as near as the range allows (the peak grows with the scale: with the same draws,
  every object lives as long or longer); when no scale in the range closes half
  the gap at least, lifetimes are not what makes the peak (handoffs, realloc
  chains, the threads' timing) and they stay as fitted. A comment above the param gives the
  capture's peak and every scale tried with its ratio. The scale trades the
  lifetimes' fidelity for the peak's: a model within 5% keeps its fitted lifetimes.
  Deterministic for single-threaded models; a threaded model's peak varies with
  the threads' timing, so its scale may differ from one conversion to the next.
* **Counts.** Exact per thread: in `for r in 0 .. R`, a statement made n times
  runs `(r + 1) * n / R - r * n / R` times in round r (in a group of several
  threads `((r + 1) * n + R / 2) / R - (r * n + R / 2) / R`): n in all, evenly
  spread.

Streaming (trace/model/collect.py): one pass; memory holds the live objects,
a clock per thread and, per thread and window, counters and bucketed
histograms, whose number is bounded. Left out, and said in the header when it
happens: failed allocations, frees of pointers never seen allocated. Not
modelled: the time between calls, which object a realloc grows when a thread
grows several (and the order of their sizes, but for the big chains), any link
between an object's size and its lifetime beyond the handed, kept, large and big
objects, and who exactly frees whose objects beyond the group (a ring stands for
any pattern).
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

from .collect import Collector
from .fit import Phase
from .shape import Group
from .write import NOT_MEASURED, ModelWriter

__all__ = ["write_model", "measure_peak", "calibrate_peak", "ModelResult", "ModelRunError"]

CALIBRATION_SEEDS = 3        # the model's peak is the mean of its peaks with seeds 1 .. this
CALIBRATION_TOLERANCE = 0.05  # left alone when that mean is within 5% of the capture's peak
SCALE_RANGE = (67, 150)      # the lifetime scale, in percent, stays in this range ...
CALIBRATION_STEPS = 6        # ... and is searched (bisection) in this many steps at most


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
    capture_peak: int = 0           # the capture's peak of live bytes
    writer: Optional[ModelWriter] = None

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
    peak = _run_live(result.scn_path, cc, timeout)
    result.record_peak(peak)
    return peak


def _run_live(scn_path: Path, cc: str, timeout: float, params: Optional[dict] = None) -> int:
    """The peak of live bytes of one run of a scenario built with the `live` probe."""
    import json
    import subprocess
    from ... import probes
    from ...compiler.pipeline import build
    b = build(scn_path, params=params, cc=cc, probes=probes.c_parts("live"))
    try:
        proc = subprocess.run([str(b.binary)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ModelRunError(f"the model {scn_path} did not finish within {timeout:.0f} s (a model "
                            f"should never wait forever: a bug of scenc's model writer)") from None
    if proc.returncode != 0:
        raise ModelRunError(f"the model {scn_path} failed (status {proc.returncode}): "
                            f"{proc.stderr.strip()[-500:]}")
    return int(json.loads(proc.stdout)["probes"]["live"]["peak_bytes"])


def calibrate_peak(result: ModelResult, cc: str = "gcc", timeout: float = 120.0) -> Optional[int]:
    """Scale the lifetimes of the objects freed by their own thread so that the model's peak of live bytes
    (the mean over seeds 1 .. CALIBRATION_SEEDS, one run each with the `live` probe) is the capture's.

    The capture's peak is a statistic of the trace, like its sizes and lifetimes: the model is tuned to
    it, never to an allocator's result. Left alone (returns None) when the fitted model is within
    CALIBRATION_TOLERANCE already; otherwise the scale (percent, in SCALE_RANGE) is searched by bisection
    (the peak grows with the scale: with the same draws every object lives as long or longer), the
    model rewritten with `param life_scale` and a comment that says how it was found; returns the scale.
    When no scale in the range closes half the gap at least, the lifetimes are not what makes the
    peak, and the model keeps them as fitted (returns None), even when the best scale would land
    within the tolerance."""
    writer, target = result.writer, result.capture_peak
    if writer is None or target <= 0:
        return None
    seed_files = [result.scn_path.with_name(f"{result.scn_path.stem}.seed{k}.scn")
                  for k in range(1, CALIBRATION_SEEDS + 1)]

    def ratio(scale: Optional[int]) -> float:
        for k, path in enumerate(seed_files, 1):
            path.write_text(result.text.replace("\nseed 1\n", f"\nseed {k}\n", 1))
        params = None if scale is None else {"life_scale": scale}
        peaks = [_run_live(path, cc, timeout, params) for path in seed_files]
        return sum(peaks) / len(peaks) / target

    try:
        first = ratio(None)
        if abs(first - 1) <= CALIBRATION_TOLERANCE or not any(" lives " in line and "forever" not in line
                                                              for line in result.text.splitlines()):
            return None
        writer.life_scale = 100
        writer.calibration = "(being calibrated)"
        result.text = writer.write()
        lo, hi = SCALE_RANGE
        tried = {100: first}
        if first < 1:
            lo, tried[hi] = 100, ratio(hi)
        else:
            hi, tried[lo] = 100, ratio(lo)
        for _ in range(CALIBRATION_STEPS):
            if min(abs(r - 1) for r in tried.values()) <= CALIBRATION_TOLERANCE or hi - lo <= 1:
                break
            mid = round((lo * hi) ** 0.5)           # lifetimes multiply: the geometric middle
            if mid in tried:
                break
            tried[mid] = ratio(mid)
            lo, hi = (mid, hi) if tried[mid] < 1 else (lo, mid)
    finally:
        for path in seed_files:
            path.unlink(missing_ok=True)
    scale = min(tried, key=lambda s: (abs(tried[s] - 1), abs(s - 100)))
    if abs(tried[scale] - 1) > abs(first - 1) / 2:
        # Lifetimes are not what makes this peak (handoffs, realloc chains, threads' timing): keep them as
        # fitted. Lifetimes are the trace's too: a scale that buys less than half the gap (0.95x -> 0.97x
        # for 1.5x the lifetimes) costs more fidelity than it gives.
        writer.life_scale = None
        result.text = writer.write()
        result.scn_path.write_text(result.text)
        return None
    writer.life_scale = scale
    writer.calibration = (
        f"life_scale: the lifetimes of the objects freed by their own thread, in percent of the fitted ones "
        f"(`lives (fit) * life_scale / 100`). Calibrated by scenc convert on the capture's peak of live bytes "
        f"({target}, a statistic of the trace): the model's peak, mean of seeds 1-{CALIBRATION_SEEDS} with the "
        f"`live` probe, was {first:.3f}x the capture's with the fitted lifetimes, {tried[scale]:.3f}x at "
        f"{scale}% (tried: " + ", ".join(f"{s}% {r:.3f}x" for s, r in sorted(tried.items())) + ")")
    result.text = writer.write()
    result.scn_path.write_text(result.text)
    result.fits, result.notes, result.figures, result.data_files = writer.fits, writer.notes, writer.figures, \
        writer.data_files
    result.notes.append(f"lifetimes x{scale / 100:g} (`param life_scale`), calibrated on the capture's peak of "
                        f"live bytes: the model's was {first:.2f}x the capture's, now {tried[scale]:.2f}x "
                        f"(mean of seeds 1-{CALIBRATION_SEEDS})")
    return scale


def write_model(events: Iterable, scn_path, source_name: str, max_phases: int = 4,
                touch: str = "none") -> ModelResult:
    """Fit a model to a stream of AllocEvents; write the scenario and its histogram files beside it. touch:
    what every new block gets (`touch_new`; an exact replay's --touch modes)."""
    col = Collector().consume(events)
    col.finish()
    scn_path = Path(scn_path)
    writer = ModelWriter(col, scn_path, source_name, max_phases, touch)
    text = writer.write()
    scn_path.write_text(text)
    return ModelResult(scn_path, text, writer.data_files, col.ordinal, dict(writer.tally_calls), writer.groups,
                       writer.phases, writer.figures, writer.fits, writer.notes, col.peak_bytes, writer)
