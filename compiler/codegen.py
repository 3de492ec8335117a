"""Lowered program to C source text through the jinja2 templates."""

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, Tuple

from .. import __version__

# jinja2 and the lowering are imported by the functions that use them: ProbeC
# is all a probe list (probes.c_parts) needs, and `scenc run` builds that list
# even when every program comes from the build cache.

TEMPLATES = Path(__file__).with_name("templates")


@dataclass(frozen=True)
class ProbeC:
    """The C side of a probe as the templates see it."""
    name: str                 # C identifier part: scn_probe_<name>_<hook>
    header: str               # file in probes/ that defines the hooks
    hooks: Tuple[str, ...]    # which of op_before, op_after, region_begin, region_end,
                              # thread_start, thread_end, program_start, program_end,
                              # report it defines
    reads_sizes: bool = False  # its hooks read objects' sizes: pool slots must keep them


@functools.lru_cache(maxsize=None)
def _env() -> "jinja2.Environment":  # noqa: F821
    import jinja2
    from .lower import c_string
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             autoescape=False)
    env.filters["c_string"] = c_string
    return env


def render(program: "CProgram", probes: Sequence[ProbeC] = ()) -> str:  # noqa: F821
    from .lower import c_string
    source_comment = Path(program.source_file).name.replace("*/", "* /")
    return _env().get_template("program.c.j2").render(
        p=program, probes=list(probes), probe_headers=[pr.header for pr in probes],
        version=__version__, source_comment=c_string(source_comment)[1:-1])
