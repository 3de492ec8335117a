/* tracer_alloc.h -- the C allocation interface: malloc, free, calloc, realloc, reallocarray,
 * posix_memalign, aligned_alloc, memalign, valloc and pvalloc, each forwarded to the next definition
 * and recorded when the program calls it; until the next definitions are known, what dlsym itself
 * allocates comes from the bootstrap arena (tracer_next.h).
 * Part of tracer.c's one translation unit (it includes the parts in order; see there). */
#ifndef SCN_TRACER_ALLOC_H
#define SCN_TRACER_ALLOC_H

EXPORT void *malloc(size_t size) {
  int how = begin();
  if (UNLIKELY(how <= 0)) return how ? boot_alloc(size, 16) : real_malloc(size);
  void *p = real_malloc(size);
  sample_malloc(p, size);
  put(K_MALLOC, take_key((uintptr_t)p), size, 0, 0, (uintptr_t)p, 0, 0, 0);   /* leaves errno alone */
  T.guard = 0;
  return p;
}

EXPORT void free(void *p) {
  if (UNLIKELY(is_boot(p))) return;
  int how = begin();
  if (UNLIKELY(how <= 0)) {
    if (how) return;
    real_free(p);
    return;
  }
  uint64_t key = take_key((uintptr_t)p);   /* before the real free: whoever gets the address next comes after */
  sample_free(p);
  real_free(p);
  put(K_FREE, key, (uintptr_t)p, 0, 0, 0, 0, 0, 0);
  T.guard = 0;
}

EXPORT void *calloc(size_t nmemb, size_t size) {
  int how = begin();
  if (UNLIKELY(how <= 0)) {
    if (!how) return real_calloc(nmemb, size);
    if (size && nmemb > SIZE_MAX / size) return NULL;
    return boot_alloc(nmemb * size, 16);   /* the arena is static, hence zeroed, and never reused */
  }
  void *p = real_calloc(nmemb, size);
  put(K_CALLOC, take_key((uintptr_t)p), nmemb, size, 0, (uintptr_t)p, 0, 0, 0);
  T.guard = 0;
  return p;
}

/* A realloc that moves its block both releases and acquires: see tracer.c's opening comment. */
static void *traced_realloc(int kind, void *old, size_t nmemb, size_t size, int array) {
  sample_free(old);
  uint64_t before = old ? take_key((uintptr_t)old) : 0;   /* the old block may be released inside the call */
  void *p = array ? real_reallocarray(old, nmemb, size) : real_realloc(old, size);
  int err = errno;
  /* a program may allocate and grow its blocks with realloc only (lua: realloc(NULL, n)): the sample looks at
   * what the block's new pages hold, past what realloc copied */
  if (!array) sample_malloc(p, size);
  uint64_t key = before, span = 0;
  if (!old || (p && p != old)) {
    key = take_key((uintptr_t)p);
    span = old ? key - before : 0;
  }
  if (array)
    put(kind, key, (uintptr_t)old, nmemb, size, (uintptr_t)p, 0, 0, span);
  else
    put(kind, key, (uintptr_t)old, size, 0, (uintptr_t)p, 0, 0, span);
  T.guard = 0;
  errno = err;
  return p;
}

EXPORT void *realloc(void *old, size_t size) {
  if (UNLIKELY(is_boot(old))) return boot_realloc(old, size);
  int how = begin();
  if (UNLIKELY(how <= 0)) return how ? boot_realloc(old, size) : real_realloc(old, size);
  return traced_realloc(K_REALLOC, old, 1, size, 0);
}

EXPORT void *reallocarray(void *old, size_t nmemb, size_t size) {
  int how = is_boot(old) ? -1 : begin();
  if (UNLIKELY(how < 0)) {
    if (size && nmemb > SIZE_MAX / size) return NULL;
    return boot_realloc(old, nmemb * size);
  }
  if (!how) return real_reallocarray(old, nmemb, size);
  return traced_realloc(K_REALLOCARRAY, old, nmemb, size, 1);
}

EXPORT int posix_memalign(void **out, size_t align, size_t size) {
  if (UNLIKELY(!resolve())) {
    *out = boot_alloc(size, align);
    return *out ? 0 : ENOMEM;
  }
  if (!real_posix_memalign) return ENOSYS;
  if (!begin()) return real_posix_memalign(out, align, size);
  int rc = real_posix_memalign(out, align, size);
  int err = errno;
  uintptr_t p = rc == 0 ? (uintptr_t)*out : 0;
  put(K_POSIX_MEMALIGN, take_key(p), align, size, 0, p, rc, 0, 0);
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
    if (!begin()) return real_##name(align, size);                         \
    void *p = real_##name(align, size);                                    \
    put(kind, take_key((uintptr_t)p), align, size, 0, (uintptr_t)p, 0, 0, 0); \
    T.guard = 0;                                                           \
    return p;                                                              \
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
    if (!begin()) return real_##name(size);                                \
    void *p = real_##name(size);                                           \
    put(kind, take_key((uintptr_t)p), size, 0, 0, (uintptr_t)p, 0, 0, 0);  \
    T.guard = 0;                                                           \
    return p;                                                              \
  }
PAGE_WRAPPER(valloc, K_VALLOC)
PAGE_WRAPPER(pvalloc, K_PVALLOC)

#endif
