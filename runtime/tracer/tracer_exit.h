/* tracer_exit.h -- leaving: the buffers written out and the end mark at process exit (the atexit
 * handler and the ELF destructor, in tracer.c), and before _exit and exec, which run neither.
 * Part of tracer.c's one translation unit (it includes the parts in order; see there). */
#ifndef SCN_TRACER_EXIT_H
#define SCN_TRACER_EXIT_H

static uint64_t g_faults_start;           /* minor page faults when tracing started (or at the fork) */

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
    uint64_t total = atomic_load_explicit(&g_direct, memory_order_relaxed);
    for (struct buffer *b = atomic_load(&g_buffers); b; b = b->next) total += made(b);
    h.seq = total;                       /* records made: those not in the log are missing */
    h.ns = (uint64_t)scn_clock_ns(CLOCK_MONOTONIC);
    h.tick = now_tick();
    h.tid = tid();
    scn_tl_end_set_faults(&h, g_faults_start, minor_faults(), own_pages() + shadow_resident(), atomic_load(&g_fresh), atomic_load(&g_written));
    scn_tl_end_set_file_kib(&h, file_resident_kib());   /* what a model maps to stand for the program's image */
    write_locked(&h, sizeof h);
  }
  if (mine) unlock_writes();
}

/* At process exit (the atexit handler): every buffer written out, and from now on every record as it is made. */
static void flush_all(void) {
  flush_buffers();
  write_end();
}

/* The process is about to end (the last destructor, _exit, exec): exit_group will stop the other threads wherever
 * they are. A call that took effect must be in the log or counted as made by then: from now on another thread's new
 * call waits before it takes effect (begin_record, for about a second at most; then it goes on, recorded after the
 * end mark); the calls in flight are waited for (their buffers' writing flags, g_inflight; a second at most each,
 * as a thread inside a call may wait for a lock this one holds); then the end mark goes last, with every record made.
 * This thread's own calls go on, recorded alone. */
#define QUIET_TICKS (1ull << 21)   /* about 1 ms at 2-3 GHz */
#define GRACE_TICKS (1ull << 26)   /* about 25 ms */
static void close_process(void) {
  flush_buffers();
  /* Threads still ending (a thread that CPython's join has returned for is still freeing its state) get the moment
   * they would have had during the rest of the exit: until no record has been written alone for QUIET_TICKS,
   * GRACE_TICKS at most. A process that never had a second thread has none. */
  uint64_t start = now_tick(), quiet = start, seen = atomic_load(&g_direct);
  int others = (atomic_load(&g_mode) & M_THREADED) != 0;
  while (others && now_tick() - start < GRACE_TICKS && now_tick() - quiet < QUIET_TICKS) {
    struct timespec pause = {0, 50000};
    nanosleep(&pause, NULL);
    uint64_t n = atomic_load(&g_direct);
    if (n != seen) {
      seen = n;
      quiet = now_tick();
    }
  }
  uint32_t me = tid(), none = 0;
  atomic_store(&g_close_tick, now_tick());
  if (!atomic_compare_exchange_strong(&g_closer, &none, me) && none != me) return;   /* another thread closes */
  T.guard++;
  start = now_tick();
  while (atomic_load_explicit(&g_inflight, memory_order_seq_cst) > (uint32_t)T.alone && now_tick() - start < WAIT_TICKS)
    sched_yield();
  write_end();
  T.guard--;
}

/* ------------------------------------------- leaving without exit handlers
 * _exit (shells exit with it) and exec replace the process without running
 * atexit handlers or destructors: write the buffers first. A failed exec
 * goes on tracing normally. Only calls through the PLT are seen: libc's own
 * exec from posix_spawn and system() happens in a fresh child that has
 * recorded nothing. After a failed exec, records are written one by one: the flush cannot hand the other
 * threads their buffers back. */

/* _exit and exec. A vfork child (another pid sharing this process's memory, whose other threads go on when it is
 * gone) writes the buffers out and the end mark, as before, but does not close the process. */
static pid_t g_pid;                       /* this process's (the constructor's, a fork's child's) */
static void before_leaving(void) {
  if ((pid_t)syscall(SYS_getpid) == g_pid)
    close_process();
  else
    flush_all();
}

#define LEAVING_WRAPPER(sym)                                                  \
  EXPORT __attribute__((noreturn)) void sym(int status) {                     \
    static _Atomic(void *) real;                                              \
    void (*f)(int) = (void (*)(int))libc_symbol(&real, #sym);                 \
    if (atomic_load_explicit(&g_state, memory_order_relaxed) == ST_ENABLED) \
      before_leaving();                                                       \
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
    if (atomic_load_explicit(&g_state, memory_order_relaxed) == ST_ENABLED) \
      before_leaving();                                                        \
    int rc = f ARGS;                                                           \
    atomic_store(&g_closer, 0);   /* a failed exec: the other threads go on */ \
    return rc;                                                                 \
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

#endif
