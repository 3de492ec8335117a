"""A replay behaves like the captured program where allocators differ.

Real captures (the LD_PRELOAD tracer on programs compiled here), real
conversions, real replays:

* its resident memory is the heap's: the ops file is read through a bounded
  window, so a capture 10x longer with the same live heap replays in the same
  peak RSS;
* its threads come and go as the program's did: bench/programs/thread_churn.c
  makes 200 threads, two at a time; the replay creates 200 threads and never has
  more alive at once than the program (a preloaded shim counts them in both);
* it stores into its blocks as `--touch` says: page faults counted by the
  kernel differ by one per page between the modes;
* a program's own anonymous mappings (an allocator of its own on mmap) are
  mapped, touched and unmapped by the replay, and the allocator's are not.
"""

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from scenc.compiler.pipeline import build
from scenc.trace.opsfile import HEADER, VERSION, OpsFileError, read_header
from scenc.trace.capture.preload import capture_preload
from scenc.trace.tracerlog import EXTRA_KINDS, HEADER as LOG_HEADER, RECORD, parse_preload_log, raw_records
from locations import REPO, TESTS

ROOT = REPO
PROGRAMS = ROOT / "bench" / "programs"
FIXTURES = TESTS / "fixtures" / "trace"
SCENC = str(Path(sys.executable).with_name("scenc"))

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

# A steady heap: 1000 live blocks of 16..1024 bytes, one replaced per iteration.
STEADY_C = r"""
#include <stdlib.h>
int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 100000;
  void *live[1000] = {0};
  unsigned x = 1;
  for (long i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    int k = (int)(x >> 16) % 1000;
    free(live[k]);
    live[k] = malloc(16 + (x >> 8) % 1009);
  }
  for (int k = 0; k < 1000; k++) free(live[k]);
  return 0;
}
"""

# 64 blocks of 1 MiB, each from a fresh mapping (above glibc's mmap threshold), then freed (a free would
# raise glibc's threshold, so every block is allocated first).
BIG_BLOCKS_C = r"""
#include <stdlib.h>
int main(void) {
  char *p[64];
  for (int i = 0; i < 64; i++) {
    p[i] = malloc(1 << 20);
    if (!p[i]) return 1;
    p[i][0] = 1;
  }
  for (int i = 0; i < 64; i++) free(p[i]);
  return 0;
}
"""


# An allocator of its own: 32 arenas of 1 MiB from mmap, written whole; half unmapped, one cut in half, one
# grown to 4 MiB with mremap. glibc's malloc maps its 8 MiB block itself: not the program's mapping.
OWN_MAPS_C = r"""
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
int main(void) {
  char *arena[32];
  void *volatile big = malloc(8 << 20);
  free(big);
  for (int i = 0; i < 32; i++) {
    arena[i] = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (arena[i] == MAP_FAILED) return 1;
    memset(arena[i], 1, 1 << 20);
  }
  for (int i = 0; i < 16; i++) munmap(arena[i], 1 << 20);
  munmap(arena[16] + (512 << 10), 512 << 10);
  char *grown = mremap(arena[17], 1 << 20, 4 << 20, MREMAP_MAYMOVE);
  if (grown == MAP_FAILED) return 1;
  memset(grown, 2, 4 << 20);
  for (int i = 18; i < 32; i++) munmap(arena[i], 1 << 20);
  munmap(grown, 4 << 20);
  munmap(arena[16], 512 << 10);
  return 0;
}
"""


# main leaves with pthread_exit before the thread it created has even started; that thread creates another.
MAIN_EXITS_C = r"""
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
static void *inner(void *x) {
  (void)x;
  for (int i = 0; i < 100; i++) {
    void *volatile p = malloc(100);
    free(p);
  }
  return NULL;
}
static void *outer(void *x) {
  (void)x;
  usleep(20000);
  pthread_t t;
  if (pthread_create(&t, NULL, inner, NULL)) abort();
  pthread_join(t, NULL);
  void *volatile p = malloc(64);
  free(p);
  return NULL;
}
int main(void) {
  void *volatile p = malloc(10);
  free(p);
  pthread_t t;
  if (pthread_create(&t, NULL, outer, NULL)) abort();
  pthread_exit(NULL);
}
"""


