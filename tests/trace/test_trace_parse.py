"""scenc.trace.ltrace: the streaming ltrace 0.7.3 parser, on real logs.

Fixtures: the four real logs of tests/fixtures/ltrace-samples (copied from the shared folder)
and the small logs captured on this machine in tests/fixtures/trace (make_logs.sh).
"""
import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scenc.trace.events import ANOMALY_KINDS, FREE_KINDS, KINDS, AllocEvent
from scenc.trace.ltrace import ParseReport, TraceFormatError, parse, parse_file

from ltrace_samples import sample
from locations import TESTS

FIXTURES = TESTS / "fixtures" / "trace"



def run(path):
    stream = parse_file(path)
    events = list(stream)
    return events, stream.report


def kinds(events):
    return Counter(e.kind for e in events)


# ----------------------------------------------------------------------------- shared samples
def test_mt_pthread_exact_counts():
    events, rep = run(sample("mt_pthread_e.log"))
    assert kinds(events) == {"malloc": 480, "calloc": 80, "realloc": 52, "free": 1120}
    assert sum(1 for e in events if e.kind == "free" and e.old_ptr == 0) == 560
    assert len({e.tid for e in events}) == 5
    assert rep.threads == {e.tid for e in events}
    # the only anomaly is free(NULL); every <unfinished ...> found its <... resumed>
    assert rep.anomaly_counts == {"free-null": 560}
    assert rep.pending_at_end == 0
    assert not rep.crashed and not rep.incomplete and not rep.truncated
    assert rep.exit_status == 0 and set(rep.exits.values()) == {"exited 0"}
    assert rep.notation == "e" and rep.has_timestamps and rep.has_durations


def test_unfinished_resumed_pairs_are_joined():
    path = sample("mt_pthread_e.log")
    text = path.read_text().splitlines()
    events, _ = run(path)
    pairs = sum(1 for line in text if line.endswith("<unfinished ...>"))
    assert pairs == 1470 == sum(1 for line in text if "resumed>" in line)
    joined = [e for e in events if e.start_line != e.line]
    # frees take effect where they start; allocations where their result is printed
    assert all(e.kind != "free" for e in joined)
    allocs_unfinished = sum(1 for line in text if line.endswith("<unfinished ...>") and "->free(" not in line)
    assert len(joined) == allocs_unfinished
    for e in joined:
        start, end = text[e.start_line - 1], text[e.line - 1]
        tid = start.split()[0]
        assert start.endswith("<unfinished ...>") and end.split()[0] == tid
        assert f"<... {e.kind} resumed>" in end
        assert end.split("=")[1].split()[0] == hex(e.result_ptr)
    # effect order: one event per line at most, lines increasing
    lines = [e.line for e in events]
    assert lines == sorted(lines) and len(set(lines)) == len(lines)


def test_crashed_log_is_detected_as_crashed_and_incomplete():
    events, rep = run(sample("mt_pthread_crashed_e.log"))
    assert rep.crashed and rep.incomplete
    assert rep.killed_by == "SIGSEGV"
    assert rep.exit_status is None
    assert rep.count("tracee-crashed") == 5
    assert rep.first_lines("unexpected-breakpoint") == [2978]
    assert rep.count("signal") == 1
    # the main thread 18055 appears only in its '+++ killed' line
    assert 18055 in rep.threads and 18055 not in {e.tid for e in events}
    assert rep.first_lines("thread-only-in-exit-line") == [2988]
    # 18056's malloc(293 <unfinished ...> at line 2980 never came back
    assert rep.pending_at_end == 1
    assert rep.first_lines("unfinished-never-resumed") == [2980]
    assert not any(e.start_line == 2980 for e in events)
    # the '<no return ...>' free at 2977 is emitted; its later '<... free resumed>' is not an error
    assert any(e.line == 2977 and e.kind == "free" and e.old_ptr == 0x7f64ac001190 for e in events)
    assert rep.count("resumed-without-start") == 0


