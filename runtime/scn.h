/* The scenc runtime: what every generated scenario program includes.
 *
 * The generated code is a list of calls into the inline operations below.
 * Each operation does exactly one allocator call plus a counter increment and
 * the probe hooks (empty unless a probe is compiled in), so the allocator,
 * not the scaffolding, dominates every timing. */
#ifndef SCN_H
#define SCN_H
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <malloc.h>
#include <string.h>
#include <stdatomic.h>
#include "clock.h"
#include "rng.h"

enum scn_op {  /* same order as scenario/builtins.py ALLOCATOR_OPS */
  SCN_MALLOC, SCN_CALLOC, SCN_REALLOC, SCN_ALIGNED_ALLOC, SCN_MEMALIGN,
  SCN_POSIX_MEMALIGN, SCN_FREE, SCN_OP_COUNT
};

#define SCN_MAX_REGIONS 32
#define SCN_MAX_PROBES 8
#define SCN_CACHE_LINE 64

/* A pointer the scenario holds, with the size it asked for: `write` needs the
 * size, and so do probes that track live bytes. */
typedef struct { void *ptr; size_t size; } scn_obj;

typedef struct scn_lives_node {
  scn_obj obj;
  uint64_t due;
  struct scn_lives_node *next;
} scn_lives_node;

/* Delayed frees for `lives`: a hashed timing wheel indexed by the thread's
 * operation clock; a node whose due time is a lap ahead simply stays. */
typedef struct {
  scn_lives_node **wheel;
  uint64_t mask;
  scn_lives_node *spare;    /* recycled nodes */
  scn_lives_node *forever;  /* `lives forever`: freed when the thread ends */
  uint64_t pending;
} scn_lives_state;

/* A `measure` region of one thread: its time in ticks of scn_ticks() (the
 * report turns them into nanoseconds) and how often it was entered. */
typedef struct { uint64_t ticks, entries, started; } scn_region;

/* The clock of `measure` regions: the TSC on x86-64 when the kernel keeps its
 * own time with it (its clocksource is "tsc", so the TSC is invariant and the
 * same on every CPU), otherwise CLOCK_MONOTONIC. A read costs one `rdtsc`
 * (about 10-20 ns; clock_gettime is 20-50 ns through the vDSO, and a system
 * call on clocksources the vDSO cannot read): two reads per region entry. */
extern int scn_ticks_tsc;  /* set by scn_main before any thread starts */
double scn_ticks_per_ns(void);  /* measured over the run; valid once every thread has ended */
#if defined(__x86_64__)
/* The TSC read as <x86intrin.h>'s __rdtsc() reads it (the same builtin, one `rdtsc`), without that header:
 * parsing it was most of the time of compiling a small scenario (0.25 s of CPU of 0.27). */
static inline uint64_t scn_rdtsc(void) { return __builtin_ia32_rdtsc(); }
static inline uint64_t scn_ticks(void) {
  return __builtin_expect(scn_ticks_tsc, 1) ? scn_rdtsc() : (uint64_t)scn_clock_ns(CLOCK_MONOTONIC);
}
#else
static inline uint64_t scn_ticks(void) { return (uint64_t)scn_clock_ns(CLOCK_MONOTONIC); }
#endif

/* A shared pool's slot holds a box (or nothing), never an object itself:
 * an object is a pointer and a size, and 16-byte atomics are not lock-free
 * everywhere, while one pointer exchange is. A box that comes out of a slot
 * becomes the taker's, who fills it for its next swap. */
typedef struct scn_box { scn_obj obj; struct scn_box *next; } scn_box;
typedef _Atomic(scn_box *) scn_shared_slot;

typedef struct scn_thread {
  uint64_t rng;
  uint64_t clock;                 /* allocator calls so far: the time base of `lives` */
  uint64_t count[SCN_OP_COUNT];
  uint64_t failed;                /* allocations that returned NULL */
  uint64_t sends, recvs, writes, touches;
  uint64_t maps, unmaps;          /* `map`, `unmap` (and their `lives` ends): not allocator calls */
  scn_lives_state lives;
  scn_box *boxes;                 /* spare boxes for swaps into shared pools */
  int group, index, id;
  int64_t start_ns, end_ns, cpu_ns;
  scn_region region[SCN_MAX_REGIONS];
  void *probe[SCN_MAX_PROBES];    /* per-thread state of compiled-in probes */
} scn_thread;

typedef void (*scn_body)(scn_thread *);

typedef struct { const char *name; int count; scn_body body; } scn_group;
typedef struct { int count; uint64_t capacity; } scn_channel_decl;

typedef struct {
  const char *name;
  uint64_t seed;
  const scn_group *groups;
  int n_groups;
  const char *const *regions;
  int n_regions;
  int lives_wheel_bits;           /* 0: the scenario has no `lives` */
  /* Probe entry points that are not on the hot path (may be NULL). */
  void (*thread_start)(scn_thread *);
  void (*thread_end)(scn_thread *);
  void (*report)(FILE *out);
  /* Before any thread exists (probes set up per-thread state for `threads`
   * threads, indexed by scn_thread.id, so nothing is allocated or faulted in
   * once the clock runs) and after every thread has ended, before the report. */
  void (*program_start)(int threads);
  void (*program_end)(void);
} scn_program;

/* ---- runtime.c */
int scn_main(const scn_program *prog, int argc, char **argv);
void *scn_arena_alloc(size_t bytes);  /* zeroed, never freed, never from malloc */
/* Bytes mapped by the scenario's `map` (whole pages), now and at most, all threads together. */
void scn_mapped_change(int64_t bytes);
extern int scn_uses_maps;       /* set by a scenario that maps (before scn_main): the report says how much */
void scn_barrier_wait(scn_thread *t);
/* Where a replay's threads start (`where` gives an enum scn_start per thread);
 * those started later are started and joined by the replay's own threads. */
/* SCN_START_FIRST: run to its end on the main thread before the clock starts (a replay's set-up) */
enum scn_start { SCN_START_NOW, SCN_START_LATER, SCN_START_ON_MAIN, SCN_START_FIRST };
void scn_threads_place(int (*where)(const scn_group *g, int index));
void scn_thread_spawn(int group, int index);
void scn_thread_join(int group, int index);
void scn_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* Thread churn, before scn_main: at_most[g] > 0 keeps at most that many
 * threads of group g alive; thread i + at_most starts when thread i ends. */
void scn_set_churn(const int *at_most);
scn_box *scn_boxes_new(void);   /* a linked chunk of empty boxes */

/* ---- channel.h (included by ops.h): bounded multi-producer multi-consumer queues */
typedef struct scn_channel scn_channel;

#include "dist.h"
/* The generated program defines the scn_hook_* functions for its probes and
 * then includes ops.h. */
#endif
