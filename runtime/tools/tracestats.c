/* scenc trace-stats for a tracer log, in C: TraceStats.consume (trace/profile.py) over the log's events, read
 * and merged here by trace_read.h as the converter reads them.
 *
 *   scenc-tracestats --log app.trace [--whole]
 *
 * Prints one JSON object on stdout: the figures TraceStats holds once it has consumed the log's events (read with
 * extra_events), the log's index ("log", as scenc-convert prints it) and the report's notes;
 * trace/profile_native.py rebuilds the TraceStats from it, so the text and the JSON of `scenc trace-stats` are
 * the Python formatter's. Every rule here is profile.py's; a change to one is a change to both
 * (tests/trace/test_stats_native.py compares them). A log with window marks is not read without --whole:
 * {"python": "a window"} says so, and the Python path (trace/window.py) reads its window; so does a log whose
 * figures pass 64 bits (made up or damaged: no program's do).
 * Memory: the live blocks, the threads and the program's own mappings; never the log. */
#define _GNU_SOURCE                /* program_invocation_short_name (trace_read.h's tr_oom) */
#include "trace_read.h"

#define NOTE_EXAMPLES 5              /* ParseReport.max_examples */
#define NHIST 66                     /* log2 buckets of a 64-bit value (and of a negative lifetime's magnitude) */




/* A figure past 64 bits (a block's nmemb x size, bytes live or mapped, a mapping's end), which only a damaged or
 * made-up log holds: Python's integers count on where C's would wrap, so the Python pass reads the log. */
static const char *beyond;
static uint64_t add64(uint64_t a, uint64_t b, const char *what) {
  uint64_t sum;
  if (__builtin_add_overflow(a, b, &sum)) beyond = what;
  return sum;
}
static uint64_t range_end(uint64_t lo, uint64_t len) {     /* lo + len in whole pages */
  if (len > UINT64_MAX - (PAGE - 1)) { beyond = "a mapping's length"; return lo; }
  return add64(lo, pages(len), "a mapping's end");
}

/* ---------------------------------------------------------------- live blocks: profile.py's `live` dict */
typedef struct {
  uint64_t ptr, nbytes, ns, op, line;
  uint64_t order;             /* when its key entered the dict (a replaced value keeps its key's place) */
  uint32_t tid, chain;
  uint8_t used;
} live_ent;

static struct { live_ent *e; size_t n, cap; uint64_t inserted; } live;

static size_t live_slot(uint64_t ptr) {
  size_t h = mix64(ptr) & (live.cap - 1);
  while (live.e[h].used && live.e[h].ptr != ptr) h = (h + 1) & (live.cap - 1);
  return h;
}

static void live_grow(void) {
  live_ent *old = live.e;
  size_t n = live.cap;
  live.cap = n ? n * 2 : 1024;
  live.e = tr_xcalloc(live.cap, sizeof *live.e);
  for (size_t i = 0; i < n; i++)
    if (old[i].used) live.e[live_slot(old[i].ptr)] = old[i];
  free(old);
}

static live_ent *live_find(uint64_t ptr) {
  if (!live.cap) return NULL;
  live_ent *e = &live.e[live_slot(ptr)];
  return e->used ? e : NULL;
}

/* Pops ptr into *out; 0 when it is not live. Backward-shift deletion keeps every probe chain whole. */
static int live_pop(uint64_t ptr, live_ent *out) {
  live_ent *e = live_find(ptr);
  if (!e) return 0;
  *out = *e;
  size_t i = (size_t)(e - live.e), mask = live.cap - 1;
  for (size_t j = (i + 1) & mask; live.e[j].used; j = (j + 1) & mask) {
    size_t home = mix64(live.e[j].ptr) & mask;
    if (((j - home) & mask) >= ((j - i) & mask)) { live.e[i] = live.e[j]; i = j; }
  }
  live.e[i].used = 0;
  live.n--;
  return 1;
}

