"""Helpers shared by tests/test_harness_*.py and the allocator and fault tests: run the real
`scenc`, write small scenarios, build the fault-injecting test allocators from
tests/fixtures/allocators, find processes left behind, skip where page faults cannot be counted."""

import json
import os
import subprocess
import sys
from pathlib import Path
from scenc.run.record import RunRecord

FIXTURES = Path(__file__).parent / "fixtures" / "allocators"

# About 1 ms per run: statistics need many runs, and the suite must stay quick.
TINY = """\
scenario "tiny"
seed 7
param threads = 1
param iterations = 20_000
thread worker * threads {
    repeat iterations {
        p = malloc(uniform(1, 512))
        free(p)
    }
}
"""


def write_scenario(directory: Path, text: str = TINY, name: str = "tiny.scn") -> Path:
    path = Path(directory) / name
    path.write_text(text)
    return path


# What the `scenc` console script does (`python -m scenc.cli` would load cli.py
# twice, as __main__ and as scenc.cli, with two distinct exception classes).
SCENC = [sys.executable, "-c", "import sys; from scenc.cli import main; sys.exit(main())"]


def scenc(*args, cwd=None, timeout=120, env=None):
    """`scenc ARGS` in a subprocess, as a user would run it."""
    return subprocess.run([*SCENC, *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))


def start_scenc(*args, cwd=None):
    return subprocess.Popen([*SCENC, *map(str, args)], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def read_lines(path: Path):
    """The result file read line by line as plain JSON, not through run/resultfile.py: the header (a dict)
    first, then every run as a RunRecord."""
    header, *runs = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return [header, *(RunRecord.from_json(run) for run in runs)]


def measured(runs):
    """The measured runs of a result file's runs: its warm-ups left out."""
    return [r for r in runs if not r.warmup]


def fixture_builder():
    """tests/fixtures/build_fixtures.py (the fixtures' own build helper), loaded by path once.

    By path: tests/ is not a package and "fixtures" is a common module name.
    """
    import importlib.util
    name = "scenc_tests_build_fixtures"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, FIXTURES.parent / "build_fixtures.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def build_fault_allocator(kind: str, directory: Path) -> Path:
    """crashalloc.so, hangalloc.so or nullalloc.so (kind "crash", "hang", "null")."""
    return fixture_builder().build_shared(FIXTURES / f"{kind}alloc.c", Path(directory))


def build_library_without_malloc(directory: Path) -> Path:
    """A real shared library that preloads fine but does not define malloc."""
    src = Path(directory) / "nomalloc.c"
    src.write_text("int scenc_test_not_an_allocator(void) { return 42; }\n")
    out = Path(directory) / "libnomalloc.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    return out


def processes_mapping(path) -> list:
    """pids of live processes that have `path` mapped (a preloaded library)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/maps") as f:
                if str(path) in f.read():
                    found.append(pid)
        except OSError:
            pass
    return found


def thp_always() -> bool:
    """Transparent huge pages set to 'always': one fault maps 2 MiB, so 4 KiB faults cannot be counted."""
    try:
        return "[always]" in Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return False


def skip_if_huge_pages_always():
    import pytest
    return pytest.mark.skipif(thp_always(), reason="transparent huge pages are 'always' here: one fault maps "
                                                   "2 MiB, so 4 KiB faults cannot be counted")
