"""scenc.trace.capture.ltrace: real ltrace 0.7.3 runs on real programs."""
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from scenc.system.elf import inspect as inspect_elf
from scenc.trace.capture import CaptureError
from scenc.trace.capture.ltrace import capture
from scenc.trace.ltrace import parse_file
from locations import TESTS

FIXTURES = TESTS / "fixtures" / "trace"

pytestmark = [
    pytest.mark.skipif(shutil.which("ltrace") is None, reason="ltrace is not installed (apt-get install ltrace)"),
    pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed"),
]

THREADS, ROUNDS = 3, 20


@pytest.fixture(scope="module")
def bins(tmp_path_factory):
    d = tmp_path_factory.mktemp("trace-bins")

    def cc(out, src, *flags):
        subprocess.run(["gcc", "-O1", "-fno-builtin", *flags, "-o", str(d / out), str(FIXTURES / src)], check=True)
        return str(d / out)
    b = {
        "mt": cc("mt_handoff", "mt_handoff.c", "-pthread"),
        "kinds": cc("alloc_kinds", "alloc_kinds.c"),
        "noplt": cc("alloc_kinds_noplt", "alloc_kinds.c", "-fno-plt"),
        "dir": d,
    }
    try:
        b["static"] = cc("alloc_kinds_static", "alloc_kinds.c", "-static")
    except subprocess.CalledProcessError:
        b["static"] = None
    return b


def counts(result):
    return Counter(e.kind for e in parse_file(result.path))


def assert_exact_mt_handoff(result):
    """The program's own calls (see mt_handoff.c): exact under -e."""
    t, r = THREADS, ROUNDS
    assert counts(result) == {"malloc": t * r + 2, "calloc": t * r + 1, "realloc": t * r, "free": 2 * t * r + 3}
    stats = result.stats
    assert stats.cross_thread_frees == 2 * t * r
    assert stats.live_objects == 0 and stats.free_unknown == 0
    assert stats.threads == t + 1
    events = list(parse_file(result.path))
    main = events[0].tid
    mallocs = sorted(e.size for e in events if e.kind == "malloc" and e.tid != main)
    assert mallocs == sorted(100 + 8 * w + k for w in range(t) for k in range(r))
    assert sorted(e.size for e in events if e.kind == "realloc") == sorted(1000 + k for _ in range(t) for k in range(r))
    assert result.tracee_status == 0 and result.ltrace_status == 0


@pytest.mark.slow
def test_mt_handoff_with_e_is_exact(bins, tmp_path):
    # ltrace 0.7.3 crashes ~3 runs in 10 of this program even with -e: retry until one completes
    result = capture([bins["mt"], str(THREADS), str(ROUNDS)], tmp_path / "mt_e.log", mode="e", retries=8,
                     timeout=30)  # ltrace 0.7.3 sometimes hangs a threaded tracee
    assert result.ok, result.warnings
    assert result.mode == "e" and result.command[1:5] == ["-f", "-tt", "-T", "-e"]
    assert_exact_mt_handoff(result)
    assert not [w for w in result.warnings if "GOT" in w or "no allocator" in w]
    # threads that hand objects to each other ran in ltrace's lockstep: the capture says so, and what to use
    (lockstep,) = [w for w in result.warnings if "lockstep" in w]
    assert lockstep.startswith(f"{2 * THREADS * ROUNDS} objects were freed by another thread") and \
        "--method preload" in lockstep, lockstep


