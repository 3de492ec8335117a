/* The scenario operations. Included by the generated program after the probe
 * hooks (scn_hook_*) are defined, so hooks inline into every operation and
 * vanish when no probe uses them. */
#ifndef SCN_OPS_H
#define SCN_OPS_H
#include <time.h>

#define SCN_NULL_OBJ ((scn_obj){ NULL, 0 })

/* Division by a value known only at run time: a scenario mistake, not a crash. */
static inline int64_t scn_div(int64_t a, int64_t b, int line) {
  if (b == 0) scn_die("division by zero (scenario line %d)", line);
  if (b == -1) return (int64_t)(0 - (uint64_t)a);  /* INT64_MIN / -1 traps (SIGFPE) */
  return a / b;
}

static inline int64_t scn_mod(int64_t a, int64_t b, int line) {
  if (b == 0) scn_die("division by zero (scenario line %d)", line);
  if (b == -1) return 0;  /* INT64_MIN % -1 traps too */
  return a % b;
}

static inline uint64_t scn_checked_index(int64_t i, uint64_t n, int line) {
  if (__builtin_expect(i < 0 || (uint64_t)i >= n, 0))
    scn_die("index %lld is out of range 0..%llu (scenario line %d)",
            (long long)i, (unsigned long long)(n ? n - 1 : 0), line);
  return (uint64_t)i;
}

/* A pool slot keeps an object's size only if something reads sizes (`write`,
 * the live and layout probes): otherwise it is the bare pointer, 8 bytes, as
 * a hand-written program would keep it (compiler/lower.py decides, and then
 * reads and writes slots through these two). */
#ifdef SCN_POINTER_SLOTS
typedef void *scn_slot;
static inline scn_obj scn_slot_obj(scn_slot s) { return (scn_obj){ s, 0 }; }
static inline scn_slot scn_slot_of(scn_obj o) { return o.ptr; }
#else
typedef scn_obj scn_slot;
static inline scn_obj scn_slot_obj(scn_slot s) { return s; }
static inline scn_slot scn_slot_of(scn_obj o) { return o; }
#endif
#include "channel.h"  /* its cells hold scn_slots */

/* A pool's slots, from the runtime's arena. The size may be computed at run
 * time, so a negative or impossible one is the scenario's mistake, said so,
 * rather than a size_t that wraps around to a tiny allocation. */
static inline scn_slot *scn_pool_new(int64_t n, uint64_t *count, int line) {
  if (n < 0 || (uint64_t)n > SIZE_MAX / 2 / sizeof(scn_slot))
    scn_die("a pool of %lld slots cannot be made (scenario line %d)", (long long)n, line);
  *count = (uint64_t)n;
  return scn_arena_alloc((size_t)n * sizeof(scn_slot));
}

/* Frees made by the runtime (delayed `lives` frees, free_all, leaks) do not
 * advance the clock: a lifetime counts the thread's own statements. */
static inline void scn_free_quiet(scn_thread *t, scn_obj o) {
  scn_hook_op_before(t, SCN_FREE, o.size);
  free(o.ptr);
  t->count[SCN_FREE]++;
  scn_hook_op_after(t, SCN_FREE, SCN_NULL_OBJ, o);
}

/* The end of an object the runtime holds: a free, or an unmap for a mapping (below). */
static inline void scn_release_quiet(scn_thread *t, scn_obj o);

#if SCN_USES_LIVES
/* ---- `lives`: delayed frees, kept here rather than in runtime.c so that the
 * frees they make pass through the same inlined probe hooks as any other. */

static inline scn_lives_node *scn_lives_node_get(scn_thread *t) {
  scn_lives_state *l = &t->lives;
  if (!l->spare) {
    enum { CHUNK = 4096 };
    scn_lives_node *chunk = scn_arena_alloc(CHUNK * sizeof *chunk);
    for (int i = 0; i < CHUNK - 1; i++) chunk[i].next = &chunk[i + 1];
    l->spare = chunk;
  }
  scn_lives_node *n = l->spare;
  l->spare = n->next;
  return n;
}

