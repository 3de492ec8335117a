/* tracer.c -- the LD_PRELOAD allocator tracer of `scenc capture --method preload`.
 *
 *   SCENC_TRACE_OUT=app.trace LD_PRELOAD=libscntrace.so[:libjemalloc.so] ./app
 *
 * Interposes the C and C++ allocation interface, forwards every call to the
 * next definition (glibc, or an allocator preloaded after this library) and
 * logs each call the program makes -- from its own code, from libc (strdup,
 * fopen, qsort ...), through pointers to malloc/free -- as one record.
 * trace/capture/preload.py builds it, runs programs under it and reads
 * the log back as AllocEvents.
 *
 * Log format (version 6: version 4, window marks (tracer_window.h) and the threads' CPU clocks in time marks;
 * runtime/tracer/tracelog.h says it byte by byte): a 64-byte header and the counters (8 KiB), then chunks, each
 * one thread's records in order: a 72-byte chunk header (thread, first and last clock, two clock readings), the
 * records (a kind byte, then deltas and sizes as varints: about 3-5 bytes a call) and a census (records by kind,
 * so a summary reads no record).
 *
 * The hot path is a few plain stores: a record into the thread's own buffer, its census, its counter.
 * No atomic read-modify-write, no lock and no clock reading per call (a version 3 call took a number from
 * one global counter, locked its buffer and read the time-stamp counter: about 20 ns of a 30 ns cost).
 *
 * Order. Each thread numbers its records with its own clock (T.key), a Lamport clock: one more than its
 * previous record, and more than every event the call depends on, which the tracer sees:
 *   - an event on a block (an allocation returning it, a free or realloc releasing it) comes after the
 *     previous event on that block's address, in whichever thread: the shadow (tracer_order.h) keeps the
 *     last clock of every 16-byte granule an event touched. A release writes its clock there before the real
 *     call (so whoever the allocator hands the address to next reads it), an allocation after it returns
 *     (so whichever thread the program gives the block to reads it when it frees it). Events on one address
 *     are ordered by the allocator and the program themselves: no two write the same entry at once, and
 *     plain loads and stores are exact. Only while the process has more than one thread: before, a thread's
 *     own order is the order;
 *   - a new thread starts after its creator's pthread_create, a joined thread's end comes before what its
 *     joiner does next, the program's mappings are ordered among themselves (through g_clock, raised by
 *     compare-and-swap: a system call's cost, not a call's);
 *   - each thread publishes its clock in g_clock when it crosses a multiple of 64, and a thread more than 64
 *     behind the published clock catches up: the merged order stays close to the order in time, which the
 *     causal order alone would not (a thread that waits and then allocates would sort first).
 * Merging the threads by (clock, thread) gives an order in which every free follows the allocation it frees
 * and every allocation follows the release of its address: the exact replay's dependencies. A realloc that
 * moves its block takes two clocks (the release of the old block, the acquisition of the new one), records
 * the second and the distance to the first (`span`), and the reader uses that to put it before an
 * allocation another thread made of the old block in between.
 * Time: a record carries the time-stamp counter only when its clock crosses a multiple of 64 (a time mark);
 * the reader gives the others the last mark's time plus the chunk's mean time per record since.
 *
 * Buffers: each thread encodes into its own 128 KiB buffer (mmap'ed, so the tracer
 * never allocates through the allocator it watches; about 40000 calls) and writes it
 * whole as one chunk with write(2) under a spin lock on an O_APPEND descriptor: chunks
 * of different threads never interleave mid-chunk. Buffers are flushed when full, at
 * thread exit (pthread key destructor), and at process exit (atexit handler and
 * ELF destructor), _exit and exec. The process-exit flush writes the other threads' buffers too: it raises
 * M_EXITING, makes every thread pass a memory barrier (membarrier), then waits until no thread is inside a
 * call (each buffer's `writing` flag, a plain store before the real call and one after its record) and writes
 * them; from then on every record is written as soon as it is made (a chunk of one), so frees made by later
 * destructors are kept. Last (the ELF destructor, _exit, exec: exit_group or exec ends the other threads wherever
 * they are next), the process closes: other threads' new calls wait before they take effect, the calls in flight
 * are waited for, so that a call that took effect is in the log or counted as made (tracer_exit.h,
 * close_process). Leaving, the process writes an end mark (a chunk of type END, seq = records made so far, with the minor
 * page faults it took since tracing started, the pages of the tracer's own buffers and what a sample of blocks'
 * inner pages became between malloc and free: `convert --touch auto` chooses with them). A program killed by a
 * signal loses the records still in its buffers and leaves no end mark; the counters at the head of the log
 * (each buffer's records made, stored as they are made into a shared mapping of the file, which survives the
 * process) tell the reader how many calls are missing.
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
 *   tracer_os.h      the tick counter, messages to stderr, the tracer's own pages, mincore, faults, membarrier
 *   tracer_next.h    the next definitions (dlsym RTLD_NEXT) and the bootstrap arena
 *   tracer_file.h    the log files: the main one, side logs, reopening, writes under one lock, the counters
 *   tracer_order.h   the threads' clocks: g_clock, the shadow of blocks' last clocks
 *   tracer_buffer.h  each thread's buffer of encoded records: chunks, census, flushes, leaving
 *   tracer_sample.h  the inner pages of sampled blocks (for convert --touch auto)
 *   tracer_record.h  the guard, a call's record (put)
 *   tracer_alloc.h   the C allocation interface
 *   tracer_cxx.h     the C++ allocation interface
 *   tracer_thread.h  thread starts (pthread_create), ends (the key destructor) and joins
 *   tracer_mmap.h    the program's own anonymous mappings
 *   tracer_exit.h    the end mark at exit; _exit and exec
 *   tracer_window.h  window marks on scenc's word (SCENC_TRACE_CONTROL: a control thread, off by default)
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
  int started;        /* made by the pthread_create wrapper: its clock starts after its creation */
  uint32_t to_skip;   /* blocks with inner pages to pass before the next sample */
  uint32_t sampled;   /* blocks looked at with mincore */
  uint32_t tid;
  uint64_t key;       /* the thread's clock: its last event's (tracer.c's "Order") */
  uint64_t step;      /* what the clock advances a record (0: not started) */
  uint64_t mark_time; /* the time (now_key) of its last time mark */
  uint64_t cpu_time;  /* the time (now_key) it last read its CPU clock (tracer_record.h, CPU_EVERY_KEYS) */
  uint32_t tag;       /* its tag in the shadow's entries (tracer_order.h) */
  int alone;          /* this call is recorded alone (a chunk of one) and counted in g_inflight */
  struct buffer *buf; /* its own buffer, once it has one */
  struct buffer *rec; /* what the call in progress records into: buf, or g_alone for a call recorded alone */
};