def test_python_libc_plt_lines_are_not_allocator_calls():
    path = sample("python_json_e.log")
    text = path.read_text().splitlines()
    libc_lines = {i for i, line in enumerate(text, 1) if "libc.so.6->" in line}
    assert len(libc_lines) == 386
    events, rep = run(path)
    assert rep.count("libc-internal-plt") == 386
    assert not libc_lines & {e.line for e in events}
    own = Counter(m.group(1) for line in text if (m := re.search(r"python3->(\w+)\(", line)))
    assert kinds(events) == own == {"malloc": 3156, "free": 3480, "realloc": 451, "calloc": 106}


def test_x_log_nested_inner_calls_are_not_double_counted():
    path = sample("alloc_mix_znow_x.log")
    text = path.read_text().splitlines()
    events, rep = run(path)
    raw = Counter(m.group(1) for line in text if (m := re.search(r" (\w+)@libc\.so\.6\(", line)))
    # every realloc(p, 0) shows its inner free(p): 150 frees too many in the raw log
    assert raw["free"] == 2854
    assert rep.count("nested-inner-call") == 150
    k = kinds(events)
    assert k["free"] == raw["free"] - 150
    assert {kind: k[kind] for kind in ("malloc", "calloc", "realloc", "memalign", "posix_memalign", "valloc")} == \
        {kind: raw[kind] for kind in ("malloc", "calloc", "realloc", "memalign", "posix_memalign", "valloc")}
    nested = rep.first_lines("nested-inner-call")
    for n in nested:      # each dropped line is a free inside an unfinished realloc(p, 0)
        assert re.search(r"realloc@libc\.so\.6\((0x[0-9a-f]+), 0 <unfinished \.\.\.>$", text[n - 2])
        assert "free@libc.so.6(" + text[n - 2].split("(")[1].split(",")[0] + ")" in text[n - 1]
    frees_as_realloc = [e for e in events if e.kind == "realloc" and e.size == 0]
    assert len(frees_as_realloc) == 150
    assert all(e.result_ptr == 0 and not e.failed and e.start_line == e.line - 2 for e in frees_as_realloc)
    failed = [e for e in events if e.failed]
    assert len(failed) == 30 == rep.count("failed-allocation")
    assert {e.kind for e in failed} == {"malloc", "calloc"}
    assert all(e.result_ptr == 0 for e in failed)
    assert rep.count("memalign-may-be-aligned-alloc") == raw["memalign"] == 300
    assert rep.notation == "x" and not rep.incomplete


def test_x_log_arguments_and_results():
    events, _ = run(sample("alloc_mix_znow_x.log"))
    by_line = {e.line: e for e in events}
    # 16754 ... posix_memalign@libc.so.6(0x7fff035efa38, 64, 200, 0x5562531414e0) = 0
    pm = by_line[20]
    assert (pm.kind, pm.align, pm.size, pm.result_ptr, pm.failed) == ("posix_memalign", 64, 200, None, False)
    # memalign@libc.so.6(128, 256, 0, 0) = 0x556253141680
    ma = by_line[21]
    assert (ma.kind, ma.align, ma.size, ma.result_ptr) == ("memalign", 128, 256, 0x556253141680)
    # valloc@libc.so.6(1000, 2, 0, 2): only the first argument is valloc's
    assert (by_line[23].kind, by_line[23].size, by_line[23].align) == ("valloc", 1000, None)
    # calloc@libc.so.6(1099511627776, 1099511627776) = 0
    c = by_line[25]
    assert (c.nmemb, c.size, c.nbytes, c.failed) == (1 << 40, 1 << 40, 1 << 80, True)
    assert by_line[1].time_s == 0.0
    assert by_line[2].time_s == pytest.approx(10.004957 - 10.004619)
    assert by_line[2].duration_s == pytest.approx(0.000110)


# ----------------------------------------------------------------------------- fixtures captured here
ALLOC_KINDS_E = {"malloc": 3, "realloc": 4, "calloc": 1, "aligned_alloc": 1, "memalign": 1, "posix_memalign": 2,
                 "valloc": 1, "reallocarray": 1, "free": 11}


@pytest.mark.parametrize("name", ["alloc_kinds_e.log", "alloc_kinds_pid_stderr.log", "alloc_kinds_r.log",
                                  "alloc_kinds_ttt_i_n.log"])
