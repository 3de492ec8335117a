/* tracer_order.h -- the threads' clocks (tracer.c, "Order"): each thread's own (T.key, in units of the tick
 * counter >> TICK_SHIFT, advanced by T.step a record), the published one (g_clock) and, while the process has
 * more than one thread, the shadow: the last clock of every 16-byte granule of the address space an event touched.
 * Part of tracer.c's one translation unit (it includes the parts in order; see there). */
#ifndef SCN_TRACER_ORDER_H
#define SCN_TRACER_ORDER_H

/* Two published clocks:
 *  - g_clock, a time a thread read lately (at its time marks, about one record in 64, and at its events on blocks
 *    another thread touched last, when it moved on by more than CLOCK_GAP since): a hint, stored plainly, never
 *    ahead of the time. Every thread's clock is above it, so a thread that waited (for a lock, for the GIL) does not
 *    sort among the events of before it waited;
 *  - g_exact, the clocks that must be followed exactly though no block carries them: a thread's end (for its
 *    joiner), every mapping call (the program's mappings are ordered among themselves), the events on blocks
 *    without a shadow entry. Raised by compare-and-swap, never lowered. */
#define CLOCK_GAP 64             /* about 0.4 us at 2.6 GHz, >> 4 */
static _Atomic uint64_t g_clock, g_exact;
/* While there is one thread, a clock above all of its clocks until its next time mark (stored at each mark: its
 * clock plus a step for each record that fits before the next one): what a thread that starts unseen (not
 * through the pthread_create wrapper) starts after. */
static _Atomic uint64_t g_solo_clock;

static void raise_to(_Atomic uint64_t *clock, uint64_t key) {
  uint64_t g = atomic_load_explicit(clock, memory_order_relaxed);
  while (g < key && !atomic_compare_exchange_weak_explicit(clock, &g, key, memory_order_release,
                                                           memory_order_relaxed)) {
  }
}

/* A time read now, for g_clock (seen: what the caller read there last). */
static inline void tell_time(uint64_t now, uint64_t seen) {
  if (now > seen + CLOCK_GAP) atomic_store_explicit(&g_clock, now, memory_order_relaxed);
}

/* ------------------------------------------------------------------ the shadow
 * Three levels over the 47-bit user address space: g_shadow (8192 entries, 16 GiB each) -> a table of 4096
 * entries (4 MiB each) -> a leaf of 2^18 entries, one per 16-byte granule (2 MiB). Tables and leaves are mapped on
 * first use (MAP_NORESERVE: only the pages of granules that blocks start in are ever touched: at most half the
 * heap's pages, for blocks of 16 bytes) and installed with a compare-and-swap; never freed. An entry is the last
 * event's clock (less g_key_base) << SH_TAG_BITS | its thread's tag (1..SH_TAGS); 0 is no event yet.
 * Two blocks never start in one granule (allocators align blocks of 16 bytes or more to 16) but for 8-byte size
 * classes, whose two blocks share an entry: its clock is then the later event's of the two. */
#define SH_TOP_BITS 13
#define SH_MID_BITS 12
#define SH_LEAF_BITS 18
#define SH_GRANULE 4            /* log2 of 16 bytes */
#define SH_BITS (SH_GRANULE + SH_LEAF_BITS + SH_MID_BITS + SH_TOP_BITS)
#define SH_TAG_BITS 12
#define SH_TAGS ((1u << SH_TAG_BITS) - 1)
static _Atomic(uintptr_t) g_shadow[1u << SH_TOP_BITS];
static uint64_t g_key_base;              /* set once, at the constructor: entries hold clocks above it */
static _Atomic uint32_t g_next_tag;
static _Atomic int g_shadow_failed;   /* a table could not be mapped: every block event goes through g_clock */
static _Atomic uint64_t g_shadow_pages;   /* pages of shadow mapped (virtual), for the end mark's accounting */

