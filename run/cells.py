"""Cells: the unit a plan is split into for shards, and which machine ran each.

A cell is one param set x one probe set with every allocator of the plan:
everything a comparison between allocators needs. `scenc run --shard K/N`
(run/shard.py) runs whole cells only, so every comparison stays inside one
machine's runs; `scenc merge` (run/merge.py) puts the shards' files back
together and records which machine ran each cell, which the analysis and
the plots read back here (`machine_of_cells`).

This module imports only run/plan.py: the run path, the merge and the reports
all read it.
"""

import hashlib
import json
import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from .plan import DEFAULT_PROBE_SET, params_label

# What tells two machines apart: the figures of one are not comparable with
# the other's. The hostname is in: two nodes of a cluster are two machines.
MACHINE_IDENTITY_KEYS = ("hostname", "cpu_model", "logical_cpus", "usable_cpus", "mem_total_kib", "arch",
                         "kernel", "libc_version", "compiler", "transparent_hugepage", "cpu_governor")


def cell_key(params: Mapping, probe_set: str = DEFAULT_PROBE_SET) -> str:
    """One string per cell, the same wherever it is computed."""
    return json.dumps([dict(params), probe_set], sort_keys=True)


def cell_label(key: str) -> str:
    params, probe_set = json.loads(key)
    return params_label(params) + (f" [{probe_set}]" if probe_set != DEFAULT_PROBE_SET else "")


def plan_cells(plan_json: Mapping) -> List[str]:
    """The cells of a plan (as saved in a header), in plan order."""
    keys: List[str] = []
    for config in plan_json.get("configs", []):
        key = cell_key(config["params"], config.get("probe_set", DEFAULT_PROBE_SET))
        if key not in keys:
            keys.append(key)
    return keys


def plan_digest(plan_json: Mapping) -> str:
    """sha256 of a plan's saved form: two shards of one plan have the same."""
    return hashlib.sha256(json.dumps(plan_json, sort_keys=True).encode("utf-8")).hexdigest()


def parse_shard(text: str) -> Tuple[int, int]:
    """"2/5" -> (2, 5); K counts from 1. ValueError with a sentence otherwise."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not match:
        raise ValueError(f"--shard {text!r}: give K/N, the K-th of N parts (like 2/5)")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or not 1 <= index <= count:
        raise ValueError(f"--shard {text!r}: K must be between 1 and N (shards count from 1)")
    return index, count


def deal(weights: Sequence[float], count: int) -> List[List[int]]:
    """Indices of `weights` dealt into `count` hands of about equal total weight.

    Longest first, each to the lightest hand so far (ties: the lower hand,
    then plan order), so the dealing depends on the weights alone: every
    shard computes it and gets the same answer. A hand's indices are in
    plan order.
    """
    hands: List[List[int]] = [[] for _ in range(count)]
    totals = [0.0] * count
    for i in sorted(range(len(weights)), key=lambda i: (-weights[i], i)):
        lightest = min(range(count), key=lambda h: (totals[h], h))
        hands[lightest].append(i)
        totals[lightest] += weights[i]
    return [sorted(hand) for hand in hands]


def machine_identity(machine: Mapping) -> str:
    return json.dumps({k: machine.get(k) for k in MACHINE_IDENTITY_KEYS}, sort_keys=True)


def machine_name(machine: Mapping) -> str:
    return str(machine.get("hostname") or machine.get("cpu_model") or "unknown machine")


def machines(header: Mapping) -> Dict[str, Mapping]:
    """Machine id -> its description, for a merged file of several machines; {} otherwise."""
    found = header.get("machines")
    return dict(found) if isinstance(found, Mapping) and len(found) > 1 else {}


def machine_of_cells(header: Mapping) -> Dict[str, str]:
    """cell_key -> machine id, for a merged file of several machines; {} otherwise."""
    if not machines(header):
        return {}
    return {cell_key(b["params"], b.get("probe_set", DEFAULT_PROBE_SET)): b["machine"]
            for b in header.get("block_machines", [])}


def machine_of(header: Mapping, params: Mapping, probe_set: str) -> Optional[str]:
    return machine_of_cells(header).get(cell_key(params, probe_set))
