/* The `live` probe: the exact peak of requested bytes alive at once, over all
 * threads together -- what a perfect allocator would need.
 *
 * One counter shared by every thread, updated atomically at every operation,
 * so the count follows a single order of events: a block is added after its
 * allocation returned and removed before it is given back, so the counter
 * never exceeds what the allocator really held, and the peak it records is
 * the peak of that order. The shared cache line moves between cores at every
 * operation: this probe perturbs timing and must not share a run with `time`. */
#ifndef SCN_PROBE_LIVE_H
#define SCN_PROBE_LIVE_H
#include "probe_common.h"

static inline void scn_live_add(int64_t delta) {
  int64_t now = atomic_fetch_add_explicit(&scn_live.bytes, delta, memory_order_relaxed) + delta;
  int64_t peak = atomic_load_explicit(&scn_live.peak, memory_order_relaxed);
  while (now > peak &&
         !atomic_compare_exchange_weak_explicit(&scn_live.peak, &peak, now, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
}

/* Completes probe_common.h's tentative definition: the memory sampler,
 * whichever header came first, sees live bytes from its very first sample. */
static int scn_live_enabled = 1;

static inline void scn_probe_live_op_before(scn_thread *t, enum scn_op op, size_t size) {
  (void)t;
  if (op == SCN_FREE && size) scn_live_add(-(int64_t)size);
}

/* A realloc counts as one change of size; a failed one leaves `result` equal
 * to `old` and changes nothing. */
static inline void scn_probe_live_op_after(scn_thread *t, enum scn_op op, scn_obj result, scn_obj old) {
  (void)t;
  if (op == SCN_FREE) return;
  int64_t delta = (int64_t)result.size - (op == SCN_REALLOC ? (int64_t)old.size : 0);
  if (delta) scn_live_add(delta);
}

static void scn_probe_live_report(FILE *out) {
  fprintf(out, "{\"peak_bytes\": %lld, \"final_bytes\": %lld}",
          (long long)atomic_load(&scn_live.peak), (long long)atomic_load(&scn_live.bytes));
}
#endif