def compile_c(source: Path, out: Path, *flags) -> Path:
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", *flags, "-o", str(out), str(source)],
                   check=True, capture_output=True)
    return out


def program(tmp_path: Path, name: str, text: str) -> Path:
    source = tmp_path / f"{name}.c"
    source.write_text(text)
    return compile_c(source, tmp_path / name)


def convert(trace: Path, scn: Path, *options) -> str:
    proc = subprocess.run([SCENC, "convert", str(trace), "-o", str(scn), *options], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def replay(scn: Path, env=None) -> dict:
    binary = build(scn).binary
    out = subprocess.run([str(binary)], stdout=subprocess.PIPE, check=True, timeout=120, env=env).stdout
    return json.loads(out)


@pytest.mark.slow
def test_replay_peak_rss_does_not_grow_with_the_length_of_its_ops_file(tmp_path):
    steady = program(tmp_path, "steady", STEADY_C)
    peaks, sizes = [], []
    for n in (20_000, 800_000):     # 40,000 and 1.6M ops: about 130 KiB and 5 MiB (3.4 bytes an op)
        trace = tmp_path / f"s{n}.trace"
        assert capture_preload([str(steady), str(n)], trace).ok
        convert(trace, tmp_path / f"s{n}.scn", "--touch", "none")
        sizes.append((tmp_path / f"s{n}.ops").stat().st_size)
        report = replay(tmp_path / f"s{n}.scn")
        assert sum(t["ops"]["malloc"] for t in report["threads"]) == n
        peaks.append(report["memory"]["peak_rss_kib"])
        assert 0 < report["memory"]["baseline_rss_kib"] <= peaks[-1]
    assert sizes[1] > 20 * sizes[0] and sizes[1] - sizes[0] > 4 << 20
    # The longer ops file is over 4 MiB bigger; mapped whole, it was all resident.
    assert peaks[1] <= peaks[0] + 1024, (peaks, sizes)


@pytest.fixture(scope="module")
def thread_peak(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shim")
    lib = folder / "thread_peak.so"
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", "-o", str(lib),
                    str(FIXTURES / "thread_peak.c"), "-ldl"], check=True, capture_output=True)

    def count(argv, out: Path):
        env = {**os.environ, "LD_PRELOAD": str(lib), "THREAD_PEAK_OUT": str(out)}
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env, timeout=120)
        peak, created = map(int, out.read_text().split())
        return peak, created
    return count


@pytest.mark.slow
def test_replay_keeps_no_more_threads_alive_than_its_capture(tmp_path, thread_peak):
    churn = compile_c(PROGRAMS / "thread_churn.c", tmp_path / "churn")
    real_peak, real_created = thread_peak([str(churn), "200", "100"], tmp_path / "real.txt")
    assert (real_peak, real_created) == (3, 200)
    trace = tmp_path / "churn.trace"
    assert capture_preload([str(churn), "200", "100"], trace).ok
    log = parse_preload_log(trace, extra_events=True)
    kinds = [e.kind for e in log if e.kind in EXTRA_KINDS.values()]
    assert kinds.count("thread_start") == 200 and kinds.count("thread_exit") == 200
    out = convert(trace, tmp_path / "churn.scn")
    assert "200 thread(s) created during the replay" in out and "at most 3 alive at once" in out
    # An ended thread's freed slots are reused: the slot table follows the objects live at once (3 threads'
    # 100 objects and their arrays), not every object the 200 threads ever had (each kept up to 256).
    assert read_header((tmp_path / "churn.ops").read_bytes(), "churn.ops").slots < 1000
    binary = build(tmp_path / "churn.scn").binary
    peak, created = thread_peak([str(binary)], tmp_path / "replay.txt")
    # The captured main thread runs on the replay's main thread; the others are created as the program did.
    assert created == 200
    assert peak <= real_peak
    report = replay(tmp_path / "churn.scn")
    assert len(report["threads"]) == 201
    assert sum(t["ops"]["malloc"] for t in report["threads"]) >= 200 * 100


