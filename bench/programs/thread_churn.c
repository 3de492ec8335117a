/* Threads that come and go: 200 threads one after another, two alive at a time,
 * each freeing the objects its predecessor made and leaving its own to its successor.
 *
 *   thread_churn [THREADS [OBJECTS]]     (default 200 threads, 1000 objects each:
 *                                          about 0.2-0.5 s under glibc)
 *
 * Thread k allocates OBJECTS blocks of 16-4096 bytes (writing each in full),
 * does some scratch work of its own (allocate, write, free), publishes its
 * blocks in mailbox k, then waits for mailbox k-1 and frees what thread k-1
 * left there. main starts thread k, then joins thread k-1: at most two workers
 * are alive at once, and each one's thread exit (its caches flushed, its arena
 * given back) happens while the next is working. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  pthread_mutex_t lock;
  pthread_cond_t ready_cv;
  int ready;
  void **blocks;
} mailbox;

static mailbox *boxes;
static int objects = 1000;

static uint64_t step(uint64_t *s) {
  *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
  return *s * 0x2545f4914f6cdd1dull;
}

static void *fresh(size_t n) {
  void *p = malloc(n);
  if (!p) { perror("malloc"); exit(1); }
  memset(p, (int)n, n);
  return p;
}

static void *worker(void *arg) {
  long k = (long)arg;
  uint64_t s = 0x9e3779b97f4a7c15ull ^ (uint64_t)(k + 1) * 0x100000001b3ull;
  void **mine = fresh(sizeof(void *) * (size_t)objects);
  for (int i = 0; i < objects; i++) mine[i] = fresh(16 + step(&s) % 4081);
  for (int i = 0; i < objects * 2; i++) free(fresh(16 + step(&s) % 1009));   /* scratch work */
  mailbox *out = &boxes[k];
  pthread_mutex_lock(&out->lock);
  out->blocks = mine, out->ready = 1;
  pthread_cond_signal(&out->ready_cv);
  pthread_mutex_unlock(&out->lock);
  if (k > 0) {                      /* free what the predecessor left */
    mailbox *in = &boxes[k - 1];
    pthread_mutex_lock(&in->lock);
    while (!in->ready) pthread_cond_wait(&in->ready_cv, &in->lock);
    void **theirs = in->blocks;
    in->blocks = NULL;
    pthread_mutex_unlock(&in->lock);
    for (int i = 0; i < objects; i++) free(theirs[i]);
    free(theirs);
  }
  return NULL;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 200;
  objects = argc > 2 ? atoi(argv[2]) : 1000;
  if (threads < 1 || objects < 1) { fprintf(stderr, "usage: thread_churn [THREADS [OBJECTS]]\n"); return 2; }
  boxes = calloc((size_t)threads, sizeof *boxes);
  pthread_t *tid = calloc((size_t)threads, sizeof *tid);
  if (!boxes || !tid) { perror("calloc"); return 1; }
  for (int k = 0; k < threads; k++) {
    pthread_mutex_init(&boxes[k].lock, NULL);
    pthread_cond_init(&boxes[k].ready_cv, NULL);
  }
  for (long k = 0; k < threads; k++) {
    if (pthread_create(&tid[k], NULL, worker, (void *)k)) { perror("pthread_create"); return 1; }
    if (k > 0) pthread_join(tid[k - 1], NULL);
  }
  pthread_join(tid[threads - 1], NULL);
  void **last = boxes[threads - 1].blocks;      /* the last thread's blocks: freed by main */
  for (int i = 0; i < objects; i++) free(last[i]);
  free(last);
  for (int k = 0; k < threads; k++) {
    pthread_mutex_destroy(&boxes[k].lock);
    pthread_cond_destroy(&boxes[k].ready_cv);
  }
  free(boxes);
  free(tid);
  printf("thread_churn: %d threads x %d objects\n", threads, objects);
  return 0;
}
