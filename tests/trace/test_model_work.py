"""The program's time between calls in a fitted model (`work`): real captures, with the preload tracer, of
tests/fixtures/model/work_between.c (built here by gcc), whose main thread works WORK units of `work`'s own
chain between each call and the next; with an argument a second thread sleeps 3 ms between its calls.
Both collectors see the same times. Alone, the model works about WORK units a call; with the second thread
it gets no work (threads alive at once: the tracer spreads the time between two of its clock readings over
their calls, so waits and work look alike). The unit
and the model's call cost are measured as the least of 3 runs, which load does not change much; the capture's
times between calls grow with the load (its thread waits for a CPU between two calls: 2.8x WORK at a load of
6.5 on 2 CPUs), so the bound above is generous (6x) and the one below (1/2) is what the fit must reach.
"""

import re
import subprocess

import pytest

from scenc.trace.capture.preload import capture_preload
from scenc.trace.model import fit_work, write_model
from scenc.trace.model.collect import Collector
from scenc.trace.model.native import collect_tracer_log
from scenc.trace.source import TraceSource

from locations import FIXTURES

SOURCE = FIXTURES / "model" / "work_between.c"
WORK = int(re.search(r"#define WORK (\d+)", SOURCE.read_text()).group(1))


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


def test_both_collectors_see_the_same_time_between_calls(trace):
    py = Collector().consume(TraceSource(trace, extra_events=True).events)
    py.finish()
    c = collect_tracer_log(trace)
    assert gaps_by_thread(py) == gaps_by_thread(c)
    busy = max(gaps_by_thread(c).values(), key=lambda g: g[0])
    assert busy[0] > 19000 and busy[1] > 0          # the main thread's 20000 calls: their gaps are seen


@pytest.mark.slow           # builds and runs a unit loop and the model (3 times each)
def test_the_model_works_between_calls_as_the_program_did(alone, tmp_path):
    model = write_model(None, tmp_path / "m.scn", source_name=alone.name, collector=collect_tracer_log(alone),
                        clock="preload")
    assert "work(" not in model.text            # not measured yet: no work
    cost = fit_work(model)
    assert cost is not None and cost.unit_ns > 0
    (group,) = model.writer.groups
    per_call = model.writer.work_by_group.get(group.name, 0) / group.summaries[0].total.c["events"]
    assert WORK / 2 <= per_call <= WORK * 6, per_call
    assert "work(" in model.text and "time between calls: kept as `work(n)`" in model.text


@pytest.mark.slow
def test_threads_alive_at_once_get_no_work(trace, tmp_path):
    model = write_model(None, tmp_path / "m.scn", source_name=trace.name, collector=collect_tracer_log(trace),
                        clock="preload")
    assert fit_work(model) is None and "work(" not in model.text
    assert "time between calls: dropped (threads alive at once in the capture" in model.text.replace("\n#     ", " ")


def test_a_capture_without_a_tracer_clock_gets_no_work(tmp_path):
    trace = next(iter(sorted((FIXTURES / "trace").glob("*.trace"))))
    model = write_model(TraceSource(trace, extra_events=True).events, tmp_path / "m.scn", source_name=trace.name,
                        clock="ltrace")
    assert fit_work(model) is None and "work(" not in model.text
    assert "time between calls: dropped (ltrace's clock" in model.text.replace("\n#     ", " ")
