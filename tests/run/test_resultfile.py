import csv
import hashlib
import json
import random
import signal
import statistics
import subprocess
import sys
import textwrap
import time

import pytest

from scenc.run import resultfile
from scenc.system.metadata import collect_machine
from scenc.run.record import RunRecord, Status
from scenc.run.resultfile import ResultFile, ResultFileError, export_csv, load, make_header

SOURCE = "scenario churn {\n  repeat 1000 { p = malloc(64); free(p) }\n}\n"


def header(**overrides):
    h = make_header(
        scenario="churn",
        source=SOURCE,
        params={"threads": [1, 2], "size": [64]},
        seed=42,
        machine=collect_machine(),
        allocators={
            "glibc": {"path": None, "version": "glibc 2.36", "env": {}},
            "tcmalloc": {"path": "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
                         "version": "2.10", "env": {"TCMALLOC_RELEASE_RATE": "1"}},
        },
        probes=["wall", "rss"],
        plan={"rounds": 5, "order": "interleaved"},
        command=["scenc", "run", "churn.scn", "--rounds", "5"],
    )
    h.update(overrides)
    return h


def run(i, allocator="tcmalloc", status="ok", **overrides):
    r = {
        "allocator": allocator,
        "params": {"threads": 1 + i % 2, "size": 64},
        "round": i,
        "status": status,
        "metrics": {"wall_s": 0.1 + i / 1000, "peak_rss_kib": 2048 + i} if status == "ok" else {},
        "provider": "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
        "stderr_tail": "" if status == "ok" else "free(): invalid pointer\n",
        "signal": None if status == "ok" else 6,
        "started": "2024-05-01T12:00:00.000000+00:00",
        "duration_s": 0.15,
    }
    r.update(overrides)
    # Built field by field, not through from_json: a test may make an invalid one for append_run to refuse.
    return RunRecord(**dict(r, status=Status(r["status"])))


@pytest.fixture
def path(tmp_path):
    return tmp_path / "churn.scenc.jsonl"


# --------------------------------------------------------------- round trip


def test_round_trip(path):
    created = ResultFile.create(path, header())
    runs = [run(0), run(1, allocator="glibc"), run(2, status="crashed"), run(3, status="timeout")]
    for r in runs:
        created.append_run(r)
    created.close()

    loaded = load(path)
    assert loaded.header == created.header
    assert loaded.header["schema"] == resultfile.SCHEMA
    assert loaded.header["status"] == "running"
    assert loaded.header["source"] == SOURCE
    assert loaded.header["source_sha256"] == hashlib.sha256(SOURCE.encode()).hexdigest()
    assert loaded.header["seed"] == 42
    assert loaded.header["allocators"]["tcmalloc"]["env"] == {"TCMALLOC_RELEASE_RATE": "1"}
    assert list(loaded) == runs == loaded.runs
    assert len(loaded) == 4
    assert loaded.ignored_tail_bytes == 0
    assert [r.round for r in loaded.select(allocator="tcmalloc")] == [0, 2, 3]
    assert [r.round for r in loaded.select(status="crashed")] == [2]
    assert loaded.metric_values("wall_s", "tcmalloc") == [0.1]
    assert loaded.metric_values("wall_s", "glibc", params={"threads": 2, "size": 64}) == [0.101]
    assert loaded.to_dict() == {"header": loaded.header, "runs": [r.to_json() for r in runs]}


def test_file_is_plain_json_lines(path):
    with ResultFile.create(path, header()) as rf:
        rf.append_run(run(0))
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["scenario"] == "churn"
    assert json.loads(lines[1]) == run(0).to_json()
    assert len(lines) == 2


def test_set_status_rewrites_header_and_keeps_runs(path):
    rf = ResultFile.create(path, header())
    rf.append_run(run(0))
    rf.set_status("interrupted")
    assert load(path).status == "interrupted"
    rf.append_run(run(1))  # appending still works after the header rewrite
    rf.set_status("complete")
    loaded = load(path)
    assert loaded.status == "complete" and rf.status == "complete"
    assert "status_updated" in loaded.header
    assert [r.round for r in loaded] == [0, 1]
    with pytest.raises(ValueError):
        rf.set_status("finished")


def test_create_refuses_to_clobber_and_validates_header(path):
    ResultFile.create(path, header())
    with pytest.raises(FileExistsError):
        ResultFile.create(path, header())
    ResultFile.create(path, header(scenario="other"), overwrite=True)
    assert load(path).header["scenario"] == "other"

    incomplete = header()
    del incomplete["allocators"]
    with pytest.raises(ValueError, match="allocators"):
        ResultFile.create(path, incomplete, overwrite=True)
    with pytest.raises(ValueError, match="source_sha256"):
        ResultFile.create(path, header(source_sha256="0" * 64), overwrite=True)
    with pytest.raises(ValueError, match="env"):
        ResultFile.create(path, header(allocators={"glibc": {"path": None, "version": None}}),
                          overwrite=True)
    assert load(path).header["scenario"] == "other"  # failed creates changed nothing


