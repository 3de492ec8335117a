"""The histogram files beside a fitted model's scenario: one per group, phase and kind of size."""

from pathlib import Path
from typing import Dict, List, Optional

from .collect import hist_totals


class HistogramFiles:
    """Writes `STEM-WHAT[-GROUP][-pN].csv` beside the scenario and remembers them, in the order written.

    The group's name is in the file's name when the model has several groups, the phase's when it has
    several phases."""

    def __init__(self, scn_path: Path, source_name: str, several_groups: bool, several_phases: bool):
        self.scn_path = scn_path
        self.source_name = source_name
        self.several_groups = several_groups
        self.several_phases = several_phases
        self.paths: List[Path] = []

    def file_name(self, what: str, group: str, phase: Optional[int]) -> str:
        parts = [safe_name(self.scn_path.stem), what]
        if self.several_groups:
            parts.append(group)
        if phase is not None and self.several_phases:
            parts.append(f"p{phase}")
        return "-".join(parts) + ".csv"

    def write(self, hist: dict, what: str, label: str, group: str, phase: Optional[int]) -> str:
        """Write hist (bucket -> [count, sum]) as a `histogram(...)` file, each bucket at its mean; its name."""
        name = self.file_name(what, group, phase)
        n, total = hist_totals(hist)
        where = f" in phase {phase}" if phase is not None and self.several_phases else ""
        merged: Dict[int, int] = {}
        for c, s in hist.values():
            v = round(s / c)
            merged[v] = merged.get(v, 0) + c
        rows = ["size,count",
                f"# {label} of {group}{where}, from {self.source_name}: {n} calls, mean {total / n:.1f} bytes",
                "# exact below 1024 bytes; above, 16 classes per power of two, each at its mean"]
        rows += [f"{v},{c}" for v, c in sorted(merged.items())]
        path = self.scn_path.parent / name
        path.write_text("\n".join(rows) + "\n")
        if path not in self.paths:
            self.paths.append(path)
        return name

    def expr(self, hist: dict, what: str, label: str, group: str, phase: Optional[int]) -> str:
        """As write, as the size expression that reads the file."""
        return f'histogram("{self.write(hist, what, label, group, phase)}")'


def safe_name(name: str) -> str:
    """A scenario's (or file's) name made of letters, digits and `-_.` only."""
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name) or "model"
