/* The `time` probe: user and system CPU time of each thread and CPU time of
 * each measured region. Wall times come from the runtime itself.
 *
 * Nothing runs on the per-operation path. Each thread reads its rusage once
 * when it starts and once when it ends, and a region reads the thread's CPU
 * clock on entry and exit, outside the region's own wall-clock window (a read
 * is a system call: put `measure` around loops, not inside them). */
#ifndef SCN_PROBE_TIME_H
#define SCN_PROBE_TIME_H
#include <sys/resource.h>
#include <time.h>
#include "probe_common.h"

#ifndef RUSAGE_THREAD  /* Linux; hidden without _GNU_SOURCE, which comes too late here */
#define RUSAGE_THREAD 1
#endif

typedef struct {
  _Alignas(64) struct rusage start, end;
  int64_t region_cpu_ns[SCN_MAX_REGIONS];
  int64_t region_cpu_started[SCN_MAX_REGIONS];
} scn_time_thread;

static scn_time_thread *scn_time_threads;
static int scn_time_n;

static void scn_probe_time_program_start(int threads) {
  scn_time_n = threads;
  scn_time_threads = scn_probe_state_array(threads, sizeof *scn_time_threads);
}

static void scn_probe_time_thread_start(scn_thread *t) {
  scn_time_thread *s = &scn_time_threads[t->id];
  t->probe[SCN_SLOT_TIME] = s;
  getrusage(RUSAGE_THREAD, &s->start);
}

static void scn_probe_time_thread_end(scn_thread *t) {
  scn_time_thread *s = t->probe[SCN_SLOT_TIME];
  getrusage(RUSAGE_THREAD, &s->end);
}

static inline void scn_probe_time_region_begin(scn_thread *t, int region) {
  scn_time_thread *s = t->probe[SCN_SLOT_TIME];
  s->region_cpu_started[region] = scn_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

static inline void scn_probe_time_region_end(scn_thread *t, int region) {
  scn_time_thread *s = t->probe[SCN_SLOT_TIME];
  s->region_cpu_ns[region] += scn_clock_ns(CLOCK_THREAD_CPUTIME_ID) - s->region_cpu_started[region];
}

static double scn_time_seconds(struct timeval a, struct timeval b) {
  return (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_usec - a.tv_usec) / 1e6;
}

/* {"threads": [{"user_s", "sys_s", "region_cpu_ns": [...]}, ...]} in thread id order. */
static void scn_probe_time_report(FILE *out) {
  fputs("{\"threads\": [", out);
  for (int i = 0; i < scn_time_n; i++) {
    const scn_time_thread *s = &scn_time_threads[i];
    fprintf(out, "%s{\"user_s\": %.6f, \"sys_s\": %.6f, \"region_cpu_ns\": [", i ? ", " : "",
            scn_time_seconds(s->start.ru_utime, s->end.ru_utime),
            scn_time_seconds(s->start.ru_stime, s->end.ru_stime));
    for (int r = 0; r < SCN_MAX_REGIONS; r++)
      fprintf(out, "%s%lld", r ? ", " : "", (long long)s->region_cpu_ns[r]);
    fputs("]}", out);
  }
  fputs("]}", out);
}
#endif
