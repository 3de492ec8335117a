"""glibc mtrace logs: `scenc trace-stats` and `scenc convert` read them.

The logs are real: tests/fixtures/trace/mtrace_calls.c calls mtrace() and is run with MALLOC_TRACE and
libc_malloc_debug.so preloaded (since glibc 2.34, mtrace() does nothing without it).
"""
import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

from scenc.cli import main
from scenc.errors import EXIT_INCOMPLETE, EXIT_OK
from scenc.trace.source import TraceSource

from locations import FIXTURES

SOURCE = FIXTURES / "trace" / "mtrace_calls.c"


def malloc_debug():
    """libc_malloc_debug.so.0 on this machine (Debian 12: /lib/x86_64-linux-gnu/)."""
    for pattern in ("/lib/*/libc_malloc_debug.so.0", "/usr/lib/*/libc_malloc_debug.so.0", "/lib64/libc_malloc_debug.so.0",
                    "/usr/lib64/libc_malloc_debug.so.0"):
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    raise AssertionError("libc_malloc_debug.so.0 not found: glibc >= 2.34 ships it with libc6")


def scenc(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """(the log of a plain run, the log of a run with a failed malloc and a failed realloc)."""
    d = tmp_path_factory.mktemp("mtrace")
    subprocess.run([shutil.which("gcc") or "cc", "-O1", "-fno-builtin", "-o", str(d / "mtrace_calls"), str(SOURCE)], check=True)
    out = []
    for name, args in (("plain.mtrace", []), ("fail.mtrace", ["fail"])):
        env = dict(os.environ, MALLOC_TRACE=str(d / name), LD_PRELOAD=malloc_debug())
        proc = subprocess.run([str(d / "mtrace_calls"), *args], env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and proc.stdout == "done\n", proc.stderr
        out.append(d / name)
    return out


@pytest.mark.slow
def test_an_mtrace_log_of_a_real_program(logs, capsys):
    log = logs[0]
    assert log.read_text().startswith("= Start\n@ ")
    code, out, _ = scenc(capsys, "trace-stats", log, "--json")
    assert code == EXIT_OK
    d = json.loads(out)
    assert d["format"] == "mtrace" and d["has_threads"] is False and d["has_times"] is False
    # 300 mallocs, 20 callocs and a realloc(NULL, n): mtrace prints them all as '+', read as malloc.
    # Frees: 320 blocks (one realloc'd to 0 first: its '- p' line is the 321st); free(NULL) is not logged.
    assert d["calls_by_kind"] == {"malloc": 321, "free": 321, "realloc": 30}
    assert d["frees"]["of_known_blocks"] == 321 and d["frees"]["unknown_pointer"] == 0
    assert d["realloc"]["in_place"] + d["realloc"]["moved"] == 30
    assert d["live_at_end"] == {"objects": 0, "bytes": 0} and d["threads"] == 1
    code, out, _ = scenc(capsys, "trace-stats", log)
    assert code == EXIT_OK
    assert out.startswith(f"trace {log}: glibc mtrace log,") and "muntrace() closed it (= End)" in out
    assert "an mtrace log records no threads and no times" in out and "(the format records no times)" in out


@pytest.mark.slow
def test_failed_calls_in_an_mtrace_log(logs, capsys):
    code, out, _ = scenc(capsys, "trace-stats", logs[1], "--json")
    d = json.loads(out)
    assert code == EXIT_OK
    assert d["failed_allocations"] == {"total": 2, "by_kind": {"malloc": 1, "realloc": 1}}
    events = list(TraceSource(logs[1]).events)
    failed = [(e.kind, e.result_ptr, e.failed) for e in events if e.failed]
    assert failed == [("malloc", 0, True), ("realloc", 0, True)]


@pytest.mark.slow
def test_the_replay_of_an_mtrace_log_runs(logs, tmp_path, capsys):
    code, out, _ = scenc(capsys, "convert", logs[0], "-o", tmp_path / "m.scn")
    assert code == EXIT_OK and "672 calls" in out and "threads: 1" in out
    proc = subprocess.run([sys.executable, "-m", "scenc.cli", "exec", str(tmp_path / "m.scn")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    row = next(line.split() for line in proc.stdout.splitlines() if line.startswith("trace[0]"))
    assert row[1:4] == ["321", "30", "321"]


@pytest.mark.slow
def test_an_mtrace_log_cut_by_a_kill_is_incomplete(logs, tmp_path, capsys):
    text = logs[0].read_bytes()
    cut = tmp_path / "cut.mtrace"
    cut.write_bytes(text[:len(text) // 2 - 3])
    code, out, _ = scenc(capsys, "trace-stats", cut)
    assert code == EXIT_INCOMPLETE
    assert "INCOMPLETE capture: the last line of the mtrace log is cut off" in out
