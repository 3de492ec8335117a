/* Exact replay of a captured trace (`replay "app.ops"`).
 *
 * The ops file (format in docs/capture.md, "The ops file"; ops encoded as in opsfmt.h, a
 * byte of kind and flags then varints: 2-6 bytes an op) holds each captured
 * thread's calls in order, one section per thread. Pointers became slots;
 * every slot carries a state counter (2g: free for generation g, 2g+1: live). An op that the
 * trace shows depending on another thread (a cross-thread free, or reuse of a
 * slot another thread freed) waits for the state it expects, so the replay
 * keeps the handoffs and their order without serialising the whole trace.
 *
 * Memory: each thread reads its section through a window of SCN_R_WINDOW
 * bytes and decodes an op at a time (pread into a buffer mapped when the
 * thread starts and unmapped when it ends), so the replay's own resident memory is a few pages per live thread
 * and the slot table (live objects), whatever the trace's length; the file's
 * pages are page cache, not the process's RSS.
 *
 * Threads: a thread the capture saw being created (flag SCN_R_DEFERRED) is not
 * started with the others: a SPAWN op in its creator's section starts it, in
 * the captured order of thread creations, after JOIN ops have waited for the
 * threads that had ended by then; an EXIT op at the end of a section holds
 * the thread until the creations it outlived in the capture have happened.
 * So no more threads are alive at once than in the program, and threads that
 * overlapped still overlap. The captured main thread (flag SCN_R_MAIN) runs
 * on the process's main thread. The set-up of a window (flag SCN_R_SETUP: a capture of
 * a server from ready to its client's end) runs on the main thread before the
 * clock starts, and makes the objects and mappings live when the window opened.
 *
 * Back-pressure: in the program a producer blocked on its bounded queue; the
 * replay's handoffs alone would let it run ahead of its consumer and hold far
 * more memory than the program did. The converter (runtime/tools/convert.c, pace)
 * counts each thread's RETURNS: the positions (1 plus the bytes) of its blocks
 * that other threads freed, in capture order. A FREE of another thread's block
 * names that thread in aux and the positions in size, and adds them to that
 * thread's counter here (an atomic on a cache line of its own). An op with flag
 * SYNC carries in step how much more the thread needs than at its previous
 * SYNC: there the thread waits until its returns reach what it needs, which is
 * what the capture's returns were at that point less the window W. Only
 * allocations get SYNC. So a producer never has more than W positions more of
 * its blocks unfreed than the capture had; threads that do not hand blocks to
 * each other are not held to the capture's interleaving at all (an earlier
 * design held every thread within W of the others in capture order, which made
 * a replay run its threads in the rhythm of the capture's allocator: thread_churn
 * under jemalloc took glibc's pairs of threads, and far more page faults).
 * A single-threaded replay pays one flag test per op.
 *
 * Why this cannot deadlock. Every wait of the replay but JOIN is for ops that
 * come earlier in capture order: a free or a reuse for the slot's previous op,
 * a SYNC for frees before its op (returns counted up to it, less W), an EXIT or
 * a SPAWN for earlier creations. Take, among the ops not yet done of threads
 * not in a JOIN, the one first in capture order: everything it waits for is
 * done, so it runs. A thread in a JOIN waits for a thread whose captured end
 * came before the JOIN: that thread's ops up to its end are earlier than the
 * joiner's next op, so they are done or run in turn by the same argument, and
 * its ops after its captured end (glibc frees a thread's cache after the key
 * destructors, where the tracer records the end) are frees, which wait only for
 * their blocks' earlier ops. tests/test_replay_backpressure.py replays a
 * producer/consumer capture at most 1.1x its peak of live bytes (and 0.8x at
 * least in the best of three replays: nothing holds a replay's consumer back),
 * and shows a producer waiting for its consumer's returns and for nothing else.
 *
 * Blocks: the header's touch mode says what the replay stores into each new
 * block and into the grown part of a realloc, as the program would have.
 *
 * Mappings: the program's own anonymous mmaps (MAP, UNMAP of a page range,
 * REMAP) are made with the same sizes at the same points, in slots like the
 * blocks', and touched like blocks when the program could write them.
 *
 * Included by generated programs only; its frees and allocations go through
 * ops.h like any scenario statement. */
#ifndef SCN_REPLAY_H
#define SCN_REPLAY_H
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "opsfmt.h"
#define SCN_R_WINDOW 65536     /* bytes per read */

