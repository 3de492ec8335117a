"""The plan of a `scenc run`: which runs to make, and the defaults that shape it.

A `Plan` is a list of run configurations (allocator x param set x probe set)
plus how many times to run each. The default planner crosses every allocator
with every param set and the one probe set every program already has
(`DEFAULT_PROBE_SET`); a probe planner (probes/planner.py) can hand over any
other list of probe sets. The plan is plain data: it is saved in the result
file's header and read back by `--resume`.

This module imports nothing of scenc: the runner, the session, the set-up and
the reports all read it, so it must depend on none of them.
"""

import itertools
import json
import random
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

DEFAULT_RUNS = 10
DEFAULT_WARMUP = 1
AUTO_MIN_RUNS = 5
AUTO_MAX_RUNS = 50
DEFAULT_CI = 0.02
# Without --runs: `auto`, and no new round after this long per param set and probe set.
DEFAULT_TIME_BUDGET_S = 45.0
# A run slower than this many warm-ups is taken for a hang.
TIMEOUT_FACTOR = 20
MIN_TIMEOUT_S = 10.0
FIRST_WARMUP_TIMEOUT_S = 120.0
# Without --timeout, a run whose process group uses almost no CPU time this long is stuck (system/process.py's
# IdleWatch): every scenario run; never a real program's, which may wait on purpose (harness.py).
IDLE_LIMIT_S = 10.0
WATCH_EVERY_S = 1.0          # how often a watched run's CPU time is read

# A probe set is the probes measured in one run, joined by "+" (probes/__init__.py);
# probes/planner.py turns `--probes` into the sets, each built into its own program.
DEFAULT_PROBE_SET = "time+memory"

# What a configuration runs: the scenario's program, or the real command given
# after `--` (run/program/target.py; its configurations have no params).
SCENARIO, COMMAND = "scenario", "command"


def params_key(params: Mapping) -> str:
    return json.dumps(dict(params), sort_keys=True)


def params_label(params: Mapping) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items()) or "(defaults)"


@dataclass(frozen=True)
class RunConfig:
    """One thing to measure repeatedly: an allocator, param values, a probe set, a target."""
    allocator: str
    params: Tuple[Tuple[str, object], ...]
    probe_set: str = DEFAULT_PROBE_SET
    target: str = SCENARIO

    @classmethod
    def make(cls, allocator: str, params: Mapping, probe_set: str = DEFAULT_PROBE_SET,
             target: str = SCENARIO):
        return cls(allocator, tuple(params.items()), probe_set, target)

    @property
    def params_dict(self) -> Dict[str, object]:
        return dict(self.params)

    @property
    def program_key(self) -> Tuple[str, str]:
        """Configurations with the same key run the same program (a command: with the same arguments)."""
        if self.target != SCENARIO:
            return f"{self.target} {params_key(self.params_dict)}" if self.params else self.target, self.probe_set
        return params_key(self.params_dict), self.probe_set

    def label(self) -> str:
        if self.target != SCENARIO:
            params = f" {params_label(self.params_dict)}" if self.params else ""
            return f"{self.allocator}{params} [{self.target}]"
        extra = f" [{self.probe_set}]" if self.probe_set != DEFAULT_PROBE_SET else ""
        params = params_label(self.params_dict) if self.params else ""
        return f"{self.allocator} {params}".strip() + extra

    def to_json(self) -> dict:
        data = {"allocator": self.allocator, "params": self.params_dict, "probe_set": self.probe_set}
        if self.target != SCENARIO:
            data["target"] = self.target
        return data

    @classmethod
    def from_json(cls, data: Mapping) -> "RunConfig":
        return cls.make(data["allocator"], data["params"], data.get("probe_set", DEFAULT_PROBE_SET),
                        data.get("target", SCENARIO))


