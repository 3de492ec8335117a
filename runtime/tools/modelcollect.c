/* scenc's model collector: a tracer log -> the figures `scenc convert --model` fits its model to.
 *
 *   scenc-modelcollect --log app.trace --out figures.json --spans spans.bin [--progress]
 *
 * trace/model/collect.py's Collector (consume, then finish) for a tracer log, read directly with
 * trace_read.h as the exact converter reads it; trace/model/native.py turns the JSON back into that
 * Collector, field for field and in the same order (Python dicts keep their insertion order, and the
 * writer reads them in it), and the model is fitted and written in Python as before. The handoffs'
 * ordinals (Collector.handoffs) go to --spans, 8 bytes each. Every rule here is collect.py's; a change to
 * one is a change to both (tests/trace/test_model_native.py compares the two on the fixtures). Memory
 * follows the live objects, as collect.py's does. Errors: {"error": ..., "record": N} on stdout, status 1. */
#define _GNU_SOURCE                /* program_invocation_short_name (trace_read.h's tr_oom) */
#include "trace_read.h"

#include <signal.h>
#include <time.h>

#define WINDOW0 64
#define MAX_WINDOWS 128
#define MAX_HANDOFFS 4000000
#define MAX_TRAILS 16
#define MAX_TRAIL_STEPS 512
#define MAX_BIG_OBJECTS 32
#define MAX_PEAK_FREED (1 << 17)
#define MAX_KEPT_RECORDS 4096   /* collect.py's: objects live at the end of 1/KEPT_RECORD_PART of the peak or more */
#define KEPT_RECORD_PART 1024
#define MAX_MAP_RECORDS 256
#define MAX_BIG_MAPS 16
#define DENSE_GAP_NS 1000000         /* collect.py's: without a CPU clock, a longer time between a thread's calls is
                                        waiting, not work */
#define NCLS 9                       /* len(SIZE_CLASS_BOUNDS) + 1 */
#define NONE_TID 0xFFFFFFFFull       /* ("end", how, None) */
#define PROGRESS_EVERY (1u << 18)

static const int64_t class_bounds[NCLS - 1] = {64, 256, 1024, 4096, 16384, 65536, 262144, 1048576};
/* MODEL_KIND of collect.py, by event kind (-1: not an allocation) */
static const char *const model_kind_name[EV_CALLS] = {
  "malloc", "malloc", "malloc", "calloc", NULL, NULL, NULL, NULL, NULL, "aligned_alloc", "memalign",
  "posix_memalign", "memalign", "memalign" };

#define GROW(p, cap, need) ((p) = tr_grow((p), &(cap), (need), sizeof *(p)))

static int64_t size_bucket(uint64_t s) {
  if (s < 1024) return (int64_t)s;
  int e = bit_length(s) - 1;
  return 1024 + (int64_t)(e - 10) * 16 + (int64_t)((s >> (e - 4)) & 15);
}
static int64_t life_bucket(int64_t n) {
  if (n < 32) return n;
  int e = bit_length((uint64_t)n) - 1;
  return 32 + (int64_t)(e - 5) * 8 + ((n >> (e - 3)) & 7);
}
static int size_class(uint64_t s) {
  int c = 0;
  while (c < NCLS - 1 && (int64_t)s >= class_bounds[c]) c++;
  return c;
}

/* ---------------------------------------------------------------- an insertion-ordered map (a Python dict) */
typedef struct { uint64_t key; int64_t a, b; } om_ent;
typedef struct { uint64_t key; uint32_t pos; } om_slot;   /* the key beside its entry's place: one cache line a probe */
typedef struct { om_ent *e; size_t n, cap; om_slot *idx; size_t icap; } omap;

static om_ent *om_get(omap *m, uint64_t key) {
  if (m->n * 2 >= m->icap) {
    size_t cap = m->icap ? m->icap * 2 : 16;
    om_slot *s = tr_xcalloc(cap, sizeof *s);
    for (size_t i = 0; i < m->n; i++) {
      size_t h = mix64(m->e[i].key) & (cap - 1);
      while (s[h].pos) h = (h + 1) & (cap - 1);
      s[h] = (om_slot){m->e[i].key, (uint32_t)i + 1};
    }
    free(m->idx);
    m->idx = s;
    m->icap = cap;
  }
  size_t h = mix64(key) & (m->icap - 1);
  for (; m->idx[h].pos; h = (h + 1) & (m->icap - 1))
    if (m->idx[h].key == key) return &m->e[m->idx[h].pos - 1];
  GROW(m->e, m->cap, m->n + 1);
  om_ent *x = &m->e[m->n++];
  *x = (om_ent){key, 0, 0};
  m->idx[h] = (om_slot){key, (uint32_t)m->n};
  return x;
}
static om_ent *om_find(const omap *m, uint64_t key) {
  if (!m->icap) return NULL;
  size_t h = mix64(key) & (m->icap - 1);
  for (; m->idx[h].pos; h = (h + 1) & (m->icap - 1))
    if (m->idx[h].key == key) return &m->e[m->idx[h].pos - 1];
  return NULL;
}
static void om_add(omap *m, uint64_t key, int64_t a, int64_t b) {
  om_ent *x = om_get(m, key);
  x->a += a;
  x->b += b;
}
static void om_merge(omap *into, const omap *o) {     /* merge_hist, Counter.update */
  for (size_t i = 0; i < o->n; i++) om_add(into, o->e[i].key, o->e[i].a, o->e[i].b);
}
static void om_free(omap *m) { free(m->e); free(m->idx); memset(m, 0, sizeof *m); }

/* ---------------------------------------------------------------- counter keys (ThreadWindow.c) */
enum { C_EVENTS, C_FREE_NULL, C_TICKS, C_FREE_UNKNOWN, C_REALLOC_UNKNOWN, C_REALLOC_FAILED, C_ALLOC_FAILED,
       C_REALLOC, C_REALLOC_AS_FREE, C_FREE_MISSED, C_CENSORED, C_KEPT_TICKS, C_MAP, C_MAP_KEPT, C_GAPS, C_GAP_NS,
       C_PLAIN,
       /* tuples */
       C_LIVES = C_PLAIN, C_LIVES_CLASS, C_SEND, C_KEPT, C_START, C_END, C_RECV, C_MAP_B, C_MAP_KEPT_B };
enum { HOW_NONE, HOW_LOCAL, HOW_SEND, HOW_CHAIN, HOW_KEPT, HOW_END };
static const char *const how_name[] = {"", "local", "send", "chain", "kept", "end"};
static uint64_t ckey(unsigned type, uint64_t a, uint64_t b) { return (uint64_t)type << 56 | a << 40 | b; }

/* ---------------------------------------------------------------- figures by size class */
typedef struct { omap life, sizes, kinds; int64_t bytes; __int128 byte_life; int with_kinds; } cls_entry;
typedef struct { cls_entry *e[NCLS]; uint8_t order[NCLS], n; } by_class;
typedef struct { int64_t w; by_class *bc; } dies_ent;
typedef struct { uint64_t key; omap *h; } sub_ent;

static cls_entry *class_entry(by_class *bc, int cls, int kinds) {
  if (!bc->e[cls]) {
    bc->e[cls] = tr_xcalloc(sizeof(cls_entry), 1);
    bc->e[cls]->with_kinds = kinds;
    bc->order[bc->n++] = (uint8_t)cls;
  }
  return bc->e[cls];
}
static void merge_classes(by_class *into, const by_class *o) {
  for (int i = 0; i < o->n; i++) {
    const cls_entry *x = o->e[o->order[i]];
    cls_entry *m = class_entry(into, o->order[i], x->with_kinds);
    om_merge(&m->life, &x->life);
    m->bytes += x->bytes;
    m->byte_life += x->byte_life;
    om_merge(&m->sizes, &x->sizes);
    if (x->with_kinds) om_merge(&m->kinds, &x->kinds);
  }
}
static void free_classes(by_class *bc) {
  for (int i = 0; i < bc->n; i++) {
    cls_entry *x = bc->e[bc->order[i]];
    om_free(&x->life); om_free(&x->sizes); om_free(&x->kinds);
    free(x);
  }
  memset(bc, 0, sizeof *bc);
}
static cls_entry *add_to_class(by_class *bc, int cls, int64_t bucket, int64_t life, int64_t nbytes, int kinds) {
  cls_entry *x = class_entry(bc, cls, kinds);
  om_add(&x->life, (uint64_t)bucket, 1, life);
  x->bytes += nbytes;
  x->byte_life += (__int128)nbytes * life;
  om_add(&x->sizes, (uint64_t)size_bucket((uint64_t)nbytes), 1, nbytes);
  return x;
}

/* ---------------------------------------------------------------- ThreadWindow */
typedef struct {
  omap c, sizes, rsizes, lives, sent, kept, maps, map_kept, starts;
  uint32_t plain[C_PLAIN];          /* the plain keys' places in c (+ 1): no hashing for the commonest counters */
  sub_ent *sent_to, *map_lives;
  size_t n_sent_to, cap_sent_to, n_map_lives, cap_map_lives;
  by_class lbc;
  dies_ent *dies;
  size_t n_dies, cap_dies;
} tw_t;

