/* The `layout` probe: every allocation and free, with its address, sizes,
 * thread and order, written to the binary file named by SCENC_LAYOUT_FILE.
 *
 * File: a 16-byte header ("SCNLAYT1", u32 version 1, u32 record size 40),
 * then little-endian records (probes/layoutfile.py reads them):
 *   u64 seq      position in one order of all threads' events (see below)
 *   u64 addr     block address
 *   u64 size     bytes requested (for a free: the bytes its allocation asked for)
 *   u64 usable   malloc_usable_size of a new block, 0 for a free
 *   u32 op_index the thread's allocator calls so far (its own clock)
 *   u16 thread   scn_thread.id: the program report's thread list order
 *   u8  op       enum scn_op
 *   u8  event    0 allocation, 1 free
 * `seq` comes from one shared counter, taken after an allocation returned and
 * before a free is made, so a block freed by one thread and handed to another
 * always has its free before its new allocation. Records reach the file in
 * per-thread batches (O_APPEND writes), not in seq order.
 *
 * A record per call, a shared counter, malloc_usable_size and a write every
 * 1024 records: this probe slows the scenario down and must run alone. */
#ifndef SCN_PROBE_LAYOUT_H
#define SCN_PROBE_LAYOUT_H
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include "probe_common.h"

#define SCN_LAYOUT_BATCH 1024

typedef struct {
  uint64_t seq, addr, size, usable;
  uint32_t op_index;
  uint16_t thread;
  uint8_t op, event;
} scn_layout_record;
_Static_assert(sizeof(scn_layout_record) == 40, "layout record layout changed");

typedef struct {
  _Alignas(64) uint64_t free_seq;  /* taken before a free or realloc */
  uint32_t op_index, n;
  scn_layout_record batch[SCN_LAYOUT_BATCH];
} scn_layout_thread;

static struct {
  _Alignas(64) _Atomic uint64_t seq;
  _Alignas(64) int fd;
  const char *path;
  scn_layout_thread *threads;
  _Atomic uint64_t records;
  _Atomic int write_errno;
} scn_layout;

static void scn_layout_write(const void *data, size_t bytes) {
  const char *p = data;
  while (bytes) {
    ssize_t done = write(scn_layout.fd, p, bytes);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) {
      atomic_store(&scn_layout.write_errno, done < 0 ? errno : EIO);
      return;
    }
    p += done;
    bytes -= (size_t)done;
  }
}

static void scn_layout_flush(scn_layout_thread *s) {
  if (!s->n) return;
  scn_layout_write(s->batch, s->n * sizeof s->batch[0]);
  atomic_fetch_add(&scn_layout.records, s->n);
  s->n = 0;
}

static void scn_probe_layout_program_start(int threads) {
  scn_layout.path = getenv("SCENC_LAYOUT_FILE");
  if (!scn_layout.path || !*scn_layout.path)
    scn_die("the layout probe needs SCENC_LAYOUT_FILE, the file to write its records to");
  scn_layout.fd = open(scn_layout.path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (scn_layout.fd < 0) scn_die("layout probe: cannot create %s: %s", scn_layout.path, strerror(errno));
  struct { char magic[8]; uint32_t version, record_size; } header = { "SCNLAYT", 1, sizeof(scn_layout_record) };
  header.magic[7] = '1';
  scn_layout_write(&header, sizeof header);
  scn_layout.threads = scn_probe_state_array(threads, sizeof *scn_layout.threads);
}

static void scn_probe_layout_thread_start(scn_thread *t) {
  t->probe[SCN_SLOT_LAYOUT] = &scn_layout.threads[t->id];
}

static void scn_probe_layout_thread_end(scn_thread *t) {
  scn_layout_flush(t->probe[SCN_SLOT_LAYOUT]);
}

/* Recording a freed block's address is what this probe is for; gcc 12 would
 * take the record for a use after free. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic ignored "-Wuse-after-free"
#endif

static inline void scn_layout_emit(scn_thread *t, scn_layout_thread *s, uint64_t seq, scn_obj o,
                                   uint64_t usable, enum scn_op op, int event) {
  scn_layout_record *r = &s->batch[s->n];
  r->seq = seq;
  r->addr = (uint64_t)(uintptr_t)o.ptr;
  r->size = o.size;
  r->usable = usable;
  r->op_index = s->op_index;
  r->thread = (uint16_t)t->id;
  r->op = (uint8_t)op;
  r->event = (uint8_t)event;
  if (++s->n == SCN_LAYOUT_BATCH) scn_layout_flush(s);
}

static inline void scn_probe_layout_op_before(scn_thread *t, enum scn_op op, size_t size) {
  (void)size;
  if (op == SCN_FREE || op == SCN_REALLOC) {
    scn_layout_thread *s = t->probe[SCN_SLOT_LAYOUT];
    s->free_seq = atomic_fetch_add_explicit(&scn_layout.seq, 1, memory_order_relaxed);
  }
}

static inline void scn_probe_layout_op_after(scn_thread *t, enum scn_op op, scn_obj result, scn_obj old) {
  scn_layout_thread *s = t->probe[SCN_SLOT_LAYOUT];
  /* A failed realloc hands back `old` unchanged: nothing moved. */
  int unchanged = op == SCN_REALLOC && result.ptr == old.ptr && result.size == old.size;
  if ((op == SCN_FREE || op == SCN_REALLOC) && old.ptr && !unchanged)
    scn_layout_emit(t, s, s->free_seq, old, 0, op, 1);
  if (op != SCN_FREE && result.ptr && !unchanged) {
    uint64_t seq = atomic_fetch_add_explicit(&scn_layout.seq, 1, memory_order_relaxed);
    scn_layout_emit(t, s, seq, result, malloc_usable_size(result.ptr), op, 0);
  }
  s->op_index++;
}

static void scn_probe_layout_program_end(void) {
  close(scn_layout.fd);
}

static void scn_probe_layout_report(FILE *out) {
  fputs("{\"file\": ", out);
  fputc('"', out);
  for (const char *c = scn_layout.path; *c; c++) {
    if (*c == '"' || *c == '\\') fputc('\\', out);
    if ((unsigned char)*c < 0x20) fprintf(out, "\\u%04x", *c);
    else fputc(*c, out);
  }
  int err = atomic_load(&scn_layout.write_errno);
  fprintf(out, "\", \"records\": %llu, \"record_size\": %zu, \"error\": ",
          (unsigned long long)atomic_load(&scn_layout.records), sizeof(scn_layout_record));
  if (err) fprintf(out, "\"%s\"}", strerror(err));
  else fputs("null}", out);
}
#endif
