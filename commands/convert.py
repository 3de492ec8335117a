"""`scenc convert FILE [-o FILE.scn] [--model]`: a capture as an exact replay, or as a fitted model.

A capture cut short by a crash still converts: the command says what was lost and exits 0; a log cut inside
a record converts and exits 4 (errors.py); 64: nothing to convert.
"""

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..compiler.pipeline import load
from ..errors import EXIT_INCOMPLETE, EXIT_OK
from ..scenario.errors import ScenarioError
from ..system.process import Terminated, signals_raise
from ..trace.model import (ModelRunError, ModelRuns, calibrate_peak, calibration_runs, ensure_finishes,
                           finishes_unrun, fit_work, measure_peak, remove_model, write_model)
from ..trace.model.image import image_of
from ..trace.model.native import collect_tracer_log
from ..trace.replay import threads_line, touch_figures, touch_line, window_line, write_replay
from ..trace.source import TraceInputError, TraceSource
from .tracing import anomaly_lines, guarded, kinds_line, refuse_scenario

SHOWN_THREADS = 32         # threads listed one by one in convert's summary


@guarded("convert")
def convert(args) -> int:
    # The exact replay's converter reads a tracer log itself (runtime/tools/convert.c): no indexing here; nor does it
    # use an ltrace log's timestamps: not read.
    refuse_scenario("convert", args.file)
    source = TraceSource(args.file, extra_events=True, index=args.model, times=args.model, window=not args.whole)
    default = f"{source.path.stem}{'-model' if args.model else ''}.scn"
    out = Path(args.output or default)
    if out.suffix != ".scn":
        raise TraceInputError(f"{out}: the output is a scenario and must end in .scn")
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.model:
        native = source.format == "preload" and not source.events.windowed
        with ThreadPoolExecutor(1) as pool:
            # --touch auto's pass (the exact converter's) beside the collector's: two programs that read the same
            # log, each on a CPU of its own; up to 30% less time than one after the other, most on a busy machine
            # (bench/results/2026-11-28-convert-fixed.md)
            touching = pool.submit(_model_touch, source, args.touch) if native else None
            image = image_of(source, left_out=args.no_image)
            # The collector's pass in C (trace/model/native.py), its own progress line. A window (capture --server)
            # is cut by the Python reader (trace/window.py), which the C collector does not repeat.
            collector = collect_tracer_log(source.path, progress=sys.stderr.isatty()) if native else None
            touch, figures = touching.result() if native else _model_touch(source, args.touch)
        if native:
            model = write_model(None, out, source_name=source.path.name, max_phases=args.max_phases, touch=touch,
                                collector=collector, touch_figures=figures, image=image, clock=source.format)
        else:
            model = write_model(_with_progress(source.events), out, source_name=source.path.name,
                                max_phases=args.max_phases, touch=touch, touch_figures=figures, image=image,
                                clock=source.format)
        try:
            _check_calls(source, model.calls, [out, *model.data_files])
            # The model runs in a session of its own (killed with its group when it stops or times out): SIGTERM
            # and SIGHUP to scenc must reach it too (system/process.py, signals_raise).
            with signals_raise():
                if args.no_measure:
                    finishes_unrun(model, say=lambda line: print(f"scenc: {line}", file=sys.stderr))
                loaded = _self_check(out)
                if not args.no_measure:
                    if not args.no_calibrate:
                        # Seconds to a minute: say so before the builds start.
                        print("calibrating the model's lifetimes on the capture's peak of live bytes (it is built "
                              "and run with the live probe a few times; --no-calibrate skips this)", file=sys.stderr)
                    ensure_finishes(model, lambda m: _calibrate_and_measure(m, args, loaded),
                                    say=lambda line: print(f"scenc: {line}", file=sys.stderr))
        except ModelRunError as e:
            remove_model(model)
            raise TraceInputError(f"{e}; no model written") from None
        except Terminated as e:
            remove_model(model)
            print(f"scenc: interrupted by {e}; no model written", file=sys.stderr)
            return 128 + e.signum
        except BaseException:
            remove_model(model)       # a model never checked to build and finish is no model (Ctrl-C included)
            raise
        print(f"modelled {source.path} -> {out}" + "".join(f" + {p.name}" for p in model.data_files))
        for line in model.summary_lines():
            print("  " + line)
        lost = _print_losses(source)
    else:
        if source.format == "preload":
            report = write_replay(source.path, out, source.path.name, touch=args.touch, main_tid=source.main_tid(),
                                  found=source.adopt_log_info, whole=args.whole)
        else:
            report = write_replay(source.events, out, source.path.name, touch=args.touch, main_tid=source.main_tid())
        _check_calls(source, report.calls, [out, out.with_suffix(".ops")])
        _note_losses(out, source.losses())
        ops = out.with_suffix(".ops")
        print(f"converted {source.path} -> {out} + {ops.name} ({report.calls} calls, "
              f"{ops.stat().st_size / 1024:.0f} KiB)")
        for line in replay_summary(report):
            print("  " + line)
        lost = _print_losses(source)
    print(f"run it: scenc run {out} --allocators glibc,jemalloc,mimalloc")
    # converted, but the capture is incomplete (cut short, crashed, killed, calls lost): what the warning said
    return EXIT_INCOMPLETE if lost else EXIT_OK


