"""collect_machine() is checked against the real /proc and /etc files, read
here independently of the implementation."""

import json
import os
import platform
import shlex
import shutil
import socket
import stat
import subprocess
import time

import pytest

import scenc
from scenc.system import metadata
from scenc.system.metadata import collect_machine, compiler_version

linux_only = pytest.mark.skipif(not os.path.exists("/proc/cpuinfo"), reason="needs Linux /proc")


@pytest.fixture(scope="module")
def machine():
    return collect_machine()


def test_is_json_ready_and_has_every_key(machine):
    assert json.loads(json.dumps(machine, allow_nan=False)) == machine
    for key in ("hostname", "cpu_model", "logical_cpus", "usable_cpus", "mem_total_kib",
                "arch", "kernel", "os", "python_version", "python_implementation",
                "scenc_version", "libc_version", "transparent_hugepage", "aslr",
                "cpu_governor"):
        assert key in machine
    assert "compiler" not in machine  # only when a compiler is named


def test_hostname_and_versions(machine):
    assert machine["hostname"] == socket.gethostname()
    assert machine["python_version"] == platform.python_version()
    assert machine["scenc_version"] == scenc.__version__
    assert machine["arch"] == os.uname().machine


@linux_only
def test_cpu_model_and_count_match_proc_cpuinfo(machine):
    with open("/proc/cpuinfo") as f:
        lines = f.read().splitlines()
    models = [l.split(":", 1)[1].strip() for l in lines if l.startswith("model name")]
    processors = [l for l in lines if l.split(":")[0].strip() == "processor"]
    if models:
        assert machine["cpu_model"] == models[0]
    else:
        assert machine["cpu_model"]  # some other architecture-specific field
    assert machine["logical_cpus"] == len(processors)
    assert 1 <= machine["usable_cpus"] <= machine["logical_cpus"]


@linux_only
def test_mem_total_matches_proc_meminfo(machine):
    with open("/proc/meminfo") as f:
        (line,) = [l for l in f if l.startswith("MemTotal:")]
    value, unit = line.split()[1:3]
    assert unit == "kB"
    assert machine["mem_total_kib"] == int(value)
    assert machine["mem_total_kib"] > 16 * 1024  # no machine runs this in <16 MiB


@linux_only
def test_kernel_comes_from_uname(machine):
    with open("/proc/sys/kernel/osrelease") as f:
        release = f.read().strip()
    assert release in machine["kernel"]
    assert machine["kernel"].startswith(os.uname().sysname)


def test_os_pretty_name(machine):
    if not os.path.exists("/etc/os-release"):
        pytest.skip("no /etc/os-release")
    with open("/etc/os-release") as f:
        fields = dict(l.split("=", 1) for l in f.read().splitlines() if "=" in l)
    expected = shlex.split(fields["PRETTY_NAME"])[0] if "PRETTY_NAME" in fields else None
    assert machine["os"] == expected


def test_libc_version(machine):
    name, version = platform.libc_ver()
    if name != "glibc":
        pytest.skip("not glibc")
    assert machine["libc_version"] == f"glibc {version}"


@linux_only
def test_kernel_settings_that_affect_allocators(machine):
    thp = "/sys/kernel/mm/transparent_hugepage/enabled"
    if os.path.exists(thp):
        with open(thp) as f:
            text = f.read()
        assert f"[{machine['transparent_hugepage']}]" in text
    with open("/proc/sys/kernel/randomize_va_space") as f:
        assert machine["aslr"] == f.read().strip()


def test_compiler_version_is_first_line_of_cc_version():
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler")
    out = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout
    assert compiler_version(cc) == out.splitlines()[0].strip()
    assert collect_machine(cc=cc)["compiler"] == out.splitlines()[0].strip()


def test_compiler_version_missing_or_failing_is_none(tmp_path):
    assert compiler_version(str(tmp_path / "no-such-cc")) is None
    failing = tmp_path / "failing-cc"
    failing.write_text("#!/bin/sh\necho 'broken 1.0'\nexit 3\n")
    failing.chmod(failing.stat().st_mode | stat.S_IXUSR)
    assert compiler_version(str(failing)) is None
    assert collect_machine(cc=str(tmp_path / "no-such-cc"))["compiler"] is None


def test_never_raises_when_proc_is_unreadable(monkeypatch):
    def unreadable(path):
        raise PermissionError(path)

    monkeypatch.setattr(metadata, "_read_text", unreadable)
    m = collect_machine()
    assert m["cpu_model"] is None or m["cpu_model"] == platform.processor()
    assert m["mem_total_kib"] is None and m["os"] is None and m["aslr"] is None
    assert m["hostname"] == socket.gethostname()  # unaffected probes still work


def test_is_cheap():
    start = time.perf_counter()
    collect_machine()
    assert time.perf_counter() - start < 1.0
