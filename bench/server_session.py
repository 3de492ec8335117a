"""What bench/server_redis.py and bench/server_mysql.py share: packages, a free port, the load, one scenc session.

    ensure_packages({"redis-server": "redis-server", "redis-benchmark": "redis-tools"}, "server_redis")
    port = free_port()
    done = run_session(["run", "--server", ...], out)     # prints `uptime` before and after, scenc's report
    rows = summary_rows(result, folder)                  # scenc's summary CSV as dicts

Not a bench of its own (no figures): the two scripts import it from bench/.
"""

import csv
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Sequence

ROOT = Path(__file__).resolve().parents[1]
SCENC = [sys.executable, "-c", "import sys; from scenc.cli import main; sys.exit(main())"]


def ensure_packages(programs: Dict[str, str], who: str) -> None:
    """Each program (a name on PATH, or a path) present, else its Debian package installed with apt-get (as
    root, or through sudo); the script ends with a sentence when neither can install it."""
    missing = sorted({pkg for prog, pkg in programs.items()
                      if not (shutil.which(prog) or os.path.exists(prog) or os.path.exists(f"/usr/sbin/{prog}"))})
    if not missing:
        return
    apt = ["apt-get", "install", "-y", "-q", *missing]
    if os.geteuid() != 0:
        if not shutil.which("sudo"):
            sys.exit(f"{who}: {', '.join(missing)} missing, and neither root nor sudo is here to install them "
                     f"(apt-get install {' '.join(missing)})")
        apt = ["sudo", *apt]
    print("installing:", " ".join(apt), flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if subprocess.run(apt, env=env).returncode != 0:
        subprocess.run([*(["sudo"] if apt[0] == "sudo" else []), "apt-get", "update", "-q"], env=env)
        subprocess.run(apt, env=env, check=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def run_session(arguments: Sequence[str]) -> subprocess.CompletedProcess:
    """`scenc ARGUMENTS` from the repository's root: the load before and after it and its report printed."""
    print(f"# load before: {uptime()}")
    print("# scenc " + " ".join(str(a) for a in arguments), flush=True)
    done = subprocess.run([*SCENC, *map(str, arguments)], cwd=ROOT, text=True, capture_output=True)
    print(done.stdout)
    print(done.stderr[-3000:], file=sys.stderr)
    print(f"# load after: {uptime()}", flush=True)
    return done


def summary_rows(result: Path, folder: Path, all_metrics: bool = False) -> List[dict]:
    """scenc's summary CSV of a result file (`scenc report --summary-csv`), one dict per row."""
    table = folder / "summary.csv"
    subprocess.run([*SCENC, "report", str(result), "--summary-csv", str(table),
                    *(["--all-metrics"] if all_metrics else [])], capture_output=True, text=True, cwd=ROOT)
    with open(table) as f:
        return list(csv.DictReader(f))