/* A thread's returns (positions of its blocks other threads freed), alone on
 * its cache line: its consumers add to it, it reads it at each SYNC. */
typedef struct {
  _Atomic uint64_t returned;
  char pad[SCN_CACHE_LINE - sizeof(uint64_t)];
} scn_replay_returns;

typedef struct {
  _Atomic uint64_t state;
  scn_obj obj;
} scn_replay_slot;

static struct {
  int fd;
  const char *path;
  uint64_t *section;         /* threads + 1 byte offsets from ops_at */
  uint32_t *thread_flags;
  off_t ops_at;              /* file offset of the first op's byte */
  scn_replay_slot *slots;
  scn_replay_returns *returns;   /* per thread */
  uint64_t n_slots;
  uint32_t threads, touch;
  _Atomic uint32_t spawned;  /* SPAWN ops done so far */
} scn_replay;

static void scn_replay_read(void *dst, size_t bytes, off_t at) {
  char *p = dst;
  while (bytes) {
    ssize_t got = pread(scn_replay.fd, p, bytes, at);
    if (got <= 0) scn_die("%s is truncated or unreadable", scn_replay.path);
    p += got;
    bytes -= (size_t)got;
    at += got;
  }
}

static int scn_replay_where(const scn_group *g, int index);
static void scn_replay_body(scn_thread *t);

static void scn_replay_load(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) scn_die("cannot open the replay data %s", path);
  scn_replay.fd = fd;
  scn_replay.path = path;
  struct stat st;
  scn_replay_header h;
  if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof h)
    scn_die("%s is not a scenc replay file (too short)", path);
  scn_replay_read(&h, sizeof h, 0);
  if (memcmp(h.magic, "SCNOPS", 6) != 0 || h.magic[7] != 0) scn_die("%s is not a scenc replay file (bad magic)", path);
  /* The version byte is printed as a number: a damaged file may hold any byte there,
     and a raw byte would make the message itself unreadable (not UTF-8). */
  if (h.magic[6] != '0' + SCN_R_VERSION)   /* older versions: docs/capture.md, "The ops file" */
    scn_die("%s is a version %d replay file; this program reads version %d: convert the capture again", path,
            (int)(unsigned char)h.magic[6] - '0', SCN_R_VERSION);
  size_t table = (h.threads + 1) * sizeof(uint64_t) + ((h.threads * sizeof(uint32_t) + 7) & ~(size_t)7);
  if (h.threads == 0 || h.threads > (1u << 16) || sizeof h + table > (size_t)st.st_size)
    scn_die("%s is truncated or damaged (%lld bytes)", path, (long long)st.st_size);
  scn_replay.section = scn_arena_alloc(table);
  scn_replay_read(scn_replay.section, table, sizeof h);
  scn_replay.thread_flags = (uint32_t *)(scn_replay.section + h.threads + 1);
  scn_replay.ops_at = (off_t)(sizeof h + table);
  scn_replay.threads = h.threads;
  scn_replay.touch = h.touch;
  scn_replay.n_slots = h.slots;
  const uint64_t *sec = scn_replay.section;
  uint64_t need = sizeof h + table + sec[h.threads];
  if (sec[h.threads] > (uint64_t)st.st_size || need != (uint64_t)st.st_size)
    scn_die("%s is truncated or damaged (%lld bytes, expected %llu)", path, (long long)st.st_size,
            (unsigned long long)need);
  int sane = sec[0] == 0 && h.slots <= h.ops && h.ops <= sec[h.threads] && h.touch <= SCN_R_TOUCH_ALL;
  for (uint32_t i = 0; sane && i < h.threads; i++) sane = sec[i] <= sec[i + 1];
  if (!sane) scn_die("%s is damaged (an index points outside it)", path);
  scn_replay.slots = scn_arena_alloc((h.slots ? h.slots : 1) * sizeof *scn_replay.slots);
  scn_replay.returns = scn_arena_alloc(h.threads * sizeof *scn_replay.returns);
  for (uint32_t i = 0; i < h.threads; i++) atomic_init(&scn_replay.returns[i].returned, 0);
  scn_threads_place(scn_replay_where);
}

