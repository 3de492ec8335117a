"""scenc.trace.capture.preload: the LD_PRELOAD tracer (runtime/tracer/tracer.c) on real programs.

Programs are compiled here from the C sources below (and tests/fixtures/trace);
captures run them for real under glibc and the preloaded allocators, replays
are built and run with `scenc exec`. Only the realloc race of
test_reader_puts_a_moved_realloc_before_the_reuse_of_its_old_block is written
by hand: it is too rare to provoke.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from scenc.allocators.registry import known
from scenc.system.elf import inspect as inspect_elf
from scenc.trace.capture import CaptureError
from scenc.trace.capture.ltrace import capture
from scenc.trace.events import FREE_KINDS
from scenc.trace.ltrace import TraceFormatError, parse_file
from scenc.trace.opsfile import COUNTED_AS
from scenc.trace.capture.preload import capture_preload
from scenc.trace.tracerlog import (CHUNK_HEADER, EXTRA_KINDS, HEADER, KIND_CODES, RECORD, first_chunk,
                                   parse_preload_log, raw_records, stop_sentence)
from scenc.compiler.build import RUNTIME, TRACER
from scenc.trace.native import TRACER_HEADERS, TRACER_SOURCE, tracer_library
from scenc.trace.replay import REPLAY_KIND, write_replay
from scenc.trace.profile import TraceStats
from locations import TESTS

FIXTURES = TESTS / "fixtures" / "trace"
KIND_NAMES = {kind for _, kind, _ in KIND_CODES.values()}
SCENC = str(Path(sys.executable).with_name("scenc"))
T, R = 3, 20                      # mt_handoff threads and rounds

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

# Every C allocation function, failures included; sizes follow i so a trace can be checked.
ALL_KINDS_C = r"""
#define _GNU_SOURCE
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 300;
    void *keep[64] = {0};
    for (int i = 0; i < n; i++) {
        int k = (i * 37) % 64;
        free(keep[k]);                                   /* free(NULL) the first 64 times */
        switch (i % 7) {
        case 0: keep[k] = malloc(16 + i % 300); break;
        case 1: keep[k] = calloc(1 + i % 5, 24); break;
        case 2: { void *p = NULL; if (posix_memalign(&p, 64 << (i % 3), 100 + i)) abort(); keep[k] = p; break; }
        case 3: keep[k] = aligned_alloc(32, 64 * (1 + i % 4)); break;
        case 4: keep[k] = memalign(128, 200 + i); break;
        case 5: keep[k] = valloc(50 + i); break;
        default: keep[k] = realloc(malloc(10), 1000 + i); break;
        }
        if (i % 11 == 0) keep[k] = realloc(keep[k], 40 + i);
    }
    void *huge = malloc((size_t)1 << 62);                /* fails */
    free(huge);
    free(reallocarray(NULL, 10, 30));
    for (int k = 0; k < 64; k++) free(keep[k]);
    puts("done");
    return 0;
}
"""

FORK_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
    void *p[5];
    for (int i = 0; i < 5; i++) p[i] = malloc(1000 + i);          /* still buffered at the fork */
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < 7; i++) free(malloc(2000 + i));
        exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    for (int i = 0; i < 5; i++) free(p[i]);
    printf("%d\n", (int)pid);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
"""

# Thread B's records stay in its buffer; main flushes several chunks, then the process is killed.
KILLED_C = r"""
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
static sem_t ready;
static void *b(void *arg) {
    (void)arg;
    for (int i = 0; i < 10; i++) free(malloc(300 + i));
    sem_post(&ready);
    for (;;) pause();
}
int main(void) {
    pthread_t t;
    sem_init(&ready, 0, 0);
    pthread_create(&t, NULL, b, NULL);
    sem_wait(&ready);
    for (int i = 0; i < 40000; i++) free(malloc(64));   /* 80000 records: several flushed chunks */
    kill(getpid(), SIGKILL);
    return 0;
}
"""

# exit() from a signal handler, most likely while the tracer holds its thread's buffer.
SIGNAL_EXIT_C = r"""
#include <signal.h>
#include <stdlib.h>
#include <sys/time.h>
static void on_alarm(int s) { (void)s; exit(3); }
int main(void) {
    signal(SIGALRM, on_alarm);
    struct itimerval it = {{0, 0}, {0, 20000}};
    setitimer(ITIMER_REAL, &it, NULL);
    for (;;) free(malloc(100));
}
"""

