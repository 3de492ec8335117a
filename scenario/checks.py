"""Semantic checks on a resolved scenario: everything the resolver cannot see from names alone.

Each family lives in a module of its own; this one runs them and orders what
they found by position:

- flow.py: pointer states per thread (use after free, double free, use of a
  moved pointer, use before assignment) and leaks at the end of a thread;
- channels.py: sends and receives that cannot match (a receiver waiting
  forever, a sender blocked forever, objects left in a channel);
- sizes.py: numbers that make no sense (negative or absurd sizes, empty
  ranges, bad alignments, broken distributions, missing histogram files);
- peak.py: the peak live memory, bounded from below and above, against the
  machine's memory;
- regions.py: `measure` regions entered so often, around so little, that
  their own clock reads are a share of what they measure.
"""

from typing import List, Tuple

from . import channels, flow, peak, regions, sizes
from .errors import Diagnostic, Reporter
from .resolve import Resolved

__all__ = ["check", "estimate_peak"]

estimate_peak = peak.estimate_peak


def check(resolved: Resolved) -> List[Diagnostic]:
    """Every error and warning about a resolved scenario, positioned, in source order."""
    s = resolved.scenario
    rep = Reporter(s.filename, s.source)
    leak_facts = flow.analyze(resolved, rep)
    errors_before = len(rep.errors)
    sizes.check(resolved, rep)
    sizes_wrong = len(rep.errors) > errors_before
    channels.check(resolved, rep)
    regions.check(resolved, rep)
    if not sizes_wrong:  # a peak from negative or absurd sizes would only repeat those errors
        peak.check(resolved, rep, leak_facts)
    found = list(resolved.warnings) + rep.diagnostics
    return sorted(_unique(found), key=_order)


def _unique(diagnostics: List[Diagnostic]) -> List[Diagnostic]:
    seen, out = set(), []
    for d in diagnostics:
        key = (d.severity, d.pos, d.message)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def _order(d: Diagnostic) -> Tuple[int, int]:
    # Diagnostics without a line (about the whole scenario) come last.
    return (d.pos.line or 1 << 30, d.pos.col)