static int scn_replay_where(const scn_group *g, int index) {
  if (g->body != scn_replay_body) return SCN_START_NOW;
  uint32_t flags = scn_replay.thread_flags[index];
  return flags & SCN_R_SETUP ? SCN_START_FIRST : flags & SCN_R_DEFERRED ? SCN_START_LATER
         : flags & SCN_R_MAIN ? SCN_START_ON_MAIN : SCN_START_NOW;
}

/* Every index an op carries stays inside the file's tables, so a damaged file
 * is a message, not a crash. (It can still make a thread wait for a slot
 * state that never comes.) */
static int scn_replay_op_sane(const scn_replay_op *op) {
  uint64_t slots = scn_replay.n_slots;
  switch (op->kind) {
    case SCN_R_SPAWN: return op->slot < scn_replay.threads && (scn_replay.thread_flags[op->slot] & SCN_R_DEFERRED);
    case SCN_R_JOIN: return op->slot < scn_replay.threads;
    case SCN_R_EXIT: return 1;
    case SCN_R_MAP: return op->slot < slots;
    case SCN_R_UNMAP: return op->slot < slots && op->size % 4096 == 0;
    case SCN_R_REMAP: return op->slot < slots && op->aux < slots;
    case SCN_R_FREE: return (op->aux == SCN_R_NONE || op->aux < scn_replay.threads) &&
                            (op->slot == SCN_R_NONE || op->slot < slots);
    case SCN_R_REALLOC:
      if (op->aux != SCN_R_NONE && op->aux >= slots) return 0;
      /* fall through */
    default: return op->kind <= SCN_R_VALLOC && (op->slot == SCN_R_NONE || op->slot < slots);
  }
}

/* A thread's section, read SCN_R_WINDOW bytes at a time and decoded an op at a
 * time. The buffer has SCN_OPS_MAX bytes more than a window, so an op is
 * decoded in place whatever its bytes hold; it is refilled (its undecoded
 * tail moved to the front) once fewer than SCN_OPS_MAX bytes are left. */
typedef struct {
  uint8_t *buf;
  const uint8_t *at, *end;   /* bytes read, not yet decoded */
  uint64_t next, last;       /* bytes of the section not yet read, from ops_at */
  scn_ops_state state;
} scn_replay_cursor;

static void scn_replay_refill(scn_replay_cursor *c) {
  size_t kept = (size_t)(c->end - c->at);
  memmove(c->buf, c->at, kept);
  uint64_t left = c->last - c->next;
  size_t n = left < SCN_R_WINDOW - kept ? (size_t)left : SCN_R_WINDOW - kept;
  scn_replay_read(c->buf + kept, n, scn_replay.ops_at + (off_t)c->next);
  c->next += n;
  c->at = c->buf;
  c->end = c->buf + kept + n;
}

static inline int scn_replay_next(scn_replay_cursor *c, scn_replay_op *op) {
  if (__builtin_expect(c->end - c->at < SCN_OPS_MAX, 0)) {
    if (c->next < c->last) scn_replay_refill(c);
    if (c->at == c->end) return 0;
  }
  c->at = scn_ops_decode(c->at, op, &c->state);
  if (__builtin_expect(c->at > c->end, 0) || !scn_replay_op_sane(op))
    scn_die("%s is damaged (an index points outside it)", scn_replay.path);
  return 1;
}

/* The slot's state before this op. An op that waits names it (from its
 * generation) and waits until the slot reaches it; the other thread's release
 * store publishes the object with it. One that does not wait is on a slot this
 * thread touched last (the ops file leaves its generation out): its state is
 * this thread's own last store. */
static inline uint64_t scn_replay_await(scn_replay_slot *s, uint64_t state, int wait) {
  if (!wait) return atomic_load_explicit(&s->state, memory_order_relaxed);
  unsigned spins = 0;
  while (atomic_load_explicit(&s->state, memory_order_acquire) != state)
    if (++spins > 64) sched_yield();
  return state;
}

static inline void scn_replay_publish(scn_replay_slot *s, scn_obj o, uint64_t state) {
  s->obj = o;
  atomic_store_explicit(&s->state, state, memory_order_release);
}

/* What a program does to a block it just got: [from, size) is the new part (the
 * ops file's touch modes are ops.h's SCN_TOUCH_*). */
_Static_assert((int)SCN_R_TOUCH_FIRST == (int)SCN_TOUCH_FIRST && (int)SCN_R_TOUCH_PAGES == (int)SCN_TOUCH_PAGES &&
               (int)SCN_R_TOUCH_ALL == (int)SCN_TOUCH_ALL, "one numbering of the touch modes");