def test_every_prefix_and_timestamp_style(name):
    """TID + -tt, '[pid N]' on stderr (mixed with program output), no prefix + -r, no prefix + -ttt -i -n."""
    events, rep = run(FIXTURES / name)
    assert kinds(events) == ALLOC_KINDS_E
    assert rep.count("libc-internal-plt") == 2
    assert [e.size for e in events if e.kind == "realloc"] == [100, 5000, 50, 0]
    assert [(e.nmemb, e.size) for e in events if e.kind in ("calloc", "reallocarray")] == [(3, 7), (4, 25)]
    assert [(e.align, e.size) for e in events if e.kind in ("aligned_alloc", "memalign", "posix_memalign")] == \
        [(64, 128), (32, 64), (16, 48), (256, 300)]
    assert sum(e.failed for e in events) == 1
    assert rep.exit_status == 0 and not rep.incomplete
    single_thread = {e.tid for e in events}
    assert len(single_thread) == 1
    if name == "alloc_kinds_pid_stderr.log":
        assert single_thread != {0}
        assert rep.count("unparsable-line") == 1      # the program's own 'done (nil)' line
        assert all(e.time_s is None for e in events) and not rep.has_timestamps
    elif name == "alloc_kinds_e.log":
        assert single_thread != {0} and rep.has_timestamps and rep.has_durations
    else:
        assert single_thread == {0}                    # no -f: no thread prefix
        times = [e.time_s for e in events]
        assert times[0] == 0.0 and times == sorted(times) and times[-1] > 0
        assert rep.has_timestamps


def test_x_fixture_inner_results_and_nesting():
    events, rep = run(FIXTURES / "alloc_kinds_x.log")
    text = (FIXTURES / "alloc_kinds_x.log").read_text().splitlines()
    k = kinds(events)
    # realloc(NULL, 50) -> malloc(50); posix_memalign(16) -> malloc(48); reallocarray -> realloc -> malloc;
    # realloc(p, 0) -> free(p): five inner calls, none counted
    assert rep.count("nested-inner-call") == 5
    assert k["malloc"] == 4       # malloc(10), the failing malloc, malloc(20) and printf's buffer inside libc
    assert k["reallocarray"] == 1 and k["realloc"] == 4 and k["free"] == 11
    pm = [e for e in events if e.kind == "posix_memalign"]
    inner = re.search(r"malloc@libc\.so\.6\(48\) += (0x[0-9a-f]+)", "\n".join(text)).group(1)
    assert pm[0].result_ptr == int(inner, 16)     # taken from the inner malloc(48)
    assert pm[1].result_ptr is None and rep.count("posix-memalign-result-unknown") == 1
    ra = [e for e in events if e.kind == "reallocarray"][0]
    assert (ra.old_ptr, ra.nmemb, ra.size, ra.nbytes) == (0, 4, 25, 100) and ra.result_ptr


CXX = {"operator_new": 4, "operator_new_array": 2, "operator_delete": 4, "operator_delete_array": 2}


@pytest.mark.parametrize("name,extra,nested", [
    ("cxx_new_e.log", {}, 21),
    ("cxx_new_x.log", {"malloc": 1}, 21),
    ("cxx_new_x_demangled.log", {"malloc": 1}, 21),
    ("cxx_new_x_noL.log", {"malloc": 1}, 33),        # PLT and symbol breakpoints: every operator twice
])
def test_cxx_operators_counted_once(name, extra, nested):
    events, rep = run(FIXTURES / name)
    assert kinds(events) == {**CXX, **extra}
    assert rep.count("nested-inner-call") == nested
    news = [e for e in events if e.kind.startswith("operator_new")]
    assert [(e.size, e.align) for e in news] == [(4, None), (40, None), (40, None), (128, 64), (384, 64),
                                                 (4, None)]
    deletes = [e for e in events if e.kind.startswith("operator_delete")]
    assert [e.old_ptr for e in deletes] == [e.result_ptr for e in news]
    assert deletes[0].size == 4          # sized delete