static omap *sub(sub_ent **v, size_t *n, size_t *cap, uint64_t key) {
  for (size_t i = 0; i < *n; i++) if ((*v)[i].key == key) return (*v)[i].h;
  *v = tr_grow(*v, cap, *n + 1, sizeof **v);
  (*v)[*n] = (sub_ent){key, tr_xcalloc(sizeof(omap), 1)};
  return (*v)[(*n)++].h;
}
static by_class *dies_of(tw_t *t, int64_t w) {
  for (size_t i = 0; i < t->n_dies; i++) if (t->dies[i].w == w) return t->dies[i].bc;
  GROW(t->dies, t->cap_dies, t->n_dies + 1);
  t->dies[t->n_dies] = (dies_ent){w, tr_xcalloc(sizeof(by_class), 1)};
  return t->dies[t->n_dies++].bc;
}
static void tw_free(tw_t *t) {
  omap *ms[] = {&t->c, &t->sizes, &t->rsizes, &t->lives, &t->sent, &t->kept, &t->maps, &t->map_kept, &t->starts};
  for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) om_free(ms[i]);
  for (size_t i = 0; i < t->n_sent_to; i++) { om_free(t->sent_to[i].h); free(t->sent_to[i].h); }
  for (size_t i = 0; i < t->n_map_lives; i++) { om_free(t->map_lives[i].h); free(t->map_lives[i].h); }
  free(t->sent_to); free(t->map_lives);
  free_classes(&t->lbc);
  for (size_t i = 0; i < t->n_dies; i++) { free_classes(t->dies[i].bc); free(t->dies[i].bc); }
  free(t->dies);
  free(t);
}
/* ThreadWindow.merge (the discarded o's figures merged: the same order as a take-over) */
static void tw_merge(tw_t *a, tw_t *o) {
  om_merge(&a->c, &o->c);
  for (size_t i = 0; i < a->c.n; i++)
    if ((a->c.e[i].key >> 56) < C_PLAIN) a->plain[a->c.e[i].key >> 56] = (uint32_t)i + 1;
  om_merge(&a->sizes, &o->sizes);
  om_merge(&a->sent, &o->sent);
  for (size_t i = 0; i < o->n_sent_to; i++)
    om_merge(sub(&a->sent_to, &a->n_sent_to, &a->cap_sent_to, o->sent_to[i].key), o->sent_to[i].h);
  om_merge(&a->kept, &o->kept);
  om_merge(&a->rsizes, &o->rsizes);
  om_merge(&a->lives, &o->lives);
  merge_classes(&a->lbc, &o->lbc);
  for (size_t i = 0; i < o->n_dies; i++) merge_classes(dies_of(a, o->dies[i].w), o->dies[i].bc);
  om_merge(&a->maps, &o->maps);
  for (size_t i = 0; i < o->n_map_lives; i++)
    om_merge(sub(&a->map_lives, &a->n_map_lives, &a->cap_map_lives, o->map_lives[i].key), o->map_lives[i].h);
  om_merge(&a->map_kept, &o->map_kept);
  om_merge(&a->starts, &o->starts);
  tw_free(o);
}
static void tw_halve_dies(tw_t *t) {
  dies_ent *old = t->dies;
  size_t n = t->n_dies;
  t->dies = NULL;
  t->n_dies = t->cap_dies = 0;
  for (size_t i = 0; i < n; i++) {
    int64_t w = old[i].w / 2;
    by_class *mine = NULL;
    for (size_t j = 0; j < t->n_dies; j++) if (t->dies[j].w == w) mine = t->dies[j].bc;
    if (!mine) {
      GROW(t->dies, t->cap_dies, t->n_dies + 1);
      t->dies[t->n_dies++] = (dies_ent){w, old[i].bc};
    } else {
      merge_classes(mine, old[i].bc);
      free_classes(old[i].bc);
      free(old[i].bc);
    }
  }
  free(old);
}

/* ---------------------------------------------------------------- records */
typedef struct { int64_t at_o, at_t, size, life, end; uint16_t mk; uint8_t how, has_life, has_end, in_heap, live; }
  big_rec;
typedef struct { int64_t o, t, nbytes; } step_t;
typedef struct {
  uint32_t owner;                   /* thread index */
  uint16_t mk;
  uint8_t how, has_end, steps_none, used;
  int64_t start_o, start_t, size, largest, end_o, end_t, last_o, last_t, seq;
  step_t *steps;
  size_t nsteps, cap;
} trail_t;
typedef struct {
  uint32_t ti;
  int64_t at_o, at_t, size, bytes, life, seq;
  uint8_t has_life;
} map_rec;
typedef struct { int64_t k1, k2, k3; uint32_t ref; } heap_item;
typedef struct { heap_item *v; size_t n, cap; } pyheap;

static int item_less(const heap_item *a, const heap_item *b) {
  if (a->k1 != b->k1) return a->k1 < b->k1;
  if (a->k2 != b->k2) return a->k2 < b->k2;
  return a->k3 < b->k3;
}
/* heapq's _siftdown and _siftup, step for step: the heap's list order is the Python one */
static void sift_down(pyheap *h, size_t start, size_t pos) {
  heap_item x = h->v[pos];
  while (pos > start) {
    size_t parent = (pos - 1) >> 1;
    if (item_less(&x, &h->v[parent])) { h->v[pos] = h->v[parent]; pos = parent; continue; }
    break;
  }
  h->v[pos] = x;
}
static void sift_up(pyheap *h, size_t pos) {
  size_t end = h->n, start = pos, child = 2 * pos + 1;
  heap_item x = h->v[pos];
  while (child < end) {
    size_t right = child + 1;
    if (right < end && !item_less(&h->v[child], &h->v[right])) child = right;
    h->v[pos] = h->v[child];
    pos = child;
    child = 2 * pos + 1;
  }
  h->v[pos] = x;
  sift_down(h, start, pos);
}
static void heap_push(pyheap *h, heap_item x) {
  GROW(h->v, h->cap, h->n + 1);
  h->v[h->n++] = x;
  sift_down(h, 0, h->n - 1);
}
static heap_item heap_pushpop(pyheap *h, heap_item x) {
  if (h->n && item_less(&h->v[0], &x)) {
    heap_item top = h->v[0];
    h->v[0] = x;
    sift_up(h, 0);
    return top;
  }
  return x;
}

/* ---------------------------------------------------------------- threads */
typedef struct {
  uint32_t tid;
  int64_t tick, chains;
  tw_t **tw;
  size_t ntw, captw;
  int has_tw;
  pyheap big, trails, big_maps;
  int64_t big_floor;
  int has_floor;
  int64_t chain_classes[NCLS], max_chain_classes[NCLS];
  int has_classes;
  int64_t *spans;                   /* chain_spans */
  size_t nspans, capspans;
  uint32_t *records;                /* map_records: indices, or records_none */
  size_t nrecords, caprecords;
  int has_records, records_none;
  uint32_t *ending;                 /* map_ending */
  size_t nending, capending;
  int has_ending;
  int born;                         /* in Collector.born */
  uint64_t last_call_ns;            /* Collector.last_call_ns: the time of its last call */
  uint64_t last_call_cpu;           /* Collector.last_call_cpu: its CPU clock then (0: none) */
  int has_last_call;
} thread_t;

typedef struct { int64_t events, allocs, frees, log_sizes, first_line; double t_first, t_last; } window_t;
typedef struct { uint64_t ptr, seq; int64_t o, t, nbytes; uint32_t owner, chain, ref; uint16_t mk; } live_ent;
typedef struct { uint64_t start, end, seq; int64_t rec; } piece_t;
typedef struct { uint32_t owner, freer; int64_t *v; size_t n, cap; } handoff_t;
typedef struct { int64_t o, t, nbytes, life, end; uint32_t owner; uint16_t mk; } peak_rec;

#define NO_REF 0xFFFFFFFFu

static struct {
  int64_t window, ordinal, live_bytes, peak_bytes, peak_line, first_line, last_line, cross_frees, known_frees;
  int has_first, has_time, has_cpu;
  window_t *wins;
  size_t nwins, capwins;
  thread_t *th;
  size_t nth, capth;
  omap tid_index;                   /* tid -> thread index + 1 */
  uint32_t *tw_order, *class_order;  /* thread_windows', max_chain_classes' dict orders */
  size_t ntw_order, captw_order, nclass_order, capclass_order;
  omap trace_kinds, born, died, max_chains, chain_held, trail_dropped, big_dropped, big_maps_dropped, map_calls,
       maps_left_out, spans_order, ending_order;
  int64_t thread_starts, handoff_count, chain_span_count, trail_seq, live_at_end;
  /* model kinds: (name, alignment or None) */
  struct { const char *name; int64_t align; int has_align; } mk[256];
  int nmk;
  /* the live objects */
  live_ent *live;
  size_t live_n, live_cap;
  uint64_t live_seq;
  big_rec *bigs;
  size_t nbigs, capbigs;
  uint32_t *free_bigs;
  size_t nfree_bigs, capfree_bigs;
  trail_t *trails;
  size_t ntrails, captrails;
  uint32_t *free_trails;
  size_t nfree_trails, capfree_trails;
  handoff_t *handoffs;
  size_t nhandoffs, caphandoffs;
  omap handoff_index;
  /* the program's own mappings */
  piece_t *pieces;
  size_t npieces, cappieces;
  uint64_t piece_seq;
  map_rec *maps;
  size_t nmaps, capmaps;
  int64_t mapped_now, mapped_peak, mapped_writable, mapped_writable_peak, maps_made;
  int64_t maps_protected, map_bytes_made;   /* collect.py's: parts of reservations made writable; bytes made */
  const tr_rec *rec;
  uint64_t rec_cpu;                 /* its thread's CPU clock (tr_cpu_ns; 0: none) */
  int64_t kind_count[EV_KINDS];     /* trace_kinds' counts (its keys' order: the omap) */
  /* collect.py's peak_freed: the plain objects live at the peak of live bytes that their own thread freed
   * after it, emptied each time the peak rises */
  int64_t peak_o;
  peak_rec *pf;
  size_t npf, cappf;
  int peak_overflow;
  /* collect.py's kept_big: the plain objects live at the end of 1/KEPT_RECORD_PART of the peak or more */
  peak_rec *kb;
  size_t nkb, capkb;
  int kept_overflow;
} S;

