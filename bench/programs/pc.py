# A producer/consumer in Python (docs/capture.md's pc.py): buffers made by one thread, dropped by another.
import queue, random, threading

q = queue.Queue(maxsize=64)

def produce(seed):
    rng = random.Random(seed)
    for _ in range(20000):
        q.put(bytes(rng.randint(600, 8000)))   # > 512 bytes: from malloc, not pymalloc
    q.put(None)

def consume():
    while q.get() is not None:
        pass

threads = [threading.Thread(target=produce, args=(1,)), threading.Thread(target=consume)]
for t in threads: t.start()
for t in threads: t.join()
