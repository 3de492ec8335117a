/* tracelog.h -- the preload tracer's log: its record, the version 4 encoder (and 6's CPU clock) and the one decoder.
 *
 * runtime/tracer/tracer.c encodes with it; runtime/tools/tracelog.c (the library trace/tracerlog.py loads)
 * and the C converter decode with it. Header-only, no allocation, no I/O.
 *
 * File (little-endian): a 64-byte header (struct scn_trace_header: "SCNTRACE", version, record size 0,
 * pid, ppid, CLOCK_MONOTONIC and CLOCK_REALTIME ns at open; version 4: reserved[0] the offset of the first
 * chunk, SCN_TL_AREA), version 4: the counters (below) up to that offset, then chunks. Versions 1 and 2
 * (fixed 64-byte records, struct scn_trace_record as is) are read by the callers' own code.
 *
 * Counters (version 4): 64-byte lines after the header, a u64 at the start of each: line 0 (byte 64) the
 * records written alone (scn_tl_counters), line i > 0 the records made into one thread buffer so far (the
 * tracer maps these lines and stores each count as it makes a record, so they survive a SIGKILL: the
 * records made and not in the log are the missing ones). A u64 at byte 72: 1 when some buffer had no line.
 *
 * Chunk: a 72-byte header (struct scn_tl_chunk), `bytes` bytes holding `count` records of one
 * thread in order, then `census` bytes: varint pairs (kind code, records of that kind),
 * codes rising, so a summary needs no record. Chunks of different threads interleave in the
 * file. A chunk of type SCN_TL_END is a header alone: the process was leaving, `seq` is the count
 * of records it made (version 3: of numbers it took); a tracer that reads the process's minor page
 * faults also stores them there (scn_tl_end_faults: fields an end mark left 0 before), and one that reads its
 * file-backed resident memory stores that in `moved` (scn_tl_end_file_kib: 0 before, unknown).
 * Version 3 chunks are of type SCN_TL_RECORDS, version 4 chunks of type SCN_TL_RECORDS4.
 *
 * Order and time (version 4): a record's `seq` is its thread's clock, a hybrid of time and a Lamport clock:
 * the time-stamp counter >> tick_shift, advanced by the thread's `step` a record between time marks, and pushed
 * past the clock of the previous event on the same block (an allocation after the free that released its
 * address; a free after the allocation it frees), of the thread's creation, of a joined thread's end and of the
 * program's previous mapping call (tracer.c's opening comment). Merging the threads by (seq, thread) thus puts
 * every record after the ones it depends on, and the others about where they were in time; equal numbers in two
 * threads are calls that were concurrent. A record's time is its seq: tick = seq << tick_shift (absolute), mapped
 * to ns by the chunk's two clock readings. Version 3: one global counter, every number used once, and a time in
 * every record.
 *
 * Record: a kind byte (bits 0-5 the kind code, bit 6 SCN_TL_SEQ_NEXT: seq = previous + step (version 3: + 1),
 * bit 7 SCN_TL_EXT: an extension byte follows), [the extension byte: SCN_TL_X_FLAGS a flags byte
 * follows, SCN_TL_X_ERR a varint error code, SCN_TL_X_SPAN a varint span, SCN_TL_X_RAW pointers
 * are stored whole, SCN_TL_X_TIME (version 4) a varint step: a time mark, the step of the records after this
 * one], [varint zigzag(seq - previous seq - step) unless SEQ_NEXT], version 3: a varint time (ticks >>
 * tick_shift since the chunk's first tick, minus the previous record's); then the fields scn_tl_layout[code]
 * names, in the order arg[0], arg[1], arg[2], result: a size is a varint; a pointer is 0 for NULL, else
 * zigzag((p - previous pointer) >> 3) + 1 (the previous non-NULL pointer of the chunk), or with
 * SCN_TL_X_RAW the pointer itself. Varints: 7 bits a byte, low first, high bit = more follow.
 * Version 6: SCN_TL_X_CPU, a varint after the step: the thread's CPU clock (CLOCK_THREAD_CPUTIME_ID, ns) read at
 * this record, less the chunk's previous reading (the first reading of a chunk: the clock itself). The tracer reads
 * it at a chunk's first record and at a time mark when about 200 us have passed since its last reading
 * (tracer_record.h, CPU_EVERY_KEYS); a version 6 chunk (type SCN_TL_RECORDS6) ends its record bytes with a u64 (the
 * trailer, SCN_TL_TRAILER bytes): the clock read at its flush (0: not read), which the chunk's last record takes.
 * A record's CPU clock (scn_tl_decode_cpu) is that of the last reading at or before it: the CPU time between two
 * records of a thread is what the thread ran between the readings around them, its waits (blocked, descheduled)
 * left out (trace/model/work.py).
 * Fields a layout leaves out decode as 0; so do dur_ns (not recorded since version 3) and err
 * and span without their extension bits. A version 4 chunk's first record has the chunk header's seq (its step
 * is 0 until the first time mark, which is that record). A record's ns maps its tick linearly onto
 * [ns, ns + ns_span] over [tick, tick + tick_span] (version 3: chunk.tick + its time), the two clock readings the
 * tracer made at the chunk's first record and at its flush.
 *
 * Decoding (what the converter needs):
 *     struct scn_tl_chunk ch; struct scn_tl_cursor c; struct scn_tl_error err;
 *     size_t at = first chunk;                                  -- version 3: 64; 4: header.reserved[0]
 *     while (scn_tl_chunk_parse(buf + at, len - at, &ch, &err) == 1) {
 *       if (ch.type == SCN_TL_END) { ... ch.seq records made ...; at += SCN_TL_CHUNK_SIZE; continue; }
 *       scn_tl_cursor_init(&c, &ch, buf + at + SCN_TL_CHUNK_SIZE, len - at - SCN_TL_CHUNK_SIZE);
 *       while ((n = scn_tl_decode(&c, out, cap, &err)) > 0) ... n records of thread ch.tid ...
 *       if (err.what) ... stopped at byte at + SCN_TL_CHUNK_SIZE + err.offset: a cut or damaged record
 *       at += SCN_TL_CHUNK_SIZE + ch.bytes + ch.census;
 *     }
 * scn_tl_chunk_parse returns 1 (a header), 0 (fewer than 72 bytes: the end, or a cut header),
 * -1 (not a chunk header: err says why). scn_tl_decode returns the records it decoded (at most
 * cap) and 0 at the end of the chunk; err.what is NULL unless it stopped early, err.offset being
 * the offset in the payload of the first record it could not decode (payload cut short, unknown
 * kind). Records decode into the version 2 layout, struct scn_trace_record, ns in CLOCK_MONOTONIC.
 * scn_tl_read_census gives a chunk's records by kind without decoding them.
 */
