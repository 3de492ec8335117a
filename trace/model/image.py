"""The program's image in a fitted model: its code and files resident at its end, stood in by an anonymous mapping.

A program's peak RSS holds its code, its libraries and the files it mapped (file-backed pages, RssFile) beside its
heap; a model maps no file, so without a stand-in its RSS lacks them (node: 40 of its 118 MB). The preload tracer
reads RssFile at the end mark (runtime/tracer/tracelog.h, scn_tl_end_file_kib); the model maps that much, less what
a model's own binary, libc and runtime hold resident (MODEL_IMAGE_KIB), once, written whole, at its start, never
unmapped. The mapping is the same under every allocator: it moves the model's RSS, not an allocator's difference.
"""

from dataclasses import dataclass
from typing import Optional

from ..events import PAGE

# A model's own file-backed resident memory at its end, under the preload tracer (as the program's figure is
# taken): `scenc capture -- MODEL` of a built model, `scenc trace-stats` of it (image at the end), x86-64
# glibc 2.36: 2048-2080 KiB over three runs (its binary, libc, ld.so and the tracer's library).
MODEL_IMAGE_KIB = 2048

NONE_RECORDED = {
    "ltrace": "an ltrace capture records none",
    "workload": "a workload records none",
    "mtrace": "an mtrace log records none",
}


@dataclass(frozen=True)
class ProgramImage:
    """What a capture says of the program's image, and what the model maps for it."""
    program_kib: Optional[int] = None    # file-backed KiB resident at the program's end; None: unknown
    why_unknown: str = ""                # when unknown, why (in words)
    left_out: bool = False               # convert --no-image: the heap and the program's own mappings only

    @property
    def standin_bytes(self) -> int:
        """The stand-in mapping's bytes (whole pages): the program's image less a model's own; 0: none."""
        if self.left_out or not self.program_kib:
            return 0
        return max(0, self.program_kib - MODEL_IMAGE_KIB) * 1024 // PAGE * PAGE

    def header_line(self) -> str:
        """The header's own line (after `image:`)."""
        if self.program_kib is None:
            return f"unknown ({self.why_unknown})"
        program = f"the program's code and files, {_mib(self.program_kib * 1024)} resident at its end"
        if self.left_out:
            return f"{program}, left out (--no-image: the heap and the program's own mappings only)"
        if not self.standin_bytes:
            return f"{program}, no more than a model's own ({_mib(MODEL_IMAGE_KIB * 1024)}): no stand-in"
        return f"{program}, stood in by an anonymous mapping of {_mib(self.standin_bytes)}"

    def kept_dropped(self) -> str:
        """The header's kept/dropped line on the image."""
        if self.program_kib is None:
            return (f"image: unknown ({self.why_unknown}): the model's RSS holds its heap and mappings only, "
                    f"not the program's code and files")
        if self.left_out or not self.standin_bytes:
            return f"image: {self.header_line()}"
        return (f"image: kept: the program's file-backed resident memory at its end ({_mib(self.program_kib * 1024)}: "
                f"its code, libraries and files mapped), less a model's own ({_mib(MODEL_IMAGE_KIB * 1024)}: its "
                f"binary, libc and runtime), as one anonymous mapping of {_mib(self.standin_bytes)} made at the "
                f"start, written whole and never unmapped (not counted among the program's own mappings; its writing takes "
                f"a page fault a page, more time than the program's file pages cost it); dropped: when its pages were "
                f"read in, which of them other processes share, and file pages the kernel dropped before the end "
                f"(convert --no-image leaves the stand-in out)")


def image_of(source, left_out: bool = False) -> ProgramImage:
    """The image a capture (trace/source.py's TraceSource, a tracer log indexed) records."""
    if source.format != "preload":
        return ProgramImage(None, NONE_RECORDED.get(source.format, "the capture records none"), left_out)
    info = source.events.info
    if info.file_resident_kib:
        return ProgramImage(info.file_resident_kib, "", left_out)
    return ProgramImage(None, unrecorded_why(info), left_out)


def unrecorded_why(info) -> str:
    """Why a tracer log (its TraceInfo) gives no image: `scenc trace-stats` says the same words."""
    return "the tracer log has no end mark: the program was killed" if not info.ended else \
        "the tracer that wrote this log did not record it"


def _mib(nbytes: int) -> str:
    return f"{nbytes / (1 << 20):.1f} MiB"
