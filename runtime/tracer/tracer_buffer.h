/* tracer_buffer.h -- each thread's buffer: its records encoded into one chunk (tracelog.h gives the
 * layout), sealed with a census and written whole when full, at thread exit and at process exit;
 * a chunk of one record for a thread that is leaving and once the process is leaving ('Buffers'
 * in tracer.c). Buffers are never freed: a thread that ends hands its buffer to the next one.
 * Part of tracer.c's one translation unit (it includes the parts in order; see there). */
#ifndef SCN_TRACER_BUFFER_H
#define SCN_TRACER_BUFFER_H

/* A chunk's records: about 40000 calls. The write(2) of a chunk costs the process more than its bytes' copy into the
 * page cache: cfrac (183M calls, 553 MB) spent 0.40-0.46 s of system time with 32 KiB, 0.17-0.27 s with 128 KiB
 * (bench/results/2026-11-27-tracerfast.md). */
#define BUF_BYTES (128 * 1024)
#define MARK_BYTES 256          /* a time mark every 256 bytes of records: about one record in 64 */

/* One thread's chunk being filled; data holds the chunk header, then the records. Only its owner touches it,
 * but for the process-exit flush (below, "Leaving"). */
struct buffer {
  _Alignas(64) _Atomic int writing;   /* the owner is inside a call (the real call and its record) or a flush */
  uint32_t used;                   /* bytes of records in data */
  uint32_t limit;                  /* at `used` this high the next record takes the slow path (mark, full, start) */
  uint64_t mark_made;              /* records made at its last time mark */
  struct scn_tl_encoder enc;       /* the previous record's clock and pointer, the step the decoder knows */
  _Atomic uint64_t *counter;       /* records made into this buffer: its counters line in the log, or `own` */
  uint32_t counts[64];             /* its records by kind: the census */
  struct scn_tl_chunk head;        /* tid, first clock, ns and tick of the chunk being filled */
  _Atomic uint64_t own;            /* the count while the buffer has no counters line */
  _Atomic int owned;               /* a live thread records into it */
  _Atomic int given;               /* the process is leaving: 1 being written out (by its owner or the exit
                                      flush, whichever came first), 2 written out */
  _Atomic uint32_t high;           /* most bytes it ever held: its pages the tracer itself faulted in */
  int lined;                       /* counter is a line of the log's counters */
  struct buffer *next;             /* every buffer ever made: never unlinked, reused when released */
  _Alignas(64) uint8_t data[SCN_TL_CHUNK_SIZE + BUF_BYTES + SCN_TL_TRAILER + SCN_TL_MAX_CENSUS];
};

static _Atomic(struct buffer *) g_buffers;
static pthread_key_t g_key;                /* its destructor, thread_gone (tracer_thread.h), ends a thread's buffer */
static _Atomic int g_key_ok;

/* ------------------------------------------------------------------ leaving
 * The process-exit flush writes every thread's buffer, while other threads may still be recording. An owner
 * enters its buffer with a plain store (writing = 1) before the real call and then reads g_mode (begin,
 * tracer_record.h); the flush raises M_EXITING in g_mode, runs membarrier (every running thread passes a full
 * barrier: so either the owner's store is seen, or the owner sees M_EXITING), then waits for each buffer's writing
 * to drop to 0 (the call finished and recorded) before writing it out. An owner that sees M_EXITING leaves its
 * buffer alone from then on and writes each record at once, once its buffer is written out (give_up: it writes it
 * itself if the flush has not come to it yet), so that its chunks stay in order in the file. Without membarrier
 * (M_FENCED) the owner's store and read are sequentially consistent (fenced_mode). */
/* Without membarrier: the store again as a read-modify-write, sequentially consistent, then the read: the
 * exit flush's fetch-or and reads are too, so one of the two sees the other. */
static inline uint32_t fenced_mode(struct buffer *b) {
  (void)atomic_exchange_explicit(&b->writing, 1, memory_order_seq_cst);
  return atomic_load_explicit(&g_mode, memory_order_seq_cst);
}

static inline int enter(struct buffer *b) {
  atomic_store_explicit(&b->writing, 1, memory_order_relaxed);
  atomic_signal_fence(memory_order_seq_cst);
  uint32_t m = atomic_load_explicit(&g_mode, memory_order_acquire);
  if (UNLIKELY(m & M_FENCED)) m = fenced_mode(b);
  if (UNLIKELY(m & M_EXITING)) {
    atomic_store_explicit(&b->writing, 0, memory_order_release);
    return 0;
  }
  return 1;
}

