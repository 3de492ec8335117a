"""run/record.py: RunRecord, the one definition of a run's record, its JSON round trip and what it belongs to."""

import json

import pytest

from scenc.run.plan import COMMAND, DEFAULT_PROBE_SET, RunConfig
from scenc.run.record import RecordError, RunRecord, Status, moved, select


def _json(**fields):
    data = {"allocator": "glibc", "params": {"threads": 2}, "round": 1, "warmup": False, "status": "ok",
            "metrics": {"wall_s": 0.5}, "provider": "/lib/libc.so.6", "stderr_tail": "", "signal": None,
            "exit_code": 0, "started": "t", "duration_s": 0.51, "problem": None}
    data.update(fields)
    return data


def test_a_record_from_before_probe_sets_belongs_to_the_default_probe_set():
    old = RunRecord.from_json(_json())            # scenc-result/1 records have no probe_set
    assert old.probe_set == DEFAULT_PROBE_SET and old.target == "scenario"
    assert old.belongs_to(RunConfig.make("glibc", {"threads": 2}))
    assert not old.belongs_to(RunConfig.make("glibc", {"threads": 2}, "layout"))
    assert not old.belongs_to(RunConfig.make("glibc", {"threads": 4}))
    assert not old.belongs_to(RunConfig.make("jemalloc", {"threads": 2}))


def test_select_tells_probe_sets_apart():
    records = [RunRecord.from_json(_json()), RunRecord.from_json(_json(probe_set="layout")),
               RunRecord.from_json(_json(allocator="jemalloc", status="crashed"))]
    assert list(select(records, probe_set="layout")) == [records[1]]
    assert list(select(records, probe_set=DEFAULT_PROBE_SET)) == [records[0], records[2]]
    assert list(select(records, allocator="jemalloc", status="crashed")) == [records[2]]
    assert list(select(records, status=Status.CRASHED)) == [records[2]]
    assert len(list(select(records))) == 3


def test_a_new_record_writes_every_key_in_the_order_files_always_had():
    config = RunConfig.make("glibc", {"threads": 2}, "latency")
    record = RunRecord.new(config, 3, False, stderr_tail="", exit_code=0, started="t", duration_s=0.1234567)
    assert tuple(record.to_json()) == ("allocator", "params", "probe_set", "round", "warmup", "status", "metrics",
                                       "provider", "stderr_tail", "signal", "exit_code", "started", "duration_s",
                                       "problem")
    assert record.probe_set == "latency" and record.duration_s == 0.123457
    assert record.belongs_to(config) and record.is_measurement
    assert not moved(record, warmup=True).is_measurement


def test_the_json_round_trip_keeps_everything_and_unknown_keys_too():
    data = _json(probe_set="time+memory", target=COMMAND, status="wrong-allocator", problem="libc served it",
                 run_dir="x.runs/1", notes=["a note"], proof={"processes": 1}, stdout_tail="out",
                 from_the_future={"kept": True})
    record = RunRecord.from_json(json.loads(json.dumps(data)))
    assert record.status is Status.WRONG_ALLOCATOR and not record.ok and record.target == COMMAND
    assert record.extra == {"from_the_future": {"kept": True}}
    assert record.to_json() == data
    assert json.loads(json.dumps(record.to_json()))["status"] == "wrong-allocator"


def test_a_failure_says_its_status_and_why():
    record = RunRecord.from_json(_json())
    record.fail(Status.TIMEOUT, "no result after 3 s", exit_code=None)
    assert (record.status, record.problem, record.exit_code) == (Status.TIMEOUT, "no result after 3 s", None)
    assert record.status.repeats and not Status.CRASHED.repeats
    assert f"it {record.status.words}" == "it timed out" and str(record.status) == "timeout"


@pytest.mark.parametrize("data, message", [
    ([1, 2], "not a JSON object"),
    (_json(allocator=None), "'allocator' should be str"),
    ({k: v for k, v in _json().items() if k != "round"}, "run has no 'round'"),
    (_json(round=-1), "round should be >= 0"),
    (_json(round=True), "'round' should be int"),
    (_json(status="exploded"), "status 'exploded' is not one of ok, crashed"),
    (_json(target="server"), "target 'server' is not"),
    (_json(metrics={"wall_s": "fast"}), "metric 'wall_s' should be a finite number"),
    (_json(metrics={"wall_s": float("inf")}), "metric 'wall_s' should be a finite number"),
])
def test_a_record_that_is_not_one_says_what_is_wrong(data, message):
    with pytest.raises(RecordError, match=message):
        RunRecord.from_json(data)
