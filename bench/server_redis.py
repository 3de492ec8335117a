"""Which allocator for redis: `scenc run --server redis-server ... -- redis-benchmark` under each allocator.

For every run scenc starts redis-server (no persistence) under the allocator with the preload proof,
waits for its port, runs redis-benchmark (SET and GET, random keys, 256-byte values) without any
preload, takes SET and GET requests per second from its output, stops redis with SIGTERM and keeps
redis' peak RSS, CPU time and page faults. Allocators: glibc, glibc-fwd (glibc's malloc through a
forwarding preload, bench/programs/glibc_forward.c), tcmalloc, jemalloc, mimalloc, tbbmalloc.

Debian's redis-server is linked with libjemalloc.so.2: run without a preload, its malloc is
jemalloc's, so scenc's proof records the `glibc` runs as wrong-allocator. This script says so (from
`ldd` and from the proof), and `glibc-fwd` is how glibc's malloc is measured in redis here.

    .venv/bin/python bench/server_redis.py [--runs 10] [--requests 200000] [--clients 50] [--pipeline 16]
        [--no-pin] [--aa] [--replay] [--out DIR]

redis-server and redis-benchmark come from Debian's redis-server and redis-tools; when missing they are
installed with apt-get (as root, or through sudo). Traffic goes to 127.0.0.1 only, at a port the
kernel picks. Printed: `uptime` before and after, scenc's report (with 95% intervals and verdicts),
and one line per allocator with the medians, their intervals and the ratios to jemalloc (redis'
own allocator) side by side; then, from the runs, each figure's median, interval and CV between runs,
with the server's CPU time per request (user + sys over the SET and GET requests).

redis runs on CPU 0 and redis-benchmark on CPU 1 (taskset; --no-pin: wherever the kernel puts them),
with 16 requests in flight per connection (-P 16). --aa adds jemalloc a second time under another name
(jemalloc-aa): what two names for one allocator differ by is this machine's noise, the floor under any
verdict (bench/results/2026-11-27-servers-2.md: on a shared 2-CPU VM the requests per second varied by
20-45% whatever the client's settings, in the A/A pair as much as in the others).

With --replay, redis is then captured under the same load (`scenc capture --method preload --server`),
the capture converted to an exact replay, and the replay run beside redis in one session
(`scenc run redis.scn --server ... -- redis-benchmark ...`): the report's side-by-side section says
whether the replay orders the allocators' peak RSS (and speed) as redis does, and a last table puts
the replay's peak RSS beside redis' per allocator. The capture marks redis' window, from ready to the
client's end: the replay makes what was live at ready in an untimed set-up, then the window's calls.
Plain `glibc` is left out of that session (its redis runs are jemalloc's).
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

import numpy as np

from server_session import ROOT, SCENC, ensure_packages, free_port, run_session, summary_rows, uptime

ALLOCATORS = ("glibc", "glibc-fwd", "tcmalloc", "jemalloc", "mimalloc", "tbbmalloc")
METRICS = (("reported:SET", "SET req/s"), ("reported:GET", "GET req/s"), ("peak_rss_kib", "peak RSS KiB"))


def ensure_redis() -> None:
    ensure_packages({"redis-server": "redis-server", "redis-benchmark": "redis-tools"}, "server_redis")


def linked_allocator(program: str) -> str:
    out = subprocess.run(["ldd", shutil.which(program)], capture_output=True, text=True).stdout
    for name in ("libjemalloc", "libtcmalloc", "libmimalloc"):
        for line in out.splitlines():
            if name in line:
                return line.split("=>")[-1].split("(")[0].strip()
    return ""


def build_forwarder(folder: Path) -> Path:
    out = folder / "libglibcfwd.so"
    subprocess.run(["cc", "-O2", "-fPIC", "-shared", "-o", str(out), str(ROOT / "bench/programs/glibc_forward.c"),
                    "-ldl"], check=True)
    return out


def summary(result: Path, folder: Path) -> dict:
    """{allocator: {metric: (median, low, high, n)}} from scenc's own summary CSV."""
    found = {}
    for row in summary_rows(result, folder, all_metrics=True):
        if row["metric"] and row["median"]:
            found.setdefault(row["allocator"], {})[row["metric"]] = (
                float(row["median"]), float(row["median_ci_low"] or "nan"),
                float(row["median_ci_high"] or "nan"), int(row["n"]))
    return found


def per_run(result: Path, requests: int) -> dict:
    """{allocator: {figure: [one value per run]}}: req/s, and the server's CPU time per request (user + sys,
    microseconds), a figure that another process's load on the CPUs changes far less than requests per second."""
    runs = {}
    for line in result.read_text().splitlines()[1:]:
        run = json.loads(line)
        m = run.get("metrics") or {}
        if run.get("status") != "ok" or run.get("warmup") or "user_s" not in m:
            continue
        key = run["allocator"] + "".join(f" {k}={v}" for k, v in sorted((run.get("params") or {}).items()))
        figures = runs.setdefault(key, {"SET": [], "GET": [], "cpu_us": [], "rss_mib": []})
        figures["SET"].append(m.get("reported:SET", float("nan")))
        figures["GET"].append(m.get("reported:GET", float("nan")))
        figures["cpu_us"].append((m["user_s"] + m.get("sys_s", 0.0)) / (2 * requests) * 1e6)
        figures["rss_mib"].append(m.get("peak_rss_kib", float("nan")) / 1024)
    return runs


