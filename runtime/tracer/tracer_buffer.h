/* tracer_buffer.h -- each thread's buffer: its records encoded into one chunk (tracelog.h gives the
 * layout), sealed with a census and written whole when full, at thread exit and at process exit;
 * a chunk of one record for a thread that is leaving and after the process-exit flush ('Buffers'
 * in tracer.c). Buffers are never freed: a thread that ends hands its buffer to the next one.
 * Part of tracer.c's one translation unit (it includes the parts in order; see there). */
#ifndef SCN_TRACER_BUFFER_H
#define SCN_TRACER_BUFFER_H

#define BUF_BYTES (32 * 1024)   /* a chunk's records: about 5000 calls */

/* One thread's chunk being filled; data holds the chunk header, then the records. */
struct buffer {
  _Alignas(64) _Atomic uint32_t busy;   /* tid of the holder: the owner appending, a flush at exit */
  _Atomic int owned;               /* a live thread records into it */
  uint32_t n, used;                /* records, their bytes */
  _Atomic uint32_t high;           /* most bytes it ever held: its pages the tracer itself faulted in */
  struct buffer *next;             /* every buffer ever made: never unlinked, reused when released */
  struct scn_tl_chunk head;        /* tid, first seq, ns and tick of the chunk being filled */
  struct scn_tl_encoder enc;
  uint32_t counts[64];             /* its records by kind: the census */
  _Alignas(64) uint8_t data[SCN_TL_CHUNK_SIZE + BUF_BYTES + SCN_TL_MAX_CENSUS];
};

static _Atomic int g_unbuffered;           /* set by the process-exit flush */
static _Atomic(struct buffer *) g_buffers;
static pthread_key_t g_key;                /* its destructor, thread_gone (tracer_thread.h), ends a thread's buffer */
static _Atomic int g_key_ok;

/* A chunk is finished at its flush: the second clock reading (so its ticks map to ns), the census
 * after its records (chunk: header and records). Returns its length. */
static size_t seal_chunk(struct scn_tl_chunk *h, uint8_t *chunk, uint32_t n, uint32_t bytes, uint32_t counts[64]) {
  uint64_t tick = now_tick(), ns = (uint64_t)scn_clock_ns(CLOCK_MONOTONIC);
  uint8_t *census = chunk + SCN_TL_CHUNK_SIZE + bytes;
  h->census = (uint32_t)(scn_tl_put_census(census, counts) - census);
  memset(counts, 0, 64 * sizeof *counts);
  h->bytes = bytes;
  h->count = n;
  h->type = SCN_TL_RECORDS;
  h->tick_shift = TICK_SHIFT;
  h->mark = SCN_TL_MARK;
  h->ns_span = ns > h->ns ? ns - h->ns : 0;
  h->tick_span = tick > h->tick ? tick - h->tick : 0;
  memcpy(chunk, h, sizeof *h);
  return SCN_TL_CHUNK_SIZE + bytes + h->census;
}

/* What a chunk's header and census count of each record. */
static inline void census_add(struct scn_tl_chunk *h, uint32_t counts[64], const struct scn_trace_record *r) {
  counts[r->kind & SCN_TL_CODE]++;
  h->moved += r->span != 0;
  h->last_seq = r->seq;
}

static void start_chunk(struct scn_tl_chunk *h, struct scn_tl_encoder *enc, const struct scn_trace_record *r) {
  memset(h, 0, sizeof *h);
  h->tid = r->tid;
  h->seq = r->seq;
  h->tick = r->ns;
  h->ns = (uint64_t)scn_clock_ns(CLOCK_MONOTONIC);
  scn_tl_encoder_start(enc, r->seq, r->ns, TICK_SHIFT);
}