#ifndef SCN_TRACELOG_H
#define SCN_TRACELOG_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SCN_TRACE_VERSION 6   /* 6: the threads' CPU clocks (SCN_TL_X_CPU, a chunk's trailer); 5: window marks
                                 (K_WINDOW); 4: per-thread clocks, time marks, counters; 3: compact chunks; 2 added
                                 thread and mapping records; 1 */

enum scn_trace_kind {   /* record kinds; trace/tracerlog.py KIND_CODES mirrors them */
  K_MALLOC = 1, K_CALLOC, K_REALLOC, K_REALLOCARRAY, K_FREE, K_POSIX_MEMALIGN, K_ALIGNED_ALLOC,
  K_MEMALIGN, K_VALLOC, K_PVALLOC,
  K_NEW, K_NEW_NOTHROW, K_NEW_ALIGNED, K_NEW_ALIGNED_NOTHROW,                        /* 11..14 */
  K_NEW_ARRAY, K_NEW_ARRAY_NOTHROW, K_NEW_ARRAY_ALIGNED, K_NEW_ARRAY_ALIGNED_NOTHROW, /* 15..18 */
  K_DELETE, K_DELETE_SIZED, K_DELETE_ALIGNED, K_DELETE_SIZED_ALIGNED, K_DELETE_NOTHROW,
  K_DELETE_ALIGNED_NOTHROW,                                                          /* 19..24 */
  K_DELETE_ARRAY, K_DELETE_ARRAY_SIZED, K_DELETE_ARRAY_ALIGNED, K_DELETE_ARRAY_SIZED_ALIGNED,
  K_DELETE_ARRAY_NOTHROW, K_DELETE_ARRAY_ALIGNED_NOTHROW,                            /* 25..30 */
  K_THREAD_START = 40,   /* not a call: a thread made by pthread_create begins; arg[0] = its creator's tid */
  K_THREAD_EXIT = 41,    /* not a call: the thread ends (after its pthread key destructors) */
  K_MMAP = 42,           /* the program's own anonymous mmap (len, prot, flags) */
  K_MUNMAP = 43,         /* the program's own munmap (addr, len); result = its return value */
  K_MREMAP = 44,         /* the program's own mremap (old, old len, new len); flags = mremap's flags */
  K_WINDOW = 45,         /* not a call (version 5): a window mark (1 opens, 2 closes), a thread's tid, its last clock
                            before the mark (runtime/tracer/tracer_window.h) */
  K_MPROTECT = 46,       /* the program's own mprotect (addr, len, prot); result = its return value */
  K_END = 255   /* not a call: the process is leaving (exit, _exit, exec); seq = records made (3: numbers taken) */
};

