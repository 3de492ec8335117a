/* scenc's exact-replay converter: a capture's events -> an ops file (version 5: docs/capture.md, "The ops file")
 * and a JSON report on stdout (trace/replay.py turns it into the summary and the .scn file).
 *
 *   scenc-convert --log app.trace [--no-extra] --ops app.ops [--touch N|auto] [--main-tid TID] [--touch-only] [--whole]
 *   scenc-convert --events --ops app.ops ...      (events packed by trace/replay.py on stdin: ltrace logs)
 *   (--touch-only with --touch auto: when the tracer's sample of pages decides, only {"touch", "touch_auto"},
 *    from the log's index, and no ops file; otherwise the whole conversion, as without it; --whole: a capture with
 *    a window (capture --server) converted whole, set-up and all, not its window)
 *
 * The only implementation of the conversion (the rules: docs/capture.md, "scenc convert: exact replay"):
 * per thread its calls in order; pointers become slots, kept by the thread that freed them (take_slot); an op that must
 * follow another thread's op on its slot waits for it (WAIT, WAIT_OLD); thread starts and exits become SPAWN,
 * JOIN and EXIT; the program's own mappings MAP, UNMAP, REMAP; back-pressure flags SYNC ops (returns, pace).
 * Memory follows the live objects: a hash of live pointers, a slot table, each thread's ops spooled to a
 * temporary file through a 64 KiB buffer, the final file written beside the target and renamed into place
 * (Ctrl-C, or a damaged log, leaves no half-written ops file).
 *
 * Every op goes through emit_op(), runtime/opsfmt.h's encoder (the replay decodes with the same header), and
 * the file's layout through ops_finish(). */
#define _GNU_SOURCE                /* copy_file_range; program_invocation_short_name */
#include "../opsfmt.h"
#include "trace_read.h"

#include <limits.h>
#include <signal.h>

/* ---------------------------------------------------------------- the ops file (vocabulary, encoder: opsfmt.h) */
#define SPILL_BYTES (64 << 10)     /* encoded ops a thread gathers before they go to its spool file */
#define KEEP_OPEN 256              /* spool files kept open (more threads: opened per spill, no fd limit) */
#define MAX_SYNC_STEP (1ull << 48)
#define MAP_FIXED_FLAG 0x10
#define TOUCH_FIRST 1              /* the ops file's touch modes (runtime/opsfmt.h, trace/opsfile.TOUCH_MODES) */
#define TOUCH_PAGES 2
#define TOUCH_AUTO 4               /* --touch auto: the mode whose first-touched pages match the capture's faults */
static const char *const touch_name[] = {"none", "first", "pages", "all"};   /* the report's names of modes 0-3 */
/* Faults a traced process takes between the tracer's constructor and its end mark besides its heap's: the
 * stack, stdio, lazy binding, exit handlers; the allowance is what a minimal C program (one malloc, one printf)
 * takes between the two readings, less the tracer's buffer. Subtracted from the measured faults before they
 * are compared. */
#define FAULT_ALLOWANCE 16

/* Event kind -> the op performing the same kind of call (trace/replay.py's REPLAY_KIND). */
static const uint8_t op_of[EV_CALLS] = {
  SCN_R_MALLOC, SCN_R_MALLOC, SCN_R_MALLOC, SCN_R_CALLOC, SCN_R_REALLOC, SCN_R_REALLOC,
  SCN_R_FREE, SCN_R_FREE, SCN_R_FREE,
  SCN_R_ALIGNED_ALLOC, SCN_R_MEMALIGN, SCN_R_POSIX_MEMALIGN, SCN_R_VALLOC, SCN_R_VALLOC };

/* ---------------------------------------------------------------- state */
typedef struct {
  uint32_t tid, flags;
  uint8_t *buf;                    /* encoded ops not yet in the spool file */
  size_t len;
  scn_ops_state enc;               /* the encoder's state for this thread's section */
  int fd;                          /* its spool file, while kept open */
  uint64_t ops, bytes;             /* ops emitted; bytes in the spool file */
  uint64_t live, live_peak;        /* positions of its blocks live (made or moved by it last), at most */
  uint64_t returned;               /* positions of its blocks other threads have freed so far */
  uint64_t needed;                 /* what its SYNC ops have asked for so far */
  uint64_t sync_step;              /* the next op gets SYNC with this step (0: none) */
  uint32_t *own;                   /* its freed slots: it takes the newest, another thread the oldest */
  size_t own_head, nown, own_cap;  /* own[own_head .. nown) */
  uint64_t horizon;                /* the JOINs done before its next op in the replay: the first `horizon` */
  uint64_t join_seq;               /* its JOIN's place among them; UINT64_MAX until it is joined */
  uint64_t by_kind[EV_CALLS];
} cv_thread;

typedef struct { uint64_t ptr, nbytes; uint32_t slot; } cv_live;
typedef struct { uint64_t key; uint8_t backed; } cv_page;    /* key: page number + 1 (0: empty); modes backing it */
enum { SEEN_NONE, SEEN_FIRST, SEEN_PAGES, SEEN_MODES };        /* touch modes told apart by their pages */
typedef struct { uint64_t start, end, base; uint32_t slot; } cv_piece;

enum { N_FREE_UNKNOWN, N_REALLOC_UNKNOWN, N_REALLOC_FAILED, N_RESULT_UNKNOWN, N_RETURNED_AGAIN = N_RESULT_UNKNOWN +
       EV_CALLS, N_MAP_FIXED, N_UNMAPPED_UNSEEN, N_MREMAP_PART, N_NOTES };
typedef struct { uint64_t count, lines[5]; } cv_note;

typedef struct {
  /* output */
  const char *path;
  char spool[PATH_MAX], tmp[PATH_MAX];
  int touch;
  int64_t main_tid;
  /* threads, by tid */
  cv_thread *t;
  size_t nt, tcap;
  uint32_t *tslot;                 /* open addressing: tid -> index + 1 */
  size_t tslot_cap;
  /* slots */
  uint32_t *gen;
  int32_t *last;                   /* the thread that touched the slot last, -1: none */
  size_t nslots, slot_cap, last_cap;
  uint32_t *joinq;                 /* joined threads with freed slots, in order of their JOINs */
  size_t joinq_head, njoinq, joinq_cap;
  uint32_t donor;                  /* the thread whose slots were taken with a wait last */
  uint64_t nlive_peak;
  /* live pointers */
  cv_live *live;
  size_t nlive, live_cap;          /* live_cap: a power of two */
  uint64_t live_bytes, peak, peak_line, waits;
  /* back-pressure */
  /* thread lifetimes */
  uint32_t spawns;
  uint32_t *ended;
  size_t nended, ended_cap;
  int64_t alive;
  uint64_t peak_threads, spawned, joined;
  /* the program's own mappings */
  cv_piece *pieces;
  size_t npieces, pieces_cap;
  uint32_t *held;
  uint8_t *writable;
  size_t held_cap, writable_cap;
  uint64_t mapped, mapped_peak, maps;
  /* notes, in order of first occurrence */
  cv_note notes[N_NOTES];
  int order[N_NOTES], norder;
  /* --touch auto: the captured heap's pages each mode would have touched first */
  int touch_auto;
  int count_pages;              /* auto with a fault reading to compare with: without one, counting is wasted */
  cv_page *page;
  size_t npages, pages_cap;
  uint64_t faults[SEEN_MODES];
  uint64_t map_faults[SEEN_MODES];  /* of them, pages of the program's own writable mappings (for a model) */
  int in_map;                       /* counting a mapping's pages now */
  /* a window (version 5 logs with marks, unless --whole): before it opens, only what is live is kept (the live
   * hash, slots standing for the order of allocation; mappings as page ranges); when it opens, a set-up thread
   * makes the live objects and mappings, untimed; after it closes, nothing is converted */
  int windowed, phase;
  uint64_t before_calls, after_calls, setup_objects, setup_bytes, setup_maps, setup_mapped, alloc_order;
  uint64_t (*ranges)[3];           /* mappings live before the window: start, end, prot */
  size_t nranges, ranges_cap;
  tr_error err;
} cv;

