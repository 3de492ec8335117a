"""The trace commands as a user meets them: `scenc capture`, `scenc trace-stats`, `scenc convert`.

Errors are checked through the real command in a subprocess (exit status, a
clear first line, never a traceback); the rest runs scenc's main() in process
on real programs and real logs.
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scenc.cli import main
from scenc.errors import EXIT_INCOMPLETE, EXIT_USAGE

from ltrace_samples import sample
from locations import TESTS

FIXTURES = TESTS / "fixtures" / "trace"

needs_ltrace = pytest.mark.skipif(shutil.which("ltrace") is None, reason="ltrace is not installed")


def scenc(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def scenc_process(*argv, cwd=None):
    """The real command, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "scenc.cli", *map(str, argv)], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


@pytest.fixture(scope="module")
def bins(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    d = tmp_path_factory.mktemp("bins")

    def cc(out, src, *flags):
        subprocess.run(["gcc", "-O1", "-fno-builtin", *flags, "-o", str(d / out), str(FIXTURES / src)], check=True)
        return d / out
    return {"mt": cc("mt_handoff", "mt_handoff.c", "-pthread"),
            "noplt": cc("alloc_kinds_noplt", "alloc_kinds.c", "-fno-plt")}


# --------------------------------------------------------------------------- errors
@pytest.mark.slow
def test_a_file_that_is_not_an_ltrace_log_is_a_positioned_error(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("shopping list\neggs\nmilk\n")
    for argv in (("convert", bad, "-o", tmp_path / "x.scn"), ("convert", bad, "--model", "-o", tmp_path / "m.scn"),
                 ("trace-stats", bad)):
        proc = scenc_process(*argv)
        assert proc.returncode == EXIT_USAGE, argv
        assert proc.stderr.startswith(f"{bad}:1:1: not an ltrace log"), proc.stderr
        assert "'shopping list'" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "x.scn").exists() and not list(tmp_path.glob("*.ops")) and not list(tmp_path.glob(".ops-*"))


@pytest.mark.slow
def test_missing_inputs_and_programs_are_plain_errors(tmp_path):
    cases = [
        (("convert", tmp_path / "nope.ltrace"), "scenc convert: ", "no such file"),
        (("trace-stats", tmp_path / "nope.ltrace"), "scenc trace-stats: ", "no such file"),
        (("capture", "-o", tmp_path / "x.ltrace", "--", tmp_path / "no-such-program"), "scenc capture: ",
         "no such file"),
        (("capture", "-o", tmp_path / "x.ltrace", "--", "no-such-program-scenc"), "scenc capture: ",
         "command not found"),
        (("capture", "-o", tmp_path / "x.ltrace"), "scenc capture: ", "no program to capture"),
        (("convert", FIXTURES / "alloc_kinds_e.log", "-o", tmp_path / "x.txt"), "scenc convert: ", "must end in .scn"),
    ]
    for argv, prefix, words in cases:
        proc = scenc_process(*argv)
        assert proc.returncode == EXIT_USAGE, (argv, proc.stderr)
        assert proc.stderr.startswith(prefix) and words in proc.stderr.lower(), proc.stderr
        assert "Traceback" not in proc.stderr


def test_a_log_without_any_call_cannot_be_converted(capsys, tmp_path):
    empty = tmp_path / "empty.ltrace"
    empty.write_text("")
    code, out, err = scenc(capsys, "convert", empty, "-o", tmp_path / "e.scn")
    assert code == EXIT_USAGE and "holds no allocator call: nothing to convert" in err
    assert not (tmp_path / "e.scn").exists()


def test_help_lists_the_three_commands():
    proc = scenc_process("--help")
    assert proc.returncode == 0
    for command in ("capture", "trace-stats", "convert"):
        assert command in proc.stdout


# --------------------------------------------------------------------------- capture
@needs_ltrace
def test_capture_that_sees_nothing_says_why_and_what_to_do(capsys, tmp_path, bins):
    """A -fno-plt program reaches malloc through the GOT: ltrace -e never fires."""
    code, out, err = scenc(capsys, "capture", "-o", tmp_path / "noplt.ltrace", "--method", "ltrace", "--mode", "e",
                           "--", bins["noplt"])
    assert code == EXIT_INCOMPLETE
    assert "captured" in err and "0 allocator calls" in err and out == ""
    assert "saw no allocator call" in err and "only through the GOT" in err
    assert "--mode x" in err and "--method preload" in err and "mode='x'" not in err


@needs_ltrace
def test_capture_with_x_sees_what_e_missed(capsys, tmp_path, bins):
    log = tmp_path / "noplt_x.ltrace"
    code, out, err = scenc(capsys, "capture", "-o", log, "--method", "ltrace", "--mode", "x", "--timeout", 60, "--",
                           bins["noplt"])
    assert code == 0, err
    assert "ltrace -L -x" in err and "free 11" in err
    assert f"scenc convert {log}" in err


@pytest.mark.slow
def test_preload_capture_stats_and_exact_replay_of_threads(capsys, tmp_path, bins):
    """The LD_PRELOAD tracer never crashes threaded programs: the threaded replay is checked every run."""
    t, r = 4, 30
    log = tmp_path / "mt.trace"
    code, out, err = scenc(capsys, "capture", "--method", "preload", "-o", log, "--", bins["mt"], t, r)
    assert code == 0, err
    assert "LD_PRELOAD tracer" in err and f"{t + 1} thread(s)" in err
    code, out, _ = scenc(capsys, "trace-stats", log)
    assert code == 0 and "captured with the LD_PRELOAD tracer" in out.splitlines()[0]
    code, out, _ = scenc(capsys, "trace-stats", log, "--json")
    stats = json.loads(out)
    assert stats["format"] == "preload" and stats["preload"]["missing"] == 0
    kinds = stats["calls_by_kind"]
    # mt_handoff.c's own calls; the tracer also sees libc's (stdio buffers, thread start-up)
    assert kinds["realloc"] == t * r and kinds["calloc"] >= t * r + 1 and kinds["malloc"] >= t * r + 2
    assert stats["frees"]["cross_thread"] >= 2 * t * r
    scn = tmp_path / "mt.scn"
    code, out, err = scenc(capsys, "convert", log, "-o", scn)
    assert code == 0, err
    assert f"peak live: {stats['peak']['bytes']} bytes" in out
    code, out, err = scenc(capsys, "exec", scn, "--json")
    assert code == 0, err
    replayed = {}
    for thread in json.loads(out)["threads"]:
        for k, n in thread["ops"].items():
            replayed[k] = replayed.get(k, 0) + n
    assert {k: n for k, n in replayed.items() if n} == kinds
    per_thread = sorted(tuple(sorted((k, n) for k, n in th["ops"].items() if n))
                        for th in json.loads(out)["threads"])
    expected = sorted(tuple(sorted(c.items())) for c in stats["calls_by_thread"].values())
    assert per_thread == expected


# --------------------------------------------------------------------------- trace-stats
def test_trace_stats_of_a_crashed_log_exits_incomplete_and_says_so(capsys):
    code, out, _ = scenc(capsys, "trace-stats", sample("mt_pthread_crashed_e.log"))
    assert code == EXIT_INCOMPLETE
    assert "INCOMPLETE capture" in out and "killed by SIGSEGV" in out
    code, out, _ = scenc(capsys, "trace-stats", sample("mt_pthread_e.log"), "--json")
    stats = json.loads(out)
    assert code == 0 and stats["format"] == "ltrace"
    assert stats["calls_by_kind"] == {"free": 1120, "malloc": 480, "calloc": 80, "realloc": 52}


# --------------------------------------------------------------------------- convert
def test_convert_defaults_and_the_ops_file_beside_the_scenario(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "kinds.ltrace"
    shutil.copy(FIXTURES / "alloc_kinds_e.log", log)
    code, out, err = scenc(capsys, "convert", log)
    assert code == 0, err
    assert (tmp_path / "kinds.scn").is_file() and (tmp_path / "kinds.ops").is_file()
    assert 'replay "kinds.ops"' in (tmp_path / "kinds.scn").read_text()
    assert "run it: scenc run kinds.scn --allocators glibc,jemalloc,mimalloc" in out
    # every call is replayed; every degraded call and every oddity of the log is listed with its lines
    assert "(25 in all, every captured call replayed" in out
    assert "2 x posix_memalign result not shown by the capture (replayed, never freed); lines 8, 9" in out
    assert "2 x free of a pointer never seen allocated (replayed as free(NULL)); lines 20, 21" in out
    assert "info    libc-internal-plt                     2  lines 13, 28" in out
    code, out, err = scenc(capsys, "convert", log, "--model", "--no-measure")
    assert code == 0, err
    assert (tmp_path / "kinds-model.scn").is_file() and list(tmp_path.glob("kinds-model-sizes*.csv"))
    code, out, err = scenc(capsys, "check", tmp_path / "kinds-model.scn")
    assert code == 0, err
