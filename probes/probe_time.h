/* The `time` probe: user and system CPU time of each thread and CPU time of
 * each measured region. Wall times come from the runtime itself.
 *
 * Nothing runs on the per-operation path. Each thread reads its rusage once
 * when it starts and once when it ends.
 *
 * A region's CPU time: the thread's CPU clock (a system call, about 1 us) is
 * read around a region's first entry and around every entry that follows a
 * long one (SCN_TIME_LONG_TICKS, 0.3-1 ms); such long entries count with
 * their CPU time. Short entries, where two system calls would cost more than
 * the entry itself (and widen the window that a preemption falls into), are
 * not timed: they count with their wall time times the thread's CPU share
 * (its CPU time over its wall time). So a region around a loop is timed
 * exactly, and a region entered per request costs an entry a store and a
 * comparison. The reads are outside the region's own wall-clock window. */
#ifndef SCN_PROBE_TIME_H
#define SCN_PROBE_TIME_H
#include <sys/resource.h>
#include <time.h>
#include "probe_common.h"

#ifndef RUSAGE_THREAD  /* Linux; hidden without _GNU_SOURCE, which comes too late here */
#define RUSAGE_THREAD 1
#endif

#define SCN_TIME_LONG_TICKS (1u << 20)  /* an entry this long is worth two CPU clock reads */

typedef struct {
  int64_t cpu_ns;          /* CPU time of the long entries timed on the CPU clock */
  uint64_t timed_ticks;    /* their wall time */
  uint64_t timed;          /* how many */
  uint64_t ticks_before;   /* the region's ticks when the entry in progress began */
  int64_t cpu_started;     /* its CPU clock then, if timed */
  int timing;              /* the entry in progress is timed */
  int after_short;         /* the last entry was short: the next is not timed */
} scn_time_region;

typedef struct {
  _Alignas(64) struct rusage start, end;
  double cpu_share;        /* the thread's CPU time over its wall time */
  uint64_t untimed_ticks[SCN_MAX_REGIONS];
  scn_time_region region[SCN_MAX_REGIONS];
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
  int64_t wall = t->end_ns - t->start_ns;
  s->cpu_share = wall > 0 ? (double)t->cpu_ns / (double)wall : 1.0;
  if (s->cpu_share > 1.0) s->cpu_share = 1.0;
  for (int r = 0; r < SCN_MAX_REGIONS; r++)
    s->untimed_ticks[r] = t->region[r].ticks - s->region[r].timed_ticks;
}

static inline void scn_probe_time_region_begin(scn_thread *t, int region) {
  scn_time_thread *s = t->probe[SCN_SLOT_TIME];
  scn_time_region *g = &s->region[region];
  g->ticks_before = t->region[region].ticks;
  if (__builtin_expect(g->after_short, 1)) return;
  g->timing = 1;
  g->cpu_started = scn_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

static inline void scn_probe_time_region_end(scn_thread *t, int region) {
  scn_time_thread *s = t->probe[SCN_SLOT_TIME];
  scn_time_region *g = &s->region[region];
  uint64_t length = t->region[region].ticks - g->ticks_before;
  g->after_short = length < SCN_TIME_LONG_TICKS;
  if (__builtin_expect(!g->timing, 1)) return;
  g->timing = 0;
  int64_t cpu = scn_clock_ns(CLOCK_THREAD_CPUTIME_ID) - g->cpu_started;
  if (g->after_short) return;  /* too short for the CPU clock: counted as untimed */
  g->cpu_ns += cpu;
  g->timed_ticks += length;
  g->timed++;
}

static double scn_time_seconds(struct timeval a, struct timeval b) {
  return (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_usec - a.tv_usec) / 1e6;
}

/* {"threads": [{"user_s", "sys_s", "region_cpu_ns": [...], "region_cpu_timed": [...]}, ...]}
 * in thread id order: per region, the CPU time (timed entries exactly, the
 * others at the thread's CPU share) and how many entries were timed. */
static void scn_probe_time_report(FILE *out) {
  double ticks_per_ns = scn_ticks_per_ns();
  fputs("{\"threads\": [", out);
  for (int i = 0; i < scn_time_n; i++) {
    const scn_time_thread *s = &scn_time_threads[i];
    fprintf(out, "%s{\"user_s\": %.6f, \"sys_s\": %.6f, \"region_cpu_ns\": [", i ? ", " : "",
            scn_time_seconds(s->start.ru_utime, s->end.ru_utime),
            scn_time_seconds(s->start.ru_stime, s->end.ru_stime));
    for (int r = 0; r < SCN_MAX_REGIONS; r++) {
      double untimed_ns = (double)s->untimed_ticks[r] / ticks_per_ns;
      fprintf(out, "%s%lld", r ? ", " : "",
              (long long)s->region[r].cpu_ns + (long long)(untimed_ns * s->cpu_share + 0.5));
    }
    fputs("], \"region_cpu_timed\": [", out);
    for (int r = 0; r < SCN_MAX_REGIONS; r++)
      fprintf(out, "%s%llu", r ? ", " : "", (unsigned long long)s->region[r].timed);
    fputs("]}", out);
  }
  fputs("]}", out);
}
#endif
