/* tracer_record.h -- a call's record: begin, before the real call (the guard that keeps the calls made inside a
 * wrapper out of the log, the thread's buffer entered), and put, after it, which encodes the record into the
 * buffer: on the hot path a few plain stores (the record, the census, the counter, the buffer's writing flag), no
 * atomic read-modify-write, no lock, no clock reading.
 * Part of tracer.c's one translation unit (it includes the parts in order; see there). */
#ifndef SCN_TRACER_RECORD_H
#define SCN_TRACER_RECORD_H

static inline int tracing(void) {
  return !T.guard && atomic_load_explicit(&g_state, memory_order_relaxed) != ST_DISABLED;
}

/* Tracing, and the constructor has run: the mapping wrappers record only then. */
static inline int recording(void) {
  return !T.guard && atomic_load_explicit(&g_state, memory_order_relaxed) == ST_ENABLED;
}

static inline uint32_t sat32(uint64_t v) {
  return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* The thread's buffer, once it has one (its first record claims it). */
static struct buffer *thread_buffer(void) {
  if (!T.buf) T.rec = T.buf = claim_buffer();
  return T.buf;
}

/* ---------------------------------------------------------------- a call's window
 * A call is recorded between begin (before the real call) and put (after it): from the moment the call can take
 * effect until its record is in the thread's buffer or written, the thread is seen as inside a call, either by its
 * buffer's `writing` flag (the common case: a plain store) or, for a call recorded alone, by g_inflight. The
 * process-exit flush waits for the first, close_process (tracer_exit.h) for both: so a call that took effect is in
 * the log, or was counted as made (missing) when the process ended. */
static _Atomic uint32_t g_inflight;        /* calls being recorded alone (a chunk of one) right now */
static _Atomic uint32_t g_closer;          /* the thread closing the process (close_process), 0: none */
static _Atomic uint64_t g_close_tick;      /* when it began closing (the tick counter) */
#define PARK_TICKS (1ull << 31)            /* about a second at 2-3 GHz: how long another thread's call may wait */

/* The stand-in buffer of a call recorded alone: full, so that put takes put_slow. */
static struct buffer g_alone;

/* The rest of begin: the real functions are not known (-1), the call is not recorded (0, the guard as it was),
 * or it is (1, the guard up). Claims the thread's buffer; once the process is leaving, the call is recorded alone,
 * counted in g_inflight before it can take effect, and once it is closing it waits (another thread's call only:
 * it would take effect and then end with the process before its record is written). */
static int begin_record(void);

static __attribute__((noinline)) int begin_slow(void) {
  if (UNLIKELY(!resolve())) return -1;
  if (!tracing()) return 0;
  T.guard = 1;
  return begin_record();
}

static int begin_record(void) {
  struct buffer *b = T.exiting ? NULL : thread_buffer();
  if (b) {
    atomic_store_explicit(&b->writing, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    uint32_t m = atomic_load_explicit(&g_mode, memory_order_acquire);
    if (m & M_FENCED) m = fenced_mode(b);
    if (!(m & M_EXITING)) {
      T.rec = b;
      return 1;
    }
    atomic_store_explicit(&b->writing, 0, memory_order_release);
  }
  for (;;) {   /* alone: counted in flight, then the closing checked (close_process does the two the other way) */
    atomic_fetch_add_explicit(&g_inflight, 1, memory_order_seq_cst);
    uint32_t closer = atomic_load_explicit(&g_closer, memory_order_seq_cst);
    if (!closer || closer == tid() || now_tick() - atomic_load(&g_close_tick) > PARK_TICKS) break;
    atomic_fetch_sub_explicit(&g_inflight, 1, memory_order_seq_cst);
    struct timespec pause = {0, 1000000};   /* the process is ending: exit_group will end this thread here */
    nanosleep(&pause, NULL);
  }
  if (b) give_up(b, 0);   /* its buffer's chunk written before its records alone */
  T.alone = 1;
  T.rec = &g_alone;
  return 1;
}

/* Before the real call. The common case, one branch: the thread has a buffer, the call is the program's (the guard
 * is down), the process is not leaving and the real functions are known (g_mode). The guard and the buffer's
 * writing flag go up before g_mode is read: the exit flush raises M_EXITING and then reads the flags (tracer_buffer.h,
 * "Leaving"). */
__attribute__((always_inline)) static inline int begin(void) {
  struct buffer *b = T.rec;
  if (LIKELY(b != NULL) && LIKELY(!T.guard)) {
    T.guard = 1;
    atomic_store_explicit(&b->writing, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    if (LIKELY(!(atomic_load_explicit(&g_mode, memory_order_acquire) & (M_SLOW | M_EXITING | M_FENCED)))) return 1;
    atomic_store_explicit(&b->writing, 0, memory_order_release);
    T.guard = 0;
  }
  return begin_slow();
}

/* How often a thread's CPU clock is read, at most: a system call of about 0.55 us on this project's VM (the vDSO has
 * no CPU clocks), so once in 2^13 keys (2^19 ticks: about 200 us at 2.6 GHz), 0.3% of a thread's time at most
 * (bench/results/2026-11-27-model-cpuclock.md). A thread's CPU time between two calls is known to that grain. */
#define CPU_EVERY_KEYS (1ull << 13)

/* Everything but the common case: a call recorded alone, a chunk to start or to write out, a time mark (MARK_BYTES
 * of records since the last: read the time, set the step, publish the clock). */
static __attribute__((noinline)) void put_slow(struct buffer *b, int kind, uint64_t key, uint64_t a0, uint64_t a1,
                                               uint64_t a2, uint64_t result, int err, int flags, uint64_t span) {
  const struct scn_trace_record rec = {
      .seq = key, .ns = 0, .tid = 0, .kind = (uint8_t)kind, .flags = (uint8_t)flags,
      .err = (uint16_t)err, .span = sat32(span), .arg = {a0, a1, a2}, .result = result};
  const struct scn_trace_record *r = &rec;
  if (b == &g_alone) {
    write_record(r);
    T.rec = T.buf;
    T.alone = 0;
    atomic_fetch_sub_explicit(&g_inflight, 1, memory_order_seq_cst);
    return;
  }
  uint64_t since = made(b) - b->mark_made;   /* records since the last time mark */
  if (buffer_full(b)) {
    flush_locked(b);
    if (buffer_full(b)) {   /* still full: the constructor has not run yet, keep what fitted */
      leave(b);
      return;
    }
  }
  int first = !b->used;
  if (first) {                        /* a chunk's first record: the chunk header has its clock */
    start_chunk(&b->head, &b->enc, r->seq);
    take_line(b);
    if (UNLIKELY(!T.keyed) && atomic_load_explicit(&g_key_ok, memory_order_acquire)) {
      T.keyed = 1;
      pthread_setspecific(g_key, b);
    }
  }
  uint64_t step = retime(r->seq, since, MARK_BYTES / 2);   /* every slow record is a time mark (records: 2 bytes
                                                               at least) */
  /* The thread's CPU clock: at a chunk's first record, and at a time mark once CPU_EVERY_KEYS have passed since its
   * last reading (T.mark_time is the time retime just read). */
  uint64_t cpu = 0;
  if (first || T.mark_time - T.cpu_time >= CPU_EVERY_KEYS) {
    cpu = thread_cpu_ns(b->head.tid);
    T.cpu_time = T.mark_time;
  }
  uint8_t *at = b->data + SCN_TL_CHUNK_SIZE + b->used;
  b->used += (uint32_t)(scn_tl_encode(&b->enc, at, r, step, cpu) - at);
  b->limit = b->used + MARK_BYTES < BUF_BYTES - SCN_TL_MAX_RECORD ? b->used + MARK_BYTES
                                                                  : BUF_BYTES - SCN_TL_MAX_RECORD + 1;
  b->counts[r->kind & SCN_TL_CODE]++;
  b->head.moved += r->span != 0;
  count_made(b);
  b->mark_made = made(b);
  leave(b);
}

/* A varint of a value below 2^14 at q, in one byte or two, without a branch; returns its end. Two bytes are always
 * stored: the caller's buffer has room (SCN_TL_MAX_RECORD). */
static inline uint8_t *put_short_varint(uint8_t *q, uint64_t v) {
  const uint32_t more = v >= 0x80;
  q[0] = (uint8_t)(v | more << 7);
  q[1] = (uint8_t)(v >> 7);
  return q + 1 + more;
}

/* After the real call, begin having returned 1: encodes the record into the thread's buffer and leaves it (the
 * guard is the caller's to drop). Inlined into each wrapper, where the kind is a constant: the encoder then has no
 * loop over the layout. The common case is one branch: the chunk started and not full, no time mark due (b->limit). */
__attribute__((always_inline)) static inline void put(int kind, uint64_t key, uint64_t a0, uint64_t a1, uint64_t a2,
                                                      uint64_t result, int err, int flags, uint64_t span) {
  struct buffer *b = T.rec;
  if (UNLIKELY(b->used >= b->limit)) {
    put_slow(b, kind, key, a0, a1, a2, result, err, flags, span);
    return;
  }
  uint8_t *at = b->data + SCN_TL_CHUNK_SIZE + b->used;
  /* Most records are a malloc (a size, a pointer) or a free (a pointer) numbered next, with a size and a pointer
   * move that fit varints of one or two bytes (what scn_tl_encode would write). The lengths are worked out without
   * a branch: in cfrac a third of the pointers move 256 B-64 KiB, and a branch on that, mispredicted, or the general
   * encoder cost more than the two bytes always stored (a second byte not needed is the next record's, overwritten). */
  const uint16_t layout = scn_tl_layout[kind];
  const int sized = layout == SCN_TL_L(S, _, _, P), bare = layout == SCN_TL_L(P, _, _, _);
  if ((sized || bare) && !flags && !err && !span) {
    uint64_t ptr = sized ? result : a0, delta = ptr - b->enc.ptr;
    uint64_t near = scn_tl_zigzag((int64_t)delta >> 3) + 1;
    if (LIKELY(key == b->enc.seq + b->enc.step) && LIKELY(ptr && !(delta & 7) && near < 0x4000) &&
        (!sized || LIKELY(a0 < 0x4000))) {
      uint8_t *q = at + 1;
      at[0] = (uint8_t)(kind | SCN_TL_SEQ_NEXT);
      if (sized) q = put_short_varint(q, a0);
      q = put_short_varint(q, near);
      b->used += (uint32_t)(q - at);
      b->enc.seq = key;
      b->enc.ptr = ptr;
      goto done;
    }
  }
  const struct scn_trace_record r = {   /* its address stays here: the kind and the zero fields fold away */
      .seq = key, .ns = 0, .tid = 0, .kind = (uint8_t)kind, .flags = (uint8_t)flags,
      .err = (uint16_t)err, .span = sat32(span), .arg = {a0, a1, a2}, .result = result};
  b->used += (uint32_t)(scn_tl_encode(&b->enc, at, &r, 0, 0) - at);
done:
  b->counts[kind]++;
  b->head.moved += span != 0;
  count_made(b);
  leave(b);
}

#endif
