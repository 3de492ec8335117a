"""`scenc report RESULT --html FILE`: the report as one self-contained HTML page.

The blocks of report/document.py (verdicts with their because: lines, the tables and sentences,
failures, a scenario beside its program, the correction, the warnings, the session and machine),
and the plots of report/plots/charts.py inline as SVG. The page refers to nothing outside itself:
no script, no stylesheet, font or image to fetch (its style is one <style> element, its figures
are <svg> elements), so it can be mailed, attached to a CI run or opened offline.

The SVG matplotlib writes is cleaned for inlining: no XML declaration, DOCTYPE (a URL) or metadata
(RDF with URLs), no namespace declarations (HTML gives <svg> its namespace; `xlink:href` becomes
SVG 2's `href`), and every id prefixed per figure so that two figures' ids cannot collide.
"""

import html
import os
import re
import tempfile
from typing import List, Sequence, Tuple

from .document import Heading, Items, Para, Pre, Table, build

__all__ = ["html_report", "inline_svg", "render"]

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 72em;
       padding: 0 1em; color: #1b1b1b; line-height: 1.45; }
h1 { font-size: 1.6em; } h2 { font-size: 1.3em; border-bottom: 1px solid #ddd; margin-top: 2em; }
h3 { font-size: 1.05em; margin-bottom: 0.3em; }
table { border-collapse: collapse; margin: 0.4em 0; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.n, th.n { text-align: right; }
ul { margin: 0.3em 0; } li { margin: 0.15em 0; }
ul.verdicts > li { font-weight: 600; } ul.verdicts ul li { font-weight: normal; color: #333; }
pre { background: #f6f6f6; padding: 0.6em; overflow-x: auto; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; }
figcaption { font-size: 0.85em; color: #555; }
"""


def _esc(text: str) -> str:
    return html.escape(str(text), quote=True)


def _table(block: Table) -> str:
    header, *rows = block.rows
    cls = lambda i: ' class="n"' if block.right[i] else ""  # noqa: E731
    head = "".join(f"<th{cls(i)}>{_esc(c)}</th>" for i, c in enumerate(header))
    body = "".join("<tr>" + "".join(f"<td{cls(i)}>{_esc(c)}</td>" for i, c in enumerate(r)) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _items(block: Items, css: str = "") -> str:
    out = []
    for text, subs in block.items:
        inner = "".join(f"<li>{_esc(s)}</li>" for s in subs)
        out.append(f"<li>{_esc(text)}{f'<ul>{inner}</ul>' if inner else ''}</li>")
    attribute = f' class="{css}"' if css else ""
    return f"<ul{attribute}>{''.join(out)}</ul>"


def render(blocks: Sequence) -> List[str]:
    out, previous = [], None
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"<h{block.level}>{_esc(block.text)}</h{block.level}>")
        elif isinstance(block, Para):
            out.append(f"<p>{_esc(block.text)}</p>")
        elif isinstance(block, Table):
            out.append(_table(block))
        elif isinstance(block, Items):
            verdicts = isinstance(previous, Heading) and previous.text == "Verdicts"
            out.append(_items(block, "verdicts" if verdicts else ""))
        elif isinstance(block, Pre):
            out.append(f"<pre>{_esc(block.text)}</pre>")
        else:
            raise TypeError(f"no HTML for {block!r}")
        previous = block
    return out


# ------------------------------------------------------------------ the plots, inline

_DROP = [re.compile(p, re.S) for p in (r"<\?xml.*?\?>", r"<!DOCTYPE.*?>", r"<metadata>.*?</metadata>",
                                        r'\s+xmlns(:\w+)?="[^"]*"')]


def inline_svg(svg: str, prefix: str) -> str:
    """matplotlib's SVG as an element of an HTML page: nothing that names a URL, ids made unique."""
    for pattern in _DROP:
        svg = pattern.sub("", svg)
    svg = svg.replace("xlink:href=", "href=")
    svg = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}-{m.group(1)}"', svg)
    svg = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}-{m.group(1)}"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}-{m.group(1)})", svg)
    return svg.strip()


def _figures(analysis, all_metrics: bool, metrics, across_machines: bool) -> List[Tuple[str, str]]:
    """(caption, inline SVG) of every plot `scenc report --plots` draws from the analysis."""
    from .plots.charts import write_plots       # matplotlib loads only for a page
    with tempfile.TemporaryDirectory(prefix="scenc-page-") as tmp:
        paths = write_plots(analysis, tmp, all_metrics=all_metrics, metrics=metrics,
                            across_machines=across_machines)
        svgs = [p for p in paths if p.endswith(".svg")]
        figures = []
        for i, path in enumerate(svgs):
            with open(path, encoding="utf-8") as f:
                figures.append((os.path.basename(path)[:-4], inline_svg(f.read(), f"fig{i + 1}")))
    return figures


def html_report(analysis, metrics: Sequence[str], all_metrics: bool = False, only=None,
                across_machines: bool = False) -> str:
    """The page for `metrics` (judged: document.chosen_metrics); the plots as `--plots` would draw them
    for `all_metrics` and `only` (--all-metrics, --metric)."""
    blocks = build(analysis, metrics)
    session = next((i for i, b in enumerate(blocks) if isinstance(b, Heading) and b.level == 2
                    and b.text == "Session and machine"), len(blocks))
    body = render(blocks[:session])
    figures = _figures(analysis, all_metrics, only, across_machines) if analysis.cells else []
    if figures:
        body.append("<h2>Plots</h2>")
        body += [f'<figure>{svg}<figcaption>{_esc(caption)}</figcaption></figure>' for caption, svg in figures]
    body += render(blocks[session:])
    title = blocks[0].text if blocks and isinstance(blocks[0], Heading) else "scenc report"
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{_esc(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n<main>\n"
            + "\n".join(body) + "\n</main>\n</body>\n</html>\n")
