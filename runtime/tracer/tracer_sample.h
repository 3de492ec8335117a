/* tracer_sample.h -- how much of its blocks' insides the program writes, from a sample of blocks
 * looked at when malloc returns them and again when they are freed; the end mark carries the totals.
 * Part of tracer.c's one translation unit (it includes the parts in order; see there). */
#ifndef SCN_TRACER_SAMPLE_H
#define SCN_TRACER_SAMPLE_H

/* ------------------------------------------------- the insides of blocks
 * For `convert --touch auto`: does the program write the insides of its blocks? One malloc'ed block in
 * SAMPLE_EVERY (per thread) with inner pages (neither its first byte's nor its last's) some of which are not
 * resident yet is remembered with those pages (mincore); when it is freed or realloc'ed, mincore tells how
 * many of them the program backed meanwhile. A slot per hash of the pointer, claimed and released with one
 * compare-and-swap; a block whose slot is taken is not sampled. */
#define SAMPLE_SLOTS 256
#define SAMPLE_EVERY 8
/* Each sample costs two system calls, and a few thousand tell the share of pages written: after every
 * SAMPLE_HALVING samples a thread samples half as often, down to one block in SAMPLE_EVERY << 10, so a
 * long capture makes a fraction of the mincore calls it would make at the full rate. */
#define SAMPLE_HALVING 2048
#define SAMPLE_BUSY ((uintptr_t)1)
struct sample {
  _Atomic uintptr_t p;    /* the block; 0: free; SAMPLE_BUSY: being filled or read */
  uintptr_t first;        /* its first inner page */
  uint64_t fresh;         /* of the 64 inner pages from there, those not resident at the malloc */
  uint32_t n;             /* inner pages looked at */
};
static struct sample g_samples[SAMPLE_SLOTS];
static _Atomic uint32_t g_sampled;         /* slots holding a block */
static _Atomic uint64_t g_fresh, g_written;   /* inner pages not resident at the malloc; of them, resident at the free */

static struct sample *sample_slot(uintptr_t p) { return &g_samples[(uint32_t)(p >> 4) * 2654435761u >> 24]; }

static __attribute__((noinline)) void sample_block(uintptr_t p, uintptr_t first, uintptr_t last);

/* Inlined into malloc: most blocks have no inner page, and most of the others are skipped. */
static inline void sample_malloc(void *block, size_t size) {
  if (LIKELY(size <= 4096)) return;   /* no page strictly between its first byte's and its last's */
  uintptr_t p = (uintptr_t)block, first = p / 4096 + 1, last = block ? (p + size - 1) / 4096 : 0;
  if (last <= first) return;
  if (T.to_skip) {
    T.to_skip--;
    return;
  }
  sample_block(p, first, last);
}

static void sample_block(uintptr_t p, uintptr_t first, uintptr_t last) {
  uint32_t halvings = ++T.sampled / SAMPLE_HALVING;
  T.to_skip = (SAMPLE_EVERY << (halvings < 10 ? halvings : 10)) - 1;
  uint32_t n = last - first < 64 ? (uint32_t)(last - first) : 64;
  uint64_t fresh = ~resident(first, n) & (n < 64 ? (1ull << n) - 1 : ~0ull);
  struct sample *s = sample_slot(p);
  uintptr_t none = 0;
  if (!fresh || !atomic_compare_exchange_strong(&s->p, &none, SAMPLE_BUSY)) return;
  s->first = first;
  s->fresh = fresh;
  s->n = n;
  atomic_fetch_add_explicit(&g_sampled, 1, memory_order_relaxed);
  atomic_store_explicit(&s->p, p, memory_order_release);
}

static __attribute__((noinline)) void sample_look(uintptr_t p, struct sample *s);

/* Inlined into free: most frees find no sample in their slot. */
static inline void sample_free(void *block) {
  uintptr_t p = (uintptr_t)block;
  if (!p || LIKELY(!atomic_load_explicit(&g_sampled, memory_order_relaxed))) return;
  struct sample *s = sample_slot(p);
  if (atomic_load_explicit(&s->p, memory_order_relaxed) == p) sample_look(p, s);
}

static void sample_look(uintptr_t p, struct sample *s) {
  if (!atomic_compare_exchange_strong_explicit(&s->p, &p, SAMPLE_BUSY, memory_order_acquire, memory_order_relaxed))
    return;
  uint64_t now = resident(s->first, s->n);
  atomic_fetch_add_explicit(&g_fresh, (uint64_t)__builtin_popcountll(s->fresh), memory_order_relaxed);
  atomic_fetch_add_explicit(&g_written, (uint64_t)__builtin_popcountll(s->fresh & now), memory_order_relaxed);
  atomic_fetch_sub_explicit(&g_sampled, 1, memory_order_relaxed);
  atomic_store_explicit(&s->p, 0, memory_order_release);
}

#endif
