"""The preload tracer's compact log (version 4, runtime/tracer/tracelog.h) on real programs, and old logs.

The codec is checked on made-up records of every kind and shape (tests/fixtures/tracelog_roundtrip.c,
compiled here); everything else runs the real tracer on programs compiled here and reads the log
back through the one decoder (runtime/tools/tracelog.c, loaded by scenc.trace.tracerlog).
"""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from scenc.trace.ltrace import TraceFormatError
from scenc.trace.capture.preload import capture_preload
from scenc.trace.tracerlog import CHUNK_HEADER, HEADER, first_chunk, parse_preload_log, raw_records
from scenc.trace.native import TRACELOG_HEADER, TRACELOG_SOURCE
from locations import TESTS

FIXTURES = TESTS / "fixtures"

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")

# Calls whose arguments and results the program prints, so the log can be checked against them:
# a realloc that moves (two numbers, a span), a failed posix_memalign (its error code), a failed
# malloc, calloc, the program's own mmap/munmap/mremap, and two threads (start and exit records).
SHOWN_C = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
static void *work(void *arg) {
  for (int i = 0; i < 100; i++) free(malloc(24 + (size_t)(uintptr_t)arg));
  return NULL;
}
int main(void) {
  char *a = malloc(40), *c = calloc(3, 100);
  printf("malloc 40 %lu\ncalloc 3 100 %lu\n", (unsigned long)a, (unsigned long)c);
  char *b = malloc(40);                                /* in the way: a cannot grow in place */
  char *m = realloc(a, 100000);
  printf("realloc %lu 100000 %lu\n", (unsigned long)a, (unsigned long)m);
  void *pm = NULL;
  int rc = posix_memalign(&pm, 3, 64);                 /* not a power of two: EINVAL */
  printf("posix_memalign 3 64 %d\n", rc);
  void *volatile huge = malloc((size_t)1 << 62);
  printf("malloc %lu 0\n", (unsigned long)((size_t)1 << 62 | (uintptr_t)huge));
  char *map = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  char *grown = mremap(map, 1 << 20, 4 << 20, MREMAP_MAYMOVE);
  printf("mmap %d %lu\nmremap %lu %lu\n", 1 << 20, (unsigned long)map, (unsigned long)map, (unsigned long)grown);
  munmap(grown, 4 << 20);
  pthread_t t[2];
  for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, work, (void *)i);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  free(m);
  free(b);
  free(c);
  return 0;
}
"""

# One thread replacing blocks of a pool: the common case the format is made for.
POOL_C = r"""
#include <stdlib.h>
int main(int argc, char **argv) {
  long n = atol(argv[1]);
  void *pool[256] = {0};
  unsigned x = 1;
  for (long i = 0; i < n; i++) {
    x = x * 1103515245 + 12345;
    unsigned k = (x >> 8) & 255;
    free(pool[k]);
    pool[k] = malloc(16 + ((x >> 16) & 1023));
  }
  for (int k = 0; k < 256; k++) free(pool[k]);
  return 0;
}
"""


def _write(path, data):
    path.write_bytes(data)
    return path


def compile_c(tmp_path, name, source, *flags):
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    subprocess.run(["gcc", "-O1", "-fno-builtin", *flags, "-o", str(tmp_path / name), str(src)], check=True)
    return str(tmp_path / name)


@pytest.mark.slow
@pytest.mark.parametrize("cc", [c for c in ("gcc", "clang") if shutil.which(c)])
def test_the_codec_gives_back_every_field_of_every_kind_and_stops_cleanly_at_any_cut(tmp_path, cc):
    """clang builds it with AddressSanitizer and UndefinedBehaviorSanitizer: a read past a cut aborts."""
    warnings = ["-std=gnu11", "-Wall", "-Wextra", "-Werror"]
    subprocess.run([cc, "-O2", "-fPIC", "-shared", *warnings, "-o", str(tmp_path / "lib.so"),
                    str(TRACELOG_SOURCE)], check=True)
    sanitize = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"] if cc == "clang" else []
    binary = tmp_path / f"roundtrip-{cc}"
    subprocess.run([cc, "-O1", "-g", *sanitize, *warnings, "-I", str(TRACELOG_HEADER.parent), "-o", str(binary),
                    str(FIXTURES / "tracelog_roundtrip.c")], check=True)
    for seed in range(3):
        out = subprocess.run([str(binary), str(seed)], capture_output=True, text=True)
        assert out.returncode == 0 and out.stdout.startswith("ok 3000"), out.stdout


def test_a_real_log_holds_what_the_program_did(tmp_path):
    prog = compile_c(tmp_path, "shown", SHOWN_C, "-pthread")
    shown = subprocess.run([prog], capture_output=True, text=True, check=True).stdout     # addresses differ:
    pre = capture_preload([prog], tmp_path / "shown.trace", stdout=(tmp_path / "out.txt").open("w"))  # this run's
    assert pre.ok and pre.info.version == 6, pre.warnings
    lines = (tmp_path / "out.txt").read_text().splitlines()
    assert [ln.split()[0] for ln in lines] == [ln.split()[0] for ln in shown.splitlines()]
    said = {ln.split()[0]: [int(x) for x in ln.split()[1:]] for ln in lines}
    recs = list(raw_records(pre.path))
    by_kind = {}
    for r in recs:
        by_kind.setdefault(r[3], []).append(r)
    size, ptr = said["malloc"][0], said["malloc"][1]
    assert (1, 0, 0, 0, 0, size, 0, 0, ptr) in {(r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11])
                                                for r in by_kind[1]}
    assert any(r[8:] == (3, 100, 0, said["calloc"][2]) for r in by_kind[2])
    old, new = said["realloc"][0], said["realloc"][2]
    moved = [r for r in by_kind[3] if r[8] == old and r[9] == 100000]
    assert len(moved) == 1 and moved[0][11] == new != old and moved[0][7] >= 1          # span: two numbers
    assert [(r[5], r[8], r[9], r[11]) for r in by_kind[6]] == [(22, 3, 64, 0)]   # EINVAL, no pointer
    assert any(r[8] == 1 << 62 and r[11] == 0 for r in by_kind[1])                       # the failed malloc
    assert [(r[8], r[11]) for r in by_kind[42]] == [(1 << 20, said["mmap"][1])]
    assert [(r[8], r[9], r[10], r[11]) for r in by_kind[44]] == [(said["mremap"][0], 1 << 20, 4 << 20,
                                                                  said["mremap"][1])]
    assert [(r[8], r[9]) for r in by_kind[43]] == [(said["mremap"][1], 4 << 20)]
    assert len(by_kind[40]) == 2 and len(by_kind[41]) >= 2 and len(pre.info.threads) == 3
    assert all(r[6] == 0 for r in recs)                # no time spent inside a call (not recorded since version 3)
    for tid in pre.info.threads:                       # version 4: each thread's clocks rise
        mine = [r[0] for r in recs if r[2] == tid]
        assert mine == sorted(set(mine)), tid
    assert pre.info.missing == 0 and pre.info.made == len(recs)
    times = [e.time_s for e in parse_preload_log(pre.path)]
    assert times == sorted(times) or len(pre.info.threads) > 1     # per thread, times never go back
    assert 0 <= min(times) and max(times) <= pre.wall_s


def test_a_version_2_log_is_still_read(tmp_path):
    """tests/fixtures/trace/mt_handoff_v2.trace: mt_handoff 3 20 under the tracer of version 2."""
    log = parse_preload_log(FIXTURES / "trace" / "mt_handoff_v2.trace", extra_events=True)
    events = list(log)
    info = log.info
    assert (info.version, info.records, info.thread_records, len(info.threads), info.missing) == (2, 315, 6, 4, 0)
    assert dict(info.calls_by_kind) == {"malloc": 62, "calloc": 64, "realloc": 60, "free": 129}
    assert len(events) == 321 and [e.line for e in events] == sorted(e.line for e in events)
    assert all(e.duration_s > 0 for e in events if e.kind not in ("thread_start", "thread_exit"))
    cut = tmp_path / "cut.trace"
    cut.write_bytes((FIXTURES / "trace" / "mt_handoff_v2.trace").read_bytes()[:HEADER.size + 64 * 100 + 17])
    short = parse_preload_log(cut)
    assert short.info.stopped_at == HEADER.size + 64 * 100 and len(list(short)) <= 100


@pytest.mark.slow
def test_a_log_cut_at_any_byte_is_read_up_to_its_last_whole_record(tmp_path):
    prog = compile_c(tmp_path, "pool", POOL_C)
    pre = capture_preload([prog, "30000"], tmp_path / "pool.trace")
    assert pre.ok, pre.warnings
    data = pre.path.read_bytes()
    full = [(e.line, e.kind, e.size, e.old_ptr, e.result_ptr) for e in parse_preload_log(pre.path)]
    start = first_chunk(data[:HEADER.size])            # after the header and the counters
    first_bytes = int.from_bytes(data[start:start + 4], "little")
    payload = start + CHUNK_HEADER
    # a byte with its high bit set continues a varint: cut right after it
    inside_varint = next(i for i in range(payload + 50, payload + first_bytes) if data[i] & 0x80) + 1
    cuts = {"inside a chunk header": start + 30, "inside a varint": inside_varint,
            "inside the first chunk": payload + first_bytes // 2, "at the census": payload + first_bytes + 1,
            "inside the second chunk": payload + first_bytes + 300, "in the end mark": len(data) - 5}
    counts = []
    for where, at in sorted(cuts.items(), key=lambda kv: kv[1]):
        path = tmp_path / "cut.trace"
        path.write_bytes(data[:at])
        log = parse_preload_log(path)
        events = [(e.line, e.kind, e.size, e.old_ptr, e.result_ptr) for e in log]
        assert events == full[:len(events)], where                       # what is read is right
        assert log.info.stopped_at is not None and log.info.stopped_at <= at, where
        assert at - log.info.stopped_at < max(CHUNK_HEADER, 96), where   # a record or a header at most
        assert re.search(r"cut short", log.info.stop_reason), (where, log.info.stop_reason)
        counts.append(len(events))
    assert counts == sorted(counts) and counts[0] == 0 and counts[-1] == len(full)
    with pytest.raises(TraceFormatError, match="too short"):
        (tmp_path / "head.trace").write_bytes(data[:HEADER.size - 1])
        parse_preload_log(tmp_path / "head.trace")
    counters = parse_preload_log(_write(tmp_path / "counters.trace", data[:start - 100]))   # cut in the counters
    assert counters.info.records == 0 and list(counters) == [] and counters.info.stopped_at == start - 100


def test_a_pool_loop_costs_few_bytes_per_call(tmp_path):
    prog = compile_c(tmp_path, "pool", POOL_C)
    pre = capture_preload([prog, "200000"], tmp_path / "pool.trace")
    assert pre.ok and pre.events == 400256, pre.warnings
    per_call = pre.path.stat().st_size / pre.events
    assert per_call < 12, per_call                    # about 5.5 here; version 2 took 64


# Sizes on each side of a varint's one- and two-byte limits (2^7, 2^14) and pointers moving by 8 B to about
# 1 MiB either way, back and forth: each record of the tracer's short path (runtime/tracer/tracer_record.h) and of
# the general encoder beside it, printed by the program as it makes it.
EDGES_C = r"""
#include <stdio.h>
#include <stdlib.h>
static char out[1 << 20];   /* stdout's buffer: no malloc of its own among the printed calls */
int main(void) {
  setvbuf(stdout, out, _IOFBF, sizeof out);
  static const size_t sizes[] = {1, 127, 128, 129, 200, 4000, 16383, 16384, 16385, 70000, 24, 1000000, 8, 0x3fff};
  void *held[64] = {0};
  int n = 0;
  for (int round = 0; round < 40; round++)
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
      size_t size = sizes[(i * 7 + (size_t)round) % (sizeof sizes / sizeof *sizes)];
      void *p = malloc(size);
      printf("m %zu %lu\n", size, (unsigned long)p);
      int slot = (round * 13 + (int)i * 5) % 64;
      if (held[slot]) {
        printf("f %lu\n", (unsigned long)held[slot]);
        free(held[slot]);
      }
      held[slot] = p;
      n++;
    }
  for (int slot = 0; slot < 64; slot++)
    if (held[slot]) {
      printf("f %lu\n", (unsigned long)held[slot]);
      free(held[slot]);
    }
  return n == 0;
}
"""


def test_sizes_and_pointer_moves_at_the_varint_limits_are_logged_exactly(tmp_path):
    prog = compile_c(tmp_path, "edges", EDGES_C)
    with (tmp_path / "out.txt").open("w") as out:
        pre = capture_preload([prog], tmp_path / "edges.trace", stdout=out)
    assert pre.ok and pre.info.missing == 0, pre.warnings
    said = [ln.split() for ln in (tmp_path / "out.txt").read_text().splitlines()]
    logged = [("m", str(r[8]), str(r[11])) if r[3] == 1 else ("f", str(r[8]))
              for r in raw_records(pre.path) if r[3] in (1, 5) and (r[3] == 5 or r[11] != 0)]
    printed = [tuple(s) for s in said]
    at = logged.index(printed[0])
    assert logged[at:at + len(printed)] == printed
    assert sum(1 for s in printed if s[0] == "m") == 40 * 14
    moves = [abs(int(b[-1]) - int(a[-1])) for a, b in zip(printed, printed[1:])]
    assert min(moves) < 1 << 10 and any(1 << 10 < m < 1 << 16 for m in moves) and max(moves) > 1 << 20