static inline void leave(struct buffer *b) {
  atomic_store_explicit(&b->writing, 0, memory_order_release);
}

static inline void count_made(struct buffer *b) {
  _Atomic uint64_t *c = b->counter;
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
}

/* Records made into a buffer so far (a reader other than its owner: the end mark). */
static uint64_t made(struct buffer *b) {
  return atomic_load_explicit(b->counter, memory_order_relaxed);
}

/* The owner moves its count into a line of the log's counters once the log has them (at a chunk's start). */
static void take_line(struct buffer *b) {
  if (b->lined || !atomic_load_explicit(&g_counters, memory_order_acquire)) return;
  uint32_t line = atomic_fetch_add_explicit(&g_next_line, 1, memory_order_relaxed);
  b->lined = 1;                                          /* tried: a buffer asks once */
  if (line >= SCN_TL_COUNTERS) {
    _Atomic uint64_t *over = (_Atomic uint64_t *)(void *)(atomic_load(&g_counters) + SCN_TL_OVERFLOW);
    atomic_store_explicit(over, 1, memory_order_relaxed);
    return;
  }
  _Atomic uint64_t *c = counters_line(line);
  atomic_store_explicit(c, atomic_load_explicit(&b->own, memory_order_relaxed), memory_order_relaxed);
  b->counter = c;
}

/* ------------------------------------------------------------------ chunks
 * A chunk is finished at its flush: the second clock reading (so its ticks map to ns), the trailer (the CPU clock of
 * the chunk's thread, whoever flushes it: the exit flush writes other threads' buffers), the census after its
 * records. Returns its length. */
static size_t seal_chunk(struct scn_tl_chunk *h, const struct scn_tl_encoder *enc, uint8_t *chunk, uint32_t bytes,
                         uint32_t counts[64]) {
  uint64_t tick = now_tick(), ns = (uint64_t)scn_clock_ns(CLOCK_MONOTONIC), cpu = thread_cpu_ns(h->tid);
  memcpy(chunk + SCN_TL_CHUNK_SIZE + bytes, &cpu, SCN_TL_TRAILER);
  bytes += SCN_TL_TRAILER;
  uint8_t *census = chunk + SCN_TL_CHUNK_SIZE + bytes;
  uint32_t n = 0;
  for (int k = 0; k < 64; k++) n += counts[k];
  h->census = (uint32_t)(scn_tl_put_census(census, counts) - census);
  memset(counts, 0, 64 * sizeof *counts);
  h->bytes = bytes;
  h->count = n;
  h->last_seq = enc->seq;
  h->type = SCN_TL_RECORDS6;
  h->tick_shift = TICK_SHIFT;
  h->mark = SCN_TL_MARK;
  h->ns_span = ns > h->ns ? ns - h->ns : 0;
  h->tick_span = tick > h->tick ? tick - h->tick : 0;
  memcpy(chunk, h, sizeof *h);
  return SCN_TL_CHUNK_SIZE + bytes + h->census;
}

static void start_chunk(struct scn_tl_chunk *h, struct scn_tl_encoder *enc, uint64_t key) {
  memset(h, 0, sizeof *h);
  h->tid = tid();
  h->seq = key;
  h->tick = now_tick();
  h->ns = (uint64_t)scn_clock_ns(CLOCK_MONOTONIC);
  scn_tl_encoder_start(enc, key);
}

/* A chunk of one record, written at once (threads that are leaving, the process once it is leaving). */
static void write_record(const struct scn_trace_record *r) {
  uint8_t chunk[SCN_TL_CHUNK_SIZE + SCN_TL_MAX_RECORD + SCN_TL_TRAILER + SCN_TL_MAX_CENSUS];
  uint32_t counts[64] = {0};
  struct scn_tl_chunk h;
  struct scn_tl_encoder enc;
  start_chunk(&h, &enc, r->seq);
  size_t n = (size_t)(scn_tl_encode(&enc, chunk + SCN_TL_CHUNK_SIZE, r, 0, thread_cpu_ns(h.tid)) -
                      (chunk + SCN_TL_CHUNK_SIZE));
  counts[r->kind & SCN_TL_CODE]++;
  h.moved = r->span != 0;
  /* Counted before it is written: the call has taken effect. The process ends only after close_process has seen
   * the calls in flight finish (tracer_exit.h), so a count without its record is a call the log truly lacks. */
  count_direct();
  write_bytes(chunk, seal_chunk(&h, &enc, chunk, (uint32_t)n, counts));
}

