"""C source to a program: the compiler invocation and the content-addressed build cache.

A build is keyed by everything that can change the binary: the scenario text
and the data files it names, the params, the compiler and its flags, the probe
set, and scenc's own runtime, templates and compiler code. The key is computed
before parsing, so an unchanged scenario costs a hash and a stat, not a build.
"""

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence

from .. import __version__

PACKAGE = Path(__file__).resolve().parents[1]
RUNTIME = PACKAGE / "runtime"
PROBES = PACKAGE / "probes"
RUNTIME_SOURCES = ("runtime.c",)
# runtime/'s own files are what every scenario program contains; its folders (tracer/, tools/) hold
# separate programs, whose edits must not invalidate scenario builds.
TRACER = RUNTIME / "tracer"
TOOLS = RUNTIME / "tools"
WARNINGS = ("-Wall", "-Wextra", "-Werror")
BASE_FLAGS = ("-O2", "-pthread", "-std=gnu11", "-g")


def default_cc() -> str:
    """The C compiler when no --cc is given: $SCENC_CC, else gcc."""
    return os.environ.get("SCENC_CC", "gcc")


class BuildError(RuntimeError):
    """The C compiler failed or is missing; the message says which and why."""


def cache_dir() -> Path:
    root = os.environ.get("SCENC_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "scenc")
    return Path(root)


@functools.lru_cache(maxsize=None)
def find_compiler(cc: str) -> str:
    path = shutil.which(cc)
    if path is None:
        hint = {"gcc": "apt-get install gcc", "clang": "apt-get install clang"}.get(cc, f"install {cc}")
        raise BuildError(f"the C compiler '{cc}' was not found ({hint})")
    return path


def _file_digest(h, path: Path) -> None:
    h.update(path.name.encode())
    h.update(path.read_bytes())


@functools.lru_cache(maxsize=None)
def toolkit_digest() -> str:
    """A digest of scenc's own code that shapes binaries: runtime, probes, templates, compiler."""
    h = hashlib.sha256(__version__.encode())
    for folder, pattern in ((RUNTIME, "*.[ch]"), (PROBES, "*.[ch]"),
                            (PACKAGE / "compiler" / "templates", "*.j2"),
                            (PACKAGE / "compiler", "*.py"), (PACKAGE / "scenario", "*")):
        for path in sorted(folder.glob(pattern)):
            if path.is_file():
                _file_digest(h, path)
    return h.hexdigest()


def _compiler_identity(cc: str) -> str:
    path = find_compiler(cc)
    st = os.stat(os.path.realpath(path))
    return f"{os.path.realpath(path)}:{st.st_size}:{int(st.st_mtime)}"


_DATA_REFS = re.compile(r'(?:histogram\s*\(\s*|replay\s+)"((?:[^"\\\n]|\\.)*)"')


def scenario_key(source: str, base_dir: Path, params: Mapping[str, object], cc: str,
                 flags: Sequence[str], probes: Sequence[str], file_name: str = "") -> str:
    h = hashlib.sha256()
    h.update(source.encode())
    # The file's name is in the program too: a scenario without `scenario "..."` is named after it.
    h.update(b"\0" + file_name.encode("utf-8", "surrogateescape"))
    for ref in _DATA_REFS.findall(source):
        ref = ref.replace('\\"', '"').replace("\\\\", "\\")  # as the parser reads the string
        try:
            path = base_dir / ref
            h.update(str(path.resolve()).encode("utf-8", "surrogateescape"))  # the program embeds this path
            if path.is_file():
                st = path.stat()
                h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
        except (OSError, ValueError, RuntimeError):
            # No file can have this name (a NUL, a part too long...): the checks
            # will say so with a position; the key only needs to be stable.
            h.update(ref.encode("utf-8", "surrogateescape"))
    h.update(json.dumps(sorted((k, str(v)) for k, v in params.items())).encode())
    h.update(_compiler_identity(cc).encode())
    h.update(" ".join(flags).encode())
    h.update(",".join(probes).encode())
    h.update(toolkit_digest().encode())
    return h.hexdigest()[:24]


def _run_cc(argv, what: str) -> None:
    _run_parallel([(argv, what)])


def _run_parallel(jobs) -> None:
    """Run compiler jobs side by side (a cold build compiles the runtime and the
    scenario at once); the first failure is reported with its own output."""
    procs = [(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), argv, what)
             for argv, what in jobs]
    failure = None
    for proc, argv, what in procs:
        out, err = proc.communicate()
        if proc.returncode != 0 and failure is None:
            failure = BuildError(f"{what} failed ({argv[0]} exit {proc.returncode}):\n"
                                 + (err.strip() or out.strip()))
    if failure is not None:
        raise failure


