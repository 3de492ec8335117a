"""`scenc run --shard K/N` and `scenc merge`: a plan split by cells, run in separate
processes, put back together; and every way the parts can fail to fit, reported plainly.

Real runs under real allocators throughout. What a test cannot get on one machine --
a second machine, or two shards that dealt differently -- it fakes by editing a
shard file's header, and says so where it does. No test compares allocators' speed.
"""

import json
import signal
import subprocess
import time
from collections import Counter

import pytest

from scenc.run import cells
from scenc.report.analysis import analyze
from scenc.run.resultfile import load
from harness_support import SCENC, read_lines, scenc, write_scenario

PLAN = ("--allocators", "glibc,jemalloc", "--param", "iterations=1000,3000", "--param", "threads=1,2",
        "--runs", 3, "--seed", 11)


def run_shards(tmp_path, scenario, count=3, extra=()):
    """Every shard at once, each `scenc run` its own process, as a scheduler would start them."""
    procs = [subprocess.Popen([*SCENC, "run", str(scenario), *map(str, PLAN), *map(str, extra),
                               "--shard", f"{k}/{count}", "-o", str(tmp_path / f"s{k}.json"), "-q"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k in range(1, count + 1)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    return [tmp_path / f"s{k}.json" for k in range(1, count + 1)]


def record_identity(record):
    """A run record with its timings aside: what must be equal sharded or not."""
    return (record.allocator, json.dumps(record.params, sort_keys=True), record.probe_set,
            record.round, bool(record.warmup), record.status,
            tuple(sorted(record.metrics)), record.metrics.get("failed_allocs"))


def analysis_shape(result):
    """The analysis without its numbers: cells, allocators, run counts, metrics, comparisons."""
    return [(json.dumps(b.params, sort_keys=True), b.probe_set, b.machine,
             [(a.name, a.n, a.failures, sorted(a.samples), sorted(a.summaries)) for a in b.allocators],
             {m: sorted(by) for m, by in b.comparisons.items()}, sorted(b.verdicts))
            for b in analyze(result).cells]


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("shards")
    scenario = write_scenario(tmp_path)
    whole = tmp_path / "whole.json"
    done = scenc("run", scenario, *PLAN, "-o", whole, "-q", timeout=300)
    assert done.returncode == 0, done.stderr
    parts = run_shards(tmp_path, scenario)
    return tmp_path, scenario, whole, parts


@pytest.mark.slow
def test_three_shards_merged_are_the_unsharded_run(sharded):
    tmp_path, _, whole, parts = sharded
    merged_path = tmp_path / "merged" / "all.json"  # elsewhere than the shards
    done = scenc("merge", *parts, "-o", merged_path)
    assert done.returncode == 0, done.stderr
    merged, unsharded = load(merged_path), load(whole)
    assert merged.status == "complete"
    # The runs' kept files are found from the merged file.
    kept = [r.run_dir for r in merged.runs if r.run_dir]
    assert len(kept) == len([r for r in unsharded.runs if r.run_dir]) > 0
    assert all((merged_path.parent / d).is_dir() for d in kept)
    # Same plan, the same cells, each run once, the whole dealt among the shards.
    assert merged.header["plan"] == unsharded.header["plan"]
    dealt = [k for p in parts for k in load(p).header["shard"]["blocks"]]
    assert sorted(dealt) == sorted(cells.plan_cells(unsharded.header["plan"])) and len(dealt) == 4
    assert all(load(p).header["shard"]["blocks"] for p in parts)  # 4 cells, 3 shards: none idle
    # The same records, timings aside, and the same analysis, numbers aside.
    assert Counter(map(record_identity, merged.runs)) == Counter(map(record_identity, unsharded.runs))
    assert analysis_shape(merged) == analysis_shape(unsharded)
    # One machine: nothing says otherwise, reports and CSV read it like any file.
    assert not cells.machines(merged.header)
    report = scenc("report", merged_path, "--csv", tmp_path / "all.csv", "--plots", tmp_path / "plots")
    assert report.returncode == 0, report.stderr
    assert "machine" not in report.stdout
    assert report.stdout.count("== tiny") == 4
    rows = (tmp_path / "all.csv").read_text().splitlines()
    assert len(rows) > len(merged.runs)
    assert not any("across" in p.name for p in (tmp_path / "plots").iterdir())


@pytest.mark.slow
def test_every_shard_deals_the_same_cells(sharded):
    _, _, _, parts = sharded
    headers = [load(p).header["shard"] for p in parts]
    assert all(h["dealing"] == headers[0]["dealing"] and h["weights"] == headers[0]["weights"]
               for h in headers)
    assert [h["blocks"] for h in headers] == headers[0]["dealing"]
    # A shard's own plan has only its cells: --resume and the reports need nothing else.
    for path, h in zip(parts, headers):
        own = {cells.cell_key(c["params"], c["probe_set"]) for c in load(path).header["plan"]["configs"]}
        assert own == set(h["blocks"])


@pytest.mark.slow
def test_a_missing_shard_is_named_and_nothing_is_written(sharded):
    tmp_path, _, _, parts = sharded
    out = tmp_path / "missing.json"
    done = scenc("merge", parts[0], parts[2], "-o", out)
    assert done.returncode == 64
    assert "shard 2/3 missing" in done.stderr
    lost = load(parts[1]).header["shard"]["blocks"]
    assert f"{len(lost)} of 4 cells missing: {cells.cell_label(lost[0])}" in done.stderr
    assert not out.exists()
    # Asked for, the part that is there is merged, and says it is not whole.
    done = scenc("merge", parts[0], parts[2], "-o", out, "--allow-missing")
    assert done.returncode == 0, done.stderr
    assert "missing" in done.stderr
    assert load(out).status == "interrupted"
    assert "(result file status: interrupted" in scenc("report", out).stdout


def test_a_duplicated_shard_is_refused(sharded):
    tmp_path, _, _, parts = sharded
    done = scenc("merge", parts[0], parts[0], parts[1], parts[2], "-o", tmp_path / "dup.json")
    assert done.returncode == 64
    assert f"shard 1/3 is given twice: {parts[0]}, {parts[0]}" in done.stderr
    assert not (tmp_path / "dup.json").exists()


def test_a_cell_run_by_two_shards_is_refused(sharded):
    # Faked: shard 3's header is edited to claim one of shard 1's cells, as a shard that
    # weighed the cells differently would.
    tmp_path, _, _, parts = sharded
    lines = parts[2].read_text().splitlines()
    header = json.loads(lines[0])
    stolen = load(parts[0]).header["shard"]["blocks"][0]
    header["shard"]["blocks"].append(stolen)
    fake = tmp_path / "s3-fake.json"
    fake.write_text("\n".join([json.dumps(header)] + lines[1:]) + "\n")
    done = scenc("merge", parts[0], parts[1], fake, "-o", tmp_path / "x.json")
    assert done.returncode == 64
    assert f"cell {cells.cell_label(stolen)} was run by shards 1/3 ({parts[0]}) and 3/3 ({fake})" \
        in done.stderr


@pytest.mark.slow
def test_a_shard_of_another_plan_is_refused(sharded):
    tmp_path, scenario, _, parts = sharded
    other = tmp_path / "other.json"
    done = scenc("run", scenario, *PLAN, "--warmup", 0, "--shard", "2/3", "-o", other, "-q", timeout=300)
    assert done.returncode == 0, done.stderr
    done = scenc("merge", parts[0], other, parts[2], "-o", tmp_path / "x.json")
    assert done.returncode == 64
    assert f"{other} is a shard of another plan than {parts[0]}: the plan" in done.stderr
    # Nor is a file run without --shard a part of anything.
    unsharded = tmp_path / "whole.json"
    done = scenc("merge", parts[0], unsharded, "-o", tmp_path / "x.json")
    assert done.returncode == 64
    assert f"{unsharded} is not a shard" in done.stderr


@pytest.mark.slow
def test_two_machines_are_analysed_apart(sharded):
    # Faked: a second machine is not available here, so shard 2's header says it ran on
    # another host (only the hostname differs).
    tmp_path, _, _, parts = sharded
    lines = parts[1].read_text().splitlines()
    header = json.loads(lines[0])
    header["machine"]["hostname"] = "node-b"
    fake = tmp_path / "s2-node-b.json"
    fake.write_text("\n".join([json.dumps(header)] + lines[1:]) + "\n")
    out = tmp_path / "two.json"
    done = scenc("merge", parts[0], fake, parts[2], "-o", out)
    assert done.returncode == 0, done.stderr
    assert "ran on 2 machines" in done.stderr and "m2 = node-b (shard 2)" in done.stderr
    result = load(out)
    on_b = {cells.cell_key(p, s) for p, s in
            ((b["params"], b["probe_set"]) for b in result.header["block_machines"] if b["machine"] == "m2")}
    assert on_b == set(header["shard"]["blocks"])
    analysis = analyze(result)
    assert {b.machine for b in analysis.cells} == {"m1", "m2"}
    assert all((cells.cell_key(b.params, b.probe_set) in on_b) == (b.machine == "m2")
               for b in analysis.cells)
    report = scenc("report", out, "--plots", tmp_path / "two-plots")
    assert report.returncode == 0, report.stderr
    assert "(machine m2: node-b) ==" in report.stdout and "ran on 2 machines" in report.stdout
    names = [p.name for p in (tmp_path / "two-plots").iterdir()]
    # Every figure that spans cells is drawn per machine; none puts both together.
    assert any(n.startswith("tiny-m1-") for n in names) and any(n.startswith("tiny-m2-") for n in names)
    assert not any(n.startswith("tiny-wall") or "across" in n for n in names)
    report = scenc("report", out, "--plots", tmp_path / "across", "--across-machines")
    assert "warning: --across-machines" in report.stderr
    assert any("across-machines" in p.name for p in (tmp_path / "across").iterdir())
    assert "ran on 2 machines" in scenc("compare", out, parts[0]).stdout


@pytest.mark.slow
def test_a_killed_shard_resumes(tmp_path):
    scenario = write_scenario(tmp_path)
    out = tmp_path / "s1.json"
    proc = subprocess.Popen([*SCENC, "run", str(scenario), "--allocators", "glibc,jemalloc",
                             "--param", "iterations=20000,30000", "--runs", "40", "--seed", "3",
                             "--shard", "1/2", "-o", str(out), "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not out.exists() or len(read_lines(out)) < 4):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert f"scenc run --resume {out}" in err
    assert load(out).status == "interrupted"
    assert "--shard" in scenc("run", "--resume", out, "--shard", "1/2").stderr  # the file knows it
    done = scenc("run", "--resume", out, "-q", timeout=300)
    assert done.returncode == 0, done.stderr
    result = load(out)
    assert result.status == "complete" and result.header["shard"]["index"] == 1
    configs = result.header["plan"]["configs"]
    assert len(configs) == 2  # one cell (one param set, both allocators)
    assert Counter((r.allocator, r.round) for r in result.runs if not r.warmup) == \
        Counter((c["allocator"], n) for c in configs for n in range(1, 41))


@pytest.mark.parametrize("spec", ["0/3", "4/3", "3", "a/b", "1/0"])
def test_a_bad_shard_is_a_usage_error(tmp_path, spec):
    done = scenc("run", write_scenario(tmp_path), "--shard", spec)
    assert done.returncode == 64  # a usage error, like every malformed option of `scenc run`
    assert f"argument --shard: --shard {spec!r}:" in done.stderr


def test_dealing_is_balanced_and_a_function_of_the_weights():
    weights = [9, 1, 8, 2, 7, 3, 5, 5]
    hands = cells.deal(weights, 3)
    assert sorted(i for h in hands for i in h) == list(range(len(weights)))
    totals = [sum(weights[i] for i in h) for h in hands]
    assert max(totals) - min(totals) <= max(weights) / 2
    assert cells.deal(weights, 3) == hands
    assert cells.deal([1, 1], 3)[2] == []  # more shards than cells: some have none


@pytest.mark.slow
def test_shards_without_a_seed_still_make_one_plan(tmp_path):
    # A random run-order seed per shard would make each a plan of its own.
    scenario = write_scenario(tmp_path)
    parts = []
    for k in (1, 2):
        out = tmp_path / f"n{k}.json"
        done = scenc("run", scenario, "--allocators", "glibc", "--param", "iterations=500,700",
                     "--runs", 1, "--warmup", 0, "--shard", f"{k}/2", "-o", out, "-q")
        assert done.returncode == 0, done.stderr
        parts.append(out)
    done = scenc("merge", *parts, "-o", tmp_path / "n.json")
    assert done.returncode == 0, done.stderr
    assert len(load(tmp_path / "n.json").runs) == 2


@pytest.mark.slow
def test_a_program_after_dashes_is_not_sharded(tmp_path):
    # The program is measured beside its scenario in one session; a shard would part them.
    done = scenc("run", write_scenario(tmp_path), "--shard", "1/2", "--", "/bin/true")
    assert done.returncode == 64
    assert "a program after `--` is measured beside its scenario in one session" in done.stderr
    assert not list(tmp_path.glob("*.json"))
