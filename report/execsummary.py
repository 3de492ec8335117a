"""The text `scenc exec` prints for one run: counts per kind and thread, time, rate."""

from ..system.units import fmt_bytes

OP_KINDS = ("malloc", "calloc", "realloc", "aligned_alloc", "memalign", "posix_memalign", "free")


def total_ops(result) -> int:
    return sum(sum(t["ops"].values()) for t in result["threads"])


def format_exec(result) -> str:
    threads = result["threads"]
    used = [k for k in OP_KINDS if any(t["ops"].get(k) for t in threads)] or ["malloc", "free"]
    # The program's other counts (docs/language.md, "What a program reports"), when any thread has one.
    extra = [k for k in ("sends", "recvs", "writes", "touches", "maps", "unmaps", "failed")
             if any(t.get(k) for t in threads)]
    head = ["thread"] + used + extra + ["time ms", "cpu ms"]
    rows = []
    for t in threads:
        rows.append([f"{t['group']}[{t['index']}]"] + [str(t["ops"].get(k, 0)) for k in used]
                    + [str(t.get(k, 0)) for k in extra]
                    + [f"{(t['end_ns'] - t['start_ns']) / 1e6:.2f}", f"{t['cpu_ns'] / 1e6:.2f}"])
    rows.append(["total"] + [str(sum(t["ops"].get(k, 0) for t in threads)) for k in used]
                + [str(sum(t.get(k, 0) for t in threads)) for k in extra] + ["", ""])
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    lines = [f"scenario {result['scenario']!r}, malloc from {result['provider']}"]
    for r in [head] + rows:
        lines.append("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    wall = result["wall_ns"] / 1e9
    ops = total_ops(result)
    rate = ops / wall if wall > 0 else float("inf")
    mem = result.get("memory", {})
    lines.append(f"elapsed {wall * 1000:.2f} ms, {ops} allocator calls, {rate / 1e6:.2f} M ops/s, "
                 f"peak RSS {mem.get('peak_rss_kib', '?')} KiB"
                 + (f" ({mem['baseline_rss_kib']} KiB before the first allocator call)"
                    if "baseline_rss_kib" in mem else ""))
    mapped = result.get("mapped")
    if mapped:
        lines.append(f"the scenario's own mappings: {fmt_bytes(mapped['peak_bytes'])} at most, "
                     f"{fmt_bytes(mapped['final_bytes'])} at the end")
    for t in threads:
        for name, reg in t.get("regions", {}).items():
            if reg["entries"]:
                lines.append(f"region {name!r} in {t['group']}[{t['index']}]: {reg['ns'] / 1e6:.2f} ms "
                             f"over {reg['entries']} entries")
    return "\n".join(lines)