/* live.setdefault(ptr, x): the entry already there (left as it is), or NULL once x is in. */
static live_ent *live_setdefault(const live_ent *x) {
  if ((live.n + 1) * 4 > live.cap * 3) live_grow();
  live_ent *e = &live.e[live_slot(x->ptr)];
  if (e->used) return e;
  *e = *x;
  e->used = 1;
  e->order = live.inserted++;
  live.n++;
  return NULL;
}

/* ---------------------------------------------------------------- threads: by_thread_kind, ThreadLives */
typedef struct { uint32_t tid; uint8_t used, seen, alive; int32_t cell[EV_CALLS]; } thread_ent;
typedef struct { uint32_t tid, kind; uint64_t n; } tk_cell;     /* by_thread_kind, in its insertion order */

static struct { thread_ent *e; size_t n, cap; } threads;
static struct { tk_cell *c; size_t n, cap; } tk;

static thread_ent *stats_thread(uint32_t tid) {
  if ((threads.n + 1) * 2 > threads.cap) {
    thread_ent *old = threads.e;
    size_t n = threads.cap;
    threads.cap = n ? n * 2 : 64;
    threads.e = tr_xcalloc(threads.cap, sizeof *threads.e);
    for (size_t i = 0; i < n; i++)
      if (old[i].used) {
        size_t h = tr_hash32(old[i].tid) & (threads.cap - 1);
        while (threads.e[h].used) h = (h + 1) & (threads.cap - 1);
        threads.e[h] = old[i];
      }
    free(old);
  }
  size_t h = tr_hash32(tid) & (threads.cap - 1);
  for (; threads.e[h].used; h = (h + 1) & (threads.cap - 1))
    if (threads.e[h].tid == tid) return &threads.e[h];
  thread_ent *t = &threads.e[h];
  t->used = 1;
  t->tid = tid;
  for (int k = 0; k < EV_CALLS; k++) t->cell[k] = -1;
  threads.n++;
  return t;
}

static struct {
  uint64_t alive, starts, exits, peak, peak_line, peak_ns;
  int has_peak;
} lives;

static void lives_now(uint64_t line, uint64_t ns) {
  if (lives.alive > lives.peak) { lives.peak = lives.alive; lives.peak_line = line; lives.peak_ns = ns; lives.has_peak = 1; }
}
static void lives_add(thread_ent *t) {
  t->seen = 1;
  if (!t->alive) { t->alive = 1; lives.alive++; }
}

/* ---------------------------------------------------------------- the program's own mappings (OwnMappings) */
typedef struct { uint64_t lo, hi; } region;
static struct {
  region *r;
  size_t n, cap;
  uint64_t bytes, peak, peak_line, calls[3];
  int has_peak;
} maps;

static void map_region(uint64_t lo, uint64_t hi) {    /* regions[lo] = hi: a region starting at lo is replaced */
  maps.bytes = add64(maps.bytes, hi - lo, "the bytes mapped");
  for (size_t i = 0; i < maps.n; i++)
    if (maps.r[i].lo == lo) { maps.r[i].hi = hi; return; }
  maps.r = tr_grow(maps.r, &maps.cap, maps.n + 1, sizeof *maps.r);
  maps.r[maps.n++] = (region){lo, hi};
}

static void unmap_range(uint64_t lo, uint64_t hi) {  /* [lo, hi) cut out of every region it overlaps */
  size_t n = maps.n, kept = 0;
  region *cut = tr_xcalloc(n, sizeof *cut);
  size_t ncut = 0;
  for (size_t i = 0; i < n; i++) {
    if (maps.r[i].lo < hi && maps.r[i].hi > lo) cut[ncut++] = maps.r[i];
    else maps.r[kept++] = maps.r[i];
  }
  maps.n = kept;
  for (size_t i = 0; i < ncut; i++) {
    maps.bytes -= cut[i].hi - cut[i].lo;
    if (cut[i].lo < lo) map_region(cut[i].lo, lo);
    if (hi < cut[i].hi) map_region(hi, cut[i].hi);
  }
  free(cut);
}

