/* Hand-written twin of bench/scenarios/larson.scn: each thread fills a pool of
 * SLOTS blocks of uniform(16, 128) bytes, then ROUNDS times frees a random slot
 * and refills it, then frees the pool.
 *
 *   usage: larson THREADS SLOTS ROUNDS SEED
 *
 * Makes exactly the calls the generated program makes for the same params and
 * seed, and prints {"wall_ns": N, "cpu_ns": N}: gate open to last join, and
 * the workers' CPU time. */
#include "common.h"
#include <sys/mman.h>

static long slots, rounds;

static void *work(void *arg) {
  worker *w = arg;
  uint64_t rng = w->rng;
  /* The slot array comes from mmap so the allocator sees only the benchmark's
   * own calls, as in the generated program (+ 1: mmap refuses 0 bytes). */
  void **objs = mmap(NULL, (size_t)slots * sizeof *objs + 1, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (objs == MAP_FAILED) abort();
  gate_wait();
  int64_t cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  for (long s = 0; s < slots; s++) objs[s] = malloc(16 + below(&rng, 113));
  for (long r = 0; r < rounds; r++) {
    uint64_t i = below(&rng, (uint64_t)slots);
    free(objs[i]);
    objs[i] = malloc(16 + below(&rng, 113));
  }
  for (long s = 0; s < slots; s++) free(objs[s]);
  w->cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s THREADS SLOTS ROUNDS SEED\n", argv[0]);
    return 2;
  }
  int threads = (int)arg_long(argv, 1, "THREADS");
  slots = arg_long(argv, 2, "SLOTS");
  rounds = arg_long(argv, 3, "ROUNDS");
  uint64_t seed = (uint64_t)arg_long(argv, 4, "SEED");
  worker w[threads];
  for (int i = 0; i < threads; i++) w[i].rng = thread_seed(seed, i);
  return run_threads(threads, work, w);
}
