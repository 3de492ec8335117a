"""Sizes and lifetimes kept together where drawing them apart would misjudge the live bytes (fit.paired_class).

node's libuv ring freed its 1-16 KiB objects after a few calls and its small ones after hundreds; drawn from one
size table and one lifetime table, its model held 926 KB at the peak against 11 KB. The figures here are what
the collector keeps per size class (trace/model/collect.py, ThreadWindow.lives_by_class), written by hand.
"""

from scenc.trace.model.collect import size_class
from scenc.trace.model.fit import paired_class


def _class(objects):
    """One size class's figures from (size, lifetime) pairs: [lifetime histogram, bytes, bytes x lifetime, sizes]."""
    hist = {}
    for _, life in objects:
        h = hist.setdefault(life, [0, 0])
        h[0] += 1
        h[1] += life
    return [hist, sum(s for s, _ in objects), sum(s * life for s, life in objects), {}]


def _by_class(objects):
    out = {}
    for size, life in objects:
        out.setdefault(size_class(size), []).append((size, life))
    return {c: _class(objs) for c, objs in out.items()}


def test_big_objects_that_die_young_among_small_ones_that_live_long_get_lifetimes_of_their_own():
    ring = [(64, 800)] * 1000 + [(4000, 2)] * 1000      # drawn apart: 14x the bytes x lifetimes
    assert paired_class(_by_class(ring)) == size_class(4000)


def test_sizes_and_lifetimes_that_go_together_as_drawn_stay_one_table():
    alike = [(64, 800), (4000, 800), (64, 2), (4000, 2)] * 250   # no tie between size and lifetime
    assert paired_class(_by_class(alike)) is None
    assert paired_class(_by_class([(64, 5)] * 10)) is None       # one class: nothing to split
