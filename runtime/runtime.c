/* Program start, threads, barriers and the final report of a scenario program.
 *
 * Nothing here runs between two operations of a thread except a barrier, so
 * none of it is on the timed path; it favours clarity over speed. Its own
 * memory comes from mmap, never from malloc, so that the allocator under test
 * sees only the scenario's calls. */
#define _GNU_SOURCE
#include "scn.h"
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static const scn_program *g_prog;
static const int *g_at_most;  /* thread churn per group, NULL when no group churns */
static pthread_t *g_tids;     /* by thread id */
static scn_thread **g_threads;  /* by thread id */

void scn_die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("scenc runtime: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(3);
}

/* ---- the ticks of `measure` regions (scn.h) */

int scn_ticks_tsc;
static double g_ticks_per_ns = 1.0;  /* measured over the whole program */

double scn_ticks_per_ns(void) { return g_ticks_per_ns; }

/* Whether the kernel keeps time with the TSC: then it found the TSC
 * invariant and synchronised across CPUs, and so may the regions. */
static int kernel_uses_tsc(void) {
#if defined(__x86_64__)
  char name[16] = {0};
  int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY);
  if (fd < 0) return 0;
  ssize_t got = read(fd, name, sizeof name - 1);
  close(fd);
  return got >= 3 && !strncmp(name, "tsc", 3) && (name[3] == '\n' || name[3] == 0);
#else
  return 0;
#endif
}

/* ---- arena: a bump allocator over mmap for the runtime's own data */

static pthread_mutex_t g_arena_lock = PTHREAD_MUTEX_INITIALIZER;
static char *g_arena_next, *g_arena_end;

void *scn_arena_alloc(size_t bytes) {
  if (bytes > SIZE_MAX / 2) scn_die("out of memory for %zu bytes of runtime data", bytes);
  bytes = (bytes + SCN_CACHE_LINE - 1) & ~(size_t)(SCN_CACHE_LINE - 1);
  if (bytes >= (1u << 20)) {  /* big tables get their own mapping */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) scn_die("out of memory for %zu bytes of runtime data", bytes);
    return p;
  }
  pthread_mutex_lock(&g_arena_lock);
  if ((size_t)(g_arena_end - g_arena_next) < bytes) {
    size_t chunk = 4u << 20;
    void *p = mmap(NULL, chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) scn_die("out of memory for runtime data");
    g_arena_next = p;
    g_arena_end = g_arena_next + chunk;
  }
  void *p = g_arena_next;
  g_arena_next += bytes;
  pthread_mutex_unlock(&g_arena_lock);
  return p;
}

/* ---- the scenario's own mappings (`map`): bytes mapped now and at most */

int scn_uses_maps;
static _Atomic int64_t g_mapped_now, g_mapped_peak;

void scn_mapped_change(int64_t bytes) {
  int64_t now = atomic_fetch_add_explicit(&g_mapped_now, bytes, memory_order_relaxed) + bytes;
  int64_t peak = atomic_load_explicit(&g_mapped_peak, memory_order_relaxed);
  while (now > peak &&
         !atomic_compare_exchange_weak_explicit(&g_mapped_peak, &peak, now, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
}

/* A linked chunk of boxes for swaps, from the arena: boxes travel between
 * threads with the objects in them and are never given back. */
scn_box *scn_boxes_new(void) {
  enum { CHUNK = 64 };
  scn_box *b = scn_arena_alloc(CHUNK * sizeof *b);
  for (int i = 0; i < CHUNK - 1; i++) b[i].next = &b[i + 1];
  return b;
}

/* ---- barrier: every thread still running meets here. A finished thread
 * leaves the count, so `barrier` never waits for a thread that has ended. */

static struct {
  pthread_mutex_t lock;
  pthread_cond_t moved;
  int running, waiting;
  uint64_t generation;
} g_barrier = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0 };

static void barrier_release_locked(void) {
  g_barrier.waiting = 0;
  g_barrier.generation++;
  pthread_cond_broadcast(&g_barrier.moved);
}

void scn_barrier_wait(scn_thread *t) {
  (void)t;
  pthread_mutex_lock(&g_barrier.lock);
  uint64_t gen = g_barrier.generation;
  if (++g_barrier.waiting >= g_barrier.running) {
    barrier_release_locked();
  } else {
    while (gen == g_barrier.generation) pthread_cond_wait(&g_barrier.moved, &g_barrier.lock);
  }
  pthread_mutex_unlock(&g_barrier.lock);
}

static void barrier_leave(void) {
  pthread_mutex_lock(&g_barrier.lock);
  g_barrier.running--;
  if (g_barrier.waiting > 0 && g_barrier.waiting >= g_barrier.running) barrier_release_locked();
  pthread_mutex_unlock(&g_barrier.lock);
}

/* ---- threads: all are created first and held at a gate, so the clock
 * starts when every thread is ready and thread creation is not timed. A
 * replay places its threads (scn_threads_place): some are created during the
 * run, where the captured program created them, and joined where it let them
 * end; the captured main thread runs on the process's main thread, as it did
 * in the program (glibc gives the main thread its own arena). */

static struct {
  pthread_mutex_t lock;
  pthread_cond_t changed;
  int ready, open;
} g_gate = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };

