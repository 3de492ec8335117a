"""The parts a fitted model's plan is made of (trace/model/plan.py, trace/model/chains.py): a statement with
what one execution of it does (Stmt), a phase's objects by where they go (Flows), the per-thread counts of a
group's statements (Counts), and how an allocation is written.
"""

from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .shape import Group


@dataclass
class Stmt:
    """One statement of a phase, with what one execution of it does (the header's model column sums them)."""
    text: str
    per_thread: int = 0                        # the same count in every thread of the group ...
    share: Optional[Tuple[str, int]] = None    # ... or (variable, group total) split over the threads by `self`
    calls: Dict[str, int] = field(default_factory=dict)   # allocator calls per execution, runtime counter names
    lives: int = 0                             # objects it leaves to a `lives` free
    sent: int = 0                              # objects it hands to another thread
    local_frees: int = 0                       # objects of its own thread it frees (a realloc chain's end)
    draws: int = 0                             # sizes drawn from the phase's size histogram
    handed: bool = False                       # ... from the sizes of the objects handed over instead
    place: str = "loop"                        # 'pre' and 'post' run before and after the phase's rounds,
    #                                            'end' after the last barrier, once every thread is done
    lumped: bool = False                       # its share is all one thread's: a loop of its own
    kept: bool = False                         # its objects live to the end (`lives forever`): their own sizes
    mean: Optional[float] = None               # the mean of its sizes, when not the phase's
    at: Optional[float] = None                 # runs once, this far into the phase (0 .. 1): a big chain's step
    until: Optional[float] = None              # ... or spread evenly from `at` to this far (held objects)
    order: int = 0                             # ... its ordinal in the capture (steps in one round keep it)
    skip: int = 0                              # threads of the group whose `if self ...` guard skips it (a
    #                                            churning ring's last sender, its first receiver)
    maps: int = 0                              # mappings it makes (`map`: not allocator calls) ...
    mapped: float = 0.0                        # ... of this mean size

    def max_count(self, threads: int) -> int:
        return self.per_thread if self.share is None else self.share[1] if self.lumped \
            else -(-self.share[1] // threads)

    def total(self, threads: int) -> int:
        return self.per_thread * (threads - self.skip) if self.share is None else self.share[1]


@dataclass
class Flows:
    """A phase's objects by where they go: counts per kind (and partner)."""
    local: Counter = field(default_factory=Counter)     # kind -> freed by their own thread (`lives`)
    sends: Counter = field(default_factory=Counter)     # (kind, group) -> sent over a channel
    ring: Counter = field(default_factory=Counter)      # kind -> handed around the group's ring
    recvs: Counter = field(default_factory=Counter)     # group -> received from it and freed
    ends: Counter = field(default_factory=Counter)      # 'local', 'ring' or group -> realloc chains ended so
    kept: Counter = field(default_factory=Counter)      # kind -> still live at the end


class Counts:
    """Per-thread counts of one group's statements in one phase, and the variables that split a total
    over the threads by `self`."""

    def __init__(self, g: Group, pi: int):
        self.g, self.n, self.pi = g, g.n, pi
        self.variables: List[str] = []

    def per(self, total) -> dict:
        return dict(per_thread=int(round(total / self.n)))

    def exact(self, total: int, var: str, member_counts=None) -> dict:
        """total over the threads: evenly, or all by the first (last) thread when the capture's first (last)
        thread of the group made them all (a churning group's first thread takes what came before it)."""
        n = self.n
        if member_counts and n > 1 and sum(member_counts) == total:
            if member_counts[0] == total:
                self.variables.append(f"{var} = {total} * (1 / (self + 1))      # thread 0 only, as captured")
                return dict(share=(var, total), lumped=True)
            if member_counts[-1] == total:
                self.variables.append(f"{var} = {total} * ((self + 1) / {n})      # the last thread only, as captured")
                return dict(share=(var, total), lumped=True)
        if total % n == 0:
            return dict(per_thread=total // n)
        self.variables.append(f"{var} = (self + 1) * {total} / {n} - self * {total} / {n}")
        return dict(share=(var, total))

    def members(self, match) -> list:
        """Per thread of the group, its counts in the phase under the keys that match."""
        return [sum(v for k, v in m.phases[self.pi - 1].c.items() if isinstance(k, tuple) and match(k))
                for m in self.g.summaries]


def alloc_text(mk, size_expr: str) -> str:
    kind, align = mk
    if kind == "malloc":
        return f"malloc({size_expr})"
    if kind == "calloc":
        return f"calloc(1, {size_expr})"
    if kind == "realloc":           # realloc(NULL, n): none[0] stays empty (collect.REALLOC_START)
        return f"realloc(none[0], {size_expr})"
    return f"{kind}({align or 16}, {size_expr})"


def mk_key(mk):
    """The order of allocation kinds in the text: malloc, calloc, then the aligned ones by alignment."""
    order = ("malloc", "calloc", "aligned_alloc", "memalign", "posix_memalign")
    return (order.index(mk[0]) if mk[0] in order else 9, mk[1] or 0)


def split(total: int, weights) -> Counter:
    """total split in proportion to [(key, weight)], largest remainders first; the parts add up to total."""
    whole = sum(w for _, w in weights)
    shares = [(key, total * w / whole) for key, w in weights]
    parts = Counter({key: int(x) for key, x in shares})
    left = total - sum(parts.values())
    for key, x in sorted(shares, key=lambda kx: -(kx[1] - int(kx[1])))[:left]:
        parts[key] += 1
    return parts
