"""How much of its own mappings a program wrote (issue 27): `map(n, percent_written = P)` writes the first P
percent of a mapping's pages instead of what `touch_new` writes, and `convert --model` estimates P from the
capture's page faults less its heap's pages. ruby writes part of its 74 MB of mappings: written as `touch_new
first` (two pages each) its model peaked at 0.63x ruby's RSS, as `pages` (all of them) at 1.8x."""

import json
import subprocess

import pytest

from scenc.compiler.pipeline import build
from scenc.trace.model.fit import map_written_percent

MIB = 1 << 20

# `--touch auto`'s figures of a ruby capture (trace/replay.py, touch_figures; its 1199 writable mappings made
# 22960 pages; the converter counts their pages at reused addresses once)
RUBY = {"touch": "pages", "touch_auto": {
    "pages": {"none": 921, "first": 8156, "pages": 25119, "all": 25119}, "measured": True, "heap_faults": 12989,
    "map_pages": {"first": 2398, "pages": 18242}}}


def test_the_share_of_mappings_written_is_the_faults_less_the_heaps_pages():
    percent, how = map_written_percent(RUBY, "pages", 22960)
    assert percent == 27                                      # (12989 - (25119 - 18242)) / 22960
    assert "12989 page faults less the 6877 pages" in how and "22960 pages" in how
    assert map_written_percent(RUBY, "first", 22960)[0] == 31  # (12989 - (8156 - 2398)) / 22960
    assert map_written_percent(RUBY, "pages", 1000)[0] == 100  # never more than all of them
    unmeasured = {"touch": "pages", "touch_auto": {**RUBY["touch_auto"], "measured": False, "heap_faults": -1}}
    assert map_written_percent(unmeasured, "pages", 22960) is None
    assert map_written_percent(RUBY, "pages", 0) is None      # no mapping of its own


@pytest.mark.parametrize("percent, written_mib", [(25, 10), (100, 40)])
def test_map_percent_written_writes_that_share_of_its_pages(tmp_path, percent, written_mib):
    scn = tmp_path / "m.scn"
    scn.write_text(f'scenario "m"\ntouch_new pages\nthread t {{\n    m = map(40M, percent_written = {percent})\n'
                   f'    unmap(m)\n}}\n')
    report = json.loads(subprocess.run([str(build(scn).binary)], stdout=subprocess.PIPE, check=True,
                                       timeout=60).stdout)
    above = (report["memory"]["peak_rss_kib"] - report["memory"]["baseline_rss_kib"]) << 10
    assert written_mib * MIB - MIB <= above <= written_mib * MIB + 2 * MIB, (above, percent)
    assert report["mapped"]["peak_bytes"] == 40 * MIB