def test_x_crash_with_empty_return_and_no_return():
    events, rep = run(FIXTURES / "mt_handoff_x_crashed.log")
    assert rep.crashed and rep.killed_by == "SIGSEGV" and rep.incomplete
    assert all(e.kind in KINDS for e in events)


# ----------------------------------------------------------------------------- robustness
def test_not_an_ltrace_log_raises_a_clear_error(tmp_path):
    f = tmp_path / "data.json"
    f.write_text("\n".join('{"key": %d, "value": "x"}' % i for i in range(40)) + "\n")
    with pytest.raises(TraceFormatError) as err:
        list(parse_file(f))
    e = err.value
    assert (e.filename, e.line, e.col) == (str(f), 1, 1)
    assert "not an ltrace log" in e.message and str(e).startswith(f"{f}:1:1: ")
    # a short file fails at its end; the column points past a recognisable prefix
    with pytest.raises(TraceFormatError) as err:
        list(parse(["1234 12:00:00.000001 hello world\n", "1234 12:00:00.000002 again\n"], "short.log"))
    assert (err.value.line, err.value.col) == (1, 22)


def test_source_code_is_not_a_log():
    with pytest.raises(TraceFormatError):
        list(parse_file(FIXTURES / "mt_handoff.c"))


def test_empty_input_is_not_an_error():
    stream = parse([], "empty")
    assert list(stream) == [] and stream.report.lines == 0 and stream.report.incomplete


def test_bytes_and_lines_without_newlines_give_the_same_events():
    path = FIXTURES / "alloc_kinds_e.log"
    expected, _ = run(path)
    as_bytes = list(parse(path.read_bytes().splitlines(keepends=True)))
    no_newlines = list(parse(path.read_text().splitlines()))
    one_string = list(parse(path.read_text()))
    assert as_bytes == expected == no_newlines == one_string


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.log")))
def test_without_times_only_the_times_differ(name):
    """times=False (scenc convert's exact replay) skips the timestamps and nothing else: the same events with
    time_s None, the same report but has_timestamps, whatever the prefix and timestamp style (-t, -tt, -ttt, -r)."""
    path = FIXTURES / name
    for extra in (False, True):
        timed, untimed = parse_file(path, extra_events=extra), parse_file(path, extra_events=extra, times=False)
        expected, got = list(timed), list(untimed)
        assert got == [e._replace(time_s=None) for e in expected]
        assert untimed.report.has_timestamps is False
        want, have = timed.report.to_dict(), untimed.report.to_dict()
        want.pop("has_timestamps"), have.pop("has_timestamps")
        assert have == want
    assert any(e.time_s is not None for e in expected) == timed.report.has_timestamps


def test_truncated_last_line_is_reported_not_used():
    text = (FIXTURES / "alloc_kinds_e.log").read_text()
    cut = text.index("= 0x", text.index("calloc(3, 7)")) + 8      # inside calloc's result pointer
    stream = parse(text[:cut].splitlines(keepends=True), "cut.log")
    events = list(stream)
    rep = stream.report
    assert rep.truncated and rep.incomplete and rep.count("truncated-line") == 1
    assert [e.kind for e in events] == ["malloc", "realloc", "realloc", "realloc"]


def test_log_starting_mid_way():
    lines = sample("mt_pthread_e.log").read_text().splitlines(keepends=True)[1000:1200]
    stream = parse(lines, "slice")
    events = list(stream)
    assert events and stream.report.count("resumed-without-start") > 0


def test_report_memory_is_bounded():
    rep = ParseReport("x", max_examples=3)
    for i in range(10_000):
        rep.add("free-null", i, "free(0)")
    assert rep.count("free-null") == 10_000 and rep.first_lines("free-null") == [0, 1, 2]
    assert set(ANOMALY_KINDS) >= {"nested-inner-call", "libc-internal-plt", "free-unknown-pointer", "tracee-crashed",
                                  "unfinished-never-resumed", "resumed-without-start", "truncated-line",
                                  "unparsable-line", "thread-only-in-exit-line", "failed-allocation", "free-null",
                                  "signal"}


