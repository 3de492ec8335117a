"""What the tests of a real program after `--` share: the threaded test program, built once a module."""

import subprocess
from pathlib import Path

import pytest

from locations import TESTS


@pytest.fixture(scope="module")
def threaded(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("prog") / "threaded_alloc"
    subprocess.run(["gcc", "-O2", "-pthread", "-Wall", "-Wextra", "-Werror", "-o", str(out),
                    str(TESTS / "fixtures" / "threaded_alloc.c")], check=True)
    return out