enum { F_THREW = 1 };   /* operator new left by an exception (std::bad_alloc) */

/* One call, as version 2 stored it and as the decoder gives it back. Arguments in the function's
 * own order, without posix_memalign's memptr and the nothrow tag: malloc (size), calloc (nmemb,
 * size), realloc (ptr, size), reallocarray (ptr, nmemb, size), free (ptr), posix_memalign/
 * aligned_alloc/memalign (align, size), valloc/pvalloc (size), new (size[, align]),
 * delete (ptr[, size][, align]). */
struct scn_trace_record {
  uint64_t seq;       /* version 4: the thread's clock (tracelog.h's "Order"); before: global sequence number */
  uint64_t ns;        /* CLOCK_MONOTONIC when the call took effect (see tracer.c) */
  uint32_t tid;       /* gettid() */
  uint8_t kind;       /* enum scn_trace_kind */
  uint8_t flags;      /* F_THREW; mremap's flags */
  uint16_t err;       /* posix_memalign's return value */
  uint32_t dur_ns;    /* version 2: time spent in the real function; version 3: 0 */
  uint32_t span;      /* moved realloc: seq minus the number (clock) taken when it released the old block; else 0 */
  uint64_t arg[3];
  uint64_t result;    /* pointer returned (stored, for posix_memalign); 0 for frees */
};

struct scn_trace_header {
  char magic[8];      /* "SCNTRACE" */
  uint32_t version, record_size, pid, ppid;   /* record_size: 64 in versions 1-2, 0 since 3 */
  uint64_t start_ns, start_realtime_ns;
  uint64_t reserved[3];                     /* version 4: reserved[0] the first chunk's offset */
};

/* records of version 3; the end; of versions 4 and 5; of version 6 (version 4's and the trailer) */
enum { SCN_TL_RECORDS = 1, SCN_TL_END = 2, SCN_TL_RECORDS4 = 3, SCN_TL_RECORDS6 = 4 };
#define SCN_TL_TRAILER 8      /* a version 6 chunk's record bytes end with its thread's CPU clock at the flush */
#define SCN_TL_MARK 0x4c54u   /* "TL": every chunk header carries it */
#define SCN_TL_AREA 8192      /* version 4: header and counters, before the first chunk */
#define SCN_TL_LINE 64        /* a counter's line */
#define SCN_TL_COUNTERS (SCN_TL_AREA / SCN_TL_LINE - 1)   /* lines after the header: the direct one, then buffers' */
#define SCN_TL_OVERFLOW 72    /* byte of the u64 that says some buffer had no line */

struct scn_tl_chunk {
  uint32_t bytes;       /* record bytes after the header */
  uint32_t count;       /* records in them */
  uint32_t tid;         /* the thread that made them (the end mark: the thread leaving) */
  uint8_t type;         /* SCN_TL_RECORDS or SCN_TL_END */
  uint8_t tick_shift;   /* record times are in units of 2^tick_shift ticks */
  uint16_t mark;        /* SCN_TL_MARK */
  uint64_t seq;         /* the first record's seq (SCN_TL_END: records made; version 3: numbers taken) */
  uint64_t last_seq;    /* the last record's */
  uint64_t ns;          /* CLOCK_MONOTONIC read beside the first record's tick */
  uint64_t ns_span;     /* CLOCK_MONOTONIC at the flush, minus ns */
  uint64_t tick;        /* the first record's tick */
  uint64_t tick_span;   /* tick at the flush, minus tick */
  uint32_t census;      /* bytes of the census after the records: varint pairs (kind code, records), codes rising */
  uint32_t moved;       /* records with a span (moved reallocs: two numbers each) */
};
#define SCN_TL_CHUNK_SIZE 72
#define SCN_TL_MAX_CENSUS 192   /* 45 codes at most, 4 bytes a pair at most in a chunk */

