/* Reading the preload tracer's log (runtime/tracer/tracer.c writes it; the format is
 * in docs/capture.md, "The tracer log", and runtime/tracer/tracelog.h) for the converter
 * (runtime/tools/convert.c).
 *
 * Two passes, as trace/tracerlog.py does: the index pass reads the file once
 * and keeps, per thread, the runs of its records (one per flushed buffer, about
 * 1/4000 of the log); the merge pass reads each thread's runs back through a
 * small buffer and merges the threads by sequence number with a heap. Memory:
 * O(threads x TR_BLOCK + runs), never O(log).
 *
 * Versions 1 and 2 store 64-byte records as they are: the index pass checks
 * them here (tr_index_v2) and a run is a range of records. Versions 3 and 4 store
 * chunks of encoded records: the index pass is runtime/tools/tracelog.c's counting
 * pass (tr_index_v3) and a run is a chunk, decoded by runtime/tracer/tracelog.h's
 * decoder when the merge reaches it (tr_fill_v3): one decoder for every reader.
 * Version 4 numbers records with per-thread clocks: equal numbers in two threads
 * are concurrent calls (the merge takes the thread that came first in the file), an
 * event's line is its place in the merged order, and the missing calls are the
 * records made (the log's counters, the end mark) that the log does not hold.
 *
 * Errors are the reader's own messages, the same sentences as the Python
 * reader's, with the 1-based record number (the header is record 1). */
#ifndef SCN_TRACE_READ_H
#define SCN_TRACE_READ_H

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tracelog.c"           /* version 3: the counting pass (scn_tl_scan) and tracelog.h's decoder */

#define TR_RECORD 64
#define TR_BLOCK 512            /* records per thread buffer: 32 KiB */
#define TR_KIND_END K_END
#define TR_F_THREW F_THREW

/* One record, as version 1 and 2 store it and as a version 3 chunk decodes. */
typedef struct scn_trace_record tr_rec;

/* What the converter consumes: an AllocEvent (trace/events.py) without times;
 * None is 0 (the converter reads `x or 0` everywhere). */
enum { EV_MALLOC, EV_OPERATOR_NEW, EV_OPERATOR_NEW_ARRAY, EV_CALLOC, EV_REALLOC, EV_REALLOCARRAY, EV_FREE,
       EV_OPERATOR_DELETE, EV_OPERATOR_DELETE_ARRAY, EV_ALIGNED_ALLOC, EV_MEMALIGN, EV_POSIX_MEMALIGN, EV_VALLOC,
       EV_PVALLOC, EV_CALLS,                      /* the allocator calls: trace/replay.py's REPLAY_KIND order */
       EV_THREAD_START = EV_CALLS, EV_THREAD_EXIT, EV_MMAP, EV_MUNMAP, EV_MREMAP,
       EV_WINDOW,                                 /* not a record: a window mark's place (size 1 opens, 2 closes) */
       EV_MPROTECT,                               /* record 46, after the window mark's 45 */
       EV_KINDS };

/* The events' names, as trace/events.py spells them (by EV_*). */
static const char *const kind_name[EV_KINDS] = {
  "malloc", "operator_new", "operator_new_array", "calloc", "realloc", "reallocarray", "free", "operator_delete",
  "operator_delete_array", "aligned_alloc", "memalign", "posix_memalign", "valloc", "pvalloc",
  "thread_start", "thread_exit", "mmap", "munmap", "mremap", "window", "mprotect" };

#define PAGE 4096ull
#define PROT_WRITE_FLAG 2     /* PROT_WRITE in a mapping record's prot */

/* n bytes in whole pages */
static inline uint64_t pages(uint64_t n) { return (n + PAGE - 1) / PAGE * PAGE; }
/* Python's int.bit_length */
static inline int bit_length(uint64_t x) { return x ? 64 - __builtin_clzll(x) : 0; }
/* A 64-bit key's hash for the tools' open-addressing tables */
static inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33;
  return x;
}

typedef struct {
  uint64_t line;          /* seq + 1, or the ltrace log's line */
  uint64_t size, nmemb, align, old, res;
  uint32_t tid;
  uint8_t kind, failed;
  uint16_t pad;
} tr_event;               /* also the packed form trace/replay.py streams: "<QQQQQQIBB2x" */
_Static_assert(sizeof(tr_event) == 56, "the stream's event is 56 bytes");

/* Record kind codes (runtime/tracer/tracer.c) -> event kind and argument layout. */
enum { L_SIZE, L_NMEMB_SIZE, L_OLD_SIZE, L_OLD_NMEMB_SIZE, L_OLD, L_ALIGN_SIZE, L_SIZE_ALIGN, L_OLD_ALIGN,
       L_OLD_SIZE_ALIGN };
