"""Name resolution and typing: what every name and call in a scenario means.

Produces a `Resolved` model that the checks and the compiler share: final param
values (after `--param` overrides), evaluated thread counts and channel sizes,
and for each thread group a symbol table (name -> kind). Every mistake found
here is reported with its position; nothing is guessed.
"""

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional

from . import nodes as n
from .builtins import BUILTINS
from .consts import NotConstant, Number, const_value
from .errors import Reporter, ScenarioError
from .walk import show, subexprs

# Kinds of names inside a thread.
PARAM, LOOP, INT, PTR, POOL, CHAN, CHAN_ARRAY, SELF, SHARED, MAP = (
    "param", "loop variable", "integer", "pointer", "pool", "channel", "channel array", "self",
    "shared pool", "mapping")
# Variables that hold an object (a heap block, or a mapping of the program's own).
HOLDERS = (PTR, MAP)

# A variable whose first value had an error: it exists, but its kind is not
# known, so its uses are not errors of their own (never in a Resolved).
UNKNOWN = "name whose value had an error"

# A name that is also C or runtime vocabulary could still never reach C as is
# (the compiler prefixes every user name), but it would read badly in `emit`.
RESERVED = {"self", *BUILTINS}      # every builtin's name, and `self`

MAX_NAME = 64
INT64_MAX = (1 << 63) - 1  # every integer the program computes is an int64_t
# Sizes of what the runtime creates before the clock starts. Past them C
# counts overflow (threads are counted in an int, a channel's cells in bytes),
# and no machine could start that many threads or hold that many cells.
MAX_THREADS = 1 << 16
MAX_CHANNELS = 1 << 20
MAX_CAPACITY = 1 << 32
MAX_SHARED_SLOTS = 1 << 28  # 2 GiB of slots; a static array in the program


@dataclass
class ThreadGroup:
    node: n.Thread
    count: int
    index: int                      # position among groups, for seeding
    symbols: Dict[str, str] = field(default_factory=dict)
    at_most: Optional[int] = None   # thread churn: at most this many alive (< count), else None


@dataclass
class ChannelInfo:
    node: n.Channel
    count: Optional[int]  # None: a single channel
    capacity: int


@dataclass
class Resolved:
    scenario: n.Scenario
    params: Dict[str, Number]
    seed: int
    channels: Dict[str, ChannelInfo]
    groups: List[ThreadGroup]
    warnings: list = field(default_factory=list)
    shared: Dict[str, int] = field(default_factory=dict)  # shared pool -> number of slots

    @property
    def total_threads(self) -> int:
        return sum(g.count for g in self.groups)


def parse_param_value(text: str) -> Number:
    """A `--param k=v` value: an integer (underscores and K/M/G allowed) or a float."""
    from .parser import _number
    import re
    if not re.fullmatch(r"-?[0-9][0-9_]*(\.[0-9]+)?([eE][+-]?[0-9]+)?[KMG]?", text.strip()):
        raise ValueError(f"{text!r} is not a number")
    text = text.strip()
    sign = -1 if text.startswith("-") else 1
    return sign * _number(text.lstrip("-"))


