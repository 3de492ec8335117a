"""`scenc report RESULT --markdown FILE`: the report as GitHub-flavoured markdown.

One section per param set (its verdicts with their because: lines, then one table per metric with
the sentences under it), the scenario beside its program, the correction line, the warnings, and the
session and machine: report/document.py's blocks, written as markdown.
"""

import re
from typing import Sequence

from .document import Heading, Items, Para, Pre, Table, build

__all__ = ["render", "markdown_report"]

# Characters markdown may read as markup anywhere; "_" only where it can open or close emphasis (at
# a word's edge: GitHub reads snake_case as it is), "#" only where it opens a heading.
_SPECIAL = re.compile(r"([\\`*\[\]<>|]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|^#)")


def _text(text: str) -> str:
    """Plain text that markdown shows as it is: its special characters escaped."""
    return _SPECIAL.sub(r"\\\1", text)


def _table(block: Table) -> list:
    header, *rows = block.rows
    line = lambda cells: "| " + " | ".join(_text(c) for c in cells) + " |"  # noqa: E731
    rule = "|" + "|".join("---:" if r else ":---" for r in block.right) + "|"
    return [line(header), rule] + [line(r) for r in rows]


def render(blocks: Sequence) -> str:
    out = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"{'#' * block.level} {_text(block.text)}")
        elif isinstance(block, Para):
            out.append(_text(block.text))
        elif isinstance(block, Table):
            out.append("\n".join(_table(block)))
        elif isinstance(block, Items):
            out.append("\n".join(f"- {_text(text)}" + "".join(f"\n  - {_text(s)}" for s in subs)
                                 for text, subs in block.items))
        elif isinstance(block, Pre):
            out.append(f"```\n{block.text}\n```")
        else:
            raise TypeError(f"no markdown for {block!r}")
    return "\n\n".join(out) + "\n"


def markdown_report(analysis, metrics: Sequence[str]) -> str:
    """The whole report for `metrics` (judged: document.chosen_metrics)."""
    return render(build(analysis, metrics))