#define TR_CODES 31
#define TR_FIRST_EXTRA 40
#define TR_LAST_EXTRA 46      /* but 45, a window mark (K_WINDOW): not an event of its own */
static const struct { const char *function; uint8_t kind, layout; } tr_codes[TR_CODES] = {
  [1] = {"malloc", EV_MALLOC, L_SIZE}, [2] = {"calloc", EV_CALLOC, L_NMEMB_SIZE},
  [3] = {"realloc", EV_REALLOC, L_OLD_SIZE}, [4] = {"reallocarray", EV_REALLOCARRAY, L_OLD_NMEMB_SIZE},
  [5] = {"free", EV_FREE, L_OLD}, [6] = {"posix_memalign", EV_POSIX_MEMALIGN, L_ALIGN_SIZE},
  [7] = {"aligned_alloc", EV_ALIGNED_ALLOC, L_ALIGN_SIZE}, [8] = {"memalign", EV_MEMALIGN, L_ALIGN_SIZE},
  [9] = {"valloc", EV_VALLOC, L_SIZE}, [10] = {"pvalloc", EV_PVALLOC, L_SIZE},
  [11] = {"_Znwm", EV_OPERATOR_NEW, L_SIZE}, [12] = {"_ZnwmRKSt9nothrow_t", EV_OPERATOR_NEW, L_SIZE},
  [13] = {"_ZnwmSt11align_val_t", EV_OPERATOR_NEW, L_SIZE_ALIGN},
  [14] = {"_ZnwmSt11align_val_tRKSt9nothrow_t", EV_OPERATOR_NEW, L_SIZE_ALIGN},
  [15] = {"_Znam", EV_OPERATOR_NEW_ARRAY, L_SIZE}, [16] = {"_ZnamRKSt9nothrow_t", EV_OPERATOR_NEW_ARRAY, L_SIZE},
  [17] = {"_ZnamSt11align_val_t", EV_OPERATOR_NEW_ARRAY, L_SIZE_ALIGN},
  [18] = {"_ZnamSt11align_val_tRKSt9nothrow_t", EV_OPERATOR_NEW_ARRAY, L_SIZE_ALIGN},
  [19] = {"_ZdlPv", EV_OPERATOR_DELETE, L_OLD}, [20] = {"_ZdlPvm", EV_OPERATOR_DELETE, L_OLD_SIZE},
  [21] = {"_ZdlPvSt11align_val_t", EV_OPERATOR_DELETE, L_OLD_ALIGN},
  [22] = {"_ZdlPvmSt11align_val_t", EV_OPERATOR_DELETE, L_OLD_SIZE_ALIGN},
  [23] = {"_ZdlPvRKSt9nothrow_t", EV_OPERATOR_DELETE, L_OLD},
  [24] = {"_ZdlPvSt11align_val_tRKSt9nothrow_t", EV_OPERATOR_DELETE, L_OLD_ALIGN},
  [25] = {"_ZdaPv", EV_OPERATOR_DELETE_ARRAY, L_OLD}, [26] = {"_ZdaPvm", EV_OPERATOR_DELETE_ARRAY, L_OLD_SIZE},
  [27] = {"_ZdaPvSt11align_val_t", EV_OPERATOR_DELETE_ARRAY, L_OLD_ALIGN},
  [28] = {"_ZdaPvmSt11align_val_t", EV_OPERATOR_DELETE_ARRAY, L_OLD_SIZE_ALIGN},
  [29] = {"_ZdaPvRKSt9nothrow_t", EV_OPERATOR_DELETE_ARRAY, L_OLD},
  [30] = {"_ZdaPvSt11align_val_tRKSt9nothrow_t", EV_OPERATOR_DELETE_ARRAY, L_OLD_ALIGN},
};

static int tr_is_call(unsigned code) { return code > 0 && code < TR_CODES; }
static int tr_is_extra(unsigned code) { return code >= TR_FIRST_EXTRA && code <= TR_LAST_EXTRA && code != 45; }
static int tr_is_release(unsigned code) {
  if (!tr_is_call(code)) return 0;
  unsigned k = tr_codes[code].kind;
  return k == EV_FREE || k == EV_OPERATOR_DELETE || k == EV_OPERATOR_DELETE_ARRAY;
}
static int tr_is_resize(unsigned code) { return code == 3 || code == 4; }

/* --------------------------------------------------------------- errors */
typedef struct {
  uint64_t record;        /* 1-based, the header being record 1 */
  char message[512];
} tr_error;

static int tr_fail(tr_error *e, uint64_t record, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->message, sizeof e->message, fmt, ap);
  va_end(ap);
  e->record = record;
  return -1;
}

/* --------------------------------------------------------------- growable arrays */
/* Every tool ends so when memory runs out (exit 3: scenc says the tool failed, not the log); named as run. */
static void tr_oom(void) {
  fprintf(stderr, "%s: out of memory\n", program_invocation_short_name);
  exit(3);
}

/* calloc that never returns NULL (n elements of `size`, one at least) */
static inline void *tr_xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p) tr_oom();
  return p;
}

static void *tr_grow(void *p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return p;
  size_t n = *cap ? *cap : 16;
  while (n < need) n *= 2;
  p = realloc(p, n * elem);
  if (!p) tr_oom();
  *cap = n;
  return p;
}

/* --------------------------------------------------------------- the index pass */
typedef struct {              /* version 1, 2: records [start, start+count) of the file; 3: the chunk at byte start */
  uint64_t start, count;
  uint32_t bytes;             /* version 3: its payload bytes */
} tr_run;

typedef struct {
  uint32_t tid;
  uint64_t last_seq;
  uint64_t cut[3];            /* version 5: its last clock before window mark 1 (opens), 2 (closes) */
  uint8_t named[3];           /* the mark named it (else its records are placed by the mark's time) */
  tr_run *runs;
  size_t nruns, cap;
  /* merge cursor */
  size_t run;
  uint64_t left, at;          /* records left in the current run, the next one's index */
  uint8_t *chunk;             /* version 3: the current chunk's bytes, and the decoder's cursor in them */
  size_t chunk_cap;
  struct scn_tl_cursor cur;
  tr_rec *buf;
  uint64_t *cpu;              /* each record's CPU clock in buf (version 6; 0: none) */
  uint32_t n, pos;
  const tr_rec *head;         /* NULL: no more records */
} tr_thread;

