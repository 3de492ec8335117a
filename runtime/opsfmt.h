/* The ops file's op encoding (version 5): one encoder, one decoder.
 *
 * API (self-contained: needs only <stdint.h> and <stddef.h>):
 *
 *   scn_ops_state st = {0};                 one per thread section, zeroed at its start
 *   uint8_t out[SCN_OPS_MAX];               an op never takes more than SCN_OPS_MAX bytes
 *   size_t n = scn_ops_encode(out, &op, &st);       appends one op; returns its length (>= 1)
 *   const uint8_t *next = scn_ops_decode(in, &op, &st);   reads one op back
 *
 * The encoder's contract (what lets it leave fields out):
 * - op.flags holds only SCN_R_WAIT, SCN_R_WAIT_OLD, SCN_R_LAST_PIECE,
 *   SCN_R_WRITABLE, SCN_R_SYNC; op.step is the SYNC's growth of the returns
 *   the thread needs (< 2^48) and is written only with SCN_R_SYNC;
 * - op.gen is written only with SCN_R_WAIT, op.aux_gen only with
 *   SCN_R_WAIT_OLD. An op that does not wait is on a slot its own thread
 *   touched last, a fresh one, or one whose last toucher the replay has
 *   joined before it, so the replay knows the generation from the slot's
 *   state, and the decoder gives 0. The converter leaves WAIT out only then;
 * - SCN_R_NONE in slot or aux costs nothing, nor does size 0;
 * - SYNC is a flag of the op itself: a converter that decides an event
 *   syncs before emitting its ops sets it (and step) on the event's first op
 *   (trace/replay.py's writer patches it in after the fact: same bytes).
 * A file: scn_replay_header (magic SCN_R_MAGIC, ops = the number of ops,
 * slots = 1 + the highest slot named), u64[threads + 1] byte offsets of each
 * thread's encoded ops from the first one's (the last is their total), the
 * u32 thread flags padded with zeros to a multiple of 8 bytes, then the
 * threads' ops, each thread's encoded with its own state from zero.
 * The decoder reads at most SCN_OPS_MAX bytes from `in` whatever they hold
 * (each varint stops after 10 bytes): a reader that keeps SCN_OPS_MAX
 * readable bytes past the data it has can decode without bounds checks and
 * compare where it ended with the data's end afterwards.
 *
 * Layout of one op (docs/capture.md, "The ops file", has the whole file):
 *   byte  bits 0-3 kind, 4 WAIT, 5 SYNC, 6 SIZE (a size follows), 7 EXT (an ext byte follows)
 *   [ext] bit 0 WAIT_OLD, 1 LAST_PIECE, 2 WRITABLE, 3 NO_SLOT (slot is NONE), 4 AUX_FLIP
 *   [step]     SYNC: varint
 *   [slot]     unless NO_SLOT: zigzag varint of the difference from the thread's
 *              previous slot (SPAWN, JOIN: a plain varint thread index)
 *   [gen]      WAIT: varint
 *   [aux]      kinds in SCN_OPS_AUX_KINDS have one unless AUX_FLIP (then NONE); the
 *              others have none (NONE) unless AUX_FLIP. REALLOC, REMAP: an old
 *              slot, zigzag from the slot before it; others: a varint
 *   [aux_gen]  WAIT_OLD: varint
 *   [size]     SIZE: varint
 * Varints are LEB128: 7 bits a byte, low first, high bit = more follow. */
#ifndef SCN_OPSFMT_H
#define SCN_OPSFMT_H
#include <stddef.h>
#include <stdint.h>

enum { SCN_R_MALLOC, SCN_R_CALLOC, SCN_R_REALLOC, SCN_R_FREE, SCN_R_ALIGNED_ALLOC, SCN_R_MEMALIGN,
       SCN_R_POSIX_MEMALIGN, SCN_R_VALLOC, SCN_R_SPAWN, SCN_R_JOIN, SCN_R_EXIT, SCN_R_MAP, SCN_R_UNMAP,
       SCN_R_REMAP };
enum { SCN_R_WAIT = 1, SCN_R_WAIT_OLD = 2, SCN_R_LAST_PIECE = 4, SCN_R_WRITABLE = 8, SCN_R_SYNC = 16 };
enum { SCN_R_TOUCH_NONE, SCN_R_TOUCH_FIRST, SCN_R_TOUCH_PAGES, SCN_R_TOUCH_ALL };
/* thread flags: started by a SPAWN op; the process's main thread; the set-up of a window (run to its end on the
 * main thread before the clock starts: the objects live when the window opened) */