static uint32_t thread_index(uint32_t tid) {
  om_ent *x = om_get(&S.tid_index, tid);
  if (!x->a) {
    GROW(S.th, S.capth, S.nth + 1);
    memset(&S.th[S.nth], 0, sizeof S.th[S.nth]);
    S.th[S.nth].tid = tid;
    x->a = (int64_t)++S.nth;
  }
  return (uint32_t)x->a - 1;
}

static void born_setdefault(uint32_t tid) {      /* born.setdefault(tid, ordinal) */
  uint32_t ti = thread_index(tid);           /* first: it may move S.th */
  thread_t *t = &S.th[ti];
  if (t->born) return;
  t->born = 1;
  om_get(&S.born, tid)->a = S.ordinal;
}

static tw_t *cell(uint32_t ti, int64_t w) {
  thread_t *t = &S.th[ti];
  if (!t->has_tw) {
    t->has_tw = 1;
    t->tick = 0;
    GROW(S.tw_order, S.captw_order, S.ntw_order + 1);
    S.tw_order[S.ntw_order++] = ti;
  }
  if ((int64_t)t->ntw <= w) {
    GROW(t->tw, t->captw, (size_t)w + 1);
    for (size_t i = t->ntw; i <= (size_t)w; i++) t->tw[i] = NULL;
    t->ntw = (size_t)w + 1;
  }
  if (!t->tw[w]) t->tw[w] = tr_xcalloc(sizeof(tw_t), 1);
  return t->tw[w];
}
static void cinc(tw_t *t, unsigned type, uint64_t a, uint64_t b, int64_t n) {
  if (type < C_PLAIN) {
    if (t->plain[type]) { t->c.e[t->plain[type] - 1].a += n; return; }
    om_ent *x = om_get(&t->c, ckey(type, a, b));
    x->a += n;
    t->plain[type] = (uint32_t)(x - t->c.e) + 1;
    return;
  }
  om_add(&t->c, ckey(type, a, b), n, 0);
}

static void merge_windows(void) {
  size_t n = 0;
  for (size_t i = 0; i < S.nwins; i += 2) {
    window_t w = S.wins[i];
    if (i + 1 < S.nwins) {
      window_t *o = &S.wins[i + 1];
      w.events += o->events; w.allocs += o->allocs; w.frees += o->frees; w.log_sizes += o->log_sizes;
      w.t_last = o->t_last;
    }
    S.wins[n++] = w;
  }
  S.nwins = n;
  for (size_t k = 0; k < S.ntw_order; k++) {
    thread_t *t = &S.th[S.tw_order[k]];
    size_t m = 0;
    for (size_t i = 0; i < t->ntw; i += 2) {
      tw_t *a = t->tw[i], *b = i + 1 < t->ntw ? t->tw[i + 1] : NULL, *out;
      if (a && b) { tw_merge(a, b); out = a; }
      else out = a ? a : b;
      if (out) tw_halve_dies(out);
      t->tw[m++] = out;
    }
    t->ntw = m;
  }
  S.window *= 2;
}

static uint16_t model_kind(const char *name, int64_t align, int has_align) {
  for (int i = 0; i < S.nmk; i++)
    if (!strcmp(S.mk[i].name, name) && S.mk[i].has_align == has_align && (!has_align || S.mk[i].align == align))
      return (uint16_t)i;
  if (S.nmk == 256) { fprintf(stderr, "scenc modelcollect: too many alignments\n"); exit(3); }
  S.mk[S.nmk].name = name; S.mk[S.nmk].align = align; S.mk[S.nmk].has_align = has_align;
  return (uint16_t)S.nmk++;
}

/* ---------------------------------------------------------------- the live objects (ptr -> live_ent) */
static live_ent *live_find(uint64_t ptr) {
  if (!S.live_cap) return NULL;
  size_t h = mix64(ptr) & (S.live_cap - 1);
  for (; S.live[h].ptr; h = (h + 1) & (S.live_cap - 1))
    if (S.live[h].ptr == ptr) return &S.live[h];
  return NULL;
}
static void live_grow(void) {
  size_t cap = S.live_cap ? S.live_cap * 2 : 1024;
  live_ent *v = tr_xcalloc(cap, sizeof *v);
  for (size_t i = 0; i < S.live_cap; i++)
    if (S.live[i].ptr) {
      size_t h = mix64(S.live[i].ptr) & (cap - 1);
      while (v[h].ptr) h = (h + 1) & (cap - 1);
      v[h] = S.live[i];
    }
  free(S.live);
  S.live = v;
  S.live_cap = cap;
}
/* live[ptr] = x: a key already there keeps its place in the dict's order */
static void live_set(live_ent x) {
  if ((S.live_n + 1) * 2 > S.live_cap) live_grow();
  size_t h = mix64(x.ptr) & (S.live_cap - 1);
  for (; S.live[h].ptr; h = (h + 1) & (S.live_cap - 1))
    if (S.live[h].ptr == x.ptr) { x.seq = S.live[h].seq; S.live[h] = x; return; }
  x.seq = S.live_seq++;
  S.live[h] = x;
  S.live_n++;
}
static void live_del(live_ent *e) {      /* backward-shift deletion */
  size_t mask = S.live_cap - 1, i = (size_t)(e - S.live), j = i;
  for (;;) {
    j = (j + 1) & mask;
    if (!S.live[j].ptr) break;
    size_t k = mix64(S.live[j].ptr) & mask;
    if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) { S.live[i] = S.live[j]; i = j; }
  }
  S.live[i].ptr = 0;
  S.live_n--;
}

/* ---------------------------------------------------------------- records' pools */
static uint32_t big_new(void) {
  uint32_t i;
  if (S.nfree_bigs) i = S.free_bigs[--S.nfree_bigs];
  else { GROW(S.bigs, S.capbigs, S.nbigs + 1); i = (uint32_t)S.nbigs++; }
  memset(&S.bigs[i], 0, sizeof S.bigs[i]);
  return i;
}
static void big_release(uint32_t i) {          /* neither in a heap nor referenced by a live object: reused */
  if (S.bigs[i].in_heap || S.bigs[i].live) return;
  GROW(S.free_bigs, S.capfree_bigs, S.nfree_bigs + 1);
  S.free_bigs[S.nfree_bigs++] = i;
}
static uint32_t trail_new(void) {
  uint32_t i;
  if (S.nfree_trails) i = S.free_trails[--S.nfree_trails];
  else { GROW(S.trails, S.captrails, S.ntrails + 1); i = (uint32_t)S.ntrails++; }
  memset(&S.trails[i], 0, sizeof S.trails[i]);
  S.trails[i].used = 1;
  return i;
}
static void trail_release(uint32_t i) {
  free(S.trails[i].steps);
  S.trails[i].steps = NULL;
  S.trails[i].used = 0;
  GROW(S.free_trails, S.capfree_trails, S.nfree_trails + 1);
  S.free_trails[S.nfree_trails++] = i;
}
static void trail_step(trail_t *tr, int64_t o, int64_t t, int64_t nbytes) {
  if (nbytes > tr->largest) tr->largest = nbytes;
  tr->last_o = o;
  tr->last_t = t;
  if (!tr->steps_none) {
    GROW(tr->steps, tr->cap, tr->nsteps + 1);
    tr->steps[tr->nsteps++] = (step_t){o, t, nbytes};
    if (tr->nsteps > MAX_TRAIL_STEPS) { tr->steps_none = 1; free(tr->steps); tr->steps = NULL; tr->nsteps = 0; }
  }
}

static void counter_max(omap *m, uint64_t key, int64_t v) {     /* c[key] = max(c[key], v) */
  om_ent *x = om_find(m, key);
  if (!x) { om_get(m, key)->a = v > 0 ? v : 0; return; }
  if (v > x->a) x->a = v;
}

static void chain_block(uint32_t ti, int64_t nbytes, int step) {
  thread_t *t = &S.th[ti];
  if (!t->has_classes) {
    t->has_classes = 1;
    GROW(S.class_order, S.capclass_order, S.nclass_order + 1);
    S.class_order[S.nclass_order++] = ti;
  }
  int cls = size_class((uint64_t)nbytes);
  t->chain_classes[cls] += step;
  if (step > 0) {
    int64_t held = 0;
    for (int c = NCLS - 1; c >= 0; c--) {
      held += t->chain_classes[c];
      if (c <= cls && held > t->max_chain_classes[c]) t->max_chain_classes[c] = held;
    }
  }
}