/* The process is leaving: b written out once, by whoever comes first; the others wait until it is (the owner's
 * later records must follow its chunk in the file). `mine`: the caller is inside b (its owner, writing = 1). */
static void give_up(struct buffer *b, int mine);

static int buffer_full(const struct buffer *b) {
  return b->used > BUF_BYTES - SCN_TL_MAX_RECORD;
}

/* Writes the chunk out; by its owner inside enter/leave, or by the exit flush once the owner is out. */
static void flush_locked(struct buffer *b) {
  /* Before the constructor has found the log's name, keep what fits. */
  if (!b->used || (atomic_load_explicit(&g_state, memory_order_relaxed) == ST_STARTUP && !buffer_full(b))) return;
  if (b->used > atomic_load_explicit(&b->high, memory_order_relaxed))
    atomic_store_explicit(&b->high, b->used, memory_order_relaxed);
  write_bytes(b->data, seal_chunk(&b->head, &b->enc, b->data, b->used, b->counts));
  b->used = b->limit = 0;
}

static struct buffer *claim_buffer(void) {
  struct buffer *b;
  for (b = atomic_load(&g_buffers); b; b = b->next) {
    int free_ = 0;
    if (!atomic_load_explicit(&b->owned, memory_order_relaxed) &&
        atomic_compare_exchange_strong(&b->owned, &free_, 1))
      return b;
  }
  b = os_pages(sizeof *b);
  if (!b) return NULL;
  b->counter = &b->own;
  atomic_store(&b->owned, 1);
  struct buffer *head = atomic_load(&g_buffers);
  do b->next = head; while (!atomic_compare_exchange_weak(&g_buffers, &head, b));
  return b;
}

/* Waits (yielding) until *flag is `until`, for about a second at most (WAIT_TICKS): a thread inside a call may wait
 * for a lock the waiting thread holds (exit from a signal handler inside the allocator). 0 when it gave up. */
#define WAIT_TICKS (1ull << 31)
static int wait_for(_Atomic int *flag, int until) {
  uint64_t start = now_tick();
  while (atomic_load_explicit(flag, memory_order_seq_cst) != until) {
    if (now_tick() - start > WAIT_TICKS) return 0;
    sched_yield();
  }
  return 1;
}

static void give_up(struct buffer *b, int mine) {
  int none = 0;
  if (atomic_compare_exchange_strong(&b->given, &none, 1)) {
    /* An owner still inside after the wait keeps its chunk: its records are counted as made, so missing. */
    if (mine || wait_for(&b->writing, 0)) flush_locked(b);
    atomic_store_explicit(&b->given, 2, memory_order_release);
    return;
  }
  if (mine) leave(b);
  (void)wait_for(&b->given, 2);
}

/* The process is leaving (exit, _exit, exec): every buffer written out, and from now on each record at once. A
 * buffer its owner is inside of is waited for, but this thread's own (a signal handler that exits while its
 * thread records): that record is never finished. */
static void flush_buffers(void) {
  T.guard++;
  if (!(atomic_fetch_or_explicit(&g_mode, M_EXITING, memory_order_seq_cst) & M_FENCED))
    if (os_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {   /* cannot happen: registered at start */
      struct timespec pause = {0, 1000000};
      nanosleep(&pause, NULL);
    }
  for (struct buffer *b = atomic_load(&g_buffers); b; b = b->next) {
    if (b == T.buf && atomic_load_explicit(&b->writing, memory_order_seq_cst)) continue;
    give_up(b, 0);
  }
  T.guard--;
}

/* Pages of the tracer's own buffers it wrote: faults the program did not take. */
static uint64_t own_pages(void) {
  uint64_t pages = 0;
  for (struct buffer *b = atomic_load(&g_buffers); b; b = b->next) {
    uint64_t bytes = offsetof(struct buffer, data) + SCN_TL_CHUNK_SIZE +
                     atomic_load_explicit(&b->high, memory_order_relaxed) + SCN_TL_TRAILER + SCN_TL_MAX_CENSUS;
    uint64_t most = (sizeof *b + 4095) / 4096;
    pages += (bytes + 4095) / 4096 < most ? (bytes + 4095) / 4096 : most;
  }
  return pages;
}

#endif