static volatile sig_atomic_t cv_stop;
static cv *cv_current;             /* for the clean-up on the way out */


/* ---------------------------------------------------------------- notes: calls replayed in a degraded way */
static void note_line(cv *c, int what, uint64_t line) {
  cv_note *n = &c->notes[what];
  if (!n->count) c->order[c->norder++] = what;
  if (n->count < 5) n->lines[n->count] = line;
  n->count++;
}

static void note_text(int what, char *out, size_t len) {
  static const char *const fixed[N_NOTES] = {
    [N_FREE_UNKNOWN] = "free of a pointer never seen allocated (replayed as free(NULL))",
    [N_REALLOC_UNKNOWN] = "realloc of a pointer never seen allocated (replayed as realloc(NULL, n))",
    [N_REALLOC_FAILED] = "realloc that failed in the trace (replayed as realloc(NULL, n))",
    [N_RETURNED_AGAIN] = "pointer returned again without a captured free (old object left live)",
    [N_MAP_FIXED] = "mmap with MAP_FIXED (replaces part of another mapping; not replayed)",
    [N_UNMAPPED_UNSEEN] = "a mapping unmapped without a captured munmap (left mapped)",
    [N_MREMAP_PART] = "mremap of part of a mapping, or of one not seen mapped (not replayed)" };
  if (what >= N_RESULT_UNKNOWN && what < N_RESULT_UNKNOWN + EV_CALLS)
    snprintf(out, len, "%s result not shown by the capture (replayed, never freed)",
             kind_name[what - N_RESULT_UNKNOWN]);
  else snprintf(out, len, "%s", fixed[what]);
}

/* ---------------------------------------------------------------- the ops writer */
#define SPOOL_NAME (PATH_MAX + 16)
static void spool_name(const cv *c, uint32_t i, char *name) { snprintf(name, SPOOL_NAME, "%s/t%u", c->spool, i); }

static int spool_write(cv *c, uint32_t i) {
  cv_thread *t = &c->t[i];
  if (!t->len) return 0;
  char name[SPOOL_NAME];
  spool_name(c, i, name);
  int fd = t->fd >= 0 ? t->fd : open(name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return tr_fail(&c->err, 0, "cannot write %s: %s", name, strerror(errno));
  for (const uint8_t *p = t->buf; p < t->buf + t->len;) {
    ssize_t w = write(fd, p, (size_t)(t->buf + t->len - p));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) { if (t->fd < 0) close(fd); return tr_fail(&c->err, 0, "cannot write %s: %s", name, strerror(errno)); }
    p += w;
  }
  if (i < KEEP_OPEN) t->fd = fd;
  else close(fd);
  t->bytes += t->len;
  t->len = 0;
  return 0;
}

/* The one way an op enters the file: a pending SYNC lands on the thread's next op. */
static void emit_op(cv *c, uint32_t i, scn_replay_op op) {
  cv_thread *t = &c->t[i];
  if (t->sync_step) {
    if (t->sync_step >= MAX_SYNC_STEP) {
      tr_fail(&c->err, 0, "a thread's returns grew by %" PRIu64 " positions between two SYNC ops", t->sync_step);
      cv_stop = -1;
    }
    op.flags |= SCN_R_SYNC;
    op.step = t->sync_step;
    t->sync_step = 0;
  }
  t->len += scn_ops_encode(t->buf + t->len, &op, &t->enc);
  t->ops++;
  if (t->len >= SPILL_BYTES && spool_write(c, i)) cv_stop = -1;
}

static void emit(cv *c, uint32_t i, uint8_t kind, uint8_t flags, uint32_t slot, uint32_t aux, uint32_t gen,
                 uint32_t aux_gen, uint64_t size) {
  emit_op(c, i, (scn_replay_op){kind, flags, slot, aux, gen, aux_gen, size, 0});
}

static int write_all(int fd, const void *p, size_t len) {
  for (const char *q = p; len;) {
    ssize_t w = write(fd, q, len);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return -1;
    q += w;
    len -= (size_t)w;
  }
  return 0;
}

static int copy_spool(cv *c, int out, uint32_t i) {
  char name[SPOOL_NAME];
  spool_name(c, i, name);
  int in = open(name, O_RDONLY | O_CLOEXEC);
  if (in < 0) return errno == ENOENT ? 0 : -1;      /* a thread without ops */
  for (;;) {
    if (cv_stop) { close(in); return -1; }
    ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 26, 0);
    if (n == 0) break;
    if (n < 0) {                                    /* no copy_file_range here: read and write */
      static char buf[1 << 20];
      while ((n = read(in, buf, sizeof buf)) > 0) if (write_all(out, buf, (size_t)n)) break;
      if (n != 0) { close(in); return -1; }
      break;
    }
  }
  close(in);
  unlink(name);
  return 0;
}

static uint64_t thread_window(const cv_thread *t);

/* The header's window: the widest thread's (pace). */
static uint64_t window_of(const cv *c) {
  uint64_t w = 0;
  for (size_t i = 0; i < c->nt; i++) {
    uint64_t tw = thread_window(&c->t[i]);
    if (tw > w) w = tw;
  }
  return w ? w : 1;
}

/* The header, sections (byte offsets from the first op) and thread flags, then each thread's ops; into a
 * temporary name, renamed at the end. */
static int ops_finish(cv *c) {
  uint64_t total = 0;
  for (uint32_t i = 0; i < c->nt; i++) {
    if (spool_write(c, i)) return -1;
    if (c->t[i].fd >= 0) { close(c->t[i].fd); c->t[i].fd = -1; }
    total += c->t[i].ops;
  }
  int out = open(c->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) return tr_fail(&c->err, 0, "cannot write %s: %s", c->tmp, strerror(errno));
  scn_replay_header h = {SCN_R_MAGIC, (uint32_t)c->nt, (uint32_t)c->touch, c->nslots, total, window_of(c)};
  int bad = write_all(out, &h, sizeof h);
  uint64_t at = 0;
  for (uint32_t i = 0; i <= c->nt && !bad; i++) {
    bad = write_all(out, &at, 8);
    if (i < c->nt) at += c->t[i].bytes;
  }
  for (uint32_t i = 0; i < c->nt && !bad; i++) bad = write_all(out, &c->t[i].flags, 4);
  if (c->nt % 2 && !bad) bad = write_all(out, "\0\0\0\0", 4);
  for (uint32_t i = 0; i < c->nt && !bad; i++) bad = copy_spool(c, out, i);
  if (close(out) || bad || cv_stop) {
    if (!c->err.message[0]) tr_fail(&c->err, 0, "cannot write %s: %s", c->tmp, strerror(errno ? errno : EIO));
    return -1;
  }
  if (rename(c->tmp, c->path)) return tr_fail(&c->err, 0, "cannot write %s: %s", c->path, strerror(errno));
  rmdir(c->spool);
  return 0;
}

/* What an interrupted or failed conversion leaves: nothing. */
static void ops_abort(cv *c) {
  if (!c->spool[0]) return;
  for (uint32_t i = 0; i < c->nt; i++) {
    char name[SPOOL_NAME];
    if (c->t[i].fd >= 0) close(c->t[i].fd);
    spool_name(c, i, name);
    unlink(name);
  }
  rmdir(c->spool);
  unlink(c->tmp);
}

/* ---------------------------------------------------------------- threads */

static size_t tid_probe(const cv *c, uint32_t tid) {
  size_t h = tr_hash32(tid) & (c->tslot_cap - 1);
  while (c->tslot[h] && c->t[c->tslot[h] - 1].tid != tid) h = (h + 1) & (c->tslot_cap - 1);
  return h;
}