static uint32_t big_object(uint32_t ti, int64_t o, int64_t now, int64_t nbytes, uint16_t mk) {
  thread_t *t = &S.th[ti];
  uint32_t r = big_new();
  big_rec *b = &S.bigs[r];
  b->at_o = o; b->at_t = now; b->size = nbytes; b->mk = mk; b->in_heap = 1;
  heap_item item = {nbytes, o, 0, r};
  if (t->big.n < MAX_BIG_OBJECTS) heap_push(&t->big, item);
  else {
    heap_item dropped = heap_pushpop(&t->big, item);
    counter_max(&S.big_dropped, t->tid, dropped.k1);
    S.bigs[dropped.ref].in_heap = 0;
    if (dropped.ref == r) { big_release(r); r = NO_REF; }
    else big_release(dropped.ref);
  }
  if (t->big.n == MAX_BIG_OBJECTS) { t->big_floor = t->big.v[0].k1; t->has_floor = 1; }
  return r;
}

static void end_trail(uint32_t ri, uint8_t how, int has_moment, int64_t mo, int64_t mt) {
  trail_t *tr = &S.trails[ri];
  tr->has_end = (uint8_t)has_moment; tr->end_o = mo; tr->end_t = mt; tr->how = how;
  thread_t *owner = &S.th[tr->owner];
  int64_t ho, ht;
  if (how == HOW_SEND) { ho = tr->last_o; ht = tr->last_t; }
  else if (has_moment) { ho = mo; ht = mt; }
  else { ho = S.ordinal; ht = owner->tick; }
  om_get(&S.chain_held, owner->tid)->a += ht - tr->start_t;
  S.chain_span_count++;
  if (S.chain_span_count <= MAX_HANDOFFS) {
    om_get(&S.spans_order, tr->owner);
    GROW(owner->spans, owner->capspans, owner->nspans + 2);
    owner->spans[owner->nspans++] = tr->start_o;
    owner->spans[owner->nspans++] = ho;
  }
  tr->seq = ++S.trail_seq;
  heap_item item = {tr->largest, tr->seq, 0, ri};
  if (owner->trails.n < MAX_TRAILS) { heap_push(&owner->trails, item); return; }
  heap_item dropped = heap_pushpop(&owner->trails, item);
  counter_max(&S.trail_dropped, owner->tid, S.trails[dropped.ref].largest);
  trail_release(dropped.ref);
}

static void handoff(uint32_t owner, uint32_t freer, int64_t o_alloc) {
  S.handoff_count++;
  if (S.handoff_count > MAX_HANDOFFS) return;
  om_ent *x = om_get(&S.handoff_index, (uint64_t)S.th[owner].tid << 32 | S.th[freer].tid);
  if (!x->a) {
    GROW(S.handoffs, S.caphandoffs, S.nhandoffs + 1);
    S.handoffs[S.nhandoffs] = (handoff_t){S.th[owner].tid, S.th[freer].tid, NULL, 0, 0};
    x->a = (int64_t)++S.nhandoffs;
  }
  handoff_t *h = &S.handoffs[x->a - 1];
  GROW(h->v, h->cap, h->n + 2);
  h->v[h->n++] = o_alloc;
  h->v[h->n++] = S.ordinal - 1;
}

/* Collector._release: e was popped (or is overwritten) by the caller */
static void release(const live_ent *e, uint32_t freer, int64_t w, tw_t *tw, window_t *win, int seen) {
  uint32_t owner = e->owner;
  S.live_bytes -= e->nbytes;
  win->frees++;
  if (seen) {
    S.known_frees++;
    if (owner != freer) S.cross_frees++;
  }
  if (owner != freer) handoff(owner, freer, e->o);
  thread_t *to = &S.th[owner], *tf = &S.th[freer];
  if (e->chain) {
    to->chains--;
    chain_block(owner, e->nbytes, -1);
    end_trail(e->ref, owner == freer ? HOW_LOCAL : HOW_SEND, 1, S.ordinal - 1, tf->tick + 1);
    cinc(tw, C_TICKS, 0, 0, 1);
    if (owner == freer) cinc(tw, C_END, HOW_LOCAL, NONE_TID, 1);
    else {
      cinc(cell(owner, e->o / S.window), C_END, HOW_SEND, tf->tid, 1);
      cinc(tw, C_RECV, 0, to->tid, 1);
    }
    tf->tick++;
    return;
  }
  int64_t w_alloc = e->o / S.window;
  tw_t *acell = owner == freer && w_alloc == w ? tw : cell(owner, w_alloc);
  if (e->ref != NO_REF) {
    big_rec *b = &S.bigs[e->ref];
    if (owner == freer) { b->how = HOW_LOCAL; b->life = to->tick - e->t; b->has_life = 1; }
    else { b->how = HOW_SEND; b->has_life = 0; }
    b->end = S.ordinal - 1;
    b->has_end = 1;
  }
  if (owner == freer) {
    int64_t lifetime = to->tick - e->t, bucket = life_bucket(lifetime);
    om_add(&acell->lives, (uint64_t)bucket, 1, lifetime);
    int cls = size_class((uint64_t)e->nbytes);
    add_to_class(&acell->lbc, cls, bucket, lifetime, e->nbytes, 0);
    if (w != w_alloc) om_add(&add_to_class(dies_of(acell, w), cls, bucket, lifetime, e->nbytes, 1)->kinds, e->mk, 1, 0);
    if (e->o <= S.peak_o && seen) {
      if (S.npf < MAX_PEAK_FREED) {
        GROW(S.pf, S.cappf, S.npf + 1);
        S.pf[S.npf++] = (peak_rec){e->o, e->t, e->nbytes, lifetime, S.ordinal - 1, to->tid, e->mk};
      } else S.peak_overflow = 1;
    }
    cinc(acell, C_LIVES_CLASS, e->mk, (uint64_t)cls, 1);
    cinc(acell, C_LIVES, e->mk, 0, 1);
  } else {
    int64_t sb = size_bucket((uint64_t)e->nbytes);
    cinc(acell, C_SEND, e->mk, tf->tid, 1);
    om_add(&acell->sent, (uint64_t)sb, 1, e->nbytes);
    om_add(sub(&acell->sent_to, &acell->n_sent_to, &acell->cap_sent_to, tf->tid), (uint64_t)sb, 1, e->nbytes);
    cinc(tw, C_RECV, 0, to->tid, 1);
    cinc(tw, C_TICKS, 0, 0, 1);
    tf->tick++;
  }
}

static void drop_live_ref(const live_ent *e) {   /* the object's big record loses its live reference */
  if (!e->chain && e->ref != NO_REF) { S.bigs[e->ref].live = 0; big_release(e->ref); }
}

static void alloc(uint32_t ti, int64_t o, int64_t w, tw_t *tw, window_t *win, uint16_t mk, int64_t nbytes, uint64_t res) {
  thread_t *t = &S.th[ti];
  cinc(tw, C_TICKS, 0, 0, 1);
  int64_t now = ++t->tick;
  om_add(&tw->sizes, (uint64_t)size_bucket((uint64_t)nbytes), 1, nbytes);
  win->allocs++;
  win->log_sizes += bit_length((uint64_t)nbytes);
  live_ent *prev = live_find(res);
  if (prev) {
    cinc(tw, C_FREE_MISSED, 0, 0, 1);
    live_ent copy = *prev;
    release(&copy, copy.owner, w, tw, win, 0);
    drop_live_ref(&copy);
    now = t->tick;
  }
  uint32_t big = NO_REF;
  if (!t->has_floor || nbytes >= t->big_floor) {
    big = big_object(ti, o, now, nbytes, mk);
    if (big != NO_REF) S.bigs[big].live = 1;
  }
  live_set((live_ent){res, 0, o, now, nbytes, ti, 0, big, mk});
  S.live_bytes += nbytes;
}

static void realloc_call(uint32_t ti, int64_t w, tw_t *tw, window_t *win, const tr_event *ev, live_ent *found) {
  thread_t *t = &S.th[ti];
  if (ev->failed) { cinc(tw, C_REALLOC_FAILED, 0, 0, 1); return; }
  int64_t nbytes = (int64_t)(ev->size * (ev->nmemb ? ev->nmemb : 1));
  live_ent e = *found;
  live_del(found);
  if (!ev->res) {
    cinc(tw, C_REALLOC_AS_FREE, 0, 0, 1);
    release(&e, ti, w, tw, win, 1);
    drop_live_ref(&e);
    return;
  }
  t->tick++;
  cinc(tw, C_TICKS, 0, 0, 1);
  cinc(tw, C_REALLOC, 0, 0, 1);
  om_add(&tw->rsizes, (uint64_t)size_bucket((uint64_t)nbytes), 1, nbytes);
  S.live_bytes -= e.nbytes;
  uint32_t tr;
  if (!e.chain) {
    tw_t *acell = cell(e.owner, e.o / S.window);
    cinc(acell, C_START, e.mk, 0, 1);
    om_add(&acell->starts, (uint64_t)size_bucket((uint64_t)e.nbytes), 1, e.nbytes);
    if (e.ref != NO_REF) { S.bigs[e.ref].how = HOW_CHAIN; drop_live_ref(&e); }
    tr = trail_new();
    trail_t *x = &S.trails[tr];
    x->owner = e.owner; x->start_o = e.o; x->start_t = e.t; x->mk = e.mk; x->size = e.nbytes;
    x->largest = e.nbytes; x->last_o = e.o; x->last_t = e.t;
  } else {
    S.th[e.owner].chains--;
    chain_block(e.owner, e.nbytes, -1);
    tr = e.ref;
  }
  trail_step(&S.trails[tr], S.ordinal - 1, t->tick, nbytes);
  t->chains++;
  counter_max(&S.max_chains, t->tid, t->chains);
  chain_block(ti, nbytes, 1);
  live_ent *prev = live_find(ev->res);
  if (prev) {
    cinc(tw, C_FREE_MISSED, 0, 0, 1);
    live_ent copy = *prev;
    release(&copy, copy.owner, w, tw, win, 0);
    drop_live_ref(&copy);
  }
  live_set((live_ent){ev->res, 0, S.ordinal - 1, t->tick, nbytes, ti, e.chain + 1, tr, e.mk});
  S.live_bytes += nbytes;
}