PROGRESS_EVERY = 1 << 18     # events between two updates of the progress line


def _with_progress(events, stream=None):
    """The events, with a line on a terminal updated in place as they are read: calls so far and their rate
    (a model of tens of millions of calls takes minutes). Nothing on a pipe or a file."""
    stream = stream or sys.stderr
    if not stream.isatty():
        yield from events
        return
    import time
    start = time.monotonic()
    n = 0
    for n, event in enumerate(events, 1):
        if n % PROGRESS_EVERY == 0:
            rate = n / max(time.monotonic() - start, 1e-9)
            stream.write(f"\rmodelling: {n / 1e6:.1f}M calls read, {rate / 1e6:.2f}M calls/s ")
            stream.flush()
        yield event
    if n >= PROGRESS_EVERY:
        stream.write("\r\033[K")
        stream.flush()


def _calibrate_and_measure(model, args, loaded=None) -> None:
    """All run the model: the work's measurement (the model without work, 3 times), calibration a few times, the
    measurement once (it proves the model finishes). One build with the live probe serves the calibration and
    the measurement (trace/model/runs.py). A model of one thread is built for both before the work is measured
    (its runs make no `work`, which changes no live byte), at once with the build the work's measurement runs,
    and the calibration's runs are made while that one compiles: the work's timed runs are then made alone.
    loaded: the model as checked (_self_check), which its build as written does not parse again."""
    step = _StepLine(sys.stderr)
    runs = ModelRuns(model, cc=args.cc, progress=step)
    try:
        measure_work = model.writer is not None and model.writer.work_cost is None
        if runs.deterministic:
            runs.prepare(work_build=measure_work and not model.writer.work_refused(), loaded=loaded)
            if not args.no_calibrate:
                calibration_runs(model, runs)
            runs.wait_builds()
        if measure_work:
            step("measuring the time of a call and of a `work` unit (several runs of each)")
            fit_work(model, cc=args.cc)
        if not runs.deterministic:
            runs.prepare()                  # with its `work`: the timing of its threads makes its peak
        if not args.no_calibrate:
            calibrate_peak(model, cc=args.cc, runs=runs)
        measure_peak(model, cc=args.cc, runs=runs)
    except BaseException:
        runs.stop()                         # Ctrl-C or SIGTERM: the model's runs end now, not when they are done
        raise
    finally:
        runs.close()
        step.clear()


class _StepLine:
    """On a terminal, one line updated in place that says which step of convert --model runs (the model's
    builds and runs take seconds to a minute); nothing on a pipe or a file."""

    def __init__(self, stream):
        self.stream, self.shown = stream, False
        self.tty = stream.isatty()

    def __call__(self, what: str) -> None:
        if self.tty:
            self.stream.write(f"\rconvert --model: {what}\033[K")
            self.stream.flush()
            self.shown = True

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False


def _model_touch(source, touch: str):
    """A model's `touch_new`: the mode given, or for auto the one the exact replay's converter chooses from the
    same capture (a tracer log's sampled pages and faults; pages without a reading, as for an ltrace log);
    with auto, what the converter saw (trace/replay.py, touch_figures: the share of its own mappings the program
    wrote is estimated from them, trace/model/fit.py, map_written_percent), else None."""
    if touch != "auto":
        return touch, None
    if source.format != "preload":
        return "pages", None
    figures = touch_figures(source.path, source.main_tid())
    return figures["touch"], figures


