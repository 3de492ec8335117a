"""Fuzzing the front end: any input ends in a built program or a positioned error.

Never a Python traceback, never generated C that gcc or clang refuses
(-Wall -Wextra -Werror), never a program that crashes or hangs. What must
hold is written once in tests/fuzz/oracle.py; the inputs come from:

- programs generated from the grammar and the builtins (tests/fuzz/scn_gen.py),
  a sample of them compiled with gcc and clang and the cheap ones run;
- mutants of the examples and of the language sketch's scenarios;
- random bytes and random unicode text, in process and through `scenc check`
  (invalid UTF-8 included);
- the regression corpus in tests/fuzz_corpus/: every input that ever broke
  a promise (see its README.md).

The run is bounded (a few hundred inputs per strategy, a handful of builds);
`python bench/fuzz_frontend.py --minutes N` is the long run. Builds go to a
temporary SCENC_CACHE so random programs do not pile up in the user's cache.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz import mutate, oracle, scn_gen, seeds
from fuzz.chooser import HypothesisChooser
from locations import TESTS

CORPUS = TESTS / "fuzz_corpus"
SCENC = [sys.executable, "-m", "scenc.cli"]
SEEDS = seeds.all_seeds()

FUZZ = dict(deadline=None, database=None, print_blob=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                   HealthCheck.filter_too_much])


@pytest.fixture(scope="module", autouse=True)
def fuzz_cache(tmp_path_factory):
    old = os.environ.get("SCENC_CACHE")
    os.environ["SCENC_CACHE"] = str(tmp_path_factory.mktemp("fuzz-cache"))
    yield
    if old is None:
        del os.environ["SCENC_CACHE"]
    else:
        os.environ["SCENC_CACHE"] = old


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A scenario folder with the data files generated programs and examples name."""
    folder = tmp_path_factory.mktemp("fuzz")
    scn_gen.prepare_dir(folder)
    for name, content in seeds.example_data_files().items():
        (folder / name).write_bytes(content)
    return folder


def write_case(folder: Path, data) -> Path:
    path = folder / "case.scn"
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


@st.composite
def generated(draw, wild=None):
    return scn_gen.generate(HypothesisChooser(draw), wild)


@st.composite
def mutants(draw):
    name = draw(st.sampled_from(sorted(SEEDS)))
    return mutate.mutate(HypothesisChooser(draw), SEEDS[name])


# ------------------------------------------------------------ the generators themselves

def test_the_seeds_include_the_examples_and_the_sketch():
    assert {"loop.scn", "larson.scn", "producer-consumer.scn"} <= set(SEEDS)
    assert sum(name.startswith("sketch-") for name in SEEDS) >= 5


@pytest.mark.slow
@settings(max_examples=60, **FUZZ)
@given(generated(wild=False))
def test_tame_programs_are_accepted(workdir, program):
    # Tame programs are correct by construction (every object freed once,
    # sends matched by receives); were they rejected, the builds and runs
    # below would test nothing, and the checks would be crying wolf.
    out = oracle.front_end(write_case(workdir, program.text))
    assert out.accepted, out.error.render()


# ------------------------------------------------------------ front end only, many inputs

@pytest.mark.slow
@settings(max_examples=250, **FUZZ)
@given(generated())
def test_generated_programs_end_in_c_or_a_positioned_error(workdir, program):
    oracle.front_end(write_case(workdir, program.text))


@pytest.mark.slow
@settings(max_examples=60, **FUZZ)
@given(st.data())
def test_param_overrides_end_in_c_or_a_positioned_error(workdir, data):
    # --param values the scenario never saw: 0, -1, 1e30, 2^70, fractions, unknown names.
    c = HypothesisChooser(data.draw)
    program = scn_gen.generate(c)
    oracle.front_end(write_case(workdir, program.text), scn_gen.param_overrides(c, program.text))


@pytest.mark.slow
@settings(max_examples=200, **FUZZ)
@given(mutants())
def test_mutated_examples_end_in_c_or_a_positioned_error(workdir, text):
    oracle.front_end(write_case(workdir, text))


@pytest.mark.slow
@settings(max_examples=150, **FUZZ)
@given(st.binary(max_size=600))
def test_random_bytes_end_in_a_positioned_error(workdir, data):
    oracle.front_end(write_case(workdir, data))


@pytest.mark.slow
@settings(max_examples=150, **FUZZ)
@given(st.text(max_size=400))
def test_random_text_ends_in_a_positioned_error(workdir, text):
    oracle.front_end(write_case(workdir, text))