static inline void scn_replay_touch(scn_obj o, size_t from) { scn_touch_new(o, from, (int)scn_replay.touch); }

static inline scn_obj scn_replay_alloc(scn_thread *t, const scn_replay_op *op) {
  scn_obj o;
  switch (op->kind) {
    case SCN_R_MALLOC: o = scn_malloc(t, op->size); break;
    case SCN_R_CALLOC: o = scn_calloc(t, op->aux, op->size); break;
    case SCN_R_ALIGNED_ALLOC: o = scn_aligned_alloc(t, op->aux, op->size); break;
    case SCN_R_POSIX_MEMALIGN: o = scn_posix_memalign(t, op->aux, op->size); break;
    case SCN_R_VALLOC: o = scn_memalign(t, 4096, op->size); break;
    default: o = scn_memalign(t, op->aux, op->size); break;
  }
  scn_replay_touch(o, 0);
  return o;
}

static void scn_replay_free(scn_thread *t, const scn_replay_op *op) {
  if (op->slot == SCN_R_NONE) {
    /* free(NULL) as in the trace: hidden from the compiler, which drops free(0). */
    scn_obj none = SCN_NULL_OBJ;
    __asm__("" : "+r"(none.ptr));
    scn_free(t, none);
    return;
  }
  scn_replay_slot *s = &scn_replay.slots[op->slot];
  uint64_t state = scn_replay_await(s, 2ull * op->gen + 1, op->flags & SCN_R_WAIT);
  scn_free(t, s->obj);
  scn_replay_publish(s, SCN_NULL_OBJ, state + 1);
  if (op->aux != SCN_R_NONE)      /* a return to the thread that made the block */
    atomic_fetch_add_explicit(&scn_replay.returns[op->aux].returned, op->size, memory_order_release);
}

static void scn_replay_realloc(scn_thread *t, const scn_replay_op *op) {
  scn_obj old = SCN_NULL_OBJ;
  scn_replay_slot *o = NULL;
  uint64_t old_state = 0;
  if (op->aux != SCN_R_NONE) {
    o = &scn_replay.slots[op->aux];
    old_state = scn_replay_await(o, 2ull * op->aux_gen + 1, op->flags & SCN_R_WAIT_OLD);
    old = o->obj;
  }
  size_t kept = old.size;
  scn_obj r = scn_realloc(t, old, op->size);
  scn_replay_touch(r, kept);
  if (o) scn_replay_publish(o, SCN_NULL_OBJ, old_state + 1);
  if (op->slot != SCN_R_NONE) {
    scn_replay_slot *s = &scn_replay.slots[op->slot];
    scn_replay_publish(s, r, scn_replay_await(s, 2ull * op->gen, op->flags & SCN_R_WAIT) + 1);
  }
}

/* The program's own mappings: not allocator calls, so not counted; touched
 * like blocks when writable. */
