/* tracer_os.h -- what the tracer asks of the CPU and the kernel, and nothing of the tracer's state.
 * Part of tracer.c's one translation unit (it includes the parts in order; see there). None of it
 * allocates: the tracer never calls through the allocator it watches. */
#ifndef SCN_TRACER_OS_H
#define SCN_TRACER_OS_H

/* ------------------------------------------------------------------ clock
 * The time-stamp counter where there is one (a fraction of the cost of clock_gettime, but still 14 ns on
 * this project's VM: more than the rest of a record, so it is read once in 64 records), CLOCK_MONOTONIC
 * elsewhere. Each chunk carries CLOCK_MONOTONIC read at its first record and at its flush, so the reader
 * maps ticks to ns without a calibration here. */
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

/* A thread's CPU clock (user and system time, ns) by its tid: the clock id the kernel makes of a tid
 * (MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED), what pthread_getcpuclockid returns), so that the exit flush can read
 * the clock of the thread whose buffer it writes. A system call (the vDSO has no CPU clocks): about 0.3 us, read
 * twice a chunk (tens of thousands of calls). 0 when it cannot be read (the thread has ended). */
static uint64_t thread_cpu_ns(uint32_t tid) {
  struct timespec ts;
  int err = errno;
  clockid_t clock = (clockid_t)((~(uint32_t)tid << 3) | 6);   /* CPUCLOCK_PERTHREAD_MASK 4 | CPUCLOCK_SCHED 2 */
  long rc = syscall(SYS_clock_gettime, clock, &ts);
  errno = err;
  return rc ? 0 : (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------- stderr
 * A message built on the stack and written with write(2): stdio may allocate. */
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

/* ------------------------------------------------------------------ pages */
/* The tracer's own memory, from the system call itself (neither the mmap wrapper nor the allocator):
 * it is never the program's mapping. errno survives; NULL on failure. */
static void *os_pages(size_t bytes) {
  int err = errno;
  void *m = (void *)syscall(SYS_mmap, NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  errno = err;
  return m == MAP_FAILED ? NULL : m;
}

/* Which of the n pages from page number `first` are resident (bit i: page first + i); all of them
 * when the range is not mapped. */
static uint64_t resident(uintptr_t first, uint32_t n) {
  unsigned char vec[64];
  uint64_t bits = 0;
  if (mincore((void *)(first * 4096), (size_t)n * 4096, vec)) return ~0ull;   /* unmapped: nothing to learn */
  for (uint32_t i = 0; i < n; i++) bits |= (uint64_t)(vec[i] & 1) << i;
  return bits;
}

/* -------------------------------------------------------------- barriers
 * membarrier: every running thread of the process passes a full memory barrier before it returns. The
 * process-exit flush uses it so that a record needs no fence of its own (tracer_buffer.h, "Leaving").
 * 0 on success. */
#ifndef MEMBARRIER_CMD_PRIVATE_EXPEDITED
#define MEMBARRIER_CMD_PRIVATE_EXPEDITED (1 << 3)
#define MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED (1 << 4)
#endif
static int os_membarrier(int cmd) {
#ifdef SYS_membarrier
  int err = errno;
  int rc = (int)syscall(SYS_membarrier, cmd, 0, 0);
  errno = err;
  return rc;
#else
  (void)cmd;
  return -1;
#endif
}

/* The process's file-backed resident memory in KiB (RssFile of /proc/self/status: its code, libraries and files
 * mapped and read; not its shared memory), 0 if it cannot tell (a kernel before 4.5, no /proc). Read with system
 * calls into a buffer on the stack, the line found as the bytes go by: no allocation, no stdio. */
static uint64_t file_resident_kib(void) {
  static const char key[] = "\nRssFile:";
  int err = errno;
  int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/status", O_RDONLY | O_CLOEXEC);
  uint64_t kib = 0;
  if (fd >= 0) {
    char buf[512];
    size_t matched = 0;          /* bytes of key matched so far; past it, digits are read */
    int digits = 0, done = 0;
    ssize_t n;
    while (!done && (n = (ssize_t)syscall(SYS_read, fd, buf, sizeof buf)) > 0)
      for (ssize_t i = 0; i < n && !done; i++) {
        char c = buf[i];
        if (matched < sizeof key - 1) matched = c == key[matched] ? matched + 1 : c == key[0];
        else if (c >= '0' && c <= '9') kib = kib * 10 + (uint64_t)(c - '0'), digits = 1;
        else if (digits || c == '\n') done = 1;   /* the number ends (or the line had none) */
      }
    syscall(SYS_close, fd);
  }
  errno = err;
  return kib;
}

/* Minor page faults of the process so far (a system call: no allocation); 0 if it cannot tell. */
static uint64_t minor_faults(void) {
  struct rusage ru;
  return getrusage(RUSAGE_SELF, &ru) ? 0 : (uint64_t)ru.ru_minflt;
}

#endif