JEMALLOC_PROOF_C = r"""
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
int main(void) {
    int (*mallctl)(const char *, void *, size_t *, void *, size_t) = dlsym(RTLD_DEFAULT, "mallctl");
    if (!mallctl) return 3;
    uint64_t before = 0, after = 0;
    size_t sz = sizeof before;
    if (mallctl("thread.allocated", &before, &sz, NULL, 0)) return 4;
    void *p = malloc(100000);
    mallctl("thread.allocated", &after, &sz, NULL, 0);
    free(p);
    return after - before >= 100000 ? 0 : 2;   /* jemalloc counted the traced malloc */
}
"""

THROW_CC = r"""
#include <cstdio>
#include <new>
int main() {
    int fails = 0;
    for (int i = 0; i < 3; i++) {
        try { char *p = new char[(size_t)1 << 62]; delete[] p; } catch (const std::bad_alloc &) { fails++; }
    }
    int *q = new int[5];
    delete[] q;
    return fails == 3 ? 0 : 1;
}
"""


@pytest.fixture(scope="module")
def bins(tmp_path_factory):
    d = tmp_path_factory.mktemp("preload-bins")

    def cc(name, source, *flags, compiler="gcc", ext="c"):
        src = source if isinstance(source, Path) else d / f"{name}.{ext}"
        if not isinstance(source, Path):
            src.write_text(source)
        subprocess.run([compiler, "-O1", "-fno-builtin", *flags, "-o", str(d / name), str(src)], check=True)
        return str(d / name)
    b = {"dir": d,
         "mt": cc("mt_handoff", FIXTURES / "mt_handoff.c", "-pthread"),
         "kinds": cc("all_kinds", ALL_KINDS_C),
         "fork": cc("fork", FORK_C),
         "killed": cc("killed", KILLED_C, "-pthread"),
         "signal_exit": cc("signal_exit", SIGNAL_EXIT_C),
         "exit_race": cc("exit_race", FIXTURES / "exit_race.c", "-pthread"),
         "jemalloc_proof": cc("jemalloc_proof", JEMALLOC_PROOF_C, "-ldl")}
    try:
        b["static"] = cc("static_kinds", ALL_KINDS_C, "-static")
    except subprocess.CalledProcessError:
        b["static"] = None
    if shutil.which("g++"):
        b["cxx_new"] = cc("cxx_new", FIXTURES / "cxx_new.cc", "-std=c++17", "-O0", compiler="g++")
        b["throw"] = cc("throw", THROW_CC, "-O0", compiler="g++", ext="cc")
    (d / "nums.txt").write_text("".join(f"{(i * 7919) % 2003}\n" for i in range(2000)))
    return b


def released(e):
    return e.kind in FREE_KINDS or (e.kind.startswith("realloc") and e.old_ptr and e.result_ptr == 0
                                    and not e.failed)


def oracle(events):
    """Independent walk: live blocks, peak live bytes, cross-thread frees, frees of unknown pointers."""
    live, peak, cross, unknown, now = {}, 0, 0, 0, 0
    for e in events:
        if e.old_ptr:
            entry = live.pop(e.old_ptr, None)
            if entry is None:
                unknown += 1
            else:
                now -= entry[0]
                cross += released(e) and entry[1] != e.tid
        if not released(e) and not e.failed and e.result_ptr:
            assert e.result_ptr not in live, f"{e}: returned a block still live"
            live[e.result_ptr] = (e.nbytes, e.tid)
            now += e.nbytes
        peak = max(peak, now)
    return live, peak, cross, unknown


def replay_kind_counts(events):
    c = Counter()
    for e in events:
        k = REPLAY_KIND[e.kind]
        c[COUNTED_AS.get(k, k)] += 1
    return dict(c)


