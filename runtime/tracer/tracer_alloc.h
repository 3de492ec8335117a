/* tracer_alloc.h -- the C allocation interface: malloc, free, calloc, realloc, reallocarray,
 * posix_memalign, aligned_alloc, memalign, valloc and pvalloc, each forwarded to the next definition
 * and recorded when the program calls it; until the next definitions are known, what dlsym itself
 * allocates comes from the bootstrap arena (tracer_next.h).
 * Part of tracer.c's one translation unit (it includes the parts in order; see there). */
#ifndef SCN_TRACER_ALLOC_H
#define SCN_TRACER_ALLOC_H

EXPORT void *malloc(size_t size) {
  if (UNLIKELY(!resolve())) return boot_alloc(size, 16);
  if (!tracing()) return real_malloc(size);
  struct call c;
  begin(&c);
  void *p = real_malloc(size);
  sample_malloc(p, size);
  return end_alloc(&c, K_MALLOC, size, 0, 0, p);
}

EXPORT void free(void *p) {
  if (UNLIKELY(is_boot(p))) return;
  if (UNLIKELY(!resolve())) return;
  if (!tracing()) {
    real_free(p);
    return;
  }
  struct call c;
  uint64_t seq = begin_release(&c);
  sample_free(p);
  real_free(p);
  end_release(&c, seq, K_FREE, (uintptr_t)p, 0, 0);
}

EXPORT void *calloc(size_t nmemb, size_t size) {
  if (UNLIKELY(!resolve())) {
    if (size && nmemb > SIZE_MAX / size) return NULL;
    return boot_alloc(nmemb * size, 16);   /* the arena is static, hence zeroed, and never reused */
  }
  if (!tracing()) return real_calloc(nmemb, size);
  struct call c;
  begin(&c);
  return end_alloc(&c, K_CALLOC, nmemb, size, 0, real_calloc(nmemb, size));
}

/* A realloc that moves its block both releases and acquires: see tracer.c's opening comment. */
static void *traced_realloc(int kind, void *old, size_t nmemb, size_t size, int array) {
  T.guard = 1;
  sample_free(old);
  uint64_t at = old ? now_tick() : 0;
  uint64_t before = old ? take_seq() : 0;
  void *p = array ? real_reallocarray(old, nmemb, size) : real_realloc(old, size);
  int err = errno;
  uint64_t seq = before, span = 0;
  if (!old || (p && p != old)) {
    seq = take_seq();
    at = now_tick();
    span = old ? seq - before : 0;
  }
  if (array)
    put(kind, seq, at, (uintptr_t)old, nmemb, size, (uintptr_t)p, 0, 0, span);
  else
    put(kind, seq, at, (uintptr_t)old, size, 0, (uintptr_t)p, 0, 0, span);
  T.guard = 0;
  errno = err;
  return p;
}

EXPORT void *realloc(void *old, size_t size) {
  if (UNLIKELY(is_boot(old))) return boot_realloc(old, size);
  if (UNLIKELY(!resolve())) return boot_realloc(old, size);
  if (!tracing()) return real_realloc(old, size);
  return traced_realloc(K_REALLOC, old, 1, size, 0);
}

EXPORT void *reallocarray(void *old, size_t nmemb, size_t size) {
  if (UNLIKELY(is_boot(old) || !resolve())) {
    if (size && nmemb > SIZE_MAX / size) return NULL;
    return boot_realloc(old, nmemb * size);
  }
  if (!tracing()) return real_reallocarray(old, nmemb, size);
  return traced_realloc(K_REALLOCARRAY, old, nmemb, size, 1);
}

EXPORT int posix_memalign(void **out, size_t align, size_t size) {
  if (UNLIKELY(!resolve())) {
    *out = boot_alloc(size, align);
    return *out ? 0 : ENOMEM;
  }
  if (!real_posix_memalign) return ENOSYS;
  if (!tracing()) return real_posix_memalign(out, align, size);
  struct call c;
  begin(&c);
  int rc = real_posix_memalign(out, align, size);
  int err = errno;
  put(K_POSIX_MEMALIGN, take_seq(), now_tick(), align, size, 0, rc == 0 ? (uintptr_t)*out : 0, rc, 0, 0);
  T.guard = 0;
  errno = err;
  return rc;
}

#define ALIGNED_WRAPPER(name, kind)                                        \
  EXPORT void *name(size_t align, size_t size) {                           \
    if (UNLIKELY(!resolve())) return boot_alloc(size, align);              \
    if (!real_##name) {                                                    \
      errno = ENOSYS;                                                      \
      return NULL;                                                         \
    }                                                                      \
    if (!tracing()) return real_##name(align, size);                       \
    struct call c;                                                         \
    begin(&c);                                                             \
    return end_alloc(&c, kind, align, size, 0, real_##name(align, size));  \
  }
ALIGNED_WRAPPER(aligned_alloc, K_ALIGNED_ALLOC)
ALIGNED_WRAPPER(memalign, K_MEMALIGN)

#define PAGE_WRAPPER(name, kind)                                           \
  EXPORT void *name(size_t size) {                                         \
    if (UNLIKELY(!resolve())) return boot_alloc(size, 4096);               \
    if (!real_##name) {                                                    \
      errno = ENOSYS;                                                      \
      return NULL;                                                         \
    }                                                                      \
    if (!tracing()) return real_##name(size);                              \
    struct call c;                                                         \
    begin(&c);                                                             \
    return end_alloc(&c, kind, size, 0, 0, real_##name(size));             \
  }
PAGE_WRAPPER(valloc, K_VALLOC)
PAGE_WRAPPER(pvalloc, K_PVALLOC)

#endif
