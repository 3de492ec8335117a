"""A fitted model's peak of live bytes against its capture's (issue 15: within 10% everywhere).

For every shared ltrace log (/work/shared/ltrace-samples, when present), every log in the
repository's fixtures (tests/fixtures/trace, tests/fixtures/model), and captures made here of
the bench programs (the LD_PRELOAD tracer: bench/programs/*.c, python3 start-up,
bench/programs/py_work.py and pc.py), it prints the capture's
peak of live bytes (trace-stats), the model's (`scenc convert --model`: one run under glibc
with the `live` probe), their ratio, and the capture's threads alive at most beside the model's
threads alive at most (what the model's thread groups and churn allow).

    .venv/bin/python bench/model_peak.py [--only NAME,...] [--runs N] [--seeds N] [--no-calibrate] [--json FILE]

--runs N measures each model N times (threaded models vary from run to run), --seeds N with
the seeds 1 .. N (the model's random draws), and prints the lowest and highest ratio and
their median (a threaded model's peak moves with the threads' timing); the model column is
the highest peak, the scale column the model's calibrated lifetime scale
(`param life_scale`, "-" when the fitted lifetimes were left alone; --no-calibrate: never).
The figures are bytes requested by the program, not RSS: no allocator result enters the
model, which is fitted (and calibrated) to the trace only.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path("/work/shared/ltrace-samples")
FIXTURES = ROOT / "tests" / "fixtures"
PROGRAMS = ROOT / "bench" / "programs"
sys.path.insert(0, str(ROOT / "tests"))

from scenc.trace.model import calibrate_peak, measure_peak, with_seed, write_model          # noqa: E402
from scenc.trace.source import TraceSource                         # noqa: E402
from scenc.trace.profile import TraceStats                           # noqa: E402


def logs() -> list:
    """(name, path) of the logs: shared ones, then the repository's (its copies of the shared ones skipped
    when those are present)."""
    out = []
    if SHARED.is_dir():
        out += [(p.stem, p) for p in sorted(SHARED.glob("*.log"))]
    shared = {name for name, _ in out}
    from ltrace_samples import sample               # tests/ltrace_samples.py: decompresses the xz'd copies
    for xz in sorted((FIXTURES / "ltrace-samples").glob("*.log.xz")):
        stem = xz.name[:-len(".log.xz")]
        if stem not in shared:
            out.append((stem, Path(sample(stem + ".log"))))
    out += [(p.stem, p) for p in sorted((FIXTURES / "trace").glob("*.log")) + sorted((FIXTURES / "model").glob("*.log"))]
    return out


def captures(work: Path) -> list:
    """(name, path) of preload captures of the bench programs and of python3, made now."""
    from scenc.trace.capture.preload import capture_preload
    out = []
    cc = os.environ.get("CC", "gcc")
    runs = {"alloc_heavy": ["200000"], "prodcons": ["2", "100000"], "thread_churn": ["200", "100"]}
    for name, args in runs.items():
        exe = work / name
        subprocess.run([cc, "-O2", "-pthread", "-o", str(exe), str(PROGRAMS / f"{name}.c")], check=True)
        out.append((f"{name} (preload)", [str(exe), *args]))
    # Debian's own python3: a `python3` first in PATH can be a wrapper (a pyenv shim is a shell script that
    # execs it, and its children would be captured instead)
    py = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else shutil.which("python3")
    if py:
        out.append(("python3 start-up (preload)", [py, "-c", "pass"]))
        out.append(("py_work.py (preload)", [py, str(PROGRAMS / "py_work.py")]))
        out.append(("pc.py (preload)", [py, str(PROGRAMS / "pc.py")]))
    made = []
    for name, argv in out:
        trace = work / (name.split()[0].replace(".", "_") + ".trace")
        result = capture_preload(argv, trace, stdout=subprocess.DEVNULL)
        if result.ok:
            made.append((name, trace))
        else:
            print(f"# {name}: the capture failed ({result.warnings[-1:] if result.warnings else '?'}); left out")
    return made


def capture_figures(path: Path) -> dict:
    source = TraceSource(path, extra_events=True)
    stats = TraceStats(source.report).consume(source.events)
    d = stats.to_dict()
    return {"peak": stats.peak_bytes, "calls": stats.ops, "threads_alive": d.get("threads_alive", {}).get("peak")}


def model_peaks(path: Path, work: Path, runs: int, seeds: int, calibrate: bool = True) -> tuple:
    """The model's peaks: `runs` runs with each of the seeds 1 .. `seeds` (the model's random draws: sizes,
    lifetimes, which block a realloc grows), calibrated as `scenc convert --model` calibrates it unless
    told not to."""
    source = TraceSource(path, extra_events=True)
    model = write_model(source.events, work / (path.stem + "-model.scn"), source_name=path.name)
    if calibrate:
        calibrate_peak(model)
    peaks = []
    text, chosen = model.text, model.writer.seed
    for seed in range(1, seeds + 1):
        # from the model's text each time: measure_peak writes the text back with the peak in it
        model.text = with_seed(text, seed)
        model.writer.seed = seed              # measure_peak runs the model with the writer's seed
        model.scn_path.write_text(model.text)
        peaks += [measure_peak(model) for _ in range(runs)]
    model.text, model.writer.seed = text, chosen
    model.scn_path.write_text(text)
    return peaks, model


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated names (substrings) to measure")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--seeds", type=int, default=1, help="also measure each model with seeds 2 .. N")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--no-calibrate", action="store_true", help="the fitted lifetimes as they are (`scenc convert "
                    "--model --no-calibrate`), to compare")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="model-peak-") as tmp:
        work = Path(tmp)
        items = logs() + captures(work)
        if args.only:
            keep = args.only.split(",")
            items = [(n, p) for n, p in items if any(k in n for k in keep)]
        print(f"{'capture':<34}{'calls':>9}{'peak':>11}{'model':>11}{'ratio':>13}{'median':>8}{'scale':>7}")
        for name, path in items:
            cap = capture_figures(path)
            peaks, model = model_peaks(path, work, args.runs, args.seeds, not args.no_calibrate)
            scale = model.writer.life_scale if model.writer else None
            lo, hi = min(peaks) / cap["peak"], max(peaks) / cap["peak"]
            median = statistics.median(peaks) / cap["peak"]
            ratio = f"{lo:.3f}" if lo == hi else f"{lo:.2f}-{hi:.2f}"
            print(f"{name:<34}{cap['calls']:>9}{cap['peak']:>11}{max(peaks):>11}{ratio:>13}{median:>8.2f}"
                  f"{f'{scale}%' if scale else '-':>7}"
                  f"{'' if 0.9 <= lo and hi <= 1.1 else '   OUTSIDE 10%'}", flush=True)
            rows.append({"name": name, **cap, "model_peaks": peaks, "ratio_low": lo, "ratio_high": hi,
                         "ratio_median": median, "life_scale": scale})
    inside = sum(0.9 <= r["ratio_low"] and r["ratio_high"] <= 1.1 for r in rows)
    by_median = sum(0.9 <= r["ratio_median"] <= 1.1 for r in rows)
    print(f"# {inside} of {len(rows)} models within 10% of their capture's peak of live bytes in every run, "
          f"{by_median} by their median")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
