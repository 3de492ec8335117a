"""`touch(p)` and `write(p, n, bytes = b)` make the page faults and stores they promise.

A 64 MiB block comes from a fresh anonymous mapping (glibc maps blocks above
128 KiB on their own), so none of its pages is backed until the program stores
into it: each page's first store is one minor fault, counted by the kernel in
the program's getrusage (the report's `rusage.minflt`). The figures are
differences from the same program that only allocates and frees the block, so
the faults of starting the program cancel out. The allocator itself stores its
header in the block's first page, so that page may already be backed (HEAD).
"""

import json
import subprocess

import pytest

from scenc.compiler.pipeline import build
from harness_support import skip_if_huge_pages_always

PAGE = 4096
SIZE = 64 << 20
PAGES = SIZE // PAGE
HEAD = 1            # the allocator's header page
NOISE = 8           # runs of one program differ by a few faults (stack, report buffers)

SCENARIO = """
scenario "touch"
param size = 64M
param touches = 0
param writes = 0
param nbytes = 0
thread w {
    p = malloc(size)
    repeat touches { touch(p) }
    repeat writes { write(p, 1, bytes = nbytes) }
    free(p)
}
"""


pytestmark = skip_if_huge_pages_always()


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    folder = tmp_path_factory.mktemp("touch")
    path = folder / "touch.scn"
    path.write_text(SCENARIO)

    def run(cc="gcc", **params):
        program = build(path, params, cc=cc)
        out = subprocess.run([str(program.binary)], stdout=subprocess.PIPE, check=True, timeout=60).stdout
        report = json.loads(out)
        return report["rusage"]["minflt"], report["threads"][0]

    return run


@pytest.mark.slow
@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_touch_faults_in_every_page_once(faults, cc):
    base, _ = faults(cc)
    once, thread = faults(cc, touches=1)
    twice, _ = faults(cc, touches=2)
    assert thread["touches"] == 1 and thread["writes"] == 0
    assert PAGES - HEAD - NOISE <= once - base <= PAGES + NOISE
    # The second touch finds every page backed: no new fault.
    assert abs(twice - once) <= NOISE


@pytest.mark.slow
@pytest.mark.parametrize("nbytes, pages", [(1, 1), (100 * PAGE, 100), (SIZE // 2 + 1, PAGES // 2 + 1), (SIZE * 2, PAGES)])
def test_write_bytes_stores_only_the_head_of_the_block(faults, nbytes, pages):
    base, _ = faults()
    count, thread = faults(writes=1, nbytes=nbytes)
    assert thread["writes"] == 1
    assert pages - HEAD - NOISE <= count - base <= pages + NOISE


@pytest.mark.slow
def test_write_without_bytes_stores_the_whole_block(tmp_path):
    path = tmp_path / "w.scn"
    path.write_text('thread w { p = malloc(64M)  write(p, 1)  free(p) }\n')
    empty = tmp_path / "e.scn"
    empty.write_text('thread w { p = malloc(64M)  free(p) }\n')
    counts = []
    for p in (empty, path):
        out = subprocess.run([str(build(p).binary)], stdout=subprocess.PIPE, check=True, timeout=60).stdout
        counts.append(json.loads(out)["rusage"]["minflt"])
    assert PAGES - HEAD - NOISE <= counts[1] - counts[0] <= PAGES + NOISE


def test_the_generated_calls(tmp_path):
    from scenc.compiler.pipeline import emit
    path = tmp_path / "t.scn"
    path.write_text('thread w { p = malloc(5000)  touch(p)  write(p, 3, bytes = 7)  write(p, 2)  free(p) }\n')
    c = emit(path)
    assert "scn_touch(t, v_p);" in c
    assert "scn_write_bytes(t, v_p, (uint64_t)(INT64_C(3)), (int64_t)(INT64_C(7)));" in c
    assert "scn_write(t, v_p, (uint64_t)(INT64_C(2)));" in c


# `touch_new MODE`: every block the scenario allocates gets it (a fitted model's blocks are anonymous
# `malloc(...) lives N`, which `touch(p)` cannot reach), and the grown part of a realloc.
NEW = """
touch_new {mode}
thread w {{
    p = malloc(32M)
    p = realloc(p, 64M)
    free(p)
}}
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode, pages", [("none", 0), ("first", 4), ("pages", PAGES), ("all", PAGES)])
def test_touch_new_stores_into_every_new_block_as_its_mode_says(tmp_path, mode, pages):
    path = tmp_path / f"{mode}.scn"
    path.write_text(NEW.format(mode=mode))
    base = tmp_path / "base.scn"
    base.write_text(NEW.format(mode="none"))
    counts = [json.loads(subprocess.run([str(build(p).binary)], stdout=subprocess.PIPE, check=True,
                                        timeout=60).stdout)["rusage"]["minflt"] for p in (base, path)]
    # first: the two ends of the 32M block and of the grown part; pages and all: every page of the grown block
    # (realloc of an mmap'd block moves its pages with mremap: the 32M touched stay backed).
    assert pages - 2 * HEAD - NOISE <= counts[1] - counts[0] <= pages + NOISE


def test_touch_new_is_a_declaration_of_the_scenario(tmp_path):
    from scenc.compiler.pipeline import emit
    from scenc.scenario.errors import ScenarioError
    path = tmp_path / "t.scn"
    path.write_text('touch_new pages\nthread w { p = malloc(5000)  touch(p)  free(p) }\n')
    c = emit(path)
    assert "#define SCN_TOUCH_NEW 2" in c and "scn_touch(t, v_p);" in c
    path.write_text('thread w { p = malloc(5000)  free(p) }\n')
    assert "SCN_TOUCH_NEW" not in emit(path)
    path.write_text('touch_new some\nthread w { p = malloc(5000)  free(p) }\n')
    with pytest.raises(ScenarioError, match=r"'touch_new' takes none, first, pages or all, not 'some'"):
        emit(path)
