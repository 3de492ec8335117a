"""Source text to AST: lark's LALR parser plus a transformer to `nodes`.

Syntax errors become `ScenarioError` with file:line:col, a caret and a sentence
in the user's terms (what was expected), never a lark traceback.
"""

import functools
import re
import unicodedata
from pathlib import Path
from typing import Optional

import lark
from lark import Token, Transformer, v_args

from . import nodes as n
from .errors import Diagnostic, ScenarioError

GRAMMAR = Path(__file__).with_name("grammar.lark")

_SUFFIX = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}

# Nesting limits. Beyond them the checks' loop analyses (a few passes per
# loop level) take minutes, Python's recursion gives out, and clang refuses
# the generated C (at most 256 nested brackets: two per block, one or two per
# operator); no scenario written by hand comes close.
MAX_BLOCK_DEPTH = 10
MAX_EXPR_DEPTH = 64
_EXPR_RULES = {"add", "sub", "mul", "div", "mod", "neg", "index", "call", "weighted", "pair", "kwarg"}

# What lark calls a terminal, in words a user knows.
_TERMINAL_WORDS = {
    "NAME": "a name", "NUMBER": "a number", "STRING": "a string", "LBRACE": "'{'",
    "RBRACE": "'}'", "LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'",
    "EQUAL": "'='", "COMMA": "','", "COLON": "':'", "STAR": "'*'", "PLUS": "'+'",
    "MINUS": "'-'", "SLASH": "'/'", "PERCENT": "'%'", "$END": "end of file",
    "FOREVER": "'forever'", "BARRIER": "'barrier'", "__ANON_0": "'..'",
    "COMPARE": "a comparison (< <= > >= == !=)", "AT": "'at'", "MOST": "'most'",
}


@functools.lru_cache(maxsize=None)
def _lark() -> lark.Lark:
    # The parse table is built once per process; lark's own disk cache makes
    # that cheap on later runs too.
    return lark.Lark(GRAMMAR.read_text(), parser="lalr", propagate_positions=True,
                     maybe_placeholders=True, cache=True)


def _pos(item) -> n.Pos:
    if isinstance(item, Token):
        return n.Pos(item.line, item.column)
    meta = getattr(item, "meta", None)
    if meta is not None and not meta.empty:
        return n.Pos(meta.line, meta.column)
    return getattr(item, "pos", n.NOWHERE)


def _string(tok: Token) -> str:
    return tok[1:-1].replace('\\"', '"').replace("\\\\", "\\")


def _control_chars(tok: Token) -> list:
    """Positions of control characters in a string token: a NUL would cut the C string and
    the JSON report short, and a path with one cannot be opened."""
    return [(i, ch) for i, ch in enumerate(tok) if unicodedata.category(ch) == "Cc"]


def _number(tok: Token):
    text = tok.replace("_", "")
    scale = 1
    if text[-1] in _SUFFIX:
        scale, text = _SUFFIX[text[-1]], text[:-1]
    if re.fullmatch(r"[0-9]+", text):
        return int(text) * scale
    value = float(text) * scale
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value


