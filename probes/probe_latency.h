/* The `latency` probe: the cost of single allocator calls, in TSC cycles, into
 * a log-scale histogram per operation kind and thread.
 *
 * About one call in SCENC_LATENCY_SAMPLE is timed (default 64, rounded up to
 * a power of two; 1 times every call): a timed call costs two TSC reads and
 * two mispredicted branches, several times a whole malloc or free in a
 * tight loop, so timing every call would make `loop` several times slower. The gap to the next timed call is drawn at random from
 * [N/2, 3N/2), so a scenario with a period of its own cannot alias with it;
 * the countdown and the start time live in the thread's scn_thread (slots of
 * their own) where the compiler can keep them in registers. The cost of an
 * empty measurement (two back-to-back TSC reads) is measured at start and
 * taken off every sample. Buckets: values below 16 exactly, above that 16
 * buckets per power of two (at most 6.25% wide); the maximum is kept exactly.
 * The probe adds work around every call: it must not share a run with `time`. */
#ifndef SCN_PROBE_LATENCY_H
#define SCN_PROBE_LATENCY_H
#include <time.h>
#include "probe_common.h"   /* scn_rdtsc() is scn.h's, included before every probe header */

#define SCN_LAT_SUB_BITS 4
#define SCN_LAT_BUCKETS (16 + (64 - SCN_LAT_SUB_BITS) * 16)

typedef struct {
  _Alignas(64) uint64_t jitter;  /* the probe's own generator: the scenario's stays untouched */
  uint64_t samples[SCN_OP_COUNT], max[SCN_OP_COUNT], sum[SCN_OP_COUNT];
  uint64_t hist[SCN_OP_COUNT][SCN_LAT_BUCKETS];
  uint64_t tsc_start, tsc_end, ns_start, ns_end;
} scn_latency_thread;

static scn_latency_thread *scn_latency_threads;
static int scn_latency_n;
static uint64_t scn_latency_every;   /* a power of two */
static uint64_t scn_latency_overhead;

static inline unsigned scn_latency_bucket(uint64_t v) {
  if (v < 16) return (unsigned)v;
  unsigned e = 63 - (unsigned)__builtin_clzll(v);  /* >= 4 */
  return 16 + (e - SCN_LAT_SUB_BITS) * 16 + (unsigned)((v >> (e - SCN_LAT_SUB_BITS)) & 15);
}

static inline uintptr_t scn_latency_gap(scn_latency_thread *s) {
  if (scn_latency_every <= 1) return 1;
  s->jitter ^= s->jitter << 13;  /* xorshift64 */
  s->jitter ^= s->jitter >> 7;
  s->jitter ^= s->jitter << 17;
  return (uintptr_t)(scn_latency_every / 2 + (s->jitter & (scn_latency_every - 1)));
}

static void scn_probe_latency_program_start(int threads) {
  scn_latency_n = threads;
  scn_latency_threads = scn_probe_state_array(threads, sizeof *scn_latency_threads);
  uint64_t every = scn_probe_env_u64("SCENC_LATENCY_SAMPLE", 64);
  if (every > (1u << 30)) every = 1u << 30;
  scn_latency_every = 1;
  while (scn_latency_every < every) scn_latency_every <<= 1;
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < 1000; i++) {
    uint64_t a = scn_rdtsc();
    uint64_t b = scn_rdtsc();
    if (b - a < best) best = b - a;
  }
  scn_latency_overhead = best;
}

static void scn_probe_latency_thread_start(scn_thread *t) {
  scn_latency_thread *s = &scn_latency_threads[t->id];
  t->probe[SCN_SLOT_LATENCY] = s;
  s->jitter = 0x9E3779B97F4A7C15ULL * (uint64_t)(t->id + 1);
  t->probe[SCN_SLOT_LATENCY_COUNTDOWN] = (void *)scn_latency_gap(s);
  t->probe[SCN_SLOT_LATENCY_T0] = NULL;
  s->ns_start = (uint64_t)scn_clock_ns(CLOCK_MONOTONIC);
  s->tsc_start = scn_rdtsc();
}