typedef struct {              /* what the index pass found (trace/tracerlog.py's PreloadLogInfo) */
  uint32_t version, pid, ppid;
  uint64_t size, start_realtime_ns, records, moved, thread_records, chunks, missing, reordered, first_ns, last_ns;
  int64_t last_seq;
  int ended, have_ns;
  uint64_t whole;             /* version 1, 2: whole records in the file */
  uint64_t cut;               /* version 1, 2: bytes of a record cut short at the end (0: none) */
  int64_t stopped_at;         /* byte where a cut or damaged log stops being read (-1: it does not) */
  char stop_reason[128];
  int faulted;                /* the end mark held the process's minor page faults (tracers since issue 15t) */
  uint64_t page_faults, tracer_pages;   /* from tracing start to the end mark; of them, the tracer's buffers */
  uint64_t fresh_pages, written_pages;  /* sampled blocks' inner pages not resident at malloc; of them, at free */
  uint64_t chunks_at;         /* version 3, 4: the first chunk's offset */
  uint64_t made;              /* version 4: records made (the counters, the end mark); 0 when unknown */
  uint64_t file_kib;          /* the process's file-backed resident KiB at its end mark; 0 when unknown */
} tr_info;

typedef struct {
  int fd;
  const char *path;
  tr_info info;
  tr_thread *threads;
  size_t nthreads, cap;
  uint32_t *slot_of;          /* open addressing: tid -> index + 1 */
  size_t slot_cap;
  int extra;                  /* yield the records that are not allocator calls (thread, mapping records) */
  uint64_t merged;            /* records merged so far: version 4's lines */
  /* version 5: window marks (runtime/tracer/tracer_window.h). marks: bit w set when mark w (1 opens, 2 closes)
   * was found, at clock mark_time[w]; windowed: records are merged by (epoch, clock), the epoch being the marks
   * their thread had passed, and the merge yields EV_WINDOW between the epochs; phase: marks yielded so far */
  int marks, windowed, phase;
  uint64_t mark_time[3];
  const tr_rec **current;     /* when set, the record of the event being yielded (its clock, its code) */
  uint64_t *current_cpu;      /* when set, its CPU clock (version 6: tr_cpu_ns; 0 before) */
} tr_log;

static uint32_t tr_hash32(uint32_t x) { return (x * 2654435769u); }

static tr_thread *tr_thread_of(tr_log *log, uint32_t tid, int *fresh) {
  if (log->nthreads * 2 >= log->slot_cap) {       /* rehash at half full */
    size_t cap = log->slot_cap ? log->slot_cap * 2 : 64;
    uint32_t *s = tr_xcalloc(cap, sizeof *s);
    for (size_t i = 0; i < log->nthreads; i++) {
      size_t h = tr_hash32(log->threads[i].tid) & (cap - 1);
      while (s[h]) h = (h + 1) & (cap - 1);
      s[h] = (uint32_t)i + 1;
    }
    free(log->slot_of);
    log->slot_of = s;
    log->slot_cap = cap;
  }
  size_t h = tr_hash32(tid) & (log->slot_cap - 1);
  for (; log->slot_of[h]; h = (h + 1) & (log->slot_cap - 1))
    if (log->threads[log->slot_of[h] - 1].tid == tid) { *fresh = 0; return &log->threads[log->slot_of[h] - 1]; }
  log->threads = tr_grow(log->threads, &log->cap, log->nthreads + 1, sizeof *log->threads);
  tr_thread *t = &log->threads[log->nthreads++];
  memset(t, 0, sizeof *t);
  t->tid = tid;
  log->slot_of[h] = (uint32_t)log->nthreads;
  *fresh = 1;
  return t;
}

static tr_thread *tr_thread_find(tr_log *log, uint32_t tid) {
  if (!log->slot_cap) return NULL;
  for (size_t h = tr_hash32(tid) & (log->slot_cap - 1); log->slot_of[h]; h = (h + 1) & (log->slot_cap - 1))
    if (log->threads[log->slot_of[h] - 1].tid == tid) return &log->threads[log->slot_of[h] - 1];
  return NULL;
}

typedef struct { int64_t max_seq; uint64_t end_total; tr_thread *prev; } tr_scan;

/* One record of the index pass: checks it the way trace/tracerlog.py does and extends its thread's run. */
static int tr_index_record(tr_log *log, tr_scan *s, const tr_rec *r, uint64_t index, tr_error *e) {
  tr_info *info = &log->info;
  uint64_t n = index + 2, byte = TR_RECORD + index * TR_RECORD;
  if (r->kind == TR_KIND_END) {
    info->ended = 1;
    if (r->seq > s->end_total) s->end_total = r->seq;
    s->prev = NULL;
    return 0;
  }
  int fresh;
  if (!r->tid)
    return tr_fail(e, n, "record %" PRIu64 " (byte %" PRIu64 ") has thread id 0: the log is damaged", n, byte);
  tr_thread *t = tr_thread_of(log, r->tid, &fresh);
  if (!fresh && r->seq <= t->last_seq)
    return tr_fail(e, n, "record %" PRIu64 " (byte %" PRIu64 "): sequence number %" PRIu64 " after %" PRIu64
                   " in thread %" PRIu32 ": the log is damaged", n, byte, r->seq, t->last_seq, r->tid);
  t->last_seq = r->seq;
  if (tr_is_extra(r->kind) && info->version > 1) info->thread_records++;
  else if (!tr_is_call(r->kind))
    return tr_fail(e, n, "record %" PRIu64 " (byte %" PRIu64 ") has unknown kind %u: the log is damaged", n, byte,
                   r->kind);
  else info->records++;
  if (r->span) {
    if (r->span > r->seq || !tr_is_resize(r->kind))
      return tr_fail(e, n, "record %" PRIu64 ": a span of %" PRIu32 " on a %s record: the log is damaged", n,
                     r->span, tr_is_call(r->kind) ? tr_codes[r->kind].function : "thread or mapping");
    info->moved++;
  }
  if ((int64_t)r->seq > s->max_seq) s->max_seq = (int64_t)r->seq;
  if (!info->have_ns || r->ns < info->first_ns) info->first_ns = r->ns;
  if (!info->have_ns || r->ns > info->last_ns) info->last_ns = r->ns;
  info->have_ns = 1;
  if (t == s->prev) t->runs[t->nruns - 1].count++;
  else {
    t->runs = tr_grow(t->runs, &t->cap, t->nruns + 1, sizeof *t->runs);
    t->runs[t->nruns++] = (tr_run){index, 1, 0};
    s->prev = t;
  }
  return 0;
}

