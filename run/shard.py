"""`scenc run --shard K/N`: the K-th of N parts of a plan, dealt by cells.

Every shard, on whatever machine, must deal the same cells to the same
shards without talking to the others. So a cell's weight is a count, not
a time: each cell's program runs once (under the system allocator, not
measured, not saved) and its report says how many allocator calls it made;
the scenario's RNG is seeded, so every machine counts the same. The weight
of a cell is (calls + a run's fixed cost) x its runs, rounded to two
significant digits so that a thread race that moves a count by a few calls
does not move a cell. `cells.deal` then gives each shard about the same
total. A program that does not report its calls (a program after `--`)
weighs the same as the heaviest (and is said so).

The shard's file holds its part of the plan in "plan" (so `--resume` and
the reports need nothing new) and the whole plan under "shard", which
`scenc merge` (run/merge.py) checks.
"""

import json
import math
import os
from typing import Dict, List, Mapping, Optional, Tuple

from . import cells
from .plan import FIRST_WARMUP_TIMEOUT_S, Plan
from .runner import ProgramRunner

# A run costs about a millisecond besides its allocator calls (exec, the
# dynamic loader, the report): a few tens of thousands of calls' worth.
RUN_COST_IN_CALLS = 50_000


def _round2(value: float) -> float:
    if value <= 0:
        return 0.0
    digits = 1 - int(math.floor(math.log10(value)))
    return round(value, digits)


def count_calls(binary, runner: ProgramRunner, env: Mapping[str, str]) -> Optional[int]:
    """Allocator calls one run of a scenario program makes, from its report; None if it has none."""
    outcome = runner.run([str(binary)], env, FIRST_WARMUP_TIMEOUT_S)
    if outcome.returncode != 0 or outcome.timed_out:
        return None
    try:
        report = json.loads(outcome.stdout)
        return sum(sum(t["ops"].values()) for t in report["threads"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def weigh(plan: Plan, programs: Mapping, runner: ProgramRunner, check=lambda: None,
          env: Optional[Mapping[str, str]] = None) -> Tuple[Dict[str, float], List[str]]:
    """(cell key -> weight, cells whose program reported no count)."""
    env = {k: v for k, v in (os.environ if env is None else env).items() if k != "LD_PRELOAD"}
    runs_per_config = plan.max_rounds + plan.warmup
    calls: Dict[str, Optional[int]] = {}
    configs: Dict[str, int] = {}
    for config in plan.configs:
        key = cells.cell_key(config.params_dict, config.probe_set)
        configs[key] = configs.get(key, 0) + 1
        if key not in calls:
            check()
            # A program after `--` reports no count: its cells weigh as much as the heaviest.
            calls[key] = count_calls(programs[config.program_key], runner, env) \
                if config.program_key in programs else None
    counted = [c for c in calls.values() if c is not None]
    fallback = max(counted) if counted else 0
    weights = {key: _round2((RUN_COST_IN_CALLS + (fallback if n is None else n)) * configs[key] * runs_per_config)
               for key, n in calls.items()}
    return weights, [key for key, n in calls.items() if n is None]


def default_seed(plan: Plan, source: str) -> int:
    """The run-order seed of a shard run without --seed: the same in every shard of one plan."""
    import hashlib
    text = json.dumps([source, dict(plan.to_json(), seed=None)], sort_keys=True)
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16) % 2**31


def take(plan: Plan, index: int, count: int, weights: Mapping[str, float]) -> Tuple[Plan, dict]:
    """(the plan of shard `index` of `count`, the header's "shard" entry)."""
    full = plan.to_json()
    keys = cells.plan_cells(full)
    hands = cells.deal([weights[k] for k in keys], count)
    mine = {keys[i] for i in hands[index - 1]}
    configs = [c for c in plan.configs if cells.cell_key(c.params_dict, c.probe_set) in mine]
    part = Plan.from_json(dict(full, configs=[c.to_json() for c in configs]))
    entry = {
        "index": index,
        "count": count,
        "blocks": [keys[i] for i in hands[index - 1]],
        "dealing": [[keys[i] for i in hand] for hand in hands],
        "weights": {k: weights[k] for k in keys},
        "plan": full,
        "plan_sha256": cells.plan_digest(full),
    }
    return part, entry


def describe(entry: Mapping) -> str:
    """"shard 2/3: 4 of 12 cells (34% of the estimated work)"."""
    total = sum(entry["weights"].values()) or 1.0
    mine = sum(entry["weights"][k] for k in entry["blocks"])
    return (f"shard {entry['index']}/{entry['count']}: {len(entry['blocks'])} of {len(entry['weights'])} "
            f"cells ({mine / total:.0%} of the estimated work)")