@pytest.mark.slow
@settings(max_examples=100, **FUZZ)
@given(st.data())
def test_a_seed_with_random_characters_inserted_is_still_handled(workdir, data):
    c = HypothesisChooser(data.draw)
    name = c.pick(sorted(SEEDS))
    text = SEEDS[name]
    at = c.int(0, len(text))
    oracle.front_end(write_case(workdir, text[:at] + c.text(5) + text[at:]))


# ------------------------------------------------------------ a sample built and run

@pytest.mark.slow
@settings(max_examples=5, **FUZZ)
@given(generated(wild=False))
def test_tame_programs_compile_with_gcc_and_clang_and_run(workdir, program):
    out = oracle.front_end(write_case(workdir, program.text))
    if not out.accepted:
        return
    for cc in ("gcc", "clang"):
        binary = oracle.compile_c(out.c_text, cc)
        result = oracle.run_program(binary, out.scenario_name)
        assert result.returncode == 0, result.stderr  # tame: no index or division mistakes either
        threads = result.report["threads"]
        # Every send of a tame program is matched by a receive, and no allocation fails.
        assert sum(t["sends"] for t in threads) == sum(t["recvs"] for t in threads)
        assert all(t["failed"] == 0 for t in threads)


@pytest.mark.slow
@settings(max_examples=4, **FUZZ)
@given(generated(wild=True))
def test_accepted_wild_programs_compile_with_gcc_and_clang(workdir, program):
    out = oracle.front_end(write_case(workdir, program.text))
    if out.accepted:
        for cc in ("gcc", "clang"):
            oracle.compile_c(out.c_text, cc)


@pytest.mark.slow
@settings(max_examples=3, **FUZZ)
@given(mutants())
def test_accepted_mutants_compile(workdir, text):
    out = oracle.front_end(write_case(workdir, text))
    if out.accepted:
        oracle.compile_c(out.c_text, "gcc")


# ------------------------------------------------------------ the user's view: scenc check

NOT_UTF8 = {
    "lone-continuation": (b"\x80", "1:1"),
    "latin-1": (b'scenario "caf\xe9"\nthread main { }\n', "1:14"),
    "third-line": (b"# ok\n\nthread main { p = malloc(1)\xff free(p) }\n", "3:28"),
    "overlong-slash": (b"thread main {\xc0\xaf}", "1:14"),
    "encoded-surrogate": (b"# \xed\xa0\x80\n", "1:3"),
    "truncated-sequence": (b"thread main { }\n# \xe2\x82", "2:3"),
}


def scenc_check(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*SCENC, "check", str(path)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name", sorted(NOT_UTF8))
def test_scenc_check_names_where_a_file_stops_being_utf8(tmp_path, name):
    data, where = NOT_UTF8[name]
    path = tmp_path / f"{name}.scn"
    path.write_bytes(data)
    proc = scenc_check(path)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"{path}:{where}: error: the file is not UTF-8 text"), proc.stderr


@pytest.mark.slow
@settings(max_examples=4, **FUZZ)
@given(st.binary(min_size=1, max_size=200))
def test_scenc_check_on_random_bytes_exits_non_zero_with_a_file_message(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("cli") / "random.scn"
    path.write_bytes(b"\xff" + data)  # never valid UTF-8, so never a scenario
    proc = scenc_check(path)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"{path}:"), proc.stderr


# ------------------------------------------------------------ the data a replay program reads

def synthetic_trace():
    """Two threads handing objects over (cross-thread frees and a realloc), as the converter sees them."""
    from scenc.trace.events import AllocEvent
    events, line = [], 0
    for i in range(40):
        line += 1
        ptr = 0x1000 + 0x40 * (i % 7)
        events.append(AllocEvent(line, 1, None, "malloc", 16 + i, 1, None, None, ptr, False, line, None))
        line += 1
        if i % 3 == 0:
            events.append(AllocEvent(line, 1, None, "realloc", 64, 1, None, ptr, ptr + 0x8000, False, line, None))
            ptr += 0x8000
            line += 1
        events.append(AllocEvent(line, 2 if i % 2 else 1, None, "free", None, 1, None, ptr, None, False, line, None))
    return events


