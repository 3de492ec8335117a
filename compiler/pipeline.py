"""The whole front-to-back path: scenario file -> checked model -> C -> program."""

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Mapping, Optional, Sequence

from ..scenario import checks
from ..scenario.errors import Diagnostic, ScenarioError
from ..scenario.parser import parse, parse_file
from ..scenario.resolve import Resolved, resolve
from . import build as builder
from .codegen import ProbeC, render
from .lower import lower


@dataclass
class Loaded:
    resolved: Resolved
    warnings: List[Diagnostic] = field(default_factory=list)


def load(path, params: Optional[Mapping[str, object]] = None, source: Optional[str] = None) -> Loaded:
    """Parse, resolve and check; raises ScenarioError listing every error."""
    scenario = parse(source, str(path)) if source is not None else parse_file(path)
    resolved = resolve(scenario, params or {})
    found = checks.check(resolved)
    errors = [d for d in found if d.severity == "error"]
    if errors:
        raise ScenarioError(errors, scenario.source)
    return Loaded(resolved, [d for d in found if d.severity == "warning"])


def emit(path, params=None, probes: Sequence[ProbeC] = ()) -> str:
    loaded = load(path, params)
    return render(lower(loaded.resolved, Path(path).resolve().parent), probes)


def build(path, params: Optional[Mapping[str, object]] = None, cc: str = "gcc",
          probes: Sequence[ProbeC] = (), extra_flags: Sequence[str] = (),
          warn=None) -> builder.Build:
    """The program for a scenario, from the cache when nothing it depends on changed."""
    path = Path(path)
    try:
        source = path.read_bytes().decode("utf-8")  # as parse_file reads it, whatever the locale
    except (OSError, UnicodeDecodeError):
        source = None  # parse_file gives the positioned message
    params = dict(params or {})
    if source is not None:
        key = builder.scenario_key(source, path.resolve().parent, params, cc, extra_flags,
                                   [p.name for p in probes])
        hit = builder.cached_build(key)
        if hit is not None:
            return hit
    loaded = load(path, params)
    if source is None:  # the file changed between the two reads
        key = builder.scenario_key(loaded.resolved.scenario.source, path.resolve().parent, params, cc,
                                   extra_flags, [p.name for p in probes])
    if warn is not None:
        for w in loaded.warnings:
            warn(w.render(loaded.resolved.scenario.source))
    c_text = render(lower(loaded.resolved, path.resolve().parent), probes)
    return builder.compile_program(c_text, key, cc, extra_flags)


def print_warnings(loaded: Loaded, out=sys.stderr) -> None:
    for w in loaded.warnings:
        print(w.render(loaded.resolved.scenario.source), file=out)