static int64_t thread_index(const cv *c, uint32_t tid) {
  if (!c->tslot_cap) return -1;
  uint32_t s = c->tslot[tid_probe(c, tid)];
  return s ? (int64_t)s - 1 : -1;
}

static void tid_rehash(cv *c) {
  size_t cap = c->tslot_cap ? c->tslot_cap * 2 : 64;
  uint32_t *old = c->tslot;
  c->tslot = tr_xcalloc(cap, sizeof *c->tslot);
  c->tslot_cap = cap;
  for (size_t i = 0; i < c->nt; i++) c->tslot[tid_probe(c, c->t[i].tid)] = (uint32_t)i + 1;
  free(old);
}

static void alive(cv *c, int delta) {
  c->alive += delta;
  if (c->alive > (int64_t)c->peak_threads) c->peak_threads = (uint64_t)c->alive;
}

static uint32_t new_thread(cv *c, uint32_t tid, uint32_t flags) {
  if ((c->nt + 1) * 2 > c->tslot_cap) tid_rehash(c);
  c->t = tr_grow(c->t, &c->tcap, c->nt + 1, sizeof *c->t);
  uint32_t i = (uint32_t)c->nt++;
  cv_thread *t = &c->t[i];
  memset(t, 0, sizeof *t);
  t->tid = tid;
  t->flags = flags | ((int64_t)tid == c->main_tid ? SCN_R_MAIN : 0);
  t->fd = -1;
  t->join_seq = UINT64_MAX;
  t->buf = malloc(SPILL_BYTES + SCN_OPS_MAX);     /* room for one more op past the spill mark */
  if (!t->buf) tr_oom();
  c->tslot[tid_probe(c, tid)] = i + 1;
  if (!(flags & SCN_R_DEFERRED)) alive(c, +1);        /* alive from the start, as far as the replay knows */
  return i;
}

static uint32_t thread_for(cv *c, uint32_t tid) {
  int64_t i = thread_index(c, tid);
  return i >= 0 ? (uint32_t)i : new_thread(c, tid, 0);
}

/* ---------------------------------------------------------------- slots */
static uint32_t new_slot(cv *c, int32_t last) {
  c->gen = tr_grow(c->gen, &c->slot_cap, c->nslots + 1, sizeof *c->gen);
  c->last = tr_grow(c->last, &c->last_cap, c->nslots + 1, sizeof *c->last);
  c->gen[c->nslots] = 0;
  c->last[c->nslots] = last;
  return (uint32_t)c->nslots++;
}

/* A freed slot stays with the thread that freed it. An allocation takes, in this order:
 *   1. the newest slot its own thread freed;
 *   2. a slot freed by a thread whose JOIN comes before it in the replay (the join orders that free first);
 *   3. a new slot, while there are fewer than twice the most objects ever live, plus SLOT_SLACK;
 *   4. the oldest slot freed by another thread, with a WAIT for that free.
 * The program's threads never waited for each other's frees to allocate: a reuse that waits ties the replay's
 * threads to the capture's interleaving, which is the traced program's under the capture's allocator
 * (thread_churn: each new thread's allocations waited for the frees of the one before it, so jemalloc's
 * threads ran in glibc's rhythm and faulted in pages several times as often as the program). The bound keeps
 * the slot table, which is the replay's own memory, in proportion to the live objects. */
#define SLOT_SLACK 4096

static void own_push(cv_thread *t, uint32_t slot) {
  if (t->own_head && t->nown == t->own_cap) {      /* reclaim the room the oldest ones left */
    memmove(t->own, t->own + t->own_head, (t->nown - t->own_head) * sizeof *t->own);
    t->nown -= t->own_head;
    t->own_head = 0;
  }
  t->own = tr_grow(t->own, &t->own_cap, t->nown + 1, sizeof *t->own);
  t->own[t->nown++] = slot;
}

static int own_empty(const cv_thread *t) { return t->nown == t->own_head; }

/* A joined thread with freed slots joins the queue that step 2 takes from. */
static void joinq_push(cv *c, uint32_t i) {
  c->joinq = tr_grow(c->joinq, &c->joinq_cap, c->njoinq + 1, sizeof *c->joinq);
  c->joinq[c->njoinq++] = i;
}

static void release_slot(cv *c, uint32_t i, uint32_t slot) {
  cv_thread *t = &c->t[i];
  if (own_empty(t) && t->join_seq != UINT64_MAX) joinq_push(c, i);   /* joined already: it frees after its end */
  own_push(t, slot);
}

/* Step 2: the joined threads' slots, the earliest joined first; none when the earliest with slots left is
 * not yet joined where this thread is. */
static int joined_slot(cv *c, const cv_thread *t, uint32_t *slot) {
  while (c->joinq_head < c->njoinq && own_empty(&c->t[c->joinq[c->joinq_head]])) c->joinq_head++;
  if (c->joinq_head == c->njoinq) {
    c->joinq_head = c->njoinq = 0;
    return 0;
  }
  cv_thread *d = &c->t[c->joinq[c->joinq_head]];
  if (d->join_seq >= t->horizon) return 0;
  *slot = d->own[--d->nown];
  return 1;
}

/* Step 4: the oldest slot of the thread with most freed slots (the last one found still has some). */
static int waiting_slot(cv *c, uint32_t i, uint32_t *slot) {
  if (c->donor >= c->nt || c->donor == i || own_empty(&c->t[c->donor])) {
    size_t most = 0;
    for (uint32_t k = 0; k < c->nt; k++)
      if (k != i && c->t[k].nown - c->t[k].own_head > most) { most = c->t[k].nown - c->t[k].own_head; c->donor = k; }
    if (!most) return 0;
  }
  cv_thread *d = &c->t[c->donor];
  *slot = d->own[d->own_head++];
  return 1;
}

/* Taken before the old block of a realloc is released: never the same slot. *wait: the op may wait for the
 * slot's last op, made by another thread not joined yet. */
static uint32_t take_slot(cv *c, uint32_t i, int *wait) {
  cv_thread *t = &c->t[i];
  uint32_t slot;
  *wait = 0;
  if (!own_empty(t)) return t->own[--t->nown];
  if (joined_slot(c, t, &slot)) return slot;
  if (c->nslots >= 2 * c->nlive_peak + SLOT_SLACK && waiting_slot(c, i, &slot)) {
    *wait = 1;
    return slot;
  }
  return new_slot(c, -1);
}

/* ---------------------------------------------------------------- live pointers: open addressing, linear probing */
static size_t live_home(const cv *c, uint64_t ptr) {
  return (size_t)((ptr * 0x9E3779B97F4A7C15ull) >> 20) & (c->live_cap - 1);
}

static cv_live *live_find(cv *c, uint64_t ptr) {
  if (!ptr || !c->nlive) return NULL;
  for (size_t h = live_home(c, ptr);; h = (h + 1) & (c->live_cap - 1)) {
    if (c->live[h].ptr == ptr) return &c->live[h];
    if (!c->live[h].ptr) return NULL;
  }
}

static void live_put(cv *c, uint64_t ptr, uint32_t slot, uint64_t nbytes);

static void live_grow(cv *c) {
  cv_live *old = c->live;
  size_t cap = c->live_cap;
  c->live_cap = cap ? cap * 2 : 1024;
  c->live = tr_xcalloc(c->live_cap, sizeof *c->live);
  c->nlive = 0;
  for (size_t i = 0; i < cap; i++) if (old[i].ptr) live_put(c, old[i].ptr, old[i].slot, old[i].nbytes);
  free(old);
}