static void mapping_event(const tr_event *ev) {
  maps.calls[ev->kind - EV_MMAP]++;
  if (ev->failed) return;
  if (ev->kind == EV_MMAP && ev->res) {
    unmap_range(ev->res, range_end(ev->res, ev->size));
    map_region(ev->res, range_end(ev->res, ev->size));
  } else if (ev->kind == EV_MUNMAP) {
    unmap_range(ev->old, range_end(ev->old, ev->size));
  } else if (ev->kind == EV_MREMAP && ev->res) {
    unmap_range(ev->old, range_end(ev->old, ev->align));
    map_region(ev->res, range_end(ev->res, ev->size));
  }
  if (maps.bytes > maps.peak) { maps.peak = maps.bytes; maps.peak_line = ev->line; maps.has_peak = 1; }
}

/* ---------------------------------------------------------------- the report's notes (ParseReport.add) */
enum { NOTE_LIVE_POINTER, NOTE_UNKNOWN_FREE, NOTES };
static const char *const note_kind[NOTES] = {"alloc-returned-live-pointer", "free-unknown-pointer"};
static struct { uint64_t count, line[NOTE_EXAMPLES]; char text[NOTE_EXAMPLES][160]; } notes[NOTES];

static void note(int which, uint64_t line, const char *fmt, ...) {
  uint64_t n = notes[which].count++;
  if (n >= NOTE_EXAMPLES) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(notes[which].text[n], sizeof notes[which].text[n], fmt, ap);
  va_end(ap);
  notes[which].line[n] = line;
}

/* ---------------------------------------------------------------- the pass (TraceStats.consume) */
static struct {
  uint64_t base;                               /* the log's first time stamp: times are seconds after it */
  uint64_t ops, live_bytes, peak_bytes, peak_objects, peak_line, peak_ns, max_objects;
  uint64_t frees, free_null, free_unknown, cross_frees, cross_reallocs, failed[EV_CALLS];
  uint64_t in_place, moved, as_malloc, as_free, longest_chain, longest_line;
  uint64_t size_hist[NHIST], life_ops[NHIST], life_us[NHIST];
  uint64_t peak_total, peak_total_line, first_ns, last_ns;
  int has_peak, has_peak_total, has_first, has_last, has_longest;
  uint64_t *chains;                            /* chain length -> blocks whose chain ended */
  size_t nchains;
} S;

static double seconds(uint64_t ns) { return (double)(int64_t)(ns - S.base) / 1e9; }

static const tr_rec *current;                  /* the record of the event in hand: its time stamp */

static void count_chain(uint64_t **hist, size_t *n, uint64_t length) {
  if (length >= *n) {
    size_t m = length + 1;
    *hist = realloc(*hist, m * sizeof **hist);
    if (!*hist) tr_oom();
    memset(*hist + *n, 0, (m - *n) * sizeof **hist);
    *n = m;
  }
  (*hist)[length]++;
}

static int is_free_kind(unsigned k) { return k == EV_FREE || k == EV_OPERATOR_DELETE || k == EV_OPERATOR_DELETE_ARRAY; }
static int is_realloc_kind(unsigned k) { return k == EV_REALLOC || k == EV_REALLOCARRAY; }

static void peak_total_now(uint64_t line) {
  uint64_t total = add64(S.live_bytes, maps.bytes, "the bytes live and mapped");
  if (total > S.peak_total) {
    S.peak_total = total; S.peak_total_line = line; S.has_peak_total = 1;
  }
}

/* A free or realloc of a pointer not live (no posix_memalign block is ever left unresolved in a tracer log: the
 * tracer records its pointer). */