@v_args(meta=True)
class _ToAst(Transformer):
    # Declarations are grouped by kind in `start`.
    def start(self, meta, decls):
        return decls

    def scenario_decl(self, meta, c):
        return ("scenario", _string(c[0]), n.Pos(meta.line, meta.column))

    def seed_decl(self, meta, c):
        return ("seed", c[0], n.Pos(meta.line, meta.column))

    def param_decl(self, meta, c):
        return n.Param(str(c[0]), c[1], _pos(c[0]))

    def channel_decl(self, meta, c):
        return n.Channel(str(c[0]), c[1], c[2], _pos(c[0]))

    def thread_decl(self, meta, c):
        # children: NAME, count, AT, MOST, at_most, block (placeholders are None)
        return n.Thread(str(c[0]), c[1], c[-1], _pos(c[0]), at_most=c[4])

    def shared_decl(self, meta, c):
        return n.SharedPool(str(c[0]), c[1], _pos(c[0]))

    def replay_decl(self, meta, c):
        return n.Replay(_string(c[0]), _pos(c[0]))

    def leaks_decl(self, meta, c):
        return ("leaks", str(c[0]), _pos(c[0]))

    def touch_decl(self, meta, c):
        return ("touch_new", str(c[0]), _pos(c[0]))

    def block(self, meta, stmts):
        return tuple(stmts)

    # statements
    def assign(self, meta, c):
        return n.Assign(c[0], c[1], _pos(c[0]))

    def name_target(self, meta, c):
        return n.Name(str(c[0]), _pos(c[0]))

    def index_target(self, meta, c):
        return n.Index(n.Name(str(c[0]), _pos(c[0])), c[1], _pos(c[0]))

    def call_stmt(self, meta, c):
        return n.CallStmt(c[0], c[0].pos)

    def lives_stmt(self, meta, c):
        lifetime = None if isinstance(c[1], Token) and c[1].type == "FOREVER" else c[1]
        return n.Lives(c[0], lifetime, c[0].pos)

    def pool_stmt(self, meta, c):
        return n.Pool(str(c[0]), c[1], _pos(c[0]))

    def repeat_stmt(self, meta, c):
        return n.Repeat(c[0], c[1], n.Pos(meta.line, meta.column))

    def for_stmt(self, meta, c):
        return n.For(str(c[0]), c[1], c[2], c[3], n.Pos(meta.line, meta.column))

    def barrier_stmt(self, meta, c):
        return n.Barrier(_pos(c[0]))

    def if_stmt(self, meta, c):
        left, op, right, then, orelse = c
        orelse = (orelse,) if isinstance(orelse, n.If) else (orelse or ())
        if op is None:  # `if held(p)`: the resolver insists on that form
            held = isinstance(left, n.Call) and left.func == "held" and len(left.args) == 1 and not left.kwargs
            cond = n.Compare("held" if held else "?", left.args[0] if held else left, None, left.pos)
        else:
            cond = n.Compare(str(op), left, right, left.pos)
        return n.If(cond, then, orelse, n.Pos(meta.line, meta.column))

    def measure_stmt(self, meta, c):
        return n.Measure(_string(c[0]), c[1], n.Pos(meta.line, meta.column))

    # expressions
    def number(self, meta, c):
        return n.Num(_number(c[0]), _pos(c[0]))

    def string(self, meta, c):
        return n.Str(_string(c[0]), _pos(c[0]))

    def name(self, meta, c):
        return n.Name(str(c[0]), _pos(c[0]))

    def index(self, meta, c):
        return n.Index(n.Name(str(c[0]), _pos(c[0])), c[1], _pos(c[0]))

    def _binop(self, op, meta, c):
        return n.BinOp(op, c[0], c[1], n.Pos(meta.line, meta.column))

    def add(self, meta, c):
        return self._binop("+", meta, c)

    def sub(self, meta, c):
        return self._binop("-", meta, c)

    def mul(self, meta, c):
        return self._binop("*", meta, c)

    def div(self, meta, c):
        return self._binop("/", meta, c)

    def mod(self, meta, c):
        return self._binop("%", meta, c)

    def neg(self, meta, c):
        if isinstance(c[0], n.Num):
            return n.Num(-c[0].value, n.Pos(meta.line, meta.column))
        return n.Neg(c[0], n.Pos(meta.line, meta.column))

    def call(self, meta, c):
        name, args = c[0], [a for a in c[1:] if a is not None]
        positional = tuple(a for a in args if not isinstance(a, tuple))
        keywords = tuple(a for a in args if isinstance(a, tuple))
        return n.Call(str(name), positional, keywords, _pos(name))

    def kwarg(self, meta, c):
        return (str(c[0]), c[1])

    def weighted(self, meta, c):
        return n.Weighted(tuple(p for p in c if p is not None), n.Pos(meta.line, meta.column))

    def pair(self, meta, c):
        return (c[0], c[1])