static void live_put(cv *c, uint64_t ptr, uint32_t slot, uint64_t nbytes) {
  if ((c->nlive + 1) * 2 > c->live_cap) live_grow(c);
  size_t h = live_home(c, ptr);
  while (c->live[h].ptr) h = (h + 1) & (c->live_cap - 1);
  c->live[h] = (cv_live){ptr, nbytes, slot};
  if (++c->nlive > c->nlive_peak) c->nlive_peak = c->nlive;
}

/* Backward-shift deletion: the table never fills with tombstones however long the trace. */
static void live_del(cv *c, cv_live *e) {
  size_t mask = c->live_cap - 1, i = (size_t)(e - c->live);
  for (size_t j = (i + 1) & mask; c->live[j].ptr; j = (j + 1) & mask) {
    size_t home = live_home(c, c->live[j].ptr);
    if (((j - home) & mask) >= ((j - i) & mask)) { c->live[i] = c->live[j]; i = j; }
  }
  c->live[i].ptr = 0;
  c->nlive--;
}

/* ---------------------------------------------------------------- touch auto
 * What each touch mode would have made the program fault in, counted on the captured addresses (the allocator's
 * reuse of freed memory is in them already): a page faults when a mode first writes it, and again after the
 * capture's allocator unmapped it: under glibc (the allocator a capture runs under) a block of 128 KiB or more at
 * a page offset of 16 is a mapping of its own, unmapped when freed. Not followed: glibc trimming an arena's
 * top (how often depends on the threads' interleaving: prodcons's faults vary widely from run to run, so no
 * model of it from the trace holds). A moved realloc's copy is written in every mode. Only with --touch auto. */
#define MAPPED_BYTES (128u << 10)

static cv_page *page_slot(cv *c, uint64_t page, int add) {
  if (add && 2 * (c->npages + 1) > c->pages_cap) {
    size_t cap = c->pages_cap ? 2 * c->pages_cap : 1 << 12;
    cv_page *t = tr_xcalloc(cap, sizeof *t);
    for (size_t k = 0; k < c->pages_cap; k++)
      if (c->page[k].key) {
        size_t h = (size_t)(c->page[k].key * 0x9e3779b97f4a7c15ull >> 20) & (cap - 1);
        while (t[h].key) h = (h + 1) & (cap - 1);
        t[h] = c->page[k];
      }
    free(c->page);
    c->page = t;
    c->pages_cap = cap;
  }
  if (!c->pages_cap) return NULL;
  size_t h = (size_t)((page + 1) * 0x9e3779b97f4a7c15ull >> 20) & (c->pages_cap - 1);
  for (; c->page[h].key; h = (h + 1) & (c->pages_cap - 1))
    if (c->page[h].key == page + 1) return &c->page[h];
  if (!add) return NULL;
  c->npages++;
  c->page[h].key = page + 1;
  return &c->page[h];
}

static void fault_in(cv *c, uint64_t page, unsigned modes) {    /* modes: bits of SEEN_* */
  cv_page *e = page_slot(c, page, 1);
  for (int m = 0; m < SEEN_MODES; m++)
    if (modes >> m & 1 && !(e->backed >> m & 1)) {
      e->backed |= (uint8_t)(1u << m);
      c->faults[m]++;
      c->map_faults[m] += (uint64_t)c->in_map;
    }
}

static void fault_span(cv *c, uint64_t lo, uint64_t hi, unsigned modes) {   /* the pages of [lo, hi) */
  for (uint64_t p = lo / PAGE; lo < hi && p <= (hi - 1) / PAGE; p++) fault_in(c, p, modes);
}

static void give_back(cv *c, uint64_t lo, uint64_t hi) {       /* whole pages of [lo, hi) */
  for (uint64_t p = (lo + PAGE - 1) / PAGE; p < hi / PAGE; p++) {
    cv_page *e = page_slot(c, p, 0);
    if (e) e->backed = 0;
  }
}

static int own_mapping(uint64_t p, uint64_t size) { return size >= MAPPED_BYTES && p % PAGE == 16; }

/* A block of the capture's heap is freed: one mapped of its own goes back to the kernel. */
static void heap_gone(cv *c, uint64_t p, uint64_t size) {
  if (c->count_pages && own_mapping(p, size)) give_back(c, p - 16, p + size);
}

/* A block at p of size bytes whose [from, size) is new (runtime/replay.h's scn_replay_touch). */
static void first_touch(cv *c, uint64_t p, uint64_t from, uint64_t size) {
  if (!c->count_pages || from >= size) return;
  fault_in(c, (p + from) / PAGE, 1u << SEEN_FIRST);
  fault_in(c, (p + size - 1) / PAGE, 1u << SEEN_FIRST);
  fault_span(c, p + from, p + size, 1u << SEEN_PAGES);
}

static void copied(cv *c, uint64_t p, uint64_t n) {
  if (c->count_pages) fault_span(c, p, p + n, (1u << SEEN_MODES) - 1);
}

/* The mode for --touch auto. First the tracer's sample of blocks' inner pages (not resident at the malloc:
 * did the program back them before the free?): most of them left alone, `first`; most written, `pages`. With
 * fewer than MIN_SAMPLED such pages, the mode whose pages come closest to the faults measured (less the tracer's
 * and FAULT_ALLOWANCE); ties go to pages. Without a reading: pages, and why. */
#define MIN_SAMPLED 16
static const char *choose_touch(cv *c, const tr_info *info, int64_t *heap_faults) {
  *heap_faults = -1;
  c->touch = TOUCH_PAGES;
  if (!info) return "the capture holds no page-fault reading (not a tracer log)";
  if (!info->faulted)
    return info->ended ? "the capture holds no page-fault reading (a tracer older than --touch auto)"
                       : "the capture holds no page-fault reading (the log has no end mark: cut short or killed)";
  int64_t f = (int64_t)info->page_faults - (int64_t)info->tracer_pages - FAULT_ALLOWANCE;
  *heap_faults = f > 0 ? f : 0;
  if (info->fresh_pages >= MIN_SAMPLED) {
    c->touch = 2 * info->written_pages < info->fresh_pages ? TOUCH_FIRST : TOUCH_PAGES;
    return c->touch == TOUCH_FIRST ? "the program left most inner pages of the sampled blocks unwritten"
                                   : "the program wrote most inner pages of the sampled blocks";
  }
  uint64_t best = UINT64_MAX;
  for (int m = SEEN_PAGES; m >= SEEN_NONE; m--) {
    int64_t d = (int64_t)c->faults[m] - *heap_faults;
    uint64_t dist = (uint64_t)(d < 0 ? -d : d);
    if (dist < best) { best = dist; c->touch = m; }
  }
  return "the mode whose pages come closest to the faults measured";
}

/* ---------------------------------------------------------------- back-pressure */
/* A program's producer blocks when its queue is full. The capture does not show the queue, only how much of
 * each thread's blocks other threads had freed when it allocated: its returns, in positions (1 plus the bytes
 * of each block). A thread that allocates waits in the replay while its returns lag more than its window W
 * behind the capture's at that point: its next op gets SYNC with the growth of what it needs, asked for when
 * that grew by more than W/2. W is 1/16 of the most positions of the thread's own blocks live at once so far, so
 * a replay holds at most about 3/32 of each thread's peak more than the capture did (a window for the whole
 * capture would let each of N producers run that far ahead). A FREE of another thread's block
 * names that thread (aux) and the positions it gives back (size), so the replay counts the same returns.
 * Only allocations wait, and only for frees before them in capture order: nothing else of the capture's
 * interleaving is imposed (runtime/replay.h: why it cannot deadlock). */
static uint64_t thread_window(const cv_thread *t) { return t->live_peak >> 4 ? t->live_peak >> 4 : 1; }

static void pace(cv *c, uint32_t i) {
  cv_thread *t = &c->t[i];
  uint64_t w = thread_window(t);
  if (t->returned > w && t->returned - w > t->needed + w / 2) {
    t->sync_step += t->returned - w - t->needed;
    t->needed = t->returned - w;
  }
}