/* Which threads have started and ended, for replays that create and join
 * threads during the run (scn_thread_spawn, scn_thread_join). */
enum { SCN_T_LATER, SCN_T_STARTED, SCN_T_JOINING, SCN_T_JOINED };

static struct {
  pthread_mutex_t lock;
  pthread_cond_t changed;
  int n;                         /* threads in the program */
  int live;                      /* started and not yet ended */
  int on_main;                   /* the thread run by the process's main thread, or -1 */
  int *state;                    /* SCN_T_* per thread id */
  int (*where)(const scn_group *g, int index);   /* enum scn_start; NULL: every thread SCN_START_NOW */
} g_life = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, -1, NULL, NULL };

void scn_threads_place(int (*where)(const scn_group *g, int index)) {
  g_life.where = where;
}

void scn_set_churn(const int *at_most) { g_at_most = at_most; }

/* How many threads of a group run at once: all, or its churn limit. */
static int group_alive(const scn_program *p, int g) {
  int k = g_at_most ? g_at_most[g] : 0;
  return k > 0 && k < p->groups[g].count ? k : p->groups[g].count;
}

/* The id of thread t's successor under churn (thread i + K of its group), or -1. */
static int successor(const scn_thread *t) {
  int k = group_alive(g_prog, t->group);
  return t->index + k < g_prog->groups[t->group].count ? t->id + k : -1;
}

/* Thread churn: a churning thread that ends puts its id here; the main
 * thread joins it and only then starts its successor, a real new thread, so
 * the two never overlap (not even in glibc's per-thread clean-up, which frees
 * the ending thread's tcache). The successor takes the predecessor's place
 * among the threads a barrier waits for. */
static struct {
  pthread_mutex_t lock;
  pthread_cond_t changed;
  int *ids, head, tail;
} g_ended = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 0 };

static void churn_ended(const scn_thread *t) {
  pthread_mutex_lock(&g_ended.lock);
  g_ended.ids[g_ended.tail++] = t->id;
  pthread_cond_signal(&g_ended.changed);
  pthread_mutex_unlock(&g_ended.lock);
}

static void *thread_main(void *arg);
static void thread_join_id(int id);

static void start_thread(int id) {
  pthread_mutex_lock(&g_life.lock);
  g_life.state[id] = SCN_T_STARTED;
  g_life.live++;
  pthread_mutex_unlock(&g_life.lock);
  int err = pthread_create(&g_tids[id], NULL, thread_main, g_threads[id]);
  if (err) scn_die("cannot start thread %d of %d: %s", id + 1, g_life.n, strerror(err));
}

static int churns(const scn_program *p, int g) { return group_alive(p, g) < p->groups[g].count; }

/* Main's part in churn: as each churning thread ends, join it (marking it
 * joined, as scn_thread_join does) and start the next. The last thread of a
 * lane leaves the barrier only once joined, so a thread waiting at a barrier
 * for the others (a last clean-up thread) starts after they have really gone. */
static void churn(int ends) {
  while (ends-- > 0) {
    pthread_mutex_lock(&g_ended.lock);
    while (g_ended.head == g_ended.tail) pthread_cond_wait(&g_ended.changed, &g_ended.lock);
    int id = g_ended.ids[g_ended.head++];
    pthread_mutex_unlock(&g_ended.lock);
    thread_join_id(id);
    int next = successor(g_threads[id]);
    if (next >= 0) start_thread(next);
    else barrier_leave();
  }
}