@pytest.mark.parametrize("bad", [
    {"status": "exploded"},
    {"metrics": {"wall_s": float("nan")}},
    {"metrics": {"wall_s": "fast"}},
    {"round": -1},
    {"allocator": None},
    {"params": [1, 2]},
])
def test_invalid_run_is_rejected_and_file_untouched(path, bad):
    rf = ResultFile.create(path, header())
    rf.append_run(run(0))
    before = path.read_bytes()
    with pytest.raises(ValueError):
        rf.append_run(run(1, **bad))
    assert path.read_bytes() == before
    assert len(rf) == 1


def test_stderr_with_undecodable_bytes_round_trips(path):
    tail = b"corrupted \xff\xfe heap\n".decode("utf-8", errors="surrogateescape")
    with ResultFile.create(path, header()) as rf:
        rf.append_run(run(0, status="crashed", stderr_tail=tail))
    assert load(path).runs[0].stderr_tail == tail


# ---------------------------------------------------------------- CSV export


def test_export_csv(path, tmp_path):
    rf = ResultFile.create(path, header())
    rf.append_run(run(0))
    rf.append_run(run(1, allocator="glibc"))
    rf.append_run(run(2, status="crashed"))
    out = tmp_path / "runs.csv"
    assert export_csv(rf, out) == 5
    with open(out, newline="") as f:
        rows = list(csv.reader(f))
    assert rows == [
        ["allocator", "params", "run", "round", "metric", "value", "status", "target"],
        ["tcmalloc", "size=64;threads=1", "0", "0", "wall_s", "0.1", "ok", "scenario"],
        ["tcmalloc", "size=64;threads=1", "0", "0", "peak_rss_kib", "2048", "ok", "scenario"],
        ["glibc", "size=64;threads=2", "1", "1", "wall_s", "0.101", "ok", "scenario"],
        ["glibc", "size=64;threads=2", "1", "1", "peak_rss_kib", "2049", "ok", "scenario"],
        ["tcmalloc", "size=64;threads=1", "2", "2", "", "", "crashed", "scenario"],
    ]
    assert export_csv(str(path), tmp_path / "again.csv") == 5  # also takes a path
    assert (tmp_path / "again.csv").read_bytes() == out.read_bytes()


# ---------------------------------------------------------- damaged files


def _write_valid(path, n=3):
    with ResultFile.create(path, header()) as rf:
        for i in range(n):
            rf.append_run(run(i))
    return path.read_bytes()


def _assert_error_names_file(path, line=None):
    with pytest.raises(ResultFileError) as info:
        load(path)
    error = info.value
    assert isinstance(error, ValueError)
    assert str(path) in str(error) and error.path == str(path)
    if line is not None:
        assert error.line == line and f"line {line}" in str(error)
    return error


def test_empty_file(path):
    path.write_bytes(b"")
    _assert_error_names_file(path)


