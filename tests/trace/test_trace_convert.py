"""scenc convert (exact replay) on real captures: the replay makes exactly the captured calls.

Programs are captured on the spot with `scenc capture` (ltrace 0.7.3, which often
crashes threaded programs: the threaded capture retries and skips, saying so,
only when every attempt crashed), converted with `scenc convert`, run with
`scenc exec --json`, and compared with `scenc trace-stats --json` of the same
capture. The real logs of tests/fixtures/ltrace-samples (copied from the shared folder) are
fixtures too.
"""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from scenc.cli import main
from scenc.errors import EXIT_INCOMPLETE, EXIT_OK
from scenc.trace.ltrace import parse_file
from scenc.trace.opsfile import COUNTED_AS
from scenc.trace.replay import REPLAY_KIND

from ltrace_samples import sample
from locations import TESTS

FIXTURES = TESTS / "fixtures" / "trace"
PYTHON = "/usr/bin/python3"

needs_ltrace = pytest.mark.skipif(shutil.which("ltrace") is None, reason="ltrace is not installed")


def scenc(capsys, *argv):
    """Run the scenc command in this process: (exit status, stdout, stderr)."""
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def stats_of(capsys, log) -> dict:
    code, out, _ = scenc(capsys, "trace-stats", log, "--json")
    assert code in (EXIT_OK, EXIT_INCOMPLETE)
    return json.loads(out)


def run_replay(capsys, scn) -> dict:
    code, out, err = scenc(capsys, "exec", scn, "--json")
    assert code == 0, err
    return json.loads(out)


def replayed_per_thread(result: dict) -> list:
    """Calls per thread of a replay run, in thread order, without the zero counters."""
    threads = sorted((t for t in result["threads"] if t["group"] == "trace"), key=lambda t: t["index"])
    return [{k: n for k, n in t["ops"].items() if n} for t in threads]


def captured_per_thread(stats: dict, log) -> list:
    """trace-stats' calls per thread under the runtime's counter names, threads in the order the
    converter numbers them: the order in which they first appear in the log's events, thread starts
    included (a start names its creator first: the main thread, whose first call comes last here)."""
    order = []
    for ev in parse_file(log, extra_events=True):
        for tid in ((ev.size, ev.tid) if ev.kind == "thread_start" else (ev.tid,)):
            if tid not in order:
                order.append(tid)
    out = []
    for tid in order:
        counts = {}
        for kind, n in stats["calls_by_thread"].get(str(tid), {}).items():
            k = REPLAY_KIND[kind]
            k = COUNTED_AS.get(k, k)
            counts[k] = counts.get(k, 0) + n
        out.append(counts)
    return out


def converted_peak(stdout: str) -> int:
    [line] = [ln for ln in stdout.splitlines() if ln.strip().startswith("peak live:")]
    return int(line.split()[2])