def _expected_words(expected) -> str:
    words = sorted({_TERMINAL_WORDS.get(t, repr(t.lower()) if t.isupper() else t) for t in expected})
    if len(words) > 6:
        words = words[:6] + ["..."]
    return ", ".join(words)


# The words the grammar keeps for itself (grammar.lark's quoted words); `at`
# and `most` only after a thread count, so not here.
KEYWORDS = ("scenario", "seed", "param", "channel", "capacity", "thread", "pool", "repeat", "for",
            "in", "barrier", "measure", "lives", "forever", "weighted", "leaks", "replay", "if",
            "else", "shared", "touch_new")

_LOOPS = "`repeat N { ... }` runs a block N times, `for i in A .. B { ... }` counts i from A to B - 1"
_AND = ("there is no '&&' or 'and': nest the ifs, `if a > 1 { if a < 5 { ... } }`; "
        "for 'or', give each condition a branch with the same statements, "
        "`if a < 1 { ... } else if a > 5 { ... }`")

_LEX = re.compile(r'(?P<comment>#[^\n]*)|(?P<string>"([^"\\\n]|\\.)*")|(?P<word>[A-Za-z_][A-Za-z0-9_]*)'
                  r'|(?P<space>\s+)|(?P<other>.)', re.S)


def _tokens_before(source: str, offset: int):
    """(text, offset) of each token before `offset`, comments and strings skipped: enough
    to see what an error follows and which brackets are open."""
    out = []
    for m in _LEX.finditer(source, 0, offset):
        if m.lastgroup in ("word", "other"):
            out.append((m.group(), m.start()))
    return out


def _line_col(source: str, offset: int):
    line = source.count("\n", 0, offset) + 1
    return line, offset - (source.rfind("\n", 0, offset) + 1) + 1


def _open_bracket(tokens):
    """The innermost bracket still open at the end of `tokens`: (char, offset) or None."""
    stack = []
    pairs = {")": "(", "]": "[", "}": "{"}
    for text, at in tokens:
        if text in "([{":
            stack.append((text, at))
        elif text in pairs and stack and stack[-1][0] == pairs[text]:
            stack.pop()
    return stack[-1] if stack else None


def _explain(exc, source: str, offset: int):
    """A sentence naming the fix for the mistakes people make coming from C, Python or
    shells: (message, hint, offset of the caret), or None to say what was expected."""
    tokens = _tokens_before(source, offset)
    here = source[offset:offset + 2]
    line_start = source.rfind("\n", 0, offset) + 1
    on_line = [(t, at) for t, at in tokens if at >= line_start]
    for (text, at), after in zip(on_line, on_line[1:] + [(source[offset:offset + 1], offset)]):
        if text == "while" and after[0] != "=":  # (a variable may be called while)
            return ("there is no 'while' loop", _LOOPS, at)
    if isinstance(exc, lark.UnexpectedCharacters):
        if here[:1] == ";":
            return ("unexpected ';'", "no ';' is needed: a statement ends where the next one begins "
                    "(several may share a line); remove it", offset)
        if here in ("&&", "||") or here[:1] in "&|":
            return (f"unexpected {here!r}" if here in ("&&", "||") else f"unexpected {here[:1]!r}", _AND, offset)
        if here[:1] == "!":
            return ("unexpected '!'", "there is no '!': turn the comparison around (`>=` for `<`, "
                    "`!=` for `==`), or keep the `if` and put the statements in its `else`", offset)
        return None
    tok = exc.token
    expected = set(exc.expected or ())
    history = list(getattr(exc, "token_history", None) or ())
    before = history[-1] if history else None
    for at in (offset, offset - 1):  # `a // b` fails at the second '/'
        if source[at:at + 2] in ("//", "/*"):
            return (f"'{source[at:at + 2]}' does not start a comment",
                    "a comment starts with '#' and runs to the end of the line", at)
    if tok.type == "EQUAL" and "COMPARE" in expected:
        return ("'=' gives a variable a value; a comparison is written '=='", "if i == 2 { ... }", offset)
    if tok.type == "EQUAL" and before is not None and str(before) in KEYWORDS:
        word = str(before)
        return (f"'{word}' is a keyword and cannot be a variable's name",
                f"pick another name ({word}_count, n_{word}, ...); the keywords are " + ", ".join(KEYWORDS),
                before.start_pos)
    if tok.type == "NAME" and str(tok) in ("and", "or", "not") and "LBRACE" in expected:
        return (f"unexpected '{tok}'", _AND, offset)
    opened = _open_bracket(tokens)
    if opened is not None and opened[0] in "([" and tok.type != "$END":
        close = {"(": ")", "[": "]"}[opened[0]]
        closer = {"(": "RPAR", "[": "RSQB"}[opened[0]]
        opened_line, opened_col = _line_col(source, opened[1])
        new_line = _line_col(source, offset)[0] > opened_line
        if closer in expected and (tok.type in ("RBRACE", "LBRACE", "RPAR", "RSQB") or new_line):
            words = [(t, at) for t, at in tokens if at < opened[1]]
            what = f"the '{opened[0]}'"
            if words and words[-1][0].isidentifier() and words[-1][1] + len(words[-1][0]) == opened[1]:
                what = f"'{words[-1][0]}{opened[0]}'"
                opened_line, opened_col = _line_col(source, words[-1][1])
            return (f"unexpected {str(tok)!r}: a '{close}' is missing",
                    f"{what} at line {opened_line}, column {opened_col} is not closed", offset)
    return None


