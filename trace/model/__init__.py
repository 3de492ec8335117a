"""A fitted model of a capture: a short scenario with the capture's statistics, not its call sequence.

    model = write_model(events, "app-model.scn", source_name="app.trace", clock="preload")
    fit_work(model)                   # the program's time between calls as `work`, the model's own call cost less
    calibrate_peak(model)             # scale lifetimes until the model's peak of live bytes is the capture's
    measure_peak(model)               # build with the `live` probe, run once, put the peak in the header
    print("\n".join(model.summary_lines()))

`scenc convert --model` runs these four (without --model, convert writes the exact replay:
trace/replay.py). The model is made in one streaming pass (collect.py; for a tracer log the same pass in C,
native.py), then fit.py -> shape.py -> sizes.py and files.py -> plan.py (with chains.py, held.py, burst.py, stmt.py)
-> write.py; this module holds the
entry points and the calibration. What a model keeps and leaves out: docs/capture.md, "scenc convert
--model"; how the modules fit together: docs/architecture.md, "Inside the subsystems".
"""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

from .collect import Collector
from .fit import Phase, map_written_percent
from .image import ProgramImage
from .runs import MODEL_IDLE_S, ModelRunError, ModelRuns, ModelStuck, scalable
from .shape import Group
from .work import WorkCost, measure_cost
from .write import NOT_MEASURED, ModelWriter

__all__ = ["write_model", "fit_work", "measure_peak", "calibrate_peak", "calibration_runs", "ensure_finishes", "finishes_unrun",
           "ModelResult", "ModelRunError", "ModelRuns", "remove_model", "with_seed"]

CALIBRATION_SEEDS = 3        # the model's peak is the mean of its peaks with seeds 1 .. this
CALIBRATION_TOLERANCE = 0.05  # left alone when that mean is within 5% of the capture's peak
SCALE_RANGE = (67, 150)      # the lifetime scale, in percent, stays in this range ...
CALIBRATION_STEPS = 6        # ... and is searched (bisection) in this many steps at most
SEED_TOLERANCE = 0.05        # seed 1 is kept when its peak is within 5% of the capture's; else the nearest seed



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
    capture_mapped_peak: int = 0    # the capture's peak of bytes in the program's own writable mappings
    mapped_peak: Optional[int] = None   # the model's, once measured (None: it maps nothing)

    def summary_lines(self) -> List[str]:
        out = ["groups: " + ", ".join(f"{g.name} x{g.n} (tid {', '.join(map(str, g.tids[:6]))}"
                                      f"{', ...' if g.n > 6 else ''})" for g in self.groups)]
        out.append(f"phases: {len(self.phases)}")
        for i, p in enumerate(self.phases, 1):
            out.append(f"  phase {i}: lines {p.first_line}-{p.last_line}, {p.events} calls"
                       + (f"; starts where the {p.why}" if p.why else ""))
        out += self.fits
        if self.writer is not None:
            out += [f"keeps and drops: {line}" for line in self.writer.kept_dropped]
        out.append(f"{'':<26}{'capture':>12}{'model':>14}")
        out += [f"{a:<26}{b:>12}{c:>14}" for a, b, c in self.figures]
        out += [f"note: {n}" for n in self.notes]
        return out

    def record_peak(self, peak_bytes: int, mapped_bytes: Optional[int] = None) -> None:
        """Put the measured peaks in the header's table (and the file): of live bytes, and of the bytes the
        model's `map` statements held mapped."""
        measured = {"live bytes, peak": peak_bytes, "mapped bytes, peak": mapped_bytes}
        self.figures = [(a, b, str(measured[a]) if c == NOT_MEASURED and measured.get(a) is not None else c)
                        for a, b, c in self.figures]
        lines = self.text.split("\n")
        for i, line in enumerate(lines):
            for name, value in measured.items():
                if value is not None and line.startswith(f"#   {name}") and line.endswith(NOT_MEASURED):
                    lines[i] = line[:-len(NOT_MEASURED)].rstrip().ljust(len(line) - len(NOT_MEASURED)) + \
                        f"{value:>{len(NOT_MEASURED)}}"
        self.text = "\n".join(lines)
        self.scn_path.write_text(self.text)


