"""Pool slots keep an object's size only when something reads it.

A slot is a bare pointer (8 bytes, as in a hand-written program) unless the
scenario `write`s or `touch`es an object or a compiled-in probe reads sizes (live, layout);
then it is pointer and size (compiler/lower.py, runtime/ops.h). The layout is
checked in the compiled program itself (a static assertion on the slot type),
and the sizes it keeps are checked by what the live probe counts.
"""

import hashlib
import json
import shutil
import subprocess

import pytest

from scenc import probes
from scenc.compiler import build as builder
from scenc.compiler.pipeline import build, emit

# Objects move between slots, through realloc and out of the pool by a free,
# a test of `held` reads a slot, and free_all empties it: every way a slot is used.
POOL_ONLY = """\
scenario "slots"
thread worker * 2 {
    pool objs[10]
    for i in 0 .. 10 { objs[i] = malloc(100) }
    objs[3] = realloc(objs[3], 300)
    free(objs[4])
    objs[4] = objs[5]
    p = objs[6]
    if held(objs[4]) { free(objs[4]) }
    free(p)
    j = random(10)
    if held(objs[j]) { free(objs[j]) }
    free_all(objs)
}
"""
WRITES = POOL_ONLY.replace("free(p)", "write(p, 2)\n    free(p)")
TOUCHES = POOL_ONLY.replace("free(p)", "touch(p)\n    free(p)")
COMPILERS = [cc for cc in ("gcc", "clang") if shutil.which(cc)]


def program_with_assertion(tmp_path, source: str, assertion: str, cc: str, probe_set: str = "") -> dict:
    """Builds the generated program with `assertion` appended (it must hold
    when compiled), runs it and returns its report."""
    path = tmp_path / "s.scn"
    path.write_text(source)
    c_text = emit(path, probes=probes.c_parts(probe_set)) + f"\n{assertion}\n"
    key = hashlib.sha256((c_text + cc).encode()).hexdigest()
    binary = builder.compile_program(c_text, key, cc).binary
    out = subprocess.run([str(binary)], capture_output=True, text=True, check=True, timeout=60).stdout
    return json.loads(out)


def calls(report: dict, op: str) -> int:
    return sum(t["ops"][op] for t in report["threads"])


@pytest.mark.parametrize("cc", COMPILERS)
def test_a_scenario_that_reads_no_size_keeps_bare_pointers_in_its_slots(tmp_path, cc):
    report = program_with_assertion(
        tmp_path, POOL_ONLY, '_Static_assert(sizeof(scn_slot) == sizeof(void *), "pointer slots");', cc)
    assert calls(report, "malloc") == 20 and calls(report, "realloc") == 2
    assert calls(report, "free") == 20  # every object freed once: nothing lost or freed twice


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("source, counter", [(WRITES, "writes"), (TOUCHES, "touches")])
def test_a_write_or_touch_keeps_the_size_in_every_slot(tmp_path, cc, source, counter):
    report = program_with_assertion(
        tmp_path, source, '_Static_assert(sizeof(scn_slot) == sizeof(scn_obj), "sized slots");', cc)
    assert sum(t[counter] for t in report["threads"]) == 2
    assert calls(report, "free") == 20


def test_a_probe_that_reads_sizes_gets_them_through_the_slots(tmp_path):
    report = program_with_assertion(
        tmp_path, POOL_ONLY, '_Static_assert(sizeof(scn_slot) == sizeof(scn_obj), "sized slots");',
        COMPILERS[0], "live")
    # Each thread holds 9 x 100 + 300 bytes at its peak (the threads' peaks may
    # or may not overlap); every free took its object's size off again: a size
    # lost in a slot would leave bytes "alive" at the end.
    live = report["probes"]["live"]
    assert 1200 <= live["peak_bytes"] <= 2 * 1200 and live["final_bytes"] == 0


@pytest.mark.slow
def test_the_choice_follows_the_probe_set(tmp_path):
    path = tmp_path / "s.scn"
    path.write_text(POOL_ONLY)
    for probe_set, pointer_slots in (("", True), ("time", True), ("latency", True),
                                     ("live", False), ("layout", False)):
        program = build(path, probes=probes.c_parts(probe_set))
        assert program.binary.exists()
        assert ("#define SCN_POINTER_SLOTS" in emit(path, probes=probes.c_parts(probe_set))) == pointer_slots
