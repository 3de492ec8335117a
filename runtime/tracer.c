/* tracer.c -- the LD_PRELOAD allocator tracer of `scenc capture --method preload`.
 *
 *   SCENC_TRACE_OUT=app.trace LD_PRELOAD=libscntrace.so[:libjemalloc.so] ./app
 *
 * Interposes the C and C++ allocation interface, forwards every call to the
 * next definition (glibc, or an allocator preloaded after this library) and
 * logs each call the program makes -- from its own code, from libc (strdup,
 * fopen, qsort ...), through pointers to malloc/free -- as one fixed-size
 * binary record. trace/preload.py builds it, runs programs under it and reads
 * the log back as AllocEvents.
 *
 * Log format (version 3, runtime/tracelog.h says it byte by byte): a 64-byte header, then chunks,
 * each one thread's records in sequence order: a 72-byte chunk header (thread, first and last
 * sequence numbers, two clock readings), the records (a kind byte, then deltas and sizes as
 * varints: about 5-6 bytes a call) and a census (records by kind, so a summary reads no record).
 * Every record carries a global sequence number taken from one atomic counter
 * at the moment the call takes effect: before the real call for a release
 * (free, delete, realloc(p, 0)) -- so a block another thread gets back from the
 * allocator is never logged before its free -- and after it returns for an
 * allocation. A realloc that moves its block has two such moments (the old
 * block is released inside the call, the new one acquired); it takes both
 * numbers, records the second and the distance to the first (`span`), and the
 * reader uses that to put it before an allocation another thread made of the
 * old block in between. Within one thread records appear in sequence order;
 * across threads the reader merges them back into one causal order. The time
 * of a call is one tick read at that moment (the time-stamp counter: no clock
 * call per call); the time spent inside the real function is not recorded.
 *
 * Buffers: each thread encodes into its own 32 KiB buffer (mmap'ed, so the tracer
 * never allocates through the allocator it watches; about 5000 calls) and writes it
 * whole as one chunk with write(2) under a spin lock on an O_APPEND descriptor: chunks
 * of different threads never interleave mid-chunk, and no lock is shared per call.
 * Buffers are flushed when full, at
 * thread exit (pthread key destructor), and at process exit (atexit handler and
 * ELF destructor), _exit and exec; after the process-exit flush every record
 * is written as soon as it is made (a chunk of one), so frees made by later destructors are
 * kept. Leaving, the process writes an end mark (a chunk of type END, seq = numbers taken
 * so far, with the minor page faults it took since tracing started, the pages of the
 * tracer's own buffers and what a sample of blocks' inner pages became between malloc
 * and free: `convert --touch auto` chooses with them). A program killed by a signal loses the records still in its
 * buffers and leaves no end mark; the reader counts the holes in the sequence
 * numbers and says how many calls are missing.
 *
 * Processes: the launched process creates SCENC_TRACE_OUT (O_EXCL); when it
 * execs another program (env, a shell or a pyenv shim exec the real one), the
 * new image finds its own pid in the log's header, moves the log aside to
 * SCENC_TRACE_OUT.<pid>[.<n>] and starts a new one: the main log holds what the
 * process finally became. A forked child drops the parent's buffered records
 * (the parent writes them) and logs its own calls, numbered from 0, to
 * SCENC_TRACE_OUT.<pid>[.<n>], as does a program exec'ed by a traced process
 * other than the launched one. Those logs are created on their first write.
 *
 * Threads (version 2): a thread made by pthread_create logs K_THREAD_START
 * (with its creator's tid) before anything else, and every thread that logged
 * anything logs K_THREAD_EXIT in its last pthread key destructor round, so a
 * replay can create and end threads where the program did.
 *
 * Reentrancy: a per-thread guard (initial-exec TLS, so reading it never calls
 * malloc) is set for the whole wrapper, so calls the allocator makes inside
 * (realloc(NULL, n) -> malloc, operator new -> malloc, posix_memalign ->
 * memalign ...) and the tracer's own are forwarded without being logged: each
 * program call is exactly one record. A signal handler that allocates while
 * its thread is inside a wrapper is therefore not logged either. Until
 * dlsym(RTLD_NEXT) has returned, allocations made by dlsym itself are served
 * from a static bootstrap arena that is never freed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "clock.h"
#include "tracelog.h"

#define EXPORT __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ------------------------------------------------------------------ clock
 * One tick read per call: the time-stamp counter where there is one (about 12 ns here, against
 * 30 ns for clock_gettime), CLOCK_MONOTONIC elsewhere. Each chunk carries CLOCK_MONOTONIC read at
 * its first record and at its flush, so the reader maps ticks to ns without a calibration here. */
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define TICK_SHIFT 6          /* 64 TSC ticks: about 20 ns at 3 GHz */
static inline uint64_t now_tick(void) { return __rdtsc(); }
#elif defined(__aarch64__)
#define TICK_SHIFT 0          /* the virtual counter runs at tens of MHz already */
static inline uint64_t now_tick(void) {
  uint64_t v;
  __asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
  return v;
}
#else
#define TICK_SHIFT 4
static inline uint64_t now_tick(void) { return (uint64_t)scn_clock_ns(CLOCK_MONOTONIC); }
#endif

/* ----------------------------------------------------------------- state */
#define BUF_BYTES (32 * 1024)   /* a chunk's records: about 5000 calls */

/* One thread's chunk being filled; data holds the chunk header, then the records. */
struct buffer {
  _Alignas(64) _Atomic uint32_t busy;   /* tid of the holder: the owner appending, a flush at exit */
  _Atomic int owned;               /* a live thread records into it */
  uint32_t n, used;                /* records, their bytes */
  _Atomic uint32_t high;           /* most bytes it ever held: its pages the tracer itself faulted in */
  struct buffer *next;             /* every buffer ever made: never unlinked, reused when released */
  struct scn_tl_chunk head;        /* tid, first seq, ns and tick of the chunk being filled */
  struct scn_tl_encoder enc;
  uint32_t counts[64];             /* its records by kind: the census */
  _Alignas(64) uint8_t data[SCN_TL_CHUNK_SIZE + BUF_BYTES + SCN_TL_MAX_CENSUS];
};

struct tstate {
  int guard;          /* inside a wrapper: forward without logging */
  int exit_round;     /* pthread key destructor rounds seen at thread exit */
  int resolving;      /* this thread runs dlsym for the real functions */
  int exiting;        /* its key destructor ran: log record by record */
  int keyed;          /* the key destructor is armed */
  uint32_t to_skip;   /* blocks with inner pages to pass before the next sample */
  uint32_t sampled;   /* blocks looked at with mincore */
  uint32_t tid;
  struct buffer *buf;
};

