"""Lowering: a resolved scenario becomes plain C-shaped data for the templates.

Every user name reaches C only as `v_<name>` after the grammar has restricted
it to [A-Za-z_][A-Za-z0-9_]*; every string only through `c_string`, which
escapes all but plain printable ASCII. Random draws are hoisted into
temporaries in source order, because C leaves the order of evaluation of
arguments unspecified and gcc and clang would otherwise draw in different
orders (and so make different calls).
"""

import errno
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence

from ..scenario import nodes as n
from ..scenario.errors import Reporter
from ..scenario.resolve import (CHAN, CHAN_ARRAY, HOLDERS, INT, LOOP, MAP, PARAM, POOL, SELF, SHARED,
                                NotConstant, Resolved, ThreadGroup, const_value)
from ..scenario.walk import scenario_calls
from . import distributions as tables

LIVES_WHEEL_BITS = 12
MAX_REGIONS = 32  # runtime/scn.h SCN_MAX_REGIONS


def c_string(text: str) -> str:
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= code < 0x7F and ch not in "?*":
            # '?' avoids trigraphs; '*' avoids "*/" and "/*", so the literal is safe
            # inside a C comment too (the template quotes region names in one).
            out.append(ch)
        else:
            for byte in ch.encode("utf-8", "surrogateescape"):  # a file name's undecodable bytes
                out.append(f"\\{byte:03o}")
    out.append('"')
    return "".join(out)


def c_ident(name: str) -> str:
    assert name.replace("_", "a").isalnum() and name.isascii(), name
    return "v_" + name


@dataclass
class CStmt:
    """One lowered statement: a kind the template knows, and its pieces."""
    kind: str                 # line, scope, repeat, for, region, if
    code: str = ""
    pre: List[str] = field(default_factory=list)   # hoisted draws, in order
    body: List["CStmt"] = field(default_factory=list)
    orelse: List["CStmt"] = field(default_factory=list)  # an if's else block
    var: str = ""
    start: str = ""
    stop: str = ""
    region: int = 0
    line: int = 0


@dataclass
class CThread:
    name: str
    func: str
    count: int
    at_most: int                # thread churn: at most this many alive at once; 0: all together
    int_vars: List[str]
    ptr_vars: List[str]
    pools: List[str]
    body: List[CStmt]
    epilogue: List[str]


@dataclass
class CTable:
    name: str
    kind: str      # alias or quantile
    data: object   # tables.AliasTable or tables.QuantileTable
    source: str    # the distribution as written, for a comment


@dataclass
class CProgram:
    name: str
    seed: int
    params: Dict[str, object]
    channels: List[dict]
    threads: List[CThread]
    tables: List[CTable]
    regions: List[str]
    lives_wheel_bits: int
    replay_file: Optional[str]   # absolute path of the ops file of `replay`
    source_file: str
    shared: Dict[str, int] = field(default_factory=dict)  # C name of a shared pool -> slots
    pointer_slots: bool = False  # pool slots hold bare pointers: nothing reads an object's size
    touch_new: int = 0           # `touch_new`: index in scenario.nodes.TOUCH_NEW_MODES
    uses_maps: bool = False      # the scenario maps memory of its own (`map`): runtime/ops.h SCN_USES_MAPS
    # A build with knobs (convert --model's runs: one build for all of them) reads `seed=N`, `work=0` and
    # `PARAM=N` (each of runtime_params, a variable instead of a constant) from its command line.
    knobs: bool = False
    runtime_params: Dict[str, int] = field(default_factory=dict)

    @property
    def churns(self) -> bool:
        return any(t.at_most for t in self.threads)