static inline void scn_lives_add(scn_thread *t, scn_obj o, uint64_t lifetime) {
  scn_lives_node *n = scn_lives_node_get(t);
  n->obj = o;
  n->due = t->clock + lifetime;
  scn_lives_node **slot = &t->lives.wheel[n->due & t->lives.mask];
  n->next = *slot;
  *slot = n;
  t->lives.pending++;
}

static inline void scn_lives_add_forever(scn_thread *t, scn_obj o) {
  scn_lives_node *n = scn_lives_node_get(t);
  n->obj = o;
  n->next = t->lives.forever;
  t->lives.forever = n;
}

static inline void scn_lives_free_node(scn_thread *t, scn_lives_node *n) {
  scn_release_quiet(t, n->obj);
  n->next = t->lives.spare;
  t->lives.spare = n;
}

static void scn_lives_drain(scn_thread *t) {
  scn_lives_node **link = &t->lives.wheel[t->clock & t->lives.mask];
  while (*link) {
    scn_lives_node *n = *link;
    if (n->due <= t->clock) {
      *link = n->next;
      t->lives.pending--;
      scn_lives_free_node(t, n);
    } else {
      link = &n->next;  /* due a lap of the wheel later */
    }
  }
}

/* At the end of the thread every pending object is freed, bucket by bucket
 * from the current clock on (roughly soonest due first), then the `forever`
 * ones: the thread leaves nothing behind. */
static void scn_lives_finish(scn_thread *t) {
  for (uint64_t k = 1; k <= t->lives.mask + 1 && t->lives.pending; k++) {
    scn_lives_node **slot = &t->lives.wheel[(t->clock + k) & t->lives.mask];
    while (*slot) {
      scn_lives_node *n = *slot;
      *slot = n->next;
      t->lives.pending--;
      scn_lives_free_node(t, n);
    }
  }
  while (t->lives.forever) {
    scn_lives_node *n = t->lives.forever;
    t->lives.forever = n->next;
    scn_lives_free_node(t, n);
  }
}

static inline void scn_lives(scn_thread *t, scn_obj o, uint64_t lifetime) {
  if (lifetime == 0) scn_release_quiet(t, o);
  else scn_lives_add(t, o, lifetime);
}
#endif

/* One allocator call made by a statement: the `lives` clock moves on. */
static inline void scn_tick(scn_thread *t) {
  t->clock++;
#if SCN_USES_LIVES
  if (t->lives.wheel[t->clock & t->lives.mask]) scn_lives_drain(t);
#endif
}

/* Hide where a block came from. Otherwise clang deletes a malloc whose block
 * is only freed (and a compiler may fuse malloc + memset into calloc), and
 * the allocator would not see the calls the scenario makes. */
static inline void *scn_opaque(void *p) {
  __asm__ __volatile__("" : "+r"(p));
  return p;
}

/* Hide a size's value range. A size the scenario computes may be negative on
 * a path that never runs (`for i in self .. 0 { malloc(i + 1) }`), and gcc's
 * -Walloc-size-larger-than and -Wstringop-overflow would fail the build on
 * it; at run time such a size is just an allocation that fails. */
static inline size_t scn_opaque_size(size_t n) {
  __asm__("" : "+r"(n));
  return n;
}

/* One store in every page of [p + from, p + to) and one on its last byte: the
 * first use of fresh memory, which makes the kernel back each page (a minor
 * fault) without the cost of filling it. The step is 4 KiB, the smallest page
 * size of the machines scenc runs on, so bigger pages are touched too. */
#define SCN_TOUCH_STEP 4096
static inline void scn_touch_range(void *p, size_t from, size_t to) {
  volatile char *c = p;
  if (from >= to) return;
  for (size_t at = from; at < to; at += SCN_TOUCH_STEP) c[at] = 1;
  c[to - 1] = 1;
}

/* What a program does to a block it just got, [from, size) being the new part:
 * `touch_new` of a scenario (SCN_TOUCH_NEW, a constant: no cost when none)
 * and a replay's touch mode (runtime/replay.h) alike. */
