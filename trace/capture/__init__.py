"""Capturing a program's allocator calls: with ltrace (ltrace.py) or the LD_PRELOAD tracer (preload.py)."""

from typing import Sequence

from ...system.process import ProgramNotFound, locate_program


class CaptureError(RuntimeError):
    """The program cannot be traced at all (not found, statically linked, ltrace missing ...)."""


def locate(argv: Sequence[str], cwd) -> tuple:
    """locate_program's (path as given or found, the file it leads to), as a CaptureError when there is none."""
    try:
        return locate_program(argv, cwd)
    except ProgramNotFound as exc:
        raise CaptureError(str(exc)) from None
