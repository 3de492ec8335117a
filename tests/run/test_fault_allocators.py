"""The fault-injecting test allocators really crash, hang and fail.

Programs are started directly, never through a shell or `timeout`: those would
get the LD_PRELOAD too, and their own allocations would trip the fault first.
"""

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from scenc.allocators import registry as allocators
from scenc.allocators.registry import Allocator
from harness_support import fixture_builder

build = fixture_builder()

FUNCTIONS = ("malloc", "calloc", "realloc", "reallocarray", "aligned_alloc", "memalign",
             "posix_memalign", "valloc", "pvalloc")
RESULT = re.compile(r"^done calls=(\d+) first_null=(-?\d+) nulls=(\d+) errno_ok=([01])$")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("fault-fixtures")
    return {
        **build.build_fault_allocators(out),
        "whoami": build.build_whoami(out),
        "alloc_loop": build.build_alloc_loop(out),
    }


def fault_env(library, **settings):
    base = {k: v for k, v in os.environ.items()
            if k != "LD_PRELOAD" and not k.endswith("ALLOC_AFTER")}
    env = Allocator(Path(library).stem, str(library)).preload_env(base)
    env.update({k: str(v) for k, v in settings.items()})
    return env


def alloc_loop(built, library, function, count, **settings):
    return subprocess.run([str(built["alloc_loop"]), function, str(count)],
                          env=fault_env(built[library], **settings),
                          capture_output=True, text=True, timeout=60)


def parse(done):
    assert done.returncode == 0, (done.returncode, done.stderr)
    match = RESULT.match(done.stdout.strip())
    assert match, done.stdout
    calls, first_null, nulls, errno_ok = (int(g) for g in match.groups())
    return {"calls": calls, "first_null": first_null, "nulls": nulls, "errno_ok": errno_ok}


@pytest.mark.slow
@pytest.mark.parametrize("library", build.FAULT_ALLOCATORS)
def test_fault_allocator_is_the_malloc_provider(built, library):
    done = subprocess.run([str(built["whoami"])], env=fault_env(built[library]),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert allocators.provider_matches(Allocator(library, str(built[library])), done.stdout.strip())


@pytest.mark.slow
@pytest.mark.parametrize("library", build.FAULT_ALLOCATORS)
@pytest.mark.parametrize("function", FUNCTIONS)
def test_fault_allocators_work_normally_before_the_fault(built, library, function):
    # 500 calls stay below the default limit of 1000; alloc_loop itself checks
    # alignment, zeroing and malloc_usable_size of every block.
    result = parse(alloc_loop(built, library, function, 500))
    assert result == {"calls": 500, "first_null": -1, "nulls": 0, "errno_ok": 1}


@pytest.mark.parametrize("function", FUNCTIONS)
def test_crashalloc_dies_by_sigsegv(built, function):
    done = alloc_loop(built, "crashalloc", function, 1000, CRASHALLOC_AFTER=20)
    assert done.returncode == -signal.SIGSEGV, (done.returncode, done.stderr)
    assert "done" not in done.stdout


def test_crashalloc_dies_even_if_the_program_ignores_sigsegv(built):
    # A handler that returns must not let the program carry on as if nothing happened.
    source = Path(built["alloc_loop"]).parent / "ignore_segv.c"
    source.write_text(
        "#include <signal.h>\n#include <stdlib.h>\n"
        "static void ignore(int s) { (void)s; }\n"
        "int main(void) { signal(SIGSEGV, ignore); for (int i = 0; i < 100; i++) {"
        # volatile: gcc -O2 deletes a malloc/free pair whose block is never used
        " void *volatile p = malloc(16); free(p); } return 0; }\n")
    program = build.build_program(source, source.parent)
    done = subprocess.run([str(program)], env=fault_env(built["crashalloc"], CRASHALLOC_AFTER=5),
                          capture_output=True, timeout=60)
    assert done.returncode == -signal.SIGSEGV


@pytest.mark.parametrize("library", build.FAULT_ALLOCATORS)
def test_bad_limit_is_refused_loudly(built, library):
    variable = library.upper().replace("ALLOC", "ALLOC_AFTER")
    done = alloc_loop(built, library, "malloc", 10, **{variable: "12x"})
    assert done.returncode == 2
    assert f"{variable} must be a positive decimal integer" in done.stderr


@pytest.mark.slow
def test_hangalloc_hangs_asleep(built):
    process = subprocess.Popen([str(built["alloc_loop"]), "malloc", "1000"],
                               env=fault_env(built["hangalloc"], HANGALLOC_AFTER=20),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            process.wait(timeout=2)
        # Asleep, not spinning: a hung allocator must not steal a CPU from the
        # runs being measured.  (The state letter is no proof: it reads R for
        # an instant each time the sleep loop wakes up.)
        before = _cpu_ticks(process.pid)
        time.sleep(1)
        assert _cpu_ticks(process.pid) - before <= 5
    finally:
        process.kill()
        process.wait(timeout=10)
    assert process.returncode == -signal.SIGKILL
    assert b"done" not in process.stdout.read()


def test_hangalloc_does_not_hang_below_the_limit(built):
    started = time.monotonic()
    assert parse(alloc_loop(built, "hangalloc", "malloc", 100, HANGALLOC_AFTER=1000))["nulls"] == 0
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("function", FUNCTIONS)
def test_nullalloc_fails_from_the_nth_allocation_on(built, function):
    at_10 = parse(alloc_loop(built, "nullalloc", function, 100, NULLALLOC_AFTER=10))
    at_30 = parse(alloc_loop(built, "nullalloc", function, 100, NULLALLOC_AFTER=30))
    # Whatever libc allocates before main also counts, so compare two limits:
    # moving N by 20 must move the first failure by exactly 20.
    assert 0 <= at_10["first_null"] <= 9
    assert at_30["first_null"] - at_10["first_null"] == 20
    for result in (at_10, at_30):
        assert result["nulls"] == 100 - result["first_null"]  # every later call fails too
        assert result["errno_ok"] == 1  # ENOMEM each time


def _cpu_ticks(pid):
    """User + system CPU time of a process, in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        # "pid (comm) state ... utime stime": comm may contain spaces, so split after ')'.
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])
