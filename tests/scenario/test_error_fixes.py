"""Errors that name the fix (issue 28): the mistakes of someone coming from C,
Python or a shell each get a positioned message with the fix in its words,
from the parser's one translation of lark's errors (scenario/parser.py) or
the resolver's, and no cascade of follow-on errors."""

import textwrap

import pytest

from scenc.compiler.pipeline import load
from scenc.scenario.errors import ScenarioError


def problems(tmp_path, source):
    path = tmp_path / "s.scn"
    path.write_text(textwrap.dedent(source))
    with pytest.raises(ScenarioError) as info:
        load(path)
    return info.value.diagnostics, info.value.render()


def one(tmp_path, source, line, col, *phrases):
    found, text = problems(tmp_path, source)
    assert len(found) == 1, text
    d = found[0]
    assert (d.pos.line, d.pos.col) == (line, col), text
    assert text.startswith(f"{tmp_path / 's.scn'}:{line}:{col}: error: "), text
    for phrase in phrases:
        assert phrase in text, text
    return d


def test_while_says_repeat_and_for(tmp_path):
    one(tmp_path, """\
        thread t {
            n = 0
            while n < 10 { n = n + 1 }
        }
        """, 3, 5, "there is no 'while' loop", "repeat N { ... }", "for i in A .. B")
    one(tmp_path, "thread t { n = 0\n while(n < 10) { n = n + 1 } }\n", 2, 2, "no 'while'")


def test_a_variable_may_still_be_called_while(tmp_path):
    path = tmp_path / "w.scn"
    path.write_text("thread t { while = 3  p = malloc(while)  free(p) }\n")
    load(path)


def test_if_with_one_equals_says_double_equals(tmp_path):
    one(tmp_path, """\
        thread t {
            i = 2
            if i = 2 { p = malloc(8)  free(p) }
        }
        """, 3, 10, "a comparison is written '=='", "if i == 2")


@pytest.mark.parametrize("comment, col", [("// the block", 20), ("/* the block */", 20)])
def test_c_comments_say_hash(tmp_path, comment, col):
    one(tmp_path, f"thread t {{\n    p = malloc(8)  {comment}\n    free(p)\n}}\n", 2, col,
        f"'{comment[:2]}' does not start a comment", "a comment starts with '#'")
    one(tmp_path, f"{comment}\nthread t {{ p = malloc(8)  free(p) }}\n", 1, 1, "starts with '#'")


def test_a_semicolon_is_not_needed(tmp_path):
    one(tmp_path, """\
        thread t {
            p = malloc(8);
            free(p)
        }
        """, 2, 18, "unexpected ';'", "no ';' is needed", "remove it")


@pytest.mark.parametrize("op", ["&&", "||", "and", "or"])
def test_and_or_say_how_to_combine_conditions(tmp_path, op):
    one(tmp_path, f"thread t {{\n    i = 2\n    if i > 1 {op} i < 5 {{ p = malloc(8)  free(p) }}\n}}\n", 3, 14,
        f"unexpected '{op}'", "nest the ifs", "if a > 1 { if a < 5 { ... } }", "else if")


def test_not_says_to_turn_the_condition_around(tmp_path):
    one(tmp_path, "thread t { p = malloc(8)  if !held(p) { p = malloc(8) }  free(p) }\n", 1, 30,
        "unexpected '!'", "turn the comparison around", "else")


def test_a_missing_parenthesis_is_named_with_its_opening(tmp_path):
    one(tmp_path, """\
        thread t {
            p = malloc(8)
            free(p }
        """, 3, 12, "unexpected '}': a ')' is missing", "'free(' at line 3, column 5 is not closed")
    one(tmp_path, "thread t {\n    p = malloc(8\n    free(p)\n}\n", 3, 5,
        "a ')' is missing", "'malloc(' at line 2, column 9 is not closed")
    one(tmp_path, "thread t {\n    pool objs[10\n    objs[0] = malloc(8)\n    free_all(objs)\n}\n", 3, 5,
        "a ']' is missing", "'objs[' at line 2")


def test_a_missing_brace_at_the_end_names_the_open_one(tmp_path):
    one(tmp_path, "thread t {\n    repeat 3 { p = malloc(8)  free(p)\n}\n", 3, 2,
        "unexpected end of file: a '}' is missing", "the '{' at line 1, column 10 is not closed")


@pytest.mark.parametrize("word", ["for", "repeat", "measure", "if"])
def test_a_keyword_as_a_variable_is_named_a_keyword(tmp_path, word):
    one(tmp_path, f"thread t {{\n    {word} = 3\n}}\n", 2, 5,
        f"'{word}' is a keyword and cannot be a variable's name", "pick another name")


def test_unknown_functions_list_the_functions_without_follow_on_errors(tmp_path):
    found, text = problems(tmp_path, """\
        thread t {
            n = min(8, 16)
            p = malloc(n)
            write(p, n)
            free(p)
            sleep(1)
        }
        """)
    assert [(d.pos.line, d.pos.col) for d in found] == [(2, 9), (6, 5)], text
    assert "unknown function 'min'" in found[0].message
    assert "there is no min or max" in found[0].hint
    for name in ("malloc", "free_all", "send", "recv", "swap", "write", "touch", "uniform", "lognormal",
                 "histogram", "weighted"):
        assert name in found[0].hint
    assert "unknown function 'sleep'" in found[1].message
    assert "does not sleep" in found[1].hint and "listed above" in found[1].hint
    assert "unknown name" not in text


def test_an_unknown_function_still_has_its_arguments_checked(tmp_path):
    found, text = problems(tmp_path, "thread t {\n    p = malloc(mx(8, sizz))\n    free(p)\n}\n")
    assert [d.message for d in found] == ["unknown function 'mx'", "unknown name 'sizz'"], text
    assert found[0].hint.startswith("did you mean 'max'?") is False  # max does not exist either