/* ---------------------------------------------------------------- thread lifetimes */
/* Before a creation, the creator joins the threads that have ended, the earliest ended first, but only as
 * many as it must so that no more threads can be alive in the replay than were ever alive at once in the
 * capture so far. The capture's program joined what it joined, which the capture does not show; a thread it
 * joined late (thread_churn's main joins thread k-1 after creating thread k+1) must not hold back a creation
 * in the replay, or the replay runs its threads in the rhythm they had under the capture's allocator
 * (thread_churn: in pairs under glibc, one after another under jemalloc). What the creator knows to be done
 * is then the first `horizon` JOINs, and the child starts knowing as much (slot reuse without waits). */
static void spawn(cv *c, uint32_t creator, uint32_t child) {
  cv_thread *t = &c->t[creator];
  uint64_t after = (uint64_t)c->alive + 1, most = c->peak_threads > after ? c->peak_threads : after;
  size_t keep = (size_t)(most - after), join = c->nended > keep ? c->nended - keep : 0;
  int knew_all = t->horizon == c->joined;
  for (size_t k = 0; k < join; k++) {
    cv_thread *x = &c->t[c->ended[k]];
    emit(c, creator, SCN_R_JOIN, 0, c->ended[k], SCN_R_NONE, 0, 0, 0);
    x->join_seq = c->joined++;
    if (!own_empty(x)) joinq_push(c, c->ended[k]);
  }
  if (knew_all) t->horizon = c->joined;
  c->nended -= join;
  if (join) memmove(c->ended, c->ended + join, c->nended * sizeof *c->ended);   /* never from NULL (UBSan) */
  c->t[child].horizon = t->horizon;
  emit(c, creator, SCN_R_SPAWN, 0, child, c->spawns++, 0, 0, 0);
  c->spawned++;
  alive(c, +1);
}

static void thread_exit(cv *c, uint32_t i) {
  emit(c, i, SCN_R_EXIT, 0, SCN_R_NONE, c->spawns, 0, 0, 0);
  c->ended = tr_grow(c->ended, &c->ended_cap, c->nended + 1, sizeof *c->ended);
  c->ended[c->nended++] = i;
  alive(c, -1);
}

/* ---------------------------------------------------------------- the program's own mappings */

