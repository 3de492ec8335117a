"""The record of one run, as a result file saves it: `RunRecord`, how a run ended (`Status`), its JSON.

One line of a result file (run/resultfile.py) is `RunRecord.to_json()`, and `from_json` reads the
records of every scenc so far, as pyperf's `Run` reads its own. The runners fill a record in, the
session and the analysis read its fields, the merge moves it: nothing else knows its keys.
"""

import dataclasses
import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, Iterable, Iterator, Mapping, Optional

from .plan import COMMAND, DEFAULT_PROBE_SET, SCENARIO

# The JSON keys of a record, by the scenc that added them (a newer scenc reads every older record):
#   scenc-result/1   allocator, params, round, warmup, status, metrics, provider, stderr_tail, signal,
#                    exit_code, started, duration_s, problem; notes (a probe's remarks) and run_dir
#                    (where a run's probe files were kept) when there are any.
#   probe sets       probe_set; a record without one measured DEFAULT_PROBE_SET.
#   scenc-result/2   target "command" for a real program's run (a scenario's run has no target key),
#                    proof and stdout_tail.
#   servers          server (a run with --server: the server's pid, readiness, how it was stopped, how it
#                    ended, and its output's tails when the run failed).
# A key this scenc does not know is kept (`extra`) and written back as it was.


class Status(str, Enum):
    """How a run ended; a run interrupted by scenc has no record. The value is what the file says."""
    OK = "ok"
    CRASHED = "crashed"
    TIMEOUT = "timeout"
    WRONG_ALLOCATOR = "wrong-allocator"
    FAILED_ALLOCS = "failed-allocs"
    OUT_OF_MEMORY = "out-of-memory"
    NO_METRIC = "no-metric"          # a real program's run whose --metric figure was not in its output

    def __str__(self) -> str:
        return self.value            # as the file says it, in sentences and in CSV alike

    @property
    def words(self) -> str:
        """The status in a sentence: "<configuration> timed out"."""
        return _WORDS[self]

    @property
    def repeats(self) -> bool:
        """A failure that repeats exactly in every run, so no run of the configuration is tried again:
        each further try would cost a whole timeout, or measure the wrong thing."""
        return self in (Status.TIMEOUT, Status.WRONG_ALLOCATOR, Status.OUT_OF_MEMORY)


_STATUS_VALUES = frozenset(s.value for s in Status)   # checked for every record read or appended
_WORDS = {Status.OK: "ran", Status.CRASHED: "crashed", Status.TIMEOUT: "timed out",
          Status.WRONG_ALLOCATOR: "ran under the wrong allocator", Status.FAILED_ALLOCS: "had failed allocations",
          Status.OUT_OF_MEMORY: "ran out of memory", Status.NO_METRIC: "printed no --metric figure"}


class RecordError(ValueError):
    """A JSON object that is no run record; the message says which key is wrong."""


