/* One thread, many allocations of varied sizes and lifetimes; every block is written.
 *
 *   alloc_heavy [ITERATIONS]      (default 800000: about 0.15-0.3 s)
 *
 * Three pools stand for three lifetimes: 'short' slots are replaced every few
 * iterations, 'medium' ones every few hundred, 'long' ones a few times a run.
 * Sizes: mostly 16-256 bytes, some 1-16 KiB, a few 64-512 KiB (above glibc's
 * mmap threshold at first). A quarter of the medium blocks grow with realloc.
 * Each new block (and each grown part) is written in full, as a program that
 * fills its buffers would. The checksum printed keeps the stores alive. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SHORT = 64, MEDIUM = 4096, LONG = 256 };

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t next(void) {          /* xorshift64*: cheap next to malloc */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545f4914f6cdd1dull;
}

static size_t pick_size(void) {
  uint64_t r = next() % 1000;
  if (r < 850) return 16 + next() % 241;            /* small objects */
  if (r < 995) return 1024 + next() % (15 * 1024);  /* buffers */
  return (64 << 10) + next() % (448 << 10);         /* large, mmap'd by glibc at first */
}

static unsigned char *fresh(size_t n) {
  unsigned char *p = malloc(n);
  if (!p) { perror("malloc"); exit(1); }
  memset(p, (int)(n & 0xff), n);
  return p;
}

static void replace(unsigned char **slot, size_t *len) {
  free(*slot);
  *len = pick_size();
  *slot = fresh(*len);
}

int main(int argc, char **argv) {
  long iterations = argc > 1 ? atol(argv[1]) : 800000;
  static unsigned char *shrt[SHORT], *med[MEDIUM], *lng[LONG];
  static size_t shrt_n[SHORT], med_n[MEDIUM], lng_n[LONG];
  uint64_t sum = 0;
  for (long i = 0; i < iterations; i++) {
    { size_t k = next() % SHORT; replace(&shrt[k], &shrt_n[k]); }
    if (i % 4 == 0) {
      size_t k = next() % MEDIUM;
      if (med[k] && next() % 4 == 0 && med_n[k] < (256 << 10)) {   /* grow it, write the new part */
        size_t old = med_n[k], n = old + old / 2 + 16;
        unsigned char *q = realloc(med[k], n);
        if (!q) { perror("realloc"); return 1; }
        memset(q + old, 7, n - old);
        med[k] = q, med_n[k] = n;
      } else {
        replace(&med[k], &med_n[k]);
      }
    }
    if (i % 512 == 0) {
      size_t k = next() % LONG;
      replace(&lng[k], &lng_n[k]);
    }
    sum += shrt[i % SHORT] ? shrt[i % SHORT][0] : 0;
  }
  for (int k = 0; k < SHORT; k++) free(shrt[k]);
  for (int k = 0; k < MEDIUM; k++) free(med[k]);
  for (int k = 0; k < LONG; k++) free(lng[k]);
  printf("alloc_heavy: %ld iterations, checksum %llu\n", iterations, (unsigned long long)sum);
  return 0;
}
