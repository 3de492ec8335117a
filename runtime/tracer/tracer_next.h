/* tracer_next.h -- the definitions the tracer forwards to: the next malloc family (dlsym RTLD_NEXT,
 * looked up once, by the first call of any thread), a bootstrap arena for what dlsym allocates while
 * it looks, and the other libc functions the tracer wraps, each looked up on its first call.
 * Part of tracer.c's one translation unit (it includes the parts in order; see there). */
#ifndef SCN_TRACER_NEXT_H
#define SCN_TRACER_NEXT_H

static void *(*real_malloc)(size_t);
static void (*real_free)(void *);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void *(*real_reallocarray)(void *, size_t, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);
static void *(*real_valloc)(size_t);
static void *(*real_pvalloc)(size_t);
static _Atomic int g_resolved;             /* 0 not yet, 1 in progress, 2 done */

/* dlsym may allocate before it can tell us where malloc is. */
static _Alignas(64) char boot_heap[64 * 1024];
static _Atomic size_t boot_used;

static int is_boot(const void *p) {
  return (const char *)p >= boot_heap && (const char *)p < boot_heap + sizeof boot_heap;
}

static void *boot_alloc(size_t size, size_t align) {
  if (align < 16) align = 16;
  for (;;) {
    size_t used = atomic_load(&boot_used);
    size_t start = (used + 16 + align - 1) & ~(align - 1);
    if (size > sizeof boot_heap || start + size > sizeof boot_heap) return NULL;
    if (atomic_compare_exchange_weak(&boot_used, &used, start + size)) {
      memcpy(boot_heap + start - sizeof size, &size, sizeof size);   /* for realloc */
      return boot_heap + start;
    }
  }
}

static size_t boot_size(const void *p) {
  size_t size;
  memcpy(&size, (const char *)p - sizeof size, sizeof size);
  return size;
}

static void *next_symbol(const char *name) {
  return dlsym(RTLD_NEXT, name);
}

static void *fallback_reallocarray(void *old, size_t nmemb, size_t size) {
  if (size && nmemb > SIZE_MAX / size) {
    errno = ENOMEM;
    return NULL;
  }
  return real_realloc(old, nmemb * size);
}

/* Returns 1 when the real functions are known; 0 for calls made by dlsym
 * while this thread resolves them (served from the bootstrap arena). */
static __attribute__((noinline)) int resolve_slow(void) {
  if (atomic_load_explicit(&g_resolved, memory_order_acquire) == 2) return 1;
  if (T.resolving) return 0;
  int expect = 0;
  if (atomic_compare_exchange_strong(&g_resolved, &expect, 1)) {
    T.resolving = 1;
    real_malloc = next_symbol("malloc");
    real_free = next_symbol("free");
    real_calloc = next_symbol("calloc");
    real_realloc = next_symbol("realloc");
    real_reallocarray = next_symbol("reallocarray");
    real_posix_memalign = next_symbol("posix_memalign");
    real_aligned_alloc = next_symbol("aligned_alloc");
    real_memalign = next_symbol("memalign");
    real_valloc = next_symbol("valloc");
    real_pvalloc = next_symbol("pvalloc");
    if (!real_reallocarray) real_reallocarray = fallback_reallocarray;
    T.resolving = 0;
    if (!real_malloc || !real_free || !real_calloc || !real_realloc) {
      static const char msg[] = "scenc tracer: malloc, free, calloc or realloc not found after the tracer "
                                "(dlsym RTLD_NEXT); cannot continue\n";
      (void)!write(2, msg, sizeof msg - 1);
      abort();
    }
    atomic_store_explicit(&g_resolved, 2, memory_order_release);
    atomic_fetch_and(&g_mode, ~(uint32_t)M_SLOW);
    if (atomic_load(&g_state) == ST_DISABLED) atomic_fetch_or(&g_mode, M_SLOW);   /* the constructor may disable it meanwhile */
    return 1;
  }
  while (atomic_load_explicit(&g_resolved, memory_order_acquire) != 2) sched_yield();
  return 1;
}

static inline int resolve(void) {
  return LIKELY(atomic_load_explicit(&g_resolved, memory_order_acquire) == 2) ? 1 : resolve_slow();
}

/* realloc of a block from the bootstrap arena (never freed): a copy, in the real heap once there is one. */
static void *boot_realloc(void *old, size_t size) {
  void *p = resolve() ? real_malloc(size) : boot_alloc(size, 16);
  if (p && old) {
    size_t keep = boot_size(old);
    memcpy(p, old, keep < size ? keep : size);
  }
  return p;
}

/* A libc function the tracer wraps, looked up on its first call with the guard up (dlsym may
 * allocate); NULL when there is no next definition. */
static void *libc_symbol(_Atomic(void *) *slot, const char *name) {
  void *f = atomic_load_explicit(slot, memory_order_acquire);
  if (!f) {
    int guard = T.guard;
    T.guard = 1;
    f = next_symbol(name);
    T.guard = guard;
    atomic_store_explicit(slot, f, memory_order_release);
  }
  return f;
}

#endif