def _publish(tmp: Path, final: Path) -> None:
    """Move a finished build into the cache; a concurrent identical build may win."""
    final.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(tmp, final)
    except OSError:
        if not final.exists():
            raise
        shutil.rmtree(tmp, ignore_errors=True)


def _runtime_flags(extra_flags: Sequence[str]):
    return (*BASE_FLAGS, *WARNINGS, *extra_flags)


def _runtime_final(cc: str, extra_flags: Sequence[str]) -> Path:
    flags = _runtime_flags(extra_flags)
    h = hashlib.sha256((_compiler_identity(cc) + " ".join(flags) + toolkit_digest()).encode())
    return cache_dir() / "runtime" / h.hexdigest()[:24]


def _runtime_jobs(cc: str, extra_flags: Sequence[str], folder: Path):
    return [([find_compiler(cc), *_runtime_flags(extra_flags), "-I", str(RUNTIME), "-c", str(RUNTIME / name),
              "-o", str(folder / (name + ".o"))], f"compiling the runtime ({name})")
            for name in RUNTIME_SOURCES]


def _archive_runtime(folder: Path, final: Path) -> Path:
    objects = [str(folder / (name + ".o")) for name in RUNTIME_SOURCES]
    _run_cc(["ar", "rcs", str(folder / "libscnrt.a"), *objects], "archiving the runtime")
    _publish(folder, final)
    return final / "libscnrt.a"


def runtime_library(cc: str, extra_flags: Sequence[str] = ()) -> Path:
    """The runtime compiled once per compiler and flags, as a static library."""
    final = _runtime_final(cc, extra_flags)
    if (final / "libscnrt.a").exists():
        return final / "libscnrt.a"
    cache_dir().mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="rt-", dir=cache_dir()))
    _run_parallel(_runtime_jobs(cc, extra_flags, tmp))
    return _archive_runtime(tmp, final)


def helper_build(cc: str, source: Path, output: str, flags: Sequence[str], libs: Sequence[str] = (),
                 headers: Sequence[Path] = (), what: str = "") -> Path:
    """A stand-alone helper (a preload library or a launcher) compiled from one runtime
    source into the cache, once per compiler, flags, source and the headers it includes."""
    h = hashlib.sha256(_compiler_identity(cc).encode())
    h.update(" ".join(flags).encode())
    for path in (source, *headers):
        h.update(path.read_bytes())
    final = cache_dir() / source.stem / h.hexdigest()[:24]
    if (final / output).exists():
        return final / output
    cache_dir().mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{source.stem}-", dir=cache_dir()))
    try:
        _run_cc([find_compiler(cc), *flags, "-o", str(tmp / output), str(source), *libs],
                f"compiling {what or 'runtime/' + source.name}")
    except BuildError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _publish(tmp, final)
    return final / output


@dataclass(frozen=True)
class Build:
    binary: Path
    c_source: Path
    key: str
    cached: bool


def cached_build(key: str) -> Optional[Build]:
    folder = cache_dir() / "builds" / key
    binary = folder / "scenario"
    if binary.exists():
        return Build(binary, folder / "scenario.c", key, True)
    return None


def compile_program(c_text: str, key: str, cc: str = "gcc", extra_flags: Sequence[str] = ()) -> Build:
    cache_dir().mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="build-", dir=cache_dir()))
    c_file = tmp / "scenario.c"
    c_file.write_text(c_text)
    jobs = [([find_compiler(cc), *BASE_FLAGS, *WARNINGS, *extra_flags, "-I", str(RUNTIME), "-I", str(PROBES),
              "-c", str(c_file), "-o", str(tmp / "scenario.o")], "compiling the scenario")]
    rt_final = _runtime_final(cc, extra_flags)
    rt_tmp = None
    if not (rt_final / "libscnrt.a").exists():
        rt_tmp = Path(tempfile.mkdtemp(prefix="rt-", dir=cache_dir()))
        jobs += _runtime_jobs(cc, extra_flags, rt_tmp)
    try:
        _run_parallel(jobs)
    except BuildError:
        shutil.rmtree(tmp, ignore_errors=True)
        if rt_tmp is not None:
            shutil.rmtree(rt_tmp, ignore_errors=True)
        raise
    lib = _archive_runtime(rt_tmp, rt_final) if rt_tmp is not None else rt_final / "libscnrt.a"
    _run_cc([find_compiler(cc), *BASE_FLAGS, *extra_flags, str(tmp / "scenario.o"), str(lib), "-ldl",
             "-o", str(tmp / "scenario")], "linking the scenario")
    final = cache_dir() / "builds" / key
    _publish(tmp, final)
    return Build(final / "scenario", final / "scenario.c", key, False)
