"""The model's runs for `scenc convert --model`: one build for all of them, each run a command line.

The calibration and the peak's measurement run the model with the `live` probe at several lifetime scales
and seeds; they differ in nothing else, so the model is built once with knobs (compiler/lower.py:
`seed=N`, `work=0`, `life_scale=N` on its command line) instead of once per scale and seed. A model of one
thread makes the same calls in every run with the same seed and scale (its `lives` clock counts calls, not
time), so its runs are made without `work` (CPU on registers, no memory: no live byte changes), and a run
already made is not made again (the peak's measurement is the calibration's seed-1 run at the scale
chosen). A model of several threads has a peak that varies with their timing: each of its runs is made,
with its `work`, as the model is written.

    runs = ModelRuns(result, cc)
    runs.prepare(work_build=True)       # the live build; the model for work.py compiles beside it
    peak, mapped = runs.peak(seed=1, scale=100)     # runs made while that one compiles
    runs.wait_builds()
"""

import json
import re
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

from ... import probes
from ...compiler.build import BuildError
from ...compiler.pipeline import build
from ...system.process import RunningGroups, run_watched
from .work import BUILD_FLAGS, measuring_build

MODEL_IDLE_S = 5.0            # a model run that used no CPU for this long has stopped making progress
SCALE_PARAM = "life_scale"    # the model writer's lifetime scale (plan.py), a knob of the live build
RUNS_AT_ONCE = 2              # runs of a model of one thread made side by side
# The live build's runs count bytes, never time: compiled at -O1 (cc1's model: 3.7 s against 5.9 s at -O2, its
# runs no slower; bench/results/2026-11-27-convert-speed.md), and at the default -O2 if -O1 fails; without debug
# information, as work.py's build of the model (BUILD_FLAGS). A model of few calls is compiled at -O0: a third of
# -O1's compile time, and its runs, two to three times as long, still take less than what that saves
# (bench/results/2026-11-28-convert-fixed.md).
LIVE_FLAGS = ("-O1", *BUILD_FLAGS)
FEW_CALLS_FLAGS = ("-O0", *BUILD_FLAGS)
FEW_CALLS = 1_000_000        # calls of the model (all its threads) below which it is "of few calls"


class ModelRunError(RuntimeError):
    """The model does not build or run: a bug of the model writer, said plainly."""


class ModelStuck(ModelRunError):
    """The model's threads waited on one another (no CPU time for MODEL_IDLE_S seconds): its channels can
    deadlock. ensure_finishes rewrites it without channels."""