@pytest.mark.slow
def test_auto_mode_on_threads_detects_x_crashes_and_falls_back(bins, tmp_path):
    """ltrace 0.7.3 -x crashes threaded programs almost every time: each crash is reported, then -e is used."""
    result = capture([bins["mt"], str(THREADS), str(ROUNDS)], tmp_path / "mt_auto.log", mode="auto", retries=1,
                     timeout=30)
    x_crashes = [w for w in result.warnings if "(mode x)" in w]
    if result.mode == "x":             # an -x attempt survived: it sees everything, libc-internal calls included
        assert result.ok and len(x_crashes) == result.attempts - 1
        c = counts(result)
        assert c["malloc"] >= THREADS * ROUNDS + 2 and c["free"] >= 2 * THREADS * ROUNDS + 3
        assert result.stats.cross_thread_frees >= 2 * THREADS * ROUNDS
    else:
        assert len(x_crashes) == 2 and result.attempts >= 3
        assert [w.split(":")[0] for w in x_crashes] == ["attempt 1 (mode x)", "attempt 2 (mode x)"]
        assert all(len(w.split(": ", 1)[1]) > 10 for w in x_crashes)      # a reason, in words
        assert any("falling back to -e" in w for w in result.warnings)
        if result.ok:
            assert_exact_mt_handoff(result)


@pytest.mark.slow
def test_x_crash_is_reported_plainly(bins, tmp_path):
    result = capture([bins["mt"], str(THREADS), str(ROUNDS)], tmp_path / "mt_x.log", mode="x", retries=0)
    if not result.crashed:
        pytest.skip("ltrace -x did not crash the threaded program this time (it usually does)")
    assert not result.ok and result.attempts == 1
    assert result.report.incomplete
    assert result.warnings[0].startswith("attempt 1 (mode x): ")
    assert any(w.startswith("the log is incomplete") and "mode=e" in w for w in result.warnings)


def test_single_thread_x_sees_libc_internal_and_nested_calls(bins, tmp_path):
    result = capture([bins["kinds"]], tmp_path / "kinds_x.log", mode="x", retries=2,
                     stdout=subprocess.DEVNULL)
    assert result.ok and result.mode == "x", result.warnings
    rep = result.report
    assert rep.count("nested-inner-call") == 5        # realloc(NULL)/realloc(p,0)/posix_memalign/reallocarray
    assert rep.count("memalign-may-be-aligned-alloc") == 2
    c = counts(result)
    assert c["malloc"] == 4                            # incl. printf's stdout buffer, inside libc
    assert c["free"] == 11 and c["reallocarray"] == 1 and "aligned_alloc" not in c
    e = capture([bins["kinds"]], tmp_path / "kinds_e.log", mode="e", stdout=subprocess.DEVNULL)
    ce = counts(e)
    assert ce["malloc"] == 3 and ce["aligned_alloc"] == 1 and ce["free"] == 11
    assert e.report.count("libc-internal-plt") >= 1


def test_statically_linked_program_cannot_be_traced(bins, tmp_path):
    if bins["static"] is None:
        pytest.skip("no static libc to link with")
    assert not inspect_elf(bins["static"]).dynamic
    with pytest.raises(CaptureError, match="statically linked .* ltrace cannot trace a static program"):
        capture([bins["static"]], tmp_path / "static.log")


def test_no_plt_program_sees_nothing_under_e_and_says_why(bins, tmp_path):
    info = inspect_elf(bins["noplt"])
    assert {"malloc", "free"} <= info.got_symbols and "malloc" not in info.plt_symbols
    result = capture([bins["noplt"]], tmp_path / "noplt_e.log", mode="e", stdout=subprocess.DEVNULL)
    assert result.events == 0 and not result.ok and not result.crashed
    [w] = [w for w in result.warnings if "saw no allocator call" in w]
    assert "only through the GOT" in w and "mode='x'" in w
    x = capture([bins["noplt"]], tmp_path / "noplt_x.log", mode="x", stdout=subprocess.DEVNULL)
    assert x.ok and counts(x)["free"] == 11


