"""`scenc merge A.json B.json ... -o all.json`: the shards of one plan, put back together.

The parts must be shards (`scenc run --shard K/N`) of the same scenario
source and the same plan (its digest is in each shard's header). The merge
says plainly what is wrong -- a file of another plan, a shard given twice,
a cell run twice, shards or cells missing, a shard not finished -- and
writes nothing then (missing cells are allowed with --allow-missing).

The merged file is an ordinary result file: the whole plan in "plan", every
run record as its shard saved it (a kept run directory is made relative to
the new file). Which machine ran which cell is in "machines" (id ->
description) and "block_machines"; the analysis reads them back through
run/cells.py and keeps every figure that would compare cells of two machines
behind --across-machines.
"""

import json
import os
from pathlib import Path
from typing import Dict, List, Mapping, Sequence, Tuple

from . import cells
from ..errors import UsageError
from .plan import Plan
from .record import RunRecord, moved

# Header keys that must be equal in every part: the same scenario, params and plan.
_SAME = (("source_sha256", "the scenario source"), ("params", "the params"), ("seed", "the scenario seed"),
         ("allocators", "the allocators"))


class MergeError(UsageError):
    """Parts that do not make one plan; the message lists every problem."""


def _load(paths: Sequence[str]):
    from .resultfile import load_all
    parts, problems = load_all(paths)
    if problems:
        raise MergeError("\nscenc: ".join(problems))
    return parts


def _same_plan_problems(parts) -> List[str]:
    problems = [f"{p.path} is not a shard (it was run without --shard): nothing to merge it with"
                for p in parts if not isinstance(p.header.get("shard"), Mapping)]
    if problems:
        return problems
    first = parts[0]
    for part in parts[1:]:
        differences = [what for key, what in _SAME if part.header.get(key) != first.header.get(key)]
        if part.header["shard"]["plan_sha256"] != first.header["shard"]["plan_sha256"]:
            differences.append("the plan (runs, warm-ups, seed of the order, probe sets ...)")
        if part.header["shard"]["count"] != first.header["shard"]["count"]:
            differences.append(f"the number of shards ({part.header['shard']['count']} against "
                               f"{first.header['shard']['count']})")
        if differences:
            problems.append(f"{part.path} is a shard of another plan than {first.path}: "
                            f"{', '.join(differences)} differ")
    return problems


def _coverage_problems(parts) -> Tuple[List[str], List[str]]:
    """(duplicates, missing): sentences about shards and cells."""
    count = parts[0].header["shard"]["count"]
    all_cells = cells.plan_cells(parts[0].header["shard"]["plan"])
    by_index: Dict[int, List[str]] = {}
    by_cell: Dict[str, Dict[int, str]] = {}  # cell -> shard index -> a file that ran it
    for part in parts:
        shard = part.header["shard"]
        by_index.setdefault(shard["index"], []).append(part.path)
        for key in shard["blocks"]:
            by_cell.setdefault(key, {}).setdefault(shard["index"], part.path)
    duplicates = [f"shard {i}/{count} is given twice: {', '.join(paths)}"
                  for i, paths in sorted(by_index.items()) if len(paths) > 1]
    # Shards that dealt differently (their weights differed) both ran some cells.
    duplicates += [f"cell {cells.cell_label(k)} was run by shards "
                   f"{' and '.join(f'{i}/{count} ({path})' for i, path in sorted(where.items()))}"
                   for k, where in by_cell.items() if len(where) > 1]
    missing_shards = [i for i in range(1, count + 1) if i not in by_index]
    missing_cells = [k for k in all_cells if k not in by_cell]
    missing = []
    if missing_shards:
        missing.append(f"shard{'s' * (len(missing_shards) > 1)} {', '.join(f'{i}/{count}' for i in missing_shards)} "
                       f"missing")
    if missing_cells:
        shown = "; ".join(cells.cell_label(k) for k in missing_cells[:5])
        more = f" and {len(missing_cells) - 5} more" if len(missing_cells) > 5 else ""
        missing.append(f"{len(missing_cells)} of {len(all_cells)} cells missing: {shown}{more}")
    return duplicates, missing


