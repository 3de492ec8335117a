/* What a random draw costs next to the allocator call it feeds.
 *
 *   usage: draw_cost N
 *
 * Times N draws of each kind the generated code makes (runtime/rng.h and
 * dist.h, inlined exactly as in a scenario program) and N malloc(64)+free
 * pairs, and prints the nanoseconds per draw or pair as JSON. Built by
 * bench_overhead.py with -I runtime and a generated draw_tables.h that holds
 * two tables made by compiler/distributions.py: T_alias for weighted {16: 5, 32: 3,
 * 4096: 1} and T_quantile for lognormal(median = 64, sigma = 1.5). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "rng.h"
#include "dist.h"
#include "draw_tables.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Summing the draws keeps them from being dropped; the sum is printed. */
#define TIME_DRAWS(label, expr)                                  \
  do {                                                           \
    uint64_t rng = 42, sum = 0;                                  \
    double t0 = now_s();                                         \
    for (long i = 0; i < n; i++) sum += (expr);                  \
    double dt = now_s() - t0;                                    \
    printf("%s\"%s\": %.3f", first ? "" : ", ", label, dt * 1e9 / n); \
    first = 0;                                                   \
    check ^= sum;                                                \
  } while (0)

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 10000000;
  if (n <= 0) {
    fprintf(stderr, "usage: %s N\n", argv[0]);
    return 2;
  }
  uint64_t check = 0;
  int first = 1;
  printf("{");
  TIME_DRAWS("random", scn_below(&rng, 1000));
  TIME_DRAWS("uniform", scn_draw_uniform(&rng, 1, 1024));
  TIME_DRAWS("pow2", scn_draw_pow2(&rng, 4, 12));
  TIME_DRAWS("weighted", scn_draw_alias(&rng, &T_alias));
  TIME_DRAWS("lognormal", scn_draw_quantile(&rng, &T_quantile));

  double t0 = now_s();
  for (long i = 0; i < n; i++) {
    void *p = malloc(64);
    __asm__ __volatile__("" : : "r"(p));  /* keep the pair: gcc drops it otherwise */
    free(p);
  }
  printf(", \"malloc_free\": %.3f, \"check\": %llu}\n", (now_s() - t0) * 1e9 / n,
         (unsigned long long)check);
  return 0;
}
