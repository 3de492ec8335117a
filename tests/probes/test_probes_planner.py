"""The probe planner: fewest runs, no probe beside one that would falsify it,
forced mixes refused with the reason; and the `scenc probes` listing."""

import itertools
import subprocess
import sys

import pytest

from scenc import probes
from scenc.probes.planner import ProbeConflict, conflict, plan, plan_spec

SCENC = [sys.executable, "-c", "import sys; from scenc.cli import main; sys.exit(main())"]


def scenc(*args):
    return subprocess.run([*SCENC, *args], capture_output=True, text=True, timeout=60)


def _run_of(p, name):
    return next(i for i, run in enumerate(p.runs) if name in run)


def _assert_sound(p, selected):
    """Every selected probe in exactly one run, and no conflict inside a run."""
    seen = [n for run in p.runs for n in run]
    assert sorted(seen) == sorted(set(selected))
    for run in p.runs:
        for a, b in itertools.combinations(run, 2):
            assert conflict(a, b) is None, (a, b, p.runs)


def test_layout_is_kept_apart_from_time():
    p = plan(["time", "layout"])
    assert len(p.runs) == 2
    assert _run_of(p, "time") != _run_of(p, "layout")
    assert any("layout perturbs" in r and "time" in r for r in p.reasons)
    assert "layout" in p.explain() and "kept apart" in p.explain()


def test_default_selection_is_one_run_of_time_and_memory():
    p = plan_spec(None)
    assert p.runs == (("time", "memory"),)
    assert p.probe_sets == ["time+memory"]
    assert p.reasons == ()


def test_four_probes_need_three_runs_and_memory_goes_with_time():
    # time, latency and layout disturb one another pairwise: three runs is the minimum.
    p = plan(["time", "memory", "layout", "latency"])
    _assert_sound(p, ["time", "memory", "layout", "latency"])
    assert len(p.runs) == 3
    assert _run_of(p, "memory") == _run_of(p, "time")
    assert p.probe_sets[0] == "time+memory"


def test_memory_is_paired_with_live_for_the_fragmentation_ratio():
    # time,memory | live and time | memory,live both take two runs; the planner
    # keeps memory with live, so peak RSS and peak live bytes come from one run.
    p = plan(["time", "memory", "live"])
    assert len(p.runs) == 2
    assert _run_of(p, "memory") == _run_of(p, "live")


@pytest.mark.parametrize("size", range(1, len(probes.PROBES) + 1))
def test_every_selection_gets_a_sound_plan_with_the_fewest_runs(size):
    names = list(probes.PROBES)
    for selected in itertools.combinations(names, size):
        p = plan(list(selected))
        _assert_sound(p, selected)
        # No plan with fewer runs exists: check every assignment of one fewer run.
        k = len(p.runs) - 1
        if k >= 1:
            for colours in itertools.product(range(k), repeat=len(selected)):
                runs = {}
                for name, c in zip(selected, colours):
                    runs.setdefault(c, []).append(name)
                clean = all(conflict(a, b) is None for run in runs.values()
                            for a, b in itertools.combinations(run, 2))
                assert not clean, (selected, runs)


def test_forced_mix_is_refused_with_the_reason():
    with pytest.raises(ProbeConflict) as info:
        plan(["time", "layout"], force=True)
    message = str(info.value)
    assert "layout perturbs time" in message
    assert "false" in message
    assert "--probes time,layout" in message  # what to do instead


def test_plus_forces_a_run_and_commas_plan_freely():
    with pytest.raises(ProbeConflict):
        plan_spec("time+latency")
    with pytest.raises(ProbeConflict):
        plan_spec("memory,time+layout")
    p = plan_spec("memory+live,time")
    assert ("memory", "live") in p.runs
    # A harmless forced pair is kept together even where the planner would not need it.
    p = plan_spec("time+counters,memory")
    assert _run_of(p, "time") == _run_of(p, "counters")


def test_forcing_compatible_probes_together_is_allowed():
    p = plan(["time", "memory", "counters"], force=True)
    assert p.runs == (("time", "memory", "counters"),)


def test_unknown_probe_names_the_known_ones():
    with pytest.raises(probes.ProbeError) as info:
        plan_spec("time,layuot")
    assert "layuot" in str(info.value) and "layout" in str(info.value)


def test_set_names_are_canonical():
    assert probes.set_name(["layout", "time"]) == "time+layout"
    assert probes.set_members("memory+time") == ["time", "memory"]
    assert [c.name for c in probes.c_parts("time+memory")] == ["time", "memory"]


def test_declarations_are_consistent():
    for p in probes.PROBES.values():
        assert p.perturbs <= set(probes.ASPECTS), p.name
        assert p.sensitive_to <= set(probes.ASPECTS), p.name
        assert p.description and p.cost
        if p.perturbs:
            assert p.perturbation, f"{p.name} must say how it perturbs, for the plan's reasons"
    # The figures the design is about: layout and latency falsify time.
    assert conflict("layout", "time") and conflict("latency", "time") and conflict("live", "time")
    assert conflict("time", "memory") is None


def test_scenc_probes_lists_every_probe_with_cost_and_conflicts():
    out = scenc("probes")
    assert out.returncode == 0, out.stderr
    for name in probes.PROBES:
        assert f"\n{name}" in "\n" + out.stdout
    assert out.stdout.count("costs:") == len(probes.PROBES)
    assert out.stdout.count("not in a run with:") == len(probes.PROBES)


def test_scenc_probes_plan_and_refusal_from_the_command_line():
    out = scenc("probes", "--plan", "time,memory,layout,latency")
    assert out.returncode == 0, out.stderr
    assert "3 runs" in out.stdout and "run 1: time+memory" in out.stdout
    bad = scenc("probes", "--plan", "time+layout")
    assert bad.returncode == 64
    assert "refusing" in bad.stderr and "Traceback" not in bad.stderr
