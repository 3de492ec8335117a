/* tracer_record.h -- a call's record: the guard that keeps the calls made inside a wrapper out of the log, and
 * put, which encodes the record into its thread's buffer: on the hot path a few plain stores (the record, the
 * census, the counter, the buffer's writing flag), no atomic read-modify-write, no lock, no clock reading.
 * Part of tracer.c's one translation unit (it includes the parts in order; see there). */
#ifndef SCN_TRACER_RECORD_H
#define SCN_TRACER_RECORD_H

/* The common case of every allocation wrapper: the real functions are known, tracing is on and the call is the
 * program's. Otherwise the wrapper asks resolve() and tracing() one at a time. */
static inline int traced(void) {
  return LIKELY(atomic_load_explicit(&g_fast, memory_order_relaxed)) && LIKELY(!T.guard);
}

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
  return T.buf ? T.buf : (T.buf = claim_buffer());
}

/* Everything but the common case: no buffer yet, the thread or the process leaving, a chunk to start or to
 * write out, a time mark (MARK_BYTES of records since the last: read the time, set the step, publish the clock). */
static __attribute__((noinline)) void put_slow(struct buffer *b, int kind, uint64_t key, uint64_t a0, uint64_t a1,
                                               uint64_t a2, uint64_t result, int err, int flags, uint64_t span) {
  const struct scn_trace_record rec = {
      .seq = key, .ns = 0, .tid = 0, .kind = (uint8_t)kind, .flags = (uint8_t)flags,
      .err = (uint16_t)err, .span = sat32(span), .arg = {a0, a1, a2}, .result = result};
  const struct scn_trace_record *r = &rec;
  if (!b) {
    b = T.exiting ? NULL : thread_buffer();
    if (b && !enter(b)) give_up(b, 0);
    if (!b || atomic_load_explicit(&b->given, memory_order_acquire)) {
      write_record(r);
      return;
    }
  } else {
    uint32_t m = atomic_load_explicit(&g_mode, memory_order_acquire);
    if (m & M_FENCED) m = fenced_mode(b);
    if (m & M_EXITING) {              /* the process is leaving: this buffer's chunk first, then the record */
      give_up(b, 1);
      if (atomic_load_explicit(&b->writing, memory_order_relaxed)) leave(b);
      write_record(r);
      return;
    }
  }
  uint64_t since = made(b) - b->mark_made;   /* records since the last time mark */
  if (buffer_full(b)) {
    flush_locked(b);
    if (buffer_full(b)) {   /* still full: the constructor has not run yet, keep what fitted */
      leave(b);
      return;
    }
  }
  if (!b->used) {                     /* a chunk's first record: the chunk header has its clock */
    start_chunk(&b->head, &b->enc, r->seq);
    take_line(b);
    if (UNLIKELY(!T.keyed) && atomic_load_explicit(&g_key_ok, memory_order_acquire)) {
      T.keyed = 1;
      pthread_setspecific(g_key, b);
    }
  }
  uint64_t step = retime(r->seq, since, MARK_BYTES / 2);   /* every slow record is a time mark (records: 2 bytes
                                                               at least) */
  uint8_t *at = b->data + SCN_TL_CHUNK_SIZE + b->used;
  b->used += (uint32_t)(scn_tl_encode(&b->enc, at, r, step) - at);
  b->limit = b->used + MARK_BYTES < BUF_BYTES - SCN_TL_MAX_RECORD ? b->used + MARK_BYTES
                                                                  : BUF_BYTES - SCN_TL_MAX_RECORD + 1;
  b->counts[r->kind & SCN_TL_CODE]++;
  b->head.moved += r->span != 0;
  count_made(b);
  b->mark_made = made(b);
  leave(b);
}

/* Encodes a record into the thread's buffer. Inlined into each wrapper, where the kind is a constant: the encoder
 * then has no loop over the layout. The common case is one branch: a buffer, not leaving, a chunk started and
 * not full, no time mark due (b->limit). */
__attribute__((always_inline)) static inline void put(int kind, uint64_t key, uint64_t a0, uint64_t a1, uint64_t a2,
                                                      uint64_t result, int err, int flags, uint64_t span) {
  struct buffer *b = T.buf;
  if (UNLIKELY(!b)) {
    put_slow(NULL, kind, key, a0, a1, a2, result, err, flags, span);
    return;
  }
  atomic_store_explicit(&b->writing, 1, memory_order_relaxed);
  atomic_signal_fence(memory_order_seq_cst);
  uint32_t m = atomic_load_explicit(&g_mode, memory_order_acquire);
  if (UNLIKELY(m & (M_EXITING | M_FENCED)) || UNLIKELY(b->used >= b->limit)) {   /* leaving: b is the flush's */
    put_slow(b, kind, key, a0, a1, a2, result, err, flags, span);
    return;
  }
  uint8_t *at = b->data + SCN_TL_CHUNK_SIZE + b->used;
  /* Most records are a malloc (a size, a pointer) or a free (a pointer) numbered next, with a small size and a
   * pointer near the last: their 2 or 3 bytes written at once (what scn_tl_encode would write). */
  const uint16_t layout = scn_tl_layout[kind];
  const int sized = layout == SCN_TL_L(S, _, _, P), bare = layout == SCN_TL_L(P, _, _, _);
  if ((sized || bare) && !flags && !err && !span) {
    uint64_t ptr = sized ? result : a0, delta = ptr - b->enc.ptr;
    uint64_t near = scn_tl_zigzag((int64_t)delta >> 3) + 1;
    if (LIKELY(key == b->enc.seq + b->enc.step) && LIKELY(ptr && !(delta & 7) && near < 0x80) &&
        (!sized || LIKELY(a0 < 0x80))) {
      at[0] = (uint8_t)(kind | SCN_TL_SEQ_NEXT);
      at[1] = (uint8_t)(sized ? a0 : near);
      at[2] = (uint8_t)near;                 /* a free's third byte is the next record's, overwritten */
      b->used += sized ? 3 : 2;
      b->enc.seq = key;
      b->enc.ptr = ptr;
      goto done;
    }
  }
  const struct scn_trace_record r = {   /* its address stays here: the kind and the zero fields fold away */
      .seq = key, .ns = 0, .tid = 0, .kind = (uint8_t)kind, .flags = (uint8_t)flags,
      .err = (uint16_t)err, .span = sat32(span), .arg = {a0, a1, a2}, .result = result};
  b->used += (uint32_t)(scn_tl_encode(&b->enc, at, &r, 0) - at);
done:
  b->counts[kind]++;
  b->head.moved += span != 0;
  count_made(b);
  leave(b);
}

#endif