/* ---------------------------------------------------------------- the program's own mappings */
static size_t piece_at_or_before(uint64_t lo) {     /* bisect_right(starts, lo) */
  size_t a = 0, b = S.npieces;
  while (a < b) { size_t m = (a + b) / 2; if (S.pieces[m].start <= lo) a = m + 1; else b = m; }
  return a;
}
static void piece_insert(uint64_t lo, uint64_t hi, int64_t rec) {
  size_t i = piece_at_or_before(lo);
  GROW(S.pieces, S.cappieces, S.npieces + 1);
  memmove(&S.pieces[i + 1], &S.pieces[i], (S.npieces - i) * sizeof *S.pieces);
  S.pieces[i] = (piece_t){lo, hi, S.piece_seq++, rec};
  S.npieces++;
}
static void add_piece(uint64_t lo, uint64_t hi, int64_t rec) {
  if (hi <= lo) return;
  piece_insert(lo, hi, rec);
  S.mapped_now += (int64_t)(hi - lo);
  if (rec >= 0) { S.maps[rec].bytes += (int64_t)(hi - lo); S.mapped_writable += (int64_t)(hi - lo); }
}
static void resize_map(map_rec *r) {
  if (S.th[r->ti].tick == r->at_t && S.ordinal == r->at_o) r->size = r->bytes;
  else if (r->bytes > r->size) r->size = r->bytes;
}
static void big_map(int64_t ri) {
  map_rec *r = &S.maps[ri];
  thread_t *t = &S.th[r->ti];
  heap_item item = {r->size, r->at_o, r->seq, (uint32_t)ri};
  if (t->big_maps.n < MAX_BIG_MAPS) heap_push(&t->big_maps, item);
  else counter_max(&S.big_maps_dropped, t->tid, heap_pushpop(&t->big_maps, item).k1);
}
static void count_map(int64_t ri) {
  big_map(ri);
  map_rec *r = &S.maps[ri];
  int64_t last = S.nwins ? (int64_t)S.nwins - 1 : 0, w = r->at_o / S.window;
  tw_t *tw = cell(r->ti, w < last ? w : last);
  int64_t b = size_bucket((uint64_t)r->size);
  cinc(tw, C_MAP, 0, 0, 1);
  cinc(tw, C_MAP_B, 0, (uint64_t)b, 1);
  om_add(&tw->maps, (uint64_t)b, 1, r->size);
  om_add(sub(&tw->map_lives, &tw->n_map_lives, &tw->cap_map_lives, (uint64_t)b), (uint64_t)life_bucket(r->life), 1,
         r->life);
}
static void end_map(int64_t ri) {
  map_rec *r = &S.maps[ri];
  if (r->has_life) return;
  thread_t *t = &S.th[r->ti];
  r->life = t->tick - r->at_t;
  r->has_life = 1;
  if (r->size <= 0) return;
  if (!t->has_ending) {
    t->has_ending = 1;
    om_get(&S.ending_order, r->ti);
  }
  if (t->nending) {
    map_rec *first = &S.maps[t->ending[0]];
    if (t->tick > first->at_t + first->life) {
      for (size_t i = 0; i < t->nending; i++) count_map(t->ending[i]);
      t->nending = 0;
    }
  }
  GROW(t->ending, t->capending, t->nending + 1);
  t->ending[t->nending++] = (uint32_t)ri;
}
/* Collector._cut: the records touched, in order (repeats included) */
static size_t cut(uint64_t lo, uint64_t hi, int ended, int64_t **touched, size_t *cap) {
  size_t n = 0, i = piece_at_or_before(lo);
  i = i ? i - 1 : 0;
  while (i < S.npieces && S.pieces[i].start < hi) {
    piece_t p = S.pieces[i];
    if (p.end <= lo) { i++; continue; }
    memmove(&S.pieces[i], &S.pieces[i + 1], (S.npieces - i - 1) * sizeof *S.pieces);
    S.npieces--;
    int64_t c = (int64_t)((p.end < hi ? p.end : hi) - (p.start > lo ? p.start : lo));
    S.mapped_now -= c;
    if (p.rec >= 0) {
      S.maps[p.rec].bytes -= c;
      S.mapped_writable -= c;
      *touched = tr_grow(*touched, cap, n + 1, sizeof **touched);
      (*touched)[n++] = p.rec;
    }
    if (p.start < lo) { piece_insert(p.start, lo, p.rec); i++; }
    if (hi < p.end) piece_insert(hi, p.end, p.rec);
  }
  for (size_t k = 0; k < n && ended; k++) {
    if (S.maps[(*touched)[k]].bytes <= 0) end_map((*touched)[k]);
    else resize_map(&S.maps[(*touched)[k]]);
  }
  return n;
}

static void map_window(uint32_t ti) {
  int64_t w = S.ordinal / S.window, last = (int64_t)S.nwins - 1;
  if (w > last) w = last;
  cell(ti, w < 0 ? 0 : w);
}

/* A writable mapping's record, made now by thread ti (collect.py's MapRecord), in its thread's list of records
 * (until that list passes MAX_MAP_RECORDS, when the thread keeps none) */
static int64_t new_map_record(uint32_t ti, uint64_t size) {
  GROW(S.maps, S.capmaps, S.nmaps + 1);
  int64_t rec = (int64_t)S.nmaps++;
  S.maps[rec] = (map_rec){ti, S.ordinal, S.th[ti].tick, (int64_t)size, 0, 0, S.maps_made, 0};
  S.maps_made++;
  S.map_bytes_made += (int64_t)size;
  map_window(ti);
  thread_t *t = &S.th[ti];
  t->has_records = 1;
  if (!t->records_none) {
    GROW(t->records, t->caprecords, t->nrecords + 1);
    t->records[t->nrecords++] = (uint32_t)rec;
    if (t->nrecords > MAX_MAP_RECORDS) { t->records_none = 1; free(t->records); t->records = NULL; t->nrecords = 0; }
  }
  return rec;
}

static void note_mapped_peaks(void) {
  if (S.mapped_now > S.mapped_peak) S.mapped_peak = S.mapped_now;
  if (S.mapped_writable > S.mapped_writable_peak) S.mapped_writable_peak = S.mapped_writable;
}

static void mapping(const tr_event *ev) {
  static int64_t *touched;
  static size_t cap;
  om_get(&S.map_calls, ev->kind)->a++;
  if (ev->failed) { om_get(&S.maps_left_out, 0)->a += ev->kind != EV_MUNMAP; return; }
  uint32_t ti = thread_index(ev->tid);
  if (ev->kind == EV_MMAP && ev->res) {
    uint64_t size = pages(ev->size);
    cut(ev->res, ev->res + size, 1, &touched, &cap);
    int64_t rec = -1;
    if (ev->nmemb & PROT_WRITE_FLAG) {
      rec = new_map_record(ti, size);
    } else om_get(&S.maps_left_out, 1)->a++;
    add_piece(ev->res, ev->res + size, rec);
  } else if (ev->kind == EV_MUNMAP && ev->old) {
    cut(ev->old, ev->old + pages(ev->size), 1, &touched, &cap);
  } else if (ev->kind == EV_MREMAP && ev->res && ev->old) {
    size_t n = cut(ev->old, ev->old + pages(ev->align), 0, &touched, &cap);
    int64_t rec = n ? touched[0] : -1;
    uint64_t size = pages(ev->size);
    cut(ev->res, ev->res + size, 1, &touched, &cap);
    add_piece(ev->res, ev->res + size, rec);
    if (rec >= 0) {
      if (S.maps[rec].bytes == 0) end_map(rec);
      else resize_map(&S.maps[rec]);
    }
  }
  note_mapped_peaks();
}

/* mprotect: the parts of reservations (pieces without a record) it makes writable become mappings of their
 * own (collect.py's Collector._protect, which says why) */