/* A chunk of one record, written at once (threads that are leaving, the process after its exit flush). */
static void write_record(const struct scn_trace_record *r) {
  uint8_t chunk[SCN_TL_CHUNK_SIZE + SCN_TL_MAX_RECORD + SCN_TL_MAX_CENSUS];
  uint32_t counts[64] = {0};
  struct scn_tl_chunk h;
  struct scn_tl_encoder enc;
  start_chunk(&h, &enc, r);
  size_t n = (size_t)(scn_tl_encode(&enc, chunk + SCN_TL_CHUNK_SIZE, r) - (chunk + SCN_TL_CHUNK_SIZE));
  census_add(&h, counts, r);
  write_bytes(chunk, seal_chunk(&h, chunk, 1, (uint32_t)n, counts));
}

static int lock_buffer(struct buffer *b) {
  return lock_tid(&b->busy);
}

static void unlock_buffer(struct buffer *b) {
  unlock_tid(&b->busy);
}

static int buffer_full(const struct buffer *b) {
  return b->used > BUF_BYTES - SCN_TL_MAX_RECORD;
}

static void flush_locked(struct buffer *b) {
  /* Before the constructor has found the log's name, keep what fits. */
  if (!b->n || (atomic_load_explicit(&g_state, memory_order_relaxed) == ST_STARTUP && !buffer_full(b))) return;
  if (b->used > atomic_load_explicit(&b->high, memory_order_relaxed))
    atomic_store_explicit(&b->high, b->used, memory_order_relaxed);
  write_bytes(b->data, seal_chunk(&b->head, b->data, b->n, b->used, b->counts));
  b->n = b->used = 0;
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
  atomic_store(&b->owned, 1);
  struct buffer *head = atomic_load(&g_buffers);
  do b->next = head; while (!atomic_compare_exchange_weak(&g_buffers, &head, b));
  return b;
}

/* The thread's buffer, locked, with room for r; NULL when r was written at once (or dropped). */
static struct buffer *buffer_for(const struct scn_trace_record *r) {
  if (UNLIKELY(T.exiting)) {
    write_record(r);
    return NULL;
  }
  struct buffer *b = T.buf;
  if (UNLIKELY(!b)) {
    b = T.buf = claim_buffer();
    if (!b) {
      write_record(r);
      return NULL;
    }
  }
  if (UNLIKELY(!T.keyed) && atomic_load_explicit(&g_key_ok, memory_order_acquire)) {
    T.keyed = 1;
    pthread_setspecific(g_key, b);
  }
  if (!lock_buffer(b)) return NULL;   /* cannot happen: the guard keeps handlers out of a wrapper */
  if (UNLIKELY(buffer_full(b))) {
    flush_locked(b);
    if (buffer_full(b)) {   /* still full: the constructor has not run yet, keep what fitted */
      unlock_buffer(b);
      return NULL;
    }
  }
  if (UNLIKELY(!b->n)) start_chunk(&b->head, &b->enc, r);
  return b;
}

static void buffer_done(struct buffer *b) {
  b->n++;
  if (UNLIKELY(buffer_full(b) || atomic_load_explicit(&g_unbuffered, memory_order_relaxed))) flush_locked(b);
  unlock_buffer(b);
}

static void flush_buffers(void) {
  T.guard++;
  for (struct buffer *b = atomic_load(&g_buffers); b; b = b->next)
    if (lock_buffer(b)) {
      flush_locked(b);
      unlock_buffer(b);
    }
  T.guard--;
}

/* Pages of the tracer's own buffers it wrote: faults the program did not take. */
static uint64_t own_pages(void) {
  uint64_t pages = 0;
  for (struct buffer *b = atomic_load(&g_buffers); b; b = b->next) {
    uint64_t bytes = offsetof(struct buffer, data) + SCN_TL_CHUNK_SIZE +
                     atomic_load_explicit(&b->high, memory_order_relaxed) + SCN_TL_MAX_CENSUS;
    uint64_t most = (sizeof *b + 4095) / 4096;
    pages += (bytes + 4095) / 4096 < most ? (bytes + 4095) / 4096 : most;
  }
  return pages;
}

#endif