/* Version 1 and 2: the file is a header and whole 64-byte records. */
static int tr_index_v2(tr_log *log, tr_scan *s, tr_error *e) {
  enum { BATCH = 16384 };
  tr_rec *buf = malloc(BATCH * sizeof *buf);
  if (!buf) tr_oom();
  uint64_t index = 0;
  for (uint64_t left = log->info.whole; left;) {
    size_t want = left < BATCH ? (size_t)left : BATCH;
    ssize_t got = pread(log->fd, buf, want * TR_RECORD, (off_t)(TR_RECORD + index * TR_RECORD));
    if (got <= 0) {
      free(buf);
      return tr_fail(e, index + 2, "cannot read the trace log: %s", strerror(got ? errno : EIO));
    }
    size_t n = (size_t)got / TR_RECORD;
    for (size_t i = 0; i < n; i++, index++)
      if (tr_index_record(log, s, &buf[i], index, e)) { free(buf); return -1; }
    left -= n;
  }
  free(buf);
  return 0;
}

/* Version 3: runtime/tools/tracelog.c's counting pass (chunk headers and censuses; the records are decoded when the
 * merge reaches them); a chunk is a run. A cut or damaged log is read up to where it stops (info.stopped_at),
 * as the Python reader does. */
static int tr_read_marks(tr_log *log, const struct scn_tl_ref *ref, tr_error *e);
static void tr_settle_marks(tr_log *log);

static int tr_index_v3(tr_log *log, tr_scan *s, tr_error *e) {
  struct scn_tl_scan *scan = scn_tl_scan_file(log->fd, log->info.chunks_at, log->info.size);
  if (!scan) tr_oom();
  int64_t *index = malloc((scan->nthreads + 1) * sizeof *index);
  if (!index) tr_oom();
  for (uint32_t i = 0; i < scan->nthreads; i++) {
    int fresh;
    const struct scn_tl_thread *st = &scan->threads[i];
    /* The tracer's control thread writes window marks and nothing else: not one of the program's threads. */
    if (st->records && st->counts[K_WINDOW] == st->records) { index[i] = -1; continue; }
    tr_thread_of(log, st->tid, &fresh);
    index[i] = (int64_t)(log->nthreads - 1);
  }
  for (uint32_t i = 0; i < scan->nchunks; i++) {
    const struct scn_tl_ref *ref = &scan->chunks[i];
    if (!ref->count) continue;
    if (index[ref->thread] < 0) {
      if (tr_read_marks(log, ref, e)) { free(index); scn_tl_scan_free(scan); return -1; }
      continue;
    }
    tr_thread *t = &log->threads[index[ref->thread]];
    t->runs = tr_grow(t->runs, &t->cap, t->nruns + 1, sizeof *t->runs);
    t->runs[t->nruns++] = (tr_run){ref->offset, ref->count, ref->bytes};
  }
  free(index);
  tr_settle_marks(log);
  tr_info *info = &log->info;
  info->records = scan->calls;
  info->thread_records = scan->extra;
  info->moved = scan->moved;
  info->ended = scan->ended != 0;
  info->have_ns = scan->any != 0;
  info->first_ns = scan->first_ns;
  info->last_ns = scan->last_ns;
  s->max_seq = scan->any ? (int64_t)scan->max_seq : -1;
  s->end_total = scan->end_seq;
  if (log->info.version >= 4) info->made = scan->made > scan->end_seq ? scan->made : scan->end_seq;
  if (scan->faulted) {
    info->faulted = 1;
    info->page_faults = scan->faults_end - scan->faults_start;
    info->tracer_pages = scan->tracer_pages;
    info->fresh_pages = scan->fresh_pages;
    info->written_pages = scan->written_pages;
  }
  info->file_kib = scan->file_kib;
  if (scan->what) {
    info->stopped_at = (int64_t)scan->stop;
    snprintf(info->stop_reason, sizeof info->stop_reason, "%s", scan->what);
  }
  scn_tl_scan_free(scan);
  return 0;
}

static int tr_header(tr_log *log, tr_error *e) {
  unsigned char h[TR_RECORD];
  struct stat st;
  if (fstat(log->fd, &st)) return tr_fail(e, 1, "cannot read the trace log: %s", strerror(errno));
  ssize_t got = pread(log->fd, h, sizeof h, 0);
  if (got < (ssize_t)sizeof h || memcmp(h, "SCNTRACE", 8)) {
    const char *what = got <= 0 ? "empty" : got < (ssize_t)sizeof h ? "too short" : "bad magic";
    return tr_fail(e, 1, "not a scenc tracer log (%s; expected a 64-byte header starting with 'SCNTRACE')", what);
  }
  uint32_t rsize;
  memcpy(&log->info.version, h + 8, 4);
  memcpy(&rsize, h + 12, 4);
  memcpy(&log->info.pid, h + 16, 4);
  memcpy(&log->info.ppid, h + 20, 4);
  memcpy(&log->info.start_realtime_ns, h + 32, 8);
  log->info.size = (uint64_t)st.st_size;
  log->info.chunks_at = TR_RECORD;
  if (log->info.version == 3 && rsize == 0) return 0;
  if (log->info.version >= 4 && log->info.version <= SCN_TRACE_VERSION && rsize == 0) {
    memcpy(&log->info.chunks_at, h + 40, 8);
    if (log->info.chunks_at < TR_RECORD || log->info.chunks_at % SCN_TL_LINE || log->info.chunks_at > (1u << 20))
      return tr_fail(e, 1, "a version 4 header whose chunks start at byte %" PRIu64 ": the log is damaged",
                     log->info.chunks_at);
    return 0;
  }
  if ((log->info.version != 1 && log->info.version != 2) || rsize != TR_RECORD)
    return tr_fail(e, 1, "tracer log version %" PRIu32 " with %" PRIu32 "-byte records; this scenc reads versions "
                   "1, 2, 3, 4, 5, 6 with 64-byte records (rebuild the tracer and capture again)", log->info.version,
                   rsize);
  uint64_t body = (uint64_t)st.st_size - TR_RECORD;
  log->info.whole = body / TR_RECORD;
  log->info.cut = body % TR_RECORD;
  if (log->info.cut) {      /* the disk filled up, or it was cut: the whole records are read (as the Python reader) */
    log->info.stopped_at = (int64_t)(TR_RECORD + log->info.whole * TR_RECORD);
    snprintf(log->info.stop_reason, sizeof log->info.stop_reason, "the log is cut short inside a record (%" PRIu64
             " bytes of record %" PRIu64 ")", log->info.cut, log->info.whole + 2);
  }
  return 0;
}

