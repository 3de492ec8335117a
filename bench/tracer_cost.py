"""The tracer's cost of a call as `scenc convert --model` measures it, converted several times: its spread and the
convert's time, this tree against another (`--before`, a `git archive` of, say, main) in one invocation.

A fitted model's `work` is the capture's CPU time between calls less, per call, the model's own cost of a call and
what the tracer added to it (trace/model/work.py, measure_cost); that last figure is measured on the model on this
machine, so it varies from one convert of the same capture to the next. This bench converts each capture
--converts times with each tree, alternating (before, this tree, before, ...), and prints per capture the figures
the model's header gives ("N ns for the tracer"), their spread (largest - least) and each convert's wall time.

    .venv/bin/python bench/tracer_cost.py CAPTURE.trace ... [--converts 3] [--before DIR] [--workdir DIR]

--before DIR: the scenc of DIR/scenc (PYTHONPATH=DIR). Captures: `scenc capture` of any program (for example
bench/model_fidelity.py's, kept with its --workdir). Load changes every figure here: run it beside nothing else,
or read before and after only against each other.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCENC = [sys.executable, "-c", "import sys; from scenc.cli import main; sys.exit(main())"]
TRACER_NS = re.compile(r"less ([0-9.]+) ns for the tracer")


def convert(trace: Path, out: Path, env: dict) -> tuple:
    """(the tracer's ns a call in the model's header or None, the convert's wall seconds)."""
    started = time.perf_counter()
    proc = subprocess.run([*SCENC, "convert", "--model", str(trace), "-o", str(out)],
                          capture_output=True, text=True, env=env)
    took = time.perf_counter() - started
    if proc.returncode not in (0, 4):
        raise RuntimeError(f"convert --model {trace} failed ({proc.returncode}): {proc.stderr.strip()[-600:]}")
    header = " ".join(line.lstrip("#").strip() for line in out.read_text().splitlines() if line.startswith("#"))
    found = TRACER_NS.search(header)
    return (float(found.group(1)) if found else None), took


def line(label: str, figures: list, times: list) -> str:
    known = [f for f in figures if f is not None]
    spread = f"{max(known) - min(known):5.1f}" if known else "    -"
    return (f"  {label:7} tracer ns {', '.join('-' if f is None else f'{f:.1f}' for f in figures):30} spread "
            f"{spread} ns   convert {', '.join(f'{t:.1f}' for t in times)} s (mean {statistics.mean(times):.1f})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("captures", nargs="+", type=Path)
    ap.add_argument("--converts", type=int, default=3)
    ap.add_argument("--before", type=Path, default=None, metavar="DIR")
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="scenc-tracer-cost-"))
    work.mkdir(parents=True, exist_ok=True)
    trees = [("after", dict(os.environ))]
    if args.before is not None:
        trees.insert(0, ("before", dict(os.environ, PYTHONPATH=str(args.before.resolve()))))
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), flush=True)
    for trace in args.captures:
        found = {label: ([], []) for label, _ in trees}
        for k in range(args.converts):
            for label, env in trees:
                ns, took = convert(trace, work / f"{trace.stem}-{label}-{k}.scn", env)
                found[label][0].append(ns)
                found[label][1].append(took)
        print(f"{trace.name}:")
        for label, _ in trees:
            print(line(label, *found[label]), flush=True)
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
