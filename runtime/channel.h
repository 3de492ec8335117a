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
 * a capacity that is not a power of two works too. A
 * full or empty channel makes the caller spin briefly, then yield the CPU
 * (these machines have fewer cores than most scenarios have threads).
 *
 * The queue lives in a header, not in the runtime library, for speed: a cell
 * holds an scn_slot, the bare pointer when nothing reads sizes, and send and
 * receive inline into the thread's loop. In a library the cell carried the
 * size too (24 bytes, cells straddling cache lines) and each handoff was a
 * call: prodcons ran about 3% slower than its hand-written twin. */
#ifndef SCN_CHANNEL_H
#define SCN_CHANNEL_H
#include <sched.h>
#include <stdatomic.h>

typedef struct {
  _Atomic uint64_t seq;
  scn_slot obj;
} scn_channel_cell;

struct scn_channel {
  _Alignas(SCN_CACHE_LINE) _Atomic uint64_t tail;  /* next position to send to */
  _Alignas(SCN_CACHE_LINE) _Atomic uint64_t head;  /* next position to receive from */
  _Alignas(SCN_CACHE_LINE) uint64_t capacity;
  scn_channel_cell *cells;
};

static inline scn_channel *scn_channel_new(uint64_t capacity) {
  scn_channel *q = scn_arena_alloc(sizeof *q);
  q->capacity = capacity;
  if (capacity == 0 || capacity > SIZE_MAX / 2 / sizeof *q->cells)
    scn_die("a channel of capacity %llu cannot be made", (unsigned long long)capacity);
  /* Every cell's sequence starts at 0, which the arena's fresh memory holds already: no store, so the
   * cells a run never reaches are never resident (a model's ring of 200 channels of 996 cells, one pair
   * of threads at a time, had 3.2 MB resident before its first allocation). */
  q->cells = scn_arena_alloc(capacity * sizeof *q->cells);
  atomic_init(&q->tail, 0);
  atomic_init(&q->head, 0);
  return q;
}

static inline void scn_channel_backoff(unsigned *spins) {
  if (++*spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } else {
    sched_yield();
  }
}

static inline void scn_channel_send(scn_channel *q, scn_slot o) {
  unsigned spins = 0;
  uint64_t pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
  for (;;) {
    scn_channel_cell *c = &q->cells[pos % q->capacity];
    uint64_t turn = pos / q->capacity;
    int64_t diff = (int64_t)(atomic_load_explicit(&c->seq, memory_order_acquire) - 2 * turn);
    if (diff == 0) {
      if (atomic_compare_exchange_weak_explicit(&q->tail, &pos, pos + 1, memory_order_relaxed,
                                                memory_order_relaxed)) {
        c->obj = o;
        atomic_store_explicit(&c->seq, 2 * turn + 1, memory_order_release);
        return;
      }
    } else {
      if (diff < 0) scn_channel_backoff(&spins);  /* full: wait for a receiver */
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
      if (atomic_compare_exchange_weak_explicit(&q->head, &pos, pos + 1, memory_order_relaxed,
                                                memory_order_relaxed)) {
        scn_slot o = c->obj;
        atomic_store_explicit(&c->seq, 2 * turn + 2, memory_order_release);
        return o;
      }
    } else {
      if (diff < 0) scn_channel_backoff(&spins);  /* empty: wait for a sender */
      pos = atomic_load_explicit(&q->head, memory_order_relaxed);
    }
  }
}
#endif