static __attribute__((noinline, cold)) _Atomic uint64_t *shadow_grow(uintptr_t p) {
  if (p >> SH_BITS) return NULL;   /* beyond 47 bits */
  _Atomic(uintptr_t) *slot = &g_shadow[p >> (SH_GRANULE + SH_LEAF_BITS + SH_MID_BITS)];
  size_t sizes[2] = {sizeof(_Atomic(uintptr_t)) << SH_MID_BITS, sizeof(_Atomic uint64_t) << SH_LEAF_BITS};
  for (int level = 0; level < 2; level++) {
    uintptr_t next = atomic_load_explicit(slot, memory_order_acquire);
    if (!next) {
      int err = errno;
      void *m = (void *)syscall(SYS_mmap, NULL, sizes[level], PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      errno = err;
      if (m == MAP_FAILED) {
        atomic_store_explicit(&g_shadow_failed, 1, memory_order_relaxed);
        return NULL;
      }
      uintptr_t none = 0;
      if (atomic_compare_exchange_strong_explicit(slot, &none, (uintptr_t)m, memory_order_acq_rel,
                                                  memory_order_acquire)) {
        next = (uintptr_t)m;
        atomic_fetch_add_explicit(&g_shadow_pages, sizes[level] / 4096, memory_order_relaxed);
      } else {
        next = none;
        syscall(SYS_munmap, m, sizes[level]);
      }
    }
    if (level == 0)
      slot = &((_Atomic(uintptr_t) *)next)[(p >> (SH_GRANULE + SH_LEAF_BITS)) & ((1u << SH_MID_BITS) - 1)];
    else
      return &((_Atomic uint64_t *)next)[(p >> SH_GRANULE) & ((1u << SH_LEAF_BITS) - 1)];
  }
  return NULL;
}

/* The shadow entry of block p; NULL when there is none (beyond 47 bits, out of memory). */
static inline _Atomic uint64_t *shadow_of(uintptr_t p) {
  if (UNLIKELY(p >> SH_BITS)) return NULL;
  uintptr_t mid = atomic_load_explicit(&g_shadow[p >> (SH_GRANULE + SH_LEAF_BITS + SH_MID_BITS)],
                                       memory_order_acquire);
  if (UNLIKELY(!mid)) return shadow_grow(p);
  uintptr_t leaf = atomic_load_explicit(
      &((_Atomic(uintptr_t) *)mid)[(p >> (SH_GRANULE + SH_LEAF_BITS)) & ((1u << SH_MID_BITS) - 1)],
      memory_order_acquire);
  if (UNLIKELY(!leaf)) return shadow_grow(p);
  return &((_Atomic uint64_t *)leaf)[(p >> SH_GRANULE) & ((1u << SH_LEAF_BITS) - 1)];
}

/* Pages of the shadow the tracer wrote (resident), for the end mark: faults the program did not take. */
static uint64_t shadow_resident(void) {
  uint64_t pages = 0;
  unsigned char vec[512];
  for (size_t i = 0; i < sizeof g_shadow / sizeof *g_shadow; i++) {
    uintptr_t mid = atomic_load_explicit(&g_shadow[i], memory_order_acquire);
    if (!mid) continue;
    pages += (sizeof(_Atomic(uintptr_t)) << SH_MID_BITS) / 4096;
    for (size_t j = 0; j < (1u << SH_MID_BITS); j++) {
      uintptr_t leaf = atomic_load_explicit(&((_Atomic(uintptr_t) *)mid)[j], memory_order_acquire);
      if (!leaf || mincore((void *)leaf, sizeof(_Atomic uint64_t) << SH_LEAF_BITS, vec)) continue;
      for (size_t k = 0; k < sizeof vec; k++) pages += vec[k] & 1;
    }
  }
  return pages;
}

/* A fork's child starts with no shadow (the parent's tables stay mapped, unused). */
static void shadow_forget(void) {
  for (size_t i = 0; i < sizeof g_shadow / sizeof *g_shadow; i++)
    atomic_store_explicit(&g_shadow[i], 0, memory_order_relaxed);
  atomic_store_explicit(&g_shadow_failed, 0, memory_order_relaxed);
}

/* ------------------------------------------------------------------ clocks */
#define FIRST_STEP 4             /* a thread's step before its first time mark: about 25 ns at 2.6 GHz */
#define MAX_STEP (1ull << 40)

static inline uint64_t now_key(void) { return now_tick() >> TICK_SHIFT; }

/* Through g_exact: after every clock that went through it before. */
static __attribute__((noinline)) uint64_t clock_exact(uint64_t k) {
  uint64_t g = atomic_load_explicit(&g_exact, memory_order_acquire);
  if (g >= k) k = g + 1;
  raise_to(&g_exact, k);
  return k;
}

static uint32_t new_tag(void) {
  return atomic_fetch_add_explicit(&g_next_tag, 1, memory_order_relaxed) % SH_TAGS + 1;
}

/* More than one thread: not behind g_clock (a thread behind it waited: its clock is then the time, read now), and
 * after the last event on block p. When another thread (or none) touched p last, the clock is the time itself, read
 * now: the order of a handoff is the order in time, not an estimate. A block without a shadow entry (and every
 * block once a table could not be mapped: its entry may be missing the last event) goes through g_exact as well. */
static inline uint64_t clock_threaded(uint64_t k, uint64_t prev, uintptr_t p) {
  uint64_t floor = atomic_load_explicit(&g_clock, memory_order_relaxed);
  if (UNLIKELY(floor >= k)) {   /* behind a time another thread read: this thread waited, its estimate is stale, */
    uint64_t now = now_key();   /* and g_clock may be behind that thread's last events by up to CLOCK_GAP */
    k = now > floor ? now : floor + 1;
  }
  if (!p) return k;
  _Atomic uint64_t *s = shadow_of(p);
  if (LIKELY(s)) {
    uint64_t e = atomic_load_explicit(s, memory_order_relaxed);
    if ((e & SH_TAGS) != T.tag) {       /* another thread's block, or a new one */
      uint64_t now = now_key();
      k = now > prev ? now : prev + 1;
      if (floor >= k) k = floor + 1;
      tell_time(now, floor);
    }
    if (e) {
      uint64_t last = (e >> SH_TAG_BITS) + g_key_base;
      if (last >= k) k = last + 1;
    }
    atomic_store_explicit(s, (k > g_key_base ? k - g_key_base : 0) << SH_TAG_BITS | T.tag, memory_order_relaxed);
  }
  if (UNLIKELY(!s || atomic_load_explicit(&g_shadow_failed, memory_order_relaxed))) k = clock_exact(k);
  return k;
}

static _Atomic uint32_t g_first_tid;      /* the first thread that recorded (the process's, or a fork's child's) */

/* A thread's first clock: now. A thread the pthread_create wrapper did not see start (libc's own helpers, a raw
 * clone) also starts after the clocks of the threads before it, and from then on clocks follow blocks. */
static __attribute__((noinline)) uint64_t clock_start(void) {
  uint64_t k = now_key();
  uint32_t first = 0;
  if (!atomic_compare_exchange_strong(&g_first_tid, &first, tid()) && first != tid()) {
    if (!(atomic_load_explicit(&g_mode, memory_order_relaxed) & M_THREADED))
      atomic_fetch_or_explicit(&g_mode, M_THREADED, memory_order_seq_cst);
    (void)os_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
    uint64_t before[3] = {atomic_load_explicit(&g_clock, memory_order_acquire),
                          atomic_load_explicit(&g_exact, memory_order_acquire),
                          atomic_load_explicit(&g_solo_clock, memory_order_acquire)};
    for (int i = 0; i < 3; i++)
      if (before[i] >= k) k = before[i] + 1;
  }
  if (T.key < k) T.key = k;
  if (!T.tag) T.tag = new_tag();
  T.step = FIRST_STEP;
  return T.step;
}

/* This thread's next clock, for an event on block p (0: none). A release takes it before the real call (its
 * address may be handed out at once), an allocation after the real call returns. */
static inline uint64_t take_key(uintptr_t p) {
  uint64_t step = T.step;
  if (UNLIKELY(!step)) step = clock_start();
  uint64_t prev = T.key, k = prev + step;
  if (UNLIKELY(atomic_load_explicit(&g_mode, memory_order_relaxed) & M_THREADED)) k = clock_threaded(k, prev, p);
  T.key = k;
  return k;
}

/* The program's own mappings: after every mapping call before, in any thread. */
static uint64_t take_global_key(void) {
  uint64_t k = take_key(0);
  T.key = k = clock_exact(k);
  return k;
}

/* From now on clocks follow blocks (called before a second thread can make a call). */
static void become_threaded(void) {
  if (!(atomic_load_explicit(&g_mode, memory_order_relaxed) & M_THREADED))
    atomic_fetch_or_explicit(&g_mode, M_THREADED, memory_order_seq_cst);
}

/* A time mark (put_slow, about once in 64 records): the thread's step from the time since its last mark, aimed
 * so that its clock is on time at the next one; a clock behind the time (the thread waited) jumps to it; the time
 * is published in g_clock, and while there is one thread, a clock above its clocks until the next mark (`ahead`:
 * the records that fit before it, plus this one's step) in g_solo_clock. Returns the step for the records after
 * this one. */
static uint64_t retime(uint64_t key, uint64_t records, uint64_t ahead) {
  uint64_t now = now_key(), step = T.step;
  if (T.mark_time && records && now > T.mark_time) {
    uint64_t spent = now - T.mark_time;
    step = key < now ? spent / records : spent > key - now ? (spent - (key - now)) / records : 1;
    if (step < 1) step = 1;
    if (step > MAX_STEP) step = MAX_STEP;
  }
  if (now > step && T.key < now - step) T.key = now - step;   /* the next record is now */
  T.mark_time = now;
  T.step = step;
  tell_time(now, atomic_load_explicit(&g_clock, memory_order_relaxed));
  if (!(atomic_load_explicit(&g_mode, memory_order_relaxed) & M_THREADED))
    atomic_store_explicit(&g_solo_clock, (T.key > key ? T.key : key) + (ahead + 1) * step, memory_order_relaxed);
  return step;
}

#endif