class _Resolver:
    def __init__(self, scenario: n.Scenario, overrides: Mapping[str, Number]):
        self.s = scenario
        self.rep = Reporter(scenario.filename, scenario.source)
        self.overrides = dict(overrides)
        self.params: Dict[str, Number] = {}
        self.channels: Dict[str, ChannelInfo] = {}
        self.shared: Dict[str, int] = {}

    # -- declarations
    def run(self) -> Resolved:
        self._check_top_names()
        self._params()
        self.rep.raise_if_errors()
        seed = self._int(self.s.seed, "the seed", minimum=0) if self.s.seed is not None else 0
        for ch in self.s.channels:
            count = self._int(ch.count, "the number of channels", minimum=1,
                              maximum=MAX_CHANNELS) if ch.count is not None else None
            cap = self._int(ch.capacity, "a channel's capacity", minimum=1, maximum=MAX_CAPACITY)
            self.channels[ch.name] = ChannelInfo(ch, count, cap if cap is not None else 1)
        for sp in self.s.shared:
            size = self._int(sp.size, "a shared pool's size", minimum=1, maximum=MAX_SHARED_SLOTS)
            self.shared[sp.name] = size if size is not None else 1
        groups = []
        for i, t in enumerate(self.s.threads):
            count = self._int(t.count, "the number of threads", minimum=1,
                              maximum=MAX_THREADS) if t.count is not None else 1
            group = ThreadGroup(t, count if count is not None else 1, i)
            if t.at_most is not None:
                at_most = self._int(t.at_most, "the number of threads alive at once", minimum=1,
                                    maximum=MAX_THREADS)
                if at_most is not None and at_most < group.count:
                    group.at_most = at_most
            self._thread(group)
            groups.append(group)
            if sum(g.count for g in groups) > MAX_THREADS >= sum(g.count for g in groups[:-1]):
                self.rep.error(t.pos, f"the scenario starts more than {MAX_THREADS} threads with this group")
        if len(self.s.replays) > 1:
            self.rep.error(self.s.replays[1].pos, "a scenario replays one trace; split the others into "
                           "scenarios of their own")
        if not groups and not self.s.replays:
            self.rep.error(n.Pos(1, 1), "the scenario has no thread: nothing would run",
                           "add a block such as: thread main { p = malloc(64)  free(p) }")
        self.rep.raise_if_errors()
        return Resolved(self.s, self.params, seed or 0, self.channels, groups, shared=self.shared)

    def _check_top_names(self) -> None:
        seen: Dict[str, n.Pos] = {}
        for kind, items in (("param", self.s.params), ("channel", self.s.channels),
                            ("thread", self.s.threads), ("shared pool", self.s.shared)):
            for item in items:
                self._check_name(item.name, item.pos)
                if item.name in seen:
                    first = seen[item.name]
                    self.rep.error(item.pos, f"'{item.name}' is already declared at line {first.line}")
                seen[item.name] = item.pos

    def _check_name(self, name: str, pos: n.Pos) -> None:
        if name in RESERVED:
            self.rep.error(pos, f"'{name}' is a builtin name and cannot be declared")
        elif len(name) > MAX_NAME:
            self.rep.error(pos, f"a name may have at most {MAX_NAME} characters")

    def _params(self) -> None:
        declared = {p.name for p in self.s.params}
        for name in self.overrides:
            if name not in declared:
                known = ", ".join(sorted(declared)) or "none"
                self.rep.error(n.NOWHERE, f"--param {name}: the scenario has no param '{name}' (params: {known})",
                               usage=True)
        for p in self.s.params:
            if p.name in self.overrides:
                self.params[p.name] = self.overrides[p.name]
                continue
            self._expr_names(p.value, set(self.params), "a param's value can only use numbers and earlier params")
            try:
                self.params[p.name] = const_value(p.value, self.params, self.rep)
            except NotConstant:
                self.rep.error(p.value.pos, "a param's value must be a number or arithmetic on earlier params")
            except ScenarioError:
                pass

    def _expr_names(self, expr, allowed, why) -> None:
        for node in subexprs(expr, parents_first=True):
            if isinstance(node, n.Index):
                node = node.base  # a name to check too, though not an expression of its own
            if isinstance(node, n.Name) and node.id not in allowed:
                self.rep.error(node.pos, f"unknown name '{node.id}': {why}")
            elif isinstance(node, (n.Call, n.Weighted, n.Str)):
                self.rep.error(node.pos, why)

    def _int(self, expr, what, minimum=None, maximum=INT64_MAX) -> Optional[int]:
        """A whole number known when compiling (numbers and params)."""
        self._expr_names(expr, set(self.params), f"{what} must be known before the run (numbers and params)")
        if self.rep.errors:
            return None
        try:
            value = const_value(expr, self.params, self.rep)
        except (NotConstant, ScenarioError):
            return None
        if isinstance(value, float) and not value.is_integer():
            self.rep.error(expr.pos, f"{what} must be a whole number, not {value}")
            return None
        value = int(value)
        if minimum is not None and value < minimum:
            self.rep.error(expr.pos, f"{what} must be at least {minimum}, not {value}")
            return None
        if value > maximum:
            self.rep.error(expr.pos, f"{what} must be at most {maximum}, not {value}")
            return None
        return value

    # -- thread bodies
    def _thread(self, group: ThreadGroup) -> None:
        self.symbols = group.symbols
        for name in self.params:
            self.symbols[name] = PARAM
        for name, ch in self.channels.items():
            self.symbols[name] = CHAN_ARRAY if ch.count is not None else CHAN
        for name in self.shared:
            self.symbols[name] = SHARED
        self.symbols["self"] = SELF
        self.in_if = 0
        self.loop_depth_vars: List[str] = []
        self.loop_depth = 0
        self._block(group.node.body)

    def _block(self, stmts) -> None:
        for st in stmts:
            self._stmt(st)

    def _stmt(self, st) -> None:
        # Where a swap may stand: the object it gives away must leave a name
        # or slot the compiler can empty, and what it hands back must be kept.
        self.swaps_allowed = set()
        if isinstance(st, n.Assign):
            self.swaps_allowed.add(id(st.value))
        elif isinstance(st, n.CallStmt) and st.call.func in ("free", "send") and st.call.args:
            self.swaps_allowed.add(id(st.call.args[-1]))
        if isinstance(st, n.Assign):
            self._assign(st)
        elif isinstance(st, n.CallStmt):
            b = self._call(st.call)
            if b is not None and b.role != "action":
                if b.role == "alloc":
                    self.rep.error(st.pos, f"the result of {b.name}() is thrown away, so it can never be freed",
                                   f"assign it (p = {b.name}(...)) or give it a lifetime ({b.name}(...) lives 10)")
                else:
                    self.rep.error(st.pos, f"{b.name}() only draws a number; use it in an expression")
        elif isinstance(st, n.Lives):
            b = self._call(st.call)
            if b is not None and (b.role != "alloc" or b.name == "swap"):
                self.rep.error(st.pos, "'lives' follows an allocation: malloc, calloc, realloc, aligned_alloc, "
                               "memalign, posix_memalign, recv or map")
            if st.lifetime is not None:
                self._expect(st.lifetime, "int", "a lifetime")
        elif isinstance(st, n.Pool):
            if self.loop_depth or self.in_if:
                self.rep.error(st.pos, "a pool is declared once per thread, not inside a loop or an if",
                               "move it to the top of the thread block")
            self._declare(st.name, st.pos, POOL)
            self._expect(st.size, "int", "a pool's size")
        elif isinstance(st, n.Repeat):
            self._expect(st.count, "int", "a repeat count")
            self.loop_depth += 1
            self._block(st.body)
            self.loop_depth -= 1
        elif isinstance(st, n.For):
            self._expect(st.start, "int", "a loop bound")
            self._expect(st.stop, "int", "a loop bound")
            kind = self.symbols.get(st.var)
            if kind is None:
                self._check_name(st.var, st.pos)
                self.symbols[st.var] = LOOP
            elif kind != LOOP:
                self.rep.error(st.pos, f"'{st.var}' is already a {kind}; pick another loop variable")
            if st.var in self.loop_depth_vars:
                self.rep.error(st.pos, f"'{st.var}' is already the variable of an enclosing loop")
            self.loop_depth_vars.append(st.var)
            self.loop_depth += 1
            self._block(st.body)
            self.loop_depth -= 1
            self.loop_depth_vars.pop()
        elif isinstance(st, n.If):
            if st.cond.op == "held":
                x = st.cond.left
                kind = self.symbols.get(x.base.id if isinstance(x, n.Index) else getattr(x, "id", None))
                if not (isinstance(x, n.Name) and kind in HOLDERS or isinstance(x, n.Index) and kind == POOL):
                    self.rep.error(x.pos, "held() takes a pointer or mapping variable or a pool slot")
                elif isinstance(x, n.Index):
                    self._expect(x.index, "int", "a pool index")
            elif st.cond.op == "?":
                self.rep.error(st.cond.pos, "a condition compares two integers (a < b) or asks held(p)")
            else:
                self._expect(st.cond.left, "int", "a compared value")
                self._expect(st.cond.right, "int", "a compared value")
            self.in_if += 1
            self._block(st.then)
            self._block(st.orelse)
            self.in_if -= 1
        elif isinstance(st, n.Measure):
            if not st.name or len(st.name) > MAX_NAME:
                self.rep.error(st.pos, f"a measured region needs a name of 1 to {MAX_NAME} characters")
            self._block(st.body)

    def _assign(self, st: n.Assign) -> None:
        value_kind = self._kind(st.value)
        target = st.target
        if isinstance(target, n.Index):
            base = self.symbols.get(target.base.id)
            if base == SHARED:
                self.rep.error(target.pos, f"a slot of the shared pool '{target.base.id}' changes only by an "
                               "atomic swap", f"p = swap({target.base.id}[...], p)")
                return
            if base != POOL:
                what = f"a {base}" if base else "not declared"
                self.rep.error(target.pos, f"'{target.base.id}' is {what}; only a pool can be indexed here",
                               f"declare it first: pool {target.base.id}[100]")
            self._expect(target.index, "int", "a pool index")
            if value_kind == MAP:
                self.rep.error(st.value.pos, "a pool slot holds a heap block, not a mapping",
                               "keep a mapping in a variable (m = map(...)) or give it a lifetime (map(...) lives 10)")
            elif value_kind not in (PTR, None):
                self.rep.error(st.value.pos, "a pool slot holds a pointer; this value is an integer")
            return
        name = target.id
        kind = self.symbols.get(name)
        new_kind = value_kind if value_kind in HOLDERS else INT
        if value_kind is None:
            if kind is None:  # its value had an error: the name exists, its uses say nothing more
                self.symbols[name] = UNKNOWN
            return
        if value_kind not in (INT, PTR, MAP):
            self.rep.error(st.value.pos, f"a variable holds an integer, a pointer or a mapping, not "
                           f"{_article(value_kind)}")
            return
        if kind is None:
            self._check_name(name, target.pos)
            self.symbols[name] = new_kind
        elif kind == LOOP and new_kind == INT and name not in self.loop_depth_vars:
            pass  # outside its own loop a loop variable is a plain integer (the sketch's larson)
        elif kind in (PARAM, LOOP, POOL, CHAN, CHAN_ARRAY, SELF, SHARED):
            self.rep.error(target.pos, f"'{name}' is a {kind} and cannot be assigned")
        elif kind != new_kind:
            self.rep.error(target.pos, f"'{name}' holds a {kind} and cannot be given a {new_kind}")

    def _declare(self, name, pos, kind) -> None:
        if name in self.symbols:
            self.rep.error(pos, f"'{name}' is already a {self.symbols[name]}")
        else:
            self._check_name(name, pos)
            self.symbols[name] = kind

    def _expect(self, expr, kind, what) -> None:
        got = self._kind(expr)
        if got is not None and got != kind and not (kind == "int" and got == INT):
            self.rep.error(expr.pos, f"{what} must be {_article(kind)}, not {_article(got)}")

    def _kind(self, expr) -> Optional[str]:
        """The kind of an expression: 'int', PTR, 'str', 'float', CHAN, POOL; None after an error."""
        if isinstance(expr, n.Num):
            if self._too_big(expr):
                return None
            return "float" if isinstance(expr.value, float) else INT
        if isinstance(expr, n.Str):
            return "str"
        if isinstance(expr, n.Name):
            kind = self.symbols.get(expr.id)
            if kind is None:
                self.rep.error(expr.pos, f"unknown name '{expr.id}'", _did_you_mean(expr.id, self.symbols))
                return None
            if kind == UNKNOWN:
                return None
            if kind in (PARAM,):
                if self._too_big(expr):
                    return None
                return "float" if isinstance(self.params.get(expr.id), float) else INT
            if kind in (LOOP, INT, SELF):
                return INT
            if kind == CHAN_ARRAY:
                self.rep.error(expr.pos, f"'{expr.id}' is an array of channels; pick one: {expr.id}[i]")
                return None
            return kind
        if isinstance(expr, n.Index):
            base = self.symbols.get(expr.base.id)
            self._expect(expr.index, "int", "an index")
            if base == POOL:
                return PTR
            if base == CHAN_ARRAY:
                return CHAN
            if base == SHARED:
                self.rep.error(expr.pos, f"a slot of the shared pool '{expr.base.id}' is read only by an atomic "
                               "swap", f"p = swap({show(expr)}, p)")
                return None
            if base is None:
                self.rep.error(expr.pos, f"unknown name '{expr.base.id}'", _did_you_mean(expr.base.id, self.symbols))
            else:
                self.rep.error(expr.pos, f"'{expr.base.id}' is a {base} and cannot be indexed")
            return None
        if isinstance(expr, (n.BinOp, n.Neg)):
            parts = (expr.left, expr.right) if isinstance(expr, n.BinOp) else (expr.operand,)
            kinds = [self._kind(p) for p in parts]
            if None in kinds:
                return None
            for p, k in zip(parts, kinds):
                if k not in (INT, "float"):
                    self.rep.error(p.pos, f"arithmetic needs numbers, not {_article(k)}")
                    return None
            if isinstance(expr, n.BinOp) and expr.op in "/%" and self._is_zero(expr.right):
                self.rep.error(expr.right.pos, "division by zero")
                return None
            if self._too_big(expr):
                return None
            return "float" if "float" in kinds else INT
        if isinstance(expr, n.Weighted):
            if not expr.pairs:
                self.rep.error(expr.pos, "weighted { } needs at least one 'value: weight' pair")
            for value, weight in expr.pairs:
                self._expect(value, "int", "a weighted value")
                self._const(value, "a weighted value")
                self._const(weight, "a weight")
            return INT
        if isinstance(expr, n.Call):
            b = self._call(expr)
            if b is None:
                return None
            if b.result == "none":
                self.rep.error(expr.pos, f"{b.name}() gives no value")
                return None
            return PTR if b.result == "ptr" else MAP if b.result == "map" else INT
        return None

    def _too_big(self, expr) -> bool:
        try:
            value = const_value(expr, self.params)
        except NotConstant:
            return False
        if isinstance(value, int) and abs(value) > INT64_MAX:
            self.rep.error(expr.pos, f"{value} does not fit in a 64-bit integer")
            return True
        return False

    def _is_zero(self, expr) -> bool:
        try:
            return const_value(expr, self.params) == 0
        except NotConstant:
            return False

    def _const(self, expr, what) -> None:
        try:
            const_value(expr, self.params)
        except NotConstant:
            self.rep.error(expr.pos, f"{what} must be known before the run (numbers and params)")

    def _call(self, call: n.Call):
        b = BUILTINS.get(call.func)
        if b is None:
            self.rep.error(call.pos, f"unknown function '{call.func}'",
                           _unknown_function_hint(call.func, listed=getattr(self, "functions_listed", False)))
            self.functions_listed = True
            for a in list(call.args) + [v for _, v in call.kwargs]:
                self._kind(a)  # its arguments are checked all the same
            return None
        if b.kwargs:
            given = dict(call.kwargs)
            if call.args:
                self.rep.error(call.pos, f"{b.name}() takes named arguments: "
                               + ", ".join(f"{k} = ..." for k in b.kwargs))
                return None
            for k, v in call.kwargs:
                if k not in b.kwargs:
                    self.rep.error(v.pos, f"{b.name}() has no argument '{k}' (it takes {', '.join(b.kwargs)})")
            for k in b.kwargs:
                if k not in given:
                    self.rep.error(call.pos, f"{b.name}() needs '{k} = ...'")
                else:
                    self._const(given[k], f"{b.name}'s {k}")
            return b
        if not self._options(call, b):
            return None
        if b.name == "swap" and id(call) not in getattr(self, "swaps_allowed", ()):
            self.rep.error(call.pos, "swap() stands alone as the value of an assignment "
                           "(p = swap(transfer[i], p)) or as what free or send takes")
        if b.args == ("int*",):
            if not call.args:
                self.rep.error(call.pos, f"{b.name}() needs at least one value")
            for a in call.args:
                self._expect(a, "int", f"a value of {b.name}()")
                self._const(a, f"a value of {b.name}()")
            return b
        if len(call.args) != len(b.args):
            self.rep.error(call.pos, f"{b.name}() takes {len(b.args)} argument{'s' * (len(b.args) != 1)}, "
                           f"not {len(call.args)}")
            return None
        for a, want in zip(call.args, b.args):
            what = f"the argument of {b.name}()"
            if want == "pool":
                if not (isinstance(a, n.Name) and self.symbols.get(a.id) in (POOL, SHARED)):
                    self.rep.error(a.pos, f"{b.name}() takes a pool")
                continue
            if want == "ptr" and b.name == "swap" and isinstance(a, n.Call) \
                    and a.func not in ("malloc", "calloc", "aligned_alloc", "memalign", "posix_memalign", "recv"):
                self.rep.error(a.pos, "swap() gives a variable, a pool slot or a new object: "
                               f"keep the result of {a.func}() in a variable first")
            if want == "shared":
                if not (isinstance(a, n.Index) and self.symbols.get(a.base.id) == SHARED):
                    self.rep.error(a.pos, f"{b.name}() takes a slot of a shared pool first: "
                                   f"{b.name}(transfer[i], p)")
                else:
                    self._expect(a.index, "int", "an index")
                continue
            if want == "obj":
                if self._kind(a) not in (PTR, MAP, None):
                    self.rep.error(a.pos, f"{what} must be a pointer or a mapping")
                continue
            self._expect(a, {"int": "int", "ptr": PTR, "map": MAP, "chan": CHAN, "str": "str"}[want], what)
            if b.const_args:
                self._const(a, what) if want != "str" else None
        return b


    def _options(self, call: n.Call, b) -> bool:
        """Optional named integer arguments (`write(p, n, bytes = 64)`); False when one is wrong."""
        seen = set()
        for k, v in call.kwargs:
            if k not in b.options:
                takes = f"takes only {', '.join(f'{o} = ...' for o in b.options)} by name" if b.options \
                    else "takes no named arguments"
                self.rep.error(v.pos, f"{b.name}() {takes}, not '{k}'")
                return False
            if k in seen:
                self.rep.error(v.pos, f"{b.name}() is given '{k}' twice")
                return False
            seen.add(k)
            self._expect(v, "int", f"{b.name}'s {k}")
        return True