_Static_assert(sizeof(struct scn_trace_record) == 64, "records are 64 bytes");
_Static_assert(sizeof(struct scn_trace_header) == 64, "the header is one record long");
_Static_assert(sizeof(struct scn_tl_chunk) == SCN_TL_CHUNK_SIZE, "chunk headers are 72 bytes");

enum { SCN_TL_SEQ_NEXT = 0x40, SCN_TL_EXT = 0x80, SCN_TL_CODE = 0x3f };
enum { SCN_TL_X_FLAGS = 1, SCN_TL_X_ERR = 2, SCN_TL_X_SPAN = 4, SCN_TL_X_RAW = 8, SCN_TL_X_TIME = 16,
       SCN_TL_X_CPU = 32 };
#define SCN_TL_MAX_RECORD 96   /* an encoded record never takes more */

/* Fields of arg[0], arg[1], arg[2], result: 2 bits each, low first. 0: absent, 1: size, 2: pointer.
 * A kind code without a layout (0) is unknown: the decoder stops there. */
#define SCN_TL_L(a0, a1, a2, r) \
  (SCN_TL_F_##a0 | SCN_TL_F_##a1 << 2 | SCN_TL_F_##a2 << 4 | SCN_TL_F_##r << 6 | 0x100)
enum { SCN_TL_F__, SCN_TL_F_S, SCN_TL_F_P };   /* absent, size, pointer */
static const uint16_t scn_tl_layout[64] = {
  [K_MALLOC] = SCN_TL_L(S, _, _, P), [K_CALLOC] = SCN_TL_L(S, S, _, P),
  [K_REALLOC] = SCN_TL_L(P, S, _, P), [K_REALLOCARRAY] = SCN_TL_L(P, S, S, P),
  [K_FREE] = SCN_TL_L(P, _, _, _), [K_POSIX_MEMALIGN] = SCN_TL_L(S, S, _, P),
  [K_ALIGNED_ALLOC] = SCN_TL_L(S, S, _, P), [K_MEMALIGN] = SCN_TL_L(S, S, _, P),
  [K_VALLOC] = SCN_TL_L(S, _, _, P), [K_PVALLOC] = SCN_TL_L(S, _, _, P),
  [K_NEW] = SCN_TL_L(S, _, _, P), [K_NEW_NOTHROW] = SCN_TL_L(S, _, _, P),
  [K_NEW_ALIGNED] = SCN_TL_L(S, S, _, P), [K_NEW_ALIGNED_NOTHROW] = SCN_TL_L(S, S, _, P),
  [K_NEW_ARRAY] = SCN_TL_L(S, _, _, P), [K_NEW_ARRAY_NOTHROW] = SCN_TL_L(S, _, _, P),
  [K_NEW_ARRAY_ALIGNED] = SCN_TL_L(S, S, _, P), [K_NEW_ARRAY_ALIGNED_NOTHROW] = SCN_TL_L(S, S, _, P),
  [K_DELETE] = SCN_TL_L(P, _, _, _), [K_DELETE_SIZED] = SCN_TL_L(P, S, _, _),
  [K_DELETE_ALIGNED] = SCN_TL_L(P, S, _, _), [K_DELETE_SIZED_ALIGNED] = SCN_TL_L(P, S, S, _),
  [K_DELETE_NOTHROW] = SCN_TL_L(P, _, _, _), [K_DELETE_ALIGNED_NOTHROW] = SCN_TL_L(P, S, _, _),
  [K_DELETE_ARRAY] = SCN_TL_L(P, _, _, _), [K_DELETE_ARRAY_SIZED] = SCN_TL_L(P, S, _, _),
  [K_DELETE_ARRAY_ALIGNED] = SCN_TL_L(P, S, _, _), [K_DELETE_ARRAY_SIZED_ALIGNED] = SCN_TL_L(P, S, S, _),
  [K_DELETE_ARRAY_NOTHROW] = SCN_TL_L(P, _, _, _), [K_DELETE_ARRAY_ALIGNED_NOTHROW] = SCN_TL_L(P, S, _, _),
  [K_THREAD_START] = SCN_TL_L(S, _, _, _), [K_THREAD_EXIT] = SCN_TL_L(_, _, _, _),
  [K_MMAP] = SCN_TL_L(S, S, S, P), [K_MUNMAP] = SCN_TL_L(P, S, _, S),
  [K_MREMAP] = SCN_TL_L(P, S, S, P), [K_WINDOW] = SCN_TL_L(S, S, S, _), [K_MPROTECT] = SCN_TL_L(P, S, S, S),
};

/* An end mark's page-fault reading, for `convert --touch auto`: the process's minor faults when tracing
 * started (the constructor; a forked child: at the fork) in ns_span, at the end mark in last_seq; tick_span
 * packs the pages of the tracer's own buffers written (bits 0-19), the inner pages of sampled blocks not
 * resident when they were malloc'ed (bits 20-41) and, of them, those resident when they were freed (42-63),
 * each saturating. last_seq 0 (a process always has faulted by then): not measured, as in logs of older
 * tracers. */
struct scn_tl_faults { uint64_t start, end, own, fresh, written; };

static inline uint64_t scn_tl_sat(uint64_t v, int bits) { return v < (1ull << bits) ? v : (1ull << bits) - 1; }

static inline void scn_tl_end_set_faults(struct scn_tl_chunk *ch, uint64_t start, uint64_t end, uint64_t own,
                                         uint64_t fresh, uint64_t written) {
  ch->ns_span = start;
  ch->last_seq = end;
  ch->tick_span = scn_tl_sat(own, 20) | scn_tl_sat(fresh, 22) << 20 | scn_tl_sat(written, 22) << 42;
}

static inline int scn_tl_end_faults(const struct scn_tl_chunk *ch, struct scn_tl_faults *f) {
  if (ch->type != SCN_TL_END || !ch->last_seq || ch->last_seq < ch->ns_span) return 0;
  f->start = ch->ns_span;
  f->end = ch->last_seq;
  f->own = ch->tick_span & 0xfffff;
  f->fresh = ch->tick_span >> 20 & 0x3fffff;
  f->written = ch->tick_span >> 42;
  return 1;
}

/* An end mark's file-backed resident memory: the process's RssFile (its code, libraries and files mapped) in KiB
 * when it left, in the `moved` field (an end mark has no records to move), saturating; 0: not read (tracers
 * before it, or no /proc). A fitted model stands in for it (trace/model: the program's image). */
static inline void scn_tl_end_set_file_kib(struct scn_tl_chunk *ch, uint64_t kib) {
  ch->moved = (uint32_t)scn_tl_sat(kib, 32);
}

static inline uint64_t scn_tl_end_file_kib(const struct scn_tl_chunk *ch) {
  return ch->type == SCN_TL_END ? ch->moved : 0;
}

static inline uint64_t scn_tl_zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static inline int64_t scn_tl_unzigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

static inline uint8_t *scn_tl_put(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

/* ------------------------------------------------------------------ encoding
 * One thread's chunk being written: what the next record is a delta against. */
struct scn_tl_encoder {
  uint64_t seq, ptr;          /* previous record's seq, previous non-NULL pointer */
  uint64_t step;              /* what seq grows by a record, as the decoder knows it */
  uint64_t cpu;               /* the chunk's previous CPU clock reading (0: none yet) */
};

static inline void scn_tl_encoder_start(struct scn_tl_encoder *e, uint64_t seq) {
  e->seq = seq;               /* the chunk header's first seq: the first record's, with a step of 0 */
  e->ptr = 0;
  e->step = 0;
  e->cpu = 0;
}

/* Pointers can be stored as deltas >> 3 when every one of the record is 8-aligned against the last. */
__attribute__((always_inline)) static inline int scn_tl_aligned(uint16_t layout, const uint64_t v[4], uint64_t prev) {
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++)
    if ((layout >> (2 * i) & 3) == SCN_TL_F_P && v[i]) {
      if ((v[i] - prev) & 7) return 0;
      prev = v[i];
    }
  return 1;
}

/* Encodes r at p (version 4); returns the end. At most SCN_TL_MAX_RECORD bytes. A `step` (not 0) is a time mark:
 * the records after this one advance seq by it; a `cpu` (not 0, version 6) the thread's CPU clock read at it. r->ns
 * and r->dur_ns are not stored (times are the seqs'). Always inlined, loops unrolled: with a constant kind the
 * layout's branches fold away (gcc -O2 kept both loops, about 40 instructions a call, until told to unroll them). */
__attribute__((always_inline)) static inline uint8_t *scn_tl_encode(struct scn_tl_encoder *e, uint8_t *p,
                                                                   const struct scn_trace_record *r, uint64_t step,
                                                                   uint64_t cpu) {
  uint16_t layout = scn_tl_layout[r->kind & SCN_TL_CODE];
  const uint64_t v[4] = {r->arg[0], r->arg[1], r->arg[2], r->result};
  uint64_t ptr = e->ptr, next = e->seq + e->step;   /* in registers: the byte stores below may alias *e */
  int raw = !scn_tl_aligned(layout, v, ptr);
  uint8_t x = (uint8_t)((r->flags ? SCN_TL_X_FLAGS : 0) | (r->err ? SCN_TL_X_ERR : 0) | (r->span ? SCN_TL_X_SPAN : 0) |
                        (raw ? SCN_TL_X_RAW : 0) | (step ? SCN_TL_X_TIME : 0) | (cpu ? SCN_TL_X_CPU : 0));
  *p++ = (uint8_t)((r->kind & SCN_TL_CODE) | (r->seq == next ? SCN_TL_SEQ_NEXT : 0) | (x ? SCN_TL_EXT : 0));
  if (x) {
    *p++ = x;
    if (r->flags) *p++ = r->flags;
    if (r->err) p = scn_tl_put(p, r->err);
    if (r->span) p = scn_tl_put(p, r->span);
    if (step) p = scn_tl_put(p, step);
    if (cpu) p = scn_tl_put(p, cpu > e->cpu ? cpu - e->cpu : 0);
  }
  if (r->seq != next) p = scn_tl_put(p, scn_tl_zigzag((int64_t)(r->seq - next)));
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) {
    int f = layout >> (2 * i) & 3;
    if (f == SCN_TL_F_S) {
      p = scn_tl_put(p, v[i]);
    } else if (f == SCN_TL_F_P) {
      if (raw) {
        p = scn_tl_put(p, v[i]);
      } else if (!v[i]) {
        *p++ = 0;
        continue;
      } else {
        p = scn_tl_put(p, scn_tl_zigzag((int64_t)(v[i] - ptr) >> 3) + 1);
      }
      if (v[i]) ptr = v[i];
    }
  }
  e->seq = r->seq;
  e->ptr = ptr;
  if (step) e->step = step;
  if (cpu > e->cpu) e->cpu = cpu;
  return p;
}

