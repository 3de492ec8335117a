"""A build with knobs (compiler/lower.py CProgram.knobs; convert --model's runs, trace/model/runs.py): one
program that takes `seed=N`, `work=0` and its runtime params as `NAME=N` on its command line, and makes
exactly the calls the plain build of the same scenario with that seed and param makes. It compiles under
-Wall -Wextra -Werror with gcc and clang; `work=0` runs no work at all (a `work` of 10^15 units, days of
CPU, finishes at once); a runtime param used where its value is needed when compiling is an error at its
place; an unknown knob ends the program with exit status 64."""

import json
import shutil
import subprocess

import pytest

from scenc import probes
from scenc.compiler.pipeline import build, emit
from scenc.scenario.errors import ScenarioError

COMPILERS = [cc for cc in ("gcc", "clang") if shutil.which(cc)]
SCENARIO = """\
scenario "knobs"
seed 1
param life_scale = 100
thread main {
    for r in 0 .. 3000 {
        malloc(uniform(16, 512)) lives uniform(1, 40) * life_scale / 100
        work(UNITS)
    }
}
"""


def report(binary, *knobs) -> dict:
    proc = subprocess.run([str(binary), *knobs], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(proc.stdout)


def figures(r: dict) -> tuple:
    return r["seed"], r["probes"]["live"]["peak_bytes"], r["threads"][0]["ops"]


@pytest.mark.parametrize("cc", COMPILERS)
def test_a_knob_build_makes_the_calls_of_the_plain_build_with_that_seed_and_param(tmp_path, cc):
    path = tmp_path / "k.scn"
    path.write_text(SCENARIO.replace("UNITS", "10"))
    live = probes.c_parts("live")
    knobbed = build(path, cc=cc, probes=live, knobs=("life_scale",)).binary
    for seed, scale in [(1, 100), (2, 100), (3, 140)]:
        path.write_text(SCENARIO.replace("UNITS", "10").replace("seed 1", f"seed {seed}"))
        plain = build(path, params={"life_scale": scale}, cc=cc, probes=live).binary
        assert figures(report(knobbed, f"seed={seed}", f"life_scale={scale}")) == figures(report(plain))
    assert figures(report(knobbed, "life_scale=140"))[1] > figures(report(knobbed))[1]  # longer lives, more live


def test_work_0_runs_no_work(tmp_path):
    path = tmp_path / "k.scn"
    path.write_text(SCENARIO.replace("UNITS", "1000000000000000"))       # 10^15 units a call: days
    b = build(path, probes=probes.c_parts("live"), knobs=("life_scale",))
    assert "if (scn_knob_work) scn_work(" in b.c_source.read_text()
    assert "scn_knob" not in emit(path)                                     # a build without knobs: none of it
    r = report(b.binary, "work=0")                                          # finishes: no unit was run
    assert r["threads"][0]["ops"]["malloc"] == 3000


def test_a_runtime_param_needed_when_compiling_is_an_error_at_its_place(tmp_path):
    path = tmp_path / "k.scn"
    path.write_text('scenario "k"\nparam n = 4\nthread main * n {\n    malloc(n) lives 1\n}\n')
    build(path, knobs=())                              # n folded in everywhere: no knob of it
    with pytest.raises(ScenarioError) as info:
        build(path, knobs=("n",))                      # the thread count is needed when compiling
    assert "k.scn:3:15: error: param n cannot be given at run time" in info.value.render()


def test_an_unknown_knob_is_refused(tmp_path):
    path = tmp_path / "k.scn"
    path.write_text(SCENARIO.replace("UNITS", "1"))
    binary = build(path, knobs=("life_scale",)).binary
    proc = subprocess.run([str(binary), "scale=3"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 64 and "unknown knob scale=3" in proc.stderr
    assert subprocess.run([str(build(path).binary), "seed=9"], capture_output=True, text=True,
                          timeout=60).returncode == 0     # a build without knobs ignores its command line


def test_a_build_takes_the_check_it_is_given_only_for_the_text_the_file_holds(tmp_path):
    """convert --model's plain build reuses its check of the model (pipeline.build `loaded=`); a check of another
    text (the file rewritten since) is not used: the program is the file's."""
    from scenc.compiler.pipeline import load
    path = tmp_path / "k.scn"
    path.write_text(SCENARIO.replace("UNITS", "10"))
    checked = load(path)
    assert report(build(path, loaded=checked).binary)["threads"][0]["ops"]["malloc"] == 3000
    path.write_text(SCENARIO.replace("UNITS", "10").replace("0 .. 3000", "0 .. 2000"))
    assert report(build(path, loaded=checked).binary)["threads"][0]["ops"]["malloc"] == 2000