/* Opens and indexes a log; info is complete afterwards. A record cut short at the end is not an error: the
 * whole records are read and info.cut says how much of the next one there was. */
static int tr_open(tr_log *log, const char *path, int extra, tr_error *e) {
  memset(log, 0, sizeof *log);
  log->path = path;
  log->extra = extra;
  log->info.last_seq = -1;
  log->info.stopped_at = -1;
  log->fd = open(path, O_RDONLY | O_CLOEXEC);
  if (log->fd < 0) return tr_fail(e, 1, "cannot read the trace log: %s", strerror(errno));
  if (tr_header(log, e)) return -1;
  tr_scan s = {-1, 0, NULL};
  if ((log->info.version >= 3 ? tr_index_v3 : tr_index_v2)(log, &s, e)) return -1;
  tr_info *info = &log->info;
  for (size_t i = 0; i < log->nthreads; i++) info->chunks += log->threads[i].nruns;
  if (info->version >= 4) {   /* clocks, not one counter: the records made that the log does not hold */
    uint64_t held = info->records + info->thread_records;
    info->last_seq = s.max_seq;
    info->missing = info->made > held ? info->made - held : 0;
    return 0;
  }
  uint64_t used = info->records + info->moved + info->thread_records;
  if ((int64_t)used > s.max_seq + 1)
    return tr_fail(e, 1, "%" PRId64 " sequence numbers are used twice: the log is damaged or two processes wrote "
                   "to it", (int64_t)used - s.max_seq - 1);
  info->last_seq = s.max_seq > (int64_t)s.end_total - 1 ? s.max_seq : (int64_t)s.end_total - 1;
  info->missing = (uint64_t)(info->last_seq + 1) - used;
  return 0;
}

/* --------------------------------------------------------------- window marks (version 5) */
/* A chunk of K_WINDOW records (the control thread's): each names a thread and its last clock before the mark. */
static int tr_read_marks(tr_log *log, const struct scn_tl_ref *ref, tr_error *e) {
  size_t len = SCN_TL_CHUNK_SIZE + ref->bytes;
  uint8_t *chunk = malloc(len);
  tr_rec rec[64];
  struct scn_tl_chunk ch;
  struct scn_tl_cursor cur;
  struct scn_tl_error err;
  if (!chunk) tr_oom();
  if (pread(log->fd, chunk, len, (off_t)ref->offset) != (ssize_t)len || scn_tl_chunk_parse(chunk, len, &ch, &err) != 1) {
    free(chunk);
    return tr_fail(e, 1, "the chunk at byte %" PRIu64 " cannot be read", ref->offset);
  }
  scn_tl_cursor_init(&cur, &ch, chunk + SCN_TL_CHUNK_SIZE, ref->bytes);
  size_t n;
  while ((n = scn_tl_decode(&cur, rec, 64, &err)) > 0)
    for (size_t k = 0; k < n; k++) {
      uint64_t which = rec[k].arg[0];
      if (rec[k].kind != K_WINDOW || (which != 1 && which != 2)) continue;
      if (!(log->marks & (1 << which)) || rec[k].seq < log->mark_time[which]) log->mark_time[which] = rec[k].seq;
      log->marks |= 1 << which;
      tr_thread *t = rec[k].arg[1] ? tr_thread_find(log, (uint32_t)rec[k].arg[1]) : NULL;
      if (!t) continue;                              /* no thread had recorded, or none of its records is here */
      t->cut[which] = rec[k].arg[2];
      t->named[which] = 1;
    }
  free(chunk);
  return 0;
}

/* Every thread's cut: its clock the mark named, or for a thread the mark did not name (it had not recorded yet,
 * or it had ended and another thread took its buffer) the mark's own time. */
static void tr_settle_marks(tr_log *log) {
  for (int w = 1; w <= 2; w++)
    for (size_t i = 0; i < log->nthreads; i++) {
      tr_thread *t = &log->threads[i];
      if (!t->named[w]) t->cut[w] = (log->marks & (1 << w)) ? log->mark_time[w] : UINT64_MAX;
    }
}

/* A windowed merge orders records by (epoch, clock): the epoch (0 before the window, 1 in it, 2 after) in the bits
 * above any clock (a clock is the time-stamp counter >> 6: 2^58 is decades of uptime). Each thread's records
 * are cut where the mark found it, whatever its clock said of the time (a thread that waited for its client
 * takes clocks behind the time until its next time mark, and would sort before the mark by clock alone). */
#define TR_EPOCH_SHIFT 58
static void tr_epochs(const tr_thread *t, tr_rec *r, size_t n) {
  for (size_t k = 0; k < n; k++) {
    uint64_t e = (r[k].seq > t->cut[1]) + (r[k].seq > t->cut[2]);
    r[k].seq += e << TR_EPOCH_SHIFT;
  }
}

