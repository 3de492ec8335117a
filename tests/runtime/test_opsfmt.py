"""The ops file's encoding (version 4): the C encoder and decoder (runtime/opsfmt.h) and the Python
writer and reader (trace/opsfile.py) agree byte for byte on every op kind and flag, and round-trip
every field at its limits; a real capture's ops file is small and reads back as converted.

The C side runs through tests/fixtures/ops/ops_roundtrip.c, built with gcc and clang under
-Wall -Wextra -Werror."""

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from ops_reference import encode_ops, write_ops
from scenc.trace.opsfile import (KINDS, LAST_PIECE, NONE, OP, SYNC, THREAD_KINDS, WAIT, WAIT_OLD,
                                 WRITABLE, OpsFileError, decode_ops, read_ops)
from scenc.trace.replay import write_replay
from locations import REPO

ROOT = REPO
DRIVER = ROOT / "tests" / "fixtures" / "ops" / "ops_roundtrip.c"
PROGRAMS = ROOT / "bench" / "programs"
FLAGS = (WAIT, WAIT_OLD, LAST_PIECE, WRITABLE, SYNC)
U32, U64, STEP = (1 << 32) - 1, (1 << 64) - 1, (1 << 48) - 1


def canonical(kind, flags, slot, aux, gen, aux_gen, size, step=0):
    """An op as a record, with what the encoding leaves out zeroed: a generation when the op does not wait
    for it, the step when it does not SYNC."""
    gen = gen if flags & WAIT else 0
    aux_gen = aux_gen if flags & WAIT_OLD else 0
    step = step if flags & SYNC else 0
    return (kind, flags, step >> 32, slot, aux, gen, aux_gen, step & 0xFFFFFFFF, size)


def every_op():
    """Every kind with every flag alone and all together, and fields at their limits; then random ones."""
    ops = []
    edges = [(0, NONE, 0, 0, 0, 1), (NONE, NONE, 7, 9, 1, 1), (U32 - 1, 0, U32, U32, U64, STEP),
             (5, U32 - 1, 1, 2, 1 << 40, 1), (0, 3, 0, 0, 127, 128), (3, 0, 128, 16383, 16384, 1 << 32)]
    for kind in range(len(KINDS)):
        for flags in (0, *FLAGS, sum(FLAGS)):
            for slot, aux, gen, aux_gen, size, step in edges:
                ops.append(canonical(kind, flags, slot, aux, gen, aux_gen, size, step))
    rng = random.Random(11)
    slot = 1000
    for _ in range(3000):          # slot deltas both ways, small and large
        slot = (slot + rng.choice((1, -1, 0, 2, -3, 70, -200, 1 << 20, -(1 << 31), 1 << 31))) & U32
        if slot == NONE:
            slot = 0
        flags = sum(f for f in FLAGS if rng.random() < 0.2)
        aux = rng.choice((NONE, 0, 16, 4096, rng.randrange(U32)))
        ops.append(canonical(rng.randrange(len(KINDS)), flags, slot, aux, rng.randrange(1 << rng.randrange(1, 33)),
                             rng.randrange(1 << 20), rng.randrange(1 << rng.randrange(1, 65)),
                             rng.randrange(1, STEP + 1)))
    return ops


@pytest.fixture(scope="module", params=["gcc", "clang"])
def driver(request, tmp_path_factory):
    if shutil.which(request.param) is None:
        pytest.skip(f"{request.param} not installed")
    out = tmp_path_factory.mktemp("ops") / f"roundtrip-{request.param}"
    subprocess.run([request.param, "-O2", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "runtime"),
                    "-o", str(out), str(DRIVER)], check=True, capture_output=True)
    return out


def run_driver(driver, tmp_path, ops):
    enc, dec = tmp_path / "enc", tmp_path / "dec"
    subprocess.run([str(driver), str(enc), str(dec)], input=b"".join(OP.pack(*op) for op in ops), check=True,
                   timeout=60)
    data = dec.read_bytes()
    return enc.read_bytes(), [OP.unpack_from(data, i) for i in range(0, len(data), OP.size)]


@pytest.mark.slow
def test_c_and_python_encode_every_op_alike_and_decode_it_back(driver, tmp_path):
    ops = every_op()
    c_bytes, c_back = run_driver(driver, tmp_path, ops)
    py_bytes = bytearray()
    encode_ops(b"".join(OP.pack(*op) for op in ops), py_bytes, 0)
    assert c_bytes == bytes(py_bytes)
    assert c_back == ops
    # Each op takes what its fields need: a malloc(24) into the next slot is 3 bytes, a free 2.
    one = bytearray()
    encode_ops(OP.pack(0, 0, 0, 1, NONE, 0, 0, 0, 24) + OP.pack(3, 0, 0, 1, NONE, 0, 0, 0, 0), one, 0)
    assert len(one) == 5