def median_ci(values, rng=np.random.default_rng(1)) -> tuple:
    """The median and a 95% bootstrap interval of it."""
    x = np.asarray(values, dtype=float)
    boots = np.median(rng.choice(x, size=(4000, len(x))), axis=1)
    return float(np.median(x)), float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))


def spread_table(runs: dict, names: list) -> None:
    """Per allocator and figure: median [95% CI] and the coefficient of variation between runs."""
    print("\n# per run, computed here: median [95% CI] (CV between runs)")
    print(f"{'allocator':<24}" + "".join(f"{label:>34}" for label in
                                          ("SET req/s", "GET req/s", "server CPU us/request", "peak RSS MiB")))
    for name in sorted(runs, key=lambda k: (k.split(" ", 1)[1:], names.index(k.split(" ")[0])
                                                                 if k.split(" ")[0] in names else 99)):
        figures = runs.get(name)
        if not figures or len(figures["SET"]) < 2:
            continue
        cells = []
        for key, fmt in (("SET", ".0f"), ("GET", ".0f"), ("cpu_us", ".3f"), ("rss_mib", ".2f")):
            xs = figures[key]
            mid, lo, hi = median_ci(xs)
            cv = statistics.stdev(xs) / statistics.mean(xs) * 100
            cells.append(f"{mid:{fmt}} [{lo:{fmt}}-{hi:{fmt}}] ({cv:.1f}%)".rjust(34))
        print(f"{name:<24}" + "".join(cells))


def providers(result: Path) -> dict:
    """{allocator: (objects that served redis' malloc, statuses)} from the runs' proofs."""
    seen = {}
    lines = result.read_text().splitlines()[1:]
    for line in lines:
        run = json.loads(line)
        objects, statuses = seen.setdefault(run["allocator"], (set(), set()))
        objects.update((run.get("proof") or {}).get("objects") or [])
        statuses.add(run["status"])
    return seen


def redis_client(port: int, args) -> list:
    pin = ["taskset", "-c", "1"] if args.pin else []
    return [*pin, "redis-benchmark", "-p", str(port), "-t", "set,get", "-n", str(args.requests), "-r", "100000",
            "-d", "256", "-c", str(args.clients), "-P", "{pipeline}" if "," in args.pipeline else args.pipeline,
            "-q"]


def redis_server(port: int, args) -> str:
    return ("taskset -c 0 " if args.pin else "") + f"redis-server --port {port} --save '' --appendonly no"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--requests", type=int, default=200000, help="redis-benchmark -n, per test")
    ap.add_argument("--clients", type=int, default=50, help="redis-benchmark -c")
    ap.add_argument("--pipeline", default="16",
                    help="redis-benchmark -P (1: a request per round trip); a list (1,16): a sweep in one session")
    ap.add_argument("--no-pin", dest="pin", action="store_false",
                    help="do not pin redis to CPU 0 and redis-benchmark to CPU 1 (taskset)")
    ap.add_argument("--aa", action="store_true",
                    help="add jemalloc a second time under another name (jemalloc-aa): an A/A pair, the noise floor")
    ap.add_argument("--allocators", default=",".join(ALLOCATORS))
    ap.add_argument("--out", type=Path, help="keep the result file and plots here (default: a temp dir)")
    ap.add_argument("--replay", action="store_true", help="also capture redis, and run its replay beside it")
    ap.add_argument("--replay-runs", type=int, default=12)
    ap.add_argument("--replay-only", action="store_true", help="only the capture and its replay beside redis")
    args = ap.parse_args()
    ensure_redis()
    if args.pin and (os.cpu_count() or 1) < 2:
        args.pin = False
    version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.strip()
    linked = linked_allocator("redis-server")
    work = Path(tempfile.mkdtemp(prefix="server-redis-"))
    out = args.out or work
    out.mkdir(parents=True, exist_ok=True)
    forwarder = build_forwarder(work)
    names = args.allocators.split(",") + (["jemalloc-aa"] if args.aa else [])
    jemalloc = linked or "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
    allocators = ",".join(f"glibc-fwd={forwarder}" if a == "glibc-fwd" else
                          f"jemalloc-aa={jemalloc}" if a == "jemalloc-aa" else a for a in names)
    port = free_port()
    print(f"# {version}")
    print(f"# redis-server is linked with: {linked or 'no allocator library (glibc malloc)'}")
    print(f"# pinned: {'redis on CPU 0, redis-benchmark on CPU 1' if args.pin else 'no'}; pipeline -P {args.pipeline}")
    if args.replay_only:
        replay(args, out, allocators, port)
        return 0
    result = out / "redis.json"
    sweep = ["--param", f"pipeline={args.pipeline}"] if "," in args.pipeline else []
    done = run_session(["run", *sweep, "--server", redis_server(port, args), "--ready", f"tcp:{port}",
                        "--allocators", allocators, "--runs", str(args.runs),
                        "--metric", r"SET: ([0-9.]+) requests per second",
                        "--metric", r"GET: ([0-9.]+) requests per second", "--higher-is-better", "-o", str(result),
                        "--plots", str(out / "plots"), "--", *redis_client(port, args)])
    if not result.exists():
        return 1
    spread_table(per_run(result, args.requests), names)
    if sweep:
        print(f"\n# result file: {result}; plots: {out / 'plots'}")
        return 0 if done.returncode in (0, 3) else done.returncode
    figures = summary(result, work)
    served = providers(result)
    reference = figures.get("jemalloc", {})
    print("\n# medians [95% CI] per allocator; ratio to jemalloc (redis' own allocator) in parentheses")
    print(f"{'allocator':<12} {'served redis malloc from':<46} " + " ".join(f"{label:>34}" for _, label in METRICS))
    for name in names:
        objects, statuses = served.get(name, (set(), set()))
        where = ", ".join(sorted(os.path.basename(o) for o in objects)) or "?"
        if "wrong-allocator" in statuses:
            where += " (WRONG: not measured)"
        cells = []
        for metric, _ in METRICS:
            value = figures.get(name, {}).get(metric)
            if value is None:
                cells.append(f"{'-':>34}")
                continue
            median, low, high, _n = value
            ratio = median / reference[metric][0] if metric in reference else float("nan")
            cells.append(f"{median:>10.0f} [{low:.0f}-{high:.0f}] ({ratio:.2f}x)".rjust(34))
        print(f"{name:<12} {where:<46} " + " ".join(cells))
    print(f"\n# result file: {result}; plots: {out / 'plots'}")
    if args.replay:
        replay(args, out, allocators, port)
    return 0 if done.returncode in (0, 3) else done.returncode


