"""Option variants of an allocator, on the command line: `--allocators 'jemalloc,jemalloc[narenas:1]'`.

    split_spec("glibc,jemalloc[narenas:1,tcache:false]")  # -> ["glibc", "jemalloc[narenas:1,tcache:false]"]
    parse_item("jemalloc[narenas:1]")                     # -> ("jemalloc", [Option("narenas", ":", "1")])
    variant(jemalloc, options)                            # -> Allocator "jemalloc[narenas:1]", MALLOC_CONF=narenas:1

An option is `name=value` or `name:value`. A lowercase name is one of the allocator's own options, put into
the variable the allocator reads (`SCHEMES`); a name in capitals is an environment variable, set as it is
(`mine[MY_ALLOC_ARENAS=2]`: for any allocator, your own too). The variant is named by its base and its
options as given, so every table, verdict, CSV row and plot says which settings ran; its environment is
kept in the result file with the allocator. A lowercase name the library does not hold among its own
strings is refused: a misspelt option must fail, not leave the allocator silently unconfigured (jemalloc
warns on stderr and goes on; mimalloc and tcmalloc say nothing).
"""

import os
import re
import sys
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

__all__ = ["Option", "Scheme", "SCHEMES", "VariantError", "split_spec", "parse_item", "variant_env", "describe"]


class VariantError(ValueError):
    """An option variant that cannot be made; the message is a sentence for the user."""


@dataclass(frozen=True)
class Option:
    name: str
    sep: str          # ":" or "=", as given
    value: str

    @property
    def text(self) -> str:
        return f"{self.name}{self.sep}{self.value}"

    @property
    def is_variable(self) -> bool:
        """A name in capitals: an environment variable, set as it is."""
        return re.fullmatch(r"[A-Z_][A-Z0-9_]*", self.name) is not None


@dataclass(frozen=True)
class Scheme:
    """How an allocator reads its options: one variable holding them all (`joined`: MALLOC_CONF, GLIBC_TUNABLES),
    or a variable per option (`PREFIX + NAME`)."""
    variable: str                               # the variable, or the prefix of one per option
    item: Callable[[str, str], str]             # (name, value) -> what goes into the variable
    joined: Optional[str] = None                # the separator of a variable holding them all
    marker: Callable[[str], bytes] = lambda name: name.encode() + b"\0"   # what the library holds for a name
    forbidden: str = ""                         # characters a value cannot hold in that variable
    manual: str = ""

    def env(self, options: List[Option]) -> Dict[str, str]:
        if self.joined is not None:
            return {self.variable: self.joined.join(self.item(o.name, o.value) for o in options)}
        return {self.variable + o.name.upper(): o.value for o in options}


def _tunable(name: str) -> str:
    return name if "." in name else f"glibc.malloc.{name}"


_GLIBC = Scheme("GLIBC_TUNABLES", lambda n, v: f"{_tunable(n)}={v}", joined=":",
                marker=lambda n: _tunable(n).encode() + b"\0", forbidden=":=",
                manual="glibc's tunables: `ld.so --list-tunables`; a bare name is glibc.malloc.NAME")
_TCMALLOC = Scheme("TCMALLOC_", lambda n, v: v, marker=lambda n: b"TCMALLOC_" + n.upper().encode() + b"\0",
                   manual="gperftools' TCMALLOC_* variables (docs/tcmalloc.html)")

#: The allocators whose own options a lowercase name means, by built-in name.
SCHEMES: Dict[str, Scheme] = {
    "glibc": _GLIBC,
    "glibc-notc": _GLIBC,
    "jemalloc": Scheme("MALLOC_CONF", lambda n, v: f"{n}:{v}", joined=",",
                       marker=lambda n: b"opt." + n.encode() + b"\0", forbidden=",:",
                       manual="jemalloc's MALLOC_CONF options: `man jemalloc`, the opt.* entries"),
    "mimalloc": Scheme("MIMALLOC_", lambda n, v: v,
                       manual="mimalloc's MIMALLOC_* options (its README, 'Environment Options')"),
    "tcmalloc": _TCMALLOC,
    "tcmalloc-full": _TCMALLOC,
    "tbbmalloc": Scheme("TBB_MALLOC_", lambda n, v: v, marker=lambda n: b"TBB_MALLOC_" + n.upper().encode(),
                        manual="oneTBB's TBB_MALLOC_USE_HUGE_PAGES and TBB_MALLOC_SET_HUGE_SIZE_THRESHOLD"),
}


