/* tracelog.c -- the reading side of tracelog.h as a shared library (libscntracelog.so), for
 * trace/tracerlog.py (ctypes). Every record it reads goes through tracelog.h's decoder.
 *
 * The counting pass reads chunk headers and censuses only (a few hundred bytes per chunk of about
 * 5000 calls), so a capture's summary costs next to nothing whatever the log's size:
 *     struct scn_tl_scan *s = scn_tl_scan_file(fd, first chunk, file size);   -- version 3: 64; 4: header's
 *                                                                                reserved[0], after the counters
 *     ... s->threads[0..nthreads), s->chunks[0..nchunks), totals; s->what: it stopped early, at s->stop ...
 *     scn_tl_scan_free(s);
 * Reading a chunk: scn_tl_open(reader, its header and payload, their length), then
 * scn_tl_read(reader, out, cpu or NULL, cap, &what, &offset) until it returns 0 (cpu: each record's CPU clock);
 * reader memory: scn_tl_reader_size().
 */
#include <stdlib.h>
#include <unistd.h>
#include "../tracer/tracelog.h"

#define EXPORT __attribute__((visibility("default")))

struct scn_tl_thread {
  uint32_t tid, chunks;
  uint64_t last_seq, records;   /* records: every record of the thread, calls or not */
  uint64_t counts[64];          /* by kind code */
};

struct scn_tl_ref {             /* one chunk of records */
  uint64_t offset;              /* file offset of its header */
  uint32_t bytes, count;        /* payload bytes present, records decoded (fewer than its header says when cut) */
  uint32_t thread, pad;         /* index in threads */
};

struct scn_tl_scan {
  uint64_t offset;              /* file offset where the pass ended */
  uint64_t calls, extra, moved, max_seq, end_seq, first_ns, last_ns;
  uint32_t ended, any, nthreads, nchunks;
  uint64_t stop;                /* file offset where reading stopped early (cut, damaged); valid when what */
  const char *what;
  struct scn_tl_thread *threads;
  struct scn_tl_ref *chunks;
  uint32_t cap_threads, cap_chunks, last_thread, pad;
  uint32_t faulted, pad2;         /* an end mark held a page-fault reading: the last one's, below */
  uint64_t faults_start, faults_end, tracer_pages, fresh_pages, written_pages;
  uint32_t counted, overflow;     /* version 4: the counters were read; some buffer had no line (the count is short) */
  uint64_t made;                  /* version 4: records made, by the counters */
  uint64_t file_kib;              /* the last end mark's file-backed resident KiB that read it (0: none did) */
};

EXPORT void scn_tl_scan_free(struct scn_tl_scan *s) {
  if (!s) return;
  free(s->threads);
  free(s->chunks);
  free(s);
}

static int grow(void **items, uint32_t *cap, size_t size) {
  uint32_t n = *cap ? *cap * 2 : 64;
  void *p = realloc(*items, (size_t)n * size);
  if (!p) return 0;
  *items = p;
  *cap = n;
  return 1;
}

static struct scn_tl_thread *thread_of(struct scn_tl_scan *s, uint32_t tid) {
  if (s->nthreads && s->threads[s->last_thread].tid == tid) return &s->threads[s->last_thread];
  for (uint32_t i = 0; i < s->nthreads; i++)
    if (s->threads[i].tid == tid) return &s->threads[s->last_thread = i];
  if (s->nthreads == s->cap_threads && !grow((void **)&s->threads, &s->cap_threads, sizeof *s->threads)) return NULL;
  struct scn_tl_thread *t = &s->threads[s->last_thread = s->nthreads++];
  memset(t, 0, sizeof *t);
  t->tid = tid;
  return t;
}

static int stop(struct scn_tl_scan *s, uint64_t at, const char *what) {
  s->stop = at;
  s->what = what;
  return 0;
}