def _syntax_error(exc: Exception, filename: str, source: str) -> ScenarioError:
    line = getattr(exc, "line", 0) or 0
    col = getattr(exc, "column", 0) or 0
    hint = None
    offset = getattr(exc, "pos_in_stream", None)
    explained = None
    if offset is not None and isinstance(exc, (lark.UnexpectedCharacters, lark.UnexpectedToken)) \
            and not (isinstance(exc, lark.UnexpectedToken) and exc.token.type == "$END"):
        explained = _explain(exc, source, offset)
    if explained is not None:
        msg, hint, at = explained
        line, col = _line_col(source, at)
    elif isinstance(exc, lark.UnexpectedCharacters):
        text = source.split("\n")[line - 1] if line else ""
        ch = text[col - 1] if 0 < col <= len(text) else "?"
        msg = f"unexpected character {ch!r}"
    elif isinstance(exc, (lark.UnexpectedToken, lark.UnexpectedEOF)) and \
            (isinstance(exc, lark.UnexpectedEOF) or exc.token.type == "$END"):
        msg = "unexpected end of file (is a '}' missing?)"
        lines = source.rstrip("\n").split("\n")
        line, col = len(lines), len(lines[-1]) + 1
        opened = _open_bracket(_tokens_before(source, len(source)))
        if opened is not None:
            close = {"(": ")", "[": "]", "{": "}"}[opened[0]]
            o_line, o_col = _line_col(source, opened[1])
            msg = f"unexpected end of file: a '{close}' is missing"
            hint = f"the '{opened[0]}' at line {o_line}, column {o_col} is not closed"
    elif isinstance(exc, lark.UnexpectedToken):
        msg = f"unexpected {exc.token.value!r}; expected {_expected_words(exc.expected)}"
    else:
        msg = str(exc).splitlines()[0]
    return ScenarioError([Diagnostic("error", msg, filename, n.Pos(line, col), hint)], source)


def parse(source: str, filename: str = "<scenario>") -> n.Scenario:
    """Parse scenario text into a `nodes.Scenario`; raises ScenarioError."""
    try:
        tree = _lark().parse(source)
    except lark.exceptions.UnexpectedInput as exc:
        raise _syntax_error(exc, filename, source) from None
    problems = _shape_problems(tree)
    if problems:
        raise ScenarioError([Diagnostic("error", msg, filename, pos) for pos, msg in problems], source)
    decls = _ToAst().transform(tree)
    return _assemble(decls, filename, source)


