/* Exact replay of a captured trace (`replay "app.ops"`).
 *
 * The ops file (format in trace/opsfile.py) holds each captured thread's calls
 * in order, one section per thread. Pointers became slots; every slot carries
 * a state counter (2g: free for generation g, 2g+1: live). An op that the
 * trace shows depending on another thread (a cross-thread free, or reuse of a
 * slot another thread freed) waits for the state it expects, so the replay
 * keeps the handoffs and their order without serialising the whole trace.
 * Included by generated programs only; its frees and allocations go through
 * ops.h like any scenario statement. */
#ifndef SCN_REPLAY_H
#define SCN_REPLAY_H
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { SCN_R_MALLOC, SCN_R_CALLOC, SCN_R_REALLOC, SCN_R_FREE, SCN_R_ALIGNED_ALLOC, SCN_R_MEMALIGN,
       SCN_R_POSIX_MEMALIGN, SCN_R_VALLOC };
enum { SCN_R_WAIT = 1, SCN_R_WAIT_OLD = 2 };
#define SCN_R_NONE 0xffffffffu

typedef struct {
  uint8_t kind, flags;
  uint16_t reserved;
  uint32_t slot;      /* the object this op creates, or frees (free) */
  uint32_t aux;       /* realloc: the old slot; calloc: nmemb; aligned: alignment */
  uint32_t gen;       /* the slot's generation this op creates or frees */
  uint32_t aux_gen;   /* realloc: generation of the old slot */
  uint32_t reserved2;
  uint64_t size;
} scn_replay_op;

typedef struct {
  char magic[8];      /* "SCNOPS1\0" */
  uint32_t threads, reserved;
  uint64_t slots, ops;
} scn_replay_header;

typedef struct {
  _Atomic uint64_t state;
  scn_obj obj;
} scn_replay_slot;

static struct {
  const scn_replay_op *ops;
  const uint64_t *section;   /* threads + 1 offsets into ops */
  scn_replay_slot *slots;
  uint32_t threads;
} scn_replay;

static void scn_replay_load(const char *path) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) scn_die("cannot open the replay data %s", path);
  struct stat st;
  if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(scn_replay_header))
    scn_die("%s is not a scenc replay file (too short)", path);
  const char *base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  close(fd);
  if (base == MAP_FAILED) scn_die("cannot map the replay data %s", path);
  const scn_replay_header *h = (const void *)base;
  if (memcmp(h->magic, "SCNOPS1", 8) != 0) scn_die("%s is not a scenc replay file (bad magic)", path);
  if (h->ops > (uint64_t)st.st_size / sizeof(scn_replay_op))
    scn_die("%s is truncated or damaged (%llu ops in %lld bytes)", path, (unsigned long long)h->ops,
            (long long)st.st_size);
  size_t need = sizeof *h + (h->threads + 1) * sizeof(uint64_t) + h->ops * sizeof(scn_replay_op);
  if (h->threads == 0 || (size_t)st.st_size != need)
    scn_die("%s is truncated or damaged (%lld bytes, expected %zu)", path, (long long)st.st_size, need);
  scn_replay.section = (const uint64_t *)(h + 1);
  scn_replay.ops = (const scn_replay_op *)(scn_replay.section + h->threads + 1);
  scn_replay.threads = h->threads;
  /* Every index the replay follows stays inside the file and the slot table,
   * so a damaged file is a message, not a crash. (A damaged file can still
   * make a thread wait for a slot state that never comes.) */
  const uint64_t *sec = scn_replay.section;
  int sane = sec[0] == 0 && sec[h->threads] == h->ops && h->slots <= h->ops;
  for (uint32_t t = 0; sane && t < h->threads; t++) sane = sec[t] <= sec[t + 1];
  for (uint64_t i = 0; sane && i < h->ops; i++) {
    const scn_replay_op *op = &scn_replay.ops[i];
    sane = op->kind <= SCN_R_VALLOC && (op->slot == SCN_R_NONE || op->slot < h->slots) &&
           (op->kind != SCN_R_REALLOC || op->aux == SCN_R_NONE || op->aux < h->slots);
  }
  if (!sane) scn_die("%s is damaged (an index points outside it)", path);
  scn_replay.slots = scn_arena_alloc((h->slots ? h->slots : 1) * sizeof *scn_replay.slots);
}

