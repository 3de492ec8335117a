/* Hand-written twin of bench/scenarios/prodcons.scn: producer k sends OBJECTS
 * blocks of uniform(16, MAXSIZE) bytes to consumer k through a bounded queue
 * of CAPACITY, and the consumer frees them.
 *
 *   usage: prodcons PAIRS OBJECTS CAPACITY MAXSIZE SEED
 *
 * The queue is the one runtime/channel.h implements (Vyukov's bounded array
 * queue, one CAS per send or receive, the same turn numbering and the same
 * spin-then-yield wait), written the way a careful author would for this
 * program alone: a cell holds just the pointer, and the queue code sits in the
 * same file. Makes exactly the calls the generated program makes for the same
 * params and seed, and prints {"wall_ns": N, "cpu_ns": N}. */
#define _GNU_SOURCE
#include "common.h"
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>

typedef struct {
  _Atomic uint64_t seq;
  void *ptr;
} cell;

typedef struct {
  _Alignas(64) _Atomic uint64_t tail;
  _Alignas(64) _Atomic uint64_t head;
  _Alignas(64) uint64_t capacity;
  cell *cells;
} queue;

static long pairs, objects;
static uint64_t maxsize;
static queue *queues;
static worker *workers;

/* From mmap, so the allocator sees only the benchmark's own calls (zero:
 * every cell's seq starts at turn 0, waiting for its sender). */
static void *pages(size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) abort();
  return p;
}

static void backoff(unsigned *spins) {
  if (++*spins < 64) __builtin_ia32_pause();
  else sched_yield();
}

static void send(queue *q, void *p) {
  unsigned spins = 0;
  uint64_t pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
  for (;;) {
    cell *c = &q->cells[pos % q->capacity];
    uint64_t turn = pos / q->capacity;
    int64_t diff = (int64_t)(atomic_load_explicit(&c->seq, memory_order_acquire) - 2 * turn);
    if (diff == 0) {
      if (atomic_compare_exchange_weak_explicit(&q->tail, &pos, pos + 1, memory_order_relaxed,
                                                memory_order_relaxed)) {
        c->ptr = p;
        atomic_store_explicit(&c->seq, 2 * turn + 1, memory_order_release);
        return;
      }
    } else {
      if (diff < 0) backoff(&spins);
      pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
    }
  }
}

static void *recv(queue *q) {
  unsigned spins = 0;
  uint64_t pos = atomic_load_explicit(&q->head, memory_order_relaxed);
  for (;;) {
    cell *c = &q->cells[pos % q->capacity];
    uint64_t turn = pos / q->capacity;
    int64_t diff = (int64_t)(atomic_load_explicit(&c->seq, memory_order_acquire) - (2 * turn + 1));
    if (diff == 0) {
      if (atomic_compare_exchange_weak_explicit(&q->head, &pos, pos + 1, memory_order_relaxed,
                                                memory_order_relaxed)) {
        void *p = c->ptr;
        atomic_store_explicit(&c->seq, 2 * turn + 2, memory_order_release);
        return p;
      }
    } else {
      if (diff < 0) backoff(&spins);
      pos = atomic_load_explicit(&q->head, memory_order_relaxed);
    }
  }
}

/* Threads 0 .. PAIRS-1 produce, PAIRS .. 2*PAIRS-1 consume, as the runtime
 * numbers the producer group before the consumer group. */
static void *work(void *arg) {
  worker *w = arg;
  long k = w - workers;
  uint64_t rng = w->rng;
  gate_wait();
  int64_t cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  if (k < pairs) {
    for (long i = 0; i < objects; i++) send(&queues[k], malloc(16 + below(&rng, maxsize - 15)));
  } else {
    for (long i = 0; i < objects; i++) free(recv(&queues[k - pairs]));
  }
  w->cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s PAIRS OBJECTS CAPACITY MAXSIZE SEED\n", argv[0]);
    return 2;
  }
  pairs = arg_long(argv, 1, "PAIRS");
  objects = arg_long(argv, 2, "OBJECTS");
  uint64_t capacity = (uint64_t)arg_long(argv, 3, "CAPACITY");
  maxsize = (uint64_t)arg_long(argv, 4, "MAXSIZE");
  uint64_t seed = (uint64_t)arg_long(argv, 5, "SEED");
  if (pairs < 1 || capacity < 1 || maxsize < 16) {
    fprintf(stderr, "%s: PAIRS and CAPACITY must be at least 1, MAXSIZE at least 16\n", argv[0]);
    return 2;
  }
  queues = pages((size_t)pairs * sizeof *queues);
  for (long k = 0; k < pairs; k++) {
    queues[k].capacity = capacity;
    queues[k].cells = pages(capacity * sizeof(cell));
  }
  worker w[2 * pairs];
  workers = w;
  for (long i = 0; i < pairs; i++) w[i].rng = thread_seed(seed, (int)i);
  for (long i = pairs; i < 2 * pairs; i++) w[i].rng = 0;  /* consumers draw nothing */
  return run_threads((int)(2 * pairs), work, w);
}