enum { SCN_R_DEFERRED = 1, SCN_R_MAIN = 2, SCN_R_SETUP = 4 };
#define SCN_R_NONE 0xffffffffu
#define SCN_R_VERSION 5
#define SCN_R_MAGIC "SCNOPS5"

typedef struct {
  uint8_t kind, flags;
  uint32_t slot;      /* the object this op creates, or frees (free); SPAWN, JOIN: the thread */
  uint32_t aux;       /* realloc: the old slot; calloc: nmemb; aligned: alignment; SPAWN, EXIT: creations before;
                         free: the thread whose block it is, when another's (a return) */
  uint32_t gen;       /* WAIT: the slot's generation this op creates or frees (else 0: see above) */
  uint32_t aux_gen;   /* WAIT_OLD: generation of the old slot */
  uint64_t size;      /* free with aux: the positions it returns (1 + the block's bytes) */
  uint64_t step;      /* SYNC: the growth of the returns the thread needs since its previous SYNC */
} scn_replay_op;

/* The file's header; then u64[threads + 1] byte offsets of each thread's
 * section from the first op's byte (the last is the total), then u32[threads]
 * thread flags padded to 8 bytes, then the sections. */
typedef struct {
  char magic[8];      /* SCN_R_MAGIC */
  uint32_t threads, touch;
  uint64_t slots, ops;
  uint64_t window;    /* the widest thread's back-pressure window, in positions (for the record) */
} scn_replay_header;

typedef struct {
  uint32_t slot;      /* the thread's previous slot: slots are written as differences from it */
} scn_ops_state;

#define SCN_OPS_MAX 64
enum { SCN_OPS_WAIT = 0x10, SCN_OPS_SYNC = 0x20, SCN_OPS_SIZE = 0x40, SCN_OPS_EXT = 0x80 };
enum { SCN_OPS_WAIT_OLD = 1, SCN_OPS_LAST_PIECE = 2, SCN_OPS_WRITABLE = 4, SCN_OPS_NO_SLOT = 8, SCN_OPS_AUX_FLIP = 16 };
/* Kinds whose aux is usually set. */
#define SCN_OPS_AUX_KINDS                                                                                 \
  (1u << SCN_R_CALLOC | 1u << SCN_R_REALLOC | 1u << SCN_R_ALIGNED_ALLOC | 1u << SCN_R_MEMALIGN |          \
   1u << SCN_R_POSIX_MEMALIGN | 1u << SCN_R_VALLOC | 1u << SCN_R_SPAWN | 1u << SCN_R_EXIT |               \
   1u << SCN_R_UNMAP | 1u << SCN_R_REMAP)
#define SCN_OPS_THREAD_KINDS (1u << SCN_R_SPAWN | 1u << SCN_R_JOIN)   /* slot is a thread index */
#define SCN_OPS_SLOT_AUX (1u << SCN_R_REALLOC | 1u << SCN_R_REMAP)     /* aux is a slot */

