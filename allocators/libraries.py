"""Finding allocator libraries on this machine: where a soname is, which package version it is, can it be preloaded.

The registry (allocators/registry.py) asks for its built-ins' libraries here, all at
once, through `LookupCache`; `preload_problem` says why a file cannot be
LD_PRELOADed (system/elf.py reads it).
"""

import functools
import glob
import json
import os
import re
import struct
import subprocess
import tempfile
from typing import Dict, List, Optional, Tuple

from ..system import elf


def glibc_version() -> Optional[str]:
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


class LookupCache:
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
            if path is None or (os.path.isfile(path) and preload_problem(path) is None):
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
    return os.path.isfile(path) and preload_problem(path) is None


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


def version_from_file_name(library: Optional[str]) -> Optional[str]:
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

def preload_problem(path: str) -> Optional[str]:
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
