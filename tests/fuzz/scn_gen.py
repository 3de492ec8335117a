"""`.scn` programs generated from the language: every declaration, statement and builtin.

Two modes, chosen per program:

- *tame*: programs meant to be accepted and cheap to run (repeat counts of a
  few, small sizes, matched sends and receives, barriers only in threads that
  no channel waits on), so that a sample can be compiled with gcc and clang
  and run. They still use every construct: thread groups, params, channels and
  channel arrays, pools, repeat/for, every allocation call, free, free_all,
  send/recv, write, lives (a count, a distribution, forever), every size
  distribution, measure, barrier, arithmetic, K suffixes, `leaks free`,
  unicode and escapes in strings.
- *wild*: the same skeleton with pieces swapped for anything the grammar
  allows and more: weird numbers (0, -1, 1e30, 99999999999999999999, 1G,
  2^63), unknown and reserved names, long names, C keywords and runtime
  names, wrong argument kinds, deep nesting, strings with controls, data
  paths outside the folder. Wild programs are compiled when accepted but not
  run: they may legitimately ask for a billion iterations.

The text is assembled with random layout (newlines or spaces, comments with
unicode), since newlines are not significant in the language.
"""

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from .chooser import Chooser

SMALL_SIZES = ("1", "8", "16", "24", "64", "100", "256", "1000", "4096", "1K", "4K", "1_024", "0", "2K")
WEIRD_NUMBERS = (
    "0", "-1", "-0", "1", "0.5", "1.0", "1e3", "2.5e2", "1e30", "1e-5", "1e308", "007", "1_000_000",
    "1K", "1M", "1G", "64G", "1e3K", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
    "18446744073709551615", "18446744073709551616", "99999999999999999999", "4294967296", "2147483648",
    "65536", "1_", "0_0", "1.5K", "123456789012345678901234567890",
)
# Names that are legal identifiers but mean something to the language, to C or to the runtime.
WILD_NAMES = (
    "self", "malloc", "free", "recv", "histogram", "repeat", "thread", "forever", "barrier", "measure",
    "weighted", "pool", "t", "i", "main", "int", "void", "return", "if", "while", "NULL", "errno", "printf",
    "exit", "scn_local", "scn_shared", "scn_main", "d1", "r1", "o1", "end1", "T0", "T0_values", "v_p",
    "ch_q", "body_w0", "INT64_C", "_", "__LINE__", "__func__", "a" * 64, "b" * 65, "x" * 300, "p", "q",
)
BUILTIN_CALLS = ("malloc", "calloc", "realloc", "aligned_alloc", "memalign", "posix_memalign", "recv",
                 "free", "free_all", "send", "write", "touch", "random", "uniform", "pow2", "choice", "lognormal",
                 "geometric", "histogram", "mallocc", "printf", "system")
DATA_PATHS = ("sizes.csv", "sizes.csv", "missing.csv", "bad.csv", "empty.csv", "../sizes.csv",
              "/etc/passwd", "sub/../sizes.csv", "", ".", "..", "sub", "./sizes.csv", "sizes.csv\\\"x",
              "$(touch pwned).csv", "a\x00b.csv", "é.csv", "x" * 300 + ".csv")

# Data files every generated program may name; `prepare_dir` writes them.
DATA_FILES = {
    "sizes.csv": "size,count\n16,10\n64,5\n256,2\n4096,1\n",
    "bad.csv": "this is not,a histogram\nat,all\n",
    "empty.csv": "",
}


@dataclass
class Generated:
    text: str
    wild: bool


def prepare_dir(folder) -> None:
    """The data files generated programs refer to, next to where the program is written."""
    from pathlib import Path
    folder = Path(folder)
    for name, content in DATA_FILES.items():
        (folder / name).write_text(content)
    (folder / "sub").mkdir(exist_ok=True)