static void scn_probe_latency_thread_end(scn_thread *t) {
  scn_latency_thread *s = t->probe[SCN_SLOT_LATENCY];
  s->tsc_end = scn_rdtsc();
  s->ns_end = (uint64_t)scn_clock_ns(CLOCK_MONOTONIC);
}

static inline void scn_probe_latency_op_before(scn_thread *t, enum scn_op op, size_t size) {
  (void)op;
  (void)size;
  uintptr_t left = (uintptr_t)t->probe[SCN_SLOT_LATENCY_COUNTDOWN] - 1;
  t->probe[SCN_SLOT_LATENCY_COUNTDOWN] = (void *)left;
  if (__builtin_expect(left == 0, 0)) t->probe[SCN_SLOT_LATENCY_T0] = (void *)(uintptr_t)(scn_rdtsc() | 1);
}

/* Out of line: only timed calls come here. Returns the next gap. */
static __attribute__((noinline)) uintptr_t scn_latency_record(scn_latency_thread *s, enum scn_op op,
                                                              uint64_t cycles) {
  uint64_t d = cycles > scn_latency_overhead ? cycles - scn_latency_overhead : 0;
  s->samples[op]++;
  s->sum[op] += d;
  if (d > s->max[op]) s->max[op] = d;
  s->hist[op][scn_latency_bucket(d)]++;
  return scn_latency_gap(s);
}

static inline void scn_probe_latency_op_after(scn_thread *t, enum scn_op op, scn_obj result, scn_obj old) {
  (void)result;
  (void)old;
  uintptr_t t0 = (uintptr_t)t->probe[SCN_SLOT_LATENCY_T0];
  if (__builtin_expect(t0 != 0, 0)) {
    uint64_t t1 = scn_rdtsc();
    t->probe[SCN_SLOT_LATENCY_T0] = NULL;
    /* t0 had its low bit set to tell "armed" from 0: at most one cycle off. */
    t->probe[SCN_SLOT_LATENCY_COUNTDOWN] =
        (void *)scn_latency_record(t->probe[SCN_SLOT_LATENCY], op, t1 - (t0 & ~(uintptr_t)1));
  }
}

/* {"every", "overhead_cycles", "sub_bits", "threads": [{"tsc_cycles", "ns",
 *   "ops": {"malloc": {"samples", "sum", "max", "hist": [[bucket, count], ...]}}}]} */
static void scn_probe_latency_report(FILE *out) {
  static const char *const names[SCN_OP_COUNT] = {
    "malloc", "calloc", "realloc", "aligned_alloc", "memalign", "posix_memalign", "free"
  };
  fprintf(out, "{\"every\": %llu, \"overhead_cycles\": %llu, \"sub_bits\": %d, \"threads\": [",
          (unsigned long long)scn_latency_every, (unsigned long long)scn_latency_overhead, SCN_LAT_SUB_BITS);
  for (int i = 0; i < scn_latency_n; i++) {
    const scn_latency_thread *s = &scn_latency_threads[i];
    fprintf(out, "%s{\"tsc_cycles\": %llu, \"ns\": %llu, \"ops\": {", i ? ", " : "",
            (unsigned long long)(s->tsc_end - s->tsc_start), (unsigned long long)(s->ns_end - s->ns_start));
    int first = 1;
    for (int op = 0; op < SCN_OP_COUNT; op++) {
      if (!s->samples[op]) continue;
      fprintf(out, "%s\"%s\": {\"samples\": %llu, \"sum\": %llu, \"max\": %llu, \"hist\": [", first ? "" : ", ",
              names[op], (unsigned long long)s->samples[op], (unsigned long long)s->sum[op],
              (unsigned long long)s->max[op]);
      first = 0;
      int firstb = 1;
      for (int b = 0; b < SCN_LAT_BUCKETS; b++) {
        if (!s->hist[op][b]) continue;
        fprintf(out, "%s[%d, %llu]", firstb ? "" : ", ", b, (unsigned long long)s->hist[op][b]);
        firstb = 0;
      }
      fputs("]}", out);
    }
    fputs("}}", out);
  }
  fputs("]}", out);
}
#endif
