"""allocbench's mysql test with scenc: MariaDB under each allocator, sysbench oltp_read_only at 1, 2, 4 threads.

As the seed's test (allocbench, section 3.2.2.1): a database server per allocator, driven by sysbench's
read-only OLTP load for a fixed time with several client threads; reported are transactions per second
(from sysbench) and the server's peak memory. Here scenc starts one server per run (under the allocator,
with the preload proof), so every run starts from the same state, and `{threads}` sweeps the client:

    scenc run --param threads=1,2,4 --server 'mariadbd --no-defaults --datadir=D ...' --ready tcp:PORT
        --metric 'transactions: +[0-9]+ +\\(([0-9.]+) per sec' --higher-is-better
        -- sysbench oltp_read_only --threads={threads} --time=T ... run

The data (sysbench's tables) is made once, before any run, in a temporary data directory: by default
allocbench's size, 5 tables of a million rows (about 1.2 GB; prepared in about 2 minutes on this project's
2-core VM, and the session of 5 runs x 5 allocators x 3 thread counts then takes about 16 minutes), with a
256 MiB buffer pool, so that the server reads most rows from the page cache as a database larger than its
pool does. --tables and --table-size make it smaller.

    .venv/bin/python bench/server_mysql.py [--runs 5] [--time 10] [--tables 5] [--table-size 1000000] [--out DIR]

mariadbd, mariadb-install-db and sysbench come from Debian's mariadb-server and sysbench, installed with
apt-get when missing (as root, or through sudo). Traffic goes to 127.0.0.1 only.
"""

import argparse
import getpass
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from server_session import ensure_packages, free_port, run_session, summary_rows

ALLOCATORS = "glibc,tcmalloc,jemalloc,mimalloc,tbbmalloc"
TPS = r"transactions: +[0-9]+ +\(([0-9.]+) per sec"


def ensure_installed() -> None:
    ensure_packages({"mariadbd": "mariadb-server", "mariadb-install-db": "mariadb-server",
                     "sysbench": "sysbench"}, "server_mysql")


def program(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


def server_command(datadir: Path, port: int) -> list:
    return [program("mariadbd"), "--no-defaults", f"--datadir={datadir}", f"--socket={datadir}/mysqld.sock",
            f"--pid-file={datadir}/mysqld.pid", f"--port={port}", "--bind-address=127.0.0.1",
            f"--user={getpass.getuser()}", "--skip-grant-tables", "--skip-log-bin", "--innodb-buffer-pool-size=256M",
            "--max-connections=200", "--skip-name-resolve"]


def sysbench(port: int, tables: int, size: int, *rest) -> list:
    return ["sysbench", "oltp_read_only", "--db-driver=mysql", "--mysql-host=127.0.0.1", f"--mysql-port={port}",
            "--mysql-user=root", "--mysql-db=sbtest", f"--tables={tables}", f"--table-size={size}", *rest]


def wait_port(port: int, proc, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"server_mysql: mariadbd ended at once (exit {proc.returncode}); see its log above")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    sys.exit("server_mysql: mariadbd did not open its port in 60 s")


def prepare(datadir: Path, tables: int, size: int) -> None:
    """The data directory and sysbench's tables, once, with a server outside scenc."""
    subprocess.run([program("mariadb-install-db"), "--no-defaults", f"--datadir={datadir}",
                    f"--user={getpass.getuser()}", "--skip-test-db", "--auth-root-authentication-method=normal"],
                   check=True, stdout=subprocess.DEVNULL)
    port = free_port()
    server = subprocess.Popen(server_command(datadir, port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, server)
        subprocess.run(["mariadb", "--no-defaults", "-h", "127.0.0.1", "-P", str(port), "-u", "root", "-e",
                        "CREATE DATABASE sbtest"], check=True)
        subprocess.run(sysbench(port, tables, size, f"--threads={min(tables, 4)}", "prepare"), check=True,
                       stdout=subprocess.DEVNULL)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=120)


def summarize(result: Path, work: Path, threads_swept: str, allocators: str) -> None:
    """One line per thread count and allocator: medians with their intervals, and the ratio to glibc."""
    rows = {}
    for row in summary_rows(result, work):
        if row["metric"] in ("reported:transactions", "peak_rss_kib") and row["median"]:
            rows[(row["threads"], row["allocator"], row["metric"])] = (
                float(row["mean"]), row["mean_ci_low"], row["mean_ci_high"])
    print("\n# means [95% CI]: transactions per second, server peak RSS (MiB); ratio to glibc")
    for threads in threads_swept.split(","):
        base = rows.get((threads, "glibc", "reported:transactions"))
        for name in allocators.split(","):
            tps, rss = rows.get((threads, name, "reported:transactions")), rows.get((threads, name, "peak_rss_kib"))
            if tps is None or rss is None:
                print(f"threads={threads} {name:<10} (no successful run)")
                continue
            ratio = f"{tps[0] / base[0]:.2f}x" if base else "-"
            print(f"threads={threads} {name:<10} {tps[0]:9.1f} tps [{_num(tps[1])}-{_num(tps[2])}] ({ratio})"
                  f"   {rss[0] / 1024:7.1f} MiB [{_num(rss[1], 1024)}-{_num(rss[2], 1024)}]")


def _num(text: str, scale: float = 1.0) -> str:
    return f"{float(text) / scale:.1f}" if text else "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--time", type=int, default=10, help="seconds of load per run (sysbench --time)")
    ap.add_argument("--threads", default="1,2,4")
    ap.add_argument("--tables", type=int, default=5)
    ap.add_argument("--table-size", type=int, default=1000000)
    ap.add_argument("--allocators", default=ALLOCATORS)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--summarize", type=Path, metavar="RESULT.json", help="only print the summary of a finished run")
    args = ap.parse_args()
    if args.summarize:
        summarize(args.summarize, Path(tempfile.mkdtemp(prefix="server-mysql-")), args.threads, args.allocators)
        return 0
    ensure_installed()
    work = Path(tempfile.mkdtemp(prefix="server-mysql-"))
    out = args.out or work
    out.mkdir(parents=True, exist_ok=True)
    datadir = work / "data"
    version = subprocess.run([program("mariadbd"), "--version"], capture_output=True, text=True).stdout.strip()
    print(f"# {version}; {subprocess.run(['sysbench', '--version'], capture_output=True, text=True).stdout.strip()}")
    print(f"# preparing {args.tables} tables of {args.table_size} rows in {datadir}", flush=True)
    started = time.monotonic()
    prepare(datadir, args.tables, args.table_size)
    print(f"# prepared in {time.monotonic() - started:.0f} s", flush=True)
    port = free_port()
    result = out / "mysql.json"
    server = " ".join(server_command(datadir, port))
    command = ["run", "--param", f"threads={args.threads}", "--server", server, "--ready", f"tcp:{port}",
               "--ready-timeout", "120s", "--stop-grace", "60s", "--allocators", args.allocators, "--runs",
               str(args.runs), "--metric", TPS, "--higher-is-better", "-o", str(result), "--plots",
               str(out / "plots"), "--",
               *sysbench(port, args.tables, args.table_size, "--threads={threads}", f"--time={args.time}",
                         "--report-interval=0", "run")]
    done = run_session(command)
    if not result.exists():
        return 1
    summarize(result, work, args.threads, args.allocators)
    print(f"\n# result file: {result}; plots: {out / 'plots'}")
    return 0 if done.returncode in (0, 3) else done.returncode


if __name__ == "__main__":
    sys.exit(main())