def split_spec(spec: str) -> List[str]:
    """`--allocators` split at the commas outside brackets."""
    items, depth, current = [], 0, []
    for ch in spec or "":
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise VariantError(f"a ']' without its '[' in {spec!r}")
        if ch == "," and depth == 0:
            items.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    if depth:
        raise VariantError(f"a '[' without its ']' in {spec!r}: write NAME[option=value,...]")
    items.append("".join(current).strip())
    return items


def parse_item(item: str) -> Tuple[str, Optional[List[Option]]]:
    """("jemalloc", [options]) for "jemalloc[narenas:1]"; (item, None) for an item without brackets."""
    if not item.endswith("]") or "[" not in item:
        if "[" in item or "]" in item:
            raise VariantError(f"{item!r}: the options go last, in brackets: NAME[option=value,...]")
        return item, None
    base, _, inside = item[:-1].partition("[")
    base = base.strip()
    if not base:
        raise VariantError(f"{item!r} names no allocator before its options")
    options = []
    for text in (t.strip() for t in inside.split(",")):
        if not text:
            raise VariantError(f"{item!r}: an empty option (give option=value, separated by commas)")
        cut = min((i for i in (text.find("="), text.find(":")) if i >= 0), default=-1)
        if cut <= 0 or cut == len(text) - 1:
            raise VariantError(f"{item!r}: {text!r} is not option=value (or option:value)")
        name, sep, value = text[:cut].strip(), text[cut], text[cut + 1:].strip()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name):
            raise VariantError(f"{item!r}: {name!r} is not an option name")
        options.append(Option(name, sep, value))
    names = [o.name for o in options]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise VariantError(f"{item!r} sets {', '.join(twice)} twice")
    return base, options


def _ld_so() -> Optional[str]:
    from ..system import elf
    try:
        return elf.inspect(os.path.realpath(sys.executable)).interpreter
    except (OSError, ValueError):
        return None


def _library_files(name: str, library: Optional[str]) -> List[str]:
    """The files an allocator's option names are looked for in: its library (and, for tbbmalloc's proxy, the
    allocator beside it), or the dynamic loader for glibc's tunables."""
    if library is None:
        found = _ld_so()
        return [found] if found else []
    files = [library]
    if name == "tbbmalloc":
        beside = os.path.join(os.path.dirname(os.path.realpath(library)), "libtbbmalloc.so.2")
        files.append(beside)
    return files


def _holds(files: List[str], marker: bytes) -> Optional[bool]:
    """Does any of the files hold `marker`? None when none can be read."""
    read = False
    for path in files:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue
        read = True
        if marker in data:
            return True
    return False if read else None


def variant_env(base_name: str, library: Optional[str], base_env: Dict[str, str],
                options: List[Option]) -> Dict[str, str]:
    """The variant's environment: the base's, with the options in the allocator's own variables."""
    scheme = SCHEMES.get(base_name)
    own = [o for o in options if not o.is_variable]
    if own and scheme is None:
        raise VariantError(
            f"{base_name}[{own[0].text}]: scenc knows no option names for {base_name}; give the environment "
            f"variable the library reads, in capitals ({base_name}[MY_VARIABLE={own[0].value}])")
    env = dict(base_env)

    def put(key: str, value: str, joiner: Optional[str]) -> None:
        if key == "LD_PRELOAD":
            raise VariantError(f"{base_name}[LD_PRELOAD=...]: scenc sets LD_PRELOAD; name a library with "
                               f"NAME=/path/lib.so instead")
        env[key] = f"{env[key]}{joiner}{value}" if joiner and env.get(key) else value

    if own:
        files = _library_files(base_name, library)
        for o in own:
            bad = [ch for ch in scheme.forbidden if ch in o.value]
            if bad or not o.value:
                raise VariantError(f"{base_name}[{o.text}]: {scheme.variable} cannot hold a value "
                                   + (f"with {bad[0]!r} in it" if bad else "that is empty"))
            if _holds(files, scheme.marker(o.name)) is False:
                raise VariantError(
                    f"{base_name} has no option {o.name!r}: {', '.join(files)} does not know it (a misspelling?); "
                    f"the options are {scheme.manual}")
        for key, value in scheme.env(own).items():
            put(key, value, scheme.joined)
    for o in options:
        if o.is_variable:
            joiner = {"GLIBC_TUNABLES": ":", "MALLOC_CONF": ","}.get(o.name)
            put(o.name, o.value, joiner)
    return env


def describe(options: List[Option]) -> str:
    """The options as a variant's name holds them: "narenas:1,tcache:false"."""
    return ",".join(o.text for o in options)