def scenc_exec(scn):
    proc = subprocess.run([SCENC, "exec", str(scn), "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def nonzero(ops):
    return {k: v for k, v in ops.items() if v}


def program_part(events_of_thread, calls):
    """A replay thread's own calls: the replay's ``calls``, then only glibc's thread-exit free(NULL)s."""
    mine, tail = events_of_thread[:calls], events_of_thread[calls:]
    assert all(e.kind == "free" and e.old_ptr == 0 for e in tail), tail[:3]
    return mine


# --------------------------------------------------------------------------- the tracer itself
@pytest.mark.slow
def test_tracer_builds_warning_free_with_gcc_and_clang_and_exports_the_whole_interface():
    names = {"malloc", "free", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc", "memalign",
             "valloc", "pvalloc", "_exit", "execve", "execl"} | {f for f, _, _ in KIND_CODES.values()}
    for cc in ("gcc", "clang"):
        if shutil.which(cc) is None:
            continue
        lib = tracer_library(cc)              # -Wall -Wextra -Werror
        assert lib.exists() and lib == tracer_library(cc)     # cached
        out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True,
                             check=True).stdout
        exported = {line.split()[-1] for line in out.splitlines()}
        assert names <= exported, names - exported
        assert not {"emit", "resolve", "flush_all"} & exported           # the rest is hidden


def test_tracer_build_knows_every_header_the_tracer_includes():
    """A cached tracer is rebuilt when tracer.c or a header it includes changes: trace/native.py must name them all,
    and its parts are no scenario program's (editing them must not invalidate programs' builds)."""
    import re
    included = set()
    for path in (TRACER_SOURCE, *TRACER_HEADERS):
        included |= {(path.parent / name).resolve()
                     for name in re.findall(r'^#include "([^"]+)"', path.read_text(), re.M)}
    assert included == {h.resolve() for h in TRACER_HEADERS}
    assert {h for h in TRACER_HEADERS if h.parent == RUNTIME} == {RUNTIME / "clock.h"}
    assert all(h.parent == TRACER for h in TRACER_HEADERS if h.parent != RUNTIME)


@pytest.mark.slow
def test_tracer_code_is_clean_under_thread_sanitizer(tmp_path):
    """The tracer's buffers, sequence counter, inner-page samples, thread-exit and process-exit flushes, raced by 5 threads
    (one still recording while main exits) under TSan. TSan must own malloc itself, so the tracer's
    functions are renamed tr_* and called directly; the real ones are TSan's."""
    harness = tmp_path / "harness.c"
    harness.write_text(r"""
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
void *tr_malloc(size_t); void tr_free(void *); void *tr_realloc(void *, size_t);
static _Atomic(void *) slot[64], big[8];
static _Atomic int stop;
static void *worker(void *arg) {
  long t = (long)arg;
  for (int i = 0; i < 3000; i++) {
    void *p = tr_realloc(tr_malloc(16 + (size_t)(i % 64)), 100 + (size_t)(i % 200));
    void *old = atomic_exchange(&slot[(i * 7 + t) % 64], p);
    if (old) tr_free(old);
    if (i % 16 == 0) {   /* blocks with inner pages: sampled at malloc, looked at again where another thread frees */
      char *b = tr_malloc(20000 + (size_t)i);
      b[0] = 1;
      if ((old = atomic_exchange(&big[(i / 16 + t) % 8], b))) tr_free(old);
    }
  }
  return NULL;
}
static void *lingering(void *arg) { (void)arg; while (!atomic_load(&stop)) tr_free(tr_malloc(8)); return NULL; }
int main(void) {
  pthread_t th[4], l;
  pthread_create(&l, NULL, lingering, NULL);
  for (long t = 0; t < 4; t++) pthread_create(&th[t], NULL, worker, (void *)t);
  for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
  for (int i = 0; i < 64; i++) tr_free(atomic_exchange(&slot[i], NULL));
  for (int i = 0; i < 8; i++) tr_free(atomic_exchange(&big[i], NULL));
  exit(0);
}
""")
    lib = tracer_library("gcc")
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True).stdout
    exported = [line.split()[-1] for line in out.splitlines()]
    names = exported + ["_Exit", "execlp", "execle"]
    renames = [f"-D{name}=tr_{name}" for name in names if not name.startswith("_init")]
    binary = tmp_path / "harness"
    build = subprocess.run(["gcc", "-O1", "-g", "-fexceptions", "-fno-builtin", "-pthread", "-std=gnu11", "-Wall",
                            "-Wextra", "-Werror", "-fsanitize=thread", *sorted(set(renames)), "-o", str(binary),
                            str(TRACER_SOURCE), str(harness), "-ldl"],
                           capture_output=True, text=True)
    if build.returncode and "tsan" in build.stderr:
        pytest.skip(f"no TSan runtime: {build.stderr.strip()[-200:]}")
    assert build.returncode == 0, build.stderr
    log = tmp_path / "h.trace"
    proc = subprocess.run([str(binary)], env={**os.environ, "SCENC_TRACE_OUT": str(log),
                                              "TSAN_OPTIONS": "halt_on_error=1 exitcode=66"},
                          capture_output=True, text=True, timeout=120)
    assert "ThreadSanitizer" not in proc.stderr, proc.stderr[:3000]
    assert proc.returncode == 0
    info = parse_preload_log(log).info
    workers = [tid for tid in info.threads if info.calls_by_thread[tid]["realloc"] == 3000]
    assert len(workers) == 4
    assert all(info.calls_by_thread[tid]["malloc"] == 3000 + 188 for tid in workers)
    assert info.page_faults is not None
    assert 0 <= info.written_pages < info.fresh_pages     # sampled; the inner pages were never written


