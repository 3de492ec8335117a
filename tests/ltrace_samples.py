"""The four real ltrace logs of tests/fixtures/ltrace-samples (see its README: copied from the
project's shared folder, xz-compressed), as plain files the parser and `scenc` can open.

Each log is decompressed once per test session into a private temporary directory.
"""
import atexit
import functools
import lzma
import shutil
import tempfile
from pathlib import Path

import pytest

SAMPLES_DIR = Path(__file__).resolve().parent / "fixtures" / "ltrace-samples"
NAMES = ("mt_pthread_e.log", "mt_pthread_crashed_e.log", "alloc_mix_znow_x.log", "python_json_e.log")
# conftest.py fails the session when a test skips with this in its reason.
MISSING_DATA = "missing test data:"


def missing_data(what: str) -> None:
    """Skip the calling test because data it needs is not in the checkout (fails the session)."""
    pytest.skip(f"{MISSING_DATA} {what}")


@functools.lru_cache(maxsize=None)
def _unpack_dir() -> Path:
    where = Path(tempfile.mkdtemp(prefix="scenc-ltrace-samples-"))
    atexit.register(shutil.rmtree, where, ignore_errors=True)
    return where


@functools.lru_cache(maxsize=None)
def _unpacked(name: str) -> Path:
    packed = SAMPLES_DIR / f"{name}.xz"
    out = _unpack_dir() / name
    out.write_bytes(lzma.decompress(packed.read_bytes()))
    return out


def sample(name: str) -> Path:
    """The path of the decompressed log `name` (one of NAMES); a missing log skips as missing data."""
    if not (SAMPLES_DIR / f"{name}.xz").is_file():
        missing_data(f"{SAMPLES_DIR / name}.xz is not in the checkout")
    return _unpacked(name)
