#!/usr/bin/env python3
"""Where the time of a default `scenc convert --model` goes (issue 27: 2M calls/s as a user runs it).

    .venv/bin/python bench/bench_convert_model.py CAPTURE... [--before SNAP] [--work DIR] [--repeat N] [--warm CAP]

Each capture is converted by `scenc convert --model CAPTURE -o DIR/NAME-model.scn` (the default: fit,
work's measuring runs, calibration, the peak's measurement), in a child whose wall time, CPU time (with its
own children: the compilers and the model's runs) and peak RSS are measured. With --before SNAP (a `git
archive` of another commit under SNAP/scenc, e.g. main), the same capture is converted by that scenc first,
one after the other (never at once: the model's runs measure time), and the two models are compared:
identical .scn text, else the lines that differ, and their figures (the model's peak of live bytes, its
life_scale, its `work` units), which may differ by the work's measurement (timed on this machine).

The child times the steps of the conversion by wrapping scenc's functions (whichever the version has):
the fit (the collector's pass and the writer), the check, the work's measurement, the calibration, the
peak's measurement, and inside each: C builds (compiles, and builds found in the cache), model runs (with
their wall time and the model's calls), and it prints one line per step. calls/s is the capture's calls
over the child's wall time: the figure a user sees. Target: >= 2,000,000 calls/s on a single-threaded
capture. Each scenc gets its own build cache under DIR (warmed with one small scenario first, so the
runtime library's one-time build is not charged to the first capture).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
TARGET = 2_000_000

# The child: import scenc (from PYTHONPATH or the venv), wrap its steps with timers, run the CLI.
CHILD = r'''
import json, sys, time, functools, threading
out_json, argv = sys.argv[1], sys.argv[2:]
import scenc, scenc.cli, scenc.commands.convert, scenc.trace.model, scenc.trace.model.work
import scenc.compiler.pipeline, scenc.system.process
events, stack = [], []
STEPS = {"collect_tracer_log": "fit", "write_model": "fit", "_self_check": "check", "measure_cost": "work runs",
         "fit_work": "work runs", "calibrate_peak": "calibration", "measure_peak": "peak",
         "prepare": "model builds", "wait_builds": "model builds", "calibration_runs": "calibration",
         "_model_touch": "touch auto", "image_of": "image"}
def step(name, fn):
    # the main thread's steps nest (a build or run is charged to the outermost); a step in another thread
    # (touch auto's pass beside the collector's) is timed on its own
    @functools.wraps(fn)
    def wrapped(*a, **k):
        main = threading.current_thread() is threading.main_thread()
        if main:
            stack.append(name)
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            if main:
                stack.pop()
            if name not in stack or not main:
                events.append({"kind": "step", "step": name, "s": time.perf_counter() - t0, "main": main})
    return wrapped
def build(fn):
    @functools.wraps(fn)
    def wrapped(*a, **k):
        t0 = time.perf_counter()
        b = fn(*a, **k)
        events.append({"kind": "build", "step": stack[0] if stack else "?", "s": time.perf_counter() - t0,
                       "cached": bool(b.cached)})
        return b
    return wrapped
def run(fn):
    @functools.wraps(fn)
    def wrapped(cmd, *a, **k):
        t0 = time.perf_counter()
        r = fn(cmd, *a, **k)
        calls = work = None
        try:
            rep = json.loads(r[1])
            calls = sum(sum(t["ops"].values()) for t in rep["threads"])
            work = sum(t.get("ops", {}).get("work", 0) for t in rep["threads"])
        except Exception:
            pass
        events.append({"kind": "run", "step": stack[0] if stack else "?", "s": time.perf_counter() - t0,
                       "calls": calls, "env": sorted(k2 for k2 in (k.get("env") or {}) if k2.startswith("SCN_"))})
        return r
    return wrapped
wrapped_fns = {}
for mod in [m for n, m in list(sys.modules.items()) if n.startswith("scenc") and m is not None]:
    for attr, val in list(vars(mod).items()):
        if not callable(val) or getattr(val, "__module__", "").split(".")[0] != "scenc":
            continue
        name = getattr(val, "__name__", "")
        if name in STEPS:
            new = wrapped_fns.setdefault(id(val), step(STEPS[name], val))
        elif name == "build" and val.__module__ == "scenc.compiler.pipeline":
            new = wrapped_fns.setdefault(id(val), build(val))
        elif name == "run_watched":
            new = wrapped_fns.setdefault(id(val), run(val))
        else:
            continue
        setattr(mod, attr, new)
try:
    import scenc.trace.model.runs as runs_module
    runs_module.ModelRuns.prepare = step("model builds", runs_module.ModelRuns.prepare)
    if hasattr(runs_module.ModelRuns, "wait_builds"):
        runs_module.ModelRuns.wait_builds = step("model builds", runs_module.ModelRuns.wait_builds)
except ImportError:
    pass
t0 = time.perf_counter()
try:
    status = scenc.cli.main(argv)
except SystemExit as e:
    status = e.code
events.append({"kind": "total", "s": time.perf_counter() - t0, "status": status, "scenc": scenc.__file__})
json.dump(events, open(out_json, "w"))
sys.exit(status or 0)
'''


def child(python: str, argv, env: dict, timings: Path) -> dict:
    """Run the child; its wall, CPU (user+sys, with children) and peak RSS, and its step events."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([python, "-c", CHILD, str(timings), *argv], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    # the child's own rusage with its descendants' is not separable after communicate(): RUSAGE_CHILDREN deltas
    return {"status": proc.returncode, "wall": wall, "stdout": out, "stderr": err,
            "events": json.loads(timings.read_text()) if timings.exists() else []}


