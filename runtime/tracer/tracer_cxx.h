/* tracer_cxx.h -- the C++ allocation interface: every operator new and delete (Itanium mangling,
 * 64-bit size_t), the plain, sized, aligned and nothrow forms, single and array.
 * Part of tracer.c's one translation unit (it includes the parts in order; see there). */
#ifndef SCN_TRACER_CXX_H
#define SCN_TRACER_CXX_H

/* ----------------------------------------------------------- C++ interface
 * Resolved on first use: libstdc++ may be loaded after this library (a
 * Python extension written in C++). Its operator new throws std::bad_alloc
 * through our frame; the cleanup (compiled with -fexceptions) logs the call
 * as a failed allocation and drops the guard on the way out. */
static void *cxx_symbol(_Atomic(void *) *slot, const char *name) {
  void *f = atomic_load_explicit(slot, memory_order_acquire);
  if (UNLIKELY(!f)) {
    int guard = T.guard;
    T.guard = 1;
    f = next_symbol(name);
    T.guard = guard;
    if (!f) {
      note_stderr("no next definition of the C++ allocation function ", name);
      abort();
    }
    atomic_store_explicit(slot, f, memory_order_release);
  }
  return f;
}

struct new_call {
  int kind, done;
  size_t size, align;
};

static void new_unwound(struct new_call *n) {
  if (n->done) return;
  put(n->kind, take_key(0), n->size, n->align, 0, 0, 0, F_THREW, 0);
  T.guard = 0;
}

#define NEW_WRAPPER(sym, kind, PARAMS, ARGS, ALIGN)                                      \
  EXPORT void *sym PARAMS {                                                              \
    static _Atomic(void *) real;                                                         \
    void *(*f) PARAMS = (void *(*) PARAMS)cxx_symbol(&real, #sym);                       \
    if (begin() <= 0) return f ARGS;                                                     \
    struct new_call n __attribute__((cleanup(new_unwound))) = {kind, 0, size, ALIGN};    \
    void *p = f ARGS;                                                                    \
    n.done = 1;                                                                          \
    put(kind, take_key((uintptr_t)p), size, ALIGN, 0, (uintptr_t)p, 0, 0, 0);           \
    T.guard = 0;                                                                         \
    return p;                                                                            \
  }

NEW_WRAPPER(_Znwm, K_NEW, (size_t size), (size), 0)
NEW_WRAPPER(_Znam, K_NEW_ARRAY, (size_t size), (size), 0)
NEW_WRAPPER(_ZnwmRKSt9nothrow_t, K_NEW_NOTHROW, (size_t size, const void *tag), (size, tag), 0)
NEW_WRAPPER(_ZnamRKSt9nothrow_t, K_NEW_ARRAY_NOTHROW, (size_t size, const void *tag), (size, tag), 0)
NEW_WRAPPER(_ZnwmSt11align_val_t, K_NEW_ALIGNED, (size_t size, size_t align), (size, align), align)
NEW_WRAPPER(_ZnamSt11align_val_t, K_NEW_ARRAY_ALIGNED, (size_t size, size_t align), (size, align), align)
NEW_WRAPPER(_ZnwmSt11align_val_tRKSt9nothrow_t, K_NEW_ALIGNED_NOTHROW,
            (size_t size, size_t align, const void *tag), (size, align, tag), align)
NEW_WRAPPER(_ZnamSt11align_val_tRKSt9nothrow_t, K_NEW_ARRAY_ALIGNED_NOTHROW,
            (size_t size, size_t align, const void *tag), (size, align, tag), align)

#define DELETE_WRAPPER(sym, kind, PARAMS, ARGS, A1, A2)                                  \
  EXPORT void sym PARAMS {                                                               \
    static _Atomic(void *) real;                                                         \
    void (*f) PARAMS = (void (*) PARAMS)cxx_symbol(&real, #sym);                         \
    if (begin() <= 0) {                                                                  \
      f ARGS;                                                                            \
      return;                                                                            \
    }                                                                                    \
    uint64_t key = take_key((uintptr_t)p);                                               \
    f ARGS;                                                                              \
    put(kind, key, (uintptr_t)p, A1, A2, 0, 0, 0, 0);                                    \
    T.guard = 0;                                                                         \
  }

DELETE_WRAPPER(_ZdlPv, K_DELETE, (void *p), (p), 0, 0)
DELETE_WRAPPER(_ZdlPvm, K_DELETE_SIZED, (void *p, size_t size), (p, size), size, 0)
DELETE_WRAPPER(_ZdlPvSt11align_val_t, K_DELETE_ALIGNED, (void *p, size_t align), (p, align), align, 0)
DELETE_WRAPPER(_ZdlPvmSt11align_val_t, K_DELETE_SIZED_ALIGNED, (void *p, size_t size, size_t align),
               (p, size, align), size, align)
DELETE_WRAPPER(_ZdlPvRKSt9nothrow_t, K_DELETE_NOTHROW, (void *p, const void *tag), (p, tag), 0, 0)
DELETE_WRAPPER(_ZdlPvSt11align_val_tRKSt9nothrow_t, K_DELETE_ALIGNED_NOTHROW,
               (void *p, size_t align, const void *tag), (p, align, tag), align, 0)
DELETE_WRAPPER(_ZdaPv, K_DELETE_ARRAY, (void *p), (p), 0, 0)
DELETE_WRAPPER(_ZdaPvm, K_DELETE_ARRAY_SIZED, (void *p, size_t size), (p, size), size, 0)
DELETE_WRAPPER(_ZdaPvSt11align_val_t, K_DELETE_ARRAY_ALIGNED, (void *p, size_t align), (p, align), align, 0)
DELETE_WRAPPER(_ZdaPvmSt11align_val_t, K_DELETE_ARRAY_SIZED_ALIGNED, (void *p, size_t size, size_t align),
               (p, size, align), size, align)
DELETE_WRAPPER(_ZdaPvRKSt9nothrow_t, K_DELETE_ARRAY_NOTHROW, (void *p, const void *tag), (p, tag), 0, 0)
DELETE_WRAPPER(_ZdaPvSt11align_val_tRKSt9nothrow_t, K_DELETE_ARRAY_ALIGNED_NOTHROW,
               (void *p, size_t align, const void *tag), (p, align, tag), align, 0)

#endif
