/* The `counters` probe: hardware event counts of each thread through
 * perf_event_open (cycles, instructions, L1d read misses, last-level cache
 * misses), plus the software counts of context switches and CPU migrations.
 *
 * Each thread opens its counters when it starts and reads them when it ends;
 * the kernel counts in between, so nothing runs per operation. A machine or
 * VM without a PMU, or a perf_event_paranoid that forbids it, makes the open
 * fail: the report then says which event failed and why, and the program
 * runs on -- the other probes are not affected. */
#ifndef SCN_PROBE_COUNTERS_H
#define SCN_PROBE_COUNTERS_H
#include <errno.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "probe_common.h"

enum { SCN_COUNTERS_HW = 4, SCN_COUNTERS_N = 6 };

static const struct { const char *name; uint32_t type; uint64_t config; } scn_counters_events[SCN_COUNTERS_N] = {
  { "cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES },
  { "instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS },
  { "l1d_read_misses", PERF_TYPE_HW_CACHE,
    PERF_COUNT_HW_CACHE_L1D | (PERF_COUNT_HW_CACHE_OP_READ << 8) | (PERF_COUNT_HW_CACHE_RESULT_MISS << 16) },
  { "llc_misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES },
  { "context_switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES },
  { "cpu_migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS },
};

typedef struct {
  _Alignas(64) int fd[SCN_COUNTERS_N];
  uint64_t value[SCN_COUNTERS_N];
  int open_errno[SCN_COUNTERS_N];  /* 0: counted */
} scn_counters_thread;

static scn_counters_thread *scn_counters_threads;
static int scn_counters_n;

static void scn_probe_counters_program_start(int threads) {
  scn_counters_n = threads;
  scn_counters_threads = scn_probe_state_array(threads, sizeof *scn_counters_threads);
}

static void scn_probe_counters_thread_start(scn_thread *t) {
  scn_counters_thread *s = &scn_counters_threads[t->id];
  t->probe[SCN_SLOT_COUNTERS] = s;
  for (int i = 0; i < SCN_COUNTERS_N; i++) {
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = scn_counters_events[i].type;
    attr.config = scn_counters_events[i].config;
    attr.disabled = 1;
    attr.exclude_kernel = 1;  /* allowed at perf_event_paranoid 2 */
    attr.exclude_hv = 1;
    s->fd[i] = (int)syscall(SYS_perf_event_open, &attr, 0 /* this thread */, -1, -1, PERF_FLAG_FD_CLOEXEC);
    s->open_errno[i] = s->fd[i] < 0 ? errno : 0;
  }
  for (int i = 0; i < SCN_COUNTERS_N; i++)
    if (s->fd[i] >= 0) ioctl(s->fd[i], PERF_EVENT_IOC_ENABLE, 0);
}

static void scn_probe_counters_thread_end(scn_thread *t) {
  scn_counters_thread *s = t->probe[SCN_SLOT_COUNTERS];
  for (int i = 0; i < SCN_COUNTERS_N; i++)
    if (s->fd[i] >= 0) ioctl(s->fd[i], PERF_EVENT_IOC_DISABLE, 0);
  for (int i = 0; i < SCN_COUNTERS_N; i++) {
    if (s->fd[i] < 0) continue;
    if (read(s->fd[i], &s->value[i], sizeof s->value[i]) != (ssize_t)sizeof s->value[i])
      s->open_errno[i] = errno ? errno : EIO;
    close(s->fd[i]);
  }
}

/* {"threads": [{"cycles": n or null, ...}], "errors": {"cycles": "No such file or directory", ...}} */
static void scn_probe_counters_report(FILE *out) {
  fputs("{\"threads\": [", out);
  for (int i = 0; i < scn_counters_n; i++) {
    const scn_counters_thread *s = &scn_counters_threads[i];
    fputs(i ? ", {" : "{", out);
    for (int e = 0; e < SCN_COUNTERS_N; e++) {
      fprintf(out, "%s\"%s\": ", e ? ", " : "", scn_counters_events[e].name);
      if (s->open_errno[e]) fputs("null", out);
      else fprintf(out, "%llu", (unsigned long long)s->value[e]);
    }
    fputs("}", out);
  }
  fputs("], \"errors\": {", out);
  int first = 1;
  for (int e = 0; e < SCN_COUNTERS_N; e++) {
    int err = 0;
    for (int i = 0; i < scn_counters_n && !err; i++) err = scn_counters_threads[i].open_errno[e];
    if (!err) continue;
    fprintf(out, "%s\"%s\": \"%s\"", first ? "" : ", ", scn_counters_events[e].name, strerror(err));
    first = 0;
  }
  fputs("}}", out);
}
#endif
