"""runrecord: the one definition of which configuration a saved run belongs to."""

from scenc.run import record as runrecord
from scenc.run.plan import DEFAULT_PROBE_SET, RunConfig


def _record(allocator="glibc", params=None, probe_set=None, status="ok", warmup=False):
    record = {"allocator": allocator, "params": params or {}, "status": status, "warmup": warmup}
    if probe_set is not None:
        record["probe_set"] = probe_set
    return record


def test_a_record_from_before_probe_sets_belongs_to_the_default_probe_set():
    old = _record(params={"threads": 2})
    assert runrecord.probe_set(old) == DEFAULT_PROBE_SET
    assert runrecord.belongs_to(old, RunConfig.make("glibc", {"threads": 2}))
    assert not runrecord.belongs_to(old, RunConfig.make("glibc", {"threads": 2}, "layout"))
    assert not runrecord.belongs_to(old, RunConfig.make("glibc", {"threads": 4}))
    assert not runrecord.belongs_to(old, RunConfig.make("jemalloc", {"threads": 2}))


def test_select_tells_probe_sets_apart():
    records = [_record(), _record(probe_set="layout"), _record(allocator="jemalloc", status="crashed")]
    assert list(runrecord.select(records, probe_set_="layout")) == [records[1]]
    assert list(runrecord.select(records, probe_set_=DEFAULT_PROBE_SET)) == [records[0], records[2]]
    assert list(runrecord.select(records, allocator="jemalloc", status="crashed")) == [records[2]]
    assert len(list(runrecord.select(records))) == 3


def test_a_new_record_has_every_key_in_order():
    config = RunConfig.make("glibc", {"threads": 2}, "latency")
    record = runrecord.new(config, 3, False, stderr_tail="", exit_code=0, started="t", duration_s=0.1234567)
    assert tuple(record) == runrecord.KEYS
    assert record["probe_set"] == "latency" and record["duration_s"] == 0.123457
    assert runrecord.belongs_to(record, config) and runrecord.is_measurement(record)
    assert not runrecord.is_measurement(dict(record, warmup=True))
