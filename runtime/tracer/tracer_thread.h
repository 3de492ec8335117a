/* tracer_thread.h -- threads in the log (version 2): a thread's start, recorded by the thread
 * itself through the pthread_create wrapper, and its end, recorded by its key destructor, which also
 * writes out its buffer and hands it back; pthread_join, so what the joiner does next comes after.
 * Part of tracer.c's one translation unit (it includes the parts in order; see there). */
#ifndef SCN_TRACER_THREAD_H
#define SCN_TRACER_THREAD_H

/* --------------------------------------------------------------- threads
 * pthread_create is wrapped so the new thread logs its start (with its
 * creator) before anything else it does, numbered where its creator called
 * pthread_create: that is where it begins in the creator's sequence (the
 * creator may go on, even end, before the new thread runs): the new thread's clock starts at the
 * creator's. Its end is logged
 * by the key destructor. A creation that fails leaves its number unused (one
 * call reported missing). The start routine and its argument travel in a static table
 * (never the allocator's memory); when every entry is taken, the thread runs
 * unwrapped and its start is not logged (its replay thread then starts with
 * the replay). */
struct start_call {
  void *(*fn)(void *);
  void *arg;
  uint64_t seq, step;                /* the creator's clock at pthread_create, and its step */
  uint32_t creator;
  _Atomic int used;
};
static struct start_call g_starts[1024];

static void *traced_start(void *p) {
  struct start_call *s = p;
  void *(*fn)(void *) = s->fn;
  void *arg = s->arg;
  uint32_t creator = s->creator;
  uint64_t key = s->seq, step = s->step;
  atomic_store_explicit(&s->used, 0, memory_order_release);
  T.started = 1;
  T.key = key;
  T.step = step;
  T.tag = new_tag();
  if (begin() > 0) {
    put(K_THREAD_START, key, creator, 0, 0, 0, 0, 0, 0);
    T.guard = 0;
  }
  return fn(arg);
}

static struct start_call *claim_start(void) {
  for (size_t i = 0; i < sizeof g_starts / sizeof *g_starts; i++) {
    int free_ = 0;
    if (!atomic_load_explicit(&g_starts[i].used, memory_order_relaxed) &&
        atomic_compare_exchange_strong(&g_starts[i].used, &free_, 1))
      return &g_starts[i];
  }
  return NULL;
}

EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
  static _Atomic(void *) real;
  int (*f)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *) =
      (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))libc_symbol(&real, "pthread_create");
  if (!f) return ENOSYS;
  if (!tracing()) return f(th, attr, fn, arg);
  become_threaded();                 /* before the new thread can make a call: from now on clocks follow blocks */
  T.guard = 1;
  uint64_t key = take_key(0);
  T.guard = 0;
  struct start_call *s = claim_start();
  if (!s) return f(th, attr, fn, arg);
  s->fn = fn;
  s->arg = arg;
  s->creator = tid();
  s->seq = key;
  s->step = T.step;
  int rc = f(th, attr, traced_start, s);
  if (rc) atomic_store_explicit(&s->used, 0, memory_order_release);
  return rc;
}

/* What the joiner does next comes after the joined thread's end (its clock, in g_exact when it recorded it):
 * `rc` is a join's result, returned as it is. */
static int joined(int rc) {
  if (rc == 0) {
    uint64_t g = atomic_load_explicit(&g_exact, memory_order_acquire);
    if (T.key < g) T.key = g;
  }
  return rc;
}

typedef int (*join_fn)(pthread_t, void **);

EXPORT int pthread_join(pthread_t th, void **ret) {
  static _Atomic(void *) real;
  join_fn f = (join_fn)libc_symbol(&real, "pthread_join");
  return f ? joined(f(th, ret)) : ENOSYS;
}

EXPORT int pthread_tryjoin_np(pthread_t th, void **ret) {
  static _Atomic(void *) real;
  join_fn f = (join_fn)libc_symbol(&real, "pthread_tryjoin_np");
  return f ? joined(f(th, ret)) : ENOSYS;
}

EXPORT int pthread_timedjoin_np(pthread_t th, void **ret, const struct timespec *abstime) {
  static _Atomic(void *) real;
  int (*f)(pthread_t, void **, const struct timespec *) =
      (int (*)(pthread_t, void **, const struct timespec *))libc_symbol(&real, "pthread_timedjoin_np");
  return f ? joined(f(th, ret, abstime)) : ENOSYS;
}

/* The thread's key destructor. It re-arms itself for later rounds of the
 * PTHREAD_DESTRUCTOR_ITERATIONS glibc runs, so the exit record comes after
 * what the program's own key destructors free in the first round; it leaves
 * the last round to runtimes that tear the thread down there (ThreadSanitizer
 * does, and our write would then crash inside it). */
static void thread_gone(void *arg) {
  struct buffer *b = arg;
  T.guard++;
  if (++T.exit_round < PTHREAD_DESTRUCTOR_ITERATIONS - 1 && pthread_setspecific(g_key, b) == 0) {
    T.guard--;
    return;
  }
  if (atomic_load_explicit(&g_state, memory_order_relaxed) == ST_ENABLED && begin_record()) {
    uint64_t key = take_key(0);
    put(K_THREAD_EXIT, key, 0, 0, 0, 0, 0, 0, 0);
    raise_to(&g_exact, key);         /* for its joiner */
  }
  if (enter(b)) {
    flush_locked(b);
    leave(b);
  } else {                           /* the process is leaving: written out once, by whoever comes first */
    give_up(b, 0);
  }
  T.rec = T.buf = NULL;
  T.exiting = 1;
  atomic_store_explicit(&b->owned, 0, memory_order_release);
  T.guard--;
}

#endif