static __thread struct tstate T __attribute__((tls_model("initial-exec")));

enum { ST_STARTUP, ST_ENABLED, ST_DISABLED };
static _Atomic int g_state = ST_STARTUP;   /* STARTUP: constructor not run yet; calls are buffered */
static _Atomic int g_unbuffered;           /* set by the process-exit flush */
static _Atomic uint64_t g_seq;
static _Atomic(struct buffer *) g_buffers;
static _Atomic uint32_t g_write_lock;      /* tid of the holder */
static int g_fd = -1;                      /* guarded by g_write_lock, like everything below */
static int g_write_failed;
static dev_t g_dev;
static ino_t g_ino;
static char g_path[4096];                 /* SCENC_TRACE_OUT */
static char g_name[4096 + 48];            /* the log this process writes */
static pthread_key_t g_key;
static _Atomic int g_key_ok;
static uint64_t g_faults_start;           /* minor page faults when tracing started (or at the fork) */

/* ------------------------------------------------------ the real functions */
static void *(*real_malloc)(size_t);
static void (*real_free)(void *);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void *(*real_reallocarray)(void *, size_t, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);
static void *(*real_valloc)(size_t);
static void *(*real_pvalloc)(size_t);
static _Atomic int g_resolved;             /* 0 not yet, 1 in progress, 2 done */

/* dlsym may allocate before it can tell us where malloc is. */
static _Alignas(64) char boot_heap[64 * 1024];
static _Atomic size_t boot_used;

static int is_boot(const void *p) {
  return (const char *)p >= boot_heap && (const char *)p < boot_heap + sizeof boot_heap;
}

static void *boot_alloc(size_t size, size_t align) {
  if (align < 16) align = 16;
  for (;;) {
    size_t used = atomic_load(&boot_used);
    size_t start = (used + 16 + align - 1) & ~(align - 1);
    if (size > sizeof boot_heap || start + size > sizeof boot_heap) return NULL;
    if (atomic_compare_exchange_weak(&boot_used, &used, start + size)) {
      memcpy(boot_heap + start - sizeof size, &size, sizeof size);   /* for realloc */
      return boot_heap + start;
    }
  }
}

static size_t boot_size(const void *p) {
  size_t size;
  memcpy(&size, (const char *)p - sizeof size, sizeof size);
  return size;
}

static void *next_symbol(const char *name) {
  return dlsym(RTLD_NEXT, name);
}

static void *fallback_reallocarray(void *old, size_t nmemb, size_t size) {
  if (size && nmemb > SIZE_MAX / size) {
    errno = ENOMEM;
    return NULL;
  }
  return real_realloc(old, nmemb * size);
}

/* Returns 1 when the real functions are known; 0 for calls made by dlsym
 * while this thread resolves them (served from the bootstrap arena). */
static int resolve(void) {
  if (LIKELY(atomic_load_explicit(&g_resolved, memory_order_acquire) == 2)) return 1;
  if (T.resolving) return 0;
  int expect = 0;
  if (atomic_compare_exchange_strong(&g_resolved, &expect, 1)) {
    T.resolving = 1;
    real_malloc = next_symbol("malloc");
    real_free = next_symbol("free");
    real_calloc = next_symbol("calloc");
    real_realloc = next_symbol("realloc");
    real_reallocarray = next_symbol("reallocarray");
    real_posix_memalign = next_symbol("posix_memalign");
    real_aligned_alloc = next_symbol("aligned_alloc");
    real_memalign = next_symbol("memalign");
    real_valloc = next_symbol("valloc");
    real_pvalloc = next_symbol("pvalloc");
    if (!real_reallocarray) real_reallocarray = fallback_reallocarray;
    T.resolving = 0;
    if (!real_malloc || !real_free || !real_calloc || !real_realloc) {
      static const char msg[] = "scenc tracer: malloc, free, calloc or realloc not found after the tracer "
                                "(dlsym RTLD_NEXT); cannot continue\n";
      (void)!write(2, msg, sizeof msg - 1);
      abort();
    }
    atomic_store_explicit(&g_resolved, 2, memory_order_release);
    return 1;
  }
  while (atomic_load_explicit(&g_resolved, memory_order_acquire) != 2) sched_yield();
  return 1;
}

/* ------------------------------------------------------------- the log */
static inline uint32_t tid(void) {
  if (UNLIKELY(!T.tid)) T.tid = (uint32_t)syscall(SYS_gettid);
  return T.tid;
}

/* Spin locks holding the holder's tid: a signal handler that calls exit()
 * while its thread holds one (inside a flush) must not wait for itself;
 * it gets 0 and leaves those records. */
static int lock_tid(_Atomic uint32_t *lock) {
  uint32_t me = tid(), expected = 0;
  while (!atomic_compare_exchange_weak_explicit(lock, &expected, me, memory_order_acquire, memory_order_relaxed)) {
    if (expected == me) return 0;
    expected = 0;
    sched_yield();
  }
  return 1;
}

static void unlock_tid(_Atomic uint32_t *lock) {
  atomic_store_explicit(lock, 0, memory_order_release);
}

static int lock_writes(void) {
  return lock_tid(&g_write_lock);
}

static void unlock_writes(void) {
  unlock_tid(&g_write_lock);
}

static size_t append_str(char *dst, size_t at, size_t cap, const char *s) {
  while (*s && at + 1 < cap) dst[at++] = *s++;
  dst[at] = 0;
  return at;
}

static size_t append_uint(char *dst, size_t at, size_t cap, unsigned long v) {
  char digits[24];
  int n = 0;
  do digits[n++] = (char)('0' + v % 10); while ((v /= 10) && n < 24);
  while (n && at + 1 < cap) dst[at++] = digits[--n];
  dst[at] = 0;
  return at;
}

static void note_stderr(const char *what, const char *path) {
  char msg[4400];
  size_t at = append_str(msg, 0, sizeof msg, "scenc tracer: ");
  at = append_str(msg, at, sizeof msg, what);
  at = append_str(msg, at, sizeof msg, path);
  at = append_str(msg, at, sizeof msg, "\n");
  (void)!write(2, msg, at);
}

static void write_header(int fd) {
  struct scn_trace_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, "SCNTRACE", 8);
  h.version = SCN_TRACE_VERSION;
  h.record_size = 0;   /* variable: chunks of encoded records */
  h.pid = (uint32_t)getpid();
  h.ppid = (uint32_t)getppid();
  h.start_ns = (uint64_t)scn_clock_ns(CLOCK_MONOTONIC);
  h.start_realtime_ns = (uint64_t)scn_clock_ns(CLOCK_REALTIME);
  (void)!write(fd, &h, sizeof h);
}