static inline uint8_t *scn_ops_put(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

static inline uint64_t scn_ops_zigzag(uint32_t from, uint32_t to) {
  int32_t d = (int32_t)(to - from);
  return d < 0 ? ((uint64_t)~(uint32_t)d << 1) | 1 : (uint64_t)(uint32_t)d << 1;
}

static inline uint32_t scn_ops_unzigzag(uint32_t from, uint64_t z) {
  uint32_t d = (uint32_t)(z >> 1);
  return from + (z & 1 ? ~d : d);
}

static inline size_t scn_ops_encode(uint8_t *dst, const scn_replay_op *op, scn_ops_state *st) {
  unsigned thread_slot = (SCN_OPS_THREAD_KINDS >> op->kind) & 1, slot_aux = (SCN_OPS_SLOT_AUX >> op->kind) & 1;
  unsigned aux_default = (SCN_OPS_AUX_KINDS >> op->kind) & 1;
  unsigned ext = (op->flags & SCN_R_WAIT_OLD ? SCN_OPS_WAIT_OLD : 0) |
                 (op->flags & SCN_R_LAST_PIECE ? SCN_OPS_LAST_PIECE : 0) |
                 (op->flags & SCN_R_WRITABLE ? SCN_OPS_WRITABLE : 0) | (op->slot == SCN_R_NONE ? SCN_OPS_NO_SLOT : 0) |
                 ((op->aux != SCN_R_NONE) != aux_default ? SCN_OPS_AUX_FLIP : 0);
  uint8_t *p = dst;
  *p++ = (uint8_t)(op->kind | (op->flags & SCN_R_WAIT ? SCN_OPS_WAIT : 0) | (op->flags & SCN_R_SYNC ? SCN_OPS_SYNC : 0) |
                   (op->size ? SCN_OPS_SIZE : 0) | (ext ? SCN_OPS_EXT : 0));
  if (ext) *p++ = (uint8_t)ext;
  if (op->flags & SCN_R_SYNC) p = scn_ops_put(p, op->step);
  if (op->slot != SCN_R_NONE) {
    if (thread_slot) {
      p = scn_ops_put(p, op->slot);
    } else {
      p = scn_ops_put(p, scn_ops_zigzag(st->slot, op->slot));
      st->slot = op->slot;
    }
  }
  if (op->flags & SCN_R_WAIT) p = scn_ops_put(p, op->gen);
  if (op->aux != SCN_R_NONE) {
    if (slot_aux) {
      p = scn_ops_put(p, scn_ops_zigzag(st->slot, op->aux));
      st->slot = op->aux;
    } else {
      p = scn_ops_put(p, op->aux);
    }
  }
  if (op->flags & SCN_R_WAIT_OLD) p = scn_ops_put(p, op->aux_gen);
  if (op->size) p = scn_ops_put(p, op->size);
  return (size_t)(p - dst);
}

/* A varint of at most 10 bytes; the one-byte case inline and first. */
static inline const uint8_t *scn_ops_get(const uint8_t *p, uint64_t *v) {
  uint64_t b = *p++;
  if (__builtin_expect(b < 0x80, 1)) {
    *v = b;
    return p;
  }
  uint64_t x = b & 0x7f;
  for (unsigned shift = 7; shift < 70; shift += 7) {
    b = *p++;
    x |= (b & 0x7f) << shift;
    if (b < 0x80) break;
  }
  *v = x;
  return p;
}

static inline const uint8_t *scn_ops_decode(const uint8_t *p, scn_replay_op *op, scn_ops_state *st) {
  unsigned h = *p++, ext = h & SCN_OPS_EXT ? *p++ : 0, kind = h & 15;
  uint64_t v = 0;
  op->kind = (uint8_t)kind;
  op->flags = (uint8_t)((h & SCN_OPS_WAIT ? SCN_R_WAIT : 0) | (h & SCN_OPS_SYNC ? SCN_R_SYNC : 0) |
                        (ext & SCN_OPS_WAIT_OLD ? SCN_R_WAIT_OLD : 0) | (ext & SCN_OPS_LAST_PIECE ? SCN_R_LAST_PIECE : 0) |
                        (ext & SCN_OPS_WRITABLE ? SCN_R_WRITABLE : 0));
  op->step = 0;
  if (h & SCN_OPS_SYNC) p = scn_ops_get(p, &op->step);
  op->slot = SCN_R_NONE;
  if (!(ext & SCN_OPS_NO_SLOT)) {
    p = scn_ops_get(p, &v);
    op->slot = (SCN_OPS_THREAD_KINDS >> kind) & 1 ? (uint32_t)v : (st->slot = scn_ops_unzigzag(st->slot, v));
  }
  op->gen = 0;
  if (h & SCN_OPS_WAIT) {
    p = scn_ops_get(p, &v);
    op->gen = (uint32_t)v;
  }
  op->aux = SCN_R_NONE;
  if (((SCN_OPS_AUX_KINDS >> kind) & 1) != !!(ext & SCN_OPS_AUX_FLIP)) {
    p = scn_ops_get(p, &v);
    op->aux = (SCN_OPS_SLOT_AUX >> kind) & 1 ? (st->slot = scn_ops_unzigzag(st->slot, v)) : (uint32_t)v;
  }
  op->aux_gen = 0;
  if (ext & SCN_OPS_WAIT_OLD) {
    p = scn_ops_get(p, &v);
    op->aux_gen = (uint32_t)v;
  }
  op->size = 0;
  if (h & SCN_OPS_SIZE) p = scn_ops_get(p, &op->size);
  return p;
}
#endif
