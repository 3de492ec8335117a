/* Hand-written twin of bench/scenarios/loop.scn (allocbench's `loop`): each
 * thread allocates a block of uniform(1, maxsize) bytes and frees it at once.
 *
 *   usage: loop THREADS ITERATIONS MAXSIZE SEED
 *
 * Makes exactly the calls the generated program makes for the same params and
 * seed, and prints {"wall_ns": N, "cpu_ns": N}: gate open to last join, and
 * the workers' CPU time. */
#include "common.h"

static long iterations;
static uint64_t maxsize;

static void *work(void *arg) {
  worker *w = arg;
  uint64_t rng = w->rng;
  gate_wait();
  int64_t cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  for (long i = 0; i < iterations; i++) {
    void *p = malloc(1 + below(&rng, maxsize));
    /* gcc and clang drop a malloc whose block is only freed; this keeps it. */
    __asm__ __volatile__("" : : "r"(p));
    free(p);
  }
  w->cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s THREADS ITERATIONS MAXSIZE SEED\n", argv[0]);
    return 2;
  }
  int threads = (int)arg_long(argv, 1, "THREADS");
  iterations = arg_long(argv, 2, "ITERATIONS");
  maxsize = (uint64_t)arg_long(argv, 3, "MAXSIZE");
  uint64_t seed = (uint64_t)arg_long(argv, 4, "SEED");
  worker w[threads];
  for (int i = 0; i < threads; i++) w[i].rng = thread_seed(seed, i);
  return run_threads(threads, work, w);
}