def calls_of(stdout: str) -> int:
    for line in stdout.splitlines():
        parts = line.split()
        if parts[:1] == ["calls"] and len(parts) >= 3 and parts[1].isdigit():
            return int(parts[1])
    return 0


def step_lines(events) -> list:
    """One line per step: its time, builds (compiled / from the cache, compile seconds), runs (seconds, calls)."""
    out = []
    for name in ["touch auto", "image", "fit", "check", "model builds", "work runs", "calibration", "peak"]:
        steps = [e for e in events if e["kind"] == "step" and e["step"] == name]
        if not steps:
            continue
        builds = [e for e in events if e["kind"] == "build" and e["step"] == name]
        runs = [e for e in events if e["kind"] == "run" and e["step"] == name]
        compiled = [b for b in builds if not b["cached"]]
        line = f"    {name:<12}{sum(s['s'] for s in steps):7.1f} s" + ("" if steps[0].get("main", True) else
                                                                   " (beside the main thread)")
        if builds:
            line += f"  builds {len(compiled)} compiled ({sum(b['s'] for b in compiled):.1f} s)"
            line += f" + {len(builds) - len(compiled)} cached"
        if runs:
            line += (f"  runs {len(runs)} ({sum(r['s'] for r in runs):.1f} s; "
                     + ", ".join(f"{r['s']:.2f}" for r in runs[:12]) + (" ..." if len(runs) > 12 else "") + ")")
        out.append(line)
    total = next((e["s"] for e in events if e["kind"] == "total"), None)
    if total is not None:
        steps = sum(e["s"] for e in events if e["kind"] == "step" and e.get("main", True))
        out.append(f"    {'the rest':<12}{total - steps:7.1f} s  (start-up, reading the capture's header, "
                   f"printing; the child's total {total:.1f} s)")
    return out


def figures(text: str) -> dict:
    """The figures of a model a change to how it is run must keep: the measured peak, life_scale, work units."""
    import re
    peak = re.search(r"^#\s+live bytes, peak\s+(\d+)\s+(\S+)", text, re.M)
    scale = re.search(r"^param life_scale = (\d+)", text, re.M)
    work = re.search(r"\): (\d+) units at ([\d.]+) ns", " ".join(line.lstrip("# ") for line in text.splitlines()))
    return {"peak": peak.group(2) if peak else None, "life_scale": scale.group(1) if scale else None,
            "work": f"{int(work.group(1)) * float(work.group(2)) / 1e6:.1f} ms" if work else None}


def snapshot_env(snap, cache: Path) -> dict:
    env = dict(os.environ, SCENC_CACHE=str(cache))
    if snap is not None:
        env["PYTHONPATH"] = str(snap)
    return env


