"""What each function name of the language means: its arity, argument kinds, result.

One table, read by the resolver (to type-check calls) and by the compiler (to
emit them), so the two cannot disagree about a builtin.
"""

from dataclasses import dataclass
from typing import Tuple


@dataclass(frozen=True)
class Builtin:
    name: str
    role: str            # "alloc" (returns a pointer), "action" (a statement), "dist" (an integer draw)
    args: Tuple[str, ...]  # kinds: "int", "ptr", "map" (a mapping), "obj" (a pointer or a mapping), "pool",
                           # "chan", "str", "num" (int or float), "int*" (one or more), "shared" (a slot of a shared pool)
    result: str          # "ptr", "map", "int" or "none"
    kwargs: Tuple[str, ...] = ()  # names, for builtins that take keyword arguments only
    options: Tuple[str, ...] = ()  # optional integer keyword arguments after the positional ones
    const_args: bool = False      # arguments must be known when compiling (tables are built then)


BUILTINS = {b.name: b for b in [
    # allocator calls
    Builtin("malloc", "alloc", ("int",), "ptr"),
    Builtin("calloc", "alloc", ("int", "int"), "ptr"),
    Builtin("realloc", "alloc", ("ptr", "int"), "ptr"),
    Builtin("aligned_alloc", "alloc", ("int", "int"), "ptr"),
    Builtin("memalign", "alloc", ("int", "int"), "ptr"),
    Builtin("posix_memalign", "alloc", ("int", "int"), "ptr"),
    Builtin("recv", "alloc", ("chan",), "ptr"),
    # swap(shared[i], p): p's object into the slot, the slot's (maybe none) out
    Builtin("swap", "alloc", ("shared", "ptr"), "ptr"),
    # the program's own memory: an anonymous mapping, mmap'ed directly (never through malloc)
    Builtin("map", "alloc", ("int",), "map", options=("percent_written",)),
    # statements
    Builtin("free", "action", ("ptr",), "none"),
    Builtin("free_all", "action", ("pool",), "none"),
    Builtin("send", "action", ("chan", "ptr"), "none"),
    Builtin("unmap", "action", ("map",), "none"),
    Builtin("write", "action", ("obj", "int"), "none", options=("bytes",)),
    Builtin("touch", "action", ("obj",), "none"),
    # the program's own CPU time between calls: n units of work on registers, no memory (runtime/ops.h scn_work)
    Builtin("work", "action", ("int",), "none"),
    # integer draws from the thread's random stream
    Builtin("random", "dist", ("int",), "int"),
    Builtin("uniform", "dist", ("int", "int"), "int"),
    Builtin("pow2", "dist", ("int", "int"), "int"),
    Builtin("choice", "dist", ("int*",), "int", const_args=True),
    Builtin("lognormal", "dist", (), "int", kwargs=("median", "sigma"), const_args=True),
    Builtin("geometric", "dist", (), "int", kwargs=("mean",), const_args=True),
    Builtin("histogram", "dist", ("str",), "int", const_args=True),
]}

# Builtins that hand memory to the allocator or take it back, in the order the
# runtime counts them (runtime/scn.h `enum scn_op` follows this order).
ALLOCATOR_OPS = ("malloc", "calloc", "realloc", "aligned_alloc", "memalign",
                 "posix_memalign", "free")

# `weighted { size: weight, ... }` is syntax of its own but a table draw like these.
TABLE_DISTS = ("choice", "lognormal", "geometric", "histogram", "weighted")