/* Creates a log (O_EXCL: never another process's) and writes its header.
 * Called with the write lock held; -1 with errno on failure. */
static int create_log(const char *name) {
  int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  /* Far from the small numbers programs dup2 onto and close in loops. */
  int high = fcntl(fd, F_DUPFD_CLOEXEC, 900);
  if (high >= 0) {
    close(fd);
    fd = high;
  }
  struct stat st;
  if (fstat(fd, &st) == 0) {
    g_dev = st.st_dev;
    g_ino = st.st_ino;
  }
  memcpy(g_name, name, strlen(name) + 1);
  write_header(fd);
  return fd;
}

/* <path>.<pid>, or <path>.<pid>.<n> when a process image of the same pid
 * (before an exec) already has that name. */
static int side_name(char *name, size_t cap, unsigned n) {
  size_t at = append_str(name, 0, cap, g_path);
  at = append_str(name, at, cap, ".");
  at = append_uint(name, at, cap, (unsigned long)getpid());
  if (n) {
    at = append_str(name, at, cap, ".");
    at = append_uint(name, at, cap, n);
  }
  return at + 1 < cap;
}

/* A forked child's log, or a program's exec'ed by another traced process. */
static int create_child_log(void) {
  char name[sizeof g_name];
  for (unsigned n = 0; n < 100 && side_name(name, sizeof name, n); n++) {
    int fd = create_log(name);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

/* The main log exists: if this process wrote it before an exec, move the
 * earlier image's log aside, so the main log always holds what the launched
 * process finally became (an env, shell or pyenv wrapper execs the program). */
static int take_over_main_log(void) {
  struct scn_trace_header h;
  int fd = open(g_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t got = read(fd, &h, sizeof h);
  close(fd);
  if (got != (ssize_t)sizeof h || memcmp(h.magic, "SCNTRACE", 8) != 0 || h.pid != (uint32_t)getpid()) return -1;
  char name[sizeof g_name];
  for (unsigned n = 0; n < 100 && side_name(name, sizeof name, n); n++)
    if (access(name, F_OK) != 0) {
      if (rename(g_path, name) != 0) return -1;
      return create_log(g_path);
    }
  return -1;
}

/* The descriptor, if it is still our log: a program may close every
 * descriptor or dup2 another file onto it; then reopen the log by name.
 * Called with the write lock held. */
static int log_fd(void) {
  struct stat st;
  if (g_fd >= 0 && fstat(g_fd, &st) == 0 && st.st_dev == g_dev && st.st_ino == g_ino) return g_fd;
  if (g_write_failed) return -1;
  if (g_fd < 0 && !g_name[0]) {          /* a child's first write */
    g_fd = create_child_log();
    if (g_fd < 0) {
      note_stderr("cannot create a trace log next to ", g_path);
      g_write_failed = 1;
    }
    return g_fd;
  }
  int fd = open(g_name, O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_dev != g_dev || st.st_ino != g_ino) {
    if (fd >= 0) close(fd);
    note_stderr("lost the descriptor of the trace log, later records are dropped: ", g_name);
    g_write_failed = 1;
    g_fd = -1;
    return -1;
  }
  g_fd = fd;
  return fd;
}

/* Called with the write lock held. */
static void write_locked(const void *bytes, size_t left) {
  int fd = g_path[0] ? log_fd() : -1;
  const char *p = bytes;
  while (fd >= 0 && left) {
    ssize_t w = write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      note_stderr("write failed, the trace log is incomplete: ", g_path);
      break;
    }
    p += w;
    left -= (size_t)w;
  }
}

/* The program's errno survives: the wrappers of the common calls do not save it (the only system
 * calls on their path are here and in claim_buffer). */
static void write_bytes(const void *bytes, size_t n) {
  if (atomic_load_explicit(&g_state, memory_order_relaxed) == ST_DISABLED) return;
  int err = errno;
  if (lock_writes()) {
    write_locked(bytes, n);
    unlock_writes();
  }
  errno = err;
}

/* A chunk is finished at its flush: the second clock reading (so its ticks map to ns), the census
 * after its records (chunk: header and records). Returns its length. */
static size_t seal_chunk(struct scn_tl_chunk *h, uint8_t *chunk, uint32_t n, uint32_t bytes, uint32_t counts[64]) {
  uint64_t tick = now_tick(), ns = (uint64_t)scn_clock_ns(CLOCK_MONOTONIC);
  uint8_t *census = chunk + SCN_TL_CHUNK_SIZE + bytes;
  h->census = (uint32_t)(scn_tl_put_census(census, counts) - census);
  memset(counts, 0, 64 * sizeof *counts);
  h->bytes = bytes;
  h->count = n;
  h->type = SCN_TL_RECORDS;
  h->tick_shift = TICK_SHIFT;
  h->mark = SCN_TL_MARK;
  h->ns_span = ns > h->ns ? ns - h->ns : 0;
  h->tick_span = tick > h->tick ? tick - h->tick : 0;
  memcpy(chunk, h, sizeof *h);
  return SCN_TL_CHUNK_SIZE + bytes + h->census;
}

/* What a chunk's header and census count of each record. */
static inline void census_add(struct scn_tl_chunk *h, uint32_t counts[64], const struct scn_trace_record *r) {
  counts[r->kind & SCN_TL_CODE]++;
  h->moved += r->span != 0;
  h->last_seq = r->seq;
}

static void start_chunk(struct scn_tl_chunk *h, struct scn_tl_encoder *enc, const struct scn_trace_record *r) {
  memset(h, 0, sizeof *h);
  h->tid = r->tid;
  h->seq = r->seq;
  h->tick = r->ns;
  h->ns = (uint64_t)scn_clock_ns(CLOCK_MONOTONIC);
  scn_tl_encoder_start(enc, r->seq, r->ns, TICK_SHIFT);
}

/* A chunk of one record, written at once (threads that are leaving, the process after its exit flush). */
static void write_record(const struct scn_trace_record *r) {
  uint8_t chunk[SCN_TL_CHUNK_SIZE + SCN_TL_MAX_RECORD + SCN_TL_MAX_CENSUS];
  uint32_t counts[64] = {0};
  struct scn_tl_chunk h;
  struct scn_tl_encoder enc;
  start_chunk(&h, &enc, r);
  size_t n = (size_t)(scn_tl_encode(&enc, chunk + SCN_TL_CHUNK_SIZE, r) - (chunk + SCN_TL_CHUNK_SIZE));
  census_add(&h, counts, r);
  write_bytes(chunk, seal_chunk(&h, chunk, 1, (uint32_t)n, counts));
}

static int lock_buffer(struct buffer *b) {
  return lock_tid(&b->busy);
}

static void unlock_buffer(struct buffer *b) {
  unlock_tid(&b->busy);
}

static int buffer_full(const struct buffer *b) {
  return b->used > BUF_BYTES - SCN_TL_MAX_RECORD;
}

static void flush_locked(struct buffer *b) {
  /* Before the constructor has found the log's name, keep what fits. */
  if (!b->n || (atomic_load_explicit(&g_state, memory_order_relaxed) == ST_STARTUP && !buffer_full(b))) return;
  if (b->used > atomic_load_explicit(&b->high, memory_order_relaxed))
    atomic_store_explicit(&b->high, b->used, memory_order_relaxed);
  write_bytes(b->data, seal_chunk(&b->head, b->data, b->n, b->used, b->counts));
  b->n = b->used = 0;
}

static inline void put(int kind, uint64_t seq, uint64_t tick, uint64_t a0, uint64_t a1, uint64_t a2,
                       uint64_t result, int err, int flags, uint64_t span);
static inline uint64_t take_seq(void);

/* The thread's key destructor. It re-arms itself for later rounds of the
 * PTHREAD_DESTRUCTOR_ITERATIONS glibc runs, so the exit record comes after
 * what the program's own key destructors free in the first round; it leaves
 * the last round to runtimes that tear the thread down there (ThreadSanitizer
 * does, and our write would then crash inside it). */
static void thread_gone(void *arg) {
  struct buffer *b = arg;
  T.guard++;
  if (++T.exit_round < PTHREAD_DESTRUCTOR_ITERATIONS - 1 && pthread_setspecific(g_key, b) == 0) {
    T.guard--;
    return;
  }
  if (atomic_load_explicit(&g_state, memory_order_relaxed) == ST_ENABLED)
    put(K_THREAD_EXIT, take_seq(), now_tick(), 0, 0, 0, 0, 0, 0, 0);
  if (lock_buffer(b)) {
    flush_locked(b);
    unlock_buffer(b);
  }
  T.buf = NULL;
  T.exiting = 1;
  atomic_store_explicit(&b->owned, 0, memory_order_release);
  T.guard--;
}

static struct buffer *claim_buffer(void) {
  struct buffer *b;
  for (b = atomic_load(&g_buffers); b; b = b->next) {
    int free_ = 0;
    if (!atomic_load_explicit(&b->owned, memory_order_relaxed) &&
        atomic_compare_exchange_strong(&b->owned, &free_, 1))
      return b;
  }
  /* The system call itself: the tracer's own memory is never the program's mapping. */
  int err = errno;
  void *m = (void *)syscall(SYS_mmap, NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  errno = err;
  if (m == MAP_FAILED) return NULL;
  b = m;
  atomic_store(&b->owned, 1);
  struct buffer *head = atomic_load(&g_buffers);
  do b->next = head; while (!atomic_compare_exchange_weak(&g_buffers, &head, b));
  return b;
}

/* The thread's buffer, locked, with room for r; NULL when r was written at once (or dropped). */
static struct buffer *buffer_for(const struct scn_trace_record *r) {
  if (UNLIKELY(T.exiting)) {
    write_record(r);
    return NULL;
  }
  struct buffer *b = T.buf;
  if (UNLIKELY(!b)) {
    b = T.buf = claim_buffer();
    if (!b) {
      write_record(r);
      return NULL;
    }
  }
  if (UNLIKELY(!T.keyed) && atomic_load_explicit(&g_key_ok, memory_order_acquire)) {
    T.keyed = 1;
    pthread_setspecific(g_key, b);
  }
  if (!lock_buffer(b)) return NULL;   /* cannot happen: the guard keeps handlers out of a wrapper */
  if (UNLIKELY(buffer_full(b))) {
    flush_locked(b);
    if (buffer_full(b)) {   /* still full: the constructor has not run yet, keep what fitted */
      unlock_buffer(b);
      return NULL;
    }
  }
  if (UNLIKELY(!b->n)) start_chunk(&b->head, &b->enc, r);
  return b;
}

static void buffer_done(struct buffer *b) {
  b->n++;
  if (UNLIKELY(buffer_full(b) || atomic_load_explicit(&g_unbuffered, memory_order_relaxed))) flush_locked(b);
  unlock_buffer(b);
}

static void flush_buffers(void) {
  T.guard++;
  for (struct buffer *b = atomic_load(&g_buffers); b; b = b->next)
    if (lock_buffer(b)) {
      flush_locked(b);
      unlock_buffer(b);
    }
  T.guard--;
}

/* ------------------------------------------------- the insides of blocks
 * For `convert --touch auto`: does the program write the insides of its blocks? One malloc'ed block in
 * SAMPLE_EVERY (per thread) with inner pages (neither its first byte's nor its last's) some of which are not
 * resident yet is remembered with those pages (mincore); when it is freed or realloc'ed, mincore tells how
 * many of them the program backed meanwhile. A slot per hash of the pointer, claimed and released with one
 * compare-and-swap; a block whose slot is taken is not sampled. */
#define SAMPLE_SLOTS 256
#define SAMPLE_EVERY 8
/* Each sample costs two system calls, and a few thousand tell the share of pages written: after every
 * SAMPLE_HALVING samples a thread samples half as often, down to one block in SAMPLE_EVERY << 10
 * (alloc_heavy of 12M calls: 75,146 mincore calls without this, 10,626 with it). */
#define SAMPLE_HALVING 2048
#define SAMPLE_BUSY ((uintptr_t)1)
struct sample {
  _Atomic uintptr_t p;    /* the block; 0: free; SAMPLE_BUSY: being filled or read */
  uintptr_t first;        /* its first inner page */
  uint64_t fresh;         /* of the 64 inner pages from there, those not resident at the malloc */
  uint32_t n;             /* inner pages looked at */
};
static struct sample g_samples[SAMPLE_SLOTS];
static _Atomic uint32_t g_sampled;         /* slots holding a block */
static _Atomic uint64_t g_fresh, g_written;   /* inner pages not resident at the malloc; of them, resident at the free */

static struct sample *sample_slot(uintptr_t p) { return &g_samples[(uint32_t)(p >> 4) * 2654435761u >> 24]; }

static uint64_t resident(uintptr_t first, uint32_t n) {
  unsigned char vec[64];
  uint64_t bits = 0;
  if (mincore((void *)(first * 4096), (size_t)n * 4096, vec)) return ~0ull;   /* unmapped: nothing to learn */
  for (uint32_t i = 0; i < n; i++) bits |= (uint64_t)(vec[i] & 1) << i;
  return bits;
}

static void sample_malloc(void *block, size_t size) {
  uintptr_t p = (uintptr_t)block, first = p / 4096 + 1, last = block ? (p + size - 1) / 4096 : 0;
  if (last <= first) return;
  if (T.to_skip) {
    T.to_skip--;
    return;
  }
  uint32_t halvings = ++T.sampled / SAMPLE_HALVING;
  T.to_skip = (SAMPLE_EVERY << (halvings < 10 ? halvings : 10)) - 1;
  uint32_t n = last - first < 64 ? (uint32_t)(last - first) : 64;
  uint64_t fresh = ~resident(first, n) & (n < 64 ? (1ull << n) - 1 : ~0ull);
  struct sample *s = sample_slot(p);
  uintptr_t none = 0;
  if (!fresh || !atomic_compare_exchange_strong(&s->p, &none, SAMPLE_BUSY)) return;
  s->first = first;
  s->fresh = fresh;
  s->n = n;
  atomic_fetch_add_explicit(&g_sampled, 1, memory_order_relaxed);
  atomic_store_explicit(&s->p, p, memory_order_release);
}

static void sample_free(void *block) {
  uintptr_t p = (uintptr_t)block;
  if (!p || !atomic_load_explicit(&g_sampled, memory_order_relaxed)) return;
  struct sample *s = sample_slot(p);
  if (atomic_load_explicit(&s->p, memory_order_relaxed) != p ||
      !atomic_compare_exchange_strong_explicit(&s->p, &p, SAMPLE_BUSY, memory_order_acquire, memory_order_relaxed))
    return;
  uint64_t now = resident(s->first, s->n);
  atomic_fetch_add_explicit(&g_fresh, (uint64_t)__builtin_popcountll(s->fresh), memory_order_relaxed);
  atomic_fetch_add_explicit(&g_written, (uint64_t)__builtin_popcountll(s->fresh & now), memory_order_relaxed);
  atomic_fetch_sub_explicit(&g_sampled, 1, memory_order_relaxed);
  atomic_store_explicit(&s->p, 0, memory_order_release);
}

/* Minor page faults of the process so far (a system call: no allocation); 0 if it cannot tell. */
static uint64_t minor_faults(void) {
  struct rusage ru;
  return getrusage(RUSAGE_SELF, &ru) ? 0 : (uint64_t)ru.ru_minflt;
}

/* Pages of the tracer's own buffers it wrote: faults the program did not take. */
static uint64_t own_pages(void) {
  uint64_t pages = 0;
  for (struct buffer *b = atomic_load(&g_buffers); b; b = b->next) {
    uint64_t bytes = offsetof(struct buffer, data) + SCN_TL_CHUNK_SIZE +
                     atomic_load_explicit(&b->high, memory_order_relaxed) + SCN_TL_MAX_CENSUS;
    uint64_t most = (sizeof *b + 4095) / 4096;
    pages += (bytes + 4095) / 4096 < most ? (bytes + 4095) / 4096 : most;
  }
  return pages;
}

/* The end mark: without it the reader knows the process died before its
 * exit handlers; with it, it can count calls lost at the very end too. */
static void write_end(void) {
  if (atomic_load_explicit(&g_state, memory_order_relaxed) == ST_DISABLED) return;
  /* 0: this thread holds the lock, interrupted by a signal handler that is
   * leaving (exit or _exit never return to the interrupted write, whose
   * write(2) has completed): the mark can still go after it. */
  int mine = lock_writes();
  if (g_fd >= 0 || g_name[0]) {          /* a child that logged nothing leaves no file */
    struct scn_tl_chunk h;
    memset(&h, 0, sizeof h);
    h.type = SCN_TL_END;
    h.mark = SCN_TL_MARK;
    h.tick_shift = TICK_SHIFT;
    h.seq = atomic_load(&g_seq);
    h.ns = (uint64_t)scn_clock_ns(CLOCK_MONOTONIC);
    h.tick = now_tick();
    h.tid = tid();
    scn_tl_end_set_faults(&h, g_faults_start, minor_faults(), own_pages(), atomic_load(&g_fresh), atomic_load(&g_written));
    write_locked(&h, sizeof h);
  }
  if (mine) unlock_writes();
}

/* At process exit: from now on every record is written as it is made. */
static void flush_all(void) {
  atomic_store(&g_unbuffered, 1);
  flush_buffers();
  write_end();
}

static void at_fork_child(void) {
  /* Only this thread survives; the other buffers' locks may be held by
   * threads that no longer exist, and every buffered record is the
   * parent's, which it writes itself. */
  atomic_store(&g_write_lock, 0);
  for (struct buffer *b = atomic_load(&g_buffers); b; b = b->next) {
    atomic_store(&b->busy, 0);
    b->n = b->used = 0;
    memset(b->counts, 0, sizeof b->counts);
    atomic_store(&b->owned, b == T.buf);
  }
  T.tid = 0;
  g_faults_start = minor_faults();   /* a child's count starts at the fork */
  atomic_store(&g_seq, 0);
  atomic_store(&g_unbuffered, 0);
  if (g_fd >= 0) close(g_fd);
  g_fd = -1;
  g_name[0] = 0;
  g_write_failed = 0;
}

__attribute__((constructor)) static void tracer_init(void) {
  T.guard++;
  g_faults_start = minor_faults();
  resolve();
  const char *path = getenv("SCENC_TRACE_OUT");
  if (!path || !*path || strlen(path) >= sizeof g_path) {
    if (path && *path) note_stderr("SCENC_TRACE_OUT is too long, not tracing: ", path);
    atomic_store(&g_state, ST_DISABLED);
    T.guard--;
    return;
  }
  memcpy(g_path, path, strlen(path) + 1);
  (void)lock_writes();
  g_fd = create_log(g_path);
  int err = g_fd < 0 ? errno : 0;
  if (err == EEXIST && (g_fd = take_over_main_log()) >= 0) err = 0;
  if (err && err != EEXIST) {
    note_stderr("cannot create the trace log at ", g_path);
    g_write_failed = 1;
  }
  /* Still EEXIST: exec'ed by another traced process; our own log is made on first write. */
  unlock_writes();
  if (pthread_key_create(&g_key, thread_gone) == 0) atomic_store_explicit(&g_key_ok, 1, memory_order_release);
  pthread_atfork(NULL, NULL, at_fork_child);
  atexit(flush_all);
  atomic_store(&g_state, ST_ENABLED);
  T.guard--;
}

__attribute__((destructor)) static void tracer_fini(void) {
  flush_all();
}

/* ------------------------------------------------------------- recording */
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

/* ------------------------------------------------------------- C interface */
EXPORT void *malloc(size_t size) {
  if (UNLIKELY(!resolve())) return boot_alloc(size, 16);
  if (!tracing()) return real_malloc(size);
  struct call c;
  begin(&c);
  void *p = real_malloc(size);
  sample_malloc(p, size);
  return end_alloc(&c, K_MALLOC, size, 0, 0, p);
}

EXPORT void free(void *p) {
  if (UNLIKELY(is_boot(p))) return;
  if (UNLIKELY(!resolve())) return;
  if (!tracing()) {
    real_free(p);
    return;
  }
  struct call c;
  uint64_t seq = begin_release(&c);
  sample_free(p);
  real_free(p);
  end_release(&c, seq, K_FREE, (uintptr_t)p, 0, 0);
}

EXPORT void *calloc(size_t nmemb, size_t size) {
  if (UNLIKELY(!resolve())) {
    if (size && nmemb > SIZE_MAX / size) return NULL;
    return boot_alloc(nmemb * size, 16);   /* the arena is static, hence zeroed, and never reused */
  }
  if (!tracing()) return real_calloc(nmemb, size);
  struct call c;
  begin(&c);
  return end_alloc(&c, K_CALLOC, nmemb, size, 0, real_calloc(nmemb, size));
}

static void *boot_realloc(void *old, size_t size) {
  void *p = resolve() ? real_malloc(size) : boot_alloc(size, 16);
  if (p && old) {
    size_t keep = boot_size(old);
    memcpy(p, old, keep < size ? keep : size);
  }
  return p;
}

/* A realloc that moves its block both releases and acquires: see the header. */
static void *traced_realloc(int kind, void *old, size_t nmemb, size_t size, int array) {
  T.guard = 1;
  sample_free(old);
  uint64_t at = old ? now_tick() : 0;
  uint64_t before = old ? take_seq() : 0;
  void *p = array ? real_reallocarray(old, nmemb, size) : real_realloc(old, size);
  int err = errno;
  uint64_t seq = before, span = 0;
  if (!old || (p && p != old)) {
    seq = take_seq();
    at = now_tick();
    span = old ? seq - before : 0;
  }
  if (array)
    put(kind, seq, at, (uintptr_t)old, nmemb, size, (uintptr_t)p, 0, 0, span);
  else
    put(kind, seq, at, (uintptr_t)old, size, 0, (uintptr_t)p, 0, 0, span);
  T.guard = 0;
  errno = err;
  return p;
}

EXPORT void *realloc(void *old, size_t size) {
  if (UNLIKELY(is_boot(old))) return boot_realloc(old, size);
  if (UNLIKELY(!resolve())) return boot_realloc(old, size);
  if (!tracing()) return real_realloc(old, size);
  return traced_realloc(K_REALLOC, old, 1, size, 0);
}

EXPORT void *reallocarray(void *old, size_t nmemb, size_t size) {
  if (UNLIKELY(is_boot(old) || !resolve())) {
    if (size && nmemb > SIZE_MAX / size) return NULL;
    return boot_realloc(old, nmemb * size);
  }
  if (!tracing()) return real_reallocarray(old, nmemb, size);
  return traced_realloc(K_REALLOCARRAY, old, nmemb, size, 1);
}

EXPORT int posix_memalign(void **out, size_t align, size_t size) {
  if (UNLIKELY(!resolve())) {
    *out = boot_alloc(size, align);
    return *out ? 0 : ENOMEM;
  }
  if (!real_posix_memalign) return ENOSYS;
  if (!tracing()) return real_posix_memalign(out, align, size);
  struct call c;
  begin(&c);
  int rc = real_posix_memalign(out, align, size);
  int err = errno;
  put(K_POSIX_MEMALIGN, take_seq(), now_tick(), align, size, 0, rc == 0 ? (uintptr_t)*out : 0, rc, 0, 0);
  T.guard = 0;
  errno = err;
  return rc;
}

#define ALIGNED_WRAPPER(name, kind)                                        \
  EXPORT void *name(size_t align, size_t size) {                           \
    if (UNLIKELY(!resolve())) return boot_alloc(size, align);              \
    if (!real_##name) {                                                    \
      errno = ENOSYS;                                                      \
      return NULL;                                                         \
    }                                                                      \
    if (!tracing()) return real_##name(align, size);                       \
    struct call c;                                                         \
    begin(&c);                                                             \
    return end_alloc(&c, kind, align, size, 0, real_##name(align, size));  \
  }
ALIGNED_WRAPPER(aligned_alloc, K_ALIGNED_ALLOC)
ALIGNED_WRAPPER(memalign, K_MEMALIGN)

#define PAGE_WRAPPER(name, kind)                                           \
  EXPORT void *name(size_t size) {                                         \
    if (UNLIKELY(!resolve())) return boot_alloc(size, 4096);               \
    if (!real_##name) {                                                    \
      errno = ENOSYS;                                                      \
      return NULL;                                                         \
    }                                                                      \
    if (!tracing()) return real_##name(size);                              \
    struct call c;                                                         \
    begin(&c);                                                             \
    return end_alloc(&c, kind, size, 0, 0, real_##name(size));             \
  }
PAGE_WRAPPER(valloc, K_VALLOC)
PAGE_WRAPPER(pvalloc, K_PVALLOC)

/* ----------------------------------------------------------- C++ interface
 * Resolved on first use: libstdc++ may be loaded after this library (a
 * Python extension written in C++). Its operator new throws std::bad_alloc
 * through our frame; the cleanup (compiled with -fexceptions) logs the call
 * as a failed allocation and drops the guard on the way out. */
static void *cxx_symbol(_Atomic(void *) *slot, const char *name) {
  void *f = atomic_load_explicit(slot, memory_order_acquire);
  if (UNLIKELY(!f)) {
    int guard = T.guard;
    T.guard = 1;
    f = next_symbol(name);
    T.guard = guard;
    if (!f) {
      note_stderr("no next definition of the C++ allocation function ", name);
      abort();
    }
    atomic_store_explicit(slot, f, memory_order_release);
  }
  return f;
}

struct new_call {
  struct call c;
  int kind, done;
  size_t size, align;
};

static void new_unwound(struct new_call *n) {
  if (n->done) return;
  put(n->kind, take_seq(), now_tick(), n->size, n->align, 0, 0, 0, F_THREW, 0);
  T.guard = 0;
}

#define NEW_WRAPPER(sym, kind, PARAMS, ARGS, ALIGN)                                      \
  EXPORT void *sym PARAMS {                                                              \
    static _Atomic(void *) real;                                                         \
    void *(*f) PARAMS = (void *(*) PARAMS)cxx_symbol(&real, #sym);                       \
    if (!tracing()) return f ARGS;                                                       \
    struct new_call n __attribute__((cleanup(new_unwound))) = {{0}, kind, 0, size, ALIGN};    \
    begin(&n.c);                                                                         \
    void *p = f ARGS;                                                                    \
    n.done = 1;                                                                          \
    return end_alloc(&n.c, kind, size, ALIGN, 0, p);                                     \
  }

NEW_WRAPPER(_Znwm, K_NEW, (size_t size), (size), 0)
NEW_WRAPPER(_Znam, K_NEW_ARRAY, (size_t size), (size), 0)
NEW_WRAPPER(_ZnwmRKSt9nothrow_t, K_NEW_NOTHROW, (size_t size, const void *tag), (size, tag), 0)
NEW_WRAPPER(_ZnamRKSt9nothrow_t, K_NEW_ARRAY_NOTHROW, (size_t size, const void *tag), (size, tag), 0)
NEW_WRAPPER(_ZnwmSt11align_val_t, K_NEW_ALIGNED, (size_t size, size_t align), (size, align), align)
NEW_WRAPPER(_ZnamSt11align_val_t, K_NEW_ARRAY_ALIGNED, (size_t size, size_t align), (size, align), align)
NEW_WRAPPER(_ZnwmSt11align_val_tRKSt9nothrow_t, K_NEW_ALIGNED_NOTHROW,
            (size_t size, size_t align, const void *tag), (size, align, tag), align)
NEW_WRAPPER(_ZnamSt11align_val_tRKSt9nothrow_t, K_NEW_ARRAY_ALIGNED_NOTHROW,
            (size_t size, size_t align, const void *tag), (size, align, tag), align)

#define DELETE_WRAPPER(sym, kind, PARAMS, ARGS, A1, A2)                                  \
  EXPORT void sym PARAMS {                                                               \
    static _Atomic(void *) real;                                                         \
    void (*f) PARAMS = (void (*) PARAMS)cxx_symbol(&real, #sym);                         \
    if (!tracing()) {                                                                    \
      f ARGS;                                                                            \
      return;                                                                            \
    }                                                                                    \
    struct call c;                                                                       \
    uint64_t seq = begin_release(&c);                                                    \
    f ARGS;                                                                              \
    end_release(&c, seq, kind, (uintptr_t)p, A1, A2);                                    \
  }

DELETE_WRAPPER(_ZdlPv, K_DELETE, (void *p), (p), 0, 0)
DELETE_WRAPPER(_ZdlPvm, K_DELETE_SIZED, (void *p, size_t size), (p, size), size, 0)
DELETE_WRAPPER(_ZdlPvSt11align_val_t, K_DELETE_ALIGNED, (void *p, size_t align), (p, align), align, 0)
DELETE_WRAPPER(_ZdlPvmSt11align_val_t, K_DELETE_SIZED_ALIGNED, (void *p, size_t size, size_t align),
               (p, size, align), size, align)
DELETE_WRAPPER(_ZdlPvRKSt9nothrow_t, K_DELETE_NOTHROW, (void *p, const void *tag), (p, tag), 0, 0)
DELETE_WRAPPER(_ZdlPvSt11align_val_tRKSt9nothrow_t, K_DELETE_ALIGNED_NOTHROW,
               (void *p, size_t align, const void *tag), (p, align, tag), align, 0)
DELETE_WRAPPER(_ZdaPv, K_DELETE_ARRAY, (void *p), (p), 0, 0)
DELETE_WRAPPER(_ZdaPvm, K_DELETE_ARRAY_SIZED, (void *p, size_t size), (p, size), size, 0)
DELETE_WRAPPER(_ZdaPvSt11align_val_t, K_DELETE_ARRAY_ALIGNED, (void *p, size_t align), (p, align), align, 0)
DELETE_WRAPPER(_ZdaPvmSt11align_val_t, K_DELETE_ARRAY_SIZED_ALIGNED, (void *p, size_t size, size_t align),
               (p, size, align), size, align)
DELETE_WRAPPER(_ZdaPvRKSt9nothrow_t, K_DELETE_ARRAY_NOTHROW, (void *p, const void *tag), (p, tag), 0, 0)
DELETE_WRAPPER(_ZdaPvSt11align_val_tRKSt9nothrow_t, K_DELETE_ARRAY_ALIGNED_NOTHROW,
               (void *p, size_t align, const void *tag), (p, align, tag), align, 0)

/* --------------------------------------------------------------- threads
 * pthread_create is wrapped so the new thread logs its start (with its
 * creator) before anything else it does, numbered where its creator called
 * pthread_create: that is where it begins in the creator's sequence (the
 * creator may go on, even end, before the new thread runs). Its end is logged
 * by the key destructor. A creation that fails leaves its number unused (one
 * call reported missing). The start routine and its argument travel in a static table
 * (never the allocator's memory); when every entry is taken, the thread runs
 * unwrapped and its start is not logged (its replay thread then starts with
 * the replay). */
struct start_call {
  void *(*fn)(void *);
  void *arg;
  uint64_t seq;
  uint32_t creator;
  _Atomic int used;
};
static struct start_call g_starts[1024];

static void *traced_start(void *p) {
  struct start_call *s = p;
  void *(*fn)(void *) = s->fn;
  void *arg = s->arg;
  uint32_t creator = s->creator;
  uint64_t seq = s->seq;
  atomic_store_explicit(&s->used, 0, memory_order_release);
  if (tracing()) {
    T.guard = 1;
    put(K_THREAD_START, seq, now_tick(), creator, 0, 0, 0, 0, 0, 0);
    T.guard = 0;
  }
  return fn(arg);
}

static struct start_call *claim_start(void) {
  for (size_t i = 0; i < sizeof g_starts / sizeof *g_starts; i++) {
    int free_ = 0;
    if (!atomic_load_explicit(&g_starts[i].used, memory_order_relaxed) &&
        atomic_compare_exchange_strong(&g_starts[i].used, &free_, 1))
      return &g_starts[i];
  }
  return NULL;
}

static void *libc_symbol(_Atomic(void *) *slot, const char *name);

EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
  static _Atomic(void *) real;
  int (*f)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *) =
      (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))libc_symbol(&real, "pthread_create");
  if (!f) return ENOSYS;
  struct start_call *s = tracing() ? claim_start() : NULL;
  if (!s) return f(th, attr, fn, arg);
  s->fn = fn;
  s->arg = arg;
  s->creator = tid();
  s->seq = take_seq();
  int rc = f(th, attr, traced_start, s);
  if (rc) atomic_store_explicit(&s->used, 0, memory_order_release);
  return rc;
}

/* -------------------------------------------------------------- mappings
 * The program's own anonymous mappings (an allocator of its own on top of
 * mmap: Python's arenas, runtimes, caches) are memory a replay must map too.
 * Only calls through the PLT made outside an allocator call are recorded: the
 * guard keeps out what a preloaded allocator maps inside malloc, and glibc's
 * malloc, thread stacks and the loader map without the PLT. File mappings are
 * not recorded (their pages are the file's). */
typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);

static void *traced_mmap(_Atomic(void *) *real, const char *name, void *addr, size_t len, int prot, int flags,
                         int fd, off_t off) {
  mmap_fn f = (mmap_fn)libc_symbol(real, name);
  if (!f) return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
  if (!(flags & MAP_ANONYMOUS) || !recording())
    return f(addr, len, prot, flags, fd, off);
  struct call c;
  begin(&c);
  void *p = f(addr, len, prot, flags, fd, off);
  (void)end_alloc(&c, K_MMAP, len, (uint64_t)prot, (uint64_t)(unsigned)flags, p == MAP_FAILED ? NULL : p);
  return p;   /* MAP_FAILED on failure, recorded as a NULL result */
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  static _Atomic(void *) real;
  return traced_mmap(&real, "mmap", addr, len, prot, flags, fd, off);
}

EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  static _Atomic(void *) real;
  return traced_mmap(&real, "mmap64", addr, len, prot, flags, fd, off);
}

EXPORT int munmap(void *addr, size_t len) {
  static _Atomic(void *) real;
  int (*f)(void *, size_t) = (int (*)(void *, size_t))libc_symbol(&real, "munmap");
  if (!f) return (int)syscall(SYS_munmap, addr, len);
  if (!recording()) return f(addr, len);
  struct call c;
  uint64_t seq = begin_release(&c);
  int rc = f(addr, len);
  int err = errno;
  put(K_MUNMAP, seq, c.t0, (uintptr_t)addr, len, 0, (uint64_t)(unsigned)rc, 0, 0, 0);
  T.guard = 0;
  errno = err;
  return rc;
}

EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...) {
  static _Atomic(void *) real;
  void *(*f)(void *, size_t, size_t, int, ...) = (void *(*)(void *, size_t, size_t, int, ...))libc_symbol(&real,
                                                                                                      "mremap");
  void *want = NULL;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    want = va_arg(ap, void *);
    va_end(ap);
  }
  if (!f) {
    errno = ENOSYS;
    return MAP_FAILED;
  }
  if (!recording())
    return f(old, old_len, new_len, flags, want);
  struct call c;
  begin(&c);
  void *p = f(old, old_len, new_len, flags, want);
  int err = errno;
  put(K_MREMAP, take_seq(), now_tick(), (uintptr_t)old, old_len, new_len, p == MAP_FAILED ? 0 : (uintptr_t)p, 0,
      flags & 0xff, 0);
  T.guard = 0;
  errno = err;
  return p;
}

