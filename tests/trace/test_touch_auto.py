"""`scenc convert --touch auto`: the touch mode chosen from the capture itself.

Real tracer, real programs, real getrusage and mincore: the tracer stores the process's minor faults at its
start and at the end mark, and what the inner pages of sampled blocks (not resident at their malloc) were at
their free; the converter decides on that sample, and reports each mode's pages beside the faults.
The programs make their blocks 64 KiB each (one 16-page block after another in glibc's heap, few enough to
stay below glibc's mmap threshold and trim), so the two modes differ by ~16 pages a block: 2000 blocks
written at both ends fault ~2000 pages, written whole ~32000.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scenc.trace.opsfile import read_header as read_ops_header
from scenc.trace.capture.preload import capture_preload
from scenc.trace.tracerlog import parse_preload_log
from scenc.trace.replay import write_replay
from harness_support import skip_if_huge_pages_always

SCENC = str(Path(sys.executable).with_name("scenc"))

BLOCKS_C = r"""
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
  enum { N = 2000, SIZE = 64 * 1024 };
  static char *p[N];
  long s = 0;
  for (int i = 0; i < N; i++) {
    p[i] = malloc(SIZE);
    if (argc > 1) memset(p[i], i, SIZE);          /* the whole block */
    else p[i][0] = 1, p[i][SIZE - 1] = 2;         /* a header and a trailer only */
  }
  for (int i = 0; i < N; i++) { s += p[i][0] + p[i][SIZE - 1]; free(p[i]); }
  return s == 1;
}
"""


pytestmark = skip_if_huge_pages_always()


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    d = tmp_path_factory.mktemp("touch-auto")
    (d / "blocks.c").write_text(BLOCKS_C)
    subprocess.run(["gcc", "-O1", "-fno-builtin", "-o", str(d / "blocks"), str(d / "blocks.c")], check=True)
    ends = capture_preload([str(d / "blocks")], d / "ends.trace", timeout=120)
    whole = capture_preload([str(d / "blocks"), "whole"], d / "whole.trace", timeout=120)
    return d, ends.path, whole.path


def ops_touch(path):
    data = Path(path).read_bytes()
    return read_ops_header(data, path).touch


def convert_auto(trace, out, status=0):
    proc = subprocess.run([SCENC, "convert", "--touch", "auto", str(trace), "-o", str(out)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == status, proc.stderr
    return proc.stdout


@pytest.mark.slow
def test_the_tracer_records_the_page_faults_of_the_traced_span(captures):
    _, ends, whole = captures
    a, b = parse_preload_log(ends).info, parse_preload_log(whole).info
    # 2000 blocks of 16 pages: both ends of each, or every page of each (plus a few dozen of the program's own)
    assert 1900 <= a.page_faults - a.tracer_pages <= 4000, a
    assert 30000 <= b.page_faults - b.tracer_pages <= 36000, b
    assert 0 < a.tracer_pages < 40
    # one malloc in 8 sampled: ~250 blocks of 14 inner pages, fresh at the malloc (the heap grows)
    assert a.fresh_pages > 1000 and a.written_pages == 0, a
    assert b.fresh_pages > 1000 and b.written_pages == b.fresh_pages, b


def test_auto_picks_first_for_a_program_writing_block_ends(captures, tmp_path):
    _, ends, _ = captures
    out = convert_auto(ends, tmp_path / "ends.scn")
    assert "touch: first, the program left most inner pages of the sampled blocks unwritten" in out, out
    assert ops_touch(tmp_path / "ends.ops") == "first"
    assert "# --touch auto: first" in (tmp_path / "ends.scn").read_text()


def test_auto_picks_pages_for_a_program_writing_whole_blocks(captures, tmp_path):
    _, _, whole = captures
    report = write_replay(whole, tmp_path / "whole.scn", "whole.trace", touch="auto")
    assert report.touch == "pages" and "wrote most inner pages" in report.touch_auto["why"]
    assert ops_touch(tmp_path / "whole.ops") == "pages"
    a = report.touch_auto
    assert a["page_faults"] > 0 and a["heap_faults"] >= 0
    # the converter's count for each mode: the ends of 2000 blocks, or their 32000 pages
    assert 1900 <= a["pages"]["first"] <= 2100 and 31900 <= a["pages"]["pages"] <= 32100, a
    assert a["pages"]["none"] == 0


def test_a_cut_log_has_no_fault_reading_and_auto_falls_back_to_pages(captures, tmp_path):
    _, ends, _ = captures
    data = ends.read_bytes()
    cut = tmp_path / "cut.trace"
    cut.write_bytes(data[:-300])             # inside the last chunk of records: the end marks after it are gone
    info = parse_preload_log(cut).info
    assert info.page_faults is None and not info.ended and info.stopped_at is not None
    out = convert_auto(cut, tmp_path / "cut.scn", status=4)    # converted, but an incomplete capture
    assert "touch: pages (the capture holds no page-fault reading (the log has no end mark" in out, out
    assert ops_touch(tmp_path / "cut.ops") == "pages"


def test_explicit_modes_do_not_count_and_report_the_mode(captures, tmp_path):
    _, ends, _ = captures
    report = write_replay(ends, tmp_path / "e.scn", "ends.trace", touch="none")
    assert report.touch == "none" and report.touch_auto is None
    assert "--touch auto" not in (tmp_path / "e.scn").read_text()
    proc = subprocess.run([SCENC, "convert", "--touch", "first", str(ends), "-o", str(tmp_path / "f.scn")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "touch:" not in proc.stdout


def test_an_ltrace_capture_has_no_reading(tmp_path):
    from scenc.trace.replay import convert_events
    from scenc.trace.events import AllocEvent
    events = [AllocEvent(1, 1, None, "malloc", 64, 1, None, None, 0x10000, False, 1, None),
              AllocEvent(2, 1, None, "free", None, 1, None, 0x10000, None, False, 2, None)]
    report = convert_events(events, tmp_path / "l.ops", touch="auto")
    assert report.touch == "pages" and "not a tracer log" in report.touch_auto["why"]
    assert json.dumps(report.touch_auto)
