"""`map` and `unmap` in a running program: a mapping is mmap'ed directly, never through malloc, its pages are
resident once touched (`touch`, or `touch_new` as for a new block) and not before, `lives` unmaps it, and
the report gives the bytes mapped at most and at the end. Built by gcc and clang with -Wall -Wextra -Werror
(compiler/build.py's flags): a warning would fail the build.
"""

import json
import subprocess

import pytest

from scenc.compiler.pipeline import build, emit

from harness_support import skip_if_huge_pages_always

pytestmark = skip_if_huge_pages_always()

MIB = 1 << 20

SCENARIO = """
scenario "maps"
param size = 64M
param touched = 1
{touch_new}
thread main {{
    m = map(size)
    if touched == 1 {{ touch(m) }}
    p = malloc(100)
    repeat 10 {{ map(uniform(4K, 1M)) lives 3  q = malloc(16)  free(q) }}
    map(2M) lives forever
    free(p)
    unmap(m)
}}
thread other * 2 {{
    n = map(1M)
    write(n, 1, bytes = 4K)
    map(pow2(12, 16)) lives 0
    unmap(n)
}}
"""


def run(tmp_path, cc="gcc", touch_new="", **params) -> dict:
    path = tmp_path / "maps.scn"
    path.write_text(SCENARIO.format(touch_new=touch_new))
    program = build(path, params, cc=cc)
    out = subprocess.run([str(program.binary)], stdout=subprocess.PIPE, check=True, timeout=60).stdout
    return json.loads(out)


@pytest.mark.slow
@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_a_touched_mapping_is_in_the_rss_and_the_report(tmp_path, cc):
    report = run(tmp_path, cc)
    memory = report["memory"]
    above = (memory["peak_rss_kib"] - memory["baseline_rss_kib"]) << 10
    assert 62 * MIB <= above <= 80 * MIB, memory
    # 64 MiB, the 2 MiB kept, up to 3 pending of at most 1 MiB each, the other threads' 1 MiB and 64 KiB
    assert 66 * MIB <= report["mapped"]["peak_bytes"] <= 66 * MIB + 3 * MIB + 2 * (MIB + (64 << 10))
    assert report["mapped"]["final_bytes"] == 0
    by_group = {t["group"]: t for t in report["threads"]}
    assert (by_group["main"]["maps"], by_group["main"]["unmaps"]) == (12, 12)       # lives and forever unmapped
    assert (by_group["other"]["maps"], by_group["other"]["unmaps"]) == (2, 2)
    # mappings are no allocator calls: the heap's counts are the mallocs and frees alone
    assert by_group["main"]["ops"]["malloc"] == 11 and by_group["main"]["ops"]["free"] == 11
    assert by_group["other"]["ops"]["malloc"] == 0 and by_group["other"]["writes"] == 1


@pytest.mark.slow
def test_an_untouched_mapping_is_not_resident_until_touch_new_touches_it(tmp_path):
    untouched = run(tmp_path, touched=0)["memory"]
    assert (untouched["peak_rss_kib"] - untouched["baseline_rss_kib"]) << 10 < 8 * MIB, untouched
    new = run(tmp_path, touch_new="touch_new pages", touched=0)["memory"]
    assert (new["peak_rss_kib"] - new["baseline_rss_kib"]) << 10 >= 64 * MIB, new


def test_a_scenario_without_maps_reports_no_mapping(tmp_path):
    path = tmp_path / "heap.scn"
    path.write_text("thread main { p = malloc(8)  free(p) }\n")
    text = emit(path)
    assert "SCN_USES_MAPS" not in text and "scn_uses_maps" not in text
    path.write_text(SCENARIO.format(touch_new=""))
    text = emit(path)
    assert "#define SCN_USES_MAPS 1" in text and "scn_map(t, " in text and "scn_as_mapping(" in text
    assert "mmap(" not in text        # the runtime maps; the generated program only calls it


@pytest.mark.slow
def test_scenc_exec_shows_the_mappings(tmp_path):
    """`scenc exec`'s table has the maps and unmaps of each thread, and a line with the bytes mapped."""
    from scenc.report.execsummary import format_exec
    text = format_exec(run(tmp_path, size=8 << 20))
    head = text.splitlines()[1].split()
    assert "maps" in head and "unmaps" in head, text
    main = next(line.split() for line in text.splitlines() if line.startswith("main[0]"))
    assert main[head.index("maps")] == "12" and main[head.index("unmaps")] == "12", text
    assert "the scenario's own mappings: " in text and "0 bytes at the end" in text, text