static __thread struct tstate T __attribute__((tls_model("initial-exec")));

enum { ST_STARTUP, ST_ENABLED, ST_DISABLED };
static _Atomic int g_state = ST_STARTUP;   /* STARTUP: constructor not run yet; calls are buffered */

/* What every call reads as it begins (one load, tracer_record.h's begin): M_EXITING (the process is leaving: write
 * each record at once), M_FENCED (no membarrier: a call fences itself), M_THREADED (more than one thread: clocks
 * follow blocks), M_SLOW (the real functions are not known yet, or tracing is off). */
enum { M_EXITING = 1, M_FENCED = 2, M_THREADED = 4, M_SLOW = 8 };
static _Atomic uint32_t g_mode = M_SLOW;

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
#include "tracer_order.h"
#include "tracer_buffer.h"
#include "tracer_sample.h"
#include "tracer_record.h"
#include "tracer_alloc.h"
#include "tracer_cxx.h"
#include "tracer_thread.h"
#include "tracer_mmap.h"
#include "tracer_exit.h"
#include "tracer_window.h"

/* -------------------------------------------------------------- lifecycle */
static void at_fork_child(void) {
  /* Only this thread survives; the other buffers may be held by threads that no longer exist, and every buffered
   * record is the parent's, which it writes itself. The log's counters are the parent's: this process counts
   * into its buffers until its own log (created on its first write) has counters; no thread's clock but its own. */
  atomic_store(&g_write_lock, 0);
  atomic_store(&g_counters, NULL);
  atomic_store(&g_next_line, 1);
  atomic_store(&g_direct, 0);
  for (struct buffer *b = atomic_load(&g_buffers); b; b = b->next) {
    atomic_store(&b->writing, 0);
    atomic_store(&b->given, 0);
    b->used = b->limit = 0;
    b->mark_made = 0;
    memset(b->counts, 0, sizeof b->counts);
    atomic_store(&b->own, 0);
    b->counter = &b->own;
    b->lined = 0;
    atomic_store(&b->owned, b == T.buf);
  }
  T.rec = T.buf;
  T.alone = 0;
  atomic_store(&g_inflight, 0);
  atomic_store(&g_closer, 0);
  T.tid = 0;
  T.step = 0;                        /* its next record starts its clock: the first thread's */
  atomic_store(&g_first_tid, 0);
  atomic_store(&g_clock, 0);
  atomic_store(&g_exact, 0);
  atomic_store(&g_solo_clock, 0);
  atomic_store(&g_mode, atomic_load(&g_mode) & (M_FENCED | M_SLOW));
  shadow_forget();
  g_faults_start = minor_faults();   /* a child's count starts at the fork */
  g_pid = (pid_t)syscall(SYS_getpid);
  if (g_fd >= 0) close(g_fd);
  g_fd = -1;
  if (g_control_fd >= 0) close(g_control_fd);   /* the parent's control thread reads it; this process has none */
  g_control_fd = -1;
  g_name[0] = 0;
  g_write_failed = 0;
}

__attribute__((constructor)) static void tracer_init(void) {
  T.guard++;
  g_key_base = now_key() - (1u << 20);
  g_pid = (pid_t)syscall(SYS_getpid);
  g_faults_start = minor_faults();
  resolve();
  const char *path = getenv("SCENC_TRACE_OUT");
  if (!path || !*path || strlen(path) >= sizeof g_path) {
    if (path && *path) note_stderr("SCENC_TRACE_OUT is too long, not tracing: ", path);
    atomic_store(&g_state, ST_DISABLED);
    atomic_fetch_or(&g_mode, M_SLOW);
    T.guard--;
    return;
  }
  memcpy(g_path, path, strlen(path) + 1);
  if (os_membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0)
    atomic_fetch_or(&g_mode, M_FENCED);   /* no membarrier: each record fences itself (tracer_buffer.h) */
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
  if (g_fd >= 0) start_control();   /* the launched process only: it owns the main log */
  T.guard--;
}

/* The last destructor: what runs after it (libc's stdio cleanup) is short, then exit_group ends every thread. */
__attribute__((destructor)) static void tracer_fini(void) {
  close_process();
}