static void *thread_main(void *arg) {
  scn_thread *t = arg;
  const scn_group *g = &g_prog->groups[t->group];
  pthread_mutex_lock(&g_gate.lock);
  g_gate.ready++;
  pthread_cond_broadcast(&g_gate.changed);
  while (!g_gate.open) pthread_cond_wait(&g_gate.changed, &g_gate.lock);
  pthread_mutex_unlock(&g_gate.lock);

  if (g_prog->thread_start) g_prog->thread_start(t);
  int64_t cpu0 = scn_clock_ns(CLOCK_THREAD_CPUTIME_ID);
  t->start_ns = scn_clock_ns(CLOCK_MONOTONIC);
  g->body(t);
  t->end_ns = scn_clock_ns(CLOCK_MONOTONIC);
  t->cpu_ns = scn_clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  if (g_prog->thread_end) g_prog->thread_end(t);
  if (churns(g_prog, t->group)) churn_ended(t);  /* main joins it and takes it off the barrier */
  else barrier_leave();
  pthread_mutex_lock(&g_life.lock);
  g_life.live--;
  pthread_cond_broadcast(&g_life.changed);
  pthread_mutex_unlock(&g_life.lock);
  return NULL;
}

static int thread_id(int group, int index) {
  int id = index;
  for (int g = 0; g < group; g++) id += g_prog->groups[g].count;
  if (index < 0 || index >= g_prog->groups[group].count) scn_die("no thread %d in group %d", index, group);
  return id;
}

static void barrier_join(void) {
  pthread_mutex_lock(&g_barrier.lock);
  g_barrier.running++;
  pthread_mutex_unlock(&g_barrier.lock);
}

void scn_thread_spawn(int group, int index) {
  int id = thread_id(group, index);
  pthread_mutex_lock(&g_life.lock);
  int later = g_life.state[id] == SCN_T_LATER;
  pthread_mutex_unlock(&g_life.lock);
  if (!later) scn_die("thread %d of group %d is started twice", index, group);
  barrier_join();
  start_thread(id);
}

/* Waits until the thread has started and ended; one caller joins it, the
 * others wait for that. The thread on the main thread is never joined: the
 * main thread marks it joined when its body returns. */
static void thread_join_id(int id) {
  pthread_mutex_lock(&g_life.lock);
  while (g_life.state[id] == SCN_T_LATER) {
    if (g_life.live == 0)
      scn_die("thread %d is never started: nothing running can start it (damaged replay data?)", id + 1);
    pthread_cond_wait(&g_life.changed, &g_life.lock);
  }
  if (g_life.state[id] == SCN_T_STARTED && id != g_life.on_main) {
    g_life.state[id] = SCN_T_JOINING;
    pthread_mutex_unlock(&g_life.lock);
    pthread_join(g_tids[id], NULL);
    pthread_mutex_lock(&g_life.lock);
    g_life.state[id] = SCN_T_JOINED;
    pthread_cond_broadcast(&g_life.changed);
  }
  while (g_life.state[id] != SCN_T_JOINED) pthread_cond_wait(&g_life.changed, &g_life.lock);
  pthread_mutex_unlock(&g_life.lock);
}

void scn_thread_join(int group, int index) {
  thread_join_id(thread_id(group, index));
}

static scn_thread *thread_new(const scn_program *p, int group, int index, int id) {
  scn_thread *t = scn_arena_alloc(sizeof *t);  /* cache-line aligned: no false sharing */
  t->group = group;
  t->index = index;
  t->id = id;
  t->rng = scn_seed_mix(scn_seed_mix(p->seed) ^ ((uint64_t)group << 32 | (uint64_t)index));
  if (p->lives_wheel_bits) {
    t->lives.mask = (1ULL << p->lives_wheel_bits) - 1;
    t->lives.wheel = scn_arena_alloc((t->lives.mask + 1) * sizeof *t->lives.wheel);
  }
  return t;
}

/* ---- report: one JSON document on stdout, written after the clock stopped */

static const char *const op_names[SCN_OP_COUNT] = {
  "malloc", "calloc", "realloc", "aligned_alloc", "memalign", "posix_memalign", "free"
};

static void json_string(FILE *out, const char *s) {
  fputc('"', out);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
    else if (c < 0x20) fprintf(out, "\\u%04x", c);
    else fputc(c, out);
  }
  fputc('"', out);
}

