"""The record of one run, as saved in a result file: its keys, and which configuration it belongs to.

A record is a plain JSON object (one line of a result file, see run/resultfile.py)
so that `jq` and old scenc versions read it; this module is the one place
that knows its shape, as pyperf's `Run` is:

* `new` makes the record of a run with every key (run/runner.py fills in how it
  ended);
* `probe_set` reads a record's probe set (files from before probe sets have
  none: they measured `DEFAULT_PROBE_SET`);
* `belongs_to` and `select` match records to a configuration (allocator,
  params, probe set) -- the session, the analysis and the result file all
  ask this, and must agree;
* `is_measurement`: a finished, successful, measured run (not a warm-up),
  the only kind whose figures enter the statistics.
"""

from typing import Iterable, Iterator, Mapping, Optional

from .plan import DEFAULT_PROBE_SET, SCENARIO

# How a run ended (see run/runner.py; "no-metric": run/program/runner.py); a run
# interrupted by scenc has no record.
RUN_STATUSES = ("ok", "crashed", "timeout", "wrong-allocator", "failed-allocs", "out-of-memory", "no-metric")

# Every key of a new record, in the order they are written.
KEYS = ("allocator", "params", "probe_set", "round", "warmup", "status", "metrics", "provider",
        "stderr_tail", "signal", "exit_code", "started", "duration_s", "problem")


def new(config, round_: int, warmup: bool, *, stderr_tail: str, exit_code: Optional[int],
        started: str, duration_s: float) -> dict:
    """The record of a run of `config` (a plan.RunConfig), "ok" until told otherwise.

    A real command's run (target "command") has a "target" key; a scenario's
    has none, as in files from before commands.
    """
    record = {
        "allocator": config.allocator,
        "params": config.params_dict,
        "probe_set": config.probe_set,
        "round": round_,
        "warmup": warmup,
        "status": "ok",
        "metrics": {},
        "provider": None,
        "stderr_tail": stderr_tail,
        "signal": None,
        "exit_code": exit_code,
        "started": started,
        "duration_s": round(duration_s, 6),
        "problem": None,
    }
    if config.target != SCENARIO:
        record["target"] = config.target
    return record


def probe_set(record: Mapping) -> str:
    return record.get("probe_set", DEFAULT_PROBE_SET)


def target(record: Mapping) -> str:
    """"scenario", or "command" for a real command's run."""
    return record.get("target", SCENARIO)


def is_measurement(record: Mapping) -> bool:
    return record["status"] == "ok" and not record.get("warmup")


def belongs_to(record: Mapping, config) -> bool:
    """Is this a run of `config` (a plan.RunConfig): same allocator, params, probe set and target?"""
    return (record["allocator"] == config.allocator and record["params"] == config.params_dict
            and probe_set(record) == config.probe_set and target(record) == config.target)


def select(records: Iterable[Mapping], allocator: Optional[str] = None, params: Optional[Mapping] = None,
           probe_set_: Optional[str] = None, status: Optional[str] = None) -> Iterator[Mapping]:
    """The records matching every criterion given (`params` must match exactly)."""
    wanted_params = None if params is None else dict(params)
    for record in records:
        if allocator is not None and record["allocator"] != allocator:
            continue
        if wanted_params is not None and record["params"] != wanted_params:
            continue
        if probe_set_ is not None and probe_set(record) != probe_set_:
            continue
        if status is not None and record["status"] != status:
            continue
        yield record
