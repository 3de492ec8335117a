"""`map(n)` and `unmap(m)`: the program's own mappings as statements of the language (issue 27).

A mapping is a resource like a pointer, in a kind of its own: the parser positions its syntax errors, the
resolver keeps mappings out of the heap's statements (free, realloc, send, pools) and heap blocks out of
unmap, the flow checks follow a mapping as they follow a pointer (unmapped twice, used once unmapped,
still mapped at the end), and the peak bounds count mapped bytes apart from the heap's.
"""

import textwrap

import pytest

from scenc.scenario.checks import check
from scenc.scenario.errors import ScenarioError
from scenc.scenario.parser import parse
from scenc.scenario.peak import estimate
from scenc.scenario import flow
from scenc.scenario.errors import Reporter
from scenc.scenario.resolve import MAP, resolve


def diagnostics(body, filename="maps.scn", top=""):
    """The diagnostics of `body` as a thread's block: its lines are the file's from line 2 on (`top`, one
    line of declarations at most, goes before the thread)."""
    source = top + "thread main {\n" + body + "}\n"
    try:
        return check(resolve(parse(source, filename), {}))
    except ScenarioError as e:
        return e.diagnostics


def found(body, severity, **kw):
    return [(f"{d.pos.line}:{d.pos.col}", d.message) for d in diagnostics(body, **kw) if d.severity == severity]


def test_a_mapping_is_a_variable_of_its_own_kind():
    r = resolve(parse("thread main { m = map(64K)  touch(m)  write(m, 1, bytes = 10)  unmap(m) }\n", "m.scn"), {})
    assert r.groups[0].symbols["m"] == MAP
    assert diagnostics("m = map(64K)  touch(m)  unmap(m)\n") == []
    assert diagnostics("map(uniform(4K, 1M)) lives uniform(0, 5)\nmap(8M) lives forever\n") == []
    assert diagnostics("m = map(4K)\nif held(m) { unmap(m) }\n") == []


def test_syntax_errors_in_map_statements_are_positioned():
    with pytest.raises(ScenarioError) as e:
        parse("thread main {\n    m = map(4K)\n    unmap(m\n}\n", "broken.scn")
    text = str(e.value)
    assert "broken.scn:4:1: error: unexpected '}'" in text, text
    with pytest.raises(ScenarioError) as e:
        parse("thread main {\n    m = map(4K) lives\n}\n", "broken.scn")
    assert "broken.scn:2:17: error: unexpected 'lives'" in str(e.value), str(e.value)


@pytest.mark.parametrize("body, position, phrase", [
    ("m = map(4K)\nfree(m)\n", "3:6", "the argument of free() must be a pointer, not a mapping"),
    ("p = malloc(8)\nunmap(p)\n", "3:7", "the argument of unmap() must be a mapping, not a pointer"),
    ("m = map(4K)\nq = realloc(m, 8K)\n", "3:13", "the argument of realloc() must be a pointer, not a mapping"),
    ("pool slots[2]\nslots[0] = map(4K)\n", "3:12", "a pool slot holds a heap block, not a mapping"),
    ("p = malloc(8)\np = map(4K)\n", "3:1", "'p' holds a pointer and cannot be given a mapping"),
    ("touch(3)\n", "2:7", "the argument of touch() must be a pointer or a mapping"),
])
def test_a_mapping_and_a_heap_block_are_not_mixed(body, position, phrase):
    errors = found(body, "error")
    assert len(errors) == 1 and errors[0][0] == position and phrase in errors[0][1], errors


def test_map_and_unmap_are_reserved_names():
    errors = [d.message for d in diagnostics("x = 1\n", top="param map = 3\n") if d.severity == "error"]
    assert errors == ["'map' is a builtin name and cannot be declared"], errors


@pytest.mark.parametrize("body, severity, position, phrase", [
    ("m = map(4K)\nunmap(m)\nunmap(m)\n", "error", "4:7", "m is already unmapped (unmapped at line 3)"),
    ("m = map(4K)\nunmap(m)\ntouch(m)\n", "error", "4:7", "m is already unmapped"),
    ("m = map(4K)\nif random(2) == 0 { unmap(m) }\nunmap(m)\n", "error", "4:7", "m may already be unmapped"),
    ("m = map(4K)\nn = m\nunmap(m)\nunmap(n)\n", "error", "4:7", "m is already moved away (copied to n"),
    ("m = map(4K)\n", "warning", "2:5", "m is still mapped when thread main ends; add unmap(m)"),
    ("m = map(4K)\nm = map(8K)\nunmap(m)\n", "warning", "3:1", "m still holds the mapping mapped at line 2"),
    ("touch(map(4K))\n", "warning", "2:7", "the object from map() is lost"),
    ("m = map(-4K)\nunmap(m)\n", "error", "2:9", "a size must not be negative"),
])
def test_the_flow_checks_follow_a_mapping_like_a_pointer(body, severity, position, phrase):
    got = found(body, severity)
    assert len(got) == 1 and got[0][0] == position and phrase in got[0][1], got


def test_leaks_free_unmaps_what_is_still_mapped_without_a_warning():
    assert diagnostics("m = map(4K)\n", top="leaks free\n") == []


def test_mapped_bytes_are_bounded_apart_from_the_heap():
    source = textwrap.dedent("""\
        thread main * 2 {
            p = malloc(1000)
            m = map(1M)
            repeat 10 { map(64K) lives 3  q = malloc(10)  free(q) }
            map(2M) lives forever
            unmap(m)
            free(p)
        }
    """)
    resolved = resolve(parse(source, "peak.scn"), {})
    rep = Reporter("peak.scn", source)
    est = estimate(resolved, flow.analyze(resolved, rep))
    # the heap: p's 1000 bytes and one q of 10 at once, per thread; the mappings: m, the forever one, and the
    # `lives 3` ones (at most 3 pending of 10) apart
    assert est.low == 2 * 1010 and est.high == 2 * 1010
    assert 2 * (1 << 20) + 2 * (2 << 20) <= est.mapped_low
    assert est.mapped_high == 2 * ((1 << 20) + (2 << 20) + 3 * (64 << 10))
    no_maps = resolve(parse("thread main { p = malloc(8)  free(p) }\n", "h.scn"), {})
    assert estimate(no_maps, flow.analyze(no_maps, Reporter("h.scn", ""))).mapped_high == 0
