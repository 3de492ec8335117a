"""Nothing in a .scn file can inject C, reach data outside its folder, or run a command.

- Strings (the scenario name, measure names, data paths) reach C only as
  escaped string literals: with quotes, backslashes, comment markers,
  trigraphs, printf conversions, shell syntax and non-ASCII text the program
  still builds, does what the scenario says, and reports the names exactly.
  A marker identifier inside each payload never appears in the generated C
  outside a string literal. Newlines, control characters and escapes other
  than \\" and \\\\ are positioned errors.
- Data files (histogram, replay) must be inside the scenario's folder:
  `..`, absolute paths and symbolic links out of it are refused with
  file:line:col.
- scenc runs the compiler, the archiver and the program it generated, and
  nothing else (strace shows every exec); shell syntax in names and paths
  does nothing.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scenc.compiler.pipeline import build, emit, load
from scenc.scenario.errors import ScenarioError

SCENC = [sys.executable, "-m", "scenc.cli"]
MARK = "INJECTED_marker"

# Payloads that would change the program if they reached C unescaped: each
# would call exit(7) (or abort) from inside a comment, a string or a trigraph.
NASTY = [
    f'"); exit(7); {MARK}("',
    f"*/ exit(7); {MARK}(); /*",
    f"/* {MARK} */",
    f"\\\"); exit(7); {MARK}(\\\"",
    f"{MARK} ??/",  # with trigraphs on, ??/ is a backslash: it would escape the closing quote
    f"??= ??( ??) ??' ??< ??! ??> ??- {MARK}",
    f"%n%n%s%s%x {MARK}",
    f"$(touch pwned) `touch pwned` ; touch pwned {MARK}",
    f"\\ {MARK} \\",
    f"é中😀\u202e{MARK}\u2028\u2029",
    f"{MARK}\\",
]


@pytest.fixture(scope="module", autouse=True)
def security_cache(tmp_path_factory):
    """A temporary SCENC_CACHE: these programs embed temporary paths, nothing worth keeping."""
    old = os.environ.get("SCENC_CACHE")
    os.environ["SCENC_CACHE"] = str(tmp_path_factory.mktemp("security-cache"))
    yield
    if old is None:
        del os.environ["SCENC_CACHE"]
    else:
        os.environ["SCENC_CACHE"] = old


def scn_string(text: str) -> str:
    """A .scn string literal for `text` (the language escapes \\ and \" only)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def c_outside_strings_and_comments(c_text: str) -> str:
    """The C source with string/char literals and comments blanked out."""
    token = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|/\*.*?\*/|//[^\n]*', re.S)
    return token.sub(" ", c_text)


def run(binary: Path) -> dict:
    proc = subprocess.run([str(binary)], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")
    return json.loads(proc.stdout.decode("utf-8"))


def payloads():
    return list(NASTY)


# ------------------------------------------------------------ names and strings

@pytest.mark.slow
@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_measure_names_cannot_inject_c_and_round_trip(tmp_path, cc):
    names = payloads()
    regions = "\n".join(f"    measure {scn_string(name)} {{ p = malloc(8) free(p) }}" for name in names)
    path = tmp_path / "regions.scn"
    path.write_text(f"thread main {{\n{regions}\n}}\n")
    c_text = emit(path)
    assert MARK not in c_outside_strings_and_comments(c_text)
    assert "??" not in c_text and "*/ exit" not in c_text
    report = run(build(path, cc=cc).binary)
    thread = report["threads"][0]
    assert list(thread["regions"]) == names
    assert all(r["entries"] == 1 for r in thread["regions"].values())
    assert thread["ops"]["malloc"] == thread["ops"]["free"] == len(names)


@pytest.mark.parametrize("name", payloads())
def test_the_scenario_name_cannot_inject_c_and_round_trips(tmp_path, name):
    path = tmp_path / "named.scn"
    path.write_text(f"scenario {scn_string(name)}\nthread main {{ p = malloc(8) free(p) }}\n")
    c_text = emit(path)
    assert MARK not in c_outside_strings_and_comments(c_text)
    report = run(build(path).binary)
    assert report["scenario"] == name
    assert report["threads"][0]["ops"]["free"] == 1


def test_a_scenario_file_name_is_no_way_in_either(tmp_path):
    # The name defaults to the file's stem, and the file name is quoted in a comment
    # (a file name holds no '/', but it may end in '*' and hold quotes and backslashes).
    path = tmp_path / f'*?? exit(7); {MARK}(); "x\\ *.scn'
    path.write_text("thread main { p = malloc(8) free(p) }\n")
    assert MARK not in c_outside_strings_and_comments(emit(path))
    assert run(build(path).binary)["scenario"] == path.stem


def test_a_file_name_that_is_not_utf8_still_gives_a_valid_report(tmp_path):
    path = tmp_path / b"caf\xe9.scn".decode("utf-8", "surrogateescape")
    path.write_text("thread main { p = malloc(8) free(p) }\n")
    assert run(build(path).binary)["scenario"] == "caf\ufffd"


@pytest.mark.parametrize("literal, phrase", [
    ('"line\nbreak"', "unexpected"),                 # a newline cannot be in a string
    ('"nul\\0"', "unexpected"),                      # no escapes but \" and \\
    ('"newline\\n"', "unexpected"),
    ('"hex\\x41"', "unexpected"),
    ('"octal\\101"', "unexpected"),
    ('"nul\x00byte"', "control character"),
    ('"bell\x07"', "control character"),
    ('"escape\x1b[2J"', "control character"),
    ('"delete\x7f"', "control character"),
    ('"tab\there"', "control character"),
])
def test_newlines_controls_and_unknown_escapes_are_positioned_errors(tmp_path, literal, phrase):
    path = tmp_path / "bad.scn"
    path.write_text(f"thread main {{\n    measure {literal} {{ p = malloc(8) free(p) }}\n}}\n")
    with pytest.raises(ScenarioError) as err:
        load(path)
    d = err.value.diagnostics[0]
    assert d.filename == str(path)
    assert d.pos.line == 2 and d.pos.col >= 13
    assert phrase in d.message
    rendered = err.value.render()
    assert "\x1b" not in rendered and "\x00" not in rendered and "\x07" not in rendered


def test_the_two_escapes_round_trip_exactly(tmp_path):
    name = 'a "quoted" \\ back\\slash \\" both \\\\'
    path = tmp_path / "escapes.scn"
    path.write_text(f"scenario {scn_string(name)}\nthread main {{ p = malloc(8) free(p) }}\n")
    assert load(path).resolved.scenario.name == name
    assert run(build(path).binary)["scenario"] == name


# ------------------------------------------------------------ data paths

@pytest.fixture
def folders(tmp_path):
    """scenario/ (with sizes.csv, and links out of it), outside.csv beside it, /etc/hostname."""
    scenario = tmp_path / "scenario"
    scenario.mkdir()
    (scenario / "sizes.csv").write_text("size,count\n16,1\n64,1\n")
    (scenario / "inner").mkdir()
    (tmp_path / "outside.csv").write_text("size,count\n32,1\n")
    (tmp_path / "outside.ops").write_bytes(b"")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "sizes.csv").write_text("size,count\n8,1\n")
    (scenario / "link.csv").symlink_to(tmp_path / "outside.csv")
    (scenario / "link.ops").symlink_to(tmp_path / "outside.ops")
    (scenario / "dirlink").symlink_to(tmp_path / "elsewhere")
    (scenario / "inside-link.csv").symlink_to(scenario / "sizes.csv")
    (scenario / "loop.csv").symlink_to(scenario / "loop.csv")
    return scenario


OUTSIDE = ["../outside.csv", "link.csv", "dirlink/sizes.csv", "inner/../../outside.csv", "/etc/hostname",
           "/etc/passwd", "//etc/hostname", "./../outside.csv"]


def positioned_error(path: Path, line: int, col: int, phrase: str) -> None:
    """`scenc check` and `scenc build` both refuse, with file:line:col, no traceback."""
    for command in ("check", "build"):
        proc = subprocess.run([*SCENC, command, str(path)], capture_output=True, text=True, timeout=120)
        if command == "check" and proc.returncode == 0 and "replay" in path.read_text():
            continue  # replay data is looked up when lowering: `scenc build` is the one to refuse
        assert proc.returncode == 1, (command, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert proc.stderr.startswith(f"{path}:{line}:{col}: error: "), proc.stderr
        assert phrase in proc.stderr.splitlines()[0], proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("ref", OUTSIDE)
def test_histogram_outside_the_folder_is_refused(folders, ref):
    path = folders / "s.scn"
    path.write_text(f"thread main {{\n    p = malloc(histogram({scn_string(ref)}))\n    free(p)\n}}\n")
    positioned_error(path, 2, 26, "outside the scenario's folder")


@pytest.mark.slow
@pytest.mark.parametrize("ref", ["../outside.ops", "link.ops", "/etc/hostname", "dirlink/../../outside.ops"])
def test_replay_outside_the_folder_is_refused(folders, ref):
    path = folders / "r.scn"
    path.write_text(f"scenario \"r\"\nreplay {scn_string(ref)}\n")
    positioned_error(path, 2, 8, "outside the scenario's folder")


@pytest.mark.parametrize("ref", ["sizes.csv", "./sizes.csv", "inner/../sizes.csv", "inside-link.csv"])
def test_histogram_inside_the_folder_is_read(folders, ref):
    path = folders / "ok.scn"
    path.write_text(f"thread main {{ repeat 20 {{ p = malloc(histogram({scn_string(ref)})) free(p) }} }}\n")
    report = run(build(path).binary)
    assert report["threads"][0]["ops"]["malloc"] == 20


@pytest.mark.parametrize("ref, phrase", [
    ("loop.csv", "cannot be looked at"),      # a symlink to itself
    ("missing.csv", "does not exist"),
    ("inner", "does not exist"),              # a directory is not a histogram
    ("x" * 300, "cannot be a file name"),
])
@pytest.mark.slow
def test_odd_data_paths_are_positioned_errors(folders, ref, phrase):
    path = folders / "odd.scn"
    path.write_text(f"thread main {{\n    p = malloc(histogram({scn_string(ref)}))\n    free(p)\n}}\n")
    positioned_error(path, 2, 26, phrase)


# ------------------------------------------------------------ nothing but the compiler and the program

SHELLISH = "$(touch {0}/pwned1) `touch {0}/pwned2` ; touch {0}/pwned3 | touch {0}/pwned4 && touch {0}/pwned5"


@pytest.mark.slow
def test_shell_syntax_in_names_and_paths_does_nothing(tmp_path):
    folder = tmp_path / "$(touch pwned6) `touch pwned7`"
    folder.mkdir()
    evil = SHELLISH.format(tmp_path)
    (folder / "$(touch pwned8).csv").write_text("size,count\n8,1\n")
    path = folder / "a; touch pwned9 $(touch pwned10).scn"
    path.write_text(f"scenario {scn_string(evil)}\n"
                    "thread main { measure \"$(touch pwned11) `touch pwned12`; touch pwned13\" "
                    f"{{ p = malloc(histogram(\"$(touch pwned8).csv\")) "
                    f"free(p) }} }}\n")
    for command in ("check", "emit", "build", "exec"):
        proc = subprocess.run([*SCENC, command, str(path)], capture_output=True, text=True, timeout=120,
                              cwd=tmp_path)
        assert proc.returncode == 0, (command, proc.stderr)
    created = sorted(p.name for p in tmp_path.rglob("pwned*")) + sorted(p.name for p in Path.cwd().glob("pwned*"))
    assert created == []


@pytest.mark.slow
def test_scenc_executes_only_the_toolchain_and_the_generated_program(tmp_path):
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed")
    folder = tmp_path / "s"
    folder.mkdir()
    path = folder / "x.scn"
    path.write_text(f"scenario {scn_string(SHELLISH.format(tmp_path))}\n"
                    "thread main { p = malloc(8) free(p) }\n")
    log = tmp_path / "exec.log"
    env = {**os.environ, "SCENC_CACHE": str(tmp_path / "cache")}  # a cold cache: the compiler runs
    for cc in ("gcc", "clang"):
        proc = subprocess.run([strace, "-f", "-qq", "-e", "trace=execve", "-e", "signal=none", "-o", str(log),
                               *SCENC, "exec", "--cc", cc, "--json", str(path)],
                              capture_output=True, text=True, timeout=300, env=env)
        if proc.returncode != 0 and "ptrace" in proc.stderr:
            pytest.skip(f"strace cannot trace here: {proc.stderr.strip()[:200]}")
        assert proc.returncode == 0, proc.stderr
        # Successful execs only; PATH lookups that failed with ENOENT are not runs.
        ran = re.findall(r'execve\("([^"]+)".*\) = 0$', log.read_text(), re.M)
        toolchain = {"gcc", "clang", "cc", "cc1", "as", "ld", "ld.bfd", "ld.gold", "ld.lld", "collect2", "ar"}
        unexpected = []
        for exe in ran:
            base = Path(exe).name
            if base.startswith(("python", "clang", "gcc")) or base in toolchain:
                continue
            if Path(exe).parent.parent.name == "builds" and base == "scenario":
                continue
            unexpected.append(exe)
        assert unexpected == [], unexpected
        assert any(Path(exe).name == "scenario" for exe in ran)  # the program did run
        assert not list(tmp_path.glob("pwned*"))
