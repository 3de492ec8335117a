"""`scenc compare A B [C ...]`: a table over several files, and `--fail-if-worse PCT`, the CI gate.

The gate is judged by the same rank test as every claim, with the noise band set to ±PCT, over the
family of comparisons compare prints (stats/claims.py): it exits 1 when an allocator is significantly
worse by more than PCT in a later file than in A.

Real sessions: the same allocator name, `mine`, loads tests/fixtures/allocators/costalloc.c in A
and a twice slower build of it in B (50 turns of an empty loop in every allocation: about 2x the
wall time of the tiny scenario). The quick tests use tests/fixtures/results/costs.json, a real
session, saved; only test_a_file_made_slower_by_hand_fails_the_gate makes up figures (it doubles
one allocator's saved wall times) to check the gate without running anything.
"""

import json
import re

import pytest

from harness_support import build_fault_allocator, scenc, write_scenario
from locations import FIXTURES
from scenc import errors

COSTS = FIXTURES / "results" / "costs.json"


def test_a_file_against_itself_passes_the_gate():
    done = scenc("compare", COSTS, COSTS, "--fail-if-worse", "5%")
    assert done.returncode == errors.EXIT_OK == 0, done.stderr
    assert "plain in B: no significant difference from plain in A" in done.stdout
    assert done.stdout.rstrip().splitlines()[-1].startswith(
        "fail-if-worse 5%: passed: no allocator is significantly worse by more than 5% in B than in A "
        "(the same test with a ±5% band, Holm over the 6 comparisons)")


def test_without_the_gate_compare_exits_0_whatever_it_finds(tmp_path):
    slower = _slower_copy(tmp_path, "faulty", 2.0)
    done = scenc("compare", COSTS, slower)
    assert done.returncode == 0 and "faulty in B is 2.00x slower than faulty in A" in done.stdout
    assert "fail-if-worse" not in done.stdout


def _slower_copy(tmp_path, allocator: str, factor: float):
    """A copy of costs.json whose `allocator` took `factor` times as long in every run (made up)."""
    header, *runs = [json.loads(line) for line in COSTS.read_text().splitlines()]
    for run in runs:
        if run["allocator"] == allocator:
            run["metrics"]["wall_s"] *= factor
    path = tmp_path / f"{allocator}-slower.json"
    path.write_text("".join(json.dumps(x) + "\n" for x in [header, *runs]))
    return path


def test_a_file_made_slower_by_hand_fails_the_gate(tmp_path):
    slower = _slower_copy(tmp_path, "faulty", 2.0)
    done = scenc("compare", COSTS, slower, "--fail-if-worse", "5%")
    assert done.returncode == errors.EXIT_WORSE == 5, done.stderr
    lines = done.stdout.rstrip().splitlines()
    assert lines[-2].startswith("fail-if-worse 5%: FAILED: 1 significantly worse by more than 5% than in A")
    assert re.fullmatch(r"  tiny iterations=100000: faulty in B: wall time 2\.00x slower \(\d\.\d+–\d\.\d+\)",
                        lines[-1]), lines[-1]
    # 2x is worse by more than 5%, not by more than 150%
    assert scenc("compare", COSTS, slower, "--fail-if-worse", "150%").returncode == 64     # not a percentage
    assert scenc("compare", COSTS, slower, "--fail-if-worse", "90%").returncode == 0


def test_three_files_make_a_table_with_a_column_per_later_file(tmp_path):
    slower = _slower_copy(tmp_path, "faulty", 2.0)
    done = scenc("compare", COSTS, COSTS, slower, "--fail-if-worse", "5%")
    assert done.returncode == errors.EXIT_WORSE, done.stderr
    out = done.stdout
    assert out.startswith(f"A = {COSTS}\nB = {COSTS}\nC = {slower}\nwarning: A, B and C are separate sessions")
    table = out[out.index("wall time (lower is better): the means, and each later file against A"):].splitlines()
    assert re.match(r"  allocator +A +B +C$", table[1])
    faulty = next(line for line in table if line.startswith("  faulty "))
    assert re.search(r"ms \(n=10\): not significant \(ratio [\d.]+–[\d.]+\) +[\d.]+ ms \(n=10\): "
                     r"2\.00x slower \([\d.]+–[\d.]+\)$", faulty), faulty
    assert "(claims: Holm over the 12 comparisons above" in out
    assert "  tiny iterations=100000: faulty in C: wall time 2.00x slower" in out
    assert "in B:" not in out.split("fail-if-worse 5%")[1]


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gate")
    library = build_fault_allocator("cost", tmp)
    scenario = write_scenario(tmp)
    files = {}
    for name, env in (("a", ""), ("b", "env = COSTALLOC_SPIN=200\n")):    # several times slower: a clear regression
        config = tmp / f"{name}.ini"
        config.write_text(f"[mine]\nlibrary = {library}\n{env}")
        files[name] = tmp / f"{name}.json"
        done = scenc("run", scenario, "--allocator-config", config, "--allocators", "mine", "--runs", 8,
                     "--param", "iterations=200000", "-o", files[name], "-q")
        assert done.returncode == 0, done.stderr
    return files


@pytest.mark.slow
def test_the_same_name_loading_a_twice_slower_library_fails_the_gate(sessions):
    done = scenc("compare", sessions["a"], sessions["b"], "--fail-if-worse", "5%")
    assert done.returncode == errors.EXIT_WORSE, (done.stdout, done.stderr)
    found = re.search(r"  tiny iterations=200000: mine in B: wall time (\d+\.\d+)x slower", done.stdout)
    assert found and float(found.group(1)) > 1.5, done.stdout
    assert "fail-if-worse 5%: FAILED: 1 significantly worse by more than 5% than in A" in done.stdout


@pytest.mark.slow
def test_a_real_file_against_itself_passes_the_gate(sessions):
    for name in ("a", "b"):
        done = scenc("compare", sessions[name], sessions[name], "--fail-if-worse", "5%")
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert "fail-if-worse 5%: passed" in done.stdout