def check_invariants(stream):
    """Consume a stream: either TraceFormatError or well-formed events and a consistent report."""
    try:
        events = list(stream)
    except TraceFormatError as e:
        assert e.line >= 1 and e.col >= 1 and e.message
        return None
    rep = stream.report
    last = 0
    for e in events:
        assert isinstance(e, AllocEvent) and e.kind in KINDS
        assert e.line > last and 1 <= e.start_line <= e.line <= rep.lines
        last = e.line
        if e.kind in FREE_KINDS:
            assert e.result_ptr is None and e.old_ptr is not None and not e.failed
        else:
            assert e.size is None or e.size >= 0
    assert rep.events == len(events)
    assert all(kind in ANOMALY_KINDS for kind in rep.anomaly_counts)
    return events


SNIPPET = None


def snippet_lines():
    global SNIPPET
    if SNIPPET is None:
        text = sample("mt_pthread_crashed_e.log").read_text().splitlines(keepends=True)
        x = (FIXTURES / "alloc_kinds_x.log").read_text().splitlines(keepends=True)
        SNIPPET = text[:60] + text[-14:] + x
    return SNIPPET


@pytest.mark.slow
def test_truncation_at_every_offset_never_crashes():
    """A log cut anywhere (ltrace or the machine died) gives exactly the events of its complete lines."""
    text = "".join(snippet_lines()[:40]) + "".join((FIXTURES / "cxx_new_x.log").read_text().splitlines(True)[:12])
    full = check_invariants(parse(text.splitlines(keepends=True), newlines=True))
    assert len(full) >= 20
    for cut in range(len(text) + 1):
        part = text[:cut]
        stream = parse(part.splitlines(keepends=True), "cut", newlines=True)
        events = check_invariants(stream)
        complete = part.count("\n")
        assert events == [e for e in full if e.line <= complete]
        assert stream.report.truncated == (not part.endswith("\n") and part != "")


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_line_deletions_never_crash(data):
    lines = snippet_lines()
    keep = data.draw(st.lists(st.booleans(), min_size=len(lines), max_size=len(lines)))
    check_invariants(parse([l for l, k in zip(lines, keep) if k], "deleted"))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000))
def test_random_bytes_never_crash(blob):
    check_invariants(parse(blob.splitlines(keepends=True), "random"))


TOKENS = list("0123456789 abcfx:.()<>[]=-+@,\n\r\t") + [
    "malloc", "free", "<... ", " resumed> ", "<unfinished ...>", "<no return ...>", "realloc", "->", "@libc.so.6",
    "[pid ", "+++ exited (status 0) +++", "--- SIGSEGV (x) ---", " = 0x55", "<0.0001>", "\x00", "\u00e9",
    "1234 ", "12:00:00.000001 ", "prog->malloc(", "libc.so.6->", ") = ", "_Znwm", "operator new(unsigned long)"]


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(TOKENS), max_size=16).map("".join), max_size=40))
def test_random_ltrace_like_text_never_crashes(lines):
    check_invariants(parse(lines, "fuzz"))
    check_invariants(parse([l + "\n" for l in lines], "fuzz-nl"))


def test_pending_calls_per_thread_are_bounded():
    """A thread whose calls never return (lost breakpoints) cannot make the parser's state grow."""
    lines = [f"7 12:00:00.{i:06d} p->malloc({i + 1} <no return ...>\n" for i in range(100)]
    lines += ["7 12:00:01.000000 p->free(0x10) = <void>\n", "8 12:00:01.000001 +++ exited (status 0) +++\n"]
    stream = parse(lines, "noreturn.log")
    events = list(stream)
    rep = stream.report
    assert [e.kind for e in events] == ["free"]      # a pending no-return malloc is no nesting parent
    assert rep.count("unfinished-never-resumed") == 100
    assert rep.pending_at_end == 64                  # the 36 oldest were dropped on the way
    assert rep.first_lines("unfinished-never-resumed")[0] == 1
    assert rep.first_lines("thread-only-in-exit-line") == [102]