def escape(text: str) -> str:
    """Text as a .scn string literal body (the language escapes only \\ and \")."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


@dataclass
class _Thread:
    """What a thread body may use while it is generated."""
    barriers: bool
    ptrs: List[str] = field(default_factory=list)
    ints: List[str] = field(default_factory=list)
    pools: Dict[str, str] = field(default_factory=dict)   # name -> size as written
    loop_vars: List[str] = field(default_factory=list)    # in scope, innermost last
    self_max: int = 0                                      # the group's size - 1


class _Gen:
    def __init__(self, c: Chooser, wild: Optional[bool] = None):
        self.c = c
        self.wild = c.bool(0.35) if wild is None else wild
        self.params: Dict[str, int] = {}      # tame params: name -> small value
        self.decls: List[str] = []
        self.threads = 0
        self.regions: List[str] = []

    # ------------------------------------------------------------ program
    def program(self) -> Generated:
        c = self.c
        head = []
        if c.bool(0.8):
            head.append(f'scenario "{escape(self.string(24))}"')
        if c.bool(0.5):
            head.append(f"seed {self.number(str(c.int(0, 1 << 20)))}")
        if c.bool(0.3):
            head.append(f"leaks {c.pick(('free', 'warn', 'keep') if self.wild else ('free', 'warn'))}")
        for _ in range(c.int(0, 3)):
            head.append(self.param())
        body = []
        for _ in range(c.int(0, 2)):
            body += self.channel_pattern()
        for _ in range(c.int(0 if body else 1, 3)):
            body.append(self.plain_thread())
        if self.wild:
            for _ in range(c.int(0, 3)):
                body.insert(c.int(0, len(body)), self.wild_decl())
        decls = head + body
        # Declarations may come in any order; params keep theirs (a param may use earlier ones).
        if c.bool(0.3):
            for _ in range(c.int(1, 4)):
                i, j = c.int(0, len(decls) - 1), c.int(0, len(decls) - 1)
                if not (decls[i].startswith("param") or decls[j].startswith("param")):
                    decls[i], decls[j] = decls[j], decls[i]
        return Generated(self.layout(decls), self.wild)

    def layout(self, decls: List[str]) -> str:
        c = self.c
        out = []
        for d in decls:
            if c.bool(0.2):
                out.append(f"# {self.string(30, comment=True)}\n")
            out.append(d)
            out.append(c.pick(("\n", "\n\n", " ", "\n\t", "  # é\n", "\r\n")))
        return "".join(out)

    # ------------------------------------------------------------ pieces of text
    def string(self, max_len: int, comment: bool = False) -> str:
        text = self.c.text(max_len)
        if comment:
            return text.replace("\n", " ").replace("\r", " ")
        if not self.wild:  # controls make a string an error; tame programs should pass
            text = "".join(ch for ch in text if ch.isprintable() and ch not in "\u2028\u2029\x85")
        return text

    def number(self, tame: str) -> str:
        return self.c.pick(WEIRD_NUMBERS) if self.wild and self.c.bool(0.25) else tame

    def name(self, tame: str) -> str:
        return self.c.pick(WILD_NAMES) if self.wild and self.c.bool(0.1) else tame

    def small_param(self, lo: int, hi: int) -> Optional[str]:
        """A declared param whose value is in [lo, hi], if any."""
        names = [k for k, v in self.params.items() if lo <= v <= hi]
        return self.c.pick(names) if names and self.c.bool(0.5) else None

    def param(self) -> str:
        c = self.c
        name = self.name(f"k{len(self.params)}")
        value = c.int(1, 4)
        text = c.pick((str(value), f"{value}", f"({value})", f"2 * {value} - {value}"))
        earlier = self.small_param(1, 4)
        if earlier and c.bool(0.3):
            value = self.params[earlier] + value
            text = f"{earlier} + {text}"
        if self.wild and c.bool(0.3):
            text = self.wild_expr(2)
        self.params[name] = value
        return f"param {name} = {text}"

    def count(self, lo: int, hi: int) -> str:
        """A small whole number as the program would write it: literal, param or arithmetic."""
        c = self.c
        p = self.small_param(lo, hi)
        if p:
            return p
        v = c.int(lo, hi)
        return self.number(c.pick((str(v), str(v), f"{v} * 1", f"({v} + 0)", f"{2 * v} / 2")))

    # ------------------------------------------------------------ expressions
    def size(self, th: _Thread, depth: int = 0) -> str:
        """A size, small enough to run thousands of times."""
        c = self.c
        if self.wild and c.bool(0.1):
            return self.wild_expr(3)
        options = [
            lambda: c.pick(SMALL_SIZES),
            lambda: f"uniform({c.int(0, 64)}, {c.int(64, 4096)})",
            lambda: f"choice({', '.join(c.pick(SMALL_SIZES) for _ in range(c.int(1, 4)))})",
            lambda: "weighted { " + ", ".join(f"{c.pick(SMALL_SIZES)}: {c.pick(('1', '2', '5', '0.5', '0'))}"
                                              for _ in range(c.int(1, 3))) + ", 8: 1 }",
            lambda: f"pow2({c.int(0, 4)}, {c.int(4, 12)})",
            lambda: f"lognormal(median = {c.pick(('64', '100', '1K', '16.5'))}, sigma = {c.pick(('0', '0.5', '1.5', '2'))})",
            lambda: f"geometric(mean = {c.pick(('1', '2', '32', '100.5'))})",
            lambda: 'histogram("sizes.csv")',
            lambda: f"{self.int_expr(th, depth + 1)} + 1",
            lambda: f"{c.int(1, 8)} * {self.int_expr(th, depth + 1)}",
        ]
        if depth >= 2:
            options = options[:8]
        return c.pick(options)()

    def int_expr(self, th: _Thread, depth: int = 0) -> str:
        """A small integer that is never negative."""
        c = self.c
        atoms = [str(c.int(0, 16)), f"random({c.int(1, 16)})", f"uniform(0, {c.int(0, 16)})"]
        atoms += th.loop_vars[-1:] + th.ints[-2:]
        if th.self_max:
            atoms.append("self")
        p = self.small_param(0, 16)
        if p:
            atoms.append(p)
        e = c.pick(atoms)
        if depth < 2 and c.bool(0.3):
            op = c.pick(("+", "*", "/", "%"))
            right = str(c.int(1, 4)) if op != "+" else self.int_expr(th, depth + 1)
            e = f"({e} {op} {right})" if c.bool(0.5) else f"{e} {op} {right}"
        return e

    def alloc(self, th: _Thread, lives: bool = False) -> str:
        c = self.c
        kind = c.pick(("malloc", "malloc", "calloc", "aligned_alloc", "memalign", "posix_memalign"))
        if kind == "malloc":
            return f"malloc({self.size(th)})"
        if kind == "calloc":
            return f"calloc({c.int(0, 8)}, {self.size(th)})"
        align = c.pick(("8", "16", "64", "4096", "pow2(3, 12)", "choice(16, 64)"))
        if kind == "aligned_alloc":
            align = c.pick(("16", "64", "4096"))  # aligned_alloc wants a size that is a multiple
            return f"aligned_alloc({align}, {align} * {c.int(0, 8)})"
        return f"{kind}({align}, {self.size(th)})"

    def lifetime(self, th: _Thread) -> str:
        c = self.c
        return c.pick(("forever", str(c.int(0, 20)), "geometric(mean = 4)", f"uniform(0, {c.int(0, 30)})",
                       f"random({c.int(1, 10)})", "1K", self.int_expr(th)))

    # ------------------------------------------------------------ statements
    def block(self, th: _Thread, depth: int, units: int) -> List[str]:
        out = []
        for _ in range(units):
            out += self.unit(th, depth)
        return out

    def unit(self, th: _Thread, depth: int) -> List[str]:
        """A few statements that leave no object behind (except `lives` and leaks on purpose)."""
        c = self.c
        if self.wild and c.bool(0.12):
            return [self.wild_stmt(th, depth)]
        kinds = ["alloc_free", "alloc_free", "lives", "int"]
        if th.pools:
            kinds += ["pool", "pool"]
        if depth < 3:
            kinds += ["repeat", "for", "measure"]
        if th.barriers and depth == 0:
            kinds.append("barrier")
        kind = c.pick(kinds)
        return getattr(self, "unit_" + kind)(th, depth)

    def unit_alloc_free(self, th: _Thread, depth: int) -> List[str]:
        c = self.c
        v = c.pick(th.ptrs) if th.ptrs and c.bool(0.5) else self.name(f"p{len(th.ptrs)}")
        if v not in th.ptrs:
            th.ptrs.append(v)
        if c.bool(0.1):
            return [f"free({self.alloc(th)})"]
        out = [f"{v} = {self.alloc(th)}"]
        for _ in range(c.int(0, 2)):
            step = c.pick(("write", "realloc", "move"))
            if step == "write":
                out.append(f"write({v}, {c.pick(('0', '1', '2', 'random(3)'))})")
            elif step == "realloc":
                out.append(f"{v} = realloc({v}, {self.size(th)})")
            else:
                w = self.name(f"p{len(th.ptrs)}")
                th.ptrs.append(w)
                out.append(f"{w} = {v}" if c.bool(0.5) else f"{w} = realloc({v}, {self.size(th)})")
                v = w
        out.append(f"free({v})")
        return out

    def unit_lives(self, th: _Thread, depth: int) -> List[str]:
        return [f"{self.alloc(th)} lives {self.lifetime(th)}"]

    def unit_int(self, th: _Thread, depth: int) -> List[str]:
        c = self.c
        v = c.pick(th.ints) if th.ints and c.bool(0.5) else f"n{len(th.ints)}"
        out = [f"{v} = {self.int_expr(th)}"]
        if v not in th.ints:
            th.ints.append(v)
        if c.bool(0.5):
            p = f"p{len(th.ptrs)}"
            th.ptrs.append(p)
            out += [f"{p} = malloc({v} * {c.int(1, 64)} + 1)", f"free({p})"]
        return out

    def unit_pool(self, th: _Thread, depth: int) -> List[str]:
        c = self.c
        pool = c.pick(sorted(th.pools))
        size = th.pools[pool]
        i = f"i{depth}"
        out = [f"for {i} in 0 .. {size} {{ {pool}[{i}] = {self.alloc(th)} }}"]
        if c.bool(0.6):
            k = f"n{len(th.ints)}"
            th.ints.append(k)
            out.append(f"repeat {self.count(0, 4)} {{ {k} = random({size}) free({pool}[{k}]) "
                       f"{pool}[{k}] = {self.alloc(th)} }}")
        if c.bool(0.3):
            out.append(f"{pool}[0] = realloc({pool}[0], {self.size(th)})")
        out.append(f"free_all({pool})")
        return out

    def unit_repeat(self, th: _Thread, depth: int) -> List[str]:
        count = self.count(0, 4) if self.c.bool(0.8) else f"random({self.c.int(1, 4)})"
        body = self.block(th, depth + 1, self.c.int(1, 3))
        return [f"repeat {count} {{"] + ["  " + s for s in body] + ["}"]

    def unit_for(self, th: _Thread, depth: int) -> List[str]:
        c = self.c
        var = self.name(f"i{depth}")
        lo = c.pick(("0", "1", "self")) if th.self_max else c.pick(("0", "1"))
        hi = f"{lo} + {self.count(0, 4)}" if c.bool(0.5) else self.count(0, 4)
        th.loop_vars.append(var)
        body = self.block(th, depth + 1, c.int(1, 3))
        th.loop_vars.pop()
        return [f"for {var} in {lo} .. {hi} {{"] + ["  " + s for s in body] + ["}"]

    def unit_measure(self, th: _Thread, depth: int) -> List[str]:
        c = self.c
        if self.regions and c.bool(0.4):
            name = c.pick(self.regions)
        else:
            name = self.string(20) or "r"
            if not self.wild:
                name = name[:64]
            self.regions.append(name)
        body = self.block(th, depth + 1, c.int(1, 2))
        return [f'measure "{escape(name)}" {{'] + ["  " + s for s in body] + ["}"]

    def unit_barrier(self, th: _Thread, depth: int) -> List[str]:
        return ["barrier"]

    def thread_decl(self, name: str, count: Optional[str], th: _Thread, body: List[str]) -> str:
        pools = [f"pool {p}[{size}]" for p, size in th.pools.items()]
        star = f" * {count}" if count is not None else ""
        lines = pools + body
        return f"thread {name}{star} {{\n" + "\n".join("    " + s for s in lines) + "\n}"

    def group_count(self) -> Optional[str]:
        c = self.c
        if c.bool(0.4):
            return None
        return self.count(1, 3)

    def plain_thread(self) -> str:
        c = self.c
        count = self.group_count()
        th = _Thread(barriers=c.bool(0.3), self_max=0 if count is None else 1)
        for k in range(c.int(0, 2)):
            th.pools[f"pool{k}"] = self.count(1, 6)
        body = self.block(th, 0, c.int(1, 4))
        name = self.name(f"w{self.threads}")
        self.threads += 1
        return self.thread_decl(name, count, th, body)

    # ------------------------------------------------------------ channels
    def channel_pattern(self) -> List[str]:
        """A channel (or an array of them) and the groups that send and receive on it, matched."""
        c = self.c
        k = self.threads
        self.threads += 1
        cap = self.count(1, 8)
        if c.bool(0.5):
            q = self.name(f"q{k}")
            senders, receivers = c.int(1, 2), c.int(1, 2)
            each = c.int(0, 3)
            sends, recvs = receivers * each, senders * each  # senders*sends == receivers*recvs
            decls = [f"channel {q} capacity {cap}",
                     self.channel_thread(f"prod{k}", senders, sends, f"send({q}, {{obj}})", None),
                     self.channel_thread(f"cons{k}", receivers, recvs, None, f"recv({q})")]
        else:
            q = self.name(f"qa{k}")
            n = c.int(1, 3)
            each = c.int(0, 3)
            decls = [f"channel {q}[{n}] capacity {cap}"]
            if c.bool(0.5):
                decls.append(self.channel_thread(f"prod{k}", n, each, f"send({q}[self], {{obj}})", None))
            else:
                # The cache-scratch shape: one thread feeds every channel of the array.
                per = f"for j in 0 .. {n} {{ send({q}[j], {{obj}}) }}"
                decls.append(self.channel_thread(f"prod{k}", 1, each, per, None))
            decls.append(self.channel_thread(f"cons{k}", n, each, None, f"recv({q}[self])"))
        return decls

    def channel_thread(self, name: str, count: int, times: int, send: Optional[str],
                       recv: Optional[str]) -> str:
        c = self.c
        th = _Thread(barriers=False, self_max=count - 1)
        body = []
        if send is not None:
            if c.bool(0.5):
                obj = self.alloc(th)
                op = send.replace("{obj}", obj)
            else:  # allocated into a variable just before each send
                th.ptrs.append("m")
                op = send.replace("send(", f"m = {self.alloc(th)} send(", 1).replace("{obj}", "m")
        else:
            op = c.pick((f"free({recv})", f"r = {recv} write(r, 1) free(r)",
                         f"r = {recv} r = realloc(r, {self.size(th)}) free(r)"))
            if op.startswith("r ="):
                th.ptrs.append("r")
        body.append(f"repeat {times} {{ {op} }}")
        if c.bool(0.3):
            body = self.block(th, 1, 1) + body
        return self.thread_decl(name, str(count) if count > 1 or c.bool(0.5) else None, th, body)

    # ------------------------------------------------------------ wild pieces
    def wild_expr(self, depth: int) -> str:
        c = self.c
        if depth <= 0 or c.bool(0.3):
            return c.pick((c.pick(WEIRD_NUMBERS), c.pick(WILD_NAMES), f'"{escape(c.text(8))}"',
                           str(c.int(0, 100)), "self"))
        kind = c.int(0, 7)
        if kind == 0:
            return f"-{self.wild_expr(depth - 1)}"
        if kind == 1:
            return f"{self.wild_expr(depth - 1)} {c.pick('+-*/%')} {self.wild_expr(depth - 1)}"
        if kind == 2:
            nest = c.pick((1, 2, 50, 300))
            return "(" * nest + self.wild_expr(depth - 1) + ")" * nest
        if kind == 3:
            args = [self.wild_expr(depth - 1) for _ in range(c.int(0, 3))]
            return f"{c.pick(BUILTIN_CALLS)}({', '.join(args)})"
        if kind == 4:
            kw = c.pick(("median", "sigma", "mean", "x"))
            return f"{c.pick(('lognormal', 'geometric', 'malloc'))}({kw} = {self.wild_expr(depth - 1)})"
        if kind == 5:
            pairs = [f"{self.wild_expr(depth - 1)}: {self.wild_expr(depth - 1)}" for _ in range(c.int(0, 3))]
            return "weighted { " + ", ".join(pairs) + " }"
        if kind == 6:
            return f'histogram("{escape(c.pick(DATA_PATHS))}")'
        return f"{c.pick(WILD_NAMES)}[{self.wild_expr(depth - 1)}]"

    def wild_stmt(self, th: _Thread, depth: int) -> str:
        c = self.c
        e = lambda: self.wild_expr(2)  # noqa: E731
        name = c.pick(WILD_NAMES + tuple(th.ptrs) + tuple(th.ints) + tuple(th.pools))
        forms = [
            lambda: f"{name} = {e()}",
            lambda: f"{name}[{e()}] = {e()}",
            lambda: f"free({e()})",
            lambda: f"free_all({name})",
            lambda: f"send({name}, {e()})",
            lambda: f"write({e()}, {e()})",
            lambda: f"{c.pick(BUILTIN_CALLS)}({e()}) lives {c.pick(('forever', e()))}",
            lambda: f"pool {name}[{e()}]",
            lambda: f"repeat {e()} {{ {self.wild_stmt(th, depth + 1) if depth < 3 else ''} }}",
            lambda: f"for {name} in {e()} .. {e()} {{ }}",
            lambda: "barrier",
            lambda: f'measure "{escape(c.text(70))}" {{ }}',
            lambda: f"{c.pick(BUILTIN_CALLS)}({e()})",
            lambda: f"free({name}) free({name})",
            lambda: e(),
            lambda: "repeat 1 { " * c.pick((2, 40, 150)) + "p = malloc(1) free(p)" + " }" * 150,
        ]
        return c.pick(forms)()

    def wild_decl(self) -> str:
        c = self.c
        e = lambda: self.wild_expr(2)  # noqa: E731
        name = c.pick(WILD_NAMES)
        forms = [
            lambda: f"param {name} = {e()}",
            lambda: f"channel {name}[{e()}] capacity {e()}",
            lambda: f"channel {name} capacity {e()}",
            lambda: f"seed {e()}",
            lambda: f"leaks {name}",
            lambda: f'replay "{escape(c.pick(DATA_PATHS))}"',
            lambda: f'scenario "{escape(c.text(10))}"',
            lambda: f"thread {name} * {e()} {{ p = malloc({e()}) free(p) }}",
            lambda: f"thread {name} {{ }}",
        ]
        return c.pick(forms)()


def generate(c: Chooser, wild: Optional[bool] = None) -> Generated:
    """One scenario program, wild or tame as asked (by default either, a third of them wild)."""
    return _Gen(c, wild).program()


OVERRIDE_VALUES = (0, 1, 2, 3, -1, 0.5, 1e30, 2 ** 63, 2 ** 70, 1 << 20, 7.0)


def param_overrides(c: Chooser, text: str) -> Dict[str, object]:
    """`--param` overrides for a program: its own params (or one it lacks) set to odd values."""
    import re
    names = re.findall(r"\bparam\s+([A-Za-z_][A-Za-z0-9_]*)", text) + ["no_such_param"]
    out = {}
    for _ in range(c.int(1, 2)):
        out[c.pick(names)] = c.pick(OVERRIDE_VALUES)
    return out