@pytest.mark.sanitizers
@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_the_c_codec_runs_clean_under_address_and_undefined_behaviour_sanitizers(cc, tmp_path):
    if shutil.which(cc) is None:
        pytest.skip(f"{cc} not installed")
    driver = tmp_path / "roundtrip"
    subprocess.run([cc, "-O1", "-g", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=undefined", "-I", str(ROOT / "runtime"), "-o", str(driver), str(DRIVER)],
                   check=True, capture_output=True)
    ops = every_op()
    assert run_driver(driver, tmp_path, ops)[1] == ops


def test_python_reader_gives_back_every_field_of_a_waiting_op():
    """Ops that wait carry their generations: the reader returns every field as written."""
    ops = [op for op in every_op() if op[1] & WAIT and op[1] & WAIT_OLD and op[0] not in THREAD_KINDS]
    data = bytearray()
    encode_ops(b"".join(OP.pack(*op) for op in ops), data, 0)
    back = decode_ops(bytes(data), 0, len(data))
    assert [(KINDS.index(b[0]),) + b[1:] for b in back] == ops


def test_generations_left_out_come_back_from_the_threads_own_slot_history(tmp_path):
    """A malloc, realloc, free, map, unmap chain of one thread without waits, then ops on slots another
    thread left (WAIT, WAIT_OLD): read_ops gives every generation back."""
    thread = [("malloc", 0, 0, 0, NONE, 0, 0, 0, 24), ("free", 0, 0, 0, NONE, 0, 0, 0, 0),
              ("malloc", 0, 0, 0, NONE, 1, 0, 0, 32), ("realloc", 0, 0, 1, 0, 0, 1, 0, 64),
              ("malloc", 0, 0, 0, NONE, 2, 0, 0, 8), ("realloc", WAIT | WAIT_OLD, 0, 2, 1, 5, 0, 0, 100),
              ("free", WAIT, 0, 3, NONE, 9, 0, 0, 0), ("malloc", 0, 0, 3, NONE, 10, 0, 0, 1),
              ("map", WRITABLE, 0, 4, NONE, 0, 0, 0, 8192), ("unmap", 0, 0, 4, 1, 0, 0, 0, 4096),
              ("unmap", LAST_PIECE, 0, 4, 0, 0, 0, 0, 4096), ("remap", WAIT_OLD, 0, 5, 2, 0, 3, 0, 4096),
              ("free", SYNC, 1, 5, NONE, 0, 0, 7, 0), ("free", 0, 0, 0, NONE, 2, 0, 0, 0),
              ("exit", 0, 0, NONE, 0, 0, 0, 0, 0)]
    other = [("spawn", SYNC, 0, 0, 0, 0, 0, 3, 12), ("join", 0, 0, 0, NONE, 0, 0, 0, 0)]
    write_ops(tmp_path / "x.ops", [thread, other], [1, 2], "pages", 64)
    slots, back = read_ops(tmp_path / "x.ops")
    assert slots == 6 and back == [thread, other]


def test_a_truncated_or_padded_ops_file_is_refused(tmp_path):
    write_ops(tmp_path / "x.ops", [[("malloc", 0, 0, 0, NONE, 0, 0, 0, 1 << 40)]])
    data = (tmp_path / "x.ops").read_bytes()
    for damaged in (data[:-1], data + b"\0"):
        (tmp_path / "y.ops").write_bytes(damaged)
        with pytest.raises(OpsFileError, match="truncated or damaged"):
            read_ops(tmp_path / "y.ops")


@pytest.mark.slow
def test_a_real_capture_takes_few_bytes_an_op_and_reads_back_as_converted(tmp_path):
    """alloc_heavy (one thread: malloc, realloc, free) and prodcons (five threads, nearly every op waits
    for another thread): well under 12 bytes an op (32 in version 3), and read_ops gives back every op the
    converter (runtime/tools/convert.c, with opsfmt.h's encoder) reported. That the generations come back as the
    converter meant them is checked against the version 3 files of the Python converter in
    tests/test_trace_converter.py."""
    from scenc.trace.opsfile import iter_counts
    from scenc.trace.capture.preload import capture_preload
    for name, args in (("alloc_heavy", ["20000"]), ("prodcons", ["2", "5000"])):
        program = tmp_path / name
        subprocess.run(["gcc", "-O2", "-pthread", "-o", str(program), str(PROGRAMS / f"{name}.c")], check=True)
        trace = tmp_path / f"{name}.trace"
        assert capture_preload([str(program), *args], trace).ok
        report = write_replay(trace, tmp_path / f"{name}.scn", name)
        ops = tmp_path / f"{name}.ops"
        _, threads = read_ops(ops)
        assert list(iter_counts(ops)) == report.counts
        total = sum(map(len, threads))
        assert total >= report.calls > 10000
        assert ops.stat().st_size / total < 12, (name, ops.stat().st_size / total)