enum { SCN_TOUCH_NONE, SCN_TOUCH_FIRST, SCN_TOUCH_PAGES, SCN_TOUCH_ALL };
static inline void scn_touch_new(scn_obj o, size_t from, int mode) {
  if (!o.ptr || from >= o.size) return;
  switch (mode) {
    case SCN_TOUCH_FIRST:   /* the two ends, as a program writing a header and a trailer */
      ((volatile char *)o.ptr)[from] = 1;
      ((volatile char *)o.ptr)[o.size - 1] = 1;
      break;
    case SCN_TOUCH_PAGES: scn_touch_range(o.ptr, from, o.size); break;
    case SCN_TOUCH_ALL:
      memset((char *)o.ptr + from, 1, o.size - from);
      __asm__ __volatile__("" : : "r"(o.ptr) : "memory");
      break;
    default: break;
  }
}

#ifndef SCN_TOUCH_NEW
#define SCN_TOUCH_NEW SCN_TOUCH_NONE
#endif

/* A failed allocation is counted on a branch the CPU predicts, never on the
 * fast path: left alone, gcc turns the count into cmp + adc on every call, a
 * data dependency on the allocator's result that slowed loop measurably
 * next to its hand-written twin (bench/bench_overhead.py). The empty asm keeps
 * the branch a branch. */
#define SCN_ON_FAILURE(cond, action) \
  do { if (__builtin_expect(cond, 0)) { __asm__ __volatile__(""); action; } } while (0)

#if SCN_USES_MAPS
/* ---- `map`, `unmap`: memory the program maps itself, as language runtimes
 * and caches do, never through malloc. Not allocator calls: no probe hook sees
 * them, the `lives` clock does not move, and they are counted apart (maps,
 * unmaps, the mapped bytes in the report). A new mapping gets `touch_new` as a
 * new block does (a program's mapping is used memory only once touched). */
#include <sys/mman.h>
#define SCN_PAGE_BYTES(n) ((int64_t)(((n) + 4095) & ~(size_t)4095))

/* The mapping of `map(n)`, untouched: counted, and its pages in the mapped bytes. */
static inline scn_obj scn_map_untouched(scn_thread *t, size_t n) {
  n = scn_opaque_size(n);
  void *p = n ? mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
  scn_obj o = { p == MAP_FAILED ? NULL : p, p == MAP_FAILED ? 0 : n };
  t->maps++;
  SCN_ON_FAILURE(o.ptr == NULL, t->failed++);
  if (o.ptr) scn_mapped_change(SCN_PAGE_BYTES(n));
  return o;
}

static inline scn_obj scn_map(scn_thread *t, size_t n) {
  scn_obj o = scn_map_untouched(t, n);
  if (SCN_TOUCH_NEW) scn_touch_new(o, 0, SCN_TOUCH_NEW);
  return o;
}

/* `map(n, percent_written = P)`: the first P percent of its pages written (one store a page), instead of
 * `touch_new`: a program that uses part of a mapping it made (a model's estimate of how much). */
static inline scn_obj scn_map_written(scn_thread *t, size_t n, int64_t percent) {
  scn_obj o = scn_map_untouched(t, n);
  if (!o.ptr) return o;
  uint64_t pages = ((uint64_t)o.size + 4095) / 4096;
  uint64_t written = percent <= 0 ? 0 : percent >= 100 ? pages : (pages * (uint64_t)percent + 99) / 100;
  if (written) scn_touch_range(o.ptr, 0, written >= pages ? o.size : (size_t)written * 4096);
  return o;
}

static inline void scn_unmap_quiet(scn_thread *t, scn_obj o) {
  t->unmaps++;
  if (!o.ptr) return;
  munmap(o.ptr, o.size);
  scn_mapped_change(-SCN_PAGE_BYTES(o.size));
}

static inline void scn_unmap(scn_thread *t, scn_obj o) { scn_unmap_quiet(t, o); }

