"""Which allocator for redis: `scenc run --server redis-server ... -- redis-benchmark` under each allocator.

For every run scenc starts redis-server (no persistence) under the allocator with the preload proof,
waits for its port, runs redis-benchmark (SET and GET, random keys, 256-byte values) without any
preload, takes SET and GET requests per second from its output, stops redis with SIGTERM and keeps
redis' peak RSS, CPU time and page faults. Allocators: glibc, glibc-fwd (glibc's malloc through a
forwarding preload, bench/programs/glibc_forward.c), tcmalloc, jemalloc, mimalloc, tbbmalloc.

Debian's redis-server is linked with libjemalloc.so.2: run without a preload, its malloc is
jemalloc's, so scenc's proof records the `glibc` runs as wrong-allocator. This script says so (from
`ldd` and from the proof), and `glibc-fwd` is how glibc's malloc is measured in redis here.

    .venv/bin/python bench/server_redis.py [--runs 10] [--requests 50000] [--clients 50] [--out DIR]

redis-server and redis-benchmark come from Debian's redis-server and redis-tools; when missing they are
installed with apt-get (as root, or through sudo). Traffic goes to 127.0.0.1 only, at a port the
kernel picks. Printed: `uptime` before and after, scenc's report (with 95% intervals and verdicts),
and one line per allocator with the medians, their intervals and the ratios to jemalloc (redis'
own allocator) side by side.

With --replay, redis is then captured under the same load (`scenc capture --method preload --server`),
the capture converted to an exact replay, and the replay run beside redis in one session
(`scenc run redis.scn --server ... -- redis-benchmark ...`): the report's side-by-side section says
whether the replay orders the allocators' peak RSS (and speed) as redis does. Plain `glibc` is left
out of that session (its redis runs are jemalloc's).
"""

import argparse
import csv
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENC = [sys.executable, "-c", "import sys; from scenc.cli import main; sys.exit(main())"]
ALLOCATORS = ("glibc", "glibc-fwd", "tcmalloc", "jemalloc", "mimalloc", "tbbmalloc")
METRICS = (("reported:SET", "SET req/s"), ("reported:GET", "GET req/s"), ("peak_rss_kib", "peak RSS KiB"))


