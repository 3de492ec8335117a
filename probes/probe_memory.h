/* The `memory` probe: a timeline of resident memory, sampled by a thread of
 * its own. Peak and final RSS and page faults come from the runtime's report.
 *
 * The sampler wakes every SCENC_MEMORY_SAMPLE_US microseconds (default
 * 10000; 0 samples only at start and end) and reads /proc/self/statm through
 * a file descriptor kept open: a few microseconds of one core per wake-up.
 * When its table is full it drops every other sample and halves its rate, so a
 * long run keeps an even timeline in a fixed amount of memory. If the `live`
 * probe is in the same program, each sample also holds the live bytes.
 * Its own footprint -- the sampler's stack pages and at most 24 KiB of
 * samples -- is the same under every allocator. */
#ifndef SCN_PROBE_MEMORY_H
#define SCN_PROBE_MEMORY_H
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include "probe_common.h"

#define SCN_MEMORY_MAX_SAMPLES 1024

typedef struct { int64_t t_ns, rss_kib, live_bytes; } scn_memory_sample;

static struct {
  pthread_t tid;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  int stop, sampling, statm_fd;
  long page_kib;
  int64_t t0_ns, interval_ns;
  uint64_t n;
  scn_memory_sample *samples;
} scn_memory = { .lock = PTHREAD_MUTEX_INITIALIZER, .statm_fd = -1 };

static int64_t scn_memory_rss_kib(void) {
  char buf[128];
  ssize_t got = pread(scn_memory.statm_fd, buf, sizeof buf - 1, 0);
  if (got <= 0) return -1;
  buf[got] = 0;
  char *p = strchr(buf, ' ');  /* statm: size resident shared ... in pages */
  return p ? strtoll(p + 1, NULL, 10) * scn_memory.page_kib : -1;
}

static void scn_memory_take(void) {
  if (scn_memory.n == SCN_MEMORY_MAX_SAMPLES) {
    for (uint64_t i = 0; i < SCN_MEMORY_MAX_SAMPLES / 2; i++)
      scn_memory.samples[i] = scn_memory.samples[2 * i];
    scn_memory.n = SCN_MEMORY_MAX_SAMPLES / 2;
    scn_memory.interval_ns *= 2;
  }
  scn_memory_sample *s = &scn_memory.samples[scn_memory.n++];
  s->t_ns = scn_clock_ns(CLOCK_MONOTONIC) - scn_memory.t0_ns;
  s->rss_kib = scn_memory_rss_kib();
  s->live_bytes = scn_live_enabled ? atomic_load_explicit(&scn_live.bytes, memory_order_relaxed) : -1;
}

static void *scn_memory_sampler(void *arg) {
  (void)arg;
  struct timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  pthread_mutex_lock(&scn_memory.lock);
  while (!scn_memory.stop) {
    /* The next deadline, but never one already past: a sampler that was kept
     * off the CPU resumes its pace instead of firing a burst to catch up. */
    int64_t due = (int64_t)next.tv_sec * 1000000000LL + next.tv_nsec + scn_memory.interval_ns;
    int64_t now = scn_clock_ns(CLOCK_MONOTONIC);
    if (due < now) due = now;
    next.tv_sec = due / 1000000000LL;
    next.tv_nsec = due % 1000000000LL;
    while (!scn_memory.stop && pthread_cond_timedwait(&scn_memory.wake, &scn_memory.lock, &next) != ETIMEDOUT) {
    }
    if (!scn_memory.stop) scn_memory_take();
  }
  pthread_mutex_unlock(&scn_memory.lock);
  return NULL;
}

static void scn_probe_memory_program_start(int threads) {
  (void)threads;
  scn_memory.statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  scn_memory.page_kib = sysconf(_SC_PAGESIZE) / 1024;
  /* Zero pages from mmap, left untouched: the table adds to RSS only as it
   * fills, at most 24 KiB. */
  scn_memory.samples = scn_arena_alloc(SCN_MEMORY_MAX_SAMPLES * sizeof *scn_memory.samples);
  scn_memory.interval_ns = (int64_t)scn_probe_env_u64("SCENC_MEMORY_SAMPLE_US", 10000) * 1000;
  scn_memory.t0_ns = scn_clock_ns(CLOCK_MONOTONIC);
  scn_memory_take();  /* the baseline: the program before the scenario allocated */
  if (scn_memory.interval_ns > 0) {
    /* The sampler's deadlines are on the monotonic clock, like the runtime's. */
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&scn_memory.wake, &attr);
    pthread_condattr_destroy(&attr);
    int err = pthread_create(&scn_memory.tid, NULL, scn_memory_sampler, NULL);
    if (err) scn_die("memory probe: cannot start its sampler thread: %s", strerror(err));
    scn_memory.sampling = 1;
  }
}

static void scn_probe_memory_program_end(void) {
  if (scn_memory.sampling) {
    pthread_mutex_lock(&scn_memory.lock);
    scn_memory.stop = 1;
    pthread_cond_signal(&scn_memory.wake);
    pthread_mutex_unlock(&scn_memory.lock);
    pthread_join(scn_memory.tid, NULL);
  }
  scn_memory_take();  /* after the last thread ended */
}

/* {"t0_ns", "interval_us", "samples": [[t_ns, rss_kib, live_bytes or -1], ...]} */
static void scn_probe_memory_report(FILE *out) {
  fprintf(out, "{\"t0_ns\": %lld, \"interval_us\": %lld, \"samples\": [", (long long)scn_memory.t0_ns,
          (long long)(scn_memory.interval_ns / 1000));
  for (uint64_t i = 0; i < scn_memory.n; i++) {
    const scn_memory_sample *s = &scn_memory.samples[i];
    fprintf(out, "%s[%lld, %lld, %lld]", i ? ", " : "", (long long)s->t_ns, (long long)s->rss_kib,
            (long long)s->live_bytes);
  }
  fputs("]}", out);
}
#endif