static void protect(const tr_event *ev) {
  static int64_t *touched;
  static size_t cap;
  static uint64_t (*parts)[2];
  static size_t capparts;
  om_get(&S.map_calls, ev->kind)->a++;
  if (ev->failed || !ev->old || !(ev->nmemb & PROT_WRITE_FLAG)) return;
  uint64_t lo = ev->old, hi = ev->old + pages(ev->size);
  size_t i = piece_at_or_before(lo), n = 0;
  if (i) i--;
  for (; i < S.npieces && S.pieces[i].start < hi; i++) {
    if (S.pieces[i].end <= lo || S.pieces[i].rec >= 0) continue;
    GROW(parts, capparts, n + 1);
    parts[n][0] = S.pieces[i].start > lo ? S.pieces[i].start : lo;
    parts[n][1] = S.pieces[i].end < hi ? S.pieces[i].end : hi;
    n++;
  }
  uint32_t ti = n ? thread_index(ev->tid) : 0;
  for (size_t k = 0; k < n; k++) {
    uint64_t a = parts[k][0], b = parts[k][1];
    cut(a, b, 1, &touched, &cap);
    int64_t rec = new_map_record(ti, b - a);
    S.maps_protected++;
    add_piece(a, b, rec);
  }
  note_mapped_peaks();
}

/* ---------------------------------------------------------------- the pass */
static struct { uint32_t tid, ti; int64_t w; tw_t *tw; } hot = {0, 0, -1, NULL};
static uint64_t nevents;
static int progress;
static double started;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int consume(void *arg, const tr_event *ev) {
  const tr_rec *r = S.rec;
  double t = (double)(int64_t)(r->ns - *(const uint64_t *)arg) / 1e9;
  if (progress && ++nevents % PROGRESS_EVERY == 0) {
    double dt = now_s() - started, rate = nevents / (dt > 1e-9 ? dt : 1e-9);
    fprintf(stderr, "\rmodelling: %.1fM calls read, %.2fM calls/s ", nevents / 1e6, rate / 1e6);
    fflush(stderr);
  }
  if (ev->kind >= EV_CALLS) {
    if (ev->kind == EV_MMAP || ev->kind == EV_MUNMAP || ev->kind == EV_MREMAP) { mapping(ev); return 0; }
    if (ev->kind == EV_MPROTECT) { protect(ev); return 0; }
    born_setdefault(ev->tid);
    if (ev->kind == EV_THREAD_START) {
      S.thread_starts++;
      if (ev->size) born_setdefault((uint32_t)ev->size);
    } else {
      om_get(&S.died, ev->tid)->a = S.ordinal;
    }
    return 0;
  }
  uint32_t ti;
  if (hot.tw && ev->tid == hot.tid) ti = hot.ti;
  else ti = thread_index(ev->tid);
  if (!S.th[ti].born) born_setdefault(ev->tid);
  int64_t o = S.ordinal++;
  int64_t w = o / S.window;
  if (w >= MAX_WINDOWS) {
    merge_windows();
    w = o / S.window;
    hot.tw = NULL;
  }
  if (w == (int64_t)S.nwins) {
    GROW(S.wins, S.capwins, S.nwins + 1);
    S.wins[S.nwins++] = (window_t){0, 0, 0, 0, (int64_t)ev->line, t, t};
    S.has_time = 1;
  }
  window_t *win = &S.wins[w];
  if (!S.has_first) { S.has_first = 1; S.first_line = (int64_t)ev->line; }
  win->events++;
  win->t_last = t;
  S.last_line = (int64_t)ev->line;
  if (!S.kind_count[ev->kind]++) om_get(&S.trace_kinds, ev->kind);
  tw_t *tw;
  if (hot.tw && hot.tid == ev->tid && hot.w == w) tw = hot.tw;
  else { tw = cell(ti, w); hot.tid = ev->tid; hot.ti = ti; hot.w = w; hot.tw = tw; }
  thread_t *th = &S.th[ti];
  cinc(tw, C_EVENTS, 0, 0, 1);
  uint64_t cpu = S.rec_cpu;
  if (cpu) S.has_cpu = 1;
  if (th->has_last_call) {   /* collect.py's rule: the CPU time between the calls, else a short enough wall time */
    if (cpu && th->last_call_cpu) {
      int64_t gap = cpu > th->last_call_cpu ? (int64_t)(cpu - th->last_call_cpu) : 0;
      cinc(tw, C_GAPS, 0, 0, 1); cinc(tw, C_GAP_NS, 0, 0, gap);
    } else {
      int64_t gap = (int64_t)(r->ns - th->last_call_ns);
      if (gap <= DENSE_GAP_NS) { cinc(tw, C_GAPS, 0, 0, 1); cinc(tw, C_GAP_NS, 0, 0, gap); }
    }
  }
  th->last_call_ns = r->ns, th->last_call_cpu = cpu, th->has_last_call = 1;
  unsigned k = ev->kind;
  if (k == EV_FREE || k == EV_OPERATOR_DELETE || k == EV_OPERATOR_DELETE_ARRAY) {
    if (!ev->old) { cinc(tw, C_FREE_NULL, 0, 0, 1); cinc(tw, C_TICKS, 0, 0, 1); th->tick++; }
    else {
      live_ent *f = live_find(ev->old);
      if (!f) cinc(tw, C_FREE_UNKNOWN, 0, 0, 1);
      else {
        live_ent e = *f;
        live_del(f);
        release(&e, ti, w, tw, win, 1);
        drop_live_ref(&e);
      }
    }
  } else if (k == EV_REALLOC || k == EV_REALLOCARRAY) {
    live_ent *f = ev->old ? live_find(ev->old) : NULL;
    if (!f) {
      if (ev->old) cinc(tw, C_REALLOC_UNKNOWN, 0, 0, 1);
      if (ev->failed) cinc(tw, C_REALLOC_FAILED, 0, 0, 1);
      else if (ev->res || ev->size)
        alloc(ti, o, w, tw, win, model_kind("realloc", 0, 0), (int64_t)(ev->size * (ev->nmemb ? ev->nmemb : 1)),
              ev->res);
    } else realloc_call(ti, w, tw, win, ev, f);
  } else {
    if (ev->failed) { cinc(tw, C_ALLOC_FAILED, 0, 0, 1); return 0; }
    unsigned layout = tr_codes[r->kind].layout;
    int has_align = layout == L_ALIGN_SIZE || layout == L_SIZE_ALIGN;
    uint16_t mk = k == EV_VALLOC || k == EV_PVALLOC ? model_kind(model_kind_name[k], 4096, 1)
                  : model_kind(model_kind_name[k], (int64_t)ev->align, has_align);
    alloc(ti, o, w, tw, win, mk, (int64_t)(ev->size * ev->nmemb), ev->res);
  }
  if (S.live_bytes > S.peak_bytes) {
    S.peak_bytes = S.live_bytes;
    S.peak_line = (int64_t)ev->line;
    S.peak_o = o, S.npf = 0, S.peak_overflow = 0;
  }
  return 0;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}
static int cmp_live(const void *a, const void *b) {
  uint64_t x = ((const live_ent *)a)->seq, y = ((const live_ent *)b)->seq;
  return x < y ? -1 : x > y;
}
static int cmp_piece(const void *a, const void *b) {
  uint64_t x = ((const piece_t *)a)->seq, y = ((const piece_t *)b)->seq;
  return x < y ? -1 : x > y;
}
static int64_t most_at_once(const int64_t *spans, size_t n) {  /* an end at x before a start at x */
  int64_t *steps = tr_xcalloc(n, sizeof *steps), most = 0, level = 0;
  for (size_t i = 0; i < n; i++) steps[i] = spans[i] * 2 + (i % 2 == 0);
  qsort(steps, n, sizeof *steps, cmp_i64);
  for (size_t i = 0; i < n; i++) {
    level += (steps[i] & 1) ? 1 : -1;
    if (level > most) most = level;
  }
  free(steps);
  return most;
}