/* Wait until a slot reaches the state this op expects; the other thread's
 * release store publishes the object with it. */
static inline scn_replay_slot *scn_replay_await(uint32_t slot, uint64_t state, int wait) {
  scn_replay_slot *s = &scn_replay.slots[slot];
  if (wait) {
    unsigned spins = 0;
    while (atomic_load_explicit(&s->state, memory_order_acquire) != state)
      if (++spins > 64) sched_yield();
  }
  return s;
}

static inline void scn_replay_publish(scn_replay_slot *s, scn_obj o, uint64_t state) {
  s->obj = o;
  atomic_store_explicit(&s->state, state, memory_order_release);
}

static inline scn_obj scn_replay_alloc(scn_thread *t, const scn_replay_op *op) {
  switch (op->kind) {
    case SCN_R_MALLOC: return scn_malloc(t, op->size);
    case SCN_R_CALLOC: return scn_calloc(t, op->aux, op->size);
    case SCN_R_ALIGNED_ALLOC: return scn_aligned_alloc(t, op->aux, op->size);
    case SCN_R_POSIX_MEMALIGN: return scn_posix_memalign(t, op->aux, op->size);
    case SCN_R_VALLOC: return scn_memalign(t, 4096, op->size);
    default: return scn_memalign(t, op->aux, op->size);
  }
}

static void scn_replay_body(scn_thread *t) {
  const scn_replay_op *op = scn_replay.ops + scn_replay.section[t->index];
  const scn_replay_op *end = scn_replay.ops + scn_replay.section[t->index + 1];
  for (; op < end; op++) {
    if (op->kind == SCN_R_FREE) {
      if (op->slot == SCN_R_NONE) {
        /* free(NULL) as in the trace: hidden from the compiler, which drops free(0). */
        scn_obj none = SCN_NULL_OBJ;
        __asm__("" : "+r"(none.ptr));
        scn_free(t, none);
        continue;
      }
      scn_replay_slot *s = scn_replay_await(op->slot, 2ull * op->gen + 1, op->flags & SCN_R_WAIT);
      scn_free(t, s->obj);
      scn_replay_publish(s, SCN_NULL_OBJ, 2ull * op->gen + 2);
    } else if (op->kind == SCN_R_REALLOC) {
      scn_obj old = SCN_NULL_OBJ;
      scn_replay_slot *o = NULL;
      if (op->aux != SCN_R_NONE) {
        o = scn_replay_await(op->aux, 2ull * op->aux_gen + 1, op->flags & SCN_R_WAIT_OLD);
        old = o->obj;
      }
      scn_obj r = scn_realloc(t, old, op->size);
      if (o) scn_replay_publish(o, SCN_NULL_OBJ, 2ull * op->aux_gen + 2);
      if (op->slot != SCN_R_NONE) {
        scn_replay_slot *s = scn_replay_await(op->slot, 2ull * op->gen, op->flags & SCN_R_WAIT);
        scn_replay_publish(s, r, 2ull * op->gen + 1);
      }
    } else if (op->slot == SCN_R_NONE) {
      /* Failed in the trace, so nothing ever freed it: the replay keeps the
       * call and leaves whatever this allocator returns to the end. */
      (void)scn_replay_alloc(t, op);
    } else {
      scn_replay_slot *s = scn_replay_await(op->slot, 2ull * op->gen, op->flags & SCN_R_WAIT);
      scn_replay_publish(s, scn_replay_alloc(t, op), 2ull * op->gen + 1);
    }
  }
}
#endif