/* ------------------------------------------- leaving without exit handlers
 * _exit (shells exit with it) and exec replace the process without running
 * atexit handlers or destructors: write the buffers first. A failed exec
 * goes on tracing normally. Only calls through the PLT are seen: libc's own
 * exec from posix_spawn and system() happens in a fresh child that has
 * recorded nothing. */
static void *libc_symbol(_Atomic(void *) *slot, const char *name) {
  void *f = atomic_load_explicit(slot, memory_order_acquire);
  if (!f) {
    int guard = T.guard;
    T.guard = 1;
    f = next_symbol(name);
    T.guard = guard;
    atomic_store_explicit(slot, f, memory_order_release);
  }
  return f;
}

#define LEAVING_WRAPPER(sym)                                                  \
  EXPORT __attribute__((noreturn)) void sym(int status) {                     \
    static _Atomic(void *) real;                                              \
    void (*f)(int) = (void (*)(int))libc_symbol(&real, #sym);                 \
    if (atomic_load_explicit(&g_state, memory_order_relaxed) == ST_ENABLED) { \
      flush_buffers();                                                        \
      write_end();                                                            \
    }                                                                         \
    if (f) f(status);                                                         \
    syscall(SYS_exit_group, status);                                          \
    __builtin_unreachable();                                                  \
  }
LEAVING_WRAPPER(_exit)
LEAVING_WRAPPER(_Exit)

#define EXEC_WRAPPER(sym, PARAMS, ARGS)                                        \
  EXPORT int sym PARAMS {                                                      \
    static _Atomic(void *) real;                                               \
    int (*f) PARAMS = (int (*) PARAMS)libc_symbol(&real, #sym);                \
    if (!f) {                                                                  \
      errno = ENOSYS;                                                          \
      return -1;                                                               \
    }                                                                          \
    if (atomic_load_explicit(&g_state, memory_order_relaxed) == ST_ENABLED) { \
      flush_buffers();                                                        \
      write_end();                                                            \
    }                                                                          \
    return f ARGS;                                                             \
  }
EXEC_WRAPPER(execve, (const char *path, char *const argv[], char *const envp[]), (path, argv, envp))
EXEC_WRAPPER(execv, (const char *path, char *const argv[]), (path, argv))
EXEC_WRAPPER(execvp, (const char *file, char *const argv[]), (file, argv))
EXEC_WRAPPER(execvpe, (const char *file, char *const argv[], char *const envp[]), (file, argv, envp))
EXEC_WRAPPER(fexecve, (int fd, char *const argv[], char *const envp[]), (fd, argv, envp))

/* execl* build their argv inside libc and exec without the PLT: rebuild it
 * here, on the stack, and go through the wrappers above. */
#define COLLECT_ARGS(first, argv)                                              \
  va_list ap;                                                                  \
  size_t n_ = 1;                                                               \
  va_start(ap, first);                                                         \
  while (va_arg(ap, const char *)) n_++;                                       \
  va_end(ap);                                                                  \
  const char *argv[n_ + 1];                                                    \
  argv[0] = first;                                                             \
  va_start(ap, first);                                                         \
  for (size_t i_ = 1; i_ <= n_; i_++) argv[i_] = va_arg(ap, const char *);

EXPORT int execl(const char *path, const char *arg, ...) {
  COLLECT_ARGS(arg, argv)
  va_end(ap);
  return execv(path, (char *const *)argv);
}

EXPORT int execlp(const char *file, const char *arg, ...) {
  COLLECT_ARGS(arg, argv)
  va_end(ap);
  return execvp(file, (char *const *)argv);
}

EXPORT int execle(const char *path, const char *arg, ...) {
  COLLECT_ARGS(arg, argv)
  char *const *envp = va_arg(ap, char *const *);
  va_end(ap);
  return execve(path, (char *const *)argv, envp);
}
