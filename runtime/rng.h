/* Per-thread random numbers for scenario draws.
 *
 * wyrand: one 64x64->128 multiply per draw, so that drawing a size never
 * costs more than a fraction of the cheapest malloc it feeds. Streams are
 * seeded from (scenario seed, thread group, thread index) only, so every run
 * under every allocator draws the same numbers. */
#ifndef SCN_RNG_H
#define SCN_RNG_H
#include <stdint.h>

static inline uint64_t scn_rng_next(uint64_t *state) {
  *state += 0xa0761d6478bd642fULL;
  __uint128_t m = (__uint128_t)*state * (*state ^ 0xe7037ed1a0b428dbULL);
  return (uint64_t)(m >> 64) ^ (uint64_t)m;
}

/* A number in [0, n): Lemire's multiply-shift without the rejection step.
 * The bias is below n / 2^64, far under anything a benchmark can see. */
static inline uint64_t scn_below(uint64_t *state, uint64_t n) {
  return (uint64_t)(((__uint128_t)scn_rng_next(state) * n) >> 64);
}

/* splitmix64: turns structured seeds (1, 2, 3 ...) into independent streams. */
static inline uint64_t scn_seed_mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
#endif
