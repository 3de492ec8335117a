/* What both hand-written twins share: the random stream, the start gate and
 * the clock. Each piece matches what runtime/ does, so that a twin and the
 * program scenc generates make the same allocator calls in the same order and
 * are timed over the same interval; only the scaffolding between calls
 * differs, and that difference is what bench_overhead.py measures. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* wyrand and Lemire's multiply-shift, as in runtime/rng.h: one multiply per
 * draw is what a careful benchmark author would pick anyway. */
static inline uint64_t wyrand(uint64_t *s) {
  *s += 0xa0761d6478bd642fULL;
  __uint128_t m = (__uint128_t)*s * (*s ^ 0xe7037ed1a0b428dbULL);
  return (uint64_t)(m >> 64) ^ (uint64_t)m;
}

static inline uint64_t below(uint64_t *s, uint64_t n) {
  return (uint64_t)(((__uint128_t)wyrand(s) * n) >> 64);
}

/* splitmix64, seeded per thread from (seed, thread index) like the runtime,
 * whose only thread group has number 0. */
static inline uint64_t seed_mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

static inline uint64_t thread_seed(uint64_t seed, int index) {
  return seed_mix(seed_mix(seed) ^ (uint64_t)index);
}

static inline int64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* One thread's state, a cache line of its own so threads share nothing. */
typedef struct {
  _Alignas(64) uint64_t rng;
  int64_t cpu_ns;  /* the thread's CPU time over its work, as the runtime reports it */
} worker;

static long arg_long(char **argv, int i, const char *name) {
  char *end;
  long v = strtol(argv[i], &end, 10);
  if (*end || v < 0) {
    fprintf(stderr, "%s: %s must be a non-negative integer, not '%s'\n", argv[0], name, argv[i]);
    exit(2);
  }
  return v;
}

/* The start gate: every thread is created and waiting before the clock starts,
 * so thread creation is not timed. */
static struct {
  pthread_mutex_t lock;
  pthread_cond_t changed;
  int ready, open;
} gate = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };

static void gate_wait(void) {
  pthread_mutex_lock(&gate.lock);
  gate.ready++;
  pthread_cond_broadcast(&gate.changed);
  while (!gate.open) pthread_cond_wait(&gate.changed, &gate.lock);
  pthread_mutex_unlock(&gate.lock);
}

/* Starts `n` threads on `body`, opens the gate once all wait at it, joins
 * them and prints the time from gate open to the last join, and the summed
 * CPU time of the workers. */
static int run_threads(int n, void *(*body)(void *), worker *w) {
  pthread_t tids[n];
  for (int i = 0; i < n; i++) {
    if (pthread_create(&tids[i], NULL, body, &w[i])) {
      fprintf(stderr, "cannot start thread %d\n", i);
      return 1;
    }
  }
  pthread_mutex_lock(&gate.lock);
  while (gate.ready < n) pthread_cond_wait(&gate.changed, &gate.lock);
  int64_t start = clock_ns(CLOCK_MONOTONIC);
  gate.open = 1;
  pthread_cond_broadcast(&gate.changed);
  pthread_mutex_unlock(&gate.lock);
  for (int i = 0; i < n; i++) pthread_join(tids[i], NULL);
  int64_t wall = clock_ns(CLOCK_MONOTONIC) - start, cpu = 0;
  for (int i = 0; i < n; i++) cpu += w[i].cpu_ns;
  printf("{\"wall_ns\": %lld, \"cpu_ns\": %lld}\n", (long long)wall, (long long)cpu);
  return 0;
}
#endif
