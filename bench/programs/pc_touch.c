/* pc_touch: a producer/consumer that writes the first and last byte of each block.
 *
 *   pc_touch [OBJECTS [PAIRS]]   (default 200000 objects per pair, 1 pair)
 *
 * Each producer allocates blocks of 1 to 32768 bytes (uniform), stores into
 * their first and last byte, and hands them to its consumer through a bounded
 * queue of 256; the consumer reads both bytes and frees the block. Writing two
 * bytes costs nothing, but it makes the kernel back the pages the block starts
 * and ends in: an allocator that returns fresh memory pays page faults here,
 * where a benchmark that never touches its blocks would not. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define QUEUE 256

struct chan {
  pthread_mutex_t lock;
  pthread_cond_t changed;
  char *slot[QUEUE];
  size_t size[QUEUE];
  unsigned head, tail;
  long objects;
  uint64_t seed;
  unsigned long sum;
};

static void *produce(void *arg) {
  struct chan *c = arg;
  uint64_t x = c->seed;
  for (long i = 0; i < c->objects; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    size_t size = 1 + (size_t)(x >> 33) % 32768;
    char *o = malloc(size);
    if (!o) abort();
    o[0] = (char)i;
    o[size - 1] = (char)(i >> 1);
    pthread_mutex_lock(&c->lock);
    while (c->tail - c->head == QUEUE) pthread_cond_wait(&c->changed, &c->lock);
    c->slot[c->tail % QUEUE] = o;
    c->size[c->tail++ % QUEUE] = size;
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
  }
  return NULL;
}

static void *consume(void *arg) {
  struct chan *c = arg;
  for (long i = 0; i < c->objects; i++) {
    pthread_mutex_lock(&c->lock);
    while (c->tail == c->head) pthread_cond_wait(&c->changed, &c->lock);
    char *o = c->slot[c->head % QUEUE];
    size_t size = c->size[c->head++ % QUEUE];
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
    c->sum += (unsigned char)o[0] + (unsigned char)o[size - 1];
    free(o);
  }
  return NULL;
}

int main(int argc, char **argv) {
  long objects = argc > 1 ? atol(argv[1]) : 200000;
  int pairs = argc > 2 ? atoi(argv[2]) : 1;
  struct chan *c = calloc((size_t)pairs, sizeof *c);
  pthread_t *t = calloc(2 * (size_t)pairs, sizeof *t);
  if (!c || !t) abort();
  for (int k = 0; k < pairs; k++) {
    pthread_mutex_init(&c[k].lock, NULL);
    pthread_cond_init(&c[k].changed, NULL);
    c[k].objects = objects;
    c[k].seed = (uint64_t)k + 7;
    if (pthread_create(&t[2 * k], NULL, produce, &c[k]) || pthread_create(&t[2 * k + 1], NULL, consume, &c[k]))
      abort();
  }
  unsigned long sum = 0;
  for (int k = 0; k < pairs; k++) {
    pthread_join(t[2 * k], NULL);
    pthread_join(t[2 * k + 1], NULL);
    sum += c[k].sum;
  }
  printf("pc_touch: %d pair(s), %ld objects each, checksum %lu\n", pairs, objects, sum);
  free(c);
  free(t);
  return 0;
}
