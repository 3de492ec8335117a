/* tracer_mmap.h -- the program's own anonymous mappings: mmap, mmap64, munmap, mremap and mprotect.
 * Part of tracer.c's one translation unit (it includes the parts in order; see there). */
#ifndef SCN_TRACER_MMAP_H
#define SCN_TRACER_MMAP_H

/* -------------------------------------------------------------- mappings
 * The program's own anonymous mappings (an allocator of its own on top of
 * mmap: Python's arenas, runtimes, caches) are memory a replay must map too.
 * Only calls through the PLT made outside an allocator call are recorded: the
 * guard keeps out what a preloaded allocator maps inside malloc, and glibc's
 * malloc, thread stacks and the loader map without the PLT. File mappings are
 * not recorded (their pages are the file's). */
typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);

static void *traced_mmap(_Atomic(void *) *real, const char *name, void *addr, size_t len, int prot, int flags,
                         int fd, off_t off) {
  mmap_fn f = (mmap_fn)libc_symbol(real, name);
  if (!f) return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
  if (!(flags & MAP_ANONYMOUS) || !recording() || begin() <= 0)
    return f(addr, len, prot, flags, fd, off);
  void *p = f(addr, len, prot, flags, fd, off);
  int err = errno;
  put(K_MMAP, take_global_key(), len, (uint64_t)prot, (uint64_t)(unsigned)flags,
      p == MAP_FAILED ? 0 : (uintptr_t)p, 0, 0, 0);
  T.guard = 0;
  errno = err;
  return p;   /* MAP_FAILED on failure, recorded as a NULL result */
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  static _Atomic(void *) real;
  return traced_mmap(&real, "mmap", addr, len, prot, flags, fd, off);
}

EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  static _Atomic(void *) real;
  return traced_mmap(&real, "mmap64", addr, len, prot, flags, fd, off);
}

EXPORT int munmap(void *addr, size_t len) {
  static _Atomic(void *) real;
  int (*f)(void *, size_t) = (int (*)(void *, size_t))libc_symbol(&real, "munmap");
  if (!f) return (int)syscall(SYS_munmap, addr, len);
  if (!recording() || begin() <= 0) return f(addr, len);
  uint64_t key = take_global_key();   /* before the real call: a mapping there later comes after */
  int rc = f(addr, len);
  int err = errno;
  put(K_MUNMAP, key, (uintptr_t)addr, len, 0, (uint64_t)(unsigned)rc, 0, 0, 0);
  T.guard = 0;
  errno = err;
  return rc;
}

/* A runtime that reserves address space (PROT_NONE) and makes parts of it writable later (V8's heap, a JIT's
 * code space) holds memory a replay or model must hold too: mprotect says which parts. Calls on memory that
 * is not one of the program's own anonymous mappings are recorded as well; readers ignore them. */
EXPORT int mprotect(void *addr, size_t len, int prot) {
  static _Atomic(void *) real;
  int (*f)(void *, size_t, int) = (int (*)(void *, size_t, int))libc_symbol(&real, "mprotect");
  if (!f) return (int)syscall(SYS_mprotect, addr, len, prot);
  if (!recording() || begin() <= 0) return f(addr, len, prot);   /* begin: the call's window (tracer_record.h) */
  uint64_t key = take_global_key();
  int rc = f(addr, len, prot);
  int err = errno;
  put(K_MPROTECT, key, (uintptr_t)addr, len, (uint64_t)(unsigned)prot, (uint64_t)(unsigned)rc, 0, 0, 0);
  T.guard = 0;
  errno = err;
  return rc;
}

EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...) {
  static _Atomic(void *) real;
  void *(*f)(void *, size_t, size_t, int, ...) = (void *(*)(void *, size_t, size_t, int, ...))libc_symbol(&real,
                                                                                                      "mremap");
  void *want = NULL;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    want = va_arg(ap, void *);
    va_end(ap);
  }
  if (!f) {
    errno = ENOSYS;
    return MAP_FAILED;
  }
  if (!recording() || begin() <= 0)
    return f(old, old_len, new_len, flags, want);
  void *p = f(old, old_len, new_len, flags, want);
  int err = errno;
  put(K_MREMAP, take_global_key(), (uintptr_t)old, old_len, new_len, p == MAP_FAILED ? 0 : (uintptr_t)p, 0,
      flags & 0xff, 0);   /* numbered as it returns, as version 3 did: after what was in its new range */
  T.guard = 0;
  errno = err;
  return p;
}

#endif