static void unknown_free(uint64_t ptr, uint64_t line, unsigned kind) {
  S.free_unknown++;
  note(NOTE_UNKNOWN_FREE, line, "%s(0x%" PRIx64 "): pointer never seen allocated", kind_name[kind], ptr);
}

static void extra_event(const tr_event *ev, uint64_t ns) {
  if (ev->kind == EV_THREAD_START) {
    if (ev->size > UINT32_MAX) beyond = "a thread's creator";
    if (ev->size) {
      thread_ent *creator = stats_thread((uint32_t)ev->size);
      if (!creator->seen) lives_add(creator);
    }
    lives.starts++;
    lives_add(stats_thread(ev->tid));
    lives_now(ev->line, ns);
  } else if (ev->kind == EV_THREAD_EXIT) {
    thread_ent *t = stats_thread(ev->tid);
    lives.exits++;
    t->seen = 1;
    if (t->alive) { t->alive = 0; lives.alive--; }
  } else if (ev->kind == EV_MMAP || ev->kind == EV_MUNMAP || ev->kind == EV_MREMAP) {
    mapping_event(ev);
    peak_total_now(ev->line);
  }
}

static int consume(void *arg, const tr_event *ev) {
  (void)arg;
  uint64_t ns = current->ns, line = ev->line;
  unsigned kind = ev->kind;
  S.last_ns = ns;
  S.has_last = 1;
  if (kind >= EV_CALLS) { extra_event(ev, ns); return 0; }
  thread_ent *th = stats_thread(ev->tid);
  if (!th->seen) {
    lives_add(th);
    lives_now(line, ns);
  }
  uint64_t ops = ++S.ops;
  if (th->cell[kind] < 0) {
    tk.c = tr_grow(tk.c, &tk.cap, tk.n + 1, sizeof *tk.c);
    tk.c[tk.n] = (tk_cell){ev->tid, kind, 0};
    th->cell[kind] = (int32_t)tk.n++;
  }
  tk.c[th->cell[kind]].n++;
  if (!S.has_first) { S.first_ns = ns; S.has_first = 1; }
  uint64_t old = ev->old, res = ev->res;
  /* a free, or realloc(p, 0) returning NULL, which frees p */
  if (is_free_kind(kind) || (old && !ev->size && !res && !ev->failed)) {
    if (!old) { S.free_null++; return 0; }
    if (!is_free_kind(kind)) S.as_free++;
    live_ent e;
    if (!live_pop(old, &e)) { unknown_free(old, line, kind); return 0; }
    S.frees++;
    S.live_bytes -= e.nbytes;
    if (ev->tid != e.tid) S.cross_frees++;
    S.life_ops[bit_length(ops - e.op)]++;
    int64_t us = (int64_t)((seconds(ns) - seconds(e.ns)) * 1e6 + 0.5);
    S.life_us[bit_length((uint64_t)(us < 0 ? -us : us))]++;
    if (e.chain) {
      count_chain(&S.chains, &S.nchains, e.chain);
      if (e.chain > S.longest_chain) { S.longest_chain = e.chain; S.longest_line = e.line; S.has_longest = 1; }
    }
    return 0;
  }
  if (ev->failed) { S.failed[kind]++; return 0; }
  uint64_t nbytes;
  if (__builtin_mul_overflow(ev->size, ev->nmemb, &nbytes)) beyond = "a block's size";
  live_ent x = {res, nbytes, ns, ops, line, 0, ev->tid, 0, 0};
  if (is_realloc_kind(kind) && old) {
    live_ent e;
    if (live_pop(old, &e)) {
      S.live_bytes -= e.nbytes;
      if (ev->tid != e.tid) S.cross_reallocs++;
      x.op = e.op; x.ns = e.ns; x.chain = e.chain + 1; x.line = e.line;
    } else {
      unknown_free(old, line, kind);
      x.chain = 1;
    }
    if (res == old) S.in_place++;
    else S.moved++;
  } else if (is_realloc_kind(kind)) {
    S.as_malloc++;
  }
  S.size_hist[bit_length(nbytes)]++;
  live_ent *prev = live_setdefault(&x);
  if (prev) {
    note(NOTE_LIVE_POINTER, line, "%s returned 0x%" PRIx64 ", still live since line %" PRIu64 ": its free was not "
         "seen", kind_name[kind], res, prev->line);
    S.live_bytes -= prev->nbytes;
    uint64_t order = prev->order;
    *prev = x;
    prev->used = 1;
    prev->order = order;
  }
  S.live_bytes = add64(S.live_bytes, nbytes, "the bytes live");
  if (S.live_bytes > S.peak_bytes) {
    S.peak_bytes = S.live_bytes;
    S.peak_objects = live.n;
    S.peak_line = line;
    S.peak_ns = ns;
    S.has_peak = 1;
  }
  peak_total_now(line);
  if (live.n > S.max_objects) S.max_objects = live.n;
  return 0;
}