def replay(args, out: Path, allocators: str, port: int) -> None:
    """redis captured under the same load, its exact replay run beside it."""
    # Not pinned: the capture traces the program it starts, and the replay beside it is a scenario.
    server = f"redis-server --port {port} --save '' --appendonly no"
    client = redis_client(port, argparse.Namespace(**{**vars(args), "pin": False,
                                                     "pipeline": args.pipeline.split(",")[-1]}))
    log = out / "redis.trace"
    captured = subprocess.run([*SCENC, "capture", "--method", "preload", "-o", str(log), "--server", server,
                               "--ready", f"tcp:{port}", "--", *client], cwd=ROOT, text=True, capture_output=True)
    print("\n# the capture:\n" + "\n".join(line for line in captured.stdout.splitlines()
                                          if not line.startswith(("SET:", "GET:"))) + captured.stderr[-1500:])
    converted = subprocess.run([*SCENC, "convert", str(log), "-o", str(out / "redis.scn")], cwd=ROOT, text=True,
                               capture_output=True)
    print("# the conversion:\n" + converted.stdout[-1500:] + converted.stderr[-1500:])
    if converted.returncode not in (0, 4):      # 4: written, from an incomplete capture (said above)
        return
    names = ",".join(a for a in allocators.split(",") if a != "glibc")
    print(f"# load before the replay session: {uptime()}", flush=True)
    side = subprocess.run([*SCENC, "run", str(out / "redis.scn"), "--server", server, "--ready", f"tcp:{port}",
                           "--allocators", names, "--runs", str(args.replay_runs), "--metric",
                           r"SET: ([0-9.]+) requests per second", "--metric", r"GET: ([0-9.]+) requests per second",
                           "--higher-is-better", "-o", str(out / "redis-side.json"), "--", *client],
                          cwd=ROOT, text=True, capture_output=True)
    text = side.stdout
    start = text.find("beside the program")
    print("# the replay beside redis:\n" + (text[text.rfind("==", 0, start) - 200:] if start >= 0 else text[-4000:]))
    print(side.stderr[-1500:], file=sys.stderr)
    print(f"# load after the replay session: {uptime()}")
    if (out / "redis-side.json").exists():
        rss_ends(out / "redis-side.json", out, names.split(","))


def rss_ends(result: Path, folder: Path, names: list) -> None:
    """The window replay's peak RSS beside redis', per allocator (medians [95% CI], MiB) and their ratio."""
    found = {(row["target"], row["allocator"]): row for row in summary_rows(result, folder)
             if row["metric"] == "peak_rss_kib" and row["median"]}
    print("\n# peak RSS, medians [95% CI] (MiB): the window's replay beside redis; replay / redis")
    for name in names:
        replayed, served = found.get(("scenario", name)), found.get(("command", name))
        if not replayed or not served:
            continue
        cells = [f"{float(r['median']) / 1024:6.2f} [{float(r['median_ci_low']) / 1024:.2f}-"
                 f"{float(r['median_ci_high']) / 1024:.2f}]" for r in (replayed, served)]
        print(f"{name:<12} replay {cells[0]}   redis {cells[1]}   "
              f"{float(replayed['median']) / float(served['median']):.3f}")


if __name__ == "__main__":
    sys.exit(main())