/* The census of a chunk: records by kind code, so a summary need not decode them. */
static inline uint8_t *scn_tl_put_census(uint8_t *p, const uint32_t counts[64]) {
  for (int k = 1; k < 64; k++)
    if (counts[k]) {
      p = scn_tl_put(p, (uint64_t)k);
      p = scn_tl_put(p, counts[k]);
    }
  return p;
}

/* ------------------------------------------------------------------ decoding */
struct scn_tl_error {
  uint64_t offset;      /* where decoding stopped: bytes into the chunk's payload (or into the buffer given) */
  const char *what;     /* NULL: no error */
};

struct scn_tl_cursor {
  const uint8_t *p, *start, *end;
  struct scn_tl_chunk ch;
  uint32_t left;        /* records still to decode */
  uint64_t seq, ptr, units;
  uint64_t scale;       /* ns per tick, fixed point with 32 fraction bits */
  int v4;               /* version 4: seq steps by `step`, times are the seqs' */
  uint64_t step;
  uint64_t cpu;         /* version 6: the thread's CPU clock at the last reading decoded (0: none yet) */
  uint64_t flush_cpu;   /* version 6: the trailer's (0: none, or the chunk is cut before it) */
  uint32_t body;        /* the bytes of its records: ch.bytes less the trailer */
};

