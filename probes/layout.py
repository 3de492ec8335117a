"""The `layout` probe: where every block went.

The C side (probes/probe_layout.h) writes every allocation and free to
`layout.bin` in the run directory; probes/layoutstats.py summarises it and
probes/heapmap.py draws it. Writing a record per call slows the program down,
so `layout` runs apart from every probe that measures time.
"""

from pathlib import Path
from typing import Dict, Mapping, Sequence

from .base import CSide, Metric, Metrics, Probe, probe_report

NAME = "layout"
FILE = "layout.bin"

METRICS = (
    Metric("layout:allocations", "allocations recorded", "calls", ""),
    Metric("layout:frees", "frees recorded", "calls", ""),
    Metric("layout:unmatched_frees", "frees of blocks never seen allocated", "calls", "lower"),
    Metric("layout:peak_live_bytes", "peak of requested bytes alive at once", "B", ""),
    Metric("layout:peak_live_usable_bytes", "usable bytes of the blocks alive at that peak", "B", "lower",
           "memory"),
    Metric("layout:usable_short", "blocks with less usable size than requested (allocator bug)", "calls",
           "lower"),
    Metric("layout:internal_frag", "usable bytes not requested, over all allocations", "ratio", "lower",
           "internal fragmentation", key=True),
    Metric("layout:internal_frag_at_peak", "usable bytes not requested, at the live peak", "ratio",
           "lower", "internal fragmentation"),
    Metric("layout:address_span_bytes", "lowest to highest block address", "B", "lower", "address span"),
    Metric("layout:touched_kib", "pages that ever held a block", "KiB", "lower", "memory", key=True),
    Metric("layout:shared_lines", "cache lines that held live blocks of two threads at once "
           "(active false sharing)", "lines", "lower", "false sharing", key=True),
    Metric("layout:lines_used", "cache lines that ever held requested bytes", "lines", ""),
    Metric("layout:shared_line_fraction", "shared lines / lines used", "ratio", "lower", "false sharing"),
    Metric("layout:reuse_fraction", "allocations at an address used before", "ratio", ""),
    Metric("layout:handoffs", "allocations at an address another thread's block had "
           "(passive false sharing)", "calls", "lower", "handoff count", key=True),
    Metric("layout:handoff_fraction", "handoffs / allocations", "ratio", "lower", "handoff rate"),
)


def environment(run_dir: Path) -> Dict[str, str]:
    return {"SCENC_LAYOUT_FILE": str(Path(run_dir).resolve() / FILE)}


def collect(program: Mapping, run_dir: Path) -> Metrics:
    own = probe_report(program, NAME)
    if not own or own.get("error"):
        return {}
    path = Path(run_dir) / FILE
    if not path.exists():
        return {}
    from . import layoutfile, layoutstats  # numpy: only when there is a file to read
    figures = layoutstats.summarize(layoutfile.read(path))
    return {f"layout:{k}": v for k, v in figures.items()}


def notes(program: Mapping) -> Sequence[str]:
    own = probe_report(program, NAME)
    if own and own.get("error"):
        return (f"layout: the record file could not be written ({own['error']}); no layout figures",)
    return ()


PROBE = Probe(
    name=NAME,
    description="address, requested and usable size, thread and order of every block: internal "
                "fragmentation, address span, false sharing (active and passive), address reuse; "
                "the heap map and `scenc play`",
    cost="a 40-byte record per call, a shared sequence counter, malloc_usable_size per allocation "
         "and a write() every 1024 records",
    perturbs=frozenset({"time", "latency", "counters", "rss"}),
    sensitive_to=frozenset(),
    perturbation="a record of every call: a shared counter, malloc_usable_size, writes, 40 KiB of "
                 "resident buffers per thread",
    c=CSide(NAME, "probe_layout.h", ("program_start", "program_end", "thread_start", "thread_end",
                                      "op_before", "op_after", "report"),
            reads_sizes=True),
    metric_kinds=METRICS,
    collect=collect,
    environment=environment,
    notes=notes,
    files=(FILE,),
)
