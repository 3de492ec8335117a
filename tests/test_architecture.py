"""scenc's modules import one way: no import cycle among them.

Every import counts, the ones at the top of a module and the ones inside
functions (an import inside a function hides a cycle from Python, not from a
reader). The graph is read from the source with `ast`, nothing is imported.
"""

import pytest
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "scenc"
SKIP = {"tests", "bench", "scripts", "docs", "examples", "runtime", ".venv", "build"}


def _modules():
    """{dotted name: path} of every module of the package (tests, bench and scripts are not in it)."""
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in SKIP or any(part.startswith(".") for part in rel.parts):
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join([PACKAGE] + parts)] = path
    return found


def _imported(module: str, path: Path, modules) -> set:
    """The package's modules that `module` imports, anywhere in its source."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    targets = set()

    def add(name):
        # `from .x import y` may name a module x.y or a name y in x.
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name and name != module:
            targets.add(name)

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                    add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                stem = ".".join(base + ([node.module] if node.module else []))
            elif node.module and (node.module == PACKAGE or node.module.startswith(PACKAGE + ".")):
                stem = node.module
            else:
                continue
            for alias in node.names:
                full = f"{stem}.{alias.name}"
                add(full if full in modules else stem)
    return targets


def import_graph():
    modules = _modules()
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def _cycles(graph):
    """Strongly connected components of more than one module (Tarjan), each as a cycle path."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_one_cycle(graph, c) for c in components]


def _one_cycle(graph, component):
    """A readable cycle through the component: a -> b -> ... -> a."""
    start = min(component)
    path, seen = [start], {start: None}
    frontier = [start]
    while frontier:  # breadth-first back to start
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & component):
                if w == start:
                    chain = [v]
                    while seen[chain[-1]] is not None:
                        chain.append(seen[chain[-1]])
                    return " -> ".join(reversed(chain)) + f" -> {start}"
                if w not in seen:
                    seen[w] = v
                    nxt.append(w)
        frontier = nxt
    return " <-> ".join(sorted(component))


@pytest.mark.slow
def test_the_graph_is_read():
    graph = import_graph()
    # A few imports that certainly exist: if these are missing the reader is broken.
    assert "scenc.commands.parser" in graph["scenc.cli"]
    assert "scenc.compiler.pipeline" in graph["scenc.commands.compile"]
    assert "scenc.scenario.parser" in graph["scenc.compiler.pipeline"]


def test_the_detector_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == ["a -> b -> c -> a"]


@pytest.mark.slow
def test_no_import_cycle():
    cycles = _cycles(import_graph())
    assert not cycles, "import cycles among scenc's modules:\n  " + "\n  ".join(cycles)


@pytest.mark.slow
def test_every_relative_import_resolves():
    """`from .x import y` names a module that exists, and y is in it (a module of its package or a name
    it defines): a move that left an import behind fails here, not in the one command that runs it."""
    import importlib
    unresolved = []
    for name, path in _modules().items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom) or not node.level:
                continue
            base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
            stem = ".".join(base + ([node.module] if node.module else []))
            try:
                module = importlib.import_module(stem)
            except ImportError as exc:
                unresolved.append(f"{path.relative_to(ROOT)}:{node.lineno}: {stem} ({exc})")
                continue
            for alias in node.names:
                if not hasattr(module, alias.name):
                    try:
                        importlib.import_module(f"{stem}.{alias.name}")
                    except ImportError:
                        unresolved.append(f"{path.relative_to(ROOT)}:{node.lineno}: {alias.name} from {stem}")
    assert not unresolved, "imports that resolve to nothing:\n  " + "\n  ".join(unresolved)


def test_the_root_holds_only_entry_points():
    """The folders are the architecture: at the root only the command (cli.py), the harness the design card
    names (harness.py) and the errors every layer raises (errors.py)."""
    root = {p.name for p in ROOT.glob("*.py")} - {"__init__.py"}
    assert root <= {"cli.py", "harness.py", "errors.py"}, root


def test_folders_not_name_prefixes():
    trace = {p.name for p in (ROOT / "trace").glob("*.py")}
    assert not {n for n in trace if n.startswith(("model_", "ltrace_"))}, "a prefix where a folder belongs"
    assert not list((ROOT / "runtime").glob("tracer*")) or (ROOT / "runtime" / "tracer").is_dir()
    assert not {p.name for p in (ROOT / "runtime").glob("*.c")} - {"runtime.c"}, \
        "runtime/ holds the generated programs' runtime; other programs go to runtime/tracer/ or runtime/tools/"


@pytest.mark.slow
def test_a_run_record_is_read_through_its_class():
    """Run records are RunRecords (run/record.py); a "status" read by key elsewhere is another status (the
    result file's, in its header; the launcher's wait status), in at most three places."""
    readers = []
    for path in _modules().values():
        if path.relative_to(ROOT) == Path("run/record.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            key = None
            if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
                    and isinstance(node.slice, ast.Constant)):
                key = node.slice.value
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                  and node.args and isinstance(node.args[0], ast.Constant)):
                key = node.args[0].value
            if key == "status":
                readers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert len(readers) <= 3, readers


def test_module_docstrings_say_what_the_module_is_in_a_few_lines():
    long = {str(path.relative_to(ROOT)): len(doc.splitlines())
            for path in _modules().values()
            for doc in [ast.get_docstring(ast.parse(path.read_text()), clean=False)] if doc
            if len(doc.splitlines()) > 25}
    assert not long, f"module docstrings over 25 lines (design notes go to docs/, figures to bench/results/): {long}"
