"""The program's time between calls in a fitted model (`work`): real captures, with the preload tracer, of
tests/fixtures/model/work_between.c (built here by gcc), whose main thread works WORK units of `work`'s own
chain between each call and the next; with `waiter` a second thread sleeps 3 ms between its calls; with `long`
the main thread makes LONG_CALLS calls LONG units apart (over 1 ms each). Both collectors see the same times:
the CPU time each thread ran between its calls, on its CPU clock (tracer logs of version 6), so the sleeping
thread's waits are not work, the computing thread's are, and so are computations over 1 ms. A unit of the
chain takes 3 cycles at least (a dependent multiply and add): 0.6 ns at 5 GHz, so CPU times are bounded below
at 0.3 ns a unit, a bound no machine's speed or load can break (no wall time is asserted). The model alone
works about WORK units a call; the unit and the model's call cost are measured as the least of 3 runs, which
load does not change much, so the bounds are 1/2x and 3x.
tests/fixtures/model/work_long_v5.trace is `work_between long` captured by the tracer of version 5 (no CPU
clock): it still converts, with the wall-clock rule. A thread that waits on a channel in its phase is charged
its CPU time there, not its waits.
"""

import re
import statistics
import subprocess

import pytest

from scenc.trace.capture.preload import capture_preload
from scenc.trace.model import fit_work, write_model
from scenc.trace.model.collect import Collector
from scenc.trace.model.native import collect_tracer_log
from scenc.trace.model.work import MEASURE_RUNS, TRACED_PAIRS_MAX, measure_cost
from scenc.trace.source import TraceSource

from locations import FIXTURES

SOURCE = FIXTURES / "model" / "work_between.c"
WORK, LONG, LONG_CALLS = (int(re.search(rf"#define {name} (\d+)", SOURCE.read_text()).group(1))
                          for name in ("WORK", "LONG", "LONG_CALLS"))
OLD_LOG = FIXTURES / "model" / "work_long_v5.trace"
UNIT_NS_AT_LEAST = 0.3
ASLEEP_NS = 40 * 3_000_000      # the waiter's 40 sleeps of 3 ms


def _capture(tmp_path_factory, name, *args):
    d = tmp_path_factory.mktemp(name)
    binary = d / "work_between"
    subprocess.run(["gcc", "-O2", "-pthread", "-Wall", "-Wextra", "-Werror", "-o", str(binary), str(SOURCE)],
                   check=True, capture_output=True)
    path = d / "work.trace"
    assert capture_preload([str(binary), *args], path).ok
    return path


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    """The main thread and the waiting one."""
    return _capture(tmp_path_factory, "work_between", "waiter")


@pytest.fixture(scope="module")
def alone(tmp_path_factory):
    """The main thread alone."""
    return _capture(tmp_path_factory, "work_alone")


def gaps_by_thread(col):
    return {tid: (sum(tw.c["gaps"] for tw in tws if tw), sum(tw.c["gap_ns"] for tw in tws if tw))
            for tid, tws in col.thread_windows.items()}


def both_collectors(trace):
    """The time between calls by thread, the same from both collectors, and whether it was on CPU clocks."""
    py = Collector().consume(TraceSource(trace, extra_events=True).events)
    py.finish()
    c = collect_tracer_log(trace)
    assert gaps_by_thread(py) == gaps_by_thread(c) and py.has_cpu == c.has_cpu
    return gaps_by_thread(c), c.has_cpu


def test_the_computing_thread_has_its_cpu_time_between_calls_and_the_sleeping_one_next_to_none(trace):
    gaps, on_cpu = both_collectors(trace)
    assert on_cpu
    busy, asleep = sorted(gaps.values(), key=lambda g: -g[0])
    assert busy[0] > 19000 and busy[1] >= (busy[0] - 1) * WORK * UNIT_NS_AT_LEAST
    assert asleep[0] >= 39 and asleep[1] < ASLEEP_NS / 20, asleep     # its 120 ms asleep are not work


def test_a_computation_over_a_millisecond_between_calls_is_counted(tmp_path_factory):
    gaps, on_cpu = both_collectors(_capture(tmp_path_factory, "work_long", "long"))
    ((calls, ns),) = gaps.values()
    assert on_cpu and calls == LONG_CALLS - 1
    assert ns >= (LONG_CALLS - 1) * LONG * UNIT_NS_AT_LEAST, ns     # each over 1 ms: waits by the wall clock