# ----------------------------------------------------------------------------- thread lifetimes
def lifetimes(events):
    """(starts as (line, tid, creator), exits as (line, tid)) of an extra_events stream."""
    starts = [(e.line, e.tid, e.size) for e in events if e.kind == "thread_start"]
    exits = [(e.line, e.tid) for e in events if e.kind == "thread_exit"]
    return starts, exits


def test_shared_threaded_log_gives_thread_starts_and_exits_beside_the_same_calls():
    log = sample("mt_pthread_e.log")
    plain = list(parse_file(log))
    stream = parse_file(log, extra_events=True)
    events = list(stream)
    assert [e for e in events if e.kind in KINDS] == plain
    assert stream.report.events == len(plain)
    # The main thread (17829) makes its first call after its workers have exited; its exit line comes last,
    # so it is alive from the start and the workers' starts, which the log does not attribute, are its own
    # or the thread active just before.
    assert stream.leader == 17829
    starts, exits = lifetimes(events)
    assert [tid for _, tid, _ in starts] == [17830, 17833, 17832, 17831]
    assert starts[0] == (1, 17830, 17829)
    assert all(creator in (17829, 17830, 17833, 17832) for _, _, creator in starts)
    text = Path(log).read_text().splitlines()
    exit_lines = [i + 1 for i, line in enumerate(text) if "+++ exited" in line]
    assert [line for line, _ in exits] == exit_lines
    assert [tid for _, tid in exits] == [17833, 17832, 17831, 17830, 17829]
    # every start comes before its thread's first call, every exit after its last
    first = {}
    last = {}
    for i, e in enumerate(events):
        first.setdefault(e.tid, i)
        last[e.tid] = i
    for i, e in enumerate(events):
        if e.kind == "thread_start":
            assert first[e.tid] == i
        elif e.kind == "thread_exit":
            assert last[e.tid] == i


CLONES_LOG = """\
100 10:00:00.000001 prog->malloc(16) = 0x1000 <0.000001>
100 10:00:00.000002 SYS_435(0x7ffc, 88, 0x7fb2, 8) = 101 <0.000001>
101 10:00:00.000003 prog->malloc(32) = 0x2000 <0.000001>
100 10:00:00.000004 SYS_435(0x7ffc, 88, 0x7fb2, 8 <unfinished ...>
102 10:00:00.000005 prog->free(0x1000) = <void> <0.000001>
100 10:00:00.000006 <... SYS_435 resumed> ) = 102 <0.000001>
101 10:00:00.000007 prog->free(0x2000) = <void> <0.000001>
101 10:00:00.000008 SYS_exit(0 <unfinished ...>
102 10:00:00.000009 prog->pthread_create(0x7ffc, 0, 0x5555, 0) = 0 <0.000001>
101 10:00:00.000010 +++ exited (status 0) +++
103 10:00:00.000011 prog->malloc(8) = 0x3000 <0.000001>
104 10:00:00.000012 prog->malloc(8) = 0x4000 <0.000001>
103 10:00:00.000013 +++ exited (status 0) +++
104 10:00:00.000014 +++ exited (status 0) +++
102 10:00:00.000015 +++ exited (status 0) +++
100 10:00:00.000016 SYS_exit_group(0 <no return ...>
100 10:00:00.000017 +++ exited (status 0) +++
"""


def test_creators_come_from_clone_results_and_pthread_create_else_the_last_active_thread():
    stream = parse(CLONES_LOG, extra_events=True)
    events = list(stream)
    starts, exits = lifetimes(events)
    assert starts == [
        (2, 101, 100),        # clone3 (-S: SYS_435) returned the new thread's id
        (5, 102, 100),        # its clone was still running when the thread printed its first line
        (11, 103, 102),       # the next thread after 102's pthread_create
        (12, 104, 103),       # nothing says who made it: the thread active just before
    ]
    # A thread ends at its own exit call (-S) when the log shows it, else at its '+++ exited' line.
    assert exits == [(8, 101), (13, 103), (14, 104), (15, 102), (17, 100)]
    assert [e.kind for e in events if e.kind in KINDS] == ["malloc", "malloc", "free", "free", "malloc", "malloc"]
    assert stream.report.events == 6 and stream.report.other_calls == 5