static int add_ref(struct scn_tl_scan *s, struct scn_tl_thread *t, uint64_t at, uint32_t bytes, uint32_t count) {
  if (s->nchunks == s->cap_chunks && !grow((void **)&s->chunks, &s->cap_chunks, sizeof *s->chunks)) return 0;
  struct scn_tl_ref *ref = &s->chunks[s->nchunks++];
  ref->offset = at;
  ref->bytes = bytes;
  ref->count = count;
  ref->thread = (uint32_t)(t - s->threads);
  t->chunks++;
  return 1;
}

static void add_times(struct scn_tl_scan *s, uint64_t first_ns, uint64_t last_ns, uint64_t last_seq) {
  if (!s->any || first_ns < s->first_ns) s->first_ns = first_ns;
  if (!s->any || last_ns > s->last_ns) s->last_ns = last_ns;
  if (!s->any || last_seq > s->max_seq) s->max_seq = last_seq;
  s->any = 1;
}

static void add_counts(struct scn_tl_scan *s, struct scn_tl_thread *t, const uint64_t counts[64], uint64_t moved) {
  for (int k = 1; k < 64; k++) {
    t->counts[k] += counts[k];
    t->records += counts[k];
    if (k >= K_THREAD_START) s->extra += counts[k];
    else s->calls += counts[k];
  }
  s->moved += moved;
}

/* A chunk cut short by the end of the file: its whole records, decoded. */
static void count_cut_chunk(struct scn_tl_scan *s, int fd, uint64_t at, const struct scn_tl_chunk *ch, uint64_t size,
                            struct scn_tl_thread *t) {
  size_t avail = size - at - SCN_TL_CHUNK_SIZE < ch->bytes ? (size_t)(size - at - SCN_TL_CHUNK_SIZE) : ch->bytes;
  uint8_t *payload = malloc(avail + 1);
  if (!payload || pread(fd, payload, avail, (off_t)(at + SCN_TL_CHUNK_SIZE)) != (ssize_t)avail) {
    free(payload);
    stop(s, at, "cannot read the log");
    return;
  }
  struct scn_tl_cursor c;
  struct scn_tl_error err;
  struct scn_trace_record rec[256];
  uint64_t counts[64] = {0}, moved = 0, first = 0, last = 0, seq = 0, n, total = 0;
  scn_tl_cursor_init(&c, ch, payload, avail);
  while ((n = scn_tl_decode(&c, rec, 256, &err)) > 0) {
    if (!total) first = rec[0].ns;
    for (size_t i = 0; i < n; i++) {
      counts[rec[i].kind]++;
      moved += rec[i].span != 0;
    }
    last = rec[n - 1].ns;
    seq = rec[n - 1].seq;
    total += n;
  }
  uint32_t used = (uint32_t)(c.p - c.start);
  int cut = avail < ch->bytes;
  free(payload);
  if (total) {
    add_counts(s, t, counts, moved);
    add_times(s, first, last, seq);
    t->last_seq = seq;
    add_ref(s, t, at, used, (uint32_t)total);
  }
  stop(s, at + SCN_TL_CHUNK_SIZE + used,
       cut ? "the log is cut short inside a chunk" : "the log is cut short inside a chunk's census");
}

/* The counting pass: every chunk header and census of the log (fd, size bytes; chunks from offset), none of
 * the records, but those of a chunk cut short at the end. Stops early with s->what set. */