static inline int scn_tl_chunk_parse(const uint8_t *p, size_t avail, struct scn_tl_chunk *ch,
                                     struct scn_tl_error *err) {
  err->what = NULL;
  err->offset = 0;
  if (avail < SCN_TL_CHUNK_SIZE) return 0;
  memcpy(ch, p, sizeof *ch);
  if (ch->mark != SCN_TL_MARK) err->what = "not a chunk header (no chunk mark): the log is damaged";
  else if (ch->type != SCN_TL_RECORDS && ch->type != SCN_TL_END && ch->type != SCN_TL_RECORDS4 &&
           ch->type != SCN_TL_RECORDS6)
    err->what = "unknown chunk type: the log is damaged";
  else if (ch->type == SCN_TL_END && (ch->count || ch->bytes)) err->what = "an end mark with records: damaged";
  else if (ch->count > ch->bytes || ch->tick_shift > 63 || ch->census > SCN_TL_MAX_CENSUS ||
           (ch->type != SCN_TL_END && ch->moved > ch->count) ||   /* an end mark's moved: scn_tl_end_file_kib */
           (ch->type != SCN_TL_END && ch->last_seq < ch->seq) ||
           (ch->type == SCN_TL_RECORDS6 && ch->bytes < SCN_TL_TRAILER + ch->count))
    err->what = "chunk header out of range: damaged";
  else if (ch->type != SCN_TL_END && !ch->tid) err->what = "a chunk of thread id 0: the log is damaged";
  return err->what ? -1 : 1;
}