static void finish(void) {
  int64_t last = S.nwins ? (int64_t)S.nwins - 1 : 0;
  live_ent *objs = tr_xcalloc(S.live_n, sizeof *objs);
  size_t n = 0;
  for (size_t i = 0; i < S.live_cap; i++) if (S.live[i].ptr) objs[n++] = S.live[i];
  qsort(objs, n, sizeof *objs, cmp_live);
  for (size_t i = 0; i < n; i++) {
    live_ent *e = &objs[i];
    if (e->chain) {
      cinc(cell(e->owner, last), C_END, HOW_END, NONE_TID, 1);
      end_trail(e->ref, HOW_END, 0, 0, 0);
    } else {
      if (e->nbytes > 0 && (double)e->nbytes >= (double)S.peak_bytes / KEPT_RECORD_PART && !S.kept_overflow) {
        if (S.nkb < MAX_KEPT_RECORDS) {
          GROW(S.kb, S.capkb, S.nkb + 1);
          S.kb[S.nkb++] = (peak_rec){e->o, e->t, e->nbytes, 0, 0, S.th[e->owner].tid, e->mk};
        } else S.nkb = 0, S.kept_overflow = 1;
      }
      if (e->ref != NO_REF) S.bigs[e->ref].how = HOW_KEPT;
      tw_t *acell = cell(e->owner, e->o / S.window);
      om_add(&acell->kept, (uint64_t)size_bucket((uint64_t)e->nbytes), 1, e->nbytes);
      cinc(acell, C_KEPT, e->mk, 0, 1);
      cinc(acell, C_KEPT_TICKS, 0, 0, e->t);
      cinc(acell, C_CENSORED, 0, 0, 1);
    }
  }
  free(objs);
  S.live_at_end = (int64_t)S.live_n;
  /* kept: the mappings still mapped, in the pieces' dict order, then those unmapped at a thread's teardown */
  piece_t *ps = tr_xcalloc(S.npieces, sizeof *ps);
  if (S.npieces) memcpy(ps, S.pieces, S.npieces * sizeof *ps);
  qsort(ps, S.npieces, sizeof *ps, cmp_piece);
  int64_t *kept = tr_xcalloc(S.npieces + S.nmaps + 1, sizeof *kept);
  uint8_t *in_kept = tr_xcalloc(S.nmaps + 1, 1);
  size_t nkept = 0;
  for (size_t i = 0; i < S.npieces; i++) {
    int64_t r = ps[i].rec;
    if (r >= 0 && !S.maps[r].has_life && !in_kept[r]) { in_kept[r] = 1; kept[nkept++] = r; }
  }
  free(ps);
  for (size_t k = 0; k < S.ending_order.n; k++) {
    thread_t *t = &S.th[S.ending_order.e[k].key];
    for (size_t i = 0; i < t->nending; i++) {
      map_rec *r = &S.maps[t->ending[i]];
      if (t->tick > r->at_t + r->life) count_map(t->ending[i]);
      else {
        r->has_life = 0;
        if (!in_kept[t->ending[i]]) { in_kept[t->ending[i]] = 1; kept[nkept++] = t->ending[i]; }
      }
    }
    t->nending = 0;
  }
  for (size_t i = 0; i < nkept; i++) {
    map_rec *r = &S.maps[kept[i]];
    int64_t w = r->at_o / S.window;
    tw_t *tw = cell(r->ti, w < last ? w : last);
    int64_t b = size_bucket((uint64_t)r->size);
    cinc(tw, C_MAP_KEPT, 0, 0, 1);
    cinc(tw, C_MAP_KEPT_B, 0, (uint64_t)b, 1);
    om_add(&tw->map_kept, (uint64_t)b, 1, r->size);
    if (r->size > 0) big_map(kept[i]);
  }
  free(kept);
  free(in_kept);
  if (S.chain_span_count <= MAX_HANDOFFS)
    for (size_t k = 0; k < S.spans_order.n; k++) {
      thread_t *t = &S.th[S.spans_order.e[k].key];
      om_get(&S.max_chains, t->tid)->a = most_at_once(t->spans, t->nspans);
    }
}

/* ---------------------------------------------------------------- the JSON */
static FILE *out;
static void put_i128(__int128 v) {
  char buf[48], *p = buf + sizeof buf;
  int neg = v < 0;
  unsigned __int128 u = neg ? -(unsigned __int128)v : (unsigned __int128)v;
  *--p = 0;
  do { *--p = (char)('0' + (int)(u % 10)); u /= 10; } while (u);
  if (neg) *--p = '-';
  fputs(p, out);
}
static void put_hist(const omap *m) {          /* [bucket, count, sum, ...] */
  fputc('[', out);
  for (size_t i = 0; i < m->n; i++)
    fprintf(out, "%s%" PRId64 ",%" PRId64 ",%" PRId64, i ? "," : "", (int64_t)m->e[i].key, m->e[i].a, m->e[i].b);
  fputc(']', out);
}
static void put_counter(const omap *m) {       /* [key, count, ...] */
  fputc('[', out);
  for (size_t i = 0; i < m->n; i++) fprintf(out, "%s%" PRId64 ",%" PRId64, i ? "," : "", (int64_t)m->e[i].key, m->e[i].a);
  fputc(']', out);
}
static void put_subs(const sub_ent *v, size_t n) {
  fputc('[', out);
  for (size_t i = 0; i < n; i++) { fprintf(out, "%s[%" PRIu64 ",", i ? "," : "", v[i].key); put_hist(v[i].h); fputc(']', out); }
  fputc(']', out);
}
static void put_classes(const by_class *bc) {  /* [[cls, lives, bytes, bytes x lifetime, sizes(, kinds)], ...] */
  fputc('[', out);
  for (int i = 0; i < bc->n; i++) {
    const cls_entry *x = bc->e[bc->order[i]];
    fprintf(out, "%s[%d,", i ? "," : "", bc->order[i]);
    put_hist(&x->life);
    fprintf(out, ",%" PRId64 ",", x->bytes);
    put_i128(x->byte_life);
    fputc(',', out);
    put_hist(&x->sizes);
    if (x->with_kinds) { fputc(',', out); put_counter(&x->kinds); }
    fputc(']', out);
  }
  fputc(']', out);
}
static void put_tw(const tw_t *t) {
  fputs("{\"c\":[", out);
  for (size_t i = 0; i < t->c.n; i++) {
    uint64_t k = t->c.e[i].key;
    fprintf(out, "%s%u,%" PRIu64 ",%" PRIu64 ",%" PRId64, i ? "," : "", (unsigned)(k >> 56), (uint64_t)((k >> 40) & 0xffff),
            (uint64_t)(k & 0xffffffffffull), t->c.e[i].a);
  }
  fputc(']', out);
  const struct { const char *name; const omap *m; } hs[] = {
    {"sizes", &t->sizes}, {"rsizes", &t->rsizes}, {"lives", &t->lives}, {"sent", &t->sent}, {"kept", &t->kept},
    {"maps", &t->maps}, {"map_kept", &t->map_kept}, {"starts", &t->starts}};
  for (size_t i = 0; i < sizeof hs / sizeof *hs; i++)
    if (hs[i].m->n) { fprintf(out, ",\"%s\":", hs[i].name); put_hist(hs[i].m); }
  if (t->n_sent_to) { fputs(",\"sent_to\":", out); put_subs(t->sent_to, t->n_sent_to); }
  if (t->n_map_lives) { fputs(",\"map_lives\":", out); put_subs(t->map_lives, t->n_map_lives); }
  if (t->lbc.n) { fputs(",\"lives_by_class\":", out); put_classes(&t->lbc); }
  if (t->n_dies) {
    fputs(",\"dies\":[", out);
    for (size_t i = 0; i < t->n_dies; i++) {
      fprintf(out, "%s[%" PRId64 ",", i ? "," : "", t->dies[i].w);
      put_classes(t->dies[i].bc);
      fputc(']', out);
    }
    fputc(']', out);
  }
  fputc('}', out);
}
static void put_float(double x) {     /* exactly this double, read back by Python as a float (never an int) */
  char buf[40];
  snprintf(buf, sizeof buf, "%.17g", x);
  fputs(buf, out);
  if (!strpbrk(buf, ".en")) fputs(".0", out);
}
static void put_opt(int has, int64_t v) { if (has) fprintf(out, "%" PRId64, v); else fputs("null", out); }
static void put_tid_counter(const char *name, const omap *m) {   /* keys are tids */
  fprintf(out, ",\"%s\":", name);
  put_counter(m);
}

/* One top-N heap of each thread that has one, as [tid, [item, ...]]: what the Python collector's dict of heaps
 * becomes in JSON (in the order the threads were first seen). */
static void put_thread_heaps(size_t heap_at, void (*put_item)(uint32_t ref)) {
  int first = 1;
  for (size_t ti = 0; ti < S.nth; ti++) {
    const thread_t *t = &S.th[ti];
    const pyheap *h = (const pyheap *)((const char *)t + heap_at);
    if (!h->n) continue;
    fprintf(out, "%s[%" PRIu32 ",[", first ? "" : ",", t->tid);
    first = 0;
    for (size_t i = 0; i < h->n; i++) {
      if (i) fputc(',', out);
      put_item(h->v[i].ref);
    }
    fputs("]]", out);
  }
}

static void put_ref(uint32_t ref) { fprintf(out, "%" PRIu32, ref); }

static void put_big(uint32_t ref) {
  const big_rec *b = &S.bigs[ref];
  fprintf(out, "[%" PRId64 ",%" PRId64 ",%" PRId64 ",%u,\"%s\",", b->at_o, b->at_t, b->size, b->mk, how_name[b->how]);
  put_opt(b->has_life, b->life);
  fputc(',', out);
  put_opt(b->has_end, b->end);
  fputc(']', out);
}

static void put_trail(uint32_t ref) {
  const trail_t *x = &S.trails[ref];
  fprintf(out, "[%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%u,%" PRId64 ",", x->largest, x->seq, x->start_o,
          x->start_t, x->mk, x->size);
  if (x->steps_none) fputs("null", out);
  else {
    fputc('[', out);
    for (size_t s = 0; s < x->nsteps; s++)
      fprintf(out, "%s%" PRId64 ",%" PRId64 ",%" PRId64, s ? "," : "", x->steps[s].o, x->steps[s].t, x->steps[s].nbytes);
    fputc(']', out);
  }
  if (x->has_end) fprintf(out, ",[%" PRId64 ",%" PRId64 "]", x->end_o, x->end_t); else fputs(",null", out);
  fprintf(out, ",\"%s\",%" PRId64 ",%" PRId64 "]", how_name[x->how], x->last_o, x->last_t);
}