/* --------------------------------------------------------------- the merge pass */
/* Version 1 and 2: the next block of a thread's records is read as it is. */
static int tr_fill_v2(tr_log *log, tr_thread *t, tr_error *e) {
  uint32_t n = t->left < TR_BLOCK ? (uint32_t)t->left : TR_BLOCK;
  size_t want = (size_t)n * TR_RECORD;
  ssize_t got = pread(log->fd, t->buf, want, (off_t)(TR_RECORD + t->at * TR_RECORD));
  if (got != (ssize_t)want)
    return tr_fail(e, t->at + 2, "cannot read the trace log: %s", strerror(got < 0 ? errno : EIO));
  t->at += n;
  t->left -= n;
  t->n = n;
  t->pos = 0;
  return 0;
}

/* Version 3: the thread's next records decoded from its current chunk (read when the run began). */
static int tr_fill_v3(tr_log *log, tr_thread *t, tr_error *e) {
  struct scn_tl_error err;
  size_t n = scn_tl_decode_cpu(&t->cur, t->buf, t->cpu, t->left < TR_BLOCK ? (size_t)t->left : TR_BLOCK, &err);
  if (n < (t->left < TR_BLOCK ? t->left : TR_BLOCK)) {     /* the index counted records it cannot decode */
    if (err.what) return tr_fail(e, 1, "byte %" PRIu64 ": %s", t->at + SCN_TL_CHUNK_SIZE + err.offset, err.what);
    return tr_fail(e, 1, "the chunk at byte %" PRIu64 " changed since the log was indexed", t->at);
  }
  t->left -= n;
  t->n = (uint32_t)n;
  t->pos = 0;
  if (log->windowed) tr_epochs(t, t->buf, n);
  return 0;
}

/* Version 3: a run is a chunk; its header and payload are read whole (at most a flushed buffer's worth). */
static int tr_open_chunk(tr_log *log, tr_thread *t, const tr_run *run, tr_error *e) {
  size_t len = SCN_TL_CHUNK_SIZE + run->bytes;
  t->chunk = tr_grow(t->chunk, &t->chunk_cap, len, 1);
  struct scn_tl_chunk ch;
  struct scn_tl_error err;
  if (pread(log->fd, t->chunk, len, (off_t)run->start) != (ssize_t)len ||
      scn_tl_chunk_parse(t->chunk, len, &ch, &err) != 1)
    return tr_fail(e, 1, "the chunk at byte %" PRIu64 " changed since the log was indexed", run->start);
  scn_tl_cursor_init(&t->cur, &ch, t->chunk + SCN_TL_CHUNK_SIZE, run->bytes);
  return 0;
}

static int tr_advance(tr_log *log, tr_thread *t, tr_error *e) {
  int v3 = log->info.version >= 3;
  if (t->pos >= t->n) {
    if (!t->left) {
      if (t->run >= t->nruns) { t->head = NULL; return 0; }
      const tr_run *run = &t->runs[t->run++];
      t->at = run->start;
      t->left = run->count;
      if (v3 && tr_open_chunk(log, t, run, e)) return -1;
    }
    if ((v3 ? tr_fill_v3 : tr_fill_v2)(log, t, e)) return -1;
  }
  t->head = &t->buf[t->pos++];
  return 0;
}

/* The event of an allocator call record (trace/tracerlog.py's _event). */
static void tr_call_event(const tr_rec *r, tr_event *ev) {
  const uint64_t *a = r->arg;
  uint64_t size = 0, nmemb = 1, align = 0, old = 0;
  switch (tr_codes[r->kind].layout) {
  case L_SIZE: size = a[0]; break;
  case L_OLD: old = a[0]; break;
  case L_NMEMB_SIZE: size = a[1]; nmemb = a[0]; break;
  case L_OLD_SIZE: size = a[1]; old = a[0]; break;
  case L_OLD_NMEMB_SIZE: size = a[2]; nmemb = a[1]; old = a[0]; break;
  case L_ALIGN_SIZE: size = a[1]; align = a[0]; break;
  case L_SIZE_ALIGN: size = a[0]; align = a[1]; break;
  case L_OLD_ALIGN: align = a[1]; old = a[0]; break;
  case L_OLD_SIZE_ALIGN: size = a[1]; align = a[2]; old = a[0]; break;
  }
  unsigned kind = tr_codes[r->kind].kind;
  uint64_t res = r->result;
  int failed = 0;
  if (kind == EV_FREE || kind == EV_OPERATOR_DELETE || kind == EV_OPERATOR_DELETE_ARRAY) res = 0;
  else if (kind == EV_POSIX_MEMALIGN) { failed = r->err != 0; if (failed) res = 0; }
  else  /* NULL is a failure, except from realloc(p, 0), which frees p (as in the ltrace parser) */
    failed = (r->flags & TR_F_THREW) || (res == 0 && !(old && size * nmemb == 0));
  *ev = (tr_event){r->seq + 1, size, nmemb, align, old, res, r->tid, (uint8_t)kind, (uint8_t)failed, 0};
}

/* The event of a thread or mapping record (trace/tracerlog.py's _extra_event). */
static void tr_extra_event(const tr_rec *r, tr_event *ev) {
  const uint64_t *a = r->arg;
  unsigned kind = EV_THREAD_START + (r->kind - TR_FIRST_EXTRA);
  tr_event x = {r->seq + 1, a[0], 1, 0, 0, 0, r->tid, (uint8_t)kind, 0, 0};
  if (kind == EV_MMAP) { x.nmemb = a[1]; x.align = a[2]; x.res = r->result; }
  else if (kind == EV_MUNMAP) { x.size = a[1]; x.old = a[0]; }
  else if (kind == EV_MREMAP) { x.size = a[2]; x.nmemb = r->flags; x.align = a[1]; x.old = a[0]; x.res = r->result; }
  else if (kind == EV_MPROTECT) { x.size = a[1]; x.nmemb = a[2]; x.old = a[0]; }
  x.failed = ((kind == EV_MMAP || kind == EV_MREMAP) && !x.res) || (kind == EV_MPROTECT && r->result);
  *ev = x;
}