/* A mapping handed to `lives` is marked in its pointer's lowest bit (a
 * mapping starts on a page), so the delayed end unmaps it instead of freeing. */
static inline scn_obj scn_as_mapping(scn_obj o) {
  if (o.ptr) o.ptr = (void *)((uintptr_t)o.ptr | 1);
  return o;
}
#endif

/* A `lives` end: a free, or an unmap for a mapping (only in scenarios that
 * map: no cost elsewhere). */
static inline void scn_release_quiet(scn_thread *t, scn_obj o) {
#if SCN_USES_MAPS
  if ((uintptr_t)o.ptr & 1) {
    o.ptr = (void *)((uintptr_t)o.ptr & ~(uintptr_t)1);
    scn_unmap_quiet(t, o);
    return;
  }
#endif
  scn_free_quiet(t, o);
}

static inline scn_obj scn_done_alloc(scn_thread *t, enum scn_op op, void *p, size_t n) {
  scn_obj o = { scn_opaque(p), n };
  t->count[op]++;
  SCN_ON_FAILURE(p == NULL, (t->failed++, o.size = 0));
  if (SCN_TOUCH_NEW) scn_touch_new(o, 0, SCN_TOUCH_NEW);
  scn_hook_op_after(t, op, o, SCN_NULL_OBJ);
  scn_tick(t);
  return o;
}

static inline scn_obj scn_malloc(scn_thread *t, size_t n) {
  n = scn_opaque_size(n);
  scn_hook_op_before(t, SCN_MALLOC, n);
  return scn_done_alloc(t, SCN_MALLOC, malloc(n), n);
}

static inline scn_obj scn_calloc(scn_thread *t, size_t nmemb, size_t n) {
  nmemb = scn_opaque_size(nmemb);
  n = scn_opaque_size(n);
  scn_hook_op_before(t, SCN_CALLOC, nmemb * n);
  return scn_done_alloc(t, SCN_CALLOC, calloc(nmemb, n), nmemb * n);
}

static inline scn_obj scn_aligned_alloc(scn_thread *t, size_t align, size_t n) {
  n = scn_opaque_size(n);
  scn_hook_op_before(t, SCN_ALIGNED_ALLOC, n);
  return scn_done_alloc(t, SCN_ALIGNED_ALLOC, aligned_alloc(align, n), n);
}

static inline scn_obj scn_memalign(scn_thread *t, size_t align, size_t n) {
  n = scn_opaque_size(n);
  scn_hook_op_before(t, SCN_MEMALIGN, n);
  return scn_done_alloc(t, SCN_MEMALIGN, memalign(align, n), n);
}

static inline scn_obj scn_posix_memalign(scn_thread *t, size_t align, size_t n) {
  void *p = NULL;
  n = scn_opaque_size(n);
  scn_hook_op_before(t, SCN_POSIX_MEMALIGN, n);
  if (posix_memalign(&p, align, n) != 0) p = NULL;
  return scn_done_alloc(t, SCN_POSIX_MEMALIGN, p, n);
}

/* A failed realloc leaves the old block alive, so the scenario keeps it. The
 * old pointer is read after the call only through an opaque copy: gcc 12's
 * -Wuse-after-free cannot tell the failure path from a use of a freed block. */
static inline scn_obj scn_realloc(scn_thread *t, scn_obj old, size_t n) {
  n = scn_opaque_size(n);
  scn_hook_op_before(t, SCN_REALLOC, n);
  scn_obj before = { scn_opaque(old.ptr), old.size };
  void *p = scn_opaque(realloc(old.ptr, n));
  scn_obj o = { p, n };
  t->count[SCN_REALLOC]++;
  SCN_ON_FAILURE(p == NULL && n != 0, (t->failed++, o = before));
  if (SCN_TOUCH_NEW) scn_touch_new(o, before.size, SCN_TOUCH_NEW);   /* the grown part; a failure: nothing */
  scn_hook_op_after(t, SCN_REALLOC, o, before);
  scn_tick(t);
  return o;
}

static inline void scn_free(scn_thread *t, scn_obj o) {
  scn_free_quiet(t, o);
  scn_tick(t);
}

