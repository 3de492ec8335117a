/* tracer_file.h -- the log file this process writes: SCENC_TRACE_OUT for the launched process, a
 * side log for a forked child or for a program another traced process exec'ed ('Processes' in
 * tracer.c), reopened by name when the program closes or replaces its descriptor. Every write is
 * whole (a chunk, or the end mark), under one spin lock, on an O_APPEND descriptor. The log's head
 * (header and counters, SCN_TL_AREA bytes) is also mapped shared: each buffer stores in its own line
 * how many records it made, so that the count survives a process killed before it wrote them.
 * Part of tracer.c's one translation unit (it includes the parts in order; see there). */
#ifndef SCN_TRACER_FILE_H
#define SCN_TRACER_FILE_H

static _Atomic uint32_t g_write_lock;      /* tid of the holder */
static int g_fd = -1;                      /* guarded by g_write_lock, like everything below */
static int g_write_failed;
static dev_t g_dev;
static ino_t g_ino;
static char g_path[4096];                 /* SCENC_TRACE_OUT */
static char g_name[4096 + 48];            /* the log this process writes */
static _Atomic(uint8_t *) g_counters;     /* the log's head, mapped shared (tracelog.h, "Counters"); NULL: none */
static _Atomic uint32_t g_next_line = 1;  /* the next counters line a buffer takes (0 counts records written alone) */
static _Atomic uint64_t g_direct;         /* records written alone (a chunk of one) */

static int lock_writes(void) {
  return lock_tid(&g_write_lock);
}

static void unlock_writes(void) {
  unlock_tid(&g_write_lock);
}

static _Atomic uint64_t *counters_line(uint32_t line) {
  uint8_t *area = atomic_load_explicit(&g_counters, memory_order_acquire);
  return area ? (_Atomic uint64_t *)(void *)(area + SCN_TL_LINE * (1 + (size_t)line)) : NULL;
}

/* A record written alone: counted in line 0. */
static void count_direct(void) {
  uint64_t n = atomic_fetch_add_explicit(&g_direct, 1, memory_order_relaxed) + 1;
  _Atomic uint64_t *line = counters_line(0);
  if (line) atomic_store_explicit(line, n, memory_order_relaxed);
}

/* The header, then the counters: zeros up to SCN_TL_AREA (a hole), mapped shared. */
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
  h.reserved[0] = SCN_TL_AREA;
  (void)!write(fd, &h, sizeof h);
  if (ftruncate(fd, SCN_TL_AREA) != 0) {
    static const uint8_t zeros[SCN_TL_AREA - sizeof h];
    (void)!write(fd, zeros, sizeof zeros);
  }
  int err = errno;
  void *area = (void *)syscall(SYS_mmap, NULL, SCN_TL_AREA, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  errno = err;
  if (area == MAP_FAILED) return;   /* the counts stay in the buffers: the end mark still has their total */
  atomic_store_explicit(&g_counters, (uint8_t *)area, memory_order_release);
  _Atomic uint64_t *line = counters_line(0);
  atomic_store_explicit(line, atomic_load_explicit(&g_direct, memory_order_relaxed), memory_order_relaxed);
}

/* fd moved far from the small numbers programs dup2 onto and close in loops (kept where it is if it cannot be). */
static int fd_high(int fd) {
  int high = fcntl(fd, F_DUPFD_CLOEXEC, 900);
  if (high < 0) return fd;
  close(fd);
  return high;
}

/* Creates a log (O_EXCL: never another process's) and writes its header.
 * Called with the write lock held; -1 with errno on failure. */
static int create_log(const char *name) {
  int fd = open(name, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);   /* RDWR: the counters' mapping */
  if (fd < 0) return -1;
  fd = fd_high(fd);
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

#endif
