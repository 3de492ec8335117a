"""scenc.trace.ltrace: the fast path (str.split on the common line shapes) reads every line exactly as the
regexes do. Each log is parsed both ways (``_Parser.fast_path`` off: every line goes to the regexes) and the
event streams, the reports and the errors must be identical.

Logs: every ltrace fixture of the repository (tests/fixtures/trace, tests/fixtures/ltrace-samples), a log of
bench/bench_trace_parse.py's generator, hand-made lines of every shape ltrace prints (and near misses), and
those logs with their lines mutated at random (a fixed seed: the same mutations on every run).
"""
import importlib.util
import random
from pathlib import Path

import pytest

from scenc.trace import ltrace
from scenc.trace.ltrace import TraceFormatError, parse, parse_file

from ltrace_samples import NAMES, sample
from locations import REPO, TESTS

ROOT = REPO
FIXTURES = TESTS / "fixtures" / "trace"
OPTIONS = [dict(extra_events=False, times=True), dict(extra_events=True, times=False),
           dict(extra_events=True, times=True)]


def outcome(read, fast: bool, **options):
    """(events, report, error) of one reading, with the fast path on or off."""
    saved = ltrace._Parser.fast_path
    ltrace._Parser.fast_path = fast
    try:
        stream = read(**options)
        events, error = [], None
        try:
            for batch in stream.batches():
                events.extend(tuple(e) for e in batch)
        except TraceFormatError as e:
            error = str(e)
        return events, stream.report.to_dict(), error
    finally:
        ltrace._Parser.fast_path = saved


def assert_same(read, **options):
    """Both ways give the same events, report and error; returns the number of events."""
    fast, slow = outcome(read, True, **options), outcome(read, False, **options)
    for i, (a, b) in enumerate(zip(fast[0], slow[0])):
        assert a == b, f"event {i} differs: fast path {a}, regexes {b}"
    assert len(fast[0]) == len(slow[0])
    assert fast[1] == slow[1]
    assert fast[2] == slow[2]
    return len(fast[0])


def assert_same_text(text: str, name: str = "<input>"):
    """The log `text` as a file, as a list of lines (newlines guessed) and as lines without newlines."""
    for options in OPTIONS:
        assert_same(lambda **o: parse(text, name, **o), **options)
        assert_same(lambda **o: parse(text.splitlines(), name, **o), **options)
        assert_same(lambda **o: parse([line.encode() for line in text.splitlines(True)], name, **o), **options)


def fixture_logs():
    logs = sorted(FIXTURES.glob("*.log"))
    assert len(logs) >= 8
    return logs


@pytest.mark.parametrize("path", fixture_logs(), ids=lambda p: p.name)
def test_fixture_logs_read_the_same_both_ways(path):
    for options in OPTIONS:
        assert_same(lambda **o: parse_file(path, **o), **options)


@pytest.mark.parametrize("name", NAMES)
def test_real_samples_read_the_same_both_ways(name):
    path = sample(name)
    n = 0
    for options in OPTIONS:
        n = assert_same(lambda **o: parse_file(path, **o), **options)
    assert n > 1000