/* --------------------------------------------------------------- heap of (seq, thread) */
typedef struct { uint64_t seq; uint32_t t; } tr_entry;
typedef struct { tr_entry *e; size_t n, cap; } tr_heap;

static int tr_less(tr_entry a, tr_entry b) { return a.seq < b.seq || (a.seq == b.seq && a.t < b.t); }

static void tr_push(tr_heap *h, uint64_t seq, uint32_t t) {
  h->e = tr_grow(h->e, &h->cap, h->n + 1, sizeof *h->e);
  size_t i = h->n++;
  tr_entry x = {seq, t};
  for (; i && tr_less(x, h->e[(i - 1) / 2]); i = (i - 1) / 2) h->e[i] = h->e[(i - 1) / 2];
  h->e[i] = x;
}

static tr_entry tr_pop(tr_heap *h) {
  tr_entry top = h->e[0], x = h->e[--h->n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && tr_less(h->e[c + 1], h->e[c])) c++;
    if (!tr_less(h->e[c], x)) break;
    h->e[i] = h->e[c];
    i = c;
  }
  if (h->n) h->e[i] = x;
  return top;
}

/* Moved reallocs at the head of a thread, by the block they released (a handful at most: a dict in Python,
 * with its semantics: setting a key again replaces its thread). */
typedef struct { uint64_t block; uint32_t t; } tr_flight;
typedef struct { tr_flight *f; size_t n, cap; } tr_inflight;

static tr_flight *tr_flight_find(tr_inflight *m, uint64_t block) {
  for (size_t i = 0; i < m->n; i++) if (m->f[i].block == block) return &m->f[i];
  return NULL;
}
static void tr_flight_set(tr_inflight *m, uint64_t block, uint32_t t) {
  tr_flight *f = tr_flight_find(m, block);
  if (f) { f->t = t; return; }
  m->f = tr_grow(m->f, &m->cap, m->n + 1, sizeof *m->f);
  m->f[m->n++] = (tr_flight){block, t};
}
static void tr_flight_drop_if(tr_inflight *m, uint64_t block, uint32_t t) {
  tr_flight *f = tr_flight_find(m, block);
  if (f && f->t == t) *f = m->f[--m->n];
}

typedef int (*tr_sink)(void *arg, const tr_event *ev);

/* Before a record of epoch `key >> TR_EPOCH_SHIFT` (UINT64_MAX: the merge's end): the marks between the epochs
 * merged so far and it, to the sink. */
static int tr_window_see(tr_log *log, uint64_t key, tr_sink sink, void *arg) {
  if (!log->windowed) return 0;
  uint64_t epoch = key == UINT64_MAX ? 2 : key >> TR_EPOCH_SHIFT;
  while ((uint64_t)log->phase < epoch && (log->marks & (2 << log->phase))) {
    log->phase++;
    tr_event ev = {log->merged, (uint64_t)log->phase, 1, 0, 0, 0, 0, EV_WINDOW, 0, 0};
    int rc = sink(arg, &ev);
    if (rc) return rc;
  }
  return 0;
}

/* Thread t's head record on its CPU clock, ns; 0 without one (before version 6). */
static inline uint64_t tr_cpu_ns(const tr_thread *t, const tr_rec *r) {
  return r == t->head && t->pos ? t->cpu[t->pos - 1] : 0;
}

/* Yields thread t's record r to the sink, as an event (allocator calls; the others only with log->extra). Version
 * 4: its line is its place in the merged order, every record counted. log->current_cpu: its CPU clock (tr_cpu_ns). */
static int tr_yield(tr_log *log, const tr_thread *t, const tr_rec *r, tr_sink sink, void *arg) {
  tr_event ev;
  log->merged++;
  if (log->current) *log->current = r;
  if (log->current_cpu) *log->current_cpu = tr_cpu_ns(t, r);
  if (tr_is_call(r->kind)) tr_call_event(r, &ev);
  else if (log->extra) tr_extra_event(r, &ev);
  else return 0;
  if (log->info.version >= 4) ev.line = log->merged;
  return sink(arg, &ev);
}

/* A thread's record taken out of turn: the next one becomes its head. */
static int tr_step(tr_log *log, uint32_t j, tr_heap *h, tr_inflight *m, tr_error *e) {
  tr_thread *c = &log->threads[j];
  const tr_rec *r = c->head;
  if (r->span) tr_flight_drop_if(m, r->arg[0], j);
  if (tr_advance(log, c, e)) return -1;
  if (c->head) {
    tr_push(h, c->head->seq, j);
    if (c->head->span) tr_flight_set(m, c->head->arg[0], j);
  }
  return 0;
}

