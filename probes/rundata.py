"""Where a run's probe files live, and finding them again from a result file.

A run whose probes leave files (layout.bin) or draw pictures from the
program's own report (the memory timeline, latency histograms) gets a run
directory next to the result file:

    results/loop-20260101-120000.json
    results/loop-20260101-120000.runs/<allocator>.<probe set>.<params digest>.r<round>/
        report.json     the program's JSON report
        layout.bin      the layout probe's records

The harness keeps the directory of the first successful measured run of each
configuration (enough for the pictures, and layout files are large) and
removes the others once their metrics are stored; a kept run's record names
its directory, relative to the result file, in "run_dir".
"""

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional

from . import PROBES, set_members

REPORT = "report.json"


def wants_run_dir(probe_set: str) -> bool:
    """Probes that leave files or draw from the report need a directory."""
    return any(PROBES[n].files or n in ("memory", "latency") for n in set_members(probe_set))


def run_dir(result_path, allocator: str, probe_set: str, params: Mapping, round_: int) -> Path:
    digest = hashlib.sha256(json.dumps(dict(params), sort_keys=True).encode()).hexdigest()[:8]
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in allocator)
    result_path = Path(result_path)
    base = result_path.with_name(result_path.stem + ".runs")
    return base / f"{safe}.{probe_set}.{digest}.r{round_}"


def keep(directory: Path, report_text: str) -> None:
    """Store the program's report beside the probe files for the pictures."""
    (Path(directory) / REPORT).write_text(report_text)


def discard(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)


@dataclass
class KeptRun:
    allocator: str
    params: Dict[str, object]
    probe_set: str
    directory: Path
    report: Optional[dict]


def kept_runs(result) -> List[KeptRun]:
    """The runs of a result file (resultfile.ResultFile) whose directory was kept."""
    base = Path(result.path).parent
    runs = []
    for record in result.runs:
        if record.status != "ok" or not record.run_dir:
            continue
        directory = base / record.run_dir
        if not directory.is_dir():
            continue
        report = None
        if (directory / REPORT).is_file():
            try:
                report = json.loads((directory / REPORT).read_text())
            except ValueError:
                report = None
        runs.append(KeptRun(record.allocator, dict(record.params), record.probe_set, directory, report))
    return runs