def _generator():
    spec = importlib.util.spec_from_file_location("bench_trace_parse", ROOT / "bench" / "bench_trace_parse.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate


@pytest.mark.slow
def test_synthetic_log_reads_the_same_both_ways(tmp_path):
    path = tmp_path / "synthetic.log"
    _generator()(str(path), 30_000, threads=6)
    for options in OPTIONS:
        assert assert_same(lambda **o: parse_file(path, **o), **options) > 20_000


# Every shape ltrace 0.7.3 prints, and near misses the fast path must leave to the regexes.
TRICKY = """\
101 12:00:00.000001 app->malloc(16) = 0x55d0c0a0b2a0 <0.000123>
101 12:00:00.000002 app->malloc(0x10) = 0x55d0c0a0b2c0 <0.000123>
101 12:00:00.000003 app->malloc(016) = 0x55d0c0a0b2e0
101 12:00:00.000004 app->malloc(-1) = 0 <0.000010>
101 12:00:00.000005 app->malloc(18446744073709551615) = nil <0.000010>
101 12:00:00.000006 app->malloc(99999999999999999999999) = 0 <0.000010>
101 12:00:00.000007 app->calloc(4, 16) = 0x55d0c0a0b300 <0.000123>
101 12:00:00.000008 app->calloc(4,16) = 0x55d0c0a0b340 <0.000123>
101 12:00:00.000009 app->realloc(0x55d0c0a0b300, 128) = 0x55d0c0a0b400 <0.000123>
101 12:00:00.000010 app->realloc(0, 64) = 0x55d0c0a0b500 <0.000123>
101 12:00:00.000011 app->realloc(0x55d0c0a0b500, 0) = 0 <0.000123>
101 12:00:00.000012 app->realloc(nil, 64) = 0x55d0c0a0b600 <0.000123>
101 12:00:00.000013 app->free(0x55d0c0a0b600) = <void> <0.000123>
101 12:00:00.000014 app->free(0) = <void> <0.000123>
101 12:00:00.000015 app->free(0x55d0c0a0b400) = <void>
101 12:00:00.000016 app->free(0x55d0c0a0b2a0)   = <void> <0.000123>
101 12:00:00.000017 app->free(0x55d0c0a0b2c0) =  <void> <0.000123>
101 12:00:00.000018 app->free(0x55d0c0a0b2e0) = <void>  <0.000123>
101 12:00:00.000019 app->free(0x55d0c0a0b340) = <void> <0.000123>  
101 12:00:00.000020 app->malloc(16 <unfinished ...>
102 12:00:00.000021 app->malloc(32) = 0x55d0c0a0c000 <0.000100>
101 12:00:00.000022 <... malloc resumed> ) = 0x55d0c0a0b2a0 <0.000300>
101 12:00:00.000023 app->free(0x55d0c0a0b2a0 <unfinished ...>
102 12:00:00.000024 app->free(0x55d0c0a0c000 <no return ...>
101 12:00:00.000025 <... free resumed> ) = <void> <0.000300>
101 12:00:00.000026 <... free resumed> ) = <void> <0.000300>
101 12:00:00.000027 <... malloc resumed> ) = 0x1 <0.000300>
101 12:00:00.000028 app->posix_memalign(0x7ffd1000, 64, 100) = 0 <0.000300>
101 12:00:00.000029 app->aligned_alloc(64, 128) = 0x55d0c0a0d000 <0.000300>
101 12:00:00.000030 app->memalign(64, 128) = 0x55d0c0a0d100 <0.000300>
101 12:00:00.000031 app->valloc(100) = 0x55d0c0a0e000 <0.000300>
101 12:00:00.000032 libc.so.6->realloc(0x55d0c0a0e000, 6) = 0x6 <0.000001>
101 12:00:00.000033 libc.so.6->calloc(1, 6) = 0x6 <0.000001>
101 12:00:00.000034 malloc@libc.so.6(24) = 0x55d0c0a0f000 <0.000050>
101 12:00:00.000035 realloc@libc.so.6(0, 24 <unfinished ...>
101 12:00:00.000036 malloc@libc.so.6(24) = 0x55d0c0a0f100 <0.000010>
101 12:00:00.000037 <... realloc resumed> ) = 0x55d0c0a0f100 <0.000060>
101 12:00:00.000038 memalign@libc.so.6(32, 64) = 0x55d0c0a0f200 <0.000050>
101 12:00:00.000039 free@libc.so.6(0x55d0c0a0f200) = <void> <0.000050>
101 12:00:00.000040 _Znwm@libstdc++.so.6(24) = 0x55d0c0a10000 <0.000050>
101 12:00:00.000041 app->_ZdlPvm(0x55d0c0a10000, 24) = <void> <0.000050>
101 12:00:00.000042 app->operator new[](unsigned long)(40) = 0x55d0c0a11000 <0.000050>
101 12:00:00.000043 app->strlen("malloc(16) = 0x1") = 16 <0.000050>
101 12:00:00.000044 app->puts("x") = 2 <0.000050>
101 12:00:00.000045 app->getpid() = 101 <0.000050>
101 12:00:00.000046 app->pthread_create(0x7ffd, 0, 0x401000, 0) = 0 <0.000050>
103 12:00:00.000047 app->malloc(8) = 0x7f0000000010 <0.000050>
101 12:00:00.000048 --- SIGCHLD (Child exited) ---
101 12:00:00.000049 --- SIGSEGV (Segmentation fault) ---
103 12:00:00.000050 unexpected breakpoint at 0x55df81dd0408
101 12:00:00.000051 app->malloc(16) = 0x55d0c0a0b2a0 <0.000123> trailing
101 12:00:00.000052 app->malloc(16) = 0x55d0c0a0b2a0 <0.00x123>
101 12:00:00.000053 app->malloc(16) = 0x55d0c0a0b2a0 0.000123
101 12:00:00.000054 app->malloc(16) 0x55d0c0a0b2a0 <0.000123>
101 12:00:00.000055 app->malloc 16) = 0x55d0c0a0b2a0 <0.000123>
101 12:00:00.000056 app->malloc(16)= 0x55d0c0a0b2a0 <0.000123>
101 12:00:00.000057 app->malloc(16) =0x55d0c0a0b2a0 <0.000123>
101 12:00:00.000058 app->malloc(16 <unfinished...>
101 12:00:00.000059 app->malloc(16 <unfinished ...> 
101 12:00:00.000060 <... malloc resumed>) = 0x55d0c0a0b2a0 <0.000300>
101 12:00:00.000061 <... malloc resumed> )= 0x55d0c0a0b2a0 <0.000300>
101 12:00:00.000062 <... malloc resumed> ) = 0x55d0c0a0b2a0 <0.000300> <1>
101 12:00:00.000063 <...  malloc resumed> ) = 0x55d0c0a0b2a0 <0.000300>
101 12:00:00.000064 <... malloc resumed> ) = <0.000300>
101 12:00:00.000065 <... malloc resumed> ) =
101 12:00:00.000066 <... malloc resumed> ) = 0x10 <0.000300
101 12:00:00.000067 app->malloc(16) = 0x55d0c0a0b2a0 <.5>
101 12:00:00.000068 app->malloc(16) = 0x55d0c0a0b2a0 <5.>
101 12:00:00.000069 app->malloc(16) = 0x55d0c0a0b2a0 <1e5>
101 12:00:00.000070 app->malloc(16) = 0x55d0c0a0b2a0 <0.0.1>
101 12:00:00.000071 app->malloc(1_6) = 0x55d0c0a0b2a0 <0.1>
101 12:00:00.000072 app->malloc( 16 ) = 0x5_5 <0.1>
101 12:00:00.000073 app->malloc(16) = 0x55d0c0a0b2a0 < 0.1>
101 12:00:00.000074 app->malloc(16) = 0x55d0c0a0b2a0 <0.1 >
101 12:00:00.000075 app->malloc(16) = 0x55d0c0a0b2a0 <>
101 12:00:00.000076 app->malloc(16) = 0x55d0c0a0b2a0 <+1>
101 12:00:00.000077 app->malloc(16) = 0x55d0c0a0b2a0 <-1>
101 12:00:00.000078 app->malloc(16) = 0x55d0c0a0b2a0 <nan>
101 12:00:00.000079 app->malloc(16) = 0x55d0c0a0b2a0 <٣>
101 12:00:00.000080 app->malloc(١٦) = 0x55d0c0a0b2a0 <0.1>
101 12:00:00.000081 app->malloc(16)\t= 0x55d0c0a0b2a0 <0.1>
101 12:00:00.000082 app->malloc(16) = 0x55d0c0a0b2a0\t<0.1>
101 12:00:00.000083 app->malloc(16) = 0x55d0c0a0b2a0 <0.1>\r
101\t12:00:00.000084 app->malloc(16) = 0x55d0c0a0b2a0 <0.1>
101 12:00:00.000085  app->malloc(16) = 0x55d0c0a0b2a0 <0.1>
101  12:00:00.000086 app->malloc(16) = 0x55d0c0a0b2a0 <0.1>
 101 12:00:00.000087 app->malloc(16) = 0x55d0c0a0b2a0 <0.1>
101 12:00:00.000088 [0x401000] app->malloc(16) = 0x55d0c0a0b2a0 <0.1>
101 12:00:00.000089 app->malloc(16) = 0x55d0c0a0b2a0 (<0.1>)
101 12:00:00.000090 app->malloc(16) = 0x55d0c0a0b2a0 <0.1><0.2>
101 12:00:00.000091 app->mal-loc(16) = 0x55d0c0a0b2a0 <0.1>
101 12:00:00.000092 app->malloc@libc(16) = 0x55d0c0a0b2a0 <0.1>
101 12:00:00.000093 app->->malloc(16) = 0x55d0c0a0b2a0 <0.1>
101 12:00:00.000094 ->malloc(16) = 0x55d0c0a0b2a0 <0.1>
101 12:00:00.000095 app->malloc((16) = 0x55d0c0a0b2a0 <0.1>
101 12:00:00.000096 app->malloc(16)) = 0x55d0c0a0b2a0 <0.1>
101 12:00:00.000097 app->malloc(16) = 0x55d0c0a0b2a0 = 0x1 <0.1>
101 12:00:00.000098 app->malloc(16 <unfinished ...> <0.1>
101 12:00:00.000099 app->free(0x10, 0x20) = <void> <0.1>
101 12:00:00.000100 app->calloc(4) = 0x10 <0.1>
101 12:00:00.000101 app->realloc(0x10) = 0x10 <0.1>
101 12:00:00.000102 app->malloc() = 0x10 <0.1>
101 12:00:00.000103 app->malloc(16, 32) = 0x10 <0.1>
101 12:00:00.000104 app->free(<void>) = <void> <0.1>
101 12:00:00.000105 app->malloc(16) = -1 <0.1>
101 12:00:00.000106 app->malloc(16) = 0xffffffffffffffffff <0.1>
101 12:00:00.000107 app->malloc(16) = 0X10 <0.1>
101 12:00:00.000108 app->calloc(-1, -1) = 0 <0.1>
101 12:00:00.000109 app->realloc(-1, -1) = 0 <0.1>
101 12:00:00.000110 app->malloc(16) = 0x10 <0.1>\x00
101 12:00:00.000111 12:00:00.000111 app->malloc(16) = 0x10 <0.1>
101 app->malloc(16) = 0x10 <0.1>
12:00:00.000113 app->malloc(16) = 0x10 <0.1>
102 12:00:00.000114 app->malloc(16) = 0x10 <0.1>
102] 12:00:00.000115 app->malloc(16) = 0x10 <0.1>
[pid 102] 12:00:00.000116 app->malloc(16) = 0x10 <0.1>
0102 12:00:00.000117 app->malloc(16) = 0x10 <0.1>
+102 12:00:00.000118 app->malloc(16) = 0x10 <0.1>
101 11:59:59.000119 app->malloc(16) = 0x10 <0.1>
101 12:00:01.000120 app->malloc(16) = 0x10 <0.1>
101 12:01:00.000121 app->malloc(16) = 0x10 <0.1>
101 13:00:00 app->malloc(16) = 0x10 <0.1>
101 1700000000.000122 app->malloc(16) = 0x10 <0.1>
101 12:00:00.0001x3 app->malloc(16) = 0x10 <0.1>

101 12:00:00.000124 SYS_clone(0x3d0f00, 0, 0, 0) = 104 <0.1>
104 12:00:00.000125 app->malloc(16) = 0x20 <0.1>
104 12:00:00.000126 SYS_exit(0 <no return ...>
104 12:00:00.000127 +++ exited (status 0) +++
103 12:00:00.000128 +++ killed by SIGSEGV +++
102 12:00:00.000129 +++ exited (status 1) +++
101 12:00:00.000130 +++ exited (status 0) +++
101 12:00:00.000131 app->malloc(16) = 0x10 <0.1>
101 12:00:00.000132 app->malloc(16)           = 0x10 <0.1>
101 12:00:00.000133 malloc@libc.so.6(384)      = 0x556253143bd0 <0.000087>
101 12:00:00.000134 free@libc.so.6(0)          = <void> <0.000085>
101 12:00:00.000135 app->free(16)	          = <void> <0.000085>
101 12:00:00.000136 app->free(16)    	= <void> <0.000085>
101 12:00:00.000137 app->free(16)    == <void> <0.000085>
101 12:00:00.000138 app->free(16)    =	<void> <0.000085>
101 12:00:00.000139 app->free(16)                                                                                           = <void> <0.000085>
"""


def test_tricky_lines_read_the_same_both_ways():
    text = TRICKY.replace("\\t", "\t").replace("\\r", "\r").replace("\\x00", "\0")
    assert_same_text(text, "tricky.log")
    assert_same_text(text + "101 12:00:00.000132 app->malloc(16) = 0x1", "cut.log")    # a truncated last line
    assert_same_text(text + "101 12:00:00.000132 app->malloc(16 <unfin", "cut.log")
    assert_same_text(text.replace("101 ", "[pid 101] ").replace("102 ", "[pid 102] "), "pid.log")
    no_tid = "\n".join(line.split(" ", 1)[-1] for line in text.splitlines()) + "\n"
    assert_same_text(no_tid, "no-tid.log")
    no_ts = "\n".join(" ".join(w for i, w in enumerate(line.split(" ")) if i != 1) for line in text.splitlines())
    assert_same_text(no_ts + "\n", "no-stamp.log")


def test_the_fast_path_takes_most_lines_of_real_logs(monkeypatch):
    """It would be no use if real logs went to the regexes: ltrace pads calls to a column, uses -e and -x
    notations, and each thread's (and second's) first line is the regexes' anyway."""
    taken = {}
    fallback = ltrace._Parser.fallback

    def counting(self, raw, *args):
        taken[self.filename] = taken.get(self.filename, 0) + 1
        return fallback(self, raw, *args)

    monkeypatch.setattr(ltrace._Parser, "fallback", counting)
    for name in ("mt_pthread_e.log", "alloc_mix_znow_x.log", "python_json_e.log"):
        stream = parse_file(sample(name), extra_events=True, times=False)
        for _ in stream.batches():
            pass
        assert taken[str(sample(name))] < 0.15 * stream.report.lines, name


def test_not_a_log_fails_the_same_way_both_ways():
    for text in ("hello\n" * 30, "101 12:00:00.000001 hello\n" * 30, "\n\n\nint main() {}\n" * 10):
        for options in OPTIONS:
            fast = outcome(lambda **o: parse(text, "bad.log", **o), True, **options)
            assert fast[2] is not None and fast[2].startswith("bad.log:")
            assert fast == outcome(lambda **o: parse(text, "bad.log", **o), False, **options)


_ALPHABET = " \t()<>=.,x0123456789abcdef-+>@[]:\r\n"


def _mutated(lines, rng: random.Random, count: int):
    """`count` lines of `lines`, each with one random edit: a character deleted, inserted or replaced, two
    characters swapped, or a cut (the last line then loses its newline)."""
    out = []
    for _ in range(count):
        line = rng.choice(lines)
        i = rng.randrange(len(line))
        edit = rng.randrange(5)
        if edit == 0:
            line = line[:i] + line[i + 1:]
        elif edit == 1:
            line = line[:i] + rng.choice(_ALPHABET) + line[i:]
        elif edit == 2:
            line = line[:i] + rng.choice(_ALPHABET) + line[i + 1:]
        elif edit == 3 and i + 1 < len(line):
            line = line[:i] + line[i + 1] + line[i] + line[i + 2:]
        out.append(line if line.endswith("\n") else line + "\n")
        if rng.random() < 0.5:
            out.append(rng.choice(lines))      # an intact line after it: the fast path has learnt the layout
    return out


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_mutated_lines_read_the_same_both_ways(seed, tmp_path):
    rng = random.Random(seed)
    lines = TRICKY.splitlines(True)
    for path in [*fixture_logs(), sample("mt_pthread_e.log"), sample("alloc_mix_znow_x.log")]:
        log = path.read_text().splitlines(True)
        lines += rng.sample(log, min(40, len(log)))
    synthetic = tmp_path / "synthetic.log"
    _generator()(str(synthetic), 2000, threads=3)
    lines += synthetic.read_text().splitlines(True)[:400]
    for round_ in range(6):
        head = rng.sample(lines, 30)                 # intact lines first: a recognised log
        text = "".join(head + _mutated(lines, rng, 400))
        if round_ % 2:
            text = text[: rng.randrange(len(text) // 2, len(text))]    # cut anywhere
        assert_same_text(text, f"mutated-{seed}-{round_}.log")


def _packed_from_events(path):
    from scenc.trace.replay import EVENT, EVENT_CODE
    return b"".join(EVENT.pack(e.line, e.size or 0, e.nmemb, e.align or 0, e.old_ptr or 0, e.result_ptr or 0,
                               e.tid or 0, EVENT_CODE[e.kind], e.failed)
                    for e in parse_file(path, extra_events=True, times=False))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mt_pthread_e.log", "alloc_mix_znow_x.log", "synthetic"])
def test_packed_stream_is_the_events_packed(name, tmp_path):
    """EventStream.packed (the parser packs the calls itself) gives the bytes the events packed one by one give,
    after first() too (its batch is made of AllocEvents) and with thread starts and exits among the calls."""
    from scenc.trace.replay import EVENT, EVENT_CODE
    if name == "synthetic":
        path = tmp_path / "synthetic.log"
        _generator()(str(path), 20_000, threads=5)
    else:
        path = sample(name)
    expected = _packed_from_events(path)
    assert len(expected) > 1000 * EVENT.size
    for peek in (False, True):
        stream = parse_file(path, extra_events=True, times=False)
        if peek:
            assert stream.first() is not None
        assert b"".join(stream.packed(EVENT.pack, EVENT_CODE)) == expected
