"""`work(n)`: the program's CPU time between calls (runtime/ops.h scn_work). It checks as a statement with one
integer argument (file:line:col otherwise), reaches C as one call, compiles under -Wall -Wextra -Werror with gcc
and clang, and is not optimised away: a thread's CPU time grows with n (100 times the units: a generous 10
times the time at least, CPU time, which a loaded machine changes far less than wall time)."""

import json
import shutil
import subprocess
import textwrap

import pytest

from scenc.compiler.pipeline import build, emit, load
from scenc.scenario.errors import ScenarioError

COMPILERS = [cc for cc in ("gcc", "clang") if shutil.which(cc)]
WORK = """\
scenario "work"
param units = 1000
thread main {
    p = malloc(64)
    work(units)
    free(p)
}
"""


def errors(tmp_path, body: str) -> str:
    path = tmp_path / "s.scn"
    path.write_text(textwrap.dedent(body))
    with pytest.raises(ScenarioError) as info:
        load(path)
    return info.value.render()


def test_work_checks_and_reaches_c_as_one_call(tmp_path):
    path = tmp_path / "w.scn"
    path.write_text(WORK)
    load(path)
    c = emit(path)
    assert "scn_work((int64_t)(" in c
    path.write_text(WORK.replace("    work(units)\n", ""))
    assert "scn_work" not in emit(path)          # unused, nothing of it in the program


@pytest.mark.parametrize("body, where, phrase", [
    ("thread t {\n    p = malloc(8)\n    work(p)\n    free(p)\n}\n", ":3:10: error: ", "must be an integer"),
    ("thread t {\n    malloc(8) lives 1\n    work(-5)\n}\n", ":3:10: error: ", "work's units must not be negative"),
    ("thread t {\n    malloc(8) lives 1\n    work(1, 2)\n}\n", ":3:5: error: ", "work() takes 1 argument"),
    ("thread t {\n    work = 3\n    malloc(work) lives 1\n}\n", ":2:5: error: ", "work"),
    ("thread t {\n    n = work(3)\n    malloc(8) lives 1\n}\n", ":2:", "work"),
])
def test_a_wrong_work_is_an_error_at_its_place(tmp_path, body, where, phrase):
    text = errors(tmp_path, body)
    assert f"s.scn{where}" in text and phrase in text, text


@pytest.mark.parametrize("cc", COMPILERS)
def test_work_costs_cpu_time_in_proportion_to_its_units(tmp_path, cc):
    path = tmp_path / "w.scn"
    path.write_text(WORK)

    def cpu_ns(units: int) -> int:
        binary = build(path, params={"units": units}, cc=cc).binary
        runs = [json.loads(subprocess.run([str(binary)], capture_output=True, text=True, check=True,
                                          timeout=60).stdout) for _ in range(3)]
        return min(sum(t["cpu_ns"] for t in r["threads"]) for r in runs)

    small, large = cpu_ns(200_000), cpu_ns(20_000_000)
    assert large > 10 * small, (small, large)
