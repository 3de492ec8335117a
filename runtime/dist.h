/* Table-driven draws, built by the compiler when it knows the parameters.
 *
 * Discrete distributions (weighted, choice, histogram) use Walker's alias
 * method: exact to 2^-32 and O(1). Continuous ones (lognormal, geometric) use
 * 4096 quantiles with linear interpolation between neighbours: one random
 * number, one small table, no log/exp on the hot path. */
#ifndef SCN_DIST_H
#define SCN_DIST_H
#include <stdint.h>

typedef struct {
  uint32_t n;
  const uint32_t *prob;    /* keep entry i when the low 32 bits are below prob[i] */
  const uint32_t *alias;
  const uint64_t *values;
} scn_alias_table;

#define SCN_QUANTILE_BITS 12
typedef struct { const uint64_t *q; } scn_quantile_table;  /* (1 << bits) + 1 entries */

/* Branch-free: whether a draw keeps its column or takes the alias is a coin
 * toss the branch predictor cannot learn, and a mispredicted branch here cost
 * more than the malloc+free pair the draw feeds (bench/bench_overhead.py). */
static inline uint64_t scn_draw_alias(uint64_t *rng, const scn_alias_table *t) {
  uint64_t r = scn_rng_next(rng);
  uint32_t i = (uint32_t)(((r >> 32) * t->n) >> 32);
  uint32_t other = t->alias[i];
  uint32_t keep = -(uint32_t)((uint32_t)r < t->prob[i]);  /* all ones or zero */
  return t->values[other ^ ((other ^ i) & keep)];
}

static inline uint64_t scn_draw_quantile(uint64_t *rng, const scn_quantile_table *t) {
  uint64_t r = scn_rng_next(rng);
  uint64_t k = r >> (64 - SCN_QUANTILE_BITS);
  uint64_t frac = (r >> 20) & 0xffffffffULL;
  uint64_t lo = t->q[k], hi = t->q[k + 1];
  return lo + (uint64_t)(((__uint128_t)(hi - lo) * frac) >> 32);
}

static inline uint64_t scn_draw_uniform(uint64_t *rng, int64_t a, int64_t b) {
  return (uint64_t)a + scn_below(rng, (uint64_t)(b - a) + 1);
}

static inline uint64_t scn_draw_pow2(uint64_t *rng, int64_t lo, int64_t hi) {
  return 1ULL << (lo + (int64_t)scn_below(rng, (uint64_t)(hi - lo) + 1));
}
#endif