/* avail: payload bytes present (less than ch->bytes when the log is cut short). */
static inline void scn_tl_cursor_init(struct scn_tl_cursor *c, const struct scn_tl_chunk *ch, const uint8_t *payload,
                                      size_t avail) {
  c->ch = *ch;
  c->start = c->p = payload;
  c->body = ch->type == SCN_TL_RECORDS6 ? ch->bytes - SCN_TL_TRAILER : ch->bytes;
  c->end = payload + (avail < c->body ? avail : c->body);
  c->flush_cpu = 0;
  if (ch->type == SCN_TL_RECORDS6 && avail >= ch->bytes) memcpy(&c->flush_cpu, payload + c->body, 8);
  c->left = ch->type != SCN_TL_END ? ch->count : 0;
  c->v4 = ch->type == SCN_TL_RECORDS4 || ch->type == SCN_TL_RECORDS6;
  c->seq = c->v4 ? ch->seq : ch->seq - 1;
  c->step = c->v4 ? 0 : 1;
  c->ptr = 0;
  c->units = 0;
  c->cpu = 0;
  c->scale = ch->tick_span ? (uint64_t)(((unsigned __int128)ch->ns_span << 32) / ch->tick_span) : 0;
}

static inline int scn_tl_get(const uint8_t **pp, const uint8_t *end, uint64_t *v) {
  const uint8_t *p = *pp;
  if (__builtin_expect(p < end && *p < 0x80, 1)) {   /* most deltas and sizes fit in one byte */
    *v = *p;
    *pp = p + 1;
    return 1;
  }
  uint64_t x = 0;
  for (int s = 0; s < 70; s += 7) {
    if (p >= end) return 0;
    uint8_t b = *p++;
    x |= (uint64_t)(b & 0x7f) << s;
    if (!(b & 0x80)) {
      *v = x;
      *pp = p;
      return 1;
    }
  }
  return 0;
}

/* A tick (since the chunk's first) in CLOCK_MONOTONIC ns: within [ns, ns + ns_span]. */
static inline uint64_t scn_tl_ns(const struct scn_tl_cursor *c, uint64_t ticks) {
  if (ticks >= c->ch.tick_span) return c->ch.ns + c->ch.ns_span;
  return c->ch.ns + (uint64_t)(((unsigned __int128)ticks * c->scale) >> 32);
}