@dataclass
class RunRecord:
    allocator: str
    params: Dict[str, Any]
    round: int
    warmup: bool = False
    status: Status = Status.OK
    metrics: Dict[str, Optional[float]] = field(default_factory=dict)
    probe_set: str = DEFAULT_PROBE_SET
    target: str = SCENARIO
    provider: Optional[str] = None        # the shared object that served malloc (the preload proof)
    stderr_tail: str = ""
    signal: Optional[str] = None
    exit_code: Optional[int] = None
    started: str = ""
    duration_s: float = 0.0
    problem: Optional[str] = None         # a sentence: why the run is not "ok"
    notes: Optional[list] = None
    run_dir: Optional[str] = None
    proof: Optional[dict] = None          # a real program's run: which object served malloc, per process
    stdout_tail: Optional[str] = None
    server: Optional[dict] = None         # `--server`: the server of the run (its client is the program)
    extra: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def new(cls, config, round_: int, warmup: bool, *, stderr_tail: str, exit_code: Optional[int],
            started: str, duration_s: float) -> "RunRecord":
        """The record of a run of `config` (a plan.RunConfig), "ok" until told otherwise."""
        return cls(allocator=config.allocator, params=config.params_dict, round=round_, warmup=warmup,
                   probe_set=config.probe_set, target=config.target, stderr_tail=stderr_tail,
                   exit_code=exit_code, started=started, duration_s=round(duration_s, 6))

    def fail(self, status: Status, problem: str, **fields) -> None:
        """The run ended as `status`, for the reason `problem`; `fields` are the others that say how."""
        self.status, self.problem = status, problem
        for name, value in fields.items():
            setattr(self, name, value)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def is_measurement(self) -> bool:
        """A finished, successful, measured run: the only kind whose figures enter the statistics."""
        return self.ok and not self.warmup

    def belongs_to(self, config) -> bool:
        """Is this a run of `config` (a plan.RunConfig): same allocator, params, probe set and target?"""
        return (self.allocator == config.allocator and self.params == config.params_dict
                and self.probe_set == config.probe_set and self.target == config.target)

    def to_json(self) -> dict:
        data = {name: getattr(self, name) for name in _ALWAYS}
        data["status"] = self.status.value
        if self.target != SCENARIO:
            data["target"] = self.target
        data.update({name: getattr(self, name) for name in _WHEN_SET if getattr(self, name) is not None})
        data.update(self.extra)
        return data

    @classmethod
    def from_json(cls, data: Any) -> "RunRecord":
        check_run(data)
        known = {name: data[name] for name in (*_ALWAYS, *_WHEN_SET, "target") if name in data}
        known["status"] = Status(data["status"])
        known.setdefault("probe_set", DEFAULT_PROBE_SET)
        extra = {k: v for k, v in data.items() if k not in _KEYS}
        return cls(**known, extra=extra)


_ALWAYS = ("allocator", "params", "probe_set", "round", "warmup", "status", "metrics", "provider",
           "stderr_tail", "signal", "exit_code", "started", "duration_s", "problem")
_WHEN_SET = ("notes", "run_dir", "proof", "stdout_tail", "server")
_KEYS = {*_ALWAYS, *_WHEN_SET, "target"}


def _require(data: Mapping, key: str, types: tuple) -> Any:
    if key not in data:
        raise RecordError(f"run has no {key!r}")
    value = data[key]
    if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
        names = " or ".join(t.__name__ for t in types)
        raise RecordError(f"run field {key!r} should be {names}, got {value!r:.80}")
    return value


def check_run(data: Any) -> None:
    """RecordError naming the key of `data` that is wrong for a run record, if one is."""
    if not isinstance(data, dict):
        raise RecordError("run record is not a JSON object")
    _require(data, "allocator", (str,))
    _require(data, "params", (dict,))
    if _require(data, "round", (int,)) < 0:
        raise RecordError(f"run round should be >= 0, got {data['round']}")
    status = _require(data, "status", (str,))
    if status not in _STATUS_VALUES:
        raise RecordError(f"run status {status!r} is not one of {', '.join(s.value for s in Status)}")
    if data.get("target", SCENARIO) not in (SCENARIO, COMMAND):
        raise RecordError(f"run target {data['target']!r} is not 'scenario' or 'command'")
    for name, value in _require(data, "metrics", (dict,)).items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value)):
            raise RecordError(f"metric {name!r} should be a finite number or null, got {value!r:.80}")


def moved(record: RunRecord, **fields) -> RunRecord:
    """A copy of `record` with some fields changed (a merge moves a kept run directory)."""
    return dataclasses.replace(record, **fields)


def select(records: Iterable[RunRecord], allocator: Optional[str] = None, params: Optional[Mapping] = None,
           probe_set: Optional[str] = None, status: Optional[str] = None) -> Iterator[RunRecord]:
    """The records matching every criterion given (`params` must match exactly)."""
    wanted_params = None if params is None else dict(params)
    for record in records:
        if allocator is not None and record.allocator != allocator:
            continue
        if wanted_params is not None and record.params != wanted_params:
            continue
        if probe_set is not None and record.probe_set != probe_set:
            continue
        if status is not None and record.status != status:
            continue
        yield record