/* ---------------------------------------------------------------- output */
static void put_opt(const char *name, int has, uint64_t v) {
  if (has) printf(", \"%s\": %" PRIu64, name, v);
  else printf(", \"%s\": null", name);
}
static void put_time(const char *name, int has, uint64_t ns) {
  if (has) printf(", \"%s\": %.17g", name, seconds(ns));
  else printf(", \"%s\": null", name);
}
static void put_hist(const char *name, const uint64_t *h, size_t n) {
  printf(",\n \"%s\": [", name);
  int first = 1;
  for (size_t b = 0; b < n; b++)
    if (h[b]) { printf("%s[%zu, %" PRIu64 "]", first ? "" : ", ", b, h[b]); first = 0; }
  printf("]");
}
static void put_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') putchar('\\');
    if ((unsigned char)*s >= 0x20) putchar(*s);
  }
  putchar('"');
}

/* The blocks still live: their realloc chains, and the longest one the first in the dict's order holds. */
static void put_live(void) {
  uint64_t *hist = NULL, longest = 0, longest_line = 0, longest_order = UINT64_MAX;
  size_t n = 0;
  for (size_t i = 0; i < live.cap; i++) {
    const live_ent *e = &live.e[i];
    if (!e->used || !e->chain) continue;
    count_chain(&hist, &n, e->chain);
    if (e->chain > longest || (e->chain == longest && e->order < longest_order)) {
      longest = e->chain; longest_line = e->line; longest_order = e->order;
    }
  }
  printf(",\n \"live\": {\"objects\": %zu, \"longest\": [%" PRIu64 ", %" PRIu64 "]", live.n, longest, longest_line);
  put_hist("chains", hist, n);
  printf("}");
  free(hist);
}