def _article(kind) -> str:
    if kind in ("int", INT):
        return "an integer"
    if kind == "float":
        return "a fraction"
    if kind == "str":
        return "a string"
    return f"a {kind}"


# The functions of the language, as `scenc check` lists them for an unknown one.
FUNCTION_GROUPS = (
    ("allocator calls", "malloc, calloc, realloc, aligned_alloc, memalign, posix_memalign, free, free_all"),
    ("channels and shared pools", "send, recv, swap"),
    ("a block's memory", "write, touch"),
    ("the program's own time between calls", "work"),
    ("draws", "random, uniform, pow2, choice, weighted { }, lognormal, geometric, histogram"),
    ("conditions", "held (in an if)"),
)
_NO_SUCH = {
    "min": "there is no min or max: choose with an if, `if a < b { n = a } else { n = b }`; ",
    "max": "there is no min or max: choose with an if, `if a > b { n = a } else { n = b }`; ",
    "sleep": "a scenario does not sleep: its time is its allocator calls, `write`, `touch` and `work` "
             "(CPU time between calls; a thread that waits does so on a channel or a barrier); ",
}
_NO_SUCH["usleep"] = _NO_SUCH["nanosleep"] = _NO_SUCH["sleep"]


def _unknown_function_hint(name: str, listed: bool = False) -> str:
    """Did you mean, why the function does not exist, and the functions (once a file: `listed`
    says they were, at an earlier error)."""
    close = _did_you_mean(name, BUILTINS)
    listing = "are listed above" if listed else \
        "are " + "; ".join(f"{what}: {names}" for what, names in FUNCTION_GROUPS)
    return (close + " " if close else "") + _NO_SUCH.get(name, "") + "the functions " + listing


def _did_you_mean(name, candidates) -> Optional[str]:
    import difflib
    close = difflib.get_close_matches(name, list(candidates), n=1)
    return f"did you mean '{close[0]}'?" if close else None


def resolve(scenario: n.Scenario, overrides: Optional[Mapping[str, Number]] = None) -> Resolved:
    """Type-check a parsed scenario; raises ScenarioError with every problem found."""
    return _Resolver(scenario, overrides or {}).run()
