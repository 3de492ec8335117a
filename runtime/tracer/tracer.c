/* tracer.c -- the LD_PRELOAD allocator tracer of `scenc capture --method preload`.
 *
 *   SCENC_TRACE_OUT=app.trace LD_PRELOAD=libscntrace.so[:libjemalloc.so] ./app
 *
 * Interposes the C and C++ allocation interface, forwards every call to the
 * next definition (glibc, or an allocator preloaded after this library) and
 * logs each call the program makes -- from its own code, from libc (strdup,
 * fopen, qsort ...), through pointers to malloc/free -- as one fixed-size
 * binary record. trace/capture/preload.py builds it, runs programs under it and reads
 * the log back as AllocEvents.
 *
 * Log format (version 3, runtime/tracer/tracelog.h says it byte by byte): a 64-byte header, then chunks,
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
 *
 * Layout: one translation unit, so that every helper stays static and put() inlines into each
 * wrapper; trace/native.py compiles this file alone and names every part in its headers=
 * (an edit to any of them rebuilds the tracer). This file holds the state all parts share and the
 * process's lifecycle (constructor, fork, destructor); each part uses only what comes before it:
 *   tracer_os.h      the tick counter, messages to stderr, the tracer's own pages, mincore, faults
 *   tracer_next.h    the next definitions (dlsym RTLD_NEXT) and the bootstrap arena
 *   tracer_file.h    the log files: the main one, side logs, reopening, writes under one lock
 *   tracer_buffer.h  each thread's buffer of encoded records: chunks, census, flushes
 *   tracer_sample.h  the inner pages of sampled blocks (for convert --touch auto)
 *   tracer_record.h  sequence numbers, the guard, a call's record (put)
 *   tracer_alloc.h   the C allocation interface
 *   tracer_cxx.h     the C++ allocation interface
 *   tracer_thread.h  thread starts (pthread_create) and exits (the key destructor)
 *   tracer_mmap.h    the program's own anonymous mappings
 *   tracer_exit.h    the end mark at exit; _exit and exec
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
#include "../clock.h"
#include "tracelog.h"

#define EXPORT __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ------------------------------------------------------------ shared state
 * What every part uses: the thread's state, the tracer's, the thread id and the spin locks. */
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

#include "tracer_os.h"
#include "tracer_next.h"
#include "tracer_file.h"
#include "tracer_buffer.h"
#include "tracer_sample.h"
#include "tracer_record.h"
#include "tracer_alloc.h"
#include "tracer_cxx.h"
#include "tracer_thread.h"
#include "tracer_mmap.h"
#include "tracer_exit.h"

/* -------------------------------------------------------------- lifecycle */
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
