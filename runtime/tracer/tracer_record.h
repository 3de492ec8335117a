/* tracer_record.h -- a call's record: its sequence number, taken at the moment the call takes effect
 * (tracer.c's opening comment says why), the guard that keeps the calls made inside a wrapper out
 * of the log, and put, which encodes the record into its thread's buffer.
 * Part of tracer.c's one translation unit (it includes the parts in order; see there). */
#ifndef SCN_TRACER_RECORD_H
#define SCN_TRACER_RECORD_H

static _Atomic uint64_t g_seq;             /* the next call's number: one counter for every thread */

static inline uint64_t take_seq(void) {
  /* Relaxed is enough: when one call's effect happens-before another's (a
   * block freed, then handed out again), the allocator's own synchronisation
   * orders the two increments, and a single atomic's modification order
   * respects happens-before. */
  return atomic_fetch_add_explicit(&g_seq, 1, memory_order_relaxed);
}

static inline int tracing(void) {
  return !T.guard && atomic_load_explicit(&g_state, memory_order_relaxed) != ST_DISABLED;
}

/* Tracing, and the constructor has run: the mapping wrappers record only then. */
static inline int recording(void) {
  return !T.guard && atomic_load_explicit(&g_state, memory_order_relaxed) == ST_ENABLED;
}

/* A call's moment: the tick read with its sequence number (one clock read per call; the time
 * spent inside the real function is not recorded since log version 3: no reader used it). */
struct call {
  uint64_t t0;
};

static inline void begin(struct call *c) {
  T.guard = 1;
  c->t0 = 0;
}

static inline uint32_t sat32(uint64_t v) {
  return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* tick goes in the record's ns field: the encoder turns it into a delta of tick units. Inlined
 * into each wrapper, where the kind is a constant: the encoder then has no loop over the layout. */
__attribute__((always_inline)) static inline void put(int kind, uint64_t seq, uint64_t tick, uint64_t a0,
                                                      uint64_t a1, uint64_t a2, uint64_t result, int err,
                                                      int flags, uint64_t span) {
  struct scn_trace_record r = {
      .seq = seq, .ns = tick, .tid = tid(), .kind = (uint8_t)kind, .flags = (uint8_t)flags,
      .err = (uint16_t)err, .span = sat32(span), .arg = {a0, a1, a2}, .result = result};
  struct buffer *b = buffer_for(&r);
  if (!b) return;
  uint8_t *at = b->data + SCN_TL_CHUNK_SIZE + b->used;
  b->used += (uint32_t)(scn_tl_encode(&b->enc, at, &r) - at);
  census_add(&b->head, b->counts, &r);
  buffer_done(b);
}

/* An allocation has taken effect when the real function returns. */
__attribute__((always_inline)) static inline void *end_alloc(struct call *c, int kind, uint64_t a0, uint64_t a1, uint64_t a2, void *p) {
  (void)c;
  put(kind, take_seq(), now_tick(), a0, a1, a2, (uintptr_t)p, 0, 0, 0);   /* leaves errno alone */
  T.guard = 0;
  return p;
}

/* A release takes effect when the real function starts: number it first. */
static inline uint64_t begin_release(struct call *c) {
  T.guard = 1;
  c->t0 = now_tick();
  return take_seq();
}

__attribute__((always_inline)) static inline void end_release(struct call *c, uint64_t seq, int kind, uint64_t a0, uint64_t a1, uint64_t a2) {
  put(kind, seq, c->t0, a0, a1, a2, 0, 0, 0, 0);   /* leaves errno alone */
  T.guard = 0;
}

#endif