/* Thread i's records up to the next thread's turn (trace/tracerlog.py's _merge, step for step). */
static int tr_run_thread(tr_log *log, uint32_t i, tr_heap *h, tr_inflight *m, int64_t *last, tr_sink sink,
                         void *arg, tr_error *e) {
  tr_thread *c = &log->threads[i];
  const tr_rec *r = c->head;
  tr_entry bound = h->n ? h->e[0] : (tr_entry){UINT64_MAX, UINT32_MAX};   /* the next thread's turn */
  for (;;) {
    uint64_t seq = r->seq;
    if (m->n && r->result && !tr_is_release(r->kind)) {
      tr_flight *f = tr_flight_find(m, r->result);
      if (f && f->t != i) {
        uint32_t j = f->t;
        const tr_rec *o = log->threads[j].head;
        if (o->seq - o->span < seq) {
          /* Another thread's realloc released this block before we got it (its first number is older) but
           * took its final number later. */
          log->info.reordered++;
          int rc = tr_window_see(log, o->seq, sink, arg);
          if (!rc) rc = tr_yield(log, &log->threads[j], o, sink, arg);
          if (rc) return rc;
          if (tr_step(log, j, h, m, e)) return -1;
          bound = h->e[0];
        }
      }
    }
    if ((int64_t)seq < *last + (log->info.version < 4))   /* version 4: threads' clocks may be equal */
      return tr_fail(e, 1, "sequence number %" PRIu64 " appears twice (threads' chunks overlap): the log is damaged",
                     seq);
    *last = (int64_t)seq;
    int rc = tr_window_see(log, seq, sink, arg);
    if (!rc) rc = tr_yield(log, c, r, sink, arg);
    if (rc) return rc;
    if (r->span) tr_flight_drop_if(m, r->arg[0], i);
    if (tr_advance(log, c, e)) return -1;
    r = c->head;
    if (!r) return 0;
    if (r->span) tr_flight_set(m, r->arg[0], i);
    if (!tr_less((tr_entry){r->seq, i}, bound)) { tr_push(h, r->seq, i); return 0; }
  }
}

/* Every record in causal global order, to `sink` (a non-zero return stops the merge and is returned). Version 4:
 * by (clock, thread), the threads in order of their first chunk in the file. */
static int tr_merge(tr_log *log, tr_sink sink, void *arg, tr_error *e) {
  tr_heap h = {0};
  tr_inflight m = {0};
  int rc = 0;
  for (uint32_t i = 0; i < log->nthreads; i++) {
    tr_thread *c = &log->threads[i];
    c->buf = malloc(TR_BLOCK * sizeof *c->buf);
    c->cpu = tr_xcalloc(TR_BLOCK, sizeof *c->cpu);     /* zeros: versions 1 and 2 have no CPU clock */
    if (!c->buf) tr_oom();
    if (tr_advance(log, c, e)) { rc = -1; goto out; }
    if (c->head) tr_push(&h, c->head->seq, i);
  }
  for (uint32_t i = 0; i < log->nthreads; i++)
    if (log->threads[i].head && log->threads[i].head->span) tr_flight_set(&m, log->threads[i].head->arg[0], i);
  int64_t last = -1;
  while (h.n && !rc) {
    tr_entry top = tr_pop(&h);
    const tr_rec *r = log->threads[top.t].head;
    if (!r || r->seq != top.seq) continue;        /* taken out of turn */
    rc = tr_run_thread(log, top.t, &h, &m, &last, sink, arg, e);
  }
  if (!rc) rc = tr_window_see(log, UINT64_MAX, sink, arg);   /* marks after the last record */
out:
  free(h.e);
  free(m.f);
  return rc;
}

/* --------------------------------------------------------------- what the index found, as JSON */
/* The "log" object of the tools' reports: trace/tracerlog.py's PreloadLogInfo fields (trace/source.py's
 * adopt_log_info reads it), and the threads in the merge's order. */
static inline void tr_put_info(FILE *out, const tr_log *log) {   /* inline: not every tool prints it */
  const tr_info *f = &log->info;
  char stopped[24] = "null", faults[24] = "null", made[24] = "null", file_kib[24] = "null";
  if (f->stopped_at >= 0) snprintf(stopped, sizeof stopped, "%" PRId64, f->stopped_at);
  if (f->faulted) snprintf(faults, sizeof faults, "%" PRIu64, f->page_faults);
  if (f->version >= 4) snprintf(made, sizeof made, "%" PRIu64, f->made);
  if (f->file_kib) snprintf(file_kib, sizeof file_kib, "%" PRIu64, f->file_kib);
  fprintf(out, "{\"version\": %" PRIu32 ", \"pid\": %" PRIu32 ", \"ppid\": %" PRIu32 ", \"start_realtime_ns\": %"
          PRIu64 ", \"records\": %" PRIu64 ", \"last_seq\": %" PRId64 ", \"ended\": %s, \"missing\": %" PRIu64
          ", \"moved_reallocs\": %" PRIu64 ", \"thread_records\": %" PRIu64 ", \"chunks\": %" PRIu64
          ", \"reordered_reallocs\": %" PRIu64 ", \"has_ns\": %s, \"first_ns\": %" PRIu64 ", \"last_ns\": %" PRIu64
          ", \"size\": %" PRIu64 ", \"stopped_at\": %s, \"stop_reason\": \"%s\""
          ", \"page_faults\": %s, \"tracer_pages\": %" PRIu64 ", \"made\": %s, \"file_resident_kib\": %s"
          ", \"threads\": [",
          f->version, f->pid, f->ppid, f->start_realtime_ns, f->records, f->last_seq, f->ended ? "true" : "false",
          f->missing, f->moved, f->thread_records, f->chunks, f->reordered, f->have_ns ? "true" : "false",
          f->first_ns, f->last_ns, f->size, stopped, f->stop_reason, faults, f->tracer_pages, made, file_kib);
  for (size_t i = 0; i < log->nthreads; i++) fprintf(out, "%s%" PRIu32, i ? ", " : "", log->threads[i].tid);
  fprintf(out, "]}");
}

static void tr_close(tr_log *log) {
  for (size_t i = 0; i < log->nthreads; i++) {
    free(log->threads[i].runs);
    free(log->threads[i].buf);
    free(log->threads[i].cpu);
    free(log->threads[i].chunk);
  }
  free(log->threads);
  free(log->slot_of);
  if (log->fd >= 0) close(log->fd);
}

#endif