def _note_losses(scn: Path, losses: list) -> None:
    """An incomplete capture says so in the scenario it became, not only on the terminal."""
    if losses:
        lines = ["# INCOMPLETE capture: the replay holds the calls that were seen. Lost:"]
        lines += [f"#   - {sentence}" for sentence in losses]
        scn.write_text("\n".join(lines) + "\n" + scn.read_text())


def _check_calls(source, converted: int, written: list) -> None:
    if converted == 0:
        for path in written:             # a scenario of nothing would only fail later, less clearly
            path.unlink(missing_ok=True)
        raise TraceInputError(f"{source.path}: the capture holds no allocator call: nothing to convert"
                              + (" (" + "; ".join(source.losses()) + ")" if source.losses() else ""))


def _print_losses(source) -> list:
    """What the capture lost, said on stderr (a tracer log cut inside a record is one of them), and its anomalies;
    returns the losses."""
    losses = source.losses()
    if losses:
        print(f"warning: {source.path} is an INCOMPLETE capture; the scenario covers the calls that were seen. "
              f"Lost:", file=sys.stderr)
        for sentence in losses:
            print(f"  - {sentence}", file=sys.stderr)
    if source.report.anomaly_counts:
        print("  anomalies in the capture (every one counted; 'info' ones were handled):")
        for line in anomaly_lines(source.report):
            print("    " + line)
    return losses


def replay_summary(report) -> list:
    """The ReplayReport in a few lines: threads, calls per kind, waits, peak, every degraded call."""
    out = []
    totals: dict = {}
    for counts in report.counts:
        for k, n in counts.items():
            totals[k] = totals.get(k, 0) + n
    kinds = sorted(totals, key=lambda k: (-totals[k], k))
    renamed = {k: n for k, n in sorted(report.trace_kinds.items()) if k not in totals}
    if report.window and report.window.get("opened"):
        out.append(f"window: {window_line(report)}")
    out.append(f"calls: {kinds_line(totals)} ({report.calls} in all, every "
               f"{'call of the window' if report.window and report.window.get('opened') else 'captured call'} replayed"
               + (f"; replayed under the runtime's names: {kinds_line(renamed)}" if renamed else "") + ")")
    out.append(f"threads: {report.threads} ({threads_line(report)})")
    if report.touch_auto:
        out.append(f"touch: {touch_line(report)}")
    for i, (tid, counts) in enumerate(zip(report.tids[:SHOWN_THREADS], report.counts)):
        per = "  ".join(f"{k} {counts.get(k, 0)}" for k in kinds)
        out.append(f"  trace[{i}]  {'set-up' if tid == 0 and report.window else f'tid {tid:<8}'} {per}")
    if report.threads > SHOWN_THREADS:
        out.append(f"  ... and {report.threads - SHOWN_THREADS} more thread(s) (scenc exec on the scenario lists "
                   f"them all)")
    out.append(f"cross-thread waits: {report.cross_thread_waits} ops wait for another thread "
               f"(cross-thread frees and reuse of a block freed by a thread not joined yet)")
    out.append(f"peak live: {report.peak_live_bytes} bytes (line {report.peak_line}); "
               f"{report.live_at_end} objects live at the end")
    if report.degraded:
        out.append(f"degraded calls ({sum(report.degraded.values())}, replayed as the same kind of call):")
        for what, n in sorted(report.degraded.items(), key=lambda kv: -kv[1]):
            lines = report.degraded_lines[what]
            out.append(f"  {n:>7} x {what}; lines {', '.join(map(str, lines))}{', ...' if n > len(lines) else ''}")
    else:
        out.append("degraded calls: none")
    return out


def _self_check(path: Path):
    """A model the compiler refuses is a bug of the model writer: say so plainly, never ship it silently. Returns
    what pipeline.load gave (the model's build reuses it)."""
    try:
        loaded = load(path)
    except ScenarioError as exc:
        raise TraceInputError(f"the generated model {path} does not pass `scenc check` (a bug in scenc's model "
                              f"writer, please report it):\n{exc.render()}") from None
    for w in loaded.warnings:
        print(w.render(loaded.resolved.scenario.source), file=sys.stderr)
    return loaded