@pytest.fixture(scope="module")
def mt_handoff(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    out = tmp_path_factory.mktemp("bin") / "mt_handoff"
    subprocess.run(["gcc", "-O1", "-fno-builtin", "-pthread", "-o", str(out), str(FIXTURES / "mt_handoff.c")],
                   check=True)
    return out


# --------------------------------------------------------------------------- captured on the spot
@pytest.mark.slow
@needs_ltrace
def test_threaded_capture_replays_every_call_of_every_thread(capsys, tmp_path, mt_handoff):
    log = tmp_path / "mt.ltrace"
    attempts = 9
    # ltrace sometimes leaves the tracee hanging too: each attempt is stopped after 15 s
    code, out, err = scenc(capsys, "capture", "-o", log, "--method", "ltrace", "--mode", "e", "--retries",
                           attempts - 1, "--timeout", 15, "--", mt_handoff, 3, 12)
    if code != 0:
        assert "INCOMPLETE" in err and "attempt" in err      # said why, then:
        pytest.skip(f"ltrace 0.7.3 crashed the threaded program in all {attempts} attempts")
    assert "captured" in err and "4 thread(s)" in err
    stats = stats_of(capsys, log)
    scn = tmp_path / "mt.scn"
    code, out, err = scenc(capsys, "convert", log, "-o", scn)
    assert code == 0, err
    assert (tmp_path / "mt.ops").is_file()
    result = run_replay(capsys, scn)
    captured = captured_per_thread(stats, log)
    assert replayed_per_thread(result) == captured
    t, r = 3, 12                            # mt_handoff.c's exact counts
    assert sum(c.get("free", 0) for c in captured) == 2 * t * r + 3
    assert converted_peak(out) == stats["peak"]["bytes"]
    waits = int(next(ln for ln in out.splitlines() if "cross-thread waits" in ln).split(":")[1].split()[0])
    assert waits >= stats["frees"]["cross_thread"] == 2 * t * r


def _single_thread_programs(tmp_path):
    data = tmp_path / "words"
    data.write_text("".join(f"{(i * 7919) % 613}\n" for i in range(400)))
    # sort takes malloc's address: -x (auto) sees it. A 1 KiB buffer makes it merge through
    # temporary files, hundreds of allocator calls whatever the locale (an in-memory sort in the
    # C locale makes about 25, too few to test a replay with).
    progs = [("sort", ["sort", "-S", "1K", "--parallel=1", "-T", str(tmp_path), str(data)], "auto")]
    if Path(PYTHON).exists():
        progs.append(("python", [PYTHON, "-c", "import json; json.dumps([list(range(i)) for i in range(40)])"],
                      "e"))
    return progs


@pytest.mark.slow
@needs_ltrace
def test_single_thread_replay_reaches_the_captured_peak(capsys, tmp_path, monkeypatch):
    """Independent check of the peak: the replay program itself, built with the `live` probe."""
    monkeypatch.setenv("LC_ALL", "C")     # the same calls whatever the caller's locale
    from scenc import probes
    from scenc.compiler.pipeline import build
    for name, argv, mode in _single_thread_programs(tmp_path):
        log = tmp_path / f"{name}.ltrace"
        code, out, err = scenc(capsys, "capture", "-o", log, "--method", "ltrace", "--mode", mode, "--timeout", 60,
                               "--", *argv)
        assert code == 0, (out, err)
        stats = stats_of(capsys, log)
        assert stats["threads"] == 1 and stats["events"] > 100
        scn = tmp_path / name / f"{name}.scn"
        code, out, err = scenc(capsys, "convert", log, "-o", scn)
        assert code == 0, err
        assert replayed_per_thread(run_replay(capsys, scn)) == captured_per_thread(stats, log)
        assert converted_peak(out) == stats["peak"]["bytes"]
        binary = build(scn, probes=probes.c_parts("live")).binary
        report = json.loads(subprocess.run([str(binary)], stdout=subprocess.PIPE, text=True, check=True).stdout)
        assert report["probes"]["live"]["peak_bytes"] == stats["peak"]["bytes"], name
        assert report["probes"]["live"]["final_bytes"] == stats["live_at_end"]["bytes"], name


# --------------------------------------------------------------------------- the shared real logs
@pytest.mark.slow
def test_shared_threaded_log_replays_exactly_under_glibc_and_jemalloc(capsys, tmp_path):
    from scenc.allocators.registry import resolve
    log = sample("mt_pthread_e.log")
    scn = tmp_path / "mt.scn"
    code, out, err = scenc(capsys, "convert", log, "-o", scn)
    assert code == 0 and "degraded calls: none" in out, err
    stats = stats_of(capsys, log)
    expected = captured_per_thread(stats, log)
    assert len(expected) == 5
    totals = {k: sum(c.get(k, 0) for c in expected) for k in ("malloc", "calloc", "realloc", "free")}
    assert totals == {"malloc": 480, "calloc": 80, "realloc": 52, "free": 1120}
    assert converted_peak(out) == stats["peak"]["bytes"] == 36273
    glibc = run_replay(capsys, scn)
    assert replayed_per_thread(glibc) == expected
    from scenc.compiler.pipeline import build
    binary = build(scn).binary
    jemalloc = resolve("jemalloc")[0]
    if not jemalloc.installed:
        pytest.skip("jemalloc is not installed")
    proc = subprocess.run([str(binary)], stdout=subprocess.PIPE, text=True, env=jemalloc.preload_env(), check=True,
                          timeout=60)
    under_jemalloc = json.loads(proc.stdout)
    assert "jemalloc" in under_jemalloc["provider"]
    assert replayed_per_thread(under_jemalloc) == expected


@pytest.mark.slow
def test_crashed_log_converts_and_says_what_was_lost(capsys, tmp_path):
    log = sample("mt_pthread_crashed_e.log")
    scn = tmp_path / "crashed.scn"
    code, out, err = scenc(capsys, "convert", log, "-o", scn)
    assert code == EXIT_INCOMPLETE                     # converted, and the exit says what the warning says
    assert "INCOMPLETE capture" in err
    assert "killed by SIGSEGV (first at line 2984)" in err
    assert "1 call(s) started but never returned (first at line 2980)" in err
    assert "appear only in their exit line (first at line 2988)" in err
    header = scn.read_text().splitlines()
    assert header[0].startswith("# INCOMPLETE capture") and any("SIGSEGV" in ln for ln in header[:6])
    assert "error   unexpected-breakpoint" in out and "warning unfinished-never-resumed" in out
    stats = stats_of(capsys, log)
    assert replayed_per_thread(run_replay(capsys, scn)) == captured_per_thread(stats, log)


@pytest.mark.slow
def test_degraded_calls_are_replayed_and_counted_with_their_lines(capsys, tmp_path):
    """-x log with posix_memalign results ltrace cannot show: nothing is dropped, every oddity is listed."""
    log = sample("alloc_mix_znow_x.log")
    scn = tmp_path / "mix.scn"
    code, out, err = scenc(capsys, "convert", log, "-o", scn)
    assert code == 0, err
    assert "150 x posix_memalign result not shown by the capture (replayed, never freed); lines 20, 70, 119" in out
    assert "150 x free of a pointer never seen allocated (replayed as free(NULL)); lines 44, 92" in out
    assert "info    failed-allocation                    30" in out
    events = sum(1 for _ in parse_file(log))
    replayed = replayed_per_thread(run_replay(capsys, scn))
    assert sum(sum(c.values()) for c in replayed) == events == 7085


def test_a_log_cut_mid_line_converts_what_it_holds_and_exits_incomplete(capsys, tmp_path):
    whole = sample("alloc_mix_znow_x.log").read_bytes()
    cut = tmp_path / "cut.log"
    cut.write_bytes(whole[:len(whole) // 2])           # the copy of a log still being written
    code, out, err = scenc(capsys, "convert", cut, "-o", tmp_path / "cut.scn")
    assert code == EXIT_INCOMPLETE
    assert "INCOMPLETE capture" in err and "the last line is cut off" in err
    assert (tmp_path / "cut.scn").exists() and "converted" in out
    code, out, err = scenc(capsys, "convert", sample("alloc_mix_znow_x.log"), "-o", tmp_path / "whole.scn")
    assert code == 0 and "INCOMPLETE" not in err
