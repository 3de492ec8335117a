"""The allocator registry: which malloc implementations a run can use and how.

An allocator is either the system malloc (glibc, no preload) or a shared
object that defines ``malloc`` and is injected with ``LD_PRELOAD``.

Built-ins
    ``glibc``       the system malloc, untouched.
    ``glibc-notc``  glibc with its per-thread cache disabled
                    (``GLIBC_TUNABLES=glibc.malloc.tcache_count=0``, as allocbench does).
    ``tcmalloc``    libtcmalloc_minimal.so.4  (Debian: libtcmalloc-minimal4)
    ``jemalloc``    libjemalloc.so.2          (Debian: libjemalloc2)
    ``mimalloc``    libmimalloc.so.2          (Debian: libmimalloc2.0)

User allocators
    On the command line: ``--allocators glibc,mine=/path/to/libmine.so``.

    In a config file (INI, one section per allocator)::

        [mine]
        library = lib/libmine.so        ; relative paths are relative to this file
        env = MINE_ARENAS=4 MINE_LOG="a b"
        version = 1.2                   ; optional, else taken from the file name

    ``env`` is a whitespace-separated list of KEY=VALUE words, split like a
    shell would (``shlex``), so a value with spaces can be quoted.  No other
    keys are accepted, so a typo such as ``libary`` is an error, not a silently
    ignored line.  A section may reuse a built-in preloaded name (say
    ``[tcmalloc]`` pointing at a self-built copy); it then replaces the
    built-in.  ``glibc`` and ``glibc-notc`` cannot be redefined.

    Config files read: ``$SCENC_ALLOCATORS`` if set (it must exist), otherwise
    ``$XDG_CONFIG_HOME/scenc/allocators.ini`` (default ``~/.config/...``) if it
    exists; then the explicit ``config_path`` argument, whose sections win.

Preload proof
    Benchmark programs report which shared object provides ``malloc``
    (``dladdr`` of ``dlsym(RTLD_DEFAULT, "malloc")``).  ``provider_matches``
    checks that against the allocator a run is labelled with, because ld.so
    ignores an unusable ``LD_PRELOAD`` with nothing but a line on stderr and the
    run would silently measure glibc.  The library named must itself define
    ``malloc`` (a shim whose malloc lives in a dependency will not match).
"""

import configparser
import functools
import glob
import json
import os
import re
import shlex
import struct
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Tuple

from . import elf

__all__ = [
    "Allocator",
    "AllocatorError",
    "BUILTIN_NAMES",
    "resolve",
    "known",
    "problem",
    "format_table",
    "provider_matches",
    "explain_mismatch",
    "default_config_paths",
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

    @property
    def uses_system_malloc(self) -> bool:
        return self.library is None and self.name in _SYSTEM_MALLOC_NAMES

    @property
    def installed(self) -> bool:
        if self.library is None:
            return self.uses_system_malloc and _glibc_version() is not None
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
)

BUILTIN_NAMES = _SYSTEM_MALLOC_NAMES + tuple(s.name for s in _PRELOAD_BUILTINS)

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


def _glibc_allocators() -> List[Allocator]:
    version = _glibc_version()
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
    with _LookupCache() as cache:
        libraries = [cache.library(s.soname) for s in specs]
        versions = cache.package_versions([(s.package, lib) for s, lib in zip(specs, libraries) if lib])
    return [Allocator(
        name=spec.name,
        library=library,
        env={},
        version=(versions.get(library) or _version_from_file_name(library)) if library else None,
        package=spec.package,
        install_hint=f"apt-get install {spec.package}",
        builtin=True,
    ) for spec, library in zip(specs, libraries)]


def _glibc_version() -> Optional[str]:
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"
    except (ValueError, OSError):
        return None  # not glibc (musl, macOS ...)
    if not text:
        return None
    return text.split()[-1]


# ---------------------------------------------------------------------------
# Finding libraries and their versions
#
# ldconfig, dpkg-query and gcc take tens of milliseconds each on a quiet
# machine and far more on a busy one, and `scenc run` would pay for them on
# every start. So each tool runs at most once per process, for every library
# at once, and what they said is kept in a small cache file; an entry is only
# trusted while what it was read from is unchanged: /etc/ld.so.cache (rebuilt
# whenever a library is installed) for where a library is, and the library
# file itself (size, mtime, inode: a package upgrade replaces it) for its
# version.