# --------------------------------------------------------------------------- what it sees
@pytest.mark.slow
def test_mt_handoff_every_call_and_every_cross_thread_free(bins, tmp_path):
    result = capture_preload([bins["mt"], str(T), str(R)], tmp_path / "mt.trace")
    assert result.ok, result.warnings
    assert result.tracee_status == 0 and result.threads == T + 1 and result.info.missing == 0
    events = list(parse_preload_log(result.path))
    main = result.info.pid
    workers = [tid for tid in result.info.threads if tid != main]
    assert len(workers) == T
    for tid in workers:                     # each worker: R x (malloc, calloc, realloc, 2 frees), exactly
        mine = [e for e in events if e.tid == tid]
        program = Counter(e.kind for e in mine if not (e.kind == "free" and e.old_ptr == 0))
        assert program == {"malloc": R, "calloc": R, "realloc": R, "free": 2 * R}
    sizes = sorted(e.size for e in events if e.kind == "malloc" and e.tid != main)
    assert sizes == sorted(100 + 8 * w + k for w in range(T) for k in range(R))
    mine = Counter(e.kind for e in events if e.tid == main and not (e.kind == "free" and e.old_ptr == 0))
    assert mine["malloc"] == 2 and mine["free"] == 3
    # pthread_create's own calloc (glibc 2.36: the new thread's DTV), seen because ld.so calls malloc's PLT
    extra = [e for e in events if e.tid == main and e.kind == "calloc" and e.nbytes != T * 112]
    live, _peak, cross, unknown = oracle(events)
    assert cross == 2 * T * R and unknown == 0
    assert set(live) == {e.result_ptr for e in extra}          # the program freed all its blocks
    assert [e.line for e in events] == sorted(e.line for e in events)
    stats = TraceStats().consume(parse_preload_log(result.path))    # the ltrace statistics read these events too
    assert stats.cross_thread_frees == 2 * T * R and stats.free_unknown == 0


@pytest.mark.slow
def test_merge_of_a_large_multithreaded_log_equals_a_full_sort(bins, tmp_path):
    """Version 4: the threads' records merge by (clock, thread), the threads in the order of their first chunk,
    and an event's line is its place in that order."""
    result = capture_preload([bins["mt"], "6", "1500"], tmp_path / "big.trace")
    assert result.ok, result.warnings
    assert result.info.chunks > 6                          # the threads' buffers interleave in the file
    in_file = list(raw_records(result.path))
    order = {}
    for r in in_file:
        order.setdefault(r[2], len(order))
    every = sorted(in_file, key=lambda r: (r[0], order[r[2]]))
    by_clock = [r for r in every if r[3] not in EXTRA_KINDS]              # calls; the others start/end threads
    assert len(every) - len(by_clock) == 2 * 6                             # each worker's start and exit
    merged = list(parse_preload_log(result.path, block_records=7))
    assert len(merged) == len(by_clock) == result.events
    with_threads = list(parse_preload_log(result.path, block_records=7, extra_events=True))
    assert [e.line for e in with_threads] == list(range(1, len(every) + 1))
    if result.info.reordered_reallocs == 0:
        assert [(e.tid, e.kind) for e in with_threads] == \
            [(r[2], KIND_CODES[r[3]][1] if r[3] in KIND_CODES else EXTRA_KINDS[r[3]]) for r in every]
        assert [e.line for e in merged] == [e.line for e in with_threads if e.kind in KIND_NAMES]
    _live, _peak, cross, unknown = oracle(merged)
    assert unknown == 0 and cross == 2 * 6 * 1500
    assert result.info.missing == 0 and result.info.made == len(every)    # every record made is in the log


def _ltrace_env(preload_result, base):
    """The preload capture's environment without the preload: same variables, same count."""
    env = dict(base)
    env.update(preload_result.environment)
    env["LD_PRELOAD"] = ""
    return env


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("ltrace") is None, reason="ltrace is not installed")
def test_sort_takes_frees_address_ltrace_e_misses_it_the_preload_does_not(bins, tmp_path):
    argv = ["sort", "-n", str(bins["dir"] / "nums.txt")]
    env = dict(os.environ, LC_ALL="C.UTF-8")
    pre = capture_preload(argv, tmp_path / "sort.trace", env=env, stdout=subprocess.DEVNULL)
    assert pre.ok, pre.warnings
    events = list(parse_preload_log(pre.path))
    assert pre.counts["malloc"] > 10 and pre.counts["free"] > 10
    assert oracle(events)[3] == 0                       # every free is of a block seen allocated
    lt_env = _ltrace_env(pre, env)
    e_mode = capture(argv, tmp_path / "sort_e.log", mode="e", env=lt_env, stdout=subprocess.DEVNULL)
    seen_e = Counter(e.kind for e in parse_file(e_mode.path))
    if {"malloc", "free"} <= inspect_elf(shutil.which("sort")).got_symbols:    # Debian's sort takes their address
        assert seen_e["malloc"] == 0 and seen_e["free"] == 0
    x_mode = capture(argv, tmp_path / "sort_x.log", mode="x", env=lt_env, stdout=subprocess.DEVNULL, retries=2)
    if not x_mode.ok:
        pytest.xfail(f"ltrace -x failed, nothing to compare with: {x_mode.warnings}")
    # -x breakpoints on the functions themselves see them all: the same calls, in the same order
    assert [(e.kind, e.nbytes) for e in parse_file(x_mode.path)] == [(e.kind, e.nbytes) for e in events]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("ltrace") is None, reason="ltrace is not installed")