/* One record at c->p; 0 when it is cut short or damaged (err says which), c->p unchanged. */
static inline int scn_tl_decode_one(struct scn_tl_cursor *c, struct scn_trace_record *r, struct scn_tl_error *err) {
  const uint8_t *p = c->p, *end = c->end;
  uint64_t v, seq = c->seq, ptr = c->ptr, units = c->units, step = c->step, next_step = 0, cpu = c->cpu;
  if (p >= end) goto cut;
  uint8_t k = *p++, x = 0;
  uint16_t layout = scn_tl_layout[k & SCN_TL_CODE];
  if (!layout) {
    err->what = "unknown record kind: the log is damaged";
    goto stop;
  }
  r->kind = k & SCN_TL_CODE;
  r->flags = 0;
  r->err = 0;
  r->dur_ns = 0;
  r->span = 0;
  if (k & SCN_TL_EXT) {
    if (p >= end) goto cut;
    x = *p++;
    if (x & SCN_TL_X_FLAGS) {
      if (p >= end) goto cut;
      r->flags = *p++;
    }
    if (x & SCN_TL_X_ERR) {
      if (!scn_tl_get(&p, end, &v)) goto cut;
      r->err = (uint16_t)v;
    }
    if (x & SCN_TL_X_SPAN) {
      if (!scn_tl_get(&p, end, &v)) goto cut;
      r->span = (uint32_t)v;
    }
    if ((x & SCN_TL_X_TIME) && c->v4) {
      if (!scn_tl_get(&p, end, &next_step)) goto cut;
      if (!next_step) {
        err->what = "a time mark of step 0: the log is damaged";
        goto stop;
      }
    }
    if (x & SCN_TL_X_CPU) {
      if (!scn_tl_get(&p, end, &v)) goto cut;
      cpu += v;
    }
  }
  if (k & SCN_TL_SEQ_NEXT) {
    seq += step;
  } else {
    if (!scn_tl_get(&p, end, &v)) goto cut;
    seq += step + (uint64_t)scn_tl_unzigzag(v);
  }
  if (!c->v4) {
    if (!scn_tl_get(&p, end, &v)) goto cut;
    units += v;
  }
  uint64_t f[4] = {0, 0, 0, 0};
  for (int i = 0; i < 4; i++) {
    int t = layout >> (2 * i) & 3;
    if (!t) continue;
    if (!scn_tl_get(&p, end, &v)) goto cut;
    if (t == SCN_TL_F_S || (x & SCN_TL_X_RAW)) f[i] = v;
    else if (v) f[i] = ptr + ((uint64_t)scn_tl_unzigzag(v - 1) << 3);
    if (t == SCN_TL_F_P && f[i]) ptr = f[i];
  }
  r->seq = seq;
  r->tid = c->ch.tid;
  uint64_t ticks = units << c->ch.tick_shift;
  if (c->v4) {        /* the seq is the time, in ticks >> tick_shift */
    uint64_t at = seq << c->ch.tick_shift;
    ticks = at > c->ch.tick ? at - c->ch.tick : 0;
    if (next_step) c->step = next_step;
  }
  r->ns = scn_tl_ns(c, ticks);
  r->arg[0] = f[0];
  r->arg[1] = f[1];
  r->arg[2] = f[2];
  r->result = f[3];
  c->p = p;
  c->seq = seq;
  c->ptr = ptr;
  c->units = units;
  c->cpu = cpu;
  return 1;
cut:
  err->what = c->end < c->start + c->body ? "the log is cut short inside a record"
                                              : "a record runs past its chunk: the log is damaged";
stop:
  err->offset = (uint64_t)(c->p - c->start);
  return 0;
}


/* Adds a census (len bytes) to counts; its total, or -1 when it is damaged. */
static inline int64_t scn_tl_read_census(const uint8_t *p, size_t len, uint64_t counts[64]) {
  const uint8_t *end = p + len;
  uint64_t k, n, prev = 0;
  int64_t total = 0;
  while (p < end) {
    if (!scn_tl_get(&p, end, &k) || !scn_tl_get(&p, end, &n) || k <= prev || k > 63 || !scn_tl_layout[k]) return -1;
    counts[k] += n;
    total += (int64_t)n;
    prev = k;
  }
  return total;
}

/* Up to cap records of the chunk; 0 at its end or when it stopped early (err.what set). cpu (NULL: not wanted):
 * each record's CPU clock, ns (version 6: the last reading at or before it; 0 before the chunk's first reading and in
 * older logs). */
static inline size_t scn_tl_decode_cpu(struct scn_tl_cursor *c, struct scn_trace_record *out, uint64_t *cpu,
                                       size_t cap, struct scn_tl_error *err) {
  size_t n = 0;
  err->what = NULL;
  err->offset = (uint64_t)(c->p - c->start);
  while (n < cap && c->left) {
    if (!scn_tl_decode_one(c, out + n, err)) {
      c->left = 0;
      break;
    }
    if (c->left == 1 && c->flush_cpu > c->cpu) c->cpu = c->flush_cpu;   /* the last record: the flush's reading */
    if (cpu) cpu[n] = c->cpu;
    c->left--;
    n++;
  }
  if (!c->left && !err->what && c->p != c->start + c->body) {
    if (c->end < c->start + c->body) err->what = "the log is cut short inside a chunk";
    else err->what = "a chunk holds more bytes than its records: the log is damaged";
    err->offset = (uint64_t)(c->p - c->start);
  }
  return n;
}

static inline size_t scn_tl_decode(struct scn_tl_cursor *c, struct scn_trace_record *out, size_t cap,
                                   struct scn_tl_error *err) {
  return scn_tl_decode_cpu(c, out, NULL, cap, err);
}

#endif