def measure_peak(result: ModelResult, cc: str = "gcc", timeout: float = 120.0,
                 runs: Optional[ModelRuns] = None) -> int:
    """Build the model with the `live` probe, run it once, record its peak of live bytes; returns it.

    Also proves that the model builds and finishes (its channels cannot deadlock). runs: the calibration's
    (runs.py): its build, and for a model of one thread its run with the model's seed (1, or the one calibrate_peak
    chose) at the scale chosen, which is this one."""
    own = runs is None
    runs = runs or ModelRuns(result, cc, timeout)
    try:
        # at the model's scale (None: as fitted, or its own `param life_scale` when built from its text)
        writer = result.writer
        peak, mapped = runs.peak(seed=writer.seed if writer is not None else 1,
                                 scale=writer.life_scale if writer is not None else None)
    finally:
        if own:
            runs.close()
    writer = result.writer
    if mapped is not None and writer is not None and writer.image_mapped:
        # the stand-in for the program's image is mapped from the start to the end: not one of the program's own
        mapped = max(0, mapped - writer.image_mapped) if writer.col.map_calls else None
    result.record_peak(peak, mapped)
    result.mapped_peak = mapped
    return peak


def ensure_finishes(result: ModelResult, check, say=lambda line: None):
    """Run check(result) (the calibration and the measurement, which run the model). When the model stops
    making progress (ModelStuck: its threads waiting on one another), rewrite it and run check again: first
    with channels that hold all they carry (ModelShape.unbound_channels: no send waits), then, if it still
    stops, without channels (ModelShape.drop_handoffs): its threads then wait only at barriers, which every
    thread still running meets, so it cannot deadlock. A model that fails otherwise raises ModelRunError.
    The header's figures stay the capture's; the notes say what was given up."""
    shape = result.writer.shape if result.writer is not None else None
    fallbacks = [] if shape is None else [("with channels that hold all they carry", shape.unbound_channels),
                                          ("without channels", shape.drop_handoffs)]
    while True:
        try:
            return check(result)
        except ModelStuck as exc:
            if not fallbacks:
                raise ModelRunError(f"{exc}, even without channels (a bug of scenc's model writer)") from None
            how, rewrite = fallbacks.pop(0)
            say(f"{exc}; rewriting it {how}")
            rewrite()
            _rewrite(result)


def has_channels(text: str) -> bool:
    """Whether a model's text declares a channel (between groups or a group's ring): the only thing a
    model's thread can wait on besides barriers."""
    return any(line.startswith("channel ") for line in text.splitlines())


def finishes_unrun(result: ModelResult, say=lambda line: None) -> None:
    """A model that is not run (`convert --model --no-measure`) is made to finish by construction, and its
    header says so. Its threads may wait only at barriers, at a `recv` on an empty channel and at a `send`
    on a full one; a barrier waits only for the threads still running (a finished thread leaves the count),
    and every thread meets the same barriers in the same order, so a model without channels cannot wait
    forever. A model with channels could (a producer filling a channel whose receivers take its objects
    after the next barrier), and only a run shows whether it does: unrun, it is written without channels
    (ModelShape.drop_handoffs: every handed object freed by its maker)."""
    shape = result.writer.shape if result.writer is not None else None
    if shape is None:
        return
    if has_channels(result.text):
        say("the model is not run (--no-measure): written without channels between its threads, which cannot "
            "wait forever (convert without --no-measure keeps them and runs it to show it finishes)")
        shape.drop_handoffs()
        shape.notes.append("not run by scenc convert (--no-measure): written without channels so that it cannot "
                           "wait forever (its threads wait only at barriers, which every running thread meets); "
                           "convert without --no-measure keeps the channels and runs the model to show it finishes")
    else:
        shape.notes.append("not run by scenc convert (--no-measure); it cannot wait forever all the same: it has "
                           "no channel, and its threads wait only at barriers, which every running thread meets")
    _rewrite(result)


def _rewrite(result: ModelResult) -> None:
    """The model's text and files again from its writer, uncalibrated (the calibration runs again)."""
    writer = result.writer
    writer.life_scale, writer.calibration, writer.seed, writer.seed_why = None, "", 1, ""
    for path in result.data_files:
        path.unlink(missing_ok=True)
    result.text = writer.write()
    result.scn_path.write_text(result.text)
    result.fits, result.notes, result.figures, result.data_files = writer.fits, writer.notes, writer.figures, \
        writer.data_files
    result.model_calls = dict(writer.tally_calls)


def remove_model(result_or_path, data_files=()) -> None:
    """Remove a model that failed, with its histogram files: no .scn is left that cannot run."""
    if isinstance(result_or_path, ModelResult):
        result_or_path, data_files = result_or_path.scn_path, result_or_path.data_files
    path = Path(result_or_path)
    for p in [path, *data_files, path.with_name(f"{path.stem}.runs.scn")]:
        Path(p).unlink(missing_ok=True)