class ModelRuns:
    """The live build of a model (with the scale as a knob) and the peaks of its runs, by (seed, scale)."""

    def __init__(self, result, cc: str = "gcc", timeout: float = 120.0,
                 progress: Optional[Callable[[str], None]] = None):
        self.result, self.cc, self.timeout = result, cc, timeout
        self.progress = progress or (lambda line: None)
        self.deterministic = sum(g.n for g in result.groups) == 1 if result.groups else False
        self.binary: Optional[Path] = None
        self.found: Dict[Tuple[int, int], Tuple[int, Optional[int]]] = {}
        self.runs = 0
        self.default_scale: Optional[int] = None   # the live build's `param life_scale` (None: nothing to scale)
        self.groups = RunningGroups()     # the runs going on in the workers of peaks(), ended at once on a stop
        self._builder: Optional[ThreadPoolExecutor] = None
        self._plain: Optional[Future] = None

    @property
    def path(self) -> Path:
        """The scenario the live build is made of, beside the model (its histogram files are read from there)."""
        return self.result.scn_path.with_name(f"{self.result.scn_path.stem}.runs.scn")

    def _scaled_text(self) -> Tuple[str, Optional[int]]:
        """The model's text with its lifetimes scaled by `param life_scale`, which the build reads from its command
        line, and that param's default: 100 (as fitted), or the calibrated scale; None when there is nothing to
        scale. A model built from its text alone (no writer) keeps its own `param life_scale`, if it has one."""
        writer = self.result.writer
        if writer is None:
            found = re.search(rf"^param {SCALE_PARAM} = (\d+)$", self.result.text, re.M)
            return self.result.text, int(found.group(1)) if found else None
        if writer.life_scale is not None:
            return self.result.text, writer.life_scale
        if not scalable(self.result.text):
            return self.result.text, None
        calibration = writer.calibration
        writer.life_scale, writer.calibration = 100, "(being calibrated)"
        try:
            return writer.write(), 100       # the same histogram files: only the lifetimes change
        finally:
            writer.life_scale, writer.calibration = None, calibration

    def prepare(self, work_build: bool = False, loaded=None) -> None:
        """Build the model with the `live` probe and knobs. work_build: also the model as written with the `time`
        probe (work.py's measuring_build, what its measure_cost runs, found in the cache there), started first, in a
        thread of its own: at -O2 it is the longer build, and the live build's runs can be made while it compiles; wait_builds() waits
        for it. loaded: convert's check of the model (pipeline.load), so that the build does not parse it again."""
        text, self.default_scale = self._scaled_text()
        self.path.write_text(text)
        knobs = (SCALE_PARAM,) if self.default_scale is not None else ()
        self.progress("building the model" + (" (twice at once: with the live probe, and as written)"
                                              if work_build else " with the live probe"))
        if work_build:
            self._builder = self._builder or ThreadPoolExecutor(1)
            self._plain = self._builder.submit(measuring_build, self.result.scn_path, self.cc, loaded=loaded)
        live = dict(cc=self.cc, probes=probes.c_parts("live"), knobs=knobs)
        few = sum(self.result.model_calls.values()) < FEW_CALLS
        try:
            self.binary = build(self.path, extra_flags=FEW_CALLS_FLAGS if few else LIVE_FLAGS, **live).binary
        except BuildError:          # a warning only an optimisation level shows: the flags the user's build has
            self.binary = build(self.path, **live).binary
        self.found.clear()

    def wait_builds(self) -> None:
        """Wait for the build prepare() started beside the live one (its errors are raised here)."""
        plain, self._plain = self._plain, None
        if plain is not None:
            plain.result()

    def peak(self, seed: int = 1, scale: Optional[int] = None) -> Tuple[int, Optional[int]]:
        """The model's peak of live bytes with this seed and lifetime scale (percent; None: as written), and
        the peak of the bytes its `map` statements held (None when it maps nothing)."""
        if self.binary is None:
            self.prepare()
        default = self.default_scale
        scale = None if default is None else (default if scale is None else scale)
        knob = [] if scale is None else [f"{SCALE_PARAM}={scale}"]
        key = (seed, scale or 0)
        if self.deterministic and key in self.found:
            return self.found[key]
        self.runs += 1
        self.progress(f"run {self.runs} of the model (seed {seed}" + (f", lifetimes x{scale / 100:g}" if knob else "")
                      + ")")
        found = self._run([f"seed={seed}", *knob, *(["work=0"] if self.deterministic else [])])
        self.found[key] = found
        return found

    def peaks(self, seeds, scale: Optional[int] = None) -> list:
        """The peaks of live bytes with each of these seeds at this scale. A model of one thread makes them two
        at a time (the machine's two CPUs: its peak is not a matter of timing); one of several threads one
        after the other, as each of its runs would be alone."""
        seeds = list(seeds)
        if not self.deterministic or len(seeds) < 2:
            return [self.peak(seed, scale)[0] for seed in seeds]
        if self.binary is None:
            self.prepare()
        with ThreadPoolExecutor(RUNS_AT_ONCE) as pool:
            try:
                return [found[0] for found in pool.map(lambda seed: self.peak(seed, scale), seeds)]
            except BaseException:
                # Ctrl-C, SIGTERM or a run that failed: the runs still going are ended now, not waited for (in
                # sessions of their own, the terminal's SIGINT does not reach them)
                self.stop()
                pool.shutdown(wait=True, cancel_futures=True)
                raise

    def stop(self) -> None:
        """End the model's runs going on in other threads, and any started after."""
        self.groups.stop()

    def _run(self, knobs) -> Tuple[int, Optional[int]]:
        status, stdout, stderr, why = run_watched([str(self.binary), *knobs], self.timeout, MODEL_IDLE_S,
                                                  groups=self.groups)
        where = self.result.scn_path
        if why == "stuck":
            raise ModelStuck(f"the model {where} stopped making progress (no CPU time for {MODEL_IDLE_S:g} s: its "
                             f"threads waited on one another)")
        if why == "timeout":
            raise ModelRunError(f"the model {where} did not finish within {self.timeout:.0f} s (a model "
                                f"should never wait forever: a bug of scenc's model writer)")
        if status != 0:
            raise ModelRunError(f"the model {where} failed (status {status}): {stderr.strip()[-500:]}")
        report = json.loads(stdout)
        return (int(report["probes"]["live"]["peak_bytes"]),
                int(report["mapped"]["peak_bytes"]) if "mapped" in report else None)

    def close(self) -> None:
        """Wait for a build still going (an error's way out), remove the live build's scenario."""
        if self._builder is not None:
            self._builder.shutdown(wait=True, cancel_futures=True)
            self._builder = None
        self.path.unlink(missing_ok=True)


def scalable(text: str) -> bool:
    """Whether a model has lifetimes to scale: a `lives` that is not `forever`."""
    return any(" lives " in line and "forever" not in line for line in text.splitlines())