@pytest.fixture(scope="module")
def replay_program(tmp_path_factory):
    from scenc.compiler.pipeline import build
    from scenc.trace.replay import write_replay
    folder = tmp_path_factory.mktemp("replay")
    scn = folder / "trace.scn"
    report = write_replay(synthetic_trace(), scn, "synthetic")
    assert report.threads == 2 and report.cross_thread_waits > 0
    ops = scn.with_suffix(".ops")
    return build(scn).binary, ops, ops.read_bytes()


@pytest.mark.slow
@settings(max_examples=12, **FUZZ)
@given(st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), min_size=1, max_size=8))
def test_a_damaged_replay_file_is_a_message_never_a_crash(replay_program, flips):
    binary, ops, good = replay_program
    data = bytearray(good)
    for at, value in flips:
        data[at % len(data)] = value
    ops.write_bytes(bytes(data))
    try:
        proc = subprocess.run([str(binary)], capture_output=True, text=True, timeout=3)
    except subprocess.TimeoutExpired:
        return  # damaged generations can make a thread wait for a state that never comes
    finally:
        ops.write_bytes(good)
    assert proc.returncode in (0, 3), proc.stderr  # not a signal
    if proc.returncode == 3:
        assert proc.stderr.startswith("scenc runtime: ") and str(ops) in proc.stderr


def _damage(data: bytearray, how: str) -> None:
    import struct
    from scenc.trace.opsfile import read_header
    first_op = read_header(bytes(data), "ops").ops_at
    if how == "slot past the table":
        struct.pack_into("<I", data, first_op + 4, 0xFFFFFFF0)
    elif how == "sections out of order":
        struct.pack_into("<Q", data, 32 + 8, 1 << 40)
    elif how == "op count past the file":
        struct.pack_into("<Q", data, 24, 1 << 62)
    elif how == "unknown op kind":
        data[first_op] = 200


@pytest.mark.parametrize("how", ["slot past the table", "sections out of order", "op count past the file",
                                 "unknown op kind"])
@pytest.mark.slow
def test_replay_file_damage_that_used_to_crash_is_a_message(replay_program, how):
    binary, ops, good = replay_program
    data = bytearray(good)
    _damage(data, how)
    ops.write_bytes(bytes(data))
    try:
        proc = subprocess.run([str(binary)], capture_output=True, text=True, timeout=30)
    finally:
        ops.write_bytes(good)
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.startswith("scenc runtime: ") and "damaged" in proc.stderr


def test_the_undamaged_replay_file_replays(replay_program):
    binary, _, _ = replay_program
    report = oracle.run_program(binary)
    assert [t["ops"]["malloc"] for t in report.report["threads"]] == [40, 0]


# ------------------------------------------------------------ the regression corpus

def corpus_files():
    return sorted(p.name for p in CORPUS.glob("*.scn"))


def corpus_xfails():
    """tests/fuzz_corpus/xfail.txt: `file name<TAB>reason` for crashes not fixed yet."""
    path = CORPUS / "xfail.txt"
    out = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                name, _, reason = line.partition("\t")
                out[name.strip()] = reason.strip()
    return out


def corpus_params():
    xfails = corpus_xfails()
    return [pytest.param(name, marks=pytest.mark.xfail(reason=xfails[name], strict=True))
            if name in xfails else name for name in corpus_files()]


def test_the_corpus_holds_the_crashes_found_so_far():
    assert len(corpus_files()) >= 30
    assert set(corpus_xfails()) <= set(corpus_files())


@pytest.mark.slow
@pytest.mark.parametrize("name", corpus_params())
def test_corpus_input(workdir, name):
    """Each corpus input: C or a positioned error; accepted ones compile with both
    compilers, and `run-*` ones (cheap by construction) run to a report or a runtime message."""
    out = oracle.front_end(write_case(workdir, (CORPUS / name).read_bytes()))
    if out.accepted:
        for cc in ("gcc", "clang"):
            binary = oracle.compile_c(out.c_text, cc)
            if name.startswith("run-"):
                oracle.run_program(binary, out.scenario_name)
    expect = _expectation(name)
    if expect:
        found = "accepted" if out.accepted else "\n".join(d.message for d in out.error.diagnostics)
        assert expect in found, found


def _expectation(name: str) -> str:
    """The corpus file's `# expect: ...` line: what the front end must answer (a phrase of it)."""
    for line in (CORPUS / name).read_bytes().decode("utf-8", "replace").splitlines()[:5]:
        if line.startswith("# expect: "):
            return line[len("# expect: "):].strip()
    return ""