def _shape_problems(tree) -> list:
    """(pos, message) for nesting past the limits and control characters in strings.

    Walks the parse tree with an explicit stack: the tree of a too deeply
    nested scenario is exactly what recursion cannot walk.
    """
    problems = []
    stack = [(tree, 0, 0, 0)]
    while stack:
        node, blocks, exprs, chain = stack.pop()
        if isinstance(node, Token):
            if node.type == "STRING":
                for i, ch in _control_chars(node):
                    problems.append((n.Pos(node.line, node.column + i),
                                     f"a string cannot contain the control character {ch!r}"))
                    break
            continue
        if node.data == "block":
            blocks += 1
            if blocks == MAX_BLOCK_DEPTH + 1:
                problems.append((_pos(node), f"blocks nest more than {MAX_BLOCK_DEPTH} deep here"))
                continue
        elif node.data == "if_stmt":
            chain += 1  # an `else if` chain nests in the parse tree without a block per step
            if chain == MAX_EXPR_DEPTH + 1:
                problems.append((_pos(node), f"an else-if chain is longer than {MAX_EXPR_DEPTH} here"))
                continue
        elif node.data in _EXPR_RULES:
            exprs += 1
            if exprs == MAX_EXPR_DEPTH + 1:
                problems.append((_pos(node), f"this expression nests more than {MAX_EXPR_DEPTH} deep"))
                continue
        if node.data == "block":
            chain = 0
        stack.extend((child, blocks, exprs, chain) for child in reversed(node.children) if child is not None)
    problems.sort(key=lambda p: (p[0].line, p[0].col))
    return problems


def parse_file(path, display_name: Optional[str] = None) -> n.Scenario:
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ScenarioError([Diagnostic("error", f"cannot read the scenario: {exc.strerror}",
                                        str(path), n.NOWHERE, usage=True)]) from None
    try:
        source = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ScenarioError([Diagnostic("error", "the file is not UTF-8 text",
                                        display_name or str(path), n.Pos(line, col))]) from None
    return parse(source, display_name or str(path))


def _assemble(decls, filename: str, source: str) -> n.Scenario:
    errors = []
    name, seed, leaks, touch_new = None, None, "warn", "none"
    params, channels, threads, replays, shared = [], [], [], [], []
    seen = {}
    for d in decls:
        if isinstance(d, tuple):
            kind, value, pos = d
            if kind in seen:
                errors.append(Diagnostic("error", f"'{kind}' is given twice (first at line {seen[kind].line})",
                                         filename, pos))
                continue
            seen[kind] = pos
            if kind == "scenario":
                name = value
            elif kind == "seed":
                seed = value
            elif kind == "leaks":
                if value not in n.LEAKS_MODES:
                    errors.append(Diagnostic("error", f"'leaks' takes 'warn', 'free' or 'keep', not {value!r}",
                                             filename, pos))
                leaks = value
            elif kind == "touch_new":
                if value not in n.TOUCH_NEW_MODES:
                    errors.append(Diagnostic("error", f"'touch_new' takes {', '.join(n.TOUCH_NEW_MODES[:-1])} or "
                                             f"{n.TOUCH_NEW_MODES[-1]}, not {value!r}", filename, pos))
                touch_new = value
        elif isinstance(d, n.Param):
            params.append(d)
        elif isinstance(d, n.Channel):
            channels.append(d)
        elif isinstance(d, n.Thread):
            threads.append(d)
        elif isinstance(d, n.Replay):
            replays.append(d)
        elif isinstance(d, n.SharedPool):
            shared.append(d)
    if replays and touch_new != "none":
        errors.append(Diagnostic("error", "a replay's ops file says what it writes into new blocks "
                                 "(`scenc convert --touch`): 'touch_new' is for scenarios", filename, seen["touch_new"]))
    if errors:
        raise ScenarioError(errors, source)
    if name is None:
        name = Path(filename).stem if filename and not filename.startswith("<") else "scenario"
        # A file name need not be UTF-8; the name goes into a JSON report, which must be.
        name = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return n.Scenario(name=name, seed=seed, params=tuple(params), channels=tuple(channels),
                      threads=tuple(threads), replays=tuple(replays), leaks=leaks, shared=tuple(shared), touch_new=touch_new,
                      filename=filename, source=source)
