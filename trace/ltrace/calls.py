"""The allocator functions as ltrace prints them: a function token ('malloc', 'prog->malloc',
'malloc@libc.so.6', a mangled or demangled C++ operator) to its kind and argument layout, and the numbers
ltrace prints (arguments, return values)."""
from __future__ import annotations

import re
from typing import Optional


# Argument layouts (positions as ltrace prints them; extra printed args are ignored).
A_SIZE, A_OLD, A_NMEMB_SIZE, A_OLD_SIZE, A_OLD_NMEMB_SIZE, A_X_ALIGN_SIZE, A_ALIGN_SIZE, \
    A_SIZE_ALIGN, A_OLD_ALIGN, A_OLD_SIZE_ALIGN = range(10)

#: Traced function name -> (kind, argument layout).  C++ names are Itanium-mangled
#: (64-bit ``m`` = unsigned long and 32-bit ``j`` = unsigned int variants).
FUNCTIONS = {
    "malloc": ("malloc", A_SIZE),
    "calloc": ("calloc", A_NMEMB_SIZE),
    "realloc": ("realloc", A_OLD_SIZE),
    "reallocarray": ("reallocarray", A_OLD_NMEMB_SIZE),
    "free": ("free", A_OLD),
    "cfree": ("free", A_OLD),
    "posix_memalign": ("posix_memalign", A_X_ALIGN_SIZE),
    "aligned_alloc": ("aligned_alloc", A_ALIGN_SIZE),
    "memalign": ("memalign", A_ALIGN_SIZE),
    "valloc": ("valloc", A_SIZE),
    "pvalloc": ("pvalloc", A_SIZE),
}
for _w in "mj":
    for _new, _kind in (("_Znw", "operator_new"), ("_Zna", "operator_new_array")):
        FUNCTIONS[_new + _w] = (_kind, A_SIZE)
        FUNCTIONS[_new + _w + "RKSt9nothrow_t"] = (_kind, A_SIZE)
        FUNCTIONS[_new + _w + "St11align_val_t"] = (_kind, A_SIZE_ALIGN)
        FUNCTIONS[_new + _w + "St11align_val_tRKSt9nothrow_t"] = (_kind, A_SIZE_ALIGN)
for _del, _kind in (("_ZdlPv", "operator_delete"), ("_ZdaPv", "operator_delete_array")):
    FUNCTIONS[_del] = (_kind, A_OLD)
    FUNCTIONS[_del + "RKSt9nothrow_t"] = (_kind, A_OLD)
    FUNCTIONS[_del + "St11align_val_t"] = (_kind, A_OLD_ALIGN)
    FUNCTIONS[_del + "St11align_val_tRKSt9nothrow_t"] = (_kind, A_OLD_ALIGN)
    for _w in "mj":
        FUNCTIONS[_del + _w] = (_kind, A_OLD_SIZE)
        FUNCTIONS[_del + _w + "St11align_val_t"] = (_kind, A_OLD_SIZE_ALIGN)
del _w, _new, _del, _kind


_DEMANGLED = re.compile(r"operator (new|delete)(\[\])?\(([^()]*)\)")


def _demangled_spec(name: str):
    """(kind, layout) for a name demangled by ``ltrace -C``, e.g. 'operator new[](unsigned long)'."""
    m = _DEMANGLED.fullmatch(name)
    if m is None:
        return None
    op, arr, params = m.groups()
    kind = ("operator_new" if op == "new" else "operator_delete") + ("_array" if arr else "")
    params = [p.strip() for p in params.split(",") if p.strip() and "nothrow" not in p]
    has_size = any(p.startswith("unsigned") for p in params)
    has_align = any("align_val_t" in p for p in params)
    if op == "new":
        return kind, (A_SIZE_ALIGN if has_align else A_SIZE)
    if has_size:
        return kind, (A_OLD_SIZE_ALIGN if has_align else A_OLD_SIZE)
    return kind, (A_OLD_ALIGN if has_align else A_OLD)


# Function token classes.
_T_ALLOC, _T_LIBC_PLT, _T_OTHER, _T_ALLOC_ALIAS = 0, 1, 2, 3


_TOKEN = re.compile(r"\s*(?:[\w.+-]+->)?(?:[\w.]+|operator (?:new|delete)(?:\[\])?\([^()]*\))(?:@[\w.+-]+)?")


def _classify(token: str):
    """Function token as ltrace prints it -> (name, kind, layout, class, notation, memalign_alias), or
    None when ``token`` is not a function name.  notation: 1 'CALLER->NAME' (-e), 2 'NAME@LIB' (-x), 0 'NAME'.
    'prog->malloc' -> ('malloc', 'malloc', A_SIZE, _T_ALLOC, 1, False)."""
    if not _TOKEN.fullmatch(token):
        return None
    caller, arrow, name = token.strip().partition("->")
    if not arrow:
        caller, name = None, caller
    lib = None
    if "@" in name:
        name, _, lib = name.rpartition("@")
    notation = 2 if lib is not None else 1 if caller is not None else 0
    spec = FUNCTIONS.get(name) or _demangled_spec(name)
    if spec is None:
        return (name, None, None, _T_OTHER, notation, False)
    if caller is not None and caller.startswith("libc.so"):
        return (name, spec[0], spec[1], _T_LIBC_PLT, notation, False)
    alias = spec[0] == "memalign" and lib is not None and lib.startswith("libc.so")
    return (name, spec[0], spec[1], _T_ALLOC, notation, alias)


def _num(s: str) -> int:
    """An ltrace number: decimal, 0x-hex, 'nil'/'NULL' (0); negative values read as size_t."""
    s = s.strip()
    try:
        v = int(s, 0)
    except ValueError:
        if s in ("nil", "NULL", "(nil)"):
            return 0
        v = int(s, 10)  # leading zeros; raises ValueError on garbage
    return v + (1 << 64) if v < 0 else v


def _args(layout: int, args: str):
    """(size, nmemb, align, old_ptr) from the printed argument list; raises ValueError/IndexError."""
    a = args.split(",")
    if layout == A_SIZE:
        return _num(a[0]), 1, None, None
    if layout == A_OLD:
        return None, 1, None, _num(a[0])
    if layout == A_NMEMB_SIZE:
        return _num(a[1]), _num(a[0]), None, None
    if layout == A_OLD_SIZE:
        return _num(a[1]), 1, None, _num(a[0])
    if layout == A_OLD_NMEMB_SIZE:
        return _num(a[2]), _num(a[1]), None, _num(a[0])
    if layout == A_X_ALIGN_SIZE:
        return _num(a[2]), 1, _num(a[1]), None
    if layout == A_ALIGN_SIZE:
        return _num(a[1]), 1, _num(a[0]), None
    if layout == A_SIZE_ALIGN:
        return _num(a[0]), 1, _num(a[1]), None
    if layout == A_OLD_ALIGN:
        return None, 1, _num(a[1]), _num(a[0])
    return _num(a[1]), 1, _num(a[2]), _num(a[0])  # A_OLD_SIZE_ALIGN


def _ptr(ret: Optional[str]) -> Optional[int]:
    """A printed return value as a pointer (None when it is not a number, e.g. '<void>' or '')."""
    if not ret:
        return None
    try:
        return _num(ret)
    except ValueError:
        return None