static void scn_replay_map(const scn_replay_op *op) {
  scn_replay_slot *s = &scn_replay.slots[op->slot];
  uint64_t state = scn_replay_await(s, 2ull * op->gen, op->flags & SCN_R_WAIT);
  int writable = op->flags & SCN_R_WRITABLE;
  void *p = mmap(NULL, op->size, writable ? PROT_READ | PROT_WRITE : PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  scn_obj o = { p == MAP_FAILED ? NULL : p, p == MAP_FAILED ? 0 : op->size };
  if (writable) scn_replay_touch(o, 0);
  scn_replay_publish(s, o, state + 1);
}

static void scn_replay_unmap(const scn_replay_op *op) {
  scn_replay_slot *s = &scn_replay.slots[op->slot];
  uint64_t state = scn_replay_await(s, 2ull * op->gen + 1, op->flags & SCN_R_WAIT);
  size_t at = (size_t)op->aux * 4096;
  if (s->obj.ptr && at + op->size <= s->obj.size) munmap((char *)s->obj.ptr + at, op->size);
  if (op->flags & SCN_R_LAST_PIECE) scn_replay_publish(s, SCN_NULL_OBJ, state + 1);
}

static void scn_replay_remap(const scn_replay_op *op) {
  scn_replay_slot *o = &scn_replay.slots[op->aux];
  uint64_t old_state = scn_replay_await(o, 2ull * op->aux_gen + 1, op->flags & SCN_R_WAIT_OLD);
  scn_obj old = o->obj, r = SCN_NULL_OBJ;
  if (old.ptr) {
    /* The system call: mremap's declaration needs _GNU_SOURCE, which generated programs do not define. */
    void *p = (void *)syscall(SYS_mremap, old.ptr, old.size, (size_t)op->size, 1 /* MREMAP_MAYMOVE */);
    if (p != MAP_FAILED) r = (scn_obj){ p, op->size };
  }
  if (op->flags & SCN_R_WRITABLE) scn_replay_touch(r, old.size);
  scn_replay_publish(o, SCN_NULL_OBJ, old_state + 1);
  scn_replay_slot *s = &scn_replay.slots[op->slot];
  scn_replay_publish(s, r, scn_replay_await(s, 2ull * op->gen, op->flags & SCN_R_WAIT) + 1);
}

/* Thread creations happen one after another in the captured order. */
static void scn_replay_await_spawns(uint32_t count) {
  unsigned spins = 0;
  while (atomic_load_explicit(&scn_replay.spawned, memory_order_acquire) < count)
    if (++spins > 64) sched_yield();
}

/* A wait for returns can last as long as a consumer's whole life: spin, then
 * yield, then sleep (1 us, doubling up to 64 us), so a long wait costs little
 * CPU time; the program itself slept on a condition variable. */
static void scn_replay_back_off(unsigned spins) {
  if (spins < 64) return;
  if (spins < 128) {
    sched_yield();
    return;
  }
  unsigned shift = spins - 128 < 6 ? spins - 128 : 6;
  struct timespec nap = { 0, 1000L << shift };
  nanosleep(&nap, NULL);
}

/* Back-pressure (see the top of this file): wait until this thread's blocks
 * that other threads freed reach what it needs. */
static void scn_replay_sync(uint32_t self, uint64_t need) {
  for (unsigned spins = 0; atomic_load_explicit(&scn_replay.returns[self].returned, memory_order_acquire) < need;
       spins++)
    scn_replay_back_off(spins);
}

static void scn_replay_thread_op(scn_thread *t, const scn_replay_op *op) {
  if (op->kind == SCN_R_SPAWN) {
    scn_replay_await_spawns(op->aux);
    scn_thread_spawn(t->group, (int)op->slot);
    atomic_store_explicit(&scn_replay.spawned, op->aux + 1, memory_order_release);
  } else if (op->kind == SCN_R_JOIN) {
    scn_thread_join(t->group, (int)op->slot);
  } else {
    scn_replay_await_spawns(op->aux);
  }
}

static void scn_replay_body(scn_thread *t) {
  const size_t window = SCN_R_WINDOW + SCN_OPS_MAX;
  scn_replay_cursor c = { NULL, NULL, NULL, scn_replay.section[t->index], scn_replay.section[t->index + 1], { 0 } };
  c.buf = mmap(NULL, window, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (c.buf == MAP_FAILED) scn_die("out of memory for the replay's read window");
  c.at = c.end = c.buf;
  uint64_t need = 0;
  scn_replay_op o;
  const scn_replay_op *op = &o;
  while (scn_replay_next(&c, &o)) {
    if (op->flags & SCN_R_SYNC) {
      need += op->step;
      scn_replay_sync((uint32_t)t->index, need);
    }
    switch (op->kind) {
      case SCN_R_FREE: scn_replay_free(t, op); break;
      case SCN_R_REALLOC: scn_replay_realloc(t, op); break;
      case SCN_R_SPAWN: case SCN_R_JOIN: case SCN_R_EXIT: scn_replay_thread_op(t, op); break;
      case SCN_R_MAP: scn_replay_map(op); break;
      case SCN_R_UNMAP: scn_replay_unmap(op); break;
      case SCN_R_REMAP: scn_replay_remap(op); break;
      default:
        if (op->slot == SCN_R_NONE) {
          /* Failed in the trace, so nothing ever freed it: the replay keeps the
           * call and leaves whatever this allocator returns to the end. */
          (void)scn_replay_alloc(t, op);
        } else {
          scn_replay_slot *s = &scn_replay.slots[op->slot];
          uint64_t state = scn_replay_await(s, 2ull * op->gen, op->flags & SCN_R_WAIT);
          scn_replay_publish(s, scn_replay_alloc(t, op), state + 1);
        }
    }
  }
  munmap(c.buf, window);
}
#endif
