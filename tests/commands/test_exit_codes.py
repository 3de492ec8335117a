"""Every exit code docs/running.md lists, from a real `scenc` of each kind, argparse's usage errors included.

The table is read from the docs, so a code documented and never produced (or produced and never documented)
fails here. 130 and 143 (SIGINT, SIGTERM) are produced by tests/run/test_harness_interrupt.py and
tests/run/test_faults.py, which send the signals to a real run.
"""

import json
import re
import subprocess
import sys

import pytest

from locations import FIXTURES, REPO
from scenc import errors

SCENC = [sys.executable, "-c", "import sys; from scenc.cli import main; sys.exit(main())"]
BROKEN = 'scenario "broken"\nthread t {\n    p = malloc(8)\n    free(q)\n}\n'
HUGE = 'scenario "huge"\nthread t {\n    p = malloc(1_000_000_000)\n    touch(p)\n    free(p)\n}\n'


COSTS = FIXTURES / "results" / "costs.json"      # a real session (its README says how it was made)


def _slower(tmp_path):
    """costs.json with one allocator's wall times doubled by hand (made up: a regression to gate on)."""
    header, *runs = [json.loads(line) for line in COSTS.read_text().splitlines()]
    for run in runs:
        if run["allocator"] == "faulty":
            run["metrics"]["wall_s"] *= 2
    path = tmp_path / "slower.json"
    path.write_text("".join(json.dumps(x) + "\n" for x in [header, *runs]))
    return path


def scenc(*args, cwd=None):
    return subprocess.run([*SCENC, *map(str, args)], capture_output=True, text=True, timeout=120, cwd=cwd)


def documented_codes():
    text = (REPO / "docs" / "running.md").read_text()
    table = text[text.index("## Exit codes"):].split("\n## ")[0]
    return {int(code) for row in re.findall(r"^\| ([0-9, ]+) \|", table, re.M) for code in row.split(",")}


def test_the_documented_codes_are_the_ones_errors_py_defines():
    defined = {value for name, value in vars(errors).items() if name.startswith("EXIT_")}
    assert documented_codes() - {143} == defined      # 143: SIGTERM, 128 + 15, beside EXIT_INTERRUPTED


@pytest.mark.parametrize("argv", [
    ["--bogus"],
    ["run", "examples/loop.scn", "--runs", "0"],
    ["run", "examples/loop.scn", "--runs", "three"],
    ["run", "examples/loop.scn", "--ci", "200"],
    ["run", "examples/loop.scn", "--timeout", "1ms"],
    ["check", "examples/loop.scn", "--param", "bogus=3"],
    ["check", "no-such-file.scn"],
    ["run", "no-such-file.scn", "--runs", "1"],
    ["report", "examples/loop.scn"],
])
def test_a_command_line_that_cannot_be_used_exits_64(argv):
    done = scenc(*argv, cwd=REPO)
    assert done.returncode == errors.EXIT_USAGE == 64, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and done.stderr.strip()


@pytest.mark.slow
def test_each_other_code_from_a_real_command(tmp_path):
    (tmp_path / "broken.scn").write_text(BROKEN)
    (tmp_path / "huge.scn").write_text(HUGE)
    codes = {
        0: scenc("check", REPO / "examples" / "loop.scn"),
        1: scenc("check", tmp_path / "broken.scn"),
        2: scenc("build", REPO / "examples" / "loop.scn", "--cc", "false"),   # a "compiler" that always fails
        3: scenc("exec", tmp_path / "huge.scn", "--allow-huge", "--memory-limit", "64M"),
        4: scenc("trace-stats", FIXTURES / "trace" / "mt_handoff_x_crashed.log"),
        5: scenc("compare", COSTS, _slower(tmp_path), "--fail-if-worse", "5%"),
    }
    for code, done in codes.items():
        assert done.returncode == code, (code, done.returncode, done.stderr[-500:])
        assert "Traceback" not in done.stderr
    assert set(codes) | {64, 130, 143} == documented_codes()