def calibration_runs(result: ModelResult, runs: ModelRuns) -> None:
    """Make the runs calibrate_peak will make, and nothing else: a model of one thread's are kept by runs, so
    that calibrate_peak, called later with the same runs, finds them all (convert makes them while the model's
    build for the work's measurement compiles). The model is left as it is."""
    if result.writer is not None and result.capture_peak > 0 and scalable(result.text):
        _search_scale(result, runs)


def _search_scale(result: ModelResult, runs: ModelRuns) -> Tuple[float, Dict[int, float], Dict[int, List[int]]]:
    """calibrate_peak's search, which only runs the model: (its peak over the capture's with the fitted lifetimes,
    {scale tried: that ratio}, {scale: the peaks of seeds 1 .. CALIBRATION_SEEDS})."""
    target = result.capture_peak
    measured: Dict[int, List[int]] = {}        # scale -> the peaks of seeds 1 .. CALIBRATION_SEEDS

    def ratio(scale: int) -> float:
        peaks = measured[scale] = runs.peaks(range(1, CALIBRATION_SEEDS + 1), scale)
        return sum(peaks) / len(peaks) / target

    first = ratio(100)                      # the lifetimes as fitted
    tried = {100: first}
    if abs(first - 1) <= CALIBRATION_TOLERANCE:
        return first, tried, measured
    lo, hi = SCALE_RANGE
    if first < 1:
        lo, tried[hi] = 100, ratio(hi)
    else:
        hi, tried[lo] = 100, ratio(lo)
    end = tried[SCALE_RANGE[1] if first < 1 else SCALE_RANGE[0]]
    # A model of one thread peaks higher the longer its lifetimes (the same draws, every object living as
    # long or longer): when the range's end is still short of the capture's peak on the same side, by more
    # than the rule below allows, no scale inside comes nearer, and the search ends where it would.
    settled = runs.deterministic and (end < 1) == (first < 1) and abs(end - 1) > abs(first - 1) / 2
    for _ in range(0 if settled else CALIBRATION_STEPS):
        if min(abs(r - 1) for r in tried.values()) <= CALIBRATION_TOLERANCE or hi - lo <= 1:
            break
        mid = round((lo * hi) ** 0.5)           # lifetimes multiply: the geometric middle
        if mid in tried:
            break
        tried[mid] = ratio(mid)
        lo, hi = (mid, hi) if tried[mid] < 1 else (lo, mid)
    return first, tried, measured


def calibrate_peak(result: ModelResult, cc: str = "gcc", timeout: float = 120.0,
                   runs: Optional[ModelRuns] = None) -> Optional[int]:
    """Scale the lifetimes of the objects freed by their own thread so that the model's peak of live bytes
    (the mean over seeds 1 .. CALIBRATION_SEEDS, one run each with the `live` probe) is the capture's.

    The capture's peak is a statistic of the trace, like its sizes and lifetimes: the model is tuned to
    it, never to an allocator's result. Left alone (returns None) when the fitted model is within
    CALIBRATION_TOLERANCE already; otherwise the scale (percent, in SCALE_RANGE) is searched by bisection
    (the peak grows with the scale: with the same draws every object lives as long or longer), the
    model rewritten with `param life_scale` and a comment that says how it was found; returns the scale.
    When no scale in the range closes half the gap at least, the lifetimes are not what makes the
    peak, and the model keeps them as fitted (returns None), even when the best scale would land
    within the tolerance.

    runs (runs.py): the model's runs, one build for every seed and scale (made here when not given)."""
    writer, target = result.writer, result.capture_peak
    if writer is None or target <= 0 or not scalable(result.text):
        return None
    own = runs is None
    runs = runs or ModelRuns(result, cc, timeout)
    try:
        first, tried, measured = _search_scale(result, runs)
    finally:
        if own:
            runs.close()
    if abs(first - 1) <= CALIBRATION_TOLERANCE:
        _nearest_seed(result, measured[100])
        return None
    scale = min(tried, key=lambda s: (abs(tried[s] - 1), abs(s - 100)))
    if abs(tried[scale] - 1) > abs(first - 1) / 2:
        # Lifetimes are not what makes this peak (handoffs, realloc chains, threads' timing): keep them as
        # fitted. Lifetimes are the trace's too: a scale that buys less than half the gap (a peak barely
        # nearer the capture's for much longer lifetimes) costs more fidelity than it gives.
        writer.life_scale = None
        result.text = writer.write()
        result.scn_path.write_text(result.text)
        _nearest_seed(result, measured[100])
        return None
    writer.life_scale = scale
    _nearest_seed(result, measured[scale], write=False)
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


