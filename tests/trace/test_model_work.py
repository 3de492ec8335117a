"""The program's time between calls in a fitted model (`work`): a real capture, with the preload tracer, of
tests/fixtures/model/work_between.c (built here by gcc), whose main thread works WORK units of `work`'s own
chain between each call and the next while a second thread sleeps 3 ms between its calls. Both collectors
see the same times; the model's main group works about WORK units a call, the waiting thread none. The unit
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


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    d = tmp_path_factory.mktemp("work_between")
    binary = d / "work_between"
    subprocess.run(["gcc", "-O2", "-pthread", "-Wall", "-Wextra", "-Werror", "-o", str(binary), str(SOURCE)],
                   check=True, capture_output=True)
    path = d / "work.trace"
    assert capture_preload([str(binary)], path).ok
    return path


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
def test_the_model_works_between_calls_as_the_program_did_and_not_while_waiting(trace, tmp_path):
    model = write_model(None, tmp_path / "m.scn", source_name=trace.name, collector=collect_tracer_log(trace),
                        clock="preload")
    assert "work(" not in model.text            # not measured yet: no work
    cost = fit_work(model)
    assert cost is not None and cost.unit_ns > 0
    writer = model.writer
    per_call = {g.name: writer.work_by_group.get(g.name, 0) / (g.summaries[0].total.c["events"] or 1)
                for g in writer.groups}
    busy = max(writer.groups, key=lambda g: g.summaries[0].total.c["events"])
    waiter = min(writer.groups, key=lambda g: g.summaries[0].total.c["events"])
    assert busy is not waiter
    assert WORK / 2 <= per_call[busy.name] <= WORK * 6, per_call
    # 3 ms asleep is waiting, not work: the waiter's 40 calls slept 120 ms, its work is a trace of that
    assert writer.work_by_group.get(waiter.name, 0) * cost.unit_ns < 0.01 * 120e6, per_call
    assert "work(" in model.text and "time between calls: kept as `work(n)`" in model.text


def test_a_capture_without_a_tracer_clock_gets_no_work(tmp_path):
    trace = next(iter(sorted((FIXTURES / "trace").glob("*.trace"))))
    model = write_model(TraceSource(trace, extra_events=True).events, tmp_path / "m.scn", source_name=trace.name,
                        clock="ltrace")
    assert fit_work(model) is None and "work(" not in model.text
    assert "time between calls: dropped (ltrace's clock" in model.text.replace("\n#     ", " ")