_LD_SO_CACHE = "/etc/ld.so.cache"
_LOOKUP_CACHE_SCHEMA = 1


def _run(argv: List[str], any_status: bool = False) -> Optional[str]:
    """stdout of a helper tool, or None when it is missing or fails: every caller has a fallback."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 or any_status else None


def _stamp(path: str) -> Optional[str]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{st.st_mtime_ns}:{st.st_size}:{st.st_ino}"


def _lookup_cache_path() -> str:
    root = os.environ.get("SCENC_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "scenc")
    return os.path.join(root, "allocators.json")


class _LookupCache:
    """Library paths and package versions, from the cache file or the tools."""

    def __init__(self):
        self.path = _lookup_cache_path()
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
            if not isinstance(data, dict) or data.get("schema") != _LOOKUP_CACHE_SCHEMA:
                data = {}
        except (OSError, ValueError):
            data = {}
        self.ld_stamp = _stamp(_LD_SO_CACHE) or "none"
        if data.get("ld_so_cache") != self.ld_stamp:
            data["libraries"] = {}  # libraries were installed or removed since
        self.libraries: Dict[str, Optional[str]] = dict(data.get("libraries") or {})
        self.versions: Dict[str, dict] = dict(data.get("versions") or {})
        self.changed = False

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        if self.changed and exc_info[0] is None:
            self._save()

    def _save(self) -> None:
        data = {"schema": _LOOKUP_CACHE_SCHEMA, "ld_so_cache": self.ld_stamp,
                "libraries": self.libraries, "versions": self.versions}
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=os.path.dirname(self.path), prefix=".allocators.")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1, sort_keys=True)
            os.replace(temporary, self.path)  # a concurrent scenc reads the old or the new file
        except OSError:
            pass  # a read-only home only costs the look-up next time

    def library(self, soname: str) -> Optional[str]:
        if soname in self.libraries:
            path = self.libraries[soname]
            if path is None or (os.path.isfile(path) and _shared_object_problem(path) is None):
                return path
        path = _find_library(soname)
        self.libraries[soname] = path
        self.changed = True
        return path

    def package_versions(self, wanted: List[Tuple[str, str]]) -> Dict[str, Optional[str]]:
        """{library: Debian version} for (package, library) pairs, the tools asked once for all."""
        found: Dict[str, Optional[str]] = {}
        todo = []
        for package, library in wanted:
            real = os.path.realpath(library)
            entry = self.versions.get(real)
            if entry and entry.get("stamp") == _stamp(real) and entry.get("package") == package:
                found[library] = entry.get("version")
            else:
                todo.append((package, library, real))
        if todo:
            versions = _package_versions([(package, real) for package, _, real in todo])
            for package, library, real in todo:
                found[library] = versions.get(real)
                self.versions[real] = {"stamp": _stamp(real), "package": package,
                                       "version": found[library]}
            self.changed = True
        return found


@functools.lru_cache(maxsize=None)
def _ldconfig_map() -> Dict[str, List[str]]:
    """soname -> paths known to ld.so, from one `ldconfig -p`."""
    # ldconfig lives in /sbin, which is often not on a normal user's PATH.
    for ldconfig in ("ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"):
        out = _run([ldconfig, "-p"])
        if out is not None:
            break
    else:
        return {}
    paths: Dict[str, List[str]] = {}
    for line in out.splitlines():
        # "\tlibjemalloc.so.2 (libc6,x86-64) => /lib/x86_64-linux-gnu/libjemalloc.so.2"
        name, _, rest = line.strip().partition(" ")
        if "=>" in rest:
            paths.setdefault(name, []).append(rest.split("=>", 1)[1].strip())
    return paths


@functools.lru_cache(maxsize=None)
def _multiarch() -> Optional[str]:
    for compiler in ("gcc", "cc"):
        out = _run([compiler, "-print-multiarch"])
        if out and out.strip():
            return out.strip()
    import sysconfig
    return sysconfig.get_config_var("MULTIARCH") or None


def _search_dirs() -> List[str]:
    dirs = []
    arch = _multiarch()
    if arch:
        dirs += [f"/usr/lib/{arch}", f"/lib/{arch}", f"/usr/local/lib/{arch}"]
    dirs += sorted(glob.glob("/usr/lib/*/"))
    dirs += ["/usr/local/lib", "/usr/lib64", "/lib64", "/usr/lib", "/lib"]
    return dirs


def _usable(path: str) -> bool:
    # ldconfig also lists other ABIs (lib32 ...) that LD_PRELOAD would reject.
    return os.path.isfile(path) and _shared_object_problem(path) is None


def _find_library(soname: str) -> Optional[str]:
    for path in _ldconfig_map().get(soname, []):
        if _usable(path):
            return os.path.abspath(path)
    # Not in ld.so's cache (a library dir ldconfig does not know): the usual
    # places, which need the multiarch triplet from gcc, so only now.
    for directory in _search_dirs():
        path = os.path.join(directory, soname)
        if _usable(path):
            return os.path.abspath(path)
    return None


def _version_from_file_name(library: Optional[str]) -> Optional[str]:
    """"libfoo.so.1.2.3" -> "1.2.3"; the soname symlink is followed to the versioned file."""
    if not library:
        return None
    for path in (os.path.realpath(library), library):
        match = re.search(r"\.so\.(\d+(?:\.\d+)*)$", os.path.basename(path))
        if match:
            return match.group(1)
    return None


def _package_versions(wanted: List[Tuple[str, str]]) -> Dict[str, Optional[str]]:
    """{real path: Debian version of its package}, for (package, real path) pairs.

    A version is given only if the package really owns the file: a self-built
    copy in /usr/local may shadow the packaged one, and reporting the package
    version for it would be a lie. dpkg records files under their merged-/usr
    location, so the real path is what it knows. One `dpkg-query -S` for all
    paths and one `dpkg-query -W` for all owners (both exit 1 when any one is
    unknown, but still print the others).
    """
    owners_out = _run(["dpkg-query", "-S", *[real for _, real in wanted]], any_status=True)
    if not owners_out:
        return {}
    owner_of: Dict[str, str] = {}
    for line in owners_out.splitlines():
        if line.startswith("diversion") or ": /" not in line:
            continue
        names, path = line.split(": /", 1)
        path = "/" + path.strip()
        for package, real in wanted:
            if real != path:
                continue
            for owner in (n.strip() for n in names.split(",")):
                if owner.split(":")[0] == package:
                    owner_of[real] = owner
    if not owner_of:
        return {}
    status_out = _run(["dpkg-query", "-W", "-f", "${binary:Package}|${db:Status-Abbrev}|${Version}\n",
                       *sorted(set(owner_of.values()))], any_status=True) or ""
    installed: Dict[str, str] = {}
    for line in status_out.splitlines():
        parts = line.split("|")
        # "rc" (removed, config left) still has a version; only "ii" is installed.
        if len(parts) == 3 and parts[1].startswith("ii") and parts[2].strip():
            installed[parts[0]] = parts[2].strip()
            installed.setdefault(parts[0].split(":")[0], parts[2].strip())
    return {real: installed.get(owner) or installed.get(owner.split(":")[0])
            for real, owner in owner_of.items()}


# ---------------------------------------------------------------------------
# ELF checks: LD_PRELOAD ignores unusable files with just a stderr line, so catch them first.

def _shared_object_problem(path: str) -> Optional[str]:
    """Why `path` cannot be LD_PRELOADed here, or None if it can."""
    try:
        header = elf.read_header(path)
    except OSError as e:
        return f"{path} cannot be read ({e.strerror})"
    if header is None:
        return f"{path} is not an ELF file, so it cannot be a shared library"
    if header.elf_type != elf.ET_DYN:
        kind = {1: "an object file (.o)", 2: "an executable"}.get(header.elf_type, f"ELF type {header.elf_type}")
        return f"{path} is {kind}, not a shared library"
    try:
        if elf.is_pie_executable(path, header):
            return f"{path} is an executable (PIE), not a shared library"
    except (OSError, ValueError, struct.error):
        return f"{path} has a damaged ELF program header table"
    host = elf.host_header()
    if host is not None and (header.machine, header.bits, header.endian) != (host.machine, host.bits, host.endian):
        return (f"{path} is built for {header.abi} but programs here are {host.abi}; "
                f"LD_PRELOAD would ignore it")
    return None


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
                     version=version or _version_from_file_name(library),
                     package=None, install_hint=hint, builtin=False)


def _parse_env(text: str, where: str) -> Dict[str, str]:
    try:
        words = shlex.split(text)
    except ValueError as e:
        raise AllocatorError(f"env {where} cannot be parsed: {e}") from None
    env = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
            raise AllocatorError(f"env {where}: {word!r} is not KEY=VALUE")
        if key == "LD_PRELOAD":
            raise AllocatorError(f"env {where} must not set LD_PRELOAD; use 'library' instead")
        env[key] = value
    return env


_CONFIG_KEYS = {"library", "env", "version"}


def _load_config(path: str) -> Dict[str, Allocator]:
    # '%' is normal in env values; ';' and '#' after a value start a comment, as users expect.
    parser = configparser.ConfigParser(interpolation=None, inline_comment_prefixes=(";", "#"))
    try:
        with open(path, encoding="utf-8") as f:
            parser.read_file(f, source=path)
    except OSError as e:
        raise AllocatorError(f"allocator config {path} cannot be read ({e.strerror})") from None
    except configparser.Error as e:
        raise AllocatorError(f"allocator config {path} is not valid INI: {e}") from None
    base = os.path.dirname(os.path.abspath(path))
    allocators = {}
    for name in parser.sections():
        where = f"in [{name}] of {path}"
        _check_name(name, where)
        section = parser[name]
        unknown = set(section) - _CONFIG_KEYS
        if unknown:
            raise AllocatorError(f"unknown key(s) {', '.join(sorted(unknown))} {where}; "
                                 f"allowed: library, env, version")
        library = section.get("library", "").strip()
        if not library:
            raise AllocatorError(f"'library' is missing {where}")
        library = os.path.normpath(os.path.join(base, os.path.expanduser(library)))
        env = _parse_env(section.get("env", ""), where)
        version = section.get("version", "").strip() or None
        allocators[name] = _user_allocator(name, library, env, version, hint=f"fix 'library' {where}")
    return allocators


def default_config_paths() -> List[str]:
    """The config files read when no explicit path is given (only existing ones)."""
    explicit = os.environ.get("SCENC_ALLOCATORS")
    if explicit:
        return [explicit]  # the user asked for it: a missing file is an error later
    config_home = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    path = os.path.join(config_home, "scenc", "allocators.ini")
    return [path] if os.path.isfile(path) else []


def _configured(config_path: Optional[str]) -> Dict[str, Allocator]:
    paths = default_config_paths()
    if config_path is not None:
        paths.append(os.fspath(config_path))
    merged: Dict[str, Allocator] = {}
    for path in paths:
        merged.update(_load_config(path))
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
            return None if _glibc_version() is not None else (
                f"{allocator.name} needs glibc, but the C library here is not glibc")
        hint = f": {allocator.install_hint}" if allocator.install_hint else ""
        return f"{allocator.name} is not installed{hint}"
    if not os.path.exists(allocator.library):
        hint = f" ({allocator.install_hint})" if allocator.install_hint else ""
        return f"{allocator.name}: library {allocator.library} does not exist{hint}"
    if not os.path.isfile(allocator.library):
        return f"{allocator.name}: {allocator.library} is not a regular file"
    issue = _shared_object_problem(allocator.library)
    return f"{allocator.name}: {issue}" if issue else None


def resolve(spec: str, config_path: Optional[str] = None) -> List[Allocator]:
    """Turn "glibc,jemalloc,mine=/path/libmine.so" into usable allocators, or raise AllocatorError."""
    items = [item.strip() for item in (spec or "").split(",")]
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
    for item in items:
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
        else:
            raise AllocatorError(
                f"unknown allocator {name!r}; known: {', '.join(names_known)}. "
                f"To use your own library write {name}=/path/to/lib{name}.so")
        if any(a.name == allocator.name for a in chosen):
            raise AllocatorError(f"allocator {allocator.name!r} is listed twice in {spec!r}")
        issue = problem(allocator)
        if issue:
            raise AllocatorError(issue)
        chosen.append(allocator)
    return chosen


def format_table(allocators: List[Allocator]) -> str:
    """A plain-text table for `scenc allocators`."""
    header = ("name", "installed", "version", "library", "notes")
    rows = []
    for a in allocators:
        issue = problem(a)
        notes = [f"{k}={v}" for k, v in a.env.items()]
        if issue:
            notes.append(issue)
        rows.append((
            a.name,
            "yes" if issue is None else "no",
            a.version or "-",
            a.library or ("(system malloc, no preload)" if a.uses_system_malloc else "-"),
            "; ".join(notes),
        ))
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
             for row in [header] + rows]
    return "\n".join(lines)


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