def ensure_redis() -> None:
    if shutil.which("redis-server") and shutil.which("redis-benchmark"):
        return
    apt = ["apt-get", "install", "-y", "-q", "redis-server", "redis-tools"]
    if os.geteuid() != 0:
        if not shutil.which("sudo"):
            sys.exit("server_redis: redis-server and redis-benchmark are missing, and neither root nor sudo "
                     "is here to install them (apt-get install redis-server redis-tools)")
        apt = ["sudo", *apt]
    print("installing redis-server and redis-tools:", " ".join(apt), flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if subprocess.run(apt, env=env).returncode != 0:
        subprocess.run([*apt[:-4], "update", "-q"] if apt[0] == "sudo" else ["apt-get", "update", "-q"], env=env)
        subprocess.run(apt, env=env, check=True)


def linked_allocator(program: str) -> str:
    out = subprocess.run(["ldd", shutil.which(program)], capture_output=True, text=True).stdout
    for name in ("libjemalloc", "libtcmalloc", "libmimalloc"):
        for line in out.splitlines():
            if name in line:
                return line.split("=>")[-1].split("(")[0].strip()
    return ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def build_forwarder(folder: Path) -> Path:
    out = folder / "libglibcfwd.so"
    subprocess.run(["cc", "-O2", "-fPIC", "-shared", "-o", str(out), str(ROOT / "bench/programs/glibc_forward.c"),
                    "-ldl"], check=True)
    return out


def summary(result: Path, folder: Path) -> dict:
    """{allocator: {metric: (median, low, high, n)}} from scenc's own summary CSV."""
    table = folder / "summary.csv"
    subprocess.run([*SCENC, "report", str(result), "--summary-csv", str(table), "--all-metrics"],
                   capture_output=True, text=True, cwd=ROOT)
    found = {}
    with open(table) as f:
        for row in csv.DictReader(f):
            if row["metric"] and row["median"]:
                found.setdefault(row["allocator"], {})[row["metric"]] = (
                    float(row["median"]), float(row["median_ci_low"] or "nan"),
                    float(row["median_ci_high"] or "nan"), int(row["n"]))
    return found


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--requests", type=int, default=50000, help="redis-benchmark -n, per test")
    ap.add_argument("--clients", type=int, default=50, help="redis-benchmark -c")
    ap.add_argument("--allocators", default=",".join(ALLOCATORS))
    ap.add_argument("--out", type=Path, help="keep the result file and plots here (default: a temp dir)")
    ap.add_argument("--replay", action="store_true", help="also capture redis, and run its replay beside it")
    ap.add_argument("--replay-runs", type=int, default=12)
    args = ap.parse_args()
    ensure_redis()
    version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.strip()
    linked = linked_allocator("redis-server")
    work = Path(tempfile.mkdtemp(prefix="server-redis-"))
    out = args.out or work
    out.mkdir(parents=True, exist_ok=True)
    forwarder = build_forwarder(work)
    allocators = ",".join(f"glibc-fwd={forwarder}" if a == "glibc-fwd" else a for a in args.allocators.split(","))
    port = free_port()
    result = out / "redis.json"
    command = [*SCENC, "run", "--server", f"redis-server --port {port} --save '' --appendonly no",
               "--ready", f"tcp:{port}", "--allocators", allocators, "--runs", str(args.runs),
               "--metric", r"SET: ([0-9.]+) requests per second", "--metric", r"GET: ([0-9.]+) requests per second",
               "--higher-is-better", "-o", str(result), "--plots", str(out / "plots"), "--",
               "redis-benchmark", "-p", str(port), "-t", "set,get", "-n", str(args.requests), "-r", "100000",
               "-d", "256", "-c", str(args.clients), "-q"]
    print(f"# {version}")
    print(f"# redis-server is linked with: {linked or 'no allocator library (glibc malloc)'}")
    print(f"# load before: {uptime()}")
    print("# " + " ".join(command[3:]), flush=True)
    done = subprocess.run(command, cwd=ROOT, text=True, capture_output=True)
    print(done.stdout)
    print(done.stderr[-3000:], file=sys.stderr)
    print(f"# load after: {uptime()}")
    if not result.exists():
        return 1
    figures = summary(result, work)
    served = providers(result)
    reference = figures.get("jemalloc", {})
    print("\n# medians [95% CI] per allocator; ratio to jemalloc (redis' own allocator) in parentheses")
    print(f"{'allocator':<11} {'served redis malloc from':<46} " + " ".join(f"{label:>34}" for _, label in METRICS))
    for name in args.allocators.split(","):
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
        print(f"{name:<11} {where:<46} " + " ".join(cells))
    print(f"\n# result file: {result}; plots: {out / 'plots'}")
    if args.replay:
        replay(args, out, allocators, port)
    return 0 if done.returncode in (0, 3) else done.returncode


def replay(args, out: Path, allocators: str, port: int) -> None:
    """redis captured under the same load, its exact replay run beside it."""
    server = f"redis-server --port {port} --save '' --appendonly no"
    client = ["redis-benchmark", "-p", str(port), "-t", "set,get", "-n", str(args.requests), "-r", "100000",
              "-d", "256", "-c", str(args.clients), "-q"]
    log = out / "redis.trace"
    captured = subprocess.run([*SCENC, "capture", "--method", "preload", "-o", str(log), "--server", server,
                               "--ready", f"tcp:{port}", "--", *client], cwd=ROOT, text=True, capture_output=True)
    print("\n# the capture:\n" + "\n".join(line for line in captured.stdout.splitlines()
                                          if not line.startswith(("SET:", "GET:"))) + captured.stderr[-1500:])
    converted = subprocess.run([*SCENC, "convert", str(log), "-o", str(out / "redis.scn")], cwd=ROOT, text=True,
                               capture_output=True)
    print("# the conversion:\n" + converted.stdout[-1500:] + converted.stderr[-1500:])
    if converted.returncode != 0:
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


if __name__ == "__main__":
    sys.exit(main())