EXPORT struct scn_tl_scan *scn_tl_scan_file(int fd, uint64_t offset, uint64_t size) {
  struct scn_tl_scan *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  uint64_t at = offset;
  if (offset > size) stop(s, size, "the log is cut short before its first chunk (inside its counters)");
  if (offset > sizeof(struct scn_trace_header) && offset <= size) {   /* version 4: the counters */
    uint64_t area[SCN_TL_AREA / 8];
    size_t len = offset - sizeof(struct scn_trace_header) < sizeof area ? offset - sizeof(struct scn_trace_header)
                                                                        : sizeof area;
    if (pread(fd, area, len, (off_t)sizeof(struct scn_trace_header)) == (ssize_t)len) {
      s->counted = 1;
      for (size_t line = 0; line < len / SCN_TL_LINE; line++) s->made += area[line * SCN_TL_LINE / 8];
      if (len > SCN_TL_OVERFLOW - sizeof(struct scn_trace_header) + 8)
        s->overflow = area[(SCN_TL_OVERFLOW - sizeof(struct scn_trace_header)) / 8] != 0;
    }
  }
  uint8_t census[SCN_TL_MAX_CENSUS];
  while (at < size) {
    struct scn_tl_chunk ch;
    struct scn_tl_error err;
    uint8_t head[SCN_TL_CHUNK_SIZE];
    ssize_t got = pread(fd, head, sizeof head, (off_t)at);
    if (got < 0) {
      stop(s, at, "cannot read the log");
      break;
    }
    if (scn_tl_chunk_parse(head, (size_t)got, &ch, &err) != 1) {
      stop(s, at, err.what ? err.what : "the log is cut short inside a chunk header");
      break;
    }
    if (ch.type == SCN_TL_END) {
      s->ended = 1;
      if (ch.seq > s->end_seq) s->end_seq = ch.seq;
      struct scn_tl_faults f;
      if (scn_tl_end_faults(&ch, &f)) {
        s->faulted = 1;
        s->faults_start = f.start, s->faults_end = f.end, s->tracer_pages = f.own;
        s->fresh_pages = f.fresh, s->written_pages = f.written;
      }
      if (scn_tl_end_file_kib(&ch)) s->file_kib = scn_tl_end_file_kib(&ch);
      at += SCN_TL_CHUNK_SIZE;
      continue;
    }
    struct scn_tl_thread *t = thread_of(s, ch.tid);
    if (!t) {
      stop(s, at, "out of memory");
      break;
    }
    if (t->records && ch.seq <= t->last_seq) {
      stop(s, at, "sequence numbers go back in a thread: the log is damaged");
      break;
    }
    uint64_t next = at + SCN_TL_CHUNK_SIZE + ch.bytes + ch.census;
    if (next > size) {
      count_cut_chunk(s, fd, at, &ch, size, t);
      break;
    }
    uint64_t counts[64] = {0};
    if (pread(fd, census, ch.census, (off_t)(next - ch.census)) != (ssize_t)ch.census ||
        scn_tl_read_census(census, ch.census, counts) != (int64_t)ch.count) {
      stop(s, at, "a chunk's census does not match its records: the log is damaged");
      break;
    }
    add_counts(s, t, counts, ch.moved);
    add_times(s, ch.ns, ch.ns + ch.ns_span, ch.last_seq);
    t->last_seq = ch.last_seq;
    if (!add_ref(s, t, at, ch.bytes, ch.count)) {
      stop(s, at, "out of memory");
      break;
    }
    at = next;
  }
  s->offset = at;
  return s;
}

/* Reading a chunk: tracelog.h's cursor and where it stopped. */
struct reader {
  struct scn_tl_cursor c;
  struct scn_tl_error err;
};

EXPORT size_t scn_tl_reader_size(void) { return sizeof(struct reader); }

/* A chunk (header and payload, len bytes: fewer when the log is cut) to read with scn_tl_read. */
EXPORT int scn_tl_open(struct reader *r, const uint8_t *chunk, size_t len) {
  struct scn_tl_chunk ch;
  memset(r, 0, sizeof *r);
  if (scn_tl_chunk_parse(chunk, len, &ch, &r->err) != 1) return 0;
  scn_tl_cursor_init(&r->c, &ch, chunk + SCN_TL_CHUNK_SIZE, len - SCN_TL_CHUNK_SIZE);
  return 1;
}

/* Up to cap records; 0 at the chunk's end. *what: NULL, or why it stopped early (at byte *offset of the payload).
 * cpu (NULL: not wanted): each record's CPU clock (tracelog.h's scn_tl_decode_cpu). */
EXPORT size_t scn_tl_read(struct reader *r, struct scn_trace_record *out, uint64_t *cpu, size_t cap,
                          const char **what, uint64_t *offset) {
  size_t n = scn_tl_decode_cpu(&r->c, out, cpu, cap, &r->err);
  *what = r->err.what;
  *offset = r->err.offset;
  return n;
}
