/* tracer_window.h -- marks of a window in the log (version 5): `scenc capture --server` tells the tracer when the
 * server is ready and when its client has ended, and the tracer writes a K_WINDOW mark for each, so that the
 * converter replays only the calls in between (and, untimed, the objects live when the window opened).
 *
 * Off unless SCENC_TRACE_CONTROL names a Unix socket that scenc listens on; then the launched process (the one
 * that owns the main log) starts one control thread, with the real pthread_create, that connects there and
 * waits. Each byte it reads ('o': the window opens, 'c': it closes) becomes a mark, and the byte is sent back
 * once the mark is written: scenc starts the client (or stops the server) only after that. Nothing is added to
 * a call's path: the control thread reads what the recording threads leave in their buffers anyway.
 *
 * A mark is a chunk of K_WINDOW records, one per thread buffer that holds a record: (which: 1 opens, 2 closes;
 * the tid of the buffer's last record; that record's clock); the chunk's own clock is the mark's time. A
 * thread's records up to that clock came before the mark, the later ones after it: a cut through every thread's
 * own order, exact whatever the threads' clocks (a thread that waited for its client takes clocks behind the
 * time until its next time mark). The readers merge by (epoch, clock), the epoch being the marks a record's
 * thread had passed (trace_read.h, trace/tracerlog.py). The control thread never records (its guard stays up),
 * so a one-thread program stays one thread to the tracer.
 * Part of tracer.c's one translation unit (it includes the parts in order; see there). */
#ifndef SCN_TRACER_WINDOW_H
#define SCN_TRACER_WINDOW_H

#include <sys/socket.h>
#include <sys/un.h>

#define WINDOW_BATCH 256   /* marks written per chunk */

static uint64_t g_window_seq;   /* the control thread's last mark clock: its chunks' clocks rise */

static void write_window(int which) {
  uint8_t chunk[SCN_TL_CHUNK_SIZE + WINDOW_BATCH * SCN_TL_MAX_RECORD + SCN_TL_TRAILER + SCN_TL_MAX_CENSUS];
  struct buffer *b = atomic_load(&g_buffers);
  int any = 0;
  do {
    uint32_t counts[64] = {0};
    struct scn_tl_chunk h;
    struct scn_tl_encoder enc;
    uint64_t seq = now_key();
    if (seq <= g_window_seq) seq = g_window_seq + 1;
    start_chunk(&h, &enc, seq);
    uint8_t *at = chunk + SCN_TL_CHUNK_SIZE;
    uint32_t n = 0;
    for (; b && n < WINDOW_BATCH; b = b->next) {
      uint32_t owner = __atomic_load_n(&b->head.tid, __ATOMIC_RELAXED);
      if (!owner || !made(b)) continue;   /* no record yet */
      struct scn_trace_record r = {.seq = seq + n, .kind = K_WINDOW,
                                   .arg = {(uint64_t)which, owner, __atomic_load_n(&b->enc.seq, __ATOMIC_RELAXED)}};
      at = scn_tl_encode(&enc, at, &r, 0, 0);
      n++;
    }
    if (!n && any) break;
    if (!n) {   /* no thread had recorded: a mark of no thread */
      struct scn_trace_record r = {.seq = seq, .kind = K_WINDOW, .arg = {(uint64_t)which, 0, 0}};
      at = scn_tl_encode(&enc, at, &r, 0, 0);
      n = 1;
    }
    counts[K_WINDOW] = n;
    g_window_seq = seq + n;
    write_bytes(chunk, seal_chunk(&h, &enc, chunk, (uint32_t)(at - (chunk + SCN_TL_CHUNK_SIZE)), counts));
    for (uint32_t i = 0; i < n; i++) count_direct();
    any = 1;
  } while (b);
}

static int g_control_fd = -1;

static void *control_thread(void *arg) {
  (void)arg;
  T.guard = 1;   /* for good: nothing this thread does is the program's */
  char c;
  for (;;) {
    ssize_t got = read(g_control_fd, &c, 1);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    if (c == 'o' || c == 'c') write_window(c == 'o' ? 1 : 2);
    while (write(g_control_fd, &c, 1) < 0 && errno == EINTR) {
    }
  }
  close(g_control_fd);
  g_control_fd = -1;
  return NULL;
}

/* At the constructor of the process that owns the main log, with SCENC_TRACE_CONTROL set. */
static void start_control(void) {
  const char *path = getenv("SCENC_TRACE_CONTROL");
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (!path || !*path) return;
  if (strlen(path) >= sizeof addr.sun_path) {
    note_stderr("SCENC_TRACE_CONTROL is too long, no window marks: ", path);
    return;
  }
  memcpy(addr.sun_path, path, strlen(path) + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
    note_stderr("cannot reach scenc at SCENC_TRACE_CONTROL, no window marks: ", path);
    close(fd);
    return;
  }
  g_control_fd = fd = fd_high(fd);
  static _Atomic(void *) real;
  int (*create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *) =
      (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))libc_symbol(&real, "pthread_create");
  pthread_attr_t attr;
  pthread_t th;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (!create || create(&th, &attr, control_thread, NULL) != 0) {
    close(fd);
    g_control_fd = -1;
  }
  pthread_attr_destroy(&attr);
}

#endif