@dataclass
class Plan:
    configs: List[RunConfig]
    runs: Optional[int] = DEFAULT_RUNS      # None: `--runs auto`
    warmup: int = DEFAULT_WARMUP
    ci: float = DEFAULT_CI                  # auto: stop when every 95% CI is within ±ci of its mean
    min_runs: int = AUTO_MIN_RUNS
    max_runs: int = AUTO_MAX_RUNS
    time_budget_s: Optional[float] = None
    timeout_s: Optional[float] = None       # None: derived from each configuration's warm-up
    seed: int = 0                           # of the shuffles, not of the scenario
    memory_limit: Optional[int] = None      # bytes of RLIMIT_DATA per run (run/memlimit.py); None: none

    @property
    def auto(self) -> bool:
        return self.runs is None

    @property
    def max_rounds(self) -> int:
        return self.max_runs if self.auto else self.runs

    def _distinct(self, attribute):
        seen = []
        for c in self.configs:
            value = getattr(c, attribute)
            if value not in seen:
                seen.append(value)
        return seen

    @property
    def allocators(self) -> List[str]:
        return self._distinct("allocator")

    @property
    def param_sets(self) -> List[Dict[str, object]]:
        """The scenario's param sets (a command has none)."""
        return [dict(p) for p in dict.fromkeys(c.params for c in self.configs if c.target == SCENARIO)]

    @property
    def command_param_sets(self) -> List[Dict[str, object]]:
        """The param sets of the program after `--` (its `{name}`s): [{}] when it takes none, [] without one."""
        return [dict(p) for p in dict.fromkeys(c.params for c in self.configs if c.target != SCENARIO)]

    @property
    def probe_sets(self) -> List[str]:
        return list(dict.fromkeys(c.probe_set for c in self.configs if c.target == SCENARIO))

    def describe(self) -> str:
        """"4 allocators x 3 param sets x 10 runs + 1 warm-up each = 132 runs"."""
        def count(n, word):
            return f"{n} {word}{'s' * (n != 1)}"
        parts = [count(len(self.allocators), "allocator"), count(len(self.param_sets), "param set")]
        targets = self._distinct("target")
        if targets != [SCENARIO]:
            swept = len(self.command_param_sets)
            command = "the command" + (f" with {count(swept, 'param set')}" if swept > 1 else "")
            parts[1:] = [" and ".join(([count(len(self.param_sets), "scenario param set")]
                                       if SCENARIO in targets else []) + [command])]
        if len(self.probe_sets) > 1:
            parts.append(count(len(self.probe_sets), "probe set"))
        if self.auto:
            runs = f"{self.min_runs} to {self.max_runs} runs (until each 95% CI is within ±{self.ci:.1%})"
        else:
            runs = count(self.runs, "run")
        text = " x ".join(parts) + f" x {runs}"
        if self.warmup:
            text += f" + {count(self.warmup, 'warm-up')} each"
        n = len(self.configs)
        if self.auto:
            text += f" = {n * (self.min_runs + self.warmup)} to {n * (self.max_runs + self.warmup)} runs"
        else:
            text += f" = {n * (self.runs + self.warmup)} runs"
        if len(self.configs) != len(self.allocators) * len(self.param_sets) * len(self.probe_sets) \
                and targets == [SCENARIO]:
            text += f" ({n} configurations)"
        if self.time_budget_s is not None:
            text += f", no new round after {self.time_budget_s:g} s"
        return text

    def to_json(self) -> dict:
        return {
            "configs": [c.to_json() for c in self.configs],
            "runs": "auto" if self.auto else self.runs,
            "warmup": self.warmup,
            "ci": self.ci,
            "min_runs": self.min_runs,
            "max_runs": self.max_runs,
            "time_budget_s": self.time_budget_s,
            "timeout_s": self.timeout_s,
            "seed": self.seed,
            "memory_limit": self.memory_limit,
            "order": "every round runs each configuration once, shuffled with "
                     "random.Random(f'{seed}:{round}'); round 0 is the warm-up",
        }

    @classmethod
    def from_json(cls, data: Mapping) -> "Plan":
        return cls(
            configs=[RunConfig.from_json(c) for c in data["configs"]],
            runs=None if data["runs"] == "auto" else int(data["runs"]),
            warmup=int(data["warmup"]), ci=float(data["ci"]),
            min_runs=int(data["min_runs"]), max_runs=int(data["max_runs"]),
            time_budget_s=data.get("time_budget_s"), timeout_s=data.get("timeout_s"),
            seed=int(data["seed"]), memory_limit=data.get("memory_limit"),
        )

    def round_order(self, round_: int, configs: Sequence[RunConfig]) -> List[RunConfig]:
        order = list(configs)
        random.Random(f"{self.seed}:{round_}").shuffle(order)
        return order


def plan_runs(allocators: Sequence[str], param_sets: Sequence[Mapping],
              probe_sets: Sequence[str] = (DEFAULT_PROBE_SET,), **options) -> Plan:
    """The default planner: every allocator with every param set and probe set."""
    configs = [RunConfig.make(a, p, s) for p in param_sets for s in probe_sets for a in allocators]
    return Plan(configs=configs, **options)


def sweep(params: Mapping[str, Sequence]) -> List[Dict[str, object]]:
    """{threads: [1, 2], size: [8, 64]} -> the 4 combinations, first param slowest."""
    if not params:
        return [{}]
    keys = list(params)
    return [dict(zip(keys, values)) for values in itertools.product(*(params[k] for k in keys))]
