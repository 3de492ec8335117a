"""One run of a scenario with a probe set, outside the harness: for tests,
benchmarks of the probes themselves, and quick looks."""

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from . import c_parts, environment, run_metrics, set_name, set_members


@dataclass
class SingleRun:
    report: dict
    metrics: dict
    run_dir: Path


def build_for(scenario, params: Optional[Mapping] = None, probe_set: str = "", cc: str = "gcc"):
    from ..compiler.pipeline import build
    return build(scenario, params or {}, cc=cc, probes=c_parts(probe_set))


def run_once(scenario, run_dir, params: Optional[Mapping] = None, probes=("time", "memory"),
             allocator: str = "glibc", cc: str = "gcc", env: Optional[Mapping[str, str]] = None,
             timeout: float = 120) -> SingleRun:
    """Build (cached) and run once under `allocator` (a name `scenc allocators` knows);
    raises RuntimeError with the program's stderr if it fails."""
    from ..allocators import registry as allocators
    probe_set = set_name(probes) if not isinstance(probes, str) else "+".join(set_members(probes))
    binary = build_for(scenario, params, probe_set, cc).binary
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (chosen,) = allocators.resolve(allocator)
    full_env = chosen.preload_env(dict(os.environ, **(env or {}), **environment(probe_set, run_dir)))
    proc = subprocess.run([str(binary)], env=full_env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{scenario} [{probe_set}] under {allocator} failed "
                           f"(exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    report = json.loads(proc.stdout)
    return SingleRun(report, run_metrics(probe_set, report, run_dir), run_dir)