static void emit(FILE *spans_file) {
  fprintf(out, "{\"window\":%" PRId64 ",\"ordinal\":%" PRId64 ",\"live_bytes\":%" PRId64 ",\"peak_bytes\":%" PRId64
          ",\"peak_line\":%" PRId64 ",\"first_line\":", S.window, S.ordinal, S.live_bytes, S.peak_bytes, S.peak_line);
  put_opt(S.has_first, S.first_line);
  fprintf(out, ",\"last_line\":%" PRId64 ",\"has_time\":%s,\"has_cpu\":%s,\"cross_frees\":%" PRId64
          ",\"known_frees\":%" PRId64 ",\"handoff_count\":%" PRId64 ",\"thread_starts\":%" PRId64
          ",\"chain_span_count\":%" PRId64 ",\"live_at_end\":%" PRId64 ",\"mapped_now\":%" PRId64
          ",\"mapped_peak\":%" PRId64 ",\"mapped_writable\":%" PRId64 ",\"mapped_writable_peak\":%" PRId64
          ",\"maps_made\":%" PRId64 ",\"maps_protected\":%" PRId64 ",\"map_bytes_made\":%" PRId64,
          S.last_line, S.has_time ? "true" : "false", S.has_cpu ? "true" : "false", S.cross_frees, S.known_frees,
          S.handoff_count, S.thread_starts, S.chain_span_count, S.live_at_end, S.mapped_now, S.mapped_peak,
          S.mapped_writable, S.mapped_writable_peak, S.maps_made, S.maps_protected, S.map_bytes_made);
  fputs(",\"kinds\":[", out);
  for (int i = 0; i < EV_KINDS; i++) fprintf(out, "%s\"%s\"", i ? "," : "", kind_name[i]);
  fputs("],\"model_kinds\":[", out);
  for (int i = 0; i < S.nmk; i++) {
    fprintf(out, "%s[\"%s\",", i ? "," : "", S.mk[i].name);
    put_opt(S.mk[i].has_align, S.mk[i].align);
    fputc(']', out);
  }
  fputc(']', out);
  for (size_t i = 0; i < S.trace_kinds.n; i++) S.trace_kinds.e[i].a = S.kind_count[S.trace_kinds.e[i].key];
  fputs(",\"trace_kinds\":", out); put_counter(&S.trace_kinds);
  fputs(",\"map_calls\":", out); put_counter(&S.map_calls);
  fputs(",\"maps_left_out\":", out); put_counter(&S.maps_left_out);
  fputs(",\"born\":", out); put_counter(&S.born);
  fputs(",\"died\":", out); put_counter(&S.died);
  put_tid_counter("max_chains", &S.max_chains);
  put_tid_counter("chain_held", &S.chain_held);
  put_tid_counter("trail_dropped", &S.trail_dropped);
  put_tid_counter("big_dropped", &S.big_dropped);
  put_tid_counter("big_maps_dropped", &S.big_maps_dropped);
  fputs(",\"wins\":[", out);
  for (size_t i = 0; i < S.nwins; i++) {
    fprintf(out, "%s[%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",", i ? "," : "", S.wins[i].events,
            S.wins[i].allocs, S.wins[i].frees, S.wins[i].log_sizes);
    put_float(S.wins[i].t_first);
    fputc(',', out);
    put_float(S.wins[i].t_last);
    fprintf(out, ",%" PRId64 "]", S.wins[i].first_line);
  }
  fputs("],\"thread_windows\":[", out);
  for (size_t k = 0; k < S.ntw_order; k++) {
    const thread_t *t = &S.th[S.tw_order[k]];
    fprintf(out, "%s[%" PRIu32 ",[", k ? "," : "", t->tid);
    for (size_t i = 0; i < t->ntw; i++) {
      if (i) fputc(',', out);
      if (t->tw[i]) put_tw(t->tw[i]); else fputs("null", out);
    }
    fputs("]]", out);
  }
  fputs("],\"max_chain_classes\":[", out);
  for (size_t k = 0; k < S.nclass_order; k++) {
    const thread_t *t = &S.th[S.class_order[k]];
    fprintf(out, "%s[%" PRIu32, k ? "," : "", t->tid);
    for (int c = 0; c < NCLS; c++) fprintf(out, ",%" PRId64, t->max_chain_classes[c]);
    fputc(']', out);
  }
  /* big objects: per thread (in the order their heaps were made) the heap's list */
  fputs("],\"big_objects\":[", out);
  put_thread_heaps(offsetof(thread_t, big), put_big);
  fputs("],\"trails\":[", out);
  put_thread_heaps(offsetof(thread_t, trails), put_trail);
  /* the program's own mappings: every record, then map_records and big_maps by index */
  fputs("],\"maps\":[", out);
  for (size_t i = 0; i < S.nmaps; i++) {
    const map_rec *r = &S.maps[i];
    fprintf(out, "%s[%" PRIu32 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",", i ? "," : "", S.th[r->ti].tid,
            r->at_o, r->at_t, r->size, r->bytes);
    put_opt(r->has_life, r->life);
    fprintf(out, ",%" PRId64 "]", r->seq);
  }
  fputs("],\"map_records\":[", out);
  int first = 1;
  for (size_t ti = 0; ti < S.nth; ti++) {
    const thread_t *t = &S.th[ti];
    if (!t->has_records) continue;
    fprintf(out, "%s[%" PRIu32 ",", first ? "" : ",", t->tid);
    first = 0;
    if (t->records_none) fputs("null", out);
    else {
      fputc('[', out);
      for (size_t i = 0; i < t->nrecords; i++) fprintf(out, "%s%" PRIu32, i ? "," : "", t->records[i]);
      fputc(']', out);
    }
    fputc(']', out);
  }
  fputs("],\"big_maps\":[", out);
  put_thread_heaps(offsetof(thread_t, big_maps), put_ref);
  /* handoffs: (owner, freer, count) in the dict's order; the ordinals in the spans file */
  fputs("],\"handoffs\":[", out);
  for (size_t i = 0; i < S.nhandoffs; i++) {
    const handoff_t *h = &S.handoffs[i];
    fprintf(out, "%s[%" PRIu32 ",%" PRIu32 ",%zu]", i ? "," : "", h->owner, h->freer, h->n);
    if (fwrite(h->v, sizeof *h->v, h->n, spans_file) != h->n) { fprintf(stderr, "cannot write the spans\n"); exit(1); }
  }
  fprintf(out, "],\"peak_ordinal\":%" PRId64 ",\"peak_overflow\":%s,\"peak_freed\":[", S.peak_o,
          S.peak_overflow ? "true" : "false");
  for (size_t i = 0; i < (S.peak_overflow ? 0 : S.npf); i++) {
    const peak_rec *r = &S.pf[i];
    fprintf(out, "%s[%" PRIu32 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRIu16 ",%" PRId64 ",%" PRId64 "]", i ? "," : "",
            r->owner, r->o, r->t, r->nbytes, r->mk, r->life, r->end);
  }
  fprintf(out, "],\"kept_overflow\":%s,\"kept_big\":[", S.kept_overflow ? "true" : "false");
  for (size_t i = 0; i < S.nkb; i++) {
    const peak_rec *r = &S.kb[i];
    fprintf(out, "%s[%" PRIu32 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRIu16 "]", i ? "," : "", r->owner, r->o, r->t,
            r->nbytes, r->mk);
  }
  fputs("]}\n", out);
}

/* Python dict orders of thread-keyed dicts that are made lazily per thread (big_objects, trails, map_records,
 * big_maps) are not kept here: trace/model/native.py orders them by thread as the writer reads them (by key). */

static void json_error(const tr_error *e) {
  printf("{\"error\": \"");
  for (const char *p = e->message; *p; p++) {
    if (*p == '"' || *p == '\\') putchar('\\');
    if ((unsigned char)*p >= 0x20) putchar(*p);
  }
  printf("\", \"record\": %" PRIu64 "}\n", e->record);
}

int main(int argc, char **argv) {
  const char *log_path = NULL, *out_path = NULL, *spans_path = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--log") && i + 1 < argc) log_path = argv[++i];
    else if (!strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
    else if (!strcmp(argv[i], "--spans") && i + 1 < argc) spans_path = argv[++i];
    else if (!strcmp(argv[i], "--progress")) progress = 1;
    else { fprintf(stderr, "usage: scenc-modelcollect --log LOG --out JSON --spans BIN [--progress]\n"); return 64; }
  }
  if (!log_path || !out_path || !spans_path) {
    fprintf(stderr, "usage: scenc-modelcollect --log LOG --out JSON --spans BIN [--progress]\n");
    return 64;
  }
  S.window = WINDOW0;
  S.peak_o = -1;
  tr_log log;
  tr_error e = {0, ""};
  if (tr_open(&log, log_path, 1, &e)) { json_error(&e); return 1; }
  log.current = &S.rec;
  log.current_cpu = &S.rec_cpu;
  uint64_t base = log.info.have_ns ? log.info.first_ns : 0;
  started = now_s();
  int rc = tr_merge(&log, consume, &base, &e);
  if (rc) { json_error(&e); return 1; }
  if (progress && nevents >= PROGRESS_EVERY) { fputs("\r\033[K", stderr); fflush(stderr); }
  finish();
  out = fopen(out_path, "w");
  FILE *spans = fopen(spans_path, "wb");
  if (!out || !spans) { fprintf(stderr, "scenc modelcollect: cannot write %s\n", out ? spans_path : out_path); return 1; }
  emit(spans);
  if (fclose(out) || fclose(spans)) { fprintf(stderr, "scenc modelcollect: cannot write the figures\n"); return 1; }
  tr_close(&log);
  printf("{\"ok\": true}\n");
  return 0;
}
