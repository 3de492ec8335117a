"""`scenc merge SHARD.json ... -o all.json`: the shards of one plan put back together (run/merge.py)."""

import sys

from ..errors import EXIT_OK
from ..run import cells
from ..run.merge import describe_machines, merge as merge_shards


def merge(args) -> int:
    result = merge_shards(args.parts, args.output, allow_missing=args.allow_missing, force=args.force,
                          note=lambda text: print(text, file=sys.stderr))
    runs = sum(1 for r in result.runs if not r.warmup)
    print(f"merged {len(args.parts)} shards: {len(cells.plan_cells(result.header['plan']))} cells, "
          f"{runs} runs -> {args.output}", file=sys.stderr)
    text = describe_machines(result)
    if text:
        print(f"scenc: note: {text}", file=sys.stderr)
    return EXIT_OK
