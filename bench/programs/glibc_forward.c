/* libglibcfwd.so: glibc's own malloc, preloaded, for a program linked with another allocator.
 *
 * Debian's redis-server is linked with libjemalloc.so.2, which comes before libc.so.6 in its
 * search order: run "without a preload", its malloc is jemalloc's, and scenc's proof says so.
 * Preloaded, this library defines the allocator functions first and forwards each to glibc's
 * implementation (the __libc_* entry points glibc exports, or libc.so.6's own symbol), so the
 * program's calls reach glibc's malloc through one more jump. Functions only the linked
 * allocator has (jemalloc's mallctl, nallocx) still go to it; they do not allocate for the program.
 *
 * Build: cc -O2 -fPIC -shared -o libglibcfwd.so glibc_forward.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

__attribute__((visibility("default"))) void *malloc(size_t n) { return __libc_malloc(n); }
__attribute__((visibility("default"))) void free(void *p) { __libc_free(p); }
__attribute__((visibility("default"))) void *calloc(size_t k, size_t n) { return __libc_calloc(k, n); }
__attribute__((visibility("default"))) void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }
__attribute__((visibility("default"))) void *memalign(size_t a, size_t n) { return __libc_memalign(a, n); }
__attribute__((visibility("default"))) void *aligned_alloc(size_t a, size_t n) { return __libc_memalign(a, n); }
__attribute__((visibility("default"))) void *valloc(size_t n) { return __libc_valloc(n); }
__attribute__((visibility("default"))) void *pvalloc(size_t n) { return __libc_pvalloc(n); }

__attribute__((visibility("default"))) int posix_memalign(void **out, size_t a, size_t n) {
    if (a < sizeof(void *) || (a & (a - 1)))
        return EINVAL;
    void *p = __libc_memalign(a, n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

/* glibc has no __libc_ name for it, and the linked allocator's comes before libc's. */
__attribute__((visibility("default"))) size_t malloc_usable_size(void *p) {
    static size_t (*libc_usable)(void *);
    if (!libc_usable) {
        void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
        libc_usable = libc ? (size_t (*)(void *))dlsym(libc, "malloc_usable_size") : 0;
        if (!libc_usable)
            return 0;
    }
    return libc_usable(p);
}
