/* churn: threads come and go, two at a time, with objects passed between them.
 *
 *   churn [PAIRS [OBJECTS]]     (default 100 pairs: 200 threads; 2000 objects per pair)
 *
 * For each pair the main thread starts a producer and a consumer; the producer
 * allocates OBJECTS blocks of 16 to 4096 bytes and hands each to the consumer
 * through a small bounded queue; the consumer frees them. Both end, the main
 * thread joins them, and starts the next pair: at most 3 threads are alive at
 * once, 2 of them short-lived. Thread exit is where per-thread caches are
 * flushed and arenas handed back, which is what this program measures. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define QUEUE 64

struct pair {
  pthread_mutex_t lock;
  pthread_cond_t changed;
  void *slot[QUEUE];
  unsigned head, tail;   /* tail - head objects waiting */
  int objects;
  uint64_t seed;
};

static void put(struct pair *p, void *o) {
  pthread_mutex_lock(&p->lock);
  while (p->tail - p->head == QUEUE) pthread_cond_wait(&p->changed, &p->lock);
  p->slot[p->tail++ % QUEUE] = o;
  pthread_cond_broadcast(&p->changed);
  pthread_mutex_unlock(&p->lock);
}

static void *take(struct pair *p) {
  pthread_mutex_lock(&p->lock);
  while (p->tail == p->head) pthread_cond_wait(&p->changed, &p->lock);
  void *o = p->slot[p->head++ % QUEUE];
  pthread_cond_broadcast(&p->changed);
  pthread_mutex_unlock(&p->lock);
  return o;
}

static void *producer(void *arg) {
  struct pair *p = arg;
  uint64_t x = p->seed;
  for (int i = 0; i < p->objects; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    size_t size = 16 + (size_t)(x >> 33) % 4081;
    char *o = malloc(size);
    if (!o) abort();
    o[0] = (char)i;
    o[size - 1] = (char)i;
    put(p, o);
  }
  return NULL;
}

static void *consumer(void *arg) {
  struct pair *p = arg;
  for (int i = 0; i < p->objects; i++) free(take(p));
  return NULL;
}

int main(int argc, char **argv) {
  int pairs = argc > 1 ? atoi(argv[1]) : 100;
  int objects = argc > 2 ? atoi(argv[2]) : 2000;
  for (int k = 0; k < pairs; k++) {
    struct pair p = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, 0, objects, (uint64_t)k + 1 };
    pthread_t a, b;
    if (pthread_create(&a, NULL, producer, &p) || pthread_create(&b, NULL, consumer, &p)) abort();
    pthread_join(a, NULL);
    pthread_join(b, NULL);
  }
  printf("churn: %d threads, %d objects\n", 2 * pairs, pairs * objects);
  return 0;
}
