"""Seed scenarios for mutation: the shipped examples and the language sketch's code blocks."""

import re
from pathlib import Path
from typing import Dict

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
# The product owner's language sketch, copied from the project's shared folder.
SKETCH = ROOT / "tests" / "fixtures" / "LANGUAGE-SKETCH.md"


def example_seeds() -> Dict[str, str]:
    return {p.name: p.read_text() for p in sorted(EXAMPLES.glob("*.scn"))}


def sketch_seeds() -> Dict[str, str]:
    blocks = re.findall(r"```\n(.*?)```", SKETCH.read_text(), re.S)
    return {f"sketch-{i}": b for i, b in enumerate(blocks) if "=" in b or "thread" in b}


def all_seeds() -> Dict[str, str]:
    seeds = example_seeds()
    seeds.update(sketch_seeds())
    return seeds


def example_data_files() -> Dict[str, bytes]:
    """Files the examples name (histogram CSVs), to copy next to their mutants."""
    return {p.name: p.read_bytes() for p in EXAMPLES.glob("*.csv")}