def alive_at_most(events, main_tid) -> int:
    """Threads alive at once in a capture's events (extra_events): its main thread, then starts and exits."""
    alive, peak = {main_tid}, 1
    for e in events:
        if e.kind == "thread_start":
            alive.add(e.tid)
        elif e.kind == "thread_exit":
            alive.discard(e.tid)
        elif e.tid not in alive:
            alive.add(e.tid)          # a thread the capture shows no start of is alive from the start
        peak = max(peak, len(alive))
    return peak


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("ltrace") is None, reason="ltrace is not installed")
def test_an_ltrace_capture_replays_its_thread_lifetimes(tmp_path, thread_peak):
    """An ltrace log shows when each thread ended ('+++ exited'), and where it began: the capture traces
    pthread_create, whose caller made the next new thread (main, in bench/programs/thread_churn.c; without it
    the thread that printed the line before stood for the creator, a worker). The replay creates and joins
    threads there, never all at once."""
    from scenc.trace.capture.ltrace import capture
    from scenc.trace.source import TraceSource
    churn = compile_c(PROGRAMS / "thread_churn.c", tmp_path / "churn")
    log = tmp_path / "churn.ltrace"
    attempts = 6
    # ltrace 0.7.3 crashes or hangs threaded programs now and then: each attempt stops after 20 s
    result = capture([str(churn), "12", "30"], log, mode="e", retries=attempts - 1, timeout=20,
                     stdout=subprocess.DEVNULL)
    if not result.ok:
        pytest.skip(f"ltrace 0.7.3 crashed the threaded program in all {attempts} attempts: {result.warnings[-1:]}")
    source = TraceSource(log, extra_events=True)
    main_tid = source.main_tid()
    events = list(source.events)
    starts = [e for e in events if e.kind == "thread_start"]
    assert len(starts) == 12 and sum(e.kind == "thread_exit" for e in events) == 13
    assert [e.size for e in starts] == [main_tid] * 12       # a thread_start's size is its creator's tid
    log_peak = alive_at_most(events, main_tid)
    assert log_peak <= 3 + 1        # main and two workers; an exit line may come just after the next start
    out = convert(log, tmp_path / "churn.scn")
    assert "12 thread(s) created during the replay" in out
    peak, created = thread_peak([str(build(tmp_path / "churn.scn").binary)], tmp_path / "replay.txt")
    assert created == 12
    assert peak <= log_peak, (peak, log_peak)
    report = replay(tmp_path / "churn.scn")
    assert sum(t["ops"]["malloc"] for t in report["threads"]) == sum(e.kind == "malloc" for e in events)


@pytest.mark.slow
def test_a_main_thread_that_leaves_first_is_replayed_without_waiting_for_itself(tmp_path):
    """A thread starts where its creator called pthread_create, even when the creator had ended by the time
    the new thread ran: the replay must not join the creator before creating it."""
    prog = program(tmp_path, "main_exits", MAIN_EXITS_C)
    trace = tmp_path / "me.trace"
    assert capture_preload([str(prog)], trace).ok
    out = convert(trace, tmp_path / "me.scn")
    assert "2 thread(s) created during the replay" in out
    report = replay(tmp_path / "me.scn")
    assert sum(t["ops"]["malloc"] for t in report["threads"]) >= 102


@pytest.mark.slow
def test_touch_modes_store_into_new_blocks_as_they_say(tmp_path):
    big = program(tmp_path, "big", BIG_BLOCKS_C)
    trace = tmp_path / "big.trace"
    assert capture_preload([str(big)], trace).ok
    faults = {}
    for mode in ("none", "first", "pages", "all"):
        scn = tmp_path / f"big-{mode}.scn"
        out = convert(trace, scn, "--touch", mode)
        assert read_header((tmp_path / f"big-{mode}.ops").read_bytes(), "x").touch == mode
        assert "each new block" in scn.read_text()
        faults[mode] = replay(scn)["rusage"]["minflt"]
    pages = 64 * 256
    # glibc's header already backs each block's first page: 'first' adds the last page of each block,
    # 'pages' and 'all' every page.
    assert 64 - 16 <= faults["first"] - faults["none"] <= 2 * 64 + 16
    assert pages - 64 - 16 <= faults["pages"] - faults["none"] <= pages + 16
    assert abs(faults["all"] - faults["pages"]) <= 16, faults