def test_sort_takes_the_address_of_malloc_and_free(tmp_path):
    sort = shutil.which("sort")
    info = inspect_elf(sort)
    if "free" not in info.got_symbols:
        pytest.skip(f"{sort} calls free through its PLT on this system")
    data = tmp_path / "nums"
    data.write_text("".join(f"{(i * 7919) % 1000}\n" for i in range(1000)))
    e = capture(["sort", str(data)], tmp_path / "sort_e.log", mode="e", stdout=subprocess.DEVNULL)
    assert e.ok or e.events == 0
    assert counts(e)["free"] == 0
    assert any("only through the GOT" in w and "free" in w for w in e.warnings)
    x = capture(["sort", str(data)], tmp_path / "sort_x.log", mode="x", stdout=subprocess.DEVNULL, retries=2)
    assert x.ok, x.warnings
    cx = counts(x)
    assert cx["malloc"] > 10 and cx["free"] > 10


@pytest.mark.slow
def test_python_capture_skips_libc_plt_lines(tmp_path):
    py = "/usr/bin/python3"
    if not Path(py).exists():
        pytest.skip("no /usr/bin/python3")
    code = "import json; json.dumps([list(range(i)) for i in range(50)])"
    result = capture([py, "-c", code], tmp_path / "py_e.log", mode="e")
    assert result.ok, result.warnings
    text = result.path.read_text()
    assert result.report.count("libc-internal-plt") == text.count("libc.so.6->") > 0
    assert result.events == sum(1 for line in text.splitlines() if "python3->" in line)
    assert result.stats.calls_by_kind["malloc"] > 100


@pytest.mark.slow
def test_script_is_traced_through_its_interpreter(bins, tmp_path):
    script = tmp_path / "run.py"
    script.write_text("#!/usr/bin/python3\nimport json\nprint(len(json.dumps(list(range(300)))))\n")
    script.chmod(0o755)
    if not Path("/usr/bin/python3").exists():
        pytest.skip("no /usr/bin/python3")
    result = capture([str(script)], tmp_path / "script.log", mode="e", stdout=subprocess.DEVNULL)
    assert any("is a script" in w and "/usr/bin/python3" in w for w in result.warnings)
    assert result.command[-2:] == ["/usr/bin/python3", str(script)]
    assert result.ok and result.events > 100


def test_exit_status_comes_from_the_log(tmp_path):
    src = tmp_path / "exit3.c"
    src.write_text("#include <stdlib.h>\nint main(void){ free(malloc(10)); return 3; }\n")
    subprocess.run(["gcc", "-fno-builtin", "-o", str(tmp_path / "exit3"), str(src)], check=True)
    result = capture([str(tmp_path / "exit3")], tmp_path / "exit3.log", mode="e")
    assert result.ltrace_status == 0 and result.tracee_status == 3
    assert counts(result) == {"malloc": 1, "free": 1}


def test_ltrace_abort_on_vfork_is_reported(bins, tmp_path):
    result = capture(["/bin/sh", "-c", f"{bins['kinds']} >/dev/null; true"], tmp_path / "sh.log", mode="e")
    if not result.crashed:
        pytest.skip("ltrace survived the shell's vfork here")
    assert not result.ok
    assert any("ltrace itself died of SIGABRT" in w and "vfork" in w for w in result.warnings)


def test_unknown_program_and_method(tmp_path):
    with pytest.raises(CaptureError, match="command not found"):
        capture(["no-such-program-scenc"], tmp_path / "x.log")
    with pytest.raises(CaptureError, match="only 'ltrace'"):
        capture(["true"], tmp_path / "x.log", method="preload")


def test_inspect_elf_never_raises_on_broken_files(bins, tmp_path):
    data = Path(bins["kinds"]).read_bytes()
    full = inspect_elf(bins["kinds"])
    assert full.is_elf and full.dynamic and full.interpreter and {"malloc", "free"} <= full.plt_symbols
    for cut in (4, 52, 64, 200, 1000, len(data) // 2, len(data) - 100):
        broken = tmp_path / f"cut{cut}"
        broken.write_bytes(data[:cut])
        info = inspect_elf(str(broken))
        assert info.is_elf == (cut >= 52)
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"\x7fELF" + bytes(range(256)) * 8)
    assert inspect_elf(str(garbage)).is_elf
