"""scenario/flow.py on its own: the facts its dataflow hands to the peak estimate (which assignments may
overwrite a live object, which calls lose theirs, what is live at the end), besides the diagnostics
tests/scenario/test_checks.py reads through the whole check."""

import textwrap

from scenc.scenario import flow, nodes
from scenc.scenario.errors import Reporter
from scenc.scenario.parser import parse
from scenc.scenario.resolve import resolve


def analyzed(body: str):
    """(the one thread group's FlowFacts, the diagnostics, the resolved scenario) of a scenario with `body`."""
    source = 'scenario "s"\nseed 1\n' + textwrap.dedent(body)
    resolved = resolve(parse(source, "s.scn"), {})
    rep = Reporter("s.scn", source)
    [facts] = flow.analyze(resolved, rep).values()
    return facts, rep.diagnostics, resolved


def lines_of(resolved, ids, kind):
    """The source lines of the nodes of `kind` whose ids are in `ids`."""
    found = set()

    def visit(node):
        if isinstance(node, kind) and id(node) in ids:
            found.add(node.pos.line)
        for value in vars(node).values():
            for child in value if isinstance(value, (list, tuple)) else [value]:
                if hasattr(child, "pos") and hasattr(child, "__dict__"):
                    visit(child)

    for group in resolved.groups:
        visit(group.node)
    return found


def test_a_pointer_overwritten_in_a_loop_is_an_overwrite_at_that_assignment():
    facts, diagnostics, resolved = analyzed("""
        thread t {
            repeat 10 {
                p = malloc(16)
            }
            free(p)
        }
    """)
    assert lines_of(resolved, facts.overwrites, nodes.Assign) == {6}   # line 6: p = malloc(16)
    assert any(d.severity == "warning" and "leak" in d.message for d in diagnostics), diagnostics


def test_a_freed_pointer_is_neither_an_overwrite_nor_live_at_the_end():
    facts, diagnostics, _ = analyzed("""
        thread t {
            repeat 10 {
                p = malloc(16)
                free(p)
            }
        }
    """)
    assert facts.overwrites == set() and facts.lost == set() and facts.live_at_end == set()
    assert diagnostics == []


def test_an_object_kept_to_the_end_is_live_at_the_end():
    facts, _, _ = analyzed("""
        thread t {
            keep = malloc(64)
        }
    """)
    assert facts.live_at_end == {"keep"}


def test_a_free_on_one_branch_only_makes_a_later_use_a_may_use_after_free():
    _, diagnostics, _ = analyzed("""
        thread t {
            p = malloc(16)
            if random(100) < 50 {
                free(p)
            }
            free(p)
        }
    """)
    errors = [d for d in diagnostics if d.severity == "error"]
    assert len(errors) == 1 and errors[0].pos.line == 9, errors   # line 9: the second free(p)
    assert "may" in errors[0].message and "freed" in errors[0].message, errors[0].message
