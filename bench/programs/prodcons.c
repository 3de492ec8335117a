/* Producers and consumers: blocks of 1-32768 bytes made by one thread, freed by another.
 *
 *   prodcons [PAIRS [BLOCKS]]     (default 2 pairs, 300000 blocks per producer:
 *                                  about 0.2-1 s)
 *
 * Each producer writes only the first and the last byte of its block (a header
 * and a trailer, as a message buffer filled later would be), so only the pages
 * it touches are backed; it puts the block in its pair's queue (at most 64
 * blocks), and the consumer checks both bytes and frees it. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { QUEUE = 64 };

typedef struct {
  pthread_mutex_t lock;
  pthread_cond_t not_empty, not_full;
  unsigned char *slot[QUEUE];
  size_t len[QUEUE];
  int head, count;
  long blocks;
  uint64_t seed, sum;
} pair;

static void put(pair *q, unsigned char *p, size_t n) {
  pthread_mutex_lock(&q->lock);
  while (q->count == QUEUE) pthread_cond_wait(&q->not_full, &q->lock);
  int at = (q->head + q->count) % QUEUE;
  q->slot[at] = p, q->len[at] = n, q->count++;
  pthread_cond_signal(&q->not_empty);
  pthread_mutex_unlock(&q->lock);
}

static unsigned char *take(pair *q, size_t *n) {
  pthread_mutex_lock(&q->lock);
  while (q->count == 0) pthread_cond_wait(&q->not_empty, &q->lock);
  unsigned char *p = q->slot[q->head];
  *n = q->len[q->head];
  q->head = (q->head + 1) % QUEUE, q->count--;
  pthread_cond_signal(&q->not_full);
  pthread_mutex_unlock(&q->lock);
  return p;
}

static void *produce(void *arg) {
  pair *q = arg;
  uint64_t s = q->seed;
  for (long i = 0; i < q->blocks; i++) {
    s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
    size_t n = 1 + (s * 0x2545f4914f6cdd1dull) % 32768;
    unsigned char *p = malloc(n);
    if (!p) { perror("malloc"); exit(1); }
    p[0] = (unsigned char)n, p[n - 1] = (unsigned char)(n >> 8);
    put(q, p, n);
  }
  return NULL;
}

static void *consume(void *arg) {
  pair *q = arg;
  for (long i = 0; i < q->blocks; i++) {
    size_t n;
    unsigned char *p = take(q, &n);
    q->sum += p[0] + p[n - 1];
    free(p);
  }
  return NULL;
}

int main(int argc, char **argv) {
  int pairs = argc > 1 ? atoi(argv[1]) : 2;
  long blocks = argc > 2 ? atol(argv[2]) : 300000;
  if (pairs < 1 || blocks < 1) { fprintf(stderr, "usage: prodcons [PAIRS [BLOCKS]]\n"); return 2; }
  pair *q = calloc((size_t)pairs, sizeof *q);
  pthread_t *t = calloc(2 * (size_t)pairs, sizeof *t);
  if (!q || !t) { perror("calloc"); return 1; }
  for (int i = 0; i < pairs; i++) {
    pthread_mutex_init(&q[i].lock, NULL);
    pthread_cond_init(&q[i].not_empty, NULL);
    pthread_cond_init(&q[i].not_full, NULL);
    q[i].blocks = blocks, q[i].seed = 0x9e3779b97f4a7c15ull + (uint64_t)i;
    if (pthread_create(&t[2 * i], NULL, produce, &q[i]) || pthread_create(&t[2 * i + 1], NULL, consume, &q[i])) {
      perror("pthread_create");
      return 1;
    }
  }
  uint64_t sum = 0;
  for (int i = 0; i < pairs; i++) {
    pthread_join(t[2 * i], NULL);
    pthread_join(t[2 * i + 1], NULL);
    sum += q[i].sum;
  }
  printf("prodcons: %d pairs x %ld blocks, checksum %llu\n", pairs, blocks, (unsigned long long)sum);
  free(q);
  free(t);
  return 0;
}