static size_t piece_after(const cv *c, uint64_t at) {      /* bisect_right over the starts */
  size_t lo = 0, hi = c->npieces;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (c->pieces[mid].start <= at) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static void held_add(cv *c, uint32_t slot, int delta) {
  if (slot >= c->held_cap) {
    size_t old = c->held_cap;
    c->held = tr_grow(c->held, &c->held_cap, (size_t)slot + 1, sizeof *c->held);
    memset(c->held + old, 0, (c->held_cap - old) * sizeof *c->held);
  }
  c->held[slot] += (uint32_t)delta;
}

static uint32_t held_of(const cv *c, uint32_t slot) { return slot < c->held_cap ? c->held[slot] : 0; }

static void set_writable(cv *c, uint32_t slot) {
  if (slot >= c->writable_cap) {
    size_t old = c->writable_cap;
    c->writable = tr_grow(c->writable, &c->writable_cap, (size_t)slot + 1, 1);
    memset(c->writable + old, 0, c->writable_cap - old);
  }
  c->writable[slot] = 1;
}

static int is_writable(const cv *c, uint32_t slot) { return slot < c->writable_cap && c->writable[slot]; }

static void piece_insert(cv *c, size_t at, uint64_t start, uint64_t end, uint32_t slot, uint64_t base) {
  c->pieces = tr_grow(c->pieces, &c->pieces_cap, c->npieces + 1, sizeof *c->pieces);
  memmove(c->pieces + at + 1, c->pieces + at, (c->npieces - at) * sizeof *c->pieces);
  c->pieces[at] = (cv_piece){start, end, base, slot};
  c->npieces++;
  held_add(c, slot, +1);
}

static void piece_remove(cv *c, size_t at) {
  held_add(c, c->pieces[at].slot, -1);
  memmove(c->pieces + at, c->pieces + at + 1, (c->npieces - at - 1) * sizeof *c->pieces);
  c->npieces--;
}

static void mapped_add(cv *c, int64_t delta) {
  c->mapped += (uint64_t)delta;
  if (c->mapped > c->mapped_peak) c->mapped_peak = c->mapped;
}

/* Unmaps [lo, hi) from every piece it overlaps. stale: a new mapping landed there, so whatever was believed
 * mapped there was unmapped unseen; forget it without an op. */
static void cut(cv *c, uint32_t i, uint64_t lo, uint64_t hi, uint64_t line, int stale) {
  size_t k = piece_after(c, lo);
  k = k ? k - 1 : 0;
  while (k < c->npieces && c->pieces[k].start < hi) {
    cv_piece p = c->pieces[k];
    if (p.end <= lo) { k++; continue; }
    uint64_t a = lo > p.start ? lo : p.start, b = hi < p.end ? hi : p.end;
    piece_remove(c, k);
    if (p.start < a) piece_insert(c, k++, p.start, a, p.slot, p.base);
    if (b < p.end) piece_insert(c, k++, b, p.end, p.slot, p.base);
    mapped_add(c, -(int64_t)(b - a));
    uint32_t held = held_of(c, p.slot);
    if (stale) {
      if (!held) note_line(c, N_UNMAPPED_UNSEEN, line);
      continue;
    }
    uint8_t flags = (c->last[p.slot] != (int32_t)i ? SCN_R_WAIT : 0) | (held ? 0 : SCN_R_LAST_PIECE);
    c->last[p.slot] = (int32_t)i;
    emit(c, i, SCN_R_UNMAP, flags, p.slot, (uint32_t)((a - p.base) / PAGE), c->gen[p.slot], 0, b - a);
    if (!held) c->gen[p.slot]++;
  }
}

static void map_event(cv *c, uint32_t i, const tr_event *ev) {
  if (ev->failed || !ev->res) return;
  if (ev->align & MAP_FIXED_FLAG) { note_line(c, N_MAP_FIXED, ev->line); return; }
  uint64_t start = ev->res, length = pages(ev->size);
  cut(c, i, start, start + length, ev->line, 1);
  uint32_t slot = new_slot(c, (int32_t)i);
  uint8_t flags = ev->nmemb & PROT_WRITE_FLAG ? SCN_R_WRITABLE : 0;
  emit(c, i, SCN_R_MAP, flags, slot, SCN_R_NONE, 0, 0, length);
  piece_insert(c, piece_after(c, start), start, start + length, slot, start);
  if (flags) {
    set_writable(c, slot);
    c->in_map = 1;
    first_touch(c, start, 0, length);
    c->in_map = 0;
  }
  c->maps++;
  mapped_add(c, (int64_t)length);
}

static void remap_event(cv *c, uint32_t i, const tr_event *ev) {
  if (ev->failed || !ev->res) return;
  size_t k = piece_after(c, ev->old);
  cv_piece *p = k && c->pieces[k - 1].start == ev->old ? &c->pieces[k - 1] : NULL;
  if (!p || p->base != ev->old || held_of(c, p->slot) != 1 || p->end - ev->old != pages(ev->align)) {
    note_line(c, N_MREMAP_PART, ev->line);
    return;
  }
  uint64_t end = p->end;
  uint32_t old_slot = p->slot;
  piece_remove(c, k - 1);
  c->held[old_slot] = 0;
  uint32_t slot = new_slot(c, (int32_t)i);
  uint8_t flags = c->last[old_slot] != (int32_t)i ? SCN_R_WAIT_OLD : 0;
  uint64_t length = pages(ev->size);
  if (is_writable(c, old_slot)) {
    flags |= SCN_R_WRITABLE;
    set_writable(c, slot);
    c->in_map = 1;
    first_touch(c, ev->res, end - ev->old, length);
    c->in_map = 0;
  }
  c->last[old_slot] = (int32_t)i;
  emit(c, i, SCN_R_REMAP, flags, slot, old_slot, 0, c->gen[old_slot], length);
  c->gen[old_slot]++;
  cut(c, i, ev->res, ev->res + length, ev->line, 1);
  piece_insert(c, piece_after(c, ev->res), ev->res, ev->res + length, slot, ev->res);
  mapped_add(c, (int64_t)length - (int64_t)(end - ev->old));
}

/* ---------------------------------------------------------------- events that are not allocator calls */
static void other_event(cv *c, const tr_event *ev) {
  int64_t known = thread_index(c, ev->tid);
  if (ev->kind == EV_THREAD_START) {
    if (known >= 0 || !ev->size || ev->size == ev->tid) return;
    uint32_t creator = thread_for(c, (uint32_t)ev->size);
    spawn(c, creator, new_thread(c, ev->tid, SCN_R_DEFERRED));
  } else if (ev->kind == EV_THREAD_EXIT) {
    if (known >= 0) thread_exit(c, (uint32_t)known);
  } else {
    /* mprotect: a reservation made writable holds memory, which the ops format cannot say yet (left out) */
    if (ev->kind == EV_MPROTECT) return;
    uint32_t i = known >= 0 ? (uint32_t)known : new_thread(c, ev->tid, 0);
    if (ev->kind != EV_MUNMAP) pace(c, i);
    if (ev->kind == EV_MMAP) map_event(c, i, ev);
    else if (ev->kind == EV_MUNMAP) cut(c, i, ev->old, ev->old + pages(ev->size), ev->line, 0);
    else remap_event(c, i, ev);
  }
}

/* ---------------------------------------------------------------- allocator calls */
/* Element count of a realloc and of a position: none is one (calloc's own nmemb is taken as it is). */
static uint64_t nmemb_or_1(const tr_event *ev) { return ev->nmemb ? ev->nmemb : 1; }

/* The live positions of the thread that made or moved a block (its slot's last toucher) go down. */
static void disown(cv *c, int32_t owner, uint64_t nbytes) {
  if (owner < 0) return;
  cv_thread *t = &c->t[owner];
  t->live -= t->live > nbytes ? 1 + nbytes : t->live;
}

static void free_call(cv *c, uint32_t i, const tr_event *ev, cv_live *entry) {
  if (!entry) {
    if (ev->old) note_line(c, N_FREE_UNKNOWN, ev->line);
    emit(c, i, SCN_R_FREE, 0, SCN_R_NONE, SCN_R_NONE, 0, 0, 0);
    return;
  }
  uint32_t slot = entry->slot;
  uint64_t nbytes = entry->nbytes;
  c->live_bytes -= nbytes;
  heap_gone(c, entry->ptr, nbytes);
  live_del(c, entry);
  int32_t owner = c->last[slot];
  disown(c, owner, nbytes);
  uint8_t flags = owner != (int32_t)i ? SCN_R_WAIT : 0;
  uint32_t to = SCN_R_NONE;
  uint64_t back = 0;
  if (flags && owner >= 0) {                       /* a return to the thread that made or moved the block */
    to = (uint32_t)owner;
    back = 1 + nbytes;
    c->t[owner].returned += back;
  }
  c->waits += flags;
  c->last[slot] = (int32_t)i;
  emit(c, i, SCN_R_FREE, flags, slot, to, c->gen[slot], 0, back);
  c->gen[slot]++;
  release_slot(c, i, slot);
}

/* A new block at ev->res: its slot, WAIT when another thread touched that slot last (the op names the slot's
 * generation then; *blocks: that thread may not be done with it, it is not joined yet). */
static uint32_t place(cv *c, uint32_t i, const tr_event *ev, uint64_t nbytes, uint8_t *flags, int *blocks) {
  cv_live *again = live_find(c, ev->res);
  if (again) {
    /* The allocator returned a pointer we believed live: its free was not captured. Its slot stays
     * allocated in the replay (it leaks), never reused. */
    live_del(c, again);
    note_line(c, N_RETURNED_AGAIN, ev->line);
  }
  uint32_t slot = take_slot(c, i, blocks);
  if (c->last[slot] != -1 && c->last[slot] != (int32_t)i) *flags |= SCN_R_WAIT;
  c->last[slot] = (int32_t)i;
  cv_thread *t = &c->t[i];
  t->live += 1 + nbytes;
  if (t->live > t->live_peak) t->live_peak = t->live;
  live_put(c, ev->res, slot, nbytes);
  c->live_bytes += nbytes;
  return slot;
}

static void realloc_call(cv *c, uint32_t i, const tr_event *ev, cv_live *entry) {
  uint64_t size = ev->size * nmemb_or_1(ev);
  if (ev->old && !entry) note_line(c, N_REALLOC_UNKNOWN, ev->line);
  if (ev->failed) {
    /* The old block stays alive in the trace; realloc(NULL, n) keeps the call without risking a block the
     * trace goes on using. */
    note_line(c, N_REALLOC_FAILED, ev->line);
    emit(c, i, SCN_R_REALLOC, 0, SCN_R_NONE, SCN_R_NONE, 0, 0, size);
    return;
  }
  uint8_t flags = 0;
  uint32_t aux = SCN_R_NONE, aux_gen = 0, slot = SCN_R_NONE, gen_new = 0;
  uint64_t kept = entry ? entry->nbytes : 0, old = entry ? entry->ptr : 0;
  if (ev->res && ev->res != old) copied(c, ev->res, kept < size ? kept : size);
  first_touch(c, ev->res, kept, size);
  heap_gone(c, old, kept);
  if (entry) {
    aux = entry->slot;
    aux_gen = c->gen[aux];
    disown(c, c->last[aux], entry->nbytes);
    if (c->last[aux] != (int32_t)i) { flags = SCN_R_WAIT_OLD; c->last[aux] = (int32_t)i; }
    c->live_bytes -= entry->nbytes;
    live_del(c, entry);
  }
  int blocks = 0;
  if (ev->res) {
    slot = place(c, i, ev, size, &flags, &blocks);
    gen_new = c->gen[slot];
  }
  c->waits += (flags & SCN_R_WAIT_OLD) || blocks;
  emit(c, i, SCN_R_REALLOC, flags, slot, aux, gen_new, aux_gen, size);
  if (aux != SCN_R_NONE) {                         /* release the old block's slot */
    c->gen[aux]++;
    release_slot(c, i, aux);
  }
  if (c->live_bytes > c->peak) { c->peak = c->live_bytes; c->peak_line = ev->line; }
}

static void alloc_call(cv *c, uint32_t i, const tr_event *ev) {
  uint8_t op = op_of[ev->kind];
  uint64_t aux, nbytes;
  if (op == SCN_R_CALLOC) { aux = ev->nmemb; nbytes = ev->size * ev->nmemb; }
  else { aux = ev->align ? ev->align : op == SCN_R_MALLOC ? SCN_R_NONE : 16; nbytes = ev->size; }
  if (ev->failed || !ev->res) {
    if (!ev->failed) note_line(c, N_RESULT_UNKNOWN + ev->kind, ev->line);
    emit(c, i, op, 0, SCN_R_NONE, (uint32_t)aux, 0, 0, ev->size);
    return;
  }
  uint8_t flags = 0;
  int blocks;
  uint32_t slot = place(c, i, ev, nbytes, &flags, &blocks);
  first_touch(c, ev->res, 0, nbytes);
  c->waits += blocks;
  emit(c, i, op, flags, slot, (uint32_t)aux, c->gen[slot], 0, ev->size);
  if (c->live_bytes > c->peak) { c->peak = c->live_bytes; c->peak_line = ev->line; }
}

/* ---------------------------------------------------------------- a window (capture --server) */
#define SETUP_TID 0                /* the set-up thread's: no captured thread has tid 0 */

/* Mappings before the window: page ranges [start, end) with their protection; a range unmapped is cut out. */
static void range_cut(cv *c, uint64_t lo, uint64_t hi) {
  for (size_t k = 0; k < c->nranges; k++) {
    uint64_t *r = c->ranges[k];
    if (r[1] <= lo || r[0] >= hi) continue;
    if (r[0] < lo && r[1] > hi) {                  /* a hole in the middle: the tail becomes a range of its own */
      c->ranges = tr_grow(c->ranges, &c->ranges_cap, c->nranges + 1, sizeof *c->ranges);
      r = c->ranges[k];
      c->ranges[c->nranges][0] = hi, c->ranges[c->nranges][1] = r[1], c->ranges[c->nranges][2] = r[2];
      c->nranges++;
      r[1] = lo;
    } else if (r[0] < lo) r[1] = lo;
    else if (r[1] > hi) r[0] = hi;
    else { memcpy(r, c->ranges[--c->nranges], sizeof *c->ranges); k--; }
  }
}

static void range_add(cv *c, uint64_t lo, uint64_t hi, uint64_t prot) {
  range_cut(c, lo, hi);
  c->ranges = tr_grow(c->ranges, &c->ranges_cap, c->nranges + 1, sizeof *c->ranges);
  c->ranges[c->nranges][0] = lo, c->ranges[c->nranges][1] = hi, c->ranges[c->nranges][2] = prot;
  c->nranges++;
}

/* Before the window: what is live, nothing else. */
static void before_window(cv *c, const tr_event *ev) {
  if (ev->kind == EV_MMAP) {
    if (!ev->failed && ev->res && !(ev->align & MAP_FIXED_FLAG)) range_add(c, ev->res, ev->res + pages(ev->size), ev->nmemb);
    return;
  }
  if (ev->kind == EV_MUNMAP) { range_cut(c, ev->old, ev->old + pages(ev->size)); return; }
  if (ev->kind == EV_MREMAP) {
    uint64_t prot = PROT_WRITE_FLAG;
    for (size_t k = 0; k < c->nranges; k++) if (c->ranges[k][0] == ev->old) prot = c->ranges[k][2];
    if (ev->failed || !ev->res) return;
    range_cut(c, ev->old, ev->old + pages(ev->align));
    range_add(c, ev->res, ev->res + pages(ev->size), prot);
    return;
  }
  if (ev->kind >= EV_CALLS) return;                /* thread starts and ends: the threads alive start with it */
  c->before_calls++;
  cv_live *entry = live_find(c, ev->old);
  uint8_t op = op_of[ev->kind];
  if (op == SCN_R_FREE || (op == SCN_R_REALLOC && !ev->failed)) { if (entry) live_del(c, entry); }
  if (op == SCN_R_FREE || ev->failed || !ev->res) return;
  cv_live *again = live_find(c, ev->res);
  if (again) live_del(c, again);
  uint64_t n = op == SCN_R_CALLOC ? ev->size * ev->nmemb : op == SCN_R_REALLOC ? ev->size * nmemb_or_1(ev) : ev->size;
  live_put(c, ev->res, (uint32_t)c->alloc_order++, n);
}

static int by_order(const void *a, const void *b) {
  uint32_t x = ((const cv_live *)a)->slot, y = ((const cv_live *)b)->slot;
  return x < y ? -1 : x > y;
}

static int convert_event(void *arg, const tr_event *ev);

/* The window opens: a set-up thread (run before the replay's clock starts) makes what was live, in the order
 * it was made: each object as a malloc of its size, each mapping whole. */
static void open_window(cv *c, uint64_t line) {
  cv_live *objs = tr_xcalloc(c->nlive, sizeof *objs);
  size_t n = 0;
  for (size_t h = 0; h < c->live_cap; h++) if (c->live[h].ptr) objs[n++] = c->live[h];
  qsort(objs, n, sizeof *objs, by_order);
  memset(c->live, 0, c->live_cap * sizeof *c->live);
  c->nlive = 0;
  c->phase = 1;
  uint32_t setup = new_thread(c, SETUP_TID, SCN_R_SETUP);
  for (size_t k = 0; k < c->nranges; k++) {
    tr_event ev = {line, c->ranges[k][1] - c->ranges[k][0], c->ranges[k][2], 0x22, 0, c->ranges[k][0], SETUP_TID,
                   EV_MMAP, 0, 0};
    other_event(c, &ev);
    c->setup_maps++;
    c->setup_mapped += ev.size;
  }
  for (size_t k = 0; k < n; k++) {
    tr_event ev = {line, objs[k].nbytes, 1, 0, 0, objs[k].ptr, SETUP_TID, EV_MALLOC, 0, 0};
    convert_event(c, &ev);
    c->setup_bytes += objs[k].nbytes;
  }
  c->setup_objects = n;
  memset(c->t[setup].by_kind, 0, sizeof c->t[setup].by_kind);   /* the window's calls are the ones counted */
  alive(c, -1);                                                   /* it has ended before the others start */
  free(objs);
}

/* One event. The order of effects (counts, returns, slots, notes) is the conversion's definition: the ops
 * files of tests/fixtures/trace/converted.json depend on it. */
static int convert_event(void *arg, const tr_event *ev) {
  cv *c = arg;
  if (cv_stop) return -1;
  if (ev->kind == EV_WINDOW) {
    if (ev->size == 1 && c->windowed) open_window(c, ev->line);
    else if (ev->size == 2 && c->windowed) c->phase = 2;
    return 0;
  }
  if (c->windowed && c->phase != 1) {
    if (c->phase == 0) before_window(c, ev);
    else if (ev->kind < EV_CALLS) c->after_calls++;
    return 0;
  }
  if (ev->kind >= EV_CALLS) { other_event(c, ev); return 0; }
  uint32_t i = thread_for(c, ev->tid);
  c->t[i].by_kind[ev->kind]++;
  cv_live *entry = live_find(c, ev->old);
  uint8_t op = op_of[ev->kind];
  if (op != SCN_R_FREE) pace(c, i);
  if (op == SCN_R_FREE) free_call(c, i, ev, entry);
  else if (op == SCN_R_REALLOC) realloc_call(c, i, ev, entry);
  else alloc_call(c, i, ev);
  return 0;
}

/* ---------------------------------------------------------------- the stream of events (ltrace logs) */
static int read_events(cv *c) {
  enum { BATCH = 4096 };
  static tr_event buf[BATCH];
  size_t have = 0;
  for (;;) {
    ssize_t n = read(0, (char *)buf + have, sizeof buf - have);
    if (n < 0 && errno == EINTR && !cv_stop) continue;
    if (n < 0) return cv_stop ? -1 : tr_fail(&c->err, 0, "cannot read the events: %s", strerror(errno));
    if (n == 0) break;
    have += (size_t)n;
    size_t whole = have / sizeof *buf;
    for (size_t k = 0; k < whole; k++) if (convert_event(c, &buf[k])) return -1;
    have -= whole * sizeof *buf;
    memmove(buf, (char *)buf + whole * sizeof *buf, have);
  }
  return have ? tr_fail(&c->err, 0, "the event stream ends inside an event") : 0;
}

/* ---------------------------------------------------------------- the report */
static void report(const cv *c, const tr_log *log, const char *why, int64_t heap_faults) {
  printf("{\"touch\": \"%s\", ", touch_name[c->touch]);
  if (c->touch_auto) {
    const tr_info *f = log ? &log->info : NULL;
    printf("\"touch_auto\": {\"why\": \"%s\", \"pages\": {\"none\": %" PRIu64 ", \"first\": %" PRIu64 ", \"pages\": %" PRIu64 ", "
           "\"all\": %" PRIu64 "}, \"measured\": %s, \"page_faults\": %" PRIu64 ", \"tracer_pages\": %" PRIu64
           ", \"allowance\": %d, \"heap_faults\": %" PRId64 ", \"fresh_pages\": %" PRIu64 ", \"written_pages\": %"
           PRIu64 ", \"map_pages\": {\"first\": %" PRIu64 ", \"pages\": %" PRIu64 "}},\n ", why, c->faults[SEEN_NONE],
           c->faults[SEEN_FIRST], c->faults[SEEN_PAGES], c->faults[SEEN_PAGES], f && f->faulted ? "true" : "false",
           f ? f->page_faults : 0, f ? f->tracer_pages : 0, FAULT_ALLOWANCE, heap_faults, f ? f->fresh_pages : 0,
           f ? f->written_pages : 0, c->map_faults[SEEN_FIRST], c->map_faults[SEEN_PAGES]);
  }
  printf("\"threads\": %zu, \"slots\": %zu, \"window\": %" PRIu64 ", \"cross_thread_waits\": %" PRIu64
         ", \"peak_live_bytes\": %" PRIu64 ", \"peak_line\": %" PRIu64 ", \"live_at_end\": %zu, \"spawned\": %"
         PRIu64 ", \"joined\": %" PRIu64 ", \"peak_threads\": %" PRIu64 ", \"maps\": %" PRIu64 ", \"mapped_peak\": %"
         PRIu64 ",\n \"tids\": [", c->nt, c->nslots, window_of(c), c->waits, c->peak, c->peak_line, c->nlive,
         c->spawned, c->joined, c->peak_threads, c->maps, c->mapped_peak);
  for (size_t i = 0; i < c->nt; i++) printf("%s%" PRIu32, i ? ", " : "", c->t[i].tid);
  printf("],\n \"by_kind\": [");
  for (size_t i = 0; i < c->nt; i++) {
    printf("%s[", i ? ", " : "");
    for (int k = 0; k < EV_CALLS; k++) printf("%s%" PRIu64, k ? ", " : "", c->t[i].by_kind[k]);
    printf("]");
  }
  printf("],\n \"window\": ");
  if (c->windowed)
    printf("{\"opened\": %s, \"closed\": %s, \"before_calls\": %" PRIu64 ", \"after_calls\": %" PRIu64
           ", \"setup_objects\": %" PRIu64 ", \"setup_bytes\": %" PRIu64 ", \"setup_maps\": %" PRIu64
           ", \"setup_mapped\": %" PRIu64 "}", c->phase >= 1 ? "true" : "false", c->phase >= 2 ? "true" : "false",
           c->before_calls, c->after_calls, c->setup_objects, c->setup_bytes, c->setup_maps, c->setup_mapped);
  else printf("null");
  printf(",\n \"notes\": [");
  for (int k = 0; k < c->norder; k++) {
    const cv_note *n = &c->notes[c->order[k]];
    char text[160];
    note_text(c->order[k], text, sizeof text);
    printf("%s[\"%s\", %" PRIu64 ", [", k ? ", " : "", text, n->count);
    for (uint64_t l = 0; l < n->count && l < 5; l++) printf("%s%" PRIu64, l ? ", " : "", n->lines[l]);
    printf("]]");
  }
  printf("]");
  if (log) {
    printf(",\n \"log\": ");
    tr_put_info(stdout, log);
  }
  printf("}\n");
}

static void error_report(const tr_error *e) {
  printf("{\"error\": \"");
  for (const char *p = e->message; *p; p++) {
    if (*p == '"' || *p == '\\') putchar('\\');
    putchar(*p);
  }
  printf("\", \"record\": %" PRIu64 "}\n", e->record);
}

/* ---------------------------------------------------------------- main */
static void on_signal(int sig) { (void)sig; cv_stop = 1; }

static int usage(void) {
  fprintf(stderr, "usage: scenc-convert (--log TRACE [--no-extra] | --events) --ops OUT [--touch 0-3|auto] "
                  "[--main-tid TID] [--touch-only] [--whole]\n");
  return 64;
}

static int prepare_output(cv *c) {
  const char *slash = strrchr(c->path, '/');
  const char *name = slash ? slash + 1 : c->path;
  int dir = slash ? (int)(slash - c->path) : 1;
  const char *dirname = slash ? c->path : ".";
  if (slash == c->path) dir = 1;
  snprintf(c->spool, sizeof c->spool, "%.*s/.ops-XXXXXX", dir, dirname);
  snprintf(c->tmp, sizeof c->tmp, "%.*s/.%s.tmp", dir, dirname, name);
  if (!mkdtemp(c->spool)) {
    tr_fail(&c->err, 0, "cannot write beside %s: %s", c->path, strerror(errno));
    c->spool[0] = 0;
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  static cv conv;
  cv *c = &conv;
  const char *log_path = NULL;
  int events = 0, extra = 1, touch_only = 0, whole = 0;
  c->main_tid = -1;
  for (int k = 1; k < argc; k++) {
    const char *a = argv[k], *v = k + 1 < argc ? argv[k + 1] : NULL;
    if (!strcmp(a, "--events")) events = 1;
    else if (!strcmp(a, "--no-extra")) extra = 0;
    else if (!strcmp(a, "--touch-only")) touch_only = 1;
    else if (!strcmp(a, "--whole")) whole = 1;
    else if (!strcmp(a, "--log") && v) { log_path = v; k++; }
    else if (!strcmp(a, "--ops") && v) { c->path = v; k++; }
    else if (!strcmp(a, "--touch") && v) { c->touch = strcmp(v, "auto") ? atoi(v) : TOUCH_AUTO; k++; }
    else if (!strcmp(a, "--main-tid") && v) { c->main_tid = strtoll(v, NULL, 10); k++; }
    else return usage();
  }
  if (!c->path || events == !!log_path || c->touch < 0 || c->touch > TOUCH_AUTO) return usage();
  c->touch_auto = c->touch == TOUCH_AUTO;
  struct sigaction sa = {0};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  cv_current = c;
  static tr_log log;
  int rc = 0;
  if (log_path) rc = tr_open(&log, log_path, extra, &c->err);
  if (touch_only && c->touch_auto && !rc && log_path && log.info.faulted && log.info.fresh_pages >= MIN_SAMPLED) {
    /* --touch-only (a model's touch_new): the tracer's sample decides, read with the log's index; no ops file. */
    int64_t heap_faults;
    const char *why = choose_touch(c, &log.info, &heap_faults);
    printf("{\"touch\": \"%s\", \"touch_auto\": {\"why\": \"%s\", \"fresh_pages\": %" PRIu64
           ", \"written_pages\": %" PRIu64 "}}\n", touch_name[c->touch], why, log.info.fresh_pages, log.info.written_pages);
    tr_close(&log);
    return 0;
  }
  /* An ltrace log or a tracer log without a fault reading: auto takes pages whatever the counts say. */
  c->count_pages = c->touch_auto && log_path && !rc && log.info.faulted;
  if (!rc) rc = prepare_output(c);
  if (!rc && log_path && !whole && (log.marks & 2)) c->windowed = log.windowed = 1;   /* the window opens: mark 1 */
  if (!rc) rc = log_path ? tr_merge(&log, convert_event, c, &c->err) : read_events(c);
  const char *why = "";
  int64_t heap_faults = -1;
  if (c->touch_auto) why = choose_touch(c, log_path ? &log.info : NULL, &heap_faults);
  if (!rc && !cv_stop) rc = ops_finish(c);
  if (rc || cv_stop) {
    ops_abort(c);
    if (cv_stop > 0 && !c->err.message[0]) return 130;     /* interrupted: nothing left behind */
    error_report(&c->err);
    return 2;
  }
  report(c, log_path ? &log : NULL, why, heap_faults);
  if (log_path) tr_close(&log);
  return 0;
}
