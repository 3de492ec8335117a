"""A report as plain blocks (headings, paragraphs, tables, lists, preformatted text) for the markdown
(report/markdown.py) and HTML (report/page.py) renderers.

The content is the terminal report's (report/tables.py), made of the same pieces: each param set's
verdicts with their because: lines, one table per metric with the sentences under it, the failures,
a scenario beside its program, the correction line, the warnings; then the session and the machine.
Nothing here judges anything: the analysis has done that, for the metrics shown.
"""

from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

from . import sidebyside
from .advice import advice_lines
from .because import family_note
from .tables import (SERVER_NOTE, _cell_title, _failure_lines, _serves, family_line, format_side_by_side,
                     format_value, metric_rows, shown_metrics)

__all__ = ["Heading", "Para", "Table", "Items", "Pre", "build", "chosen_metrics", "MACHINE_FACTS"]


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Para:
    text: str


@dataclass(frozen=True)
class Table:
    rows: List[List[str]]           # the header first
    right: List[bool]               # which columns align right (numbers)


@dataclass(frozen=True)
class Items:
    items: List[Tuple[str, List[str]]] = field(default_factory=list)   # (text, sub-items)


@dataclass(frozen=True)
class Pre:
    text: str


# The machine's facts a page shows, in this order (the result file's `machine`; docs/results.md).
MACHINE_FACTS = (("hostname", "host"), ("cpu_model", "CPU"), ("logical_cpus", "logical CPUs"),
                 ("usable_cpus", "usable CPUs"), ("mem_total_kib", "memory (KiB)"), ("arch", "architecture"),
                 ("kernel", "kernel"), ("os", "OS"), ("libc_version", "C library"), ("compiler", "C compiler"),
                 ("transparent_hugepage", "transparent huge pages"), ("aslr", "ASLR"),
                 ("cpu_governor", "CPU governor"), ("load_average", "load average at the start"),
                 ("python_version", "Python"), ("scenc_version", "scenc"))


def chosen_metrics(analysis, all_metrics: bool = False, metrics: Optional[Sequence[str]] = None) -> List[str]:
    """The metrics the terminal report would show, judged as its family (as tables.format_analysis does)."""
    chosen = shown_metrics(analysis, all_metrics, metrics)
    if list(chosen) != analysis.judged:
        analysis.judge(list(chosen))
    return list(chosen)


def _title(analysis, cell) -> str:
    return _cell_title(analysis, cell).strip("= ").strip()


def _cell(analysis, cell, metrics) -> list:
    blocks = [Heading(2, _title(analysis, cell))]
    counts = sorted({a.n for a in cell.allocators})
    n_text = (f"{counts[0]} runs per allocator" if len(counts) == 1 else
              f"{counts[0]} to {counts[-1]} runs per allocator") if counts else "no runs"
    blocks.append(Para(f"{n_text}; * = baseline ({cell.baseline}); 95% confidence"
                       + (f" ({SERVER_NOTE})" if _serves(analysis, cell) else "")))
    verdicts = [(v.sentence(), [line.strip() for line in cell.because_lines(v)])
                for m in metrics for v in (cell.verdicts.get(m), cell.last.get(m)) if v]
    if verdicts:
        blocks += [Heading(3, "Verdicts"), Items(verdicts)]
    for metric in metrics:
        found = metric_rows(cell, metric)
        if found is None:
            continue
        title, rows, right = found
        blocks += [Heading(3, title), Table(rows, right)]
        sentences = [s for s in (cell.comparison_sentence(metric, a.name) for a in cell.allocators) if s]
        if sentences:
            blocks.append(Items([(s, []) for s in sentences]))
    failures = _failure_lines(cell)
    if failures:
        blocks += [Heading(3, "Problems"), Items(_nested(failures))]
    return blocks


def _nested(lines: Sequence[str]) -> List[Tuple[str, List[str]]]:
    """Indented text lines as items: a line indented deeper than the first belongs to the item above."""
    items: List[Tuple[str, List[str]]] = []
    depth = min((len(line) - len(line.lstrip()) for line in lines), default=0)
    for line in lines:
        if items and len(line) - len(line.lstrip()) > depth:
            items[-1][1].append(line.strip())
        else:
            items.append((line.strip(), []))
    return items


def _session(analysis) -> list:
    header = analysis.header
    machine = header.get("machine") or {}
    rows = [["machine", ""]]
    rows += [[label, _fact(machine.get(key))] for key, label in MACHINE_FACTS if machine.get(key) is not None]
    blocks = [Heading(2, "Session and machine"),
              Para(f"result file {analysis.path}; created {header.get('created', '?')}; "
                   f"status {analysis.file_status or '?'}; command: {' '.join(map(str, header.get('command') or []))}"),
              Table(rows, [False, False])]
    allocators = header.get("allocators") or {}
    if allocators:
        table = [["allocator", "library", "version", "env"]]
        for name, a in allocators.items():
            env = " ".join(f"{k}={v}" for k, v in (a.get("env") or {}).items())
            table.append([name, a.get("path") or "(the system's malloc)", str(a.get("version") or "?"), env])
        blocks.append(Table(table, [False] * 4))
    if analysis.machines:
        blocks.append(Items([(f"{m}: {_fact(d.get('hostname'))}, {_fact(d.get('cpu_model'))}", [])
                             for m, d in analysis.machines.items()]))
    return blocks


def _fact(value) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    return str(value)


def build(analysis, metrics: Sequence[str]) -> list:
    """The report's blocks for `metrics` (judged already: see chosen_metrics)."""
    blocks: list = [Heading(1, f"{analysis.scenario}: allocators compared")]
    if not analysis.cells:
        return blocks + [Para(f"no runs in {analysis.path}")]
    for cell in analysis.cells:
        blocks += _cell(analysis, cell, metrics)
    pairs = list(sidebyside.pairs(analysis))
    if pairs:
        blocks.append(Heading(2, "The scenario beside its program"))
        blocks += [Pre(format_side_by_side(analysis, s, p)) for s, p in pairs]
    blocks.append(Heading(2, "Claims"))
    if analysis.machines:
        blocks.append(Para(f"These cells ran on {len(analysis.machines)} machines; each cell's figures "
                           f"compare allocators on one machine only: do not compare cells of different machines."))
    blocks.append(Para(family_line(analysis.family)))
    if analysis.because_size:
        blocks.append(Para(family_note(analysis.family.method, analysis.because_size)))
    status = analysis.file_status
    if status and status != "complete":
        blocks.append(Para(f"(result file status: {status}; statistics cover the runs finished so far)"))
    warnings = advice_lines(analysis, metrics, format_value)
    if warnings:
        blocks += [Heading(2, "Warnings"), Items(_nested(warnings[1:]))]
    return blocks + _session(analysis)
