"""Errors of the command line that name the fix (issue 28): allocators (a
did-you-mean, a library given by its path), `-o` naming another session's
file, `compare` with nothing in common, a run where nothing succeeded,
`trace-stats` on a scenario, and `--csv -` writing to stdout."""

import os

import pytest

from harness_support import TINY, scenc, write_scenario
from locations import REPO
from scenc.allocators import registry
from scenc.errors import EXIT_RUN, EXIT_USAGE

CRASH = """\
scenario "crash"
thread t {
    pool a[2]
    i = 5
    a[i] = malloc(8)
    free_all(a)
}
"""


def test_an_unknown_allocator_gets_a_did_you_mean():
    with pytest.raises(registry.AllocatorError) as info:
        registry.resolve("glibc,tcmaloc")
    text = str(info.value)
    assert "unknown allocator 'tcmaloc'; did you mean 'tcmalloc'?" in text
    assert "its path" in text and "NAME=PATH" in text
    assert "libtcmaloc" not in text          # the old hint made a file name of the typo


@pytest.mark.parametrize("path, name", [
    ("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "libjemalloc"),
    ("./build/libmine.so", "libmine"),
    ("/opt/x/libtcmalloc_minimal.so.4.5.9", "libtcmalloc_minimal"),
    ("/opt/lib mine.so", "lib_mine"),
])
def test_a_library_path_is_named_after_its_file(path, name):
    assert registry.looks_like_library(path)
    assert registry.library_name(path) == name


def test_a_library_path_is_accepted_as_an_allocator():
    jemalloc = next((a for a in registry.known() if a.name == "jemalloc" and a.installed), None)
    if jemalloc is None:
        pytest.skip("jemalloc is not installed")
    chosen = registry.resolve(f"glibc,{jemalloc.library}")
    assert [a.name for a in chosen] == ["glibc", "libjemalloc"]
    assert chosen[1].library == jemalloc.library and not chosen[1].builtin


def test_trace_stats_on_a_scenario_says_what_it_reads():
    for verb in ("trace-stats", "convert"):
        done = scenc(verb, REPO / "examples" / "loop.scn")
        assert done.returncode == EXIT_USAGE, done.stderr
        assert "loop.scn is a scenario, not a capture" in done.stderr
        assert "`scenc capture`" in done.stderr and "scenc exec" in done.stderr
        assert "Traceback" not in done.stderr


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    """Two finished sessions of one scenario with no param set in common."""
    work = tmp_path_factory.mktemp("sessions")
    scn = write_scenario(work)
    a, b = work / "a.json", work / "b.json"
    for out, params in ((a, "iterations=1000"), (b, "iterations=2000,3000")):
        done = scenc("run", scn, "--allocators", "glibc", "--runs", "2", "--param", params, "-o", out, "-q",
                     cwd=work)
        assert done.returncode == 0, done.stderr
    return work, scn, a, b


@pytest.mark.slow
def test_the_allocator_typo_on_the_command_line(sessions):
    work, scn, _, _ = sessions
    done = scenc("run", scn, "--allocators", "glibc,tcmaloc", "--runs", "2", cwd=work)
    assert done.returncode == EXIT_USAGE
    assert "did you mean 'tcmalloc'?" in done.stderr


@pytest.mark.slow
def test_a_run_with_a_library_path(sessions):
    work, scn, _, _ = sessions
    jemalloc = next((a for a in registry.known() if a.name == "jemalloc" and a.installed), None)
    if jemalloc is None:
        pytest.skip("jemalloc is not installed")
    done = scenc("run", scn, "--allocators", f"glibc,{jemalloc.library}", "--runs", "1",
                 "--param", "iterations=1000", "-o", work / "lib.json", cwd=work)
    assert done.returncode == 0, done.stderr
    assert "libjemalloc" in done.stdout


@pytest.mark.slow
def test_o_naming_another_scenarios_file_says_so(sessions):
    work, _, a, _ = sessions
    other = write_scenario(work, TINY.replace('"tiny"', '"other"').replace("uniform(1, 512)", "64"), "other.scn")
    done = scenc("run", other, "--allocators", "glibc", "--runs", "2", "-o", a, cwd=work)
    assert done.returncode == EXIT_USAGE
    assert f"{a} holds the results of another scenario" in done.stderr
    assert "choose another -o" in done.stderr and "--resume" not in done.stderr


@pytest.mark.slow
def test_o_naming_a_finished_session_of_the_same_scenario(sessions):
    work, scn, a, _ = sessions
    done = scenc("run", scn, "--allocators", "glibc", "--runs", "2", "--param", "iterations=1000", "-o", a,
                 cwd=work)
    assert done.returncode == EXIT_USAGE
    assert "holds a finished session of this scenario; choose another -o" in done.stderr


@pytest.mark.slow
def test_compare_with_no_common_param_set_lists_each_files_sets(sessions):
    _, _, a, b = sessions
    done = scenc("compare", a, b)
    assert done.returncode == EXIT_USAGE
    assert "the files have no param set in common" in done.stdout
    assert "A has 1: iterations=1000 [time+memory]" in done.stdout
    assert "B has 2: iterations=2000 [time+memory]; iterations=3000 [time+memory]" in done.stdout


@pytest.mark.slow
def test_csv_dash_writes_the_csv_to_stdout(sessions, tmp_path):
    _, scn, a, _ = sessions
    done = scenc("report", a, "--csv", "-", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("allocator,params,run,round,metric,value,status,target\n")
    assert "wall time" in done.stderr and "wall time" not in done.stdout   # the tables on stderr
    assert not os.path.exists(tmp_path / "-")
    done = scenc("run", scn, "--allocators", "glibc", "--runs", "1", "--param", "iterations=1000",
                 "-o", tmp_path / "c.json", "--csv", "-", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("allocator,params,")
    assert not os.path.exists(tmp_path / "-")
    assert scenc("report", a, "--csv", "-", "--json").returncode == EXIT_USAGE


@pytest.mark.slow
def test_a_run_where_nothing_succeeded_says_so(tmp_path):
    scn = write_scenario(tmp_path, CRASH, "crash.scn")
    done = scenc("run", scn, "--allocators", "glibc", "--runs", "2", "-o", tmp_path / "crash.json",
                 cwd=tmp_path)
    assert done.returncode == EXIT_RUN
    assert "no successful run of any allocator" in done.stdout and "problems:" in done.stdout
    assert "(claims: none: no run succeeded)" in done.stdout
    assert "scenc: no run succeeded (1 crashed)" in done.stderr
    assert "table above" not in done.stderr