class _Lowerer:
    def __init__(self, resolved: Resolved, base_dir: Path, rep: Reporter, pointer_slots: bool,
                 runtime_params=()):
        self.r = resolved
        self.runtime_params = set(runtime_params or ())
        # the params folded when compiling: all but those read at run time
        self.consts = {k: v for k, v in resolved.params.items() if k not in self.runtime_params}
        self.runtime_uses: set = set()   # ids of the Name nodes of runtime params lowered as variables
        self.pointer_slots = pointer_slots
        self.base_dir = base_dir
        self.rep = rep
        self.tables: List[CTable] = []
        self._table_ids: Dict[tuple, str] = {}
        self.regions: List[str] = []
        self.uses_lives = False
        self.uses_maps = any(c.func in ("map", "unmap") for c in scenario_calls(resolved))
        self.knobs = runtime_params is not None
        self.temp = 0
        # A slot expression lowered once per statement: clearing the slot an
        # object left must not draw its index a second time.
        self._slots: Dict[int, str] = {}

    def program(self) -> CProgram:
        threads = [self.thread(g) for g in self.r.groups]
        chans = [{"name": "ch_" + name, "count": info.count, "capacity": info.capacity}
                 for name, info in self.r.channels.items()]
        s = self.r.scenario
        replay_file = None
        for r in s.replays:
            try:
                replay_file = str(resolve_data_path(r.path, self.base_dir))
            except tables.TableError as exc:
                self.rep.error(r.pos, str(exc))
                continue
            if not Path(replay_file).is_file():
                self.rep.error(r.pos, f"the replay data {r.path!r} does not exist")
        return CProgram(s.name, self.r.seed, self.r.params, chans, threads, self.tables,
                        self.regions, LIVES_WHEEL_BITS if self.uses_lives else 0,
                        replay_file, s.filename,
                        {_shared_ident(name): slots for name, slots in self.r.shared.items()},
                        self.pointer_slots, n.TOUCH_NEW_MODES.index(s.touch_new), self.uses_maps,
                        self.knobs, {k: int(v) for k, v in self.r.params.items() if k in self.runtime_params})

    # -- threads
    def thread(self, g: ThreadGroup) -> CThread:
        self.symbols = g.symbols
        body = self.block(g.node.body)
        ptrs = [k for k, v in g.symbols.items() if v in HOLDERS]
        epilogue = []
        if self.r.scenario.leaks == "free":
            epilogue += [f"if ({c_ident(p)}.ptr) scn_unmap_quiet(t, {c_ident(p)});" if g.symbols[p] == MAP else
                         f"if ({c_ident(p)}.ptr) scn_free_quiet(t, {c_ident(p)});" for p in ptrs]
            epilogue += [f"if ({c_ident(p)}) scn_free_all(t, {c_ident(p)}, {c_ident(p)}_n);"
                         for p, k in g.symbols.items() if k == POOL]
        return CThread(
            name=g.node.name, func="body_" + g.node.name, count=g.count, at_most=g.at_most or 0,
            int_vars=[c_ident(k) for k, v in g.symbols.items() if v in (INT, LOOP)],
            ptr_vars=[c_ident(p) for p in ptrs],
            pools=[c_ident(k) for k, v in g.symbols.items() if v == POOL],
            body=body, epilogue=epilogue)

    def block(self, stmts) -> List[CStmt]:
        return [self.stmt(s) for s in stmts]

    def stmt(self, st) -> CStmt:
        self._slots = {}
        pre: List[str] = []
        line = st.pos.line
        if isinstance(st, n.Assign):
            value = self.expr(st.value, pre)
            target = self.place(st.target, pre) if isinstance(st.target, n.Index) else c_ident(st.target.id)
            code = f"{self.store(st.target, target, value)};"
            if value == target and isinstance(st.target, n.Name):
                code = f"(void){target};"  # n = n: clang's -Wself-assign
            source = _moved_source(st.value)
            if source is not None and self._holds_pointer(source):
                old = self.place(source, pre)
                if old == target:
                    pass  # p = realloc(p, n): the object stays where it was
                elif isinstance(source, n.Index) and isinstance(st.target, n.Index):
                    # Two slots may be one (objs[i] = objs[j] with i == j): empty the old first.
                    code = (f"{{ scn_obj moved = {value}; {self.clear(source, pre)};"
                            f" {self.store(st.target, target, 'moved')}; }}")
                else:
                    code += f" {self.clear(source, pre)};"
            return CStmt("line", code, pre, line=line)
        if isinstance(st, n.CallStmt):
            code = self.action(st.call, pre)
            # send(q, realloc(p, n)), free(swap(s[i], p)): realloc or swap took p's object over.
            for arg in st.call.args:
                if isinstance(arg, n.Call) and arg.func in ("realloc", "swap"):
                    source = _moved_source(arg)
                    if source is not None and self._holds_pointer(source):
                        code += f" {self.clear(source, pre)};"
            return CStmt("line", code, pre, line=line)
        if isinstance(st, n.Lives):
            self.uses_lives = True
            obj = self.expr(st.call, pre)
            if st.call.func == "map":
                obj = f"scn_as_mapping({obj})"     # its `lives` end unmaps it
            source = _moved_source(st.call)
            if source is not None and self._holds_pointer(source):
                # realloc(p, n) lives L: the object moves from p to the `lives` queue.
                tmp = self._temp("o")
                pre += [f"scn_obj {tmp} = {obj};", f"{self.clear(source, pre)};"]
                obj = tmp
            if st.lifetime is None and self.r.scenario.leaks == "keep":
                # `leaks keep`: kept to the end of the process, never freed (a program that exits holding it)
                return CStmt("line", f"(void)({obj});", pre, line=line)
            if st.lifetime is None:
                return CStmt("line", f"scn_lives_add_forever(t, {obj});", pre, line=line)
            tmp = self._temp("o")
            pre.append(f"scn_obj {tmp} = {obj};")
            life = self.expr(st.lifetime, pre)
            return CStmt("line", f"scn_lives(t, {tmp}, (uint64_t)({life}));", pre, line=line)
        if isinstance(st, n.Pool):
            size = self.expr(st.size, pre)
            v = c_ident(st.name)
            return CStmt("line", f"{v} = scn_pool_new({size}, &{v}_n, {line});", pre, line=line)
        if isinstance(st, n.Repeat):
            count = self.expr(st.count, pre)
            var = self._temp("r")
            return CStmt("repeat", var=var, stop=count, pre=pre, body=self.block(st.body), line=line)
        if isinstance(st, n.For):
            start, stop = self.expr(st.start, pre), self.expr(st.stop, pre)
            return CStmt("for", var=c_ident(st.var), start=start, stop=stop, pre=pre,
                         body=self.block(st.body), line=line, code=self._temp("end"))
        if isinstance(st, n.Barrier):
            return CStmt("line", "scn_barrier_wait(t);", line=line)
        if isinstance(st, n.Measure):
            if st.name not in self.regions:
                if len(self.regions) == MAX_REGIONS:
                    self.rep.error(st.pos, f"a scenario can measure at most {MAX_REGIONS} differently named regions")
                self.regions.append(st.name)
            return CStmt("region", region=self.regions.index(st.name), body=self.block(st.body),
                         code=c_string(st.name), line=line)
        if isinstance(st, n.If):
            left = self.expr(st.cond.left, pre)
            cond = f"{left}.ptr != NULL" if st.cond.op == "held" else \
                f"{left} {st.cond.op} {self.expr(st.cond.right, pre)}"
            return CStmt("if", cond, pre, body=self.block(st.then), orelse=self.block(st.orelse), line=line)
        raise AssertionError(f"unknown statement {st!r}")

    def action(self, call: n.Call, pre) -> str:
        args = call.args
        if call.func == "free":
            return self._taking(f"scn_free(t, {self.expr(args[0], pre)});", args[0], pre)
        if call.func == "unmap":
            return self._taking(f"scn_unmap(t, {self.expr(args[0], pre)});", args[0], pre)
        if call.func == "free_all" and self.symbols[args[0].id] == SHARED:
            return f"scn_free_all_shared(t, {_shared_ident(args[0].id)}, {self.r.shared[args[0].id]});"
        if call.func == "free_all":
            v = c_ident(args[0].id)
            return f"if ({v}) scn_free_all(t, {v}, {v}_n);"
        if call.func == "send":
            return self._taking(f"scn_send(t, {self.expr(args[0], pre)}, {self.expr(args[1], pre)});",
                                args[1], pre)
        if call.func == "write":
            obj, times = self.expr(args[0], pre), self.expr(args[1], pre)
            if not call.kwargs:
                return f"scn_write(t, {obj}, (uint64_t)({times}));"
            nbytes = self.expr(dict(call.kwargs)["bytes"], pre)
            return f"scn_write_bytes(t, {obj}, (uint64_t)({times}), (int64_t)({nbytes}));"
        if call.func == "touch":
            return f"scn_touch(t, {self.expr(args[0], pre)});"
        if call.func == "work":
            units = f"scn_work((int64_t)({self.expr(args[0], pre)}));"
            return f"if (scn_knob_work) {units}" if self.knobs else units
        raise AssertionError(call.func)

    def _taking(self, code: str, arg, pre) -> str:
        """`code` takes the object in `arg` away (free, send): empty the variable or slot it was in."""
        source = _slot_or_name(arg)
        return code if source is None else f"{code} {self.clear(source, pre)};"

    # -- where objects are kept: variables, and pool slots (bare pointers or pointer + size)
    def place(self, e, pre) -> str:
        """The C lvalue of a pointer variable or pool slot; a slot's index is lowered once."""
        if isinstance(e, n.Name):
            return self.expr(e, pre)
        if id(e) not in self._slots:
            v = c_ident(e.base.id)
            self._slots[id(e)] = f"{v}[scn_checked_index({self.expr(e.index, pre)}, {v}_n, {e.pos.line})]"
        return self._slots[id(e)]

    def _pointer_slot(self, e) -> bool:
        return self.pointer_slots and isinstance(e, n.Index)

    def store(self, e, place: str, value: str) -> str:
        return f"{place} = scn_slot_of({value})" if self._pointer_slot(e) else f"{place} = {value}"

    def clear(self, e, pre) -> str:
        return f"{self.place(e, pre)} = {'NULL' if self._pointer_slot(e) else 'SCN_NULL_OBJ'}"

    def _holds_pointer(self, e) -> bool:
        if isinstance(e, n.Index):
            return self.symbols.get(e.base.id) == POOL
        return self.symbols.get(e.id) in HOLDERS

    # -- expressions
    def expr(self, e, pre) -> str:
        if not isinstance(e, (n.Call, n.Weighted, n.Str)):
            try:
                value = const_value(e, self.consts)
                return f"INT64_C({int(value)})"
            except NotConstant:
                pass
        if isinstance(e, n.Name):
            kind = self.symbols[e.id]
            if kind == SELF:
                return "(int64_t)t->index"
            if kind == CHAN:
                return "ch_" + e.id
            if kind == PARAM:
                self.runtime_uses.add(id(e))
            return c_ident(e.id)
        if isinstance(e, n.Index) and self.symbols[e.base.id] == POOL:
            slot = self.place(e, pre)
            return f"scn_slot_obj({slot})" if self.pointer_slots else slot
        if isinstance(e, n.Index):
            index = self.expr(e.index, pre)
            count = self.r.channels[e.base.id].count
            return f"ch_{e.base.id}[scn_checked_index({index}, {count}, {e.pos.line})]"
        if isinstance(e, n.Neg):
            return f"(-{self.expr(e.operand, pre)})"
        if isinstance(e, n.BinOp):
            left, right = self.expr(e.left, pre), self.expr(e.right, pre)
            if e.op in "/%" and (not right.startswith("INT64_C(") or right == "INT64_C(-1)"):
                fn = "scn_div" if e.op == "/" else "scn_mod"
                return f"{fn}({left}, {right}, {e.pos.line})"
            return f"({left} {e.op} {right})"
        if isinstance(e, n.Weighted):
            pairs = [(const_value(v, self.consts), const_value(w, self.consts)) for v, w in e.pairs]
            return self._draw(pre, self._table(("weighted", tuple(pairs)), e.pos, "weighted",
                                               lambda: tables.alias_table(pairs)))
        if isinstance(e, n.Call):
            return self.call(e, pre)
        raise AssertionError(f"unknown expression {e!r}")

    def call(self, c: n.Call, pre) -> str:
        if c.func == "swap":
            slot = c.args[0]
            index, obj = self.expr(slot.index, pre), self.expr(c.args[1], pre)
            return (f"scn_swap(t, &{_shared_ident(slot.base.id)}"
                    f"[scn_checked_index({index}, {self.r.shared[slot.base.id]}, {slot.pos.line})], {obj})")
        a = [self.expr(x, pre) if not isinstance(x, n.Str) else None for x in c.args]
        f = c.func
        if f == "malloc":
            return f"scn_malloc(t, (size_t)({a[0]}))"
        if f == "calloc":
            return f"scn_calloc(t, (size_t)({a[0]}), (size_t)({a[1]}))"
        if f == "realloc":
            return f"scn_realloc(t, {a[0]}, (size_t)({a[1]}))"
        if f in ("aligned_alloc", "memalign", "posix_memalign"):
            return f"scn_{f}(t, (size_t)({a[0]}), (size_t)({a[1]}))"
        if f == "recv":
            return f"scn_recv(t, {a[0]})"
        if f == "map" and c.kwargs:
            written = self.expr(dict(c.kwargs)["percent_written"], pre)
            return f"scn_map_written(t, (size_t)({a[0]}), (int64_t)({written}))"
        if f == "map":
            return f"scn_map(t, (size_t)({a[0]}))"
        if f == "random":
            return self._draw(pre, f"scn_below(&t->rng, (uint64_t)({a[0]}))")
        if f == "uniform":
            return self._draw(pre, f"scn_draw_uniform(&t->rng, {a[0]}, {a[1]})")
        if f == "pow2":
            return self._draw(pre, f"scn_draw_pow2(&t->rng, {a[0]}, {a[1]})")
        consts = {k: const_value(v, self.consts) for k, v in c.kwargs}
        if f == "choice":
            values = [const_value(x, self.consts) for x in c.args]
            key, build = ("choice", tuple(values)), lambda: tables.alias_table([(v, 1) for v in values])
        elif f == "lognormal":
            key = ("lognormal", consts["median"], consts["sigma"])
            build = lambda: tables.lognormal_table(consts["median"], consts["sigma"])  # noqa: E731
        elif f == "geometric":
            key, build = ("geometric", consts["mean"]), lambda: tables.geometric_table(consts["mean"])
        elif f == "histogram":
            text = c.args[0].value
            key = ("histogram", text)
            build = lambda: tables.histogram_table(resolve_data_path(text, self.base_dir))  # noqa: E731
        else:
            raise AssertionError(f)
        return self._draw(pre, self._table(key, c.pos, f, build))

    def _table(self, key, pos, source, build) -> str:
        if key not in self._table_ids:
            try:
                data = build()
            except tables.TableError as exc:
                self.rep.error(pos, str(exc))
                data = tables.alias_table([(1, 1)])
            name = f"T{len(self.tables)}"
            kind = "alias" if isinstance(data, tables.AliasTable) else "quantile"
            self.tables.append(CTable(name, kind, data, source))
            self._table_ids[key] = name
        name = self._table_ids[key]
        kind = self.tables[int(name[1:])].kind
        return f"scn_draw_{kind}(&t->rng, &{name})"

    def _draw(self, pre, draw: str) -> str:
        tmp = self._temp("d")
        pre.append(f"const int64_t {tmp} = (int64_t){draw};")
        return tmp

    def _temp(self, prefix: str) -> str:
        self.temp += 1
        return f"{prefix}{self.temp}"