static void report(const tr_log *log) {
  printf("{\"ops\": %" PRIu64 ", \"live_bytes\": %" PRIu64 ", \"peak_bytes\": %" PRIu64 ", \"peak_objects\": %"
         PRIu64, S.ops, S.live_bytes, S.peak_bytes, S.peak_objects);
  put_opt("peak_line", S.has_peak, S.peak_line);
  put_time("peak_time", S.has_peak, S.peak_ns);
  put_time("first_time", S.has_first, S.first_ns);
  put_time("last_time", S.has_last, S.last_ns);
  printf(", \"max_objects\": %" PRIu64 ", \"frees\": %" PRIu64 ", \"free_null\": %" PRIu64 ", \"free_unknown\": %"
         PRIu64 ", \"cross_thread_frees\": %" PRIu64 ", \"cross_thread_reallocs\": %" PRIu64 ", \"realloc_in_place\": %"
         PRIu64 ", \"realloc_moved\": %" PRIu64 ", \"realloc_as_malloc\": %" PRIu64 ", \"realloc_as_free\": %" PRIu64
         ", \"longest_chain\": %" PRIu64, S.max_objects, S.frees, S.free_null, S.free_unknown, S.cross_frees,
         S.cross_reallocs, S.in_place, S.moved, S.as_malloc, S.as_free, S.longest_chain);
  put_opt("longest_chain_line", S.has_longest, S.longest_line);
  printf(", \"peak_total\": %" PRIu64, S.peak_total);
  put_opt("peak_total_line", S.has_peak_total, S.peak_total_line);
  printf(",\n \"by_thread_kind\": [");
  for (size_t i = 0; i < tk.n; i++)
    printf("%s[%" PRIu32 ", \"%s\", %" PRIu64 "]", i ? ", " : "", tk.c[i].tid, kind_name[tk.c[i].kind], tk.c[i].n);
  printf("],\n \"failed\": {");
  for (int k = 0, first = 1; k < EV_CALLS; k++)
    if (S.failed[k]) { printf("%s\"%s\": %" PRIu64, first ? "" : ", ", kind_name[k], S.failed[k]); first = 0; }
  printf("}");
  put_hist("size_hist", S.size_hist, NHIST);
  put_hist("lifetime_ops_hist", S.life_ops, NHIST);
  put_hist("lifetime_us_hist", S.life_us, NHIST);
  put_hist("chain_hist", S.chains, S.nchains);
  put_live();
  printf(",\n \"lives\": {\"peak\": %" PRIu64 ", \"starts\": %" PRIu64 ", \"exits\": %" PRIu64, lives.peak,
         lives.starts, lives.exits);
  put_opt("line", lives.has_peak, lives.peak_line);
  put_time("time", lives.has_peak, lives.peak_ns);
  printf("},\n \"mapped\": {\"calls\": [%" PRIu64 ", %" PRIu64 ", %" PRIu64 "], \"peak\": %" PRIu64 ", \"bytes\": %"
         PRIu64, maps.calls[0], maps.calls[1], maps.calls[2], maps.peak, maps.bytes);
  put_opt("peak_line", maps.has_peak, maps.peak_line);
  printf("},\n \"notes\": [");
  for (int k = 0, first = 1; k < NOTES; k++) {
    if (!notes[k].count) continue;
    printf("%s[\"%s\", %" PRIu64 ", [", first ? "" : ", ", note_kind[k], notes[k].count);
    for (uint64_t i = 0; i < notes[k].count && i < NOTE_EXAMPLES; i++) {
      printf("%s[%" PRIu64 ", ", i ? ", " : "", notes[k].line[i]);
      put_string(notes[k].text[i]);
      printf("]");
    }
    printf("]]");
    first = 0;
  }
  printf("],\n \"marks\": %d, \"log\": ", log->marks);
  tr_put_info(stdout, log);
  printf("}\n");
}

static void json_error(const tr_error *e) {
  printf("{\"error\": ");
  put_string(e->message);
  printf(", \"record\": %" PRIu64 "}\n", e->record);
}

int main(int argc, char **argv) {
  const char *log_path = NULL;
  int whole = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--log") && i + 1 < argc) log_path = argv[++i];
    else if (!strcmp(argv[i], "--whole")) whole = 1;
    else log_path = NULL, i = argc;
  }
  if (!log_path) { fprintf(stderr, "usage: scenc-tracestats --log LOG [--whole]\n"); return 64; }
  static tr_log log;
  tr_error e = {0, ""};
  if (tr_open(&log, log_path, 1, &e)) { json_error(&e); return 1; }
  if (!whole && (log.marks & 2)) { printf("{\"python\": \"a window\"}\n"); tr_close(&log); return 0; }
  log.current = &current;
  S.base = log.info.have_ns ? log.info.first_ns : 0;
  if (tr_merge(&log, consume, NULL, &e)) { json_error(&e); return 1; }
  if (beyond) printf("{\"python\": \"%s past 64 bits\"}\n", beyond);
  else report(&log);
  tr_close(&log);
  return fflush(stdout) ? 1 : 0;
}