def warm(python: str, env: dict, work: Path, capture: Optional[Path] = None) -> None:
    """The cache's one-time builds (the runtime library for each set of flags, the `work` unit loop, the
    converter and the collector): by one small scenario, and by converting `capture` when given."""
    scn = work / "warm.scn"
    scn.write_text('scenario "warm"\nthread main {\n    for i in 0 .. 10 { malloc(16) lives 1 }\n}\n')
    cli = [python, "-c", "import scenc.cli, sys; sys.exit(scenc.cli.main(sys.argv[1:]))"]
    subprocess.run([*cli, "exec", str(scn)], env=env, capture_output=True)
    if capture is not None:
        subprocess.run([*cli, "convert", "--model", str(capture), "-o", str(work / "warm-model.scn")], env=env,
                       capture_output=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("captures", nargs="+", type=Path)
    ap.add_argument("--before", type=Path, default=None, help="a git archive of another commit, under BEFORE/scenc")
    ap.add_argument("--work", type=Path, default=None, help="keep models, caches and timings here")
    ap.add_argument("--repeat", type=int, default=1, help="convert each capture this many times by each scenc")
    ap.add_argument("--convert-arg", action="append", default=[], help="one more argument to convert (repeat)")
    ap.add_argument("--warm", type=Path, default=None,
                    help="convert this capture once by each scenc first (not timed): the runtime library's builds for "
                         "each set of flags and the unit loop's are made once per cache, not charged to a capture")
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="scenc-convert-model-"))
    work.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    versions = ([("before", args.before)] if args.before else []) + [("this", None)]
    envs = {}
    for label, snap in versions:
        envs[label] = snapshot_env(snap, work / f"cache-{label}")
        (work / label).mkdir(exist_ok=True)
        warm(python, envs[label], work / label, args.warm)
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    summary = []
    for cap in args.captures:
        for rep in range(args.repeat):
            texts = {}
            for label, snap in versions:
                out = work / label / f"{cap.stem}-model.scn"
                timings = work / label / f"{cap.stem}-{rep}.json"
                timings.unlink(missing_ok=True)
                for old in (work / label).glob(f"{cap.stem}-model*.csv"):
                    old.unlink()
                r = child(python, ["convert", "--model", str(cap), "-o", str(out), *args.convert_arg], envs[label],
                          timings)
                calls = calls_of(r["stdout"])
                rate = calls / r["wall"] if r["wall"] else 0
                print(f"{cap.stem} [{label}]: {calls} calls, {r['wall']:.1f} s wall: {rate / 1e6:.2f}M calls/s "
                      f"(status {r['status']})")
                if r["status"] not in (0, 4):
                    print("    " + r["stderr"].strip()[-800:].replace("\n", "\n    "))
                for line in step_lines(r["events"]):
                    print(line)
                texts[label] = out.read_text() if out.exists() else ""
                summary.append((cap.stem, label, calls, r["wall"], rate, figures(texts[label])))
            if len(texts) == 2:
                a, b = texts["before"], texts["this"]
                csvs = {label: {p.name: p.read_bytes() for p in (work / label).glob(f"{cap.stem}-model*.csv")}
                        for label, _ in versions}
                print(f"    histogram files: {'identical' if csvs['before'] == csvs['this'] else 'DIFFER'} "
                      f"({len(csvs['this'])})")
                if a == b:
                    print("    models: identical")
                else:
                    import difflib
                    diff = [d for d in difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=0)
                            if d[:1] in "+-" and d[:3] not in ("+++", "---")]
                    print(f"    models: {len(diff)} lines differ; figures before {figures(a)}, this {figures(b)}")
                    for d in diff[:16]:
                        print("      " + d[:150])
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    print()
    print("| capture | scenc | calls | wall (s) | calls/s | model peak | life_scale | work |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for name, label, calls, wall, rate, fig in summary:
        print(f"| {name} | {label} | {calls} | {wall:.1f} | {rate / 1e6:.2f}M | {fig['peak']} | {fig['life_scale']} "
              f"| {(fig['work'] or '-')[:40]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