/* Which shared object really serves malloc: the proof that a preload took. */
static const char *malloc_provider(void) {
  Dl_info info;
  void *sym = dlsym(RTLD_DEFAULT, "malloc");
  if (sym && dladdr(sym, &info) && info.dli_fname) return info.dli_fname;
  return "unknown";
}

static void report_thread(FILE *out, const scn_program *p, const scn_thread *t) {
  fprintf(out, "{\"group\": ");
  json_string(out, p->groups[t->group].name);
  fprintf(out, ", \"index\": %d, \"start_ns\": %lld, \"end_ns\": %lld, \"cpu_ns\": %lld, \"ops\": {",
          t->index, (long long)t->start_ns, (long long)t->end_ns, (long long)t->cpu_ns);
  for (int k = 0; k < SCN_OP_COUNT; k++)
    fprintf(out, "%s\"%s\": %llu", k ? ", " : "", op_names[k], (unsigned long long)t->count[k]);
  fprintf(out, "}, \"failed\": %llu, \"sends\": %llu, \"recvs\": %llu, \"writes\": %llu, \"touches\": %llu, ",
          (unsigned long long)t->failed, (unsigned long long)t->sends, (unsigned long long)t->recvs,
          (unsigned long long)t->writes, (unsigned long long)t->touches);
  if (scn_uses_maps)
    fprintf(out, "\"maps\": %llu, \"unmaps\": %llu, ", (unsigned long long)t->maps, (unsigned long long)t->unmaps);
  fprintf(out, "\"regions\": {");
  for (int r = 0; r < p->n_regions; r++) {
    fprintf(out, "%s", r ? ", " : "");
    json_string(out, p->regions[r]);
    fprintf(out, ": {\"ns\": %llu, \"entries\": %llu}",
            (unsigned long long)((double)t->region[r].ticks / g_ticks_per_ns + 0.5),
            (unsigned long long)t->region[r].entries);
  }
  fprintf(out, "}}");
}

/* Peak and current RSS from /proc: unlike getrusage's ru_maxrss, VmHWM starts
 * afresh at exec, so it does not inherit the peak of the process that forked us. */
static void proc_memory(long *hwm_kib, long *rss_kib) {
  char line[256];
  FILE *f = fopen("/proc/self/status", "r");
  *hwm_kib = *rss_kib = -1;
  if (!f) return;
  while (fgets(line, sizeof line, f)) {
    if (!strncmp(line, "VmHWM:", 6)) *hwm_kib = strtol(line + 6, NULL, 10);
    else if (!strncmp(line, "VmRSS:", 6)) *rss_kib = strtol(line + 6, NULL, 10);
  }
  fclose(f);
}

static void report(FILE *out, const scn_program *p, scn_thread **threads, int n, int64_t wall_ns,
                   long baseline_kib) {
  struct rusage ru;
  long hwm_kib, rss_kib;
  getrusage(RUSAGE_SELF, &ru);
  proc_memory(&hwm_kib, &rss_kib);
  fprintf(out, "{\"runtime\": \"scenc\", \"version\": 1, \"scenario\": ");
  json_string(out, p->name);
  fprintf(out, ", \"seed\": %llu, \"provider\": ", (unsigned long long)p->seed);
  json_string(out, malloc_provider());
  fprintf(out, ", \"wall_ns\": %lld", (long long)wall_ns);
  fprintf(out, ", \"rusage\": {\"user_s\": %.6f, \"sys_s\": %.6f, \"minflt\": %ld, \"majflt\": %ld}",
          ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6, ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6,
          ru.ru_minflt, ru.ru_majflt);
  fprintf(out, ", \"memory\": {\"peak_rss_kib\": %ld, \"final_rss_kib\": %ld, \"baseline_rss_kib\": %ld}",
          hwm_kib, rss_kib, baseline_kib);
  if (scn_uses_maps)
    fprintf(out, ", \"mapped\": {\"peak_bytes\": %lld, \"final_bytes\": %lld}",
            (long long)atomic_load(&g_mapped_peak), (long long)atomic_load(&g_mapped_now));
  fprintf(out, ", \"threads\": [");
  for (int i = 0; i < n; i++) {
    fprintf(out, "%s", i ? ",\n  " : "\n  ");
    report_thread(out, p, threads[i]);
  }
  fprintf(out, "]");
  if (p->report) {
    fprintf(out, ",\n\"probes\": ");
    p->report(out);
  }
  fprintf(out, "}\n");
}