static inline void scn_free_all(scn_thread *t, scn_slot *pool, uint64_t n) {
  for (uint64_t i = 0; i < n; i++) {
    scn_obj o = scn_slot_obj(pool[i]);
    if (o.ptr) scn_free_quiet(t, o);
    pool[i] = scn_slot_of(SCN_NULL_OBJ);
  }
}

/* ---- shared pools: one atomic exchange per swap, no lock. The exchange
 * orders the box's contents: the giver fills it before, the taker reads it
 * after (acquire-release), whichever threads they are. */
static inline scn_obj scn_swap(scn_thread *t, scn_shared_slot *slot, scn_obj o) {
  scn_box *in = NULL;
  if (o.ptr) {
    if (!t->boxes) t->boxes = scn_boxes_new();
    in = t->boxes;
    t->boxes = in->next;
    in->obj = o;
  }
  scn_box *out = atomic_exchange_explicit(slot, in, memory_order_acq_rel);
  if (!out) return SCN_NULL_OBJ;
  scn_obj got = out->obj;
  out->next = t->boxes;
  t->boxes = out;
  return got;
}

static inline void scn_free_all_shared(scn_thread *t, scn_shared_slot *slots, uint64_t n) {
  for (uint64_t i = 0; i < n; i++) {
    scn_obj o = scn_swap(t, &slots[i], SCN_NULL_OBJ);
    if (o.ptr) scn_free_quiet(t, o);
  }
}

/* `write(p, n, bytes = b)`: only the head of the object, as programs that
 * fill a header or a small record in a bigger block do. */
static inline void scn_write_bytes(scn_thread *t, scn_obj o, uint64_t times, int64_t bytes) {
  t->writes++;
  if (!o.ptr || bytes <= 0) return;
  size_t n = (uint64_t)bytes < o.size ? (size_t)bytes : o.size;
  for (uint64_t k = 0; k < times; k++) {
    memset(o.ptr, (int)k, n);
    __asm__ __volatile__("" : : "r"(o.ptr) : "memory");
  }
}

static inline void scn_touch(scn_thread *t, scn_obj o) {
  t->touches++;
  if (o.ptr) scn_touch_range(o.ptr, 0, o.size);
}

/* `write(p, n)`: every byte of the object, n passes; the empty asm keeps each
 * pass a real store, as a program working on its data would. */
static inline void scn_write(scn_thread *t, scn_obj o, uint64_t times) {
  scn_write_bytes(t, o, times, INT64_MAX);
}

/* `work(n)`: the program's own CPU time between its calls, with no memory of its own: n steps of one
 * dependent chain of 64-bit multiply-adds (a unit: a multiply's and an add's latency, about 4 cycles;
 * docs/language.md). The empty asm makes each step's result an input the compiler cannot see through, so
 * the chain is neither folded nor vectorised; no clock is read and nothing sleeps. */
static inline void scn_work(int64_t n) {
  uint64_t x = (uint64_t)n;
  for (int64_t k = 0; k < n; k++) {
    x = x * 0x9E3779B97F4A7C15ull + (uint64_t)k;
    __asm__ __volatile__("" : "+r"(x));
  }
}

static inline void scn_send(scn_thread *t, scn_channel *q, scn_obj o) {
  t->sends++;
  scn_channel_send(q, scn_slot_of(o));
}

static inline scn_obj scn_recv(scn_thread *t, scn_channel *q) {
  t->recvs++;
  return scn_slot_obj(scn_channel_recv(q));
}

/* A `measure` region: one clock read at each end (scn_ticks, no system
 * call), the probes' hooks outside the window it times. */
static inline void scn_region_begin(scn_thread *t, int r) {
  scn_hook_region_begin(t, r);
  t->region[r].started = scn_ticks();
}

static inline void scn_region_end(scn_thread *t, int r) {
  t->region[r].ticks += scn_ticks() - t->region[r].started;
  t->region[r].entries++;
  scn_hook_region_end(t, r);
}
#endif
