/* tracelog.c -- the reading side of tracelog.h as a shared library (libscntracelog.so), for
 * trace/preload_log.py (ctypes): one counting pass over a version 3 log, then its chunks decoded
 * into version 2 records a block at a time. Every record goes through tracelog.h's decoder.
 *
 * Counting pass: the caller reads the file after its 64-byte header in blocks and feeds them,
 *     struct scn_tl_scan *s = scn_tl_scan_new(64);               -- 64: the file offset of the first chunk
 *     consumed = scn_tl_scan_feed(s, block, len, at_eof);        -- whole chunks only; keep the rest
 *     ... s->threads[0..nthreads), s->chunks[0..nchunks), totals; s->what when it stopped early ...
 *     scn_tl_scan_free(s);
 * Reading a chunk: scn_tl_open(cursor, bytes of the chunk header and payload, their length), then
 * scn_tl_read(cursor, out, cap) until it returns 0; cursor memory: scn_tl_cursor_size() bytes.
 */
#include <stdlib.h>
#include "tracelog.h"

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
  uint64_t offset;              /* file offset of the next byte to feed */
  uint64_t calls, extra, moved, max_seq, end_seq, first_ns, last_ns;
  uint32_t ended, any, nthreads, nchunks;
  uint64_t stop;                /* file offset where reading stopped early (cut, damaged); valid when what */
  const char *what;
  struct scn_tl_thread *threads;
  struct scn_tl_ref *chunks;
  uint32_t cap_threads, cap_chunks, last_thread, pad;
};

EXPORT struct scn_tl_scan *scn_tl_scan_new(uint64_t offset) {
  struct scn_tl_scan *s = calloc(1, sizeof *s);
  if (s) s->offset = offset;
  return s;
}

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

static int is_resize(uint8_t kind) { return kind == K_REALLOC || kind == K_REALLOCARRAY; }

static int stop(struct scn_tl_scan *s, uint64_t at, const char *what) {
  s->stop = at;
  s->what = what;
  return 0;
}

/* Counts the records of one chunk (avail payload bytes present); 0 when it stopped early. */
static int count_chunk(struct scn_tl_scan *s, const struct scn_tl_chunk *ch, const uint8_t *payload, size_t avail) {
  uint64_t at = s->offset + SCN_TL_CHUNK_SIZE;
  struct scn_tl_thread *t = thread_of(s, ch->tid);
  if (!t || (s->nchunks == s->cap_chunks && !grow((void **)&s->chunks, &s->cap_chunks, sizeof *s->chunks)))
    return stop(s, s->offset, "out of memory");
  struct scn_tl_ref *ref = &s->chunks[s->nchunks++];
  ref->offset = s->offset;
  ref->thread = (uint32_t)(t - s->threads);
  ref->count = 0;
  t->chunks++;
  struct scn_tl_cursor c;
  struct scn_tl_error err;
  struct scn_trace_record rec[256];
  scn_tl_cursor_init(&c, ch, payload, avail);
  size_t n;
  do {
    n = scn_tl_decode(&c, rec, 256, &err);
    for (size_t i = 0; i < n; i++) {
      const struct scn_trace_record *r = &rec[i];
      if (t->records && r->seq <= t->last_seq) return stop(s, at + err.offset, "sequence numbers go back in a thread");
      if (r->span && (r->span > r->seq || !is_resize(r->kind))) return stop(s, at + err.offset, "a span on a record "
                                                                           "that is no moved realloc: damaged");
      t->last_seq = r->seq;
      t->records++;
      t->counts[r->kind]++;
      ref->count++;
      if (r->kind >= K_THREAD_START) s->extra++;
      else s->calls++;
      if (r->span) s->moved++;
      if (!s->any || r->seq > s->max_seq) s->max_seq = r->seq;
      if (!s->any || r->ns < s->first_ns) s->first_ns = r->ns;
      if (!s->any || r->ns > s->last_ns) s->last_ns = r->ns;
      s->any = 1;
    }
  } while (n);
  ref->bytes = (uint32_t)(c.p - c.start);
  if (err.what) return stop(s, at + err.offset, err.what);
  return 1;
}

/* Counts the whole chunks in buf (file offset s->offset); returns the bytes consumed. At eof a cut
 * chunk is counted up to its last whole record. Stops for good when s->what is set. */
EXPORT size_t scn_tl_scan_feed(struct scn_tl_scan *s, const uint8_t *buf, size_t len, int eof) {
  size_t at = 0;
  while (!s->what) {
    struct scn_tl_chunk ch;
    struct scn_tl_error err;
    int got = scn_tl_chunk_parse(buf + at, len - at, &ch, &err);
    if (got < 0) {
      stop(s, s->offset, err.what);
      break;
    }
    if (!got) {
      if (eof && at < len) stop(s, s->offset, "the log is cut short inside a chunk header");
      break;
    }
    if (len - at - SCN_TL_CHUNK_SIZE < ch.bytes) {   /* a cut chunk: its whole records count */
      if (eof) count_chunk(s, &ch, buf + at + SCN_TL_CHUNK_SIZE, len - at - SCN_TL_CHUNK_SIZE);
      break;
    }
    if (ch.type == SCN_TL_END) {
      s->ended = 1;
      if (ch.seq > s->end_seq) s->end_seq = ch.seq;
    } else if (!count_chunk(s, &ch, buf + at + SCN_TL_CHUNK_SIZE, len - at - SCN_TL_CHUNK_SIZE)) {
      break;
    }
    at += SCN_TL_CHUNK_SIZE + ch.bytes;
    s->offset += SCN_TL_CHUNK_SIZE + ch.bytes;
  }
  return at;
}

EXPORT size_t scn_tl_cursor_size(void) { return sizeof(struct scn_tl_cursor); }

/* A chunk (header and payload, len bytes: fewer when the log is cut) to read with scn_tl_read. */
EXPORT int scn_tl_open(struct scn_tl_cursor *c, const uint8_t *chunk, size_t len) {
  struct scn_tl_chunk ch;
  struct scn_tl_error err;
  if (scn_tl_chunk_parse(chunk, len, &ch, &err) != 1) return 0;
  scn_tl_cursor_init(c, &ch, chunk + SCN_TL_CHUNK_SIZE, len - SCN_TL_CHUNK_SIZE);
  return 1;
}

EXPORT size_t scn_tl_read(struct scn_tl_cursor *c, struct scn_trace_record *out, size_t cap) {
  struct scn_tl_error err;
  return scn_tl_decode(c, out, cap, &err);
}
