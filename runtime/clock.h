/* The one clock reading of the runtime, the probes and the preload tracer:
 * nanoseconds of a POSIX clock (CLOCK_MONOTONIC for wall time,
 * CLOCK_THREAD_CPUTIME_ID for a thread's CPU time, CLOCK_REALTIME for dates). */
#ifndef SCN_CLOCK_H
#define SCN_CLOCK_H
#include <stdint.h>
#include <time.h>

static inline int64_t scn_clock_ns(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

#endif