def test_python3_c(tmp_path):
    code = "import json; d = {str(i): list(range(i % 50)) for i in range(2000)}; json.loads(json.dumps(d))"
    env = dict(os.environ, PYTHONHASHSEED="0")
    pre = capture_preload(["python3", "-c", code], tmp_path / "py.trace", env=env)
    assert pre.ok, pre.warnings
    events = list(parse_preload_log(pre.path))
    assert pre.counts["realloc"] > 50 and pre.counts["free"] > 1000
    assert oracle(events)[3] == 0
    # Through a pyenv shim or `env`, python3 is exec'ed by a wrapper: the main log is the last program.
    exe = os.path.realpath(shutil.which("python3"))
    if open(exe, "rb").read(2) == b"#!":
        assert pre.followed is not None and pre.followed.program.startswith("python")
        assert not pre.child_logs and not list(tmp_path.glob("py.trace.*"))
        exe = os.path.realpath(sys.executable)
    # The interpreter itself is not quite deterministic: about 1 run in 20 makes a few more calls (+5
    # malloc, +11 realloc, +5 free here, with a fixed hash seed and with ASLR off alike). The two
    # captures are two runs, so a pair that differs is taken again, up to three pairs: a tracer that
    # loses or invents calls differs every time.
    for attempt in range(3):
        direct = capture_preload([exe, "-c", code], tmp_path / f"py_direct{attempt}.trace", env=env)
        x_mode = capture([exe, "-c", code], tmp_path / f"py_x{attempt}.log", mode="x",
                         env=_ltrace_env(direct, env), retries=2)
        if not x_mode.ok:
            pytest.xfail(f"ltrace -x failed, nothing to compare with: {x_mode.warnings}")
        seen = Counter(e.kind for e in parse_file(x_mode.path))
        if seen == direct.counts:
            break
    assert seen == direct.counts


@pytest.mark.slow
def test_every_c_function_posix_memalign_results_and_an_exact_single_threaded_replay(bins, tmp_path):
    pre = capture_preload([bins["kinds"], "300"], tmp_path / "kinds.trace", stdout=subprocess.DEVNULL)
    assert pre.ok, pre.warnings
    events = list(parse_preload_log(pre.path))
    assert {"malloc", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc", "memalign",
            "valloc", "free"} <= set(pre.counts)
    pm = [e for e in events if e.kind == "posix_memalign"]
    assert len(pm) == 43 and all(e.result_ptr and e.result_ptr % e.align == 0 for e in pm)
    assert [e.size for e in events if e.failed] == [1 << 62]
    assert sum(e.kind == "free" and e.old_ptr == 0 for e in events) == 64 + 1    # keep[] empty, the failed block
    live, peak, _cross, unknown = oracle(events)
    assert unknown == 0

    report = write_replay(iter(events), tmp_path / "kinds_replay.scn", "kinds.trace")
    assert not report.degraded                            # posix_memalign blocks are known: freed in the replay
    assert report.peak_live_bytes == peak and report.live_at_end == len(live)
    assert report.counts == [replay_kind_counts(events)]
    result = scenc_exec(tmp_path / "kinds_replay.scn")
    assert [nonzero(t["ops"]) for t in result["threads"]] == report.counts
    assert result["threads"][0]["failed"] == 1

    # The replay program captured in turn: the same calls, the same peak, computed from its own pointers.
    binary = subprocess.run([SCENC, "build", str(tmp_path / "kinds_replay.scn")], capture_output=True, text=True,
                            check=True).stdout.split()[0]
    again = capture_preload([binary], tmp_path / "replay.trace", stdout=subprocess.DEVNULL)
    assert again.ok, again.warnings
    replayed = [e for e in parse_preload_log(again.path) if e.tid != again.info.pid]
    replayed = program_part(replayed, report.calls)
    expect = [("memalign" if e.kind in ("valloc", "pvalloc") else "realloc" if e.kind == "reallocarray" else e.kind,
               e.nbytes) for e in events]
    assert [(e.kind, e.nbytes) for e in replayed] == expect
    report2 = write_replay(iter(replayed), tmp_path / "replay_of_replay.scn", "replay.trace")
    assert report2.counts == report.counts
    assert report2.peak_live_bytes == report.peak_live_bytes


