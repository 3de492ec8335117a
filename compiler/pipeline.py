"""The whole front-to-back path: scenario file -> checked model -> C -> program."""

import dataclasses
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Mapping, Optional, Sequence

from ..scenario.errors import Diagnostic, ScenarioError
from . import build as builder

# The front end (lark), the checks and the code generator (jinja2) are imported
# where they are used: a build found in the cache needs none of them, and they
# are most of a cached `scenc run`'s start-up.

ALLOW_HUGE_HINT = ("forced with --allow-huge: the program runs under a memory limit "
                   "(--memory-limit) and a run that reaches it is recorded as out of memory")


@dataclass
class Loaded:
    resolved: "Resolved"  # noqa: F821 (scenario.resolve, imported lazily)
    warnings: List[Diagnostic] = field(default_factory=list)


def load(path, params: Optional[Mapping[str, object]] = None, source: Optional[str] = None,
         allow_huge: bool = False) -> Loaded:
    """Parse, resolve and check; raises ScenarioError listing every error.

    With `allow_huge`, a scenario whose peak cannot fit in this machine's
    memory (scenario/peak.py) is a warning instead of an error: the caller
    takes it upon itself to hold the program to a memory limit.
    """
    from ..scenario import checks, peak
    from ..scenario.parser import parse, parse_file
    from ..scenario.resolve import resolve
    scenario = parse(source, str(path)) if source is not None else parse_file(path)
    resolved = resolve(scenario, params or {})
    found = checks.check(resolved)
    if allow_huge:
        found = [dataclasses.replace(d, severity="warning", hint=ALLOW_HUGE_HINT)
                 if peak.is_machine_too_small(d) else d for d in found]
    errors = [d for d in found if d.severity == "error"]
    if errors:
        raise ScenarioError(errors, scenario.source)
    return Loaded(resolved, [d for d in found if d.severity == "warning"])


def emit(path, params=None, probes: Sequence["ProbeC"] = ()) -> str:  # noqa: F821
    from .codegen import render
    from .lower import lower
    loaded = load(path, params)
    return render(lower(loaded.resolved, Path(path).resolve().parent, _probes_read_sizes(probes)), probes)


def build(path, params: Optional[Mapping[str, object]] = None, cc: str = "gcc",
          probes: Sequence["ProbeC"] = (), extra_flags: Sequence[str] = (),  # noqa: F821
          warn=None, allow_huge: bool = False, knobs: Optional[Sequence[str]] = None,
          loaded: Optional[Loaded] = None) -> builder.Build:
    """The program for a scenario, from the cache when nothing it depends on changed.

    knobs (None: none): the program takes `seed=N`, `work=0` and these params as `NAME=N` on its command
    line, so that one build serves runs that differ only in them (convert --model's; lower.py, CProgram).
    loaded: what load() gave for this file without params (convert --model's check of its model), used when
    the file still holds that source, instead of parsing and checking it again."""
    path = Path(path)
    try:
        source = path.read_bytes().decode("utf-8")  # as parse_file reads it, whatever the locale
    except (OSError, UnicodeDecodeError):
        source = None  # parse_file gives the positioned message
    params = dict(params or {})
    # A forced build gets a key of its own, so that it never lets a later
    # build without --allow-huge skip the check through the cache.
    key_flags = tuple(extra_flags) + (("--allow-huge",) if allow_huge else ()) + \
        (() if knobs is None else ("--knobs=" + ",".join(sorted(knobs)),))
    if source is not None:
        key = builder.scenario_key(source, path.resolve().parent, params, cc, key_flags,
                                   [p.name for p in probes], path.name)
        hit = builder.cached_build(key)
        if hit is not None:
            return hit
    from .codegen import render
    from .lower import lower
    scenario = loaded.resolved.scenario if loaded is not None else None
    if scenario is None or params or allow_huge or (scenario.source, scenario.filename) != (source, str(path)):
        loaded = load(path, params, allow_huge=allow_huge)
    if source is None:  # the file changed between the two reads
        key = builder.scenario_key(loaded.resolved.scenario.source, path.resolve().parent, params, cc,
                                   key_flags, [p.name for p in probes], path.name)
    if warn is not None:
        for w in loaded.warnings:
            warn(w.render(loaded.resolved.scenario.source))
    c_text = render(lower(loaded.resolved, path.resolve().parent, _probes_read_sizes(probes), knobs), probes)
    return builder.compile_program(c_text, key, cc, extra_flags)


def _probes_read_sizes(probes: Sequence["ProbeC"]) -> bool:  # noqa: F821
    return any(p.reads_sizes for p in probes)


def print_warnings(loaded: Loaded, out=sys.stderr) -> None:
    for w in loaded.warnings:
        print(w.render(loaded.resolved.scenario.source), file=out)
