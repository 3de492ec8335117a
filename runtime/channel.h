/* Bounded multi-producer multi-consumer channels of objects, compiled into
 * each scenario program (ops.h includes this header).
 *
 * Dmitry Vyukov's array queue: one compare-and-swap per send or receive and no
 * lock, so a cross-thread handoff costs far less than the malloc and free it
 * connects. Each cell carries a sequence number that says whose turn it is:
 * position p uses cell p % capacity in turn p / capacity, and the cell reads
 * 2 * turn while it waits for its sender, 2 * turn + 1 while it waits for its
 * receiver. (Vyukov's original numbering, p and p + 1, cannot tell "full" from
 * "free for the next turn" when the capacity is 1: a second sender overwrote
 * the first object and its receiver waited forever.) Positions only grow, so
 * a capacity that is not a power of two works too.
 *
 * A full or empty channel makes the caller spin briefly, yield the CPU a few
 * times, then sleep on the channel's futex until a send or receive moves it.
 * Sleeping matters: a thread that waits a whole run (a model's main thread
 * that frees only what the last worker sends) kept one of these machines' two
 * cores busy yielding while the threads that worked took turns on the other;
 * the program it stands for sleeps in a condition variable. A sender or
 * receiver pays one load of the sleepers' count after its compare-and-swap;
 * no fence is added (a sequentially consistent store for each move slowed
 * prodcons measurably under jemalloc and mimalloc).
 *
 * The queue lives in a header, not in the runtime library, for speed: a cell
 * holds an scn_slot, the bare pointer when nothing reads sizes, and send and
 * receive inline into the thread's loop. In a library the cell carried the
 * size too (24 bytes, cells straddling cache lines) and each handoff was a
 * call: prodcons ran slower than its hand-written twin. */
#ifndef SCN_CHANNEL_H
#define SCN_CHANNEL_H
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct {
  _Atomic uint64_t seq;
  scn_slot obj;
} scn_channel_cell;

struct scn_channel {
  _Alignas(SCN_CACHE_LINE) _Atomic uint64_t tail;  /* next position to send to */
  _Alignas(SCN_CACHE_LINE) _Atomic uint64_t head;  /* next position to receive from */
  _Alignas(SCN_CACHE_LINE) uint64_t capacity;
  scn_channel_cell *cells;
  _Alignas(SCN_CACHE_LINE) _Atomic uint32_t sleepers;   /* threads asleep (or about to be) on `moved` */
  _Atomic uint32_t moved;                               /* the futex: bumped by a move that wakes sleepers */
};

static inline scn_channel *scn_channel_new(uint64_t capacity) {
  scn_channel *q = scn_arena_alloc(sizeof *q);
  q->capacity = capacity;
  if (capacity == 0 || capacity > SIZE_MAX / 2 / sizeof *q->cells)
    scn_die("a channel of capacity %llu cannot be made", (unsigned long long)capacity);
  /* Every cell's sequence starts at 0, which the arena's fresh memory holds already: no store, so the
   * cells a run never reaches are never resident (a model's ring of 200 channels, one pair of threads at
   * a time, had megabytes resident before its first allocation when every cell was stored). */
  q->cells = scn_arena_alloc(capacity * sizeof *q->cells);
  atomic_init(&q->tail, 0);
  atomic_init(&q->head, 0);
  atomic_init(&q->sleepers, 0);
  atomic_init(&q->moved, 0);
  return q;
}

enum { SCN_CHANNEL_SPINS = 64, SCN_CHANNEL_YIELDS = 64 };

/* Wait until *claimed (the channel's tail for a receiver, its head for a
 * sender) passes `limit`, that is until a sender claims the position this
 * receiver waits for, or a receiver the one whose cell this sender needs. A
 * sleeper counts itself and then reads *claimed; a mover claims its position
 * (compare-and-swap) and then reads the count, all sequentially consistent:
 * either the sleeper sees the claim and does not sleep, or the mover sees
 * the sleeper and wakes it once its cell is stored. On x86 that costs
 * nothing more than the locked instruction each side has already. */
static inline void scn_channel_wait(scn_channel *q, _Atomic uint64_t *claimed, uint64_t limit, unsigned *spins) {
  ++*spins;
  if (*spins < SCN_CHANNEL_SPINS) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } else if (*spins < SCN_CHANNEL_SPINS + SCN_CHANNEL_YIELDS) {
    sched_yield();
  } else {
    atomic_fetch_add(&q->sleepers, 1);
    uint32_t moved = atomic_load(&q->moved);
    if (atomic_load(claimed) <= limit)
      syscall(SYS_futex, &q->moved, FUTEX_WAIT_PRIVATE, moved, NULL, NULL, 0);
    else
      sched_yield();        /* claimed: its cell is being stored */
    atomic_fetch_sub(&q->sleepers, 1);
  }
}

static inline void scn_channel_wake(scn_channel *q) {
  atomic_fetch_add(&q->moved, 1);
  syscall(SYS_futex, &q->moved, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static inline void scn_channel_send(scn_channel *q, scn_slot o) {
  unsigned spins = 0;
  uint64_t pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
  for (;;) {
    scn_channel_cell *c = &q->cells[pos % q->capacity];
    uint64_t turn = pos / q->capacity;
    int64_t diff = (int64_t)(atomic_load_explicit(&c->seq, memory_order_acquire) - 2 * turn);
    if (diff == 0) {
      if (atomic_compare_exchange_weak_explicit(&q->tail, &pos, pos + 1, memory_order_seq_cst,
                                                memory_order_relaxed)) {
        uint32_t sleepers = atomic_load(&q->sleepers);
        c->obj = o;
        atomic_store_explicit(&c->seq, 2 * turn + 1, memory_order_release);
        if (__builtin_expect(sleepers != 0, 0)) scn_channel_wake(q);
        return;
      }
    } else {
      if (diff < 0) scn_channel_wait(q, &q->head, pos - q->capacity, &spins);  /* full: wait for a receiver */
      pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
    }
  }
}

static inline scn_slot scn_channel_recv(scn_channel *q) {
  unsigned spins = 0;
  uint64_t pos = atomic_load_explicit(&q->head, memory_order_relaxed);
  for (;;) {
    scn_channel_cell *c = &q->cells[pos % q->capacity];
    uint64_t turn = pos / q->capacity;
    int64_t diff = (int64_t)(atomic_load_explicit(&c->seq, memory_order_acquire) - (2 * turn + 1));
    if (diff == 0) {
      if (atomic_compare_exchange_weak_explicit(&q->head, &pos, pos + 1, memory_order_seq_cst,
                                                memory_order_relaxed)) {
        uint32_t sleepers = atomic_load(&q->sleepers);
        scn_slot o = c->obj;
        atomic_store_explicit(&c->seq, 2 * turn + 2, memory_order_release);
        if (__builtin_expect(sleepers != 0, 0)) scn_channel_wake(q);
        return o;
      }
    } else {
      if (diff < 0) scn_channel_wait(q, &q->tail, pos, &spins);  /* empty: wait for a sender */
      pos = atomic_load_explicit(&q->head, memory_order_relaxed);
    }
  }
}
#endif