def test_truncated_header(path):
    data = _write_valid(path)
    path.write_bytes(data[: data.index(b"\n") // 2])
    _assert_error_names_file(path, line=1)


def test_header_cut_at_a_line_end_is_still_an_error(path):
    data = _write_valid(path)
    path.write_bytes(data[:200] + b"\n")
    _assert_error_names_file(path, line=1)


def test_corrupt_run_line(path):
    data = _write_valid(path)
    lines = data.split(b"\n")
    lines[2] = lines[2][:10] + b"#garbage" + lines[2][10:]
    path.write_bytes(b"\n".join(lines))
    _assert_error_names_file(path, line=3)


def test_run_line_cut_in_the_middle_of_the_file(path):
    data = _write_valid(path)
    lines = data.split(b"\n")
    lines[1] = lines[1][: len(lines[1]) // 2]
    path.write_bytes(b"\n".join(lines))
    _assert_error_names_file(path, line=2)


def test_invalid_run_record(path):
    data = _write_valid(path)
    path.write_bytes(data + json.dumps(dict(run(3).to_json(), status="weird")).encode() + b"\n")
    error = _assert_error_names_file(path, line=5)
    assert "weird" in str(error)


def test_not_a_result_file(path):
    path.write_text("allocator,params,run\nglibc,,0\n")
    _assert_error_names_file(path, line=1)
    path.write_text(json.dumps({"schema": "scenc-result/99"}) + "\n")
    assert "scenc-result/99" in str(_assert_error_names_file(path, line=1))
    path.write_text(json.dumps([1, 2]) + "\n")
    _assert_error_names_file(path, line=1)


def test_tampered_source_is_detected(path):
    data = _write_valid(path)
    path.write_bytes(data.replace(b"malloc(64)", b"malloc(65)", 1))
    assert "sha256" in str(_assert_error_names_file(path, line=1))


def test_unfinished_append_is_ignored_then_cut_off(path):
    data = _write_valid(path, n=3)
    fragment = json.dumps(run(3).to_json()).encode()[:37]
    path.write_bytes(data + fragment)
    loaded = load(path)
    assert [r.round for r in loaded] == [0, 1, 2]
    assert loaded.ignored_tail_bytes == len(fragment)
    loaded.append_run(run(3))
    loaded.close()
    again = load(path)
    assert [r.round for r in again] == [0, 1, 2, 3]
    assert again.ignored_tail_bytes == 0


def test_append_resyncs_after_an_interrupted_write(path):
    # Simulates Ctrl-C landing after a partial write of our own process.
    rf = ResultFile.create(path, header())
    rf.append_run(run(0))
    with open(path, "ab") as f:
        f.write(json.dumps(run(1).to_json()).encode()[:20])
    rf.append_run(run(1))
    assert [r.round for r in load(path)] == [0, 1]


# ------------------------------------------------------- crash atomicity

def _writer_script(path, resume, tail_bytes, big_every, status_every):
    # Each record carries its round, so after a kill we can check that the
    # file holds exactly rounds 0..n-1.  Big stderr tails make a write span
    # many pages, so a kill can tear it (the kernel stops a write between
    # pages on SIGKILL).
    return textwrap.dedent(f"""
        import json, sys
        from scenc.run.record import RunRecord
        from scenc.run.resultfile import ResultFile, load
        header = json.loads({json.dumps(json.dumps(header()))})
        path = {str(path)!r}
        rf = load(path) if {resume!r} else ResultFile.create(path, header)
        i = len(rf)
        print("ready", flush=True)
        while True:
            big = "E" * {tail_bytes} if i % {big_every} == 0 else ""
            rf.append_run(RunRecord.from_json({{"allocator": "glibc", "params": {{"threads": 1}}, "round": i,
                                               "status": "ok", "metrics": {{"wall_s": 0.5}}, "stderr_tail": big}}))
            i += 1
            if i % {status_every} == 0:
                rf.set_status("interrupted" if i % 2 else "running")
    """)


def _start_writer(path, resume, tail_bytes=100_000, big_every=5, status_every=17):
    script = _writer_script(path, resume, tail_bytes, big_every, status_every)
    proc = subprocess.Popen([sys.executable, "-c", script],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = proc.stdout.readline()
    if line != b"ready\n":
        proc.kill()
        raise AssertionError(proc.stderr.read().decode())
    return proc


def _kill(proc):
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    proc.stderr.close()


def _check_consistent(path):
    loaded = load(path)
    assert [r.round for r in loaded] == list(range(len(loaded)))
    assert loaded.status in ("running", "interrupted")
    return loaded


@pytest.mark.slow
def test_sigkill_at_random_moments_leaves_a_valid_file(tmp_path):
    # Kills land in append_run and in set_status's rewrite alike; each new
    # writer resumes the file the previous one left behind.
    rng = random.Random(1234)
    path = tmp_path / "killed.scenc.jsonl"
    counts = []
    for attempt in range(25):
        proc = _start_writer(path, resume=attempt > 0)
        time.sleep(rng.uniform(0.0, 0.1))
        _kill(proc)
        counts.append(len(_check_consistent(path)))
    assert counts == sorted(counts) and counts[-1] > 25  # progress was kept
    print(f"runs after each kill: {counts}")


@pytest.mark.slow
def test_sigkill_during_large_appends_tears_nothing_visible(tmp_path):
    # 8 MB records take long enough to write that some kills tear them; the
    # fragment must be ignored by load() and cut off by the resuming writer.
    rng = random.Random(99)
    path = tmp_path / "torn.scenc.jsonl"
    torn = 0
    for attempt in range(12):
        if attempt % 4 == 0 and path.exists():
            path.unlink()  # keep the file (and the test) small
        proc = _start_writer(path, resume=path.exists(), tail_bytes=8_000_000,
                             big_every=1, status_every=10**9)
        time.sleep(rng.uniform(0.0, 0.2))
        _kill(proc)
        torn += _check_consistent(path).ignored_tail_bytes > 0
    print(f"kills that tore an append: {torn} of 12")


# -------------------------------------------------------------- speed


@pytest.mark.slow
def test_append_run_stays_fast_with_2000_runs(path):
    rf = ResultFile.create(path, header())
    durations = []
    for i in range(2000):
        record = run(i, stderr_tail="warning: something\n" * 10)
        start = time.perf_counter()
        rf.append_run(record)
        durations.append(time.perf_counter() - start)
    rf.close()
    first = statistics.median(durations[:100])
    last = statistics.median(durations[-100:])
    print(f"append_run median: first 100 {first * 1e3:.3f} ms, "
          f"last 100 {last * 1e3:.3f} ms, max {max(durations) * 1e3:.3f} ms")
    assert last < 0.020
    # O(1) per run: the 2000th append is not meaningfully slower than the first.
    assert last < 5 * first + 0.002
    assert len(load(path)) == 2000