def with_seed(text: str, seed: int) -> str:
    """A model's text with its `seed` statement set to seed."""
    return re.sub(r"(?m)^seed \d+$", f"seed {seed}", text, count=1)


def _nearest_seed(result: ModelResult, peaks: List[int], write: bool = True) -> None:
    """Write the model with the seed, of those calibrate_peak measured (peaks: of seeds 1 .. CALIBRATION_SEEDS, as
    it is written), whose peak of live bytes is nearest the capture's, when seed 1's is more than SEED_TOLERANCE
    off it; the header says so. Its peak is one draw's:
    a few big objects that live long, drawn at random, are live at once at its peak or not (gcc's cc1: seeds 1-6
    ranged over 0.97x-1.17x of the capture's), and which draw a model holds is the seed's. Every run of the model
    makes the same draws (`seed`), so the one written is the one measured; the choice is on the capture's peak, a
    statistic of the trace, as the lifetimes' scale is."""
    writer, target = result.writer, result.capture_peak
    seed = min(range(1, len(peaks) + 1), key=lambda k: (abs(peaks[k - 1] - target), k))
    if seed == 1 or abs(peaks[0] - target) <= SEED_TOLERANCE * target:     # as written
        return
    writer.seed = seed
    writer.seed_why = (f"seed {seed}: of seeds 1-{len(peaks)}, whose peaks of live bytes (the `live` probe, one run "
                       f"each) were " + ", ".join(f"{p / target:.3f}x" for p in peaks) + f" of the capture's "
                       f"({target}), the one nearest it, chosen by scenc convert: the draws of a few big objects "
                       f"that live long make the peak, and the seed makes the draws (every run makes the same)")
    if write:
        result.text = writer.write()
        result.scn_path.write_text(result.text)


def fit_work(result: ModelResult, cc: str = "gcc", timeout: float = 120.0) -> Optional[WorkCost]:
    """The program's time between calls as `work` (trace/model/work.py): measure what a unit and the model's own
    call cost here (running the model as written, without work), then write the model with its `work`.
    Before the calibration, which runs the model with it. None (no `work`) when the capture's clock gives no
    such time or a measuring run failed (the measurement after says why)."""
    writer = result.writer
    if writer is None or writer.work_refused():        # the header says why
        return None
    cost = measure_cost(result.scn_path, cc, timeout, MODEL_IDLE_S, traced=writer.col.has_cpu)
    if cost is None:
        writer.work_why = "the model's measuring runs failed"
        _rewrite(result)                                # its header said "not measured" until now
        return None
    writer.work_cost = cost
    _rewrite(result)
    return cost


def write_model(events: Optional[Iterable], scn_path, source_name: str, max_phases: int = 4,
                touch: str = "none", collector: Optional[Collector] = None,
                touch_figures: Optional[dict] = None, image: Optional[ProgramImage] = None,
                clock: Optional[str] = None) -> ModelResult:
    """Fit a model to a stream of AllocEvents, or to a finished Collector (a tracer log's, from the C collector:
    native.collect_tracer_log); write the scenario and its histogram files beside it. touch: what every new
    block gets (`touch_new`; an exact replay's --touch modes); touch_figures: what `--touch auto` saw in the
    capture (trace/replay.py, touch_figures), from which the share of its own mappings the program wrote is
    estimated (fit.map_written_percent); without, its mappings are written as touch_new writes a block. image: what
    the capture says of the program's code and files (image.py): the header says it, and the model maps a stand-in
    for them. clock: the capture's format ('preload', 'ltrace', ...), whose clock may give the time between
    calls (fit_work)."""
    col = collector
    if col is None:
        col = Collector().consume(events)
        col.finish()
    scn_path = Path(scn_path)
    map_written = map_written_percent(touch_figures, touch, col.map_bytes_made // 4096) if touch_figures else None
    writer = ModelWriter(col, scn_path, source_name, max_phases, touch, map_written, image, clock)
    try:
        text = writer.write()
        scn_path.write_text(text)
    except BaseException:           # Ctrl-C while the files are written: none is left
        remove_model(scn_path, writer.data_files)
        raise
    return ModelResult(scn_path, text, writer.data_files, col.ordinal, dict(writer.tally_calls), writer.groups,
                       writer.phases, writer.figures, writer.fits, writer.notes, col.peak_bytes, writer,
                       col.mapped_writable_peak)