@pytest.mark.slow
def test_multithreaded_replay_makes_the_captured_calls_per_thread(bins, tmp_path):
    pre = capture_preload([bins["mt"], str(T), str(R)], tmp_path / "mt.trace")
    assert pre.ok, pre.warnings
    report = write_replay(parse_preload_log(pre.path), tmp_path / "mt_replay.scn", "mt.trace")
    assert report.threads == T + 1 and report.calls == pre.events and not report.degraded
    assert report.cross_thread_waits >= 2 * T * R
    for tid, counts in zip(report.tids, report.counts):
        per_kind = pre.info.calls_by_thread[tid]
        expect = Counter()
        for kind, n in per_kind.items():
            expect[COUNTED_AS.get(REPLAY_KIND[kind], REPLAY_KIND[kind])] += n
        assert counts == dict(expect)
    result = scenc_exec(tmp_path / "mt_replay.scn")
    assert [nonzero(t["ops"]) for t in result["threads"]] == report.counts

    binary = subprocess.run([SCENC, "build", str(tmp_path / "mt_replay.scn")], capture_output=True, text=True,
                            check=True).stdout.split()[0]
    again = capture_preload([binary], tmp_path / "replay.trace", stdout=subprocess.DEVNULL)
    assert again.ok, again.warnings
    per_thread = {}
    for e in parse_preload_log(again.path):
        if e.tid != again.info.pid:                  # the runtime's main thread only starts and reports
            per_thread.setdefault(e.tid, []).append(e)
    assert len(per_thread) == report.threads
    # Each replay thread ends with the free(NULL)s glibc makes when a thread exits, the same number in each.
    k, rest = divmod(sum(map(len, per_thread.values())) - report.calls, report.threads)
    assert rest == 0
    seen = [replay_kind_counts(program_part(mine, len(mine) - k)) for mine in per_thread.values()]
    key = lambda c: sorted(c.items())                # noqa: E731 -- replay threads start in any order
    assert sorted(seen, key=key) == sorted(report.counts, key=key)


# --------------------------------------------------------------------------- allocators, C++, processes
PRELOADED = [a for a in known() if a.library and a.installed]


@pytest.mark.parametrize("allocator", PRELOADED, ids=[a.name for a in PRELOADED])
def test_the_tracer_wraps_a_preloaded_allocator(bins, tmp_path, allocator):
    pre = capture_preload([bins["mt"], str(T), str(R)], tmp_path / "mt.trace", env=allocator.preload_env())
    assert pre.ok, pre.warnings
    assert pre.environment["LD_PRELOAD"].split()[0].endswith("libscntrace.so")    # the tracer first
    assert allocator.library in pre.environment["LD_PRELOAD"]
    events = list(parse_preload_log(pre.path))
    # The program's threads only: gperftools' whole tcmalloc calls setenv at start-up (glibc grows environ with
    # realloc on the main thread), which the tracer, first in LD_PRELOAD, rightly records.
    assert sum(e.kind == "realloc" and e.tid != pre.info.pid for e in events) == T * R
    assert sum(e.kind == "malloc" and e.tid != pre.info.pid for e in events) == T * R
    _live, _peak, cross, unknown = oracle(events)
    assert cross == 2 * T * R and unknown == 0
    if allocator.name == "jemalloc":
        proof = capture_preload([bins["jemalloc_proof"]], tmp_path / "proof.trace", env=allocator.preload_env())
        assert proof.tracee_status == 0, proof.stderr      # jemalloc's own counter saw the traced malloc(100000)
        assert [(e.kind, e.size) for e in parse_preload_log(proof.path) if e.size == 100000] == [("malloc", 100000)]


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_cxx_operator_new_and_delete_variants_and_bad_alloc(bins, tmp_path):
    pre = capture_preload([bins["cxx_new"]], tmp_path / "cxx.trace", stdout=subprocess.DEVNULL)
    assert pre.ok, pre.warnings
    f = pre.info.calls_by_function
    assert f["_Znwm"] == 2 and f["_Znam"] == 1 and f["_ZnwmRKSt9nothrow_t"] == 1
    assert f["_ZnwmSt11align_val_t"] == 1 and f["_ZnamSt11align_val_t"] == 1
    assert f["_ZdlPvm"] == 3 and f["_ZdaPv"] == 1 and f["_ZdlPvmSt11align_val_t"] == 1
    assert f["_ZdaPvSt11align_val_t"] == 1
    assert pre.counts.get("operator_new", 0) == 4           # new[] -> new -> malloc inside is one call
    events = list(parse_preload_log(pre.path))
    aligned = [e for e in events if e.kind == "operator_new" and e.align]
    assert [(e.size, e.align) for e in aligned] == [(128, 64)] and aligned[0].result_ptr % 64 == 0
    assert oracle(events)[3] == 0
    thrown = capture_preload([bins["throw"]], tmp_path / "throw.trace")
    assert thrown.ok and thrown.tracee_status == 0, thrown.warnings   # the exceptions went through the tracer
    failed = [e for e in parse_preload_log(thrown.path) if e.failed]
    assert [(e.kind, e.size) for e in failed] == [("operator_new_array", 1 << 62)] * 3