def resolve_data_path(text: str, base_dir: Path, allow_outside: bool = False) -> Path:
    """A data file named in a scenario, relative to the scenario; it may not escape its folder.

    Symbolic links are followed before the folder test, so a link pointing out
    of the folder is refused like `../x`. A name that no file system takes (a
    NUL, a part longer than 255 bytes) or a file that cannot be looked at is
    a TableError too, so that every caller reports it with a position.
    """
    if "\0" in text or len(text.encode("utf-8", "replace")) >= 4096 \
            or any(len(part.encode("utf-8", "replace")) > 255 for part in text.split("/")):
        raise tables.TableError(f"{text!r} cannot be a file name")
    try:
        path = (base_dir / text).resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop, before Python 3.13
        raise tables.TableError(f"{text!r} cannot be looked at ({exc})") from None
    try:
        path.stat()
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):  # those: "does not exist"
            raise tables.TableError(f"{text!r} cannot be looked at ({exc.strerror})") from None
    if not allow_outside and base_dir.resolve() not in (path, *path.parents):
        raise tables.TableError(f"{text!r} is outside the scenario's folder")
    return path


def _slot_or_name(e) -> Optional[n.Expr]:
    """The variable or pool slot an object came from, to clear after it is gone."""
    return e if isinstance(e, (n.Name, n.Index)) else None


