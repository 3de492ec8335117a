/* Hand-written twin of bench_measure.py's cost scenario: one thread
 * allocates and frees a 64-byte block ENTRIES times, and times each
 * iteration as a C programmer would who wants a per-request figure.
 *
 *   usage: measure ENTRIES MODE
 *
 * MODE 0 times nothing (the bare loop), 1 reads the TSC before and after each
 * iteration and adds up the difference (`rdtsc`, as scenc's regions do on
 * x86-64), 2 does the same with clock_gettime(CLOCK_MONOTONIC). Prints
 * {"wall_ns": N, "cpu_ns": N} (gate open to join, the thread's CPU time), and
 * the sum of the timed intervals on stderr, so that none can be dropped. */
#include "common.h"
#if defined(__x86_64__)
#include <x86intrin.h>
static inline uint64_t ticks(void) { return __rdtsc(); }
#else
static inline uint64_t ticks(void) { return (uint64_t)clock_ns(CLOCK_MONOTONIC); }
#endif

static long entries;
static int mode;
static volatile uint64_t timed_sum;

static void *work(void *arg) {
  worker *w = arg;
  uint64_t timed = 0;
  gate_wait();
  int64_t cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  for (long i = 0; i < entries; i++) {
    uint64_t t0 = 0;
    if (mode == 1) t0 = ticks();
    else if (mode == 2) t0 = (uint64_t)clock_ns(CLOCK_MONOTONIC);
    void *p = malloc(64);
    /* gcc and clang drop a malloc whose block is only freed; this keeps it. */
    __asm__ __volatile__("" : : "r"(p));
    free(p);
    if (mode == 1) timed += ticks() - t0;
    else if (mode == 2) timed += (uint64_t)clock_ns(CLOCK_MONOTONIC) - t0;
  }
  w->cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  timed_sum = timed;
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s ENTRIES MODE\n", argv[0]);
    return 2;
  }
  entries = arg_long(argv, 1, "ENTRIES");
  mode = (int)arg_long(argv, 2, "MODE");
  worker w[1] = {{0}};
  int rc = run_threads(1, work, w);
  fprintf(stderr, "timed %llu\n", (unsigned long long)timed_sum);
  return rc;
}
