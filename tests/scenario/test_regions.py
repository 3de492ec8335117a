"""The check on `measure` regions that cost a share of what they measure
(scenario/regions.py): a region entered per short iteration is warned about
with its estimated share; one around a loop, one entered a few times, and one
whose work cannot be estimated are not."""

import re
import textwrap

from scenc.scenario.checks import check
from scenc.scenario.parser import parse
from scenc.scenario.resolve import resolve
from locations import REPO


def region_warnings(source, params=None):
    scenario = parse(textwrap.dedent(source), "test.scn")
    return [d for d in check(resolve(scenario, params or {}))
            if d.severity == "warning" and "measure" in d.message]


def test_a_region_per_short_iteration_is_warned_about_with_its_share():
    found = region_warnings("""\
        param n = 100_000
        thread t * 2 {
            repeat n {
                measure "pair" { p = malloc(64)  free(p) }
            }
        }
        """)
    assert len(found) == 1, found
    d = found[0]
    assert (d.pos.line, d.pos.col) == (4, 9)
    assert 'measure "pair" is entered 100,000 times per thread' in d.message
    share = int(re.search(r"about (\d+)% of the time inside it", d.message).group(1))
    assert 20 <= share <= 50, d.message          # 15 ns of clock reads around 2 calls
    assert "put the `measure` around the `repeat`" in d.hint


def test_the_bench_server_is_warned_about():
    # bench/scenarios/server-measure.scn: five calls a request; the bench
    # measured about 14% more CPU time with the region than without.
    path = REPO / "bench" / "scenarios" / "server-measure.scn"
    found = [d for d in check(resolve(parse(path.read_text(), str(path)), {}))
             if d.severity == "warning"]
    assert len(found) == 1 and "20,000 times per thread" in found[0].message
    share = int(re.search(r"about (\d+)%", found[0].message).group(1))
    assert 8 <= share <= 25


def test_a_region_around_a_loop_is_not():
    assert region_warnings("""\
        thread t {
            measure "all" { repeat 1_000_000 { p = malloc(64)  free(p) } }
        }
        """) == []


def test_a_region_with_a_long_inner_loop_is_not():
    assert region_warnings("""\
        thread t {
            repeat 10_000 { measure "batch" { repeat 1000 { p = malloc(64)  free(p) } } }
        }
        """) == []


def test_a_region_entered_a_few_times_is_not():
    assert region_warnings("""\
        thread t {
            repeat 10 { measure "pair" { p = malloc(64)  free(p) } }
        }
        """) == []


def test_a_region_whose_work_cannot_be_estimated_is_not():
    # A receive may wait for any time; a write of a whole block depends on its size.
    assert region_warnings("""\
        channel q capacity 10
        thread a { repeat 100_000 { send(q, malloc(64)) } }
        thread b {
            repeat 100_000 { measure "recv" { p = recv(q)  free(p) } }
        }
        thread c {
            repeat 100_000 { measure "write" { p = malloc(uniform(1, 64K))  write(p, 1)  free(p) } }
        }
        """) == []