def _machines(parts) -> Tuple[Dict[str, Mapping], List[str]]:
    """(machine id -> description, each part's machine id), ids m1, m2 ... in shard order."""
    ids: Dict[str, str] = {}
    found: Dict[str, Mapping] = {}
    of_part = []
    for part in parts:
        identity = cells.machine_identity(part.header["machine"])
        if identity not in ids:
            ids[identity] = f"m{len(ids) + 1}"
            found[ids[identity]] = part.header["machine"]
        of_part.append(ids[identity])
    return found, of_part


def _moved_record(record: RunRecord, part_path: str, output: Path) -> RunRecord:
    """The record as the merged file keeps it: its kept run directory relative to the new file."""
    if not record.run_dir:
        return record
    where = Path(part_path).resolve().parent / record.run_dir
    return moved(record, run_dir=os.path.relpath(where, output.resolve().parent))


def merge(paths: Sequence[str], output: str, allow_missing: bool = False, force: bool = False,
          note=lambda text: None):
    """Write the merged file; returns it (a resultfile.ResultFile). MergeError if the parts do not fit."""
    from .resultfile import create
    parts = _load(paths)
    problems = _same_plan_problems(parts)
    if problems:
        raise MergeError("\nscenc: ".join(problems))
    parts.sort(key=lambda p: p.header["shard"]["index"])
    duplicates, missing = _coverage_problems(parts)
    unfinished = [f"{p.path} (shard {p.header['shard']['index']}) is {p.status}: continue it with "
                  f"`scenc run --resume {p.path}`" for p in parts if p.status != "complete"]
    if duplicates or unfinished or (missing and not allow_missing):
        hint = ["give every shard once, or --allow-missing to merge what is there"] if missing else []
        raise MergeError("\nscenc: ".join(duplicates + missing + unfinished + hint))
    for line in missing:
        note(f"scenc: {line} (--allow-missing: merged without them)")
    machines, part_machine = _machines(parts)
    out = Path(output)
    if out.exists() and not force:
        raise UsageError(f"{out} exists; choose another -o, or --force to overwrite it")
    header = {k: v for k, v in parts[0].header.items()
              if k not in ("schema", "format", "status", "status_updated", "created", "shard")}
    first_shard = parts[0].header["shard"]
    header["plan"] = first_shard["plan"]
    header["probes"] = Plan.from_json(first_shard["plan"]).probe_sets
    header["machines"] = machines
    header["block_machines"] = [
        {"params": params, "probe_set": probe_set, "machine": machine, "shard": p.header["shard"]["index"]}
        for p, machine in zip(parts, part_machine)
        for params, probe_set in (json.loads(k) for k in p.header["shard"]["blocks"])]
    header["merged"] = {
        "count": first_shard["count"], "plan_sha256": first_shard["plan_sha256"],
        "weights": first_shard["weights"], "missing": missing,
        "parts": [{"path": os.path.abspath(p.path), "shard": p.header["shard"]["index"], "machine": m,
                   "created": p.header.get("created"), "command": p.header.get("command")}
                  for p, m in zip(parts, part_machine)],
    }
    header["status"] = "complete" if not missing else "interrupted"
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists():
        out.unlink()
    result = create(out, header)
    for part in parts:
        for record in part.runs:
            result.append_run(_moved_record(record, part.path, out))
    result.close()
    return result


def describe_machines(result) -> str:
    found = cells.machines(result.header)
    if not found:
        return ""
    shards: Dict[str, List[str]] = {}
    for part in result.header["merged"]["parts"]:
        shards.setdefault(part["machine"], []).append(str(part["shard"]))
    listed = "; ".join(f"{m} = {cells.machine_name(d)} (shard{'s' * (len(shards[m]) > 1)} "
                       f"{', '.join(shards[m])})" for m, d in found.items())
    return (f"the cells ran on {len(found)} machines: {listed}. Each cell is analysed within its "
            f"machine; figures across cells are drawn per machine (--across-machines draws them "
            f"together, with a warning)")
