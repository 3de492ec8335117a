# A small Python program: parse and build JSON, dicts of strings, lists that grow, bytes buffers.
import json
import random

rng = random.Random(1)
records = []
for i in range(20000):
    rec = {"id": i, "name": "item-%d" % i, "tags": [rng.choice("abcdefgh") * rng.randint(1, 40) for _ in range(4)],
           "blob": bytes(rng.randint(600, 6000)) if i % 7 == 0 else None}
    records.append(rec)
    if len(records) > 4000:
        records.pop(rng.randrange(len(records)))
text = json.dumps([{k: v for k, v in r.items() if k != "blob"} for r in records])
back = json.loads(text)
index = {r["name"]: r for r in back}
print("py_work:", len(text), "bytes of json,", len(index), "records")