def test_a_forked_child_logs_to_its_own_file(bins, tmp_path):
    out = tmp_path / "fork.trace"
    pre = capture_preload([bins["fork"]], out, stdout=subprocess.PIPE)
    assert pre.ok, pre.warnings
    parent = Counter((e.kind, e.size) for e in parse_preload_log(out) if e.size is None or e.size < 4096)
    assert parent == {**{("malloc", 1000 + i): 1 for i in range(5)}, ("free", None): 5}
    assert len(pre.child_logs) == 1 and any("child process" in w for w in pre.warnings)
    child = parse_preload_log(pre.child_logs[0])
    assert child.info.ppid == pre.info.pid and child.info.missing == 0
    seen = [(e.kind, e.size) for e in child]
    assert [s for s in seen if s[0] == "malloc"] == [("malloc", 2000 + i) for i in range(7)]   # none of the parent's
    assert seen.count(("free", None)) == 7


def test_a_wrapper_that_execs_leaves_the_last_program_in_the_main_log(bins, tmp_path):
    env = dict(os.environ, LC_ALL="C.UTF-8")
    nums = str(bins["dir"] / "nums.txt")
    direct = capture_preload(["sort", "-n", nums], tmp_path / "direct.trace", env=env, stdout=subprocess.DEVNULL)
    wrapped = capture_preload(["env", "sort", "-n", nums], tmp_path / "wrapped.trace", env=env,
                              stdout=subprocess.DEVNULL)
    assert wrapped.ok and direct.ok
    assert wrapped.counts == direct.counts
    assert wrapped.followed.shim == "env" and wrapped.followed.program == "sort" and wrapped.followed.images == 1
    assert "following the shim env to sort" in wrapped.followed.sentence()
    assert not wrapped.child_logs and not list(tmp_path.glob("wrapped.trace.*"))     # env's log: left out
    kept = capture_preload(["env", "sort", "-n", nums], tmp_path / "kept.trace", env=env, stdout=subprocess.DEVNULL,
                           keep_shim_logs=True)
    assert kept.counts == direct.counts and kept.followed.kept == [tmp_path / f"kept.trace.{kept.info.pid}"]
    before = parse_preload_log(kept.followed.kept[0]).info
    assert before.pid == kept.info.pid and before.records > 0     # env's own calls, flushed before the exec


def test_a_shell_that_leaves_with__exit_keeps_its_calls(tmp_path):
    pre = capture_preload(["sh", "-c", "x=$(echo 12); echo $((x + 1))"], tmp_path / "sh.trace",
                          stdout=subprocess.DEVNULL)
    assert pre.ok, pre.warnings                      # dash exits with _exit: its buffer is flushed there
    assert pre.counts.get("malloc", 0) > 0


def test_a_killed_program_is_reported_with_its_missing_calls(bins, tmp_path):
    pre = capture_preload([bins["killed"]], tmp_path / "killed.trace")
    assert not pre.ok and pre.signal == "SIGKILL" and not pre.info.ended
    assert pre.info.missing >= 20                    # thread B's 10 mallocs and 10 frees never left its buffer
    assert any("SIGKILL" in w for w in pre.warnings) and any("missing" in w for w in pre.warnings)
    assert pre.counts["malloc"] >= 10000              # the flushed chunks are readable


@pytest.mark.slow
def test_exit_from_a_signal_handler_inside_the_tracer_does_not_hang(bins, tmp_path):
    """The handler's exit() flushes every buffer, its own thread's included, which the interrupted
    wrapper holds about half the time: it must skip it, not wait for itself."""
    for attempt in range(8):
        pre = capture_preload([bins["signal_exit"]], tmp_path / f"sig{attempt}.trace", timeout=20)
        assert pre.tracee_status == 3, pre.warnings          # None would be the timeout: a hang
        assert pre.info.ended and pre.events > 1000
        assert bool(pre.info.missing) == any("missing" in w for w in pre.warnings)


