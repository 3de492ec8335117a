"""The allocator registry: which malloc implementations a run can use, and whether a run really got one.

    resolve("glibc,jemalloc,mine=./libmine.so", config_path)   # -> [Allocator], or AllocatorError
    resolve("glibc,/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")  # a path: named libjemalloc
    resolve("jemalloc,jemalloc[narenas:1]")   # an option variant: MALLOC_CONF=narenas:1 (allocators/variants.py)
    known(config_path)                    # the built-ins, then the config files' allocators
    problem(allocator)                    # why it cannot be used on this machine, or None
    provider_matches(allocator, path)     # the preload proof: did malloc come from the allocator's object?

An allocator is the system malloc (glibc, no preload) or a shared object injected with LD_PRELOAD.
allocators/libraries.py finds the libraries, allocators/config.py reads the config files. The built-ins,
the config file format and the preload proof: docs/running.md, "Allocators".
"""

import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Tuple

from . import config as allocator_config, libraries, variants

__all__ = [
    "Allocator",
    "AllocatorError",
    "BUILTIN_NAMES",
    "resolve",
    "known",
    "problem",
    "provider_matches",
    "explain_mismatch",
]


class AllocatorError(Exception):
    """An allocator cannot be used; the message is a sentence meant for the user."""


@dataclass(frozen=True)
class Allocator:
    name: str
    library: Optional[str]  # absolute path to LD_PRELOAD; None means the system malloc
    env: Dict[str, str] = field(default_factory=dict, hash=False)
    version: Optional[str] = None
    package: Optional[str] = None
    install_hint: Optional[str] = None
    builtin: bool = False

    def __post_init__(self):
        # A private copy, so a caller's later edits to its dict do not leak into the
        # registry; a plain dict (not a read-only proxy) keeps asdict() and pickling working.
        object.__setattr__(self, "env", dict(self.env))

    def to_json(self) -> dict:
        """The allocator as a result file's header keeps it, so a resumed or re-read session finds it again."""
        return {"path": self.library, "version": self.version, "env": dict(self.env), "package": self.package,
                "builtin": self.builtin}

    @classmethod
    def from_json(cls, name: str, entry: Mapping) -> "Allocator":
        return cls(name=name, library=entry.get("path"), env=entry.get("env") or {}, version=entry.get("version"),
                   package=entry.get("package"), builtin=bool(entry.get("builtin")))

    @property
    def uses_system_malloc(self) -> bool:
        """glibc, glibc-notc and their option variants (glibc[arena_max=1])."""
        return self.library is None and self.name.partition("[")[0] in _SYSTEM_MALLOC_NAMES

    @property
    def installed(self) -> bool:
        if self.library is None:
            return self.uses_system_malloc and libraries.glibc_version() is not None
        return os.path.isfile(self.library)

    def preload_env(self, base_env: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
        """The environment to run a benchmark under this allocator."""
        env = dict(os.environ if base_env is None else base_env)
        if self.library is not None:
            # Prepend so that a user's own preload (a tracer, say) keeps working
            # while our malloc is found first.
            existing = env.get("LD_PRELOAD", "").strip()
            env["LD_PRELOAD"] = self.library + (":" + existing if existing else "")
        for key, value in self.env.items():
            if key == "GLIBC_TUNABLES" and env.get(key):
                # Merge instead of overwrite: the user's other tunables still apply,
                # and ours comes last so it wins for the same tunable.
                env[key] = env[key] + ":" + value
            else:
                env[key] = value
        return env


# ---------------------------------------------------------------------------
# Built-ins

_SYSTEM_MALLOC_NAMES = ("glibc", "glibc-notc")


@dataclass(frozen=True)
class _PreloadSpec:
    name: str
    soname: str
    package: str


_PRELOAD_BUILTINS = (
    _PreloadSpec("tcmalloc", "libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"),
    _PreloadSpec("jemalloc", "libjemalloc.so.2", "libjemalloc2"),
    _PreloadSpec("mimalloc", "libmimalloc.so.2", "libmimalloc2.0"),
    # oneTBB's scalable allocator: libtbbmalloc.so.2 only exports scalable_malloc & co.; its proxy is
    # what defines malloc, free and operator new, so the proxy is what LD_PRELOAD takes.
    _PreloadSpec("tbbmalloc", "libtbbmalloc_proxy.so.2", "libtbbmalloc2"),
    # gperftools' whole tcmalloc (heap profiler and checker hooks included), beside the minimal one above.
    _PreloadSpec("tcmalloc-full", "libtcmalloc.so.4", "libgoogle-perftools4"),
)

BUILTIN_NAMES = _SYSTEM_MALLOC_NAMES + tuple(s.name for s in _PRELOAD_BUILTINS)

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


def _glibc_allocators() -> List[Allocator]:
    version = libraries.glibc_version()
    return [
        Allocator("glibc", None, {}, version, None, None, True),
        Allocator("glibc-notc", None, {"GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"},
                  version, None, None, True),
    ]


_looked_up: Dict[str, Allocator] = {}  # preloaded built-ins found so far, by name


def _builtins(names) -> List[Allocator]:
    """The named built-ins; only their own libraries are looked up, all in one batch."""
    missing = [s for s in _PRELOAD_BUILTINS if s.name in names and s.name not in _looked_up]
    if missing:
        _looked_up.update((a.name, a) for a in _look_up_preloads(missing))
    system = {a.name: a for a in _glibc_allocators()}
    return [system[n] if n in system else _looked_up[n] for n in names]


def _builtin_allocators() -> Tuple[Allocator, ...]:
    return tuple(_builtins(BUILTIN_NAMES))


def _look_up_preloads(specs) -> List[Allocator]:
    with libraries.LookupCache() as cache:
        found = [cache.library(s.soname) for s in specs]
        versions = cache.package_versions([(s.package, lib) for s, lib in zip(specs, found) if lib])
    return [Allocator(
        name=spec.name,
        library=library,
        env={},
        version=(versions.get(library) or libraries.version_from_file_name(library)) if library else None,
        package=spec.package,
        install_hint=f"apt-get install {spec.package}",
        builtin=True,
    ) for spec, library in zip(specs, found)]


# ---------------------------------------------------------------------------
# User allocators


def _check_name(name: str, where: str) -> None:
    if not _NAME_RE.match(name):
        raise AllocatorError(
            f"allocator name {name!r} {where} is not allowed: use letters, digits and . _ + -, "
            f"starting with a letter or digit")
    if name in _SYSTEM_MALLOC_NAMES:
        raise AllocatorError(
            f"{name!r} {where} is the system malloc and cannot be given a library; "
            f"choose another name")


def _user_allocator(name: str, library: str, env: Mapping[str, str], version: Optional[str],
                    hint: str) -> Allocator:
    if re.search(r"[\s:]", library):
        # LD_PRELOAD splits on both; such a path cannot be preloaded at all.
        raise AllocatorError(f"{name}: library path {library!r} contains a space or ':', "
                             f"which LD_PRELOAD cannot express; move or link the library")
    return Allocator(name=name, library=library, env=env,
                     version=version or libraries.version_from_file_name(library),
                     package=None, install_hint=hint, builtin=False)


def _configured(config_path: Optional[str]) -> Dict[str, Allocator]:
    paths = allocator_config.default_config_paths()
    if config_path is not None:
        paths.append(os.fspath(config_path))
    merged: Dict[str, Allocator] = {}
    for path in paths:
        try:
            entries = allocator_config.load(path, _check_name)
        except allocator_config.ConfigError as exc:
            raise AllocatorError(str(exc)) from None
        merged.update((e.name, _user_allocator(e.name, e.library, e.env, e.version, hint=f"fix 'library' {e.where}"))
                      for e in entries.values())
    return merged


# ---------------------------------------------------------------------------
# Public API


def known(config_path: Optional[str] = None) -> List[Allocator]:
    """Every allocator that could be named: built-ins first, then configured ones."""
    configured = _configured(config_path)
    result = [configured.pop(a.name, a) for a in _builtin_allocators()]
    return result + list(configured.values())


def problem(allocator: Allocator) -> Optional[str]:
    """Why `allocator` cannot be used on this machine (a sentence), or None."""
    if allocator.library is None:
        if allocator.uses_system_malloc:
            return None if libraries.glibc_version() is not None else (
                f"{allocator.name} needs glibc, but the C library here is not glibc")
        hint = f": {allocator.install_hint}" if allocator.install_hint else ""
        return f"{allocator.name} is not installed{hint}"
    if not os.path.exists(allocator.library):
        hint = f" ({allocator.install_hint})" if allocator.install_hint else ""
        return f"{allocator.name}: library {allocator.library} does not exist{hint}"
    if not os.path.isfile(allocator.library):
        return f"{allocator.name}: {allocator.library} is not a regular file"
    issue = libraries.preload_problem(allocator.library)
    return f"{allocator.name}: {issue}" if issue else None


def resolve(spec: str, config_path: Optional[str] = None) -> List[Allocator]:
    """Turn "glibc,jemalloc,mine=/path/libmine.so,jemalloc[narenas:1]" into usable allocators, or raise
    AllocatorError."""
    try:
        parsed = [variants.parse_item(item) for item in variants.split_spec(spec)]
    except variants.VariantError as exc:
        raise AllocatorError(str(exc)) from None
    items = [base for base, _ in parsed]
    if not any(items):
        raise AllocatorError("no allocators given; for example --allocators glibc,jemalloc")
    if not all(items):
        raise AllocatorError(f"empty allocator name in {spec!r} (two commas in a row?)")
    configured = _configured(config_path)
    # Only the built-ins named are looked up (a configured one replaces its namesake).
    asked = [item.partition("=")[0].strip() for item in items if "=" not in item]
    by_name = {a.name: a for a in _builtins([n for n in BUILTIN_NAMES if n in asked and n not in configured])}
    by_name.update(configured)
    names_known = list(BUILTIN_NAMES) + [n for n in configured if n not in BUILTIN_NAMES]
    chosen: List[Allocator] = []
    for item, options in parsed:
        name, sep, path = (part.strip() for part in item.partition("="))
        if sep:
            _check_name(name, f"in {item!r}")
            if not path:
                raise AllocatorError(f"{item!r} names no library; write {name}=/path/to/lib{name}.so")
            library = os.path.abspath(os.path.expanduser(path))
            allocator = _user_allocator(name, library, {}, None,
                                        hint=f"check the path given as {name}=...")
        elif name in by_name:
            allocator = by_name[name]
        elif looks_like_library(name):
            library = os.path.abspath(os.path.expanduser(name))
            allocator = _user_allocator(library_name(library), library, {}, None,
                                        hint=f"check the path {name}")
        else:
            import difflib
            close = difflib.get_close_matches(name, names_known, n=1)
            mean = f"; did you mean {close[0]!r}?" if close else ""
            raise AllocatorError(
                f"unknown allocator {name!r}{mean} Known: {', '.join(names_known)}. "
                f"Your own library: its path (./libmine.so), or NAME=PATH to name it (mine=./libmine.so); "
                f"a variant with options: NAME[option=value,...] (jemalloc[narenas:1])")
        issue = problem(allocator)
        if issue:
            raise AllocatorError(issue)
        if options is not None:
            allocator = _variant(allocator, options)
        if any(a.name == allocator.name for a in chosen):
            raise AllocatorError(f"allocator {allocator.name!r} is listed twice in {spec!r}")
        chosen.append(allocator)
    return chosen


def _variant(base: Allocator, options) -> Allocator:
    """`base` with options (allocators/variants.py), named by both: jemalloc[narenas:1]."""
    try:
        env = variants.variant_env(base.name, base.library, dict(base.env), options)
    except variants.VariantError as exc:
        raise AllocatorError(str(exc)) from None
    return Allocator(name=f"{base.name}[{variants.describe(options)}]", library=base.library, env=env,
                     version=base.version, package=base.package, install_hint=base.install_hint,
                     builtin=base.builtin)


def looks_like_library(item: str) -> bool:
    """An --allocators item that is a library's path rather than a name: it has a '/' or a .so."""
    return "/" in item or re.search(r"\.so(\.[0-9]+)*$", item) is not None


def library_name(path: str) -> str:
    """The name a library given by its path runs under: its file name up to '.so'
    (/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 -> libjemalloc)."""
    base = os.path.basename(path)
    name = re.sub(r"\.so(\.[0-9A-Za-z]+)*$", "", base) or base
    name = re.sub(r"[^A-Za-z0-9._+-]", "_", name).lstrip("._+-")
    return name or "library"


_LIBC_RE = re.compile(r"^libc\.so(\.\d+)*$")


def _same_file(a: str, b: str) -> bool:
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def provider_matches(allocator: Allocator, provider_path: Optional[str]) -> bool:
    """Did the run labelled `allocator` really get its malloc from the right object?"""
    if not provider_path:
        return False
    if allocator.library is None:
        names = {os.path.basename(provider_path), os.path.basename(os.path.realpath(provider_path))}
        return any(_LIBC_RE.match(n) for n in names)
    return _same_file(allocator.library, provider_path)


def explain_mismatch(allocator: Allocator, provider_path: Optional[str]) -> str:
    """A sentence for a report saying what went wrong with the run's preload."""
    if provider_matches(allocator, provider_path):
        return f"malloc came from {provider_path}, as expected for {allocator.name}"
    if not provider_path:
        return (f"the run labelled {allocator.name!r} did not report where malloc came from, "
                f"so the allocator in use is unknown")
    if allocator.library is None:
        return (f"the run labelled {allocator.name!r} should use the system malloc from libc.so, "
                f"but malloc came from {provider_path}: an LD_PRELOAD left in the environment "
                f"is the usual cause")
    return (f"the run labelled {allocator.name!r} should get malloc from {allocator.library}, "
            f"but it came from {provider_path}: the preload did not take effect (a statically "
            f"linked or setuid program, a library for another architecture, or a library "
            f"that does not define malloc itself)")
