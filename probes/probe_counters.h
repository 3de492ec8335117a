/* The `counters` probe: hardware event counts of the scenario's threads
 * through perf_event_open (cycles, instructions, L1d read misses, last-level
 * cache misses), plus the software counts of context switches and CPU
 * migrations.
 *
 * The counters are opened on the main thread before any scenario thread
 * exists, with `inherit`, so every thread created afterwards is counted and
 * its counts are added in when it ends; they are read after the last thread
 * was joined. Nothing runs per operation and nothing inside the timed window
 * (opening counters per thread, after the start gate, added to `loop`'s
 * wall time). The main thread itself only waits meanwhile. A machine or
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

enum { SCN_COUNTERS_N = 6 };

static const struct { const char *name; uint32_t type; uint64_t config; } scn_counters_events[SCN_COUNTERS_N] = {
  { "cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES },
  { "instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS },
  { "l1d_read_misses", PERF_TYPE_HW_CACHE,
    PERF_COUNT_HW_CACHE_L1D | (PERF_COUNT_HW_CACHE_OP_READ << 8) | (PERF_COUNT_HW_CACHE_RESULT_MISS << 16) },
  { "llc_misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES },
  { "context_switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES },
  { "cpu_migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS },
};

static struct {
  int fd[SCN_COUNTERS_N];
  uint64_t value[SCN_COUNTERS_N];
  int error[SCN_COUNTERS_N];  /* errno of the open or read; 0: counted */
} scn_counters;

static void scn_probe_counters_program_start(int threads) {
  (void)threads;
  for (int i = 0; i < SCN_COUNTERS_N; i++) {
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = scn_counters_events[i].type;
    attr.config = scn_counters_events[i].config;
    attr.inherit = 1;         /* threads created from now on are counted too */
    /* Hardware events in user mode only (allowed at perf_event_paranoid 2);
     * context switches and migrations happen in the kernel and would read 0. */
    attr.exclude_kernel = scn_counters_events[i].type != PERF_TYPE_SOFTWARE;
    attr.exclude_hv = 1;
    scn_counters.fd[i] = (int)syscall(SYS_perf_event_open, &attr, 0 /* this thread */, -1, -1,
                                      PERF_FLAG_FD_CLOEXEC);
    scn_counters.error[i] = scn_counters.fd[i] < 0 ? errno : 0;
  }
}

static void scn_probe_counters_program_end(void) {
  for (int i = 0; i < SCN_COUNTERS_N; i++) {
    if (scn_counters.fd[i] < 0) continue;
    if (read(scn_counters.fd[i], &scn_counters.value[i], sizeof scn_counters.value[i]) !=
        (ssize_t)sizeof scn_counters.value[i])
      scn_counters.error[i] = errno ? errno : EIO;
    close(scn_counters.fd[i]);
  }
}

/* {"counts": {"cycles": n or null, ...}, "errors": {"cycles": "No such file or directory", ...}} */
static void scn_probe_counters_report(FILE *out) {
  fputs("{\"counts\": {", out);
  for (int e = 0; e < SCN_COUNTERS_N; e++) {
    fprintf(out, "%s\"%s\": ", e ? ", " : "", scn_counters_events[e].name);
    if (scn_counters.error[e]) fputs("null", out);
    else fprintf(out, "%llu", (unsigned long long)scn_counters.value[e]);
  }
  fputs("}, \"errors\": {", out);
  int first = 1;
  for (int e = 0; e < SCN_COUNTERS_N; e++) {
    if (!scn_counters.error[e]) continue;
    fprintf(out, "%s\"%s\": \"%s\"", first ? "" : ", ", scn_counters_events[e].name,
            strerror(scn_counters.error[e]));
    first = 0;
  }
  fputs("}}", out);
}
#endif