def _moved_source(e) -> Optional[n.Expr]:
    """The variable or pool slot whose object an assigned value takes over."""
    if isinstance(e, n.Call) and e.func == "realloc":
        return _slot_or_name(e.args[0])
    if isinstance(e, n.Call) and e.func == "swap":
        return _slot_or_name(e.args[1])
    return _slot_or_name(e)


def _shared_ident(name: str) -> str:
    return "sh_" + c_ident(name)[2:]


SIZE_READERS = ("write", "touch")  # runtime/ops.h: scn_write_bytes, scn_touch read o.size


def reads_sizes(resolved: Resolved) -> bool:
    """Whether the scenario itself reads the sizes of the objects it holds: a
    `write` fills its object's bytes, a `touch` its pages. (An object moves
    between variables, pools and channels, so one reader anywhere needs the
    size kept everywhere.)"""
    return any(call.func in SIZE_READERS for call in scenario_calls(resolved))


def lower(resolved: Resolved, base_dir: Path, probes_read_sizes: bool = False,
          runtime_params: Optional[Sequence[str]] = None) -> CProgram:
    """`probes_read_sizes`: a probe compiled in reads the objects' sizes (live,
    layout); with it, or a `write` or `touch`, pool slots keep each object's size.
    runtime_params (None: a build without knobs): a build with knobs, whose program takes `seed=N`, `work=0`
    and each of these params (`NAME=N`) on its command line (CProgram.knobs)."""
    rep = Reporter(resolved.scenario.filename, resolved.scenario.source)
    pointer_slots = not probes_read_sizes and not reads_sizes(resolved)
    lowerer = _Lowerer(resolved, base_dir, rep, pointer_slots, runtime_params)
    program = lowerer.program()
    _check_runtime_params(resolved, lowerer, rep)
    rep.raise_if_errors()
    return program


def _check_runtime_params(resolved: Resolved, lowerer: "_Lowerer", rep: Reporter) -> None:
    """A param read at run time must be read only where the program computes with it (a statement's
    expression), never where its value is needed when compiling (a count, a capacity, a table): there the
    default would be folded in, and the value given at run time silently ignored."""
    for name in sorted(lowerer.runtime_params):
        if name not in resolved.params:
            rep.error(n.NOWHERE, f"no param {name!r} to read at run time")
            continue
        s = resolved.scenario
        uses = [e for e in _names(tuple(s.threads) + tuple(s.channels) + tuple(s.shared) + (s.seed,))
                if e.id == name]
        folded = [e for e in uses if id(e) not in lowerer.runtime_uses]
        if folded:
            rep.error(folded[0].pos, f"param {name} cannot be given at run time: its value is needed when "
                                     f"compiling here")


def _names(node) -> Iterator[n.Name]:
    """Every Name node under node (dataclass nodes and tuples of them)."""
    if isinstance(node, n.Name):
        yield node
    elif isinstance(node, tuple):
        for x in node:
            yield from _names(x)
    elif is_dataclass(node):
        for f in fields(node):
            yield from _names(getattr(node, f.name))