@pytest.mark.slow           # builds and runs a unit loop and the model (3 times each, and under the tracer)
def test_the_model_works_between_calls_as_the_program_did(alone, tmp_path):
    model = write_model(None, tmp_path / "m.scn", source_name=alone.name, collector=collect_tracer_log(alone),
                        clock="preload")
    assert "work(" not in model.text            # not measured yet: no work
    cost = fit_work(model)
    assert cost is not None and cost.unit_ns > 0
    # the tracer's cost of a call was measured on the model, alone and under the tracer (a capture with CPU
    # clocks): the median of the pairs' differences, from MEASURE_RUNS pairs at least
    assert cost.tracer_ns is not None and 0 <= cost.tracer_ns < 10_000, cost.tracer_ns
    pairs = cost.tracer_pairs
    assert MEASURE_RUNS <= len(pairs) <= TRACED_PAIRS_MAX and pairs == sorted(pairs)
    assert cost.tracer_ns == max(0.0, statistics.median(pairs))
    assert f"the median of {len(pairs)} pairs of runs" in model.text.replace("\n#     ", " ")
    (group,) = model.writer.groups
    per_call = model.writer.work_by_group.get(group.name, 0) / group.summaries[0].total.c["events"]
    assert WORK / 2 <= per_call <= WORK * 6, per_call
    assert "work(" in model.text and "time between calls: kept as `work(n)`" in model.text


@pytest.mark.slow
def test_threads_alive_at_once_get_work_for_their_cpu_time(trace, tmp_path):
    model = write_model(None, tmp_path / "m.scn", source_name=trace.name, collector=collect_tracer_log(trace),
                        clock="preload")
    cost = fit_work(model)
    assert cost is not None and "on the threads' CPU clocks" in model.text.replace("\n#     ", " ")
    groups = sorted(model.writer.groups, key=lambda g: -g.summaries[0].total.c["events"])
    assert len(groups) == 2, [g.name for g in groups]
    busy, asleep = ((model.writer.work_by_group.get(g.name, 0), g.summaries[0].total.c["events"]) for g in groups)
    assert WORK / 2 <= busy[0] / busy[1] <= WORK * 3, busy
    assert asleep[0] * cost.unit_ns < ASLEEP_NS / 20, asleep       # next to none of its sleep became work


def test_a_log_without_cpu_clocks_still_converts_with_the_wall_clock_rule(tmp_path):
    gaps, on_cpu = both_collectors(OLD_LOG)
    ((calls, ns),) = gaps.values()
    # the tracer of version 5 read its clock only at the chunk's first record here: 40 calls look back to back
    assert not on_cpu and calls == LONG_CALLS - 1 and ns < 1_000_000
    model = write_model(None, tmp_path / "m.scn", source_name=OLD_LOG.name, collector=collect_tracer_log(OLD_LOG),
                        clock="preload")
    assert "which have no CPU clock (a tracer log before version 6)" in model.text.replace("\n#     ", " ")


def test_a_capture_without_a_tracer_clock_gets_no_work(tmp_path):
    trace = next(iter(sorted((FIXTURES / "trace").glob("*.trace"))))
    model = write_model(TraceSource(trace, extra_events=True).events, tmp_path / "m.scn", source_name=trace.name,
                        clock="ltrace")
    assert fit_work(model) is None and "work(" not in model.text
    assert "time between calls: dropped (ltrace's clock" in model.text.replace("\n#     ", " ")


WAITING_PHASE = """\
scenario "a_waiting_phase"
channel q capacity 4
thread maker {
    measure "phase 1" {
        repeat 400 { send(q, malloc(64))  work(500000) }
    }
}
thread taker {
    measure "phase 1" {
        repeat 400 { free(recv(q)) }
    }
}
"""


def test_a_phase_costs_its_calls_their_cpu_time_not_the_threads_waits(tmp_path):
    """The taker is in its phase as long as the maker (it waits on the channel for each object), but runs next
    to nothing: its cost of a call is its block's CPU time, or its waits would be taken off the program's time
    between calls as if calls cost them. The maker works 400 x 500,000 units (60 ms at least) in its block.
    A wait on an empty channel spins and yields the CPU 128 times before it sleeps (runtime/channel.h), which
    is CPU time: with 50,000 units between sends (about 55 us) the taker spun through most of each wait, and
    its CPU time was 0.35-0.6x the maker's from run to run; ten times longer waits leave the spinning a small
    share."""
    scn = tmp_path / "waiting.scn"
    scn.write_text(WAITING_PHASE)
    cost = measure_cost(scn)
    maker, taker = cost.phase_ns[("maker", 1)], cost.phase_ns[("taker", 1)]
    assert maker >= 400 * 500_000 * UNIT_NS_AT_LEAST, maker
    assert taker < maker / 4, (taker, maker)