def old_ops_file(version: int) -> bytes:
    if version < 3:     # a 32-byte header (no back-pressure window): one thread, no op
        return struct.pack("<8sIIQQ", b"SCNOPS%d\0" % version, 1, 0, 0, 0) + struct.pack("<QQQ", 0, 0, 0)
    if version == 3:    # the header of today, op indexes, one 32-byte op: malloc(100) into slot 0
        return (struct.pack("<8sIIQQQ", b"SCNOPS3\0", 1, 0, 1, 1, 1) + struct.pack("<QQ", 0, 1) + bytes(8)
                + struct.pack("<BBHIIIIIQ", 0, 0, 0, 0, 0xFFFFFFFF, 0, 0, 0, 100))
    # Version 4: today's layout and encoding (malloc(100) into slot 0: 3 bytes), whose SYNC ops meant
    # positions in capture order, not returns: replayed today they would wait for returns never counted.
    return (struct.pack("<8sIIQQQ", b"SCNOPS4\0", 1, 0, 1, 1, 1) + struct.pack("<QQ", 0, 3) + bytes(8)
            + bytes([0x40, 0x00, 100]))


@pytest.mark.slow
@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_old_ops_files_are_refused_with_their_version(tmp_path, version):
    data = old_ops_file(version)
    assert HEADER.size > 32 and VERSION == 5
    with pytest.raises(OpsFileError, match=f"version {version} ops file; this scenc reads version 5"):
        read_header(data, "old.ops")
    (tmp_path / "old.ops").write_bytes(data)
    (tmp_path / "old.scn").write_text('replay "old.ops"\n')
    proc = subprocess.run([str(build(tmp_path / "old.scn").binary)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3
    assert f"version {version} replay file; this program reads version 5: convert the capture again" in proc.stderr


@pytest.mark.slow
def test_a_version_1_tracer_log_still_converts_with_every_thread_from_the_start(tmp_path):
    churn = compile_c(PROGRAMS / "thread_churn.c", tmp_path / "churn")
    trace = tmp_path / "churn.trace"
    assert capture_preload([str(churn), "6", "50"], trace).ok
    head = bytearray(trace.read_bytes()[:LOG_HEADER.size])
    struct.pack_into("<II", head, 8, 1, RECORD.size)          # version 1, without the thread records
    kept = [r for r in raw_records(trace) if r[3] not in EXTRA_KINDS]
    old = tmp_path / "old.trace"
    # Version 1 numbered only calls, one global counter: number them in their merged order (by clock, the
    # threads' ties in file order) so the log has no holes; then the end mark.
    ranked = sorted(range(len(kept)), key=lambda i: (kept[i][0], i))
    number = {i: n for n, i in enumerate(ranked)}
    out = bytearray(head)
    for i, r in enumerate(kept):
        out += RECORD.pack(number[i], *r[1:7], 0, *r[8:])          # no span: version 1 took one number
    out += RECORD.pack(len(kept), 0, kept[0][2], 255, 0, 0, 0, 0, 0, 0, 0, 0)
    old.write_bytes(bytes(out))
    text = convert(old, tmp_path / "old.scn")
    assert "every thread starts with the replay" in text
    report = replay(tmp_path / "old.scn")
    assert len(report["threads"]) == 7


@pytest.mark.slow
def test_the_programs_own_mappings_are_replayed_and_the_allocators_are_not(tmp_path):
    own = program(tmp_path, "own", OWN_MAPS_C)
    trace = tmp_path / "own.trace"
    assert capture_preload([str(own)], trace).ok
    kinds = [e.kind for e in parse_preload_log(trace, extra_events=True)]
    assert (kinds.count("mmap"), kinds.count("munmap"), kinds.count("mremap")) == (32, 33, 1)
    heap = {}
    for mode in ("none", "pages"):
        out = convert(trace, tmp_path / f"own-{mode}.scn", "--touch", mode)
        assert "32 anonymous mapping(s) of the program's own" in (tmp_path / f"own-{mode}.scn").read_text(), out
        memory = replay(tmp_path / f"own-{mode}.scn")["memory"]
        heap[mode] = memory["peak_rss_kib"] - memory["baseline_rss_kib"]
    # Written whole, the program peaks at 32 MiB of arenas; the replay maps and touches as much, and no more
    # (the 8 MiB malloc block is glibc's own mapping: replayed as a malloc, never touched under 'none').
    assert heap["none"] < 4 << 10, heap
    assert 30 << 10 <= heap["pages"] <= 36 << 10, heap


# The older tracers' logs kept in tests/fixtures/trace (log versions 2 and 3: one global sequence counter) and the
# programs they captured. Today's tracer (version 4: a clock per thread, the order rebuilt at conversion) must
# capture the same program into a log whose exact replay makes the same calls in each thread and, where the heap
# does not depend on how the threads interleave, peaks at the same live bytes. mt_handoff's peak does (8666 to
# 8680 bytes in the three logs): there each log's replay peaks where a walk of its own events does.
LOGS_OF_OLDER_TRACERS = {
    "cxx_new.trace": ("cxx_new.cc", [], True),      # built with -O2: gcc keeps one new/delete pair of nine
    "own_maps.trace": (OWN_MAPS_C, [], True),
    "main_exits.trace": (MAIN_EXITS_C, [], True),
    "mt_handoff_v2.trace": ("mt_handoff.c", ["3", "20"], False),
    "mt_handoff_3x20.trace": ("mt_handoff.c", ["3", "20"], False),
    "mt_handoff_v3.trace": ("mt_handoff.c", ["3", "20"], False),
}


def _peak_of_events(path: Path) -> int:
    """Peak live bytes by a walk of the log's events, independent of the converter."""
    live, now, peak = {}, 0, 0
    for e in parse_preload_log(path):
        if e.failed:
            continue
        if e.old_ptr in live:
            now -= live.pop(e.old_ptr)
        if e.result_ptr and e.kind != "free":
            live[e.result_ptr] = e.nbytes
            now += e.nbytes
        peak = max(peak, now)
    return peak


def _per_thread_counts(report) -> list:
    return sorted(sorted(counts.items()) for counts in report.counts)


@pytest.mark.slow
@pytest.mark.parametrize("fixture", sorted(LOGS_OF_OLDER_TRACERS))
def test_a_capture_by_todays_tracer_replays_as_the_older_tracers_log_did(fixture, tmp_path):
    from scenc.trace.replay import convert_log
    source, args, same_peak = LOGS_OF_OLDER_TRACERS[fixture]
    old_log = FIXTURES / fixture
    assert old_log.read_bytes()[:8] == b"SCNTRACE" and old_log.read_bytes()[8] in (2, 3)
    if source.endswith(".cc"):
        prog = tmp_path / "prog"
        subprocess.run(["g++", "-std=c++17", "-O2", "-o", str(prog), str(FIXTURES / source)], check=True)
    elif source.endswith(".c"):
        prog = compile_c(FIXTURES / source, tmp_path / "prog", "-O1", "-fno-builtin")
    else:
        prog = program(tmp_path, "prog", source)
    new_log = tmp_path / "new.trace"
    assert capture_preload([str(prog), *args], new_log, stdout=subprocess.DEVNULL).ok
    assert new_log.read_bytes()[8] == 6
    old, _ = convert_log(old_log, tmp_path / "old.ops", "first")
    new, _ = convert_log(new_log, tmp_path / "new.ops", "first")
    assert (new.calls, new.threads, _per_thread_counts(new)) == (old.calls, old.threads, _per_thread_counts(old))
    if same_peak:
        assert new.peak_live_bytes == old.peak_live_bytes
    else:
        assert old.peak_live_bytes == _peak_of_events(old_log) and new.peak_live_bytes == _peak_of_events(new_log)
