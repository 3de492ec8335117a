/* What the probe headers share: their per-thread slots, the live-bytes
 * counter the memory sampler reads, and small helpers for their setup.
 *
 * Every probe header is included into the one generated translation unit, so
 * `static` data here is a single object shared by all probes of a program. */
#ifndef SCN_PROBE_COMMON_H
#define SCN_PROBE_COMMON_H
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Fixed slots in scn_thread.probe[]: a probe finds its state without the
 * generator having to number them. The latency probe also keeps two numbers
 * in slots of their own: a thread's body works on a local copy of its
 * scn_thread, so the compiler can keep those in registers across malloc. */
enum { SCN_SLOT_TIME, SCN_SLOT_LATENCY, SCN_SLOT_LAYOUT, SCN_SLOT_COUNTERS,
       SCN_SLOT_LATENCY_COUNTDOWN, SCN_SLOT_LATENCY_T0 };
_Static_assert(SCN_SLOT_LATENCY_T0 < SCN_MAX_PROBES, "scn_thread.probe[] is too small");

/* The `live` probe's counter of requested bytes not yet freed, on its own
 * cache line; the memory sampler plots it next to RSS when `live` is
 * compiled into the same program (scn_live_enabled). */
static struct {
  _Alignas(64) _Atomic int64_t bytes;
  _Alignas(64) _Atomic int64_t peak;
  char pad[64 - sizeof(int64_t)];
} scn_live __attribute__((unused));
static int scn_live_enabled __attribute__((unused));

/* A positive integer from the environment, or `fallback`. getenv and strtoull
 * do not allocate, so reading options never calls the allocator under test. */
static inline uint64_t scn_probe_env_u64(const char *name, uint64_t fallback) {
  const char *text = getenv(name);
  if (!text || !*text) return fallback;
  char *end;
  unsigned long long v = strtoull(text, &end, 10);
  if (*end) scn_die("%s=%s: expected a whole number", name, text);
  return v;
}

/* Per-thread probe state for `threads` threads, written once so that its
 * pages are faulted in now and not while the scenario is being timed. */
static inline void *scn_probe_state_array(int threads, size_t each) {
  char *p = scn_arena_alloc((size_t)threads * each);
  memset(p, 0, (size_t)threads * each);
  return p;
}
#endif