def test_threads_allocating_while_the_process_exits_lose_no_call(bins, tmp_path):
    """tests/fixtures/trace/exit_race.c: 8 threads in malloc/free loops (4 of them ending) while main calls exit.
    Every call that returned, by the program's own counts, is in the log; more by at most the one a thread was inside
    when the process ended and an ending thread's teardown (its key's free, glibc's two free(NULL)); none is missing. bench/bench_exit_race.py runs it 20 times:
    a lost call is rare in one run."""
    counts = tmp_path / "counts"
    pre = capture_preload([bins["exit_race"], str(counts), "8", "2000"], tmp_path / "race.trace")
    assert pre.ok and pre.info.missing == 0, pre.warnings
    data = counts.read_bytes()
    for slot in range(8):
        tid, returned = struct.unpack_from("<QQ", data, 16 * slot)
        recorded = sum(pre.info.calls_by_thread[tid].values())
        assert returned <= recorded <= returned + 4, (slot, tid, returned, recorded)


def test_static_and_missing_programs_are_refused(bins, tmp_path):
    if bins["static"] is None:
        pytest.skip("no static libc to link with")
    with pytest.raises(CaptureError, match="statically linked"):
        capture_preload([bins["static"]], tmp_path / "s.trace")
    with pytest.raises(CaptureError, match="command not found"):
        capture_preload(["no-such-program-xyz"], tmp_path / "n.trace")


# --------------------------------------------------------------------------- the reader
def test_damaged_logs_are_clear_errors_or_stop_where_they_are_cut(bins, tmp_path):
    pre = capture_preload([bins["mt"], str(T), str(R)], tmp_path / "mt.trace")
    data = pre.path.read_bytes()
    start = first_chunk(data[:HEADER.size])                    # after the header (and version 4's counters)
    first = start + CHUNK_HEADER                               # the first chunk's first record
    cases = {
        "text.trace": (b"malloc(16) = 0x1\n", "not a scenc tracer log"),
        "version.trace": (data[:8] + struct.pack("<I", 9) + data[12:], "version 9"),
        "empty.trace": (b"", "empty"),
        "header.trace": (data[:40], "too short"),
        "kind.trace": (data[:first] + b"\x3e" + data[first + 1:], "unknown record kind"),   # code 62
    }
    for name, (content, message) in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(TraceFormatError, match=message) as err:
            list(parse_preload_log(path))
        assert str(err.value).startswith(str(path) + ":")
    # The summary reads chunk headers and censuses only: a damaged record does not change it.
    assert parse_preload_log(tmp_path / "kind.trace").info.calls_by_kind == pre.info.calls_by_kind
    # A damaged chunk mark, or a cut: read up to there, and say where it stopped.
    second = start + CHUNK_HEADER + sum(struct.unpack_from("<I", data, start + k)[0] for k in (0, 64))
    for name, content, at in (("mark.trace", data[:second + 14] + b"\0\0" + data[second + 16:], second),
                              ("cut.trace", data[:-10], len(data) - 10 - 62)):
        path = tmp_path / name
        path.write_bytes(content)
        log = parse_preload_log(path)
        assert list(log) and log.info.stopped_at == at and "byte" in stop_sentence(log.info)


def test_reader_puts_a_moved_realloc_before_the_reuse_of_its_old_block(tmp_path):
    """Hand-made log (the race is too rare to provoke): thread 1 reallocs block A to B; it released A
    with number 1, then thread 2's malloc got A (number 2) before the realloc took its final number 3."""
    A, B, C = 0x1000, 0x2000, 0x3000
    header = HEADER.pack(b"SCNTRACE", 1, 64, 42, 1, 0, 0)
    recs = [
        (0, 100, 1, 1, 0, 0, 5, 0, 64, 0, 0, A),        # t1 malloc(64) = A
        (3, 400, 1, 3, 0, 0, 5, 2, A, 128, 0, B),       # t1 realloc(A, 128) = B: numbers 1 and 3
        (4, 500, 1, 5, 0, 0, 5, 0, B, 0, 0, 0),         # t1 free(B)
        (2, 300, 2, 1, 0, 0, 5, 0, 32, 0, 0, A),        # t2 malloc(32) = A (A's second life)
        (5, 600, 2, 5, 0, 0, 5, 0, A, 0, 0, 0),         # t2 free(A)
        (6, 700, 2, 1, 0, 0, 5, 0, 16, 0, 0, C),        # t2 malloc(16) = C
    ]
    path = tmp_path / "race.trace"
    path.write_bytes(header + b"".join(RECORD.pack(*r) for r in recs))
    log = parse_preload_log(path)
    events = list(log)
    assert [(e.tid, e.kind) for e in events] == [(1, "malloc"), (1, "realloc"), (2, "malloc"), (1, "free"),
                                                 (2, "free"), (2, "malloc")]
    assert log.info.reordered_reallocs == 1 and log.info.missing == 0
    realloc = events[1]
    assert (realloc.start_line, realloc.line, realloc.old_ptr, realloc.result_ptr) == (2, 4, A, B)
    assert oracle(events)[3] == 0