/* Resident memory now, before the first allocator call of the scenario: what
 * the program itself holds (code, runtime tables), so the heap's share of
 * the peak can be read off the report. */
static long rss_kib_now(void) {
  long hwm, rss;
  proc_memory(&hwm, &rss);
  return rss;
}

int scn_main(const scn_program *p, int argc, char **argv) {
  (void)argc;
  (void)argv;
  g_prog = p;
  scn_ticks_tsc = kernel_uses_tsc();
  int64_t ns0 = scn_clock_ns(CLOCK_MONOTONIC);
  uint64_t ticks0 = scn_ticks();
  int n = 0;
  for (int g = 0; g < p->n_groups; g++) n += p->groups[g].count;
  scn_thread **threads = g_threads = scn_arena_alloc((size_t)n * sizeof *threads);
  g_tids = scn_arena_alloc((size_t)n * sizeof *g_tids);
  g_life.state = scn_arena_alloc((size_t)n * sizeof *g_life.state);
  g_life.n = n;
  int first = 0;  /* threads started at the gate; with churn, the rest follow */
  for (int g = 0; g < p->n_groups; g++) first += group_alive(p, g);
  if (first < n) g_ended.ids = scn_arena_alloc((size_t)n * sizeof *g_ended.ids);  /* before any thread */
  if (p->program_start) p->program_start(n);
  for (int g = 0, id = 0; g < p->n_groups; g++)
    for (int i = 0; i < p->groups[g].count; i++, id++) threads[id] = thread_new(p, g, i, id);
  long baseline_kib = rss_kib_now();
  int at_gate = 0, running = 0;
  for (int i = 0; i < n; i++) {
    const scn_thread *t = threads[i];
    if (t->index >= group_alive(p, t->group)) continue;  /* a churn successor */
    int where = g_life.where ? g_life.where(&p->groups[t->group], t->index) : SCN_START_NOW;
    if (where == SCN_START_LATER) continue;              /* a replay starts it */
    if (where == SCN_START_FIRST) {                      /* untimed, before any other thread runs */
      scn_thread *s = threads[i];
      if (p->thread_start) p->thread_start(s);
      s->start_ns = scn_clock_ns(CLOCK_MONOTONIC);
      p->groups[s->group].body(s);
      s->end_ns = s->start_ns;                           /* outside the timed run: no time of its own */
      if (p->thread_end) p->thread_end(s);
      g_life.state[i] = SCN_T_JOINED;
      continue;
    }
    running++;
    if (where == SCN_START_ON_MAIN && g_life.on_main < 0) {
      g_life.on_main = i;
      g_life.state[i] = SCN_T_STARTED;
      g_life.live++;
      continue;
    }
    start_thread(i);
    at_gate++;
  }
  pthread_mutex_lock(&g_barrier.lock);
  g_barrier.running += running;   /* every thread is still held at the gate */
  pthread_mutex_unlock(&g_barrier.lock);
  pthread_mutex_lock(&g_gate.lock);
  while (g_gate.ready < at_gate) pthread_cond_wait(&g_gate.changed, &g_gate.lock);
  int64_t start = scn_clock_ns(CLOCK_MONOTONIC);
  g_gate.open = 1;
  pthread_cond_broadcast(&g_gate.changed);
  pthread_mutex_unlock(&g_gate.lock);
  if (g_life.on_main >= 0) {
    thread_main(threads[g_life.on_main]);
    pthread_mutex_lock(&g_life.lock);
    g_life.state[g_life.on_main] = SCN_T_JOINED;
    pthread_cond_broadcast(&g_life.changed);
    pthread_mutex_unlock(&g_life.lock);
  }
  int ends = 0;  /* threads of churning groups, all joined by churn() */
  for (int g = 0; g < p->n_groups; g++) ends += churns(p, g) ? p->groups[g].count : 0;
  if (ends) churn(ends);
  for (int i = 0; i < n; i++) thread_join_id(i);  /* returns at once for those already joined */
  int64_t now = scn_clock_ns(CLOCK_MONOTONIC), wall = now - start;
  uint64_t ticks = scn_ticks() - ticks0;
  if (now > ns0 && ticks > 0) g_ticks_per_ns = (double)ticks / (double)(now - ns0);
  if (p->program_end) p->program_end();
  report(stdout, p, threads, n, wall, baseline_kib);
  return fflush(stdout) == 0 ? 0 : 1;
}
