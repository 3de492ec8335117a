"""A fitted model stands in for its program's image (issue 27): the code and files resident at the program's end.

A model maps no file, so its RSS lacked what the program's was partly made of: node's code and libraries, 40 of its
118 MB. The tracer reads the process's file-backed resident memory (RssFile) at its end mark; `convert --model`
maps that much, less a model's own, anonymously and written whole. Real tracer, real /proc, real runs:
file_image.c maps and reads a 16 MiB file beside a 1 MiB heap. Logs of older tracers, and ltrace captures,
record no such figure: unknown, said so, and no stand-in.
"""

import json
import os
import subprocess
import sys

import pytest

from scenc.compiler.pipeline import build
from scenc.trace.capture.preload import capture_preload
from scenc.trace.model import measure_peak, write_model
from scenc.trace.model.image import MODEL_IMAGE_KIB, ProgramImage, image_of
from scenc.trace.source import TraceSource
from scenc.trace.tracerlog import parse_preload_log

from locations import FIXTURES

SCENC = os.path.join(os.path.dirname(sys.executable), "scenc")
FILE_KIB = 16 * 1024


def run_scenc(*args, status=0):
    proc = subprocess.run([SCENC, *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == status, proc.stdout + proc.stderr
    return proc.stdout


def program_peak_rss_kib(argv):
    """The program's peak RSS as it reads it itself (VmHWM), as the model's report does."""
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


@pytest.mark.slow
def test_a_program_mapping_a_file_has_its_image_in_its_model(tmp_path):
    exe, data = tmp_path / "file_image", tmp_path / "data"
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(FIXTURES / "model" / "file_image.c")],
                   check=True, capture_output=True)
    data.write_bytes(os.urandom(FILE_KIB * 1024))
    trace = tmp_path / "image.trace"
    assert capture_preload([str(exe), str(data)], trace).ok
    info = parse_preload_log(trace).info
    # the file's pages were read through the mapping, which stayed to the end: all of them resident from the file
    assert FILE_KIB <= info.file_resident_kib < FILE_KIB + 64 * 1024, info.file_resident_kib
    stats = json.loads(run_scenc("trace-stats", "--json", str(trace)))
    assert stats["preload"]["file_resident_kib"] == info.file_resident_kib
    assert f"image at the end: {info.file_resident_kib} KiB resident from files" in run_scenc("trace-stats", str(trace))

    source = TraceSource(trace, extra_events=True)
    image = image_of(source)
    result = write_model(source.events, tmp_path / "model.scn", source_name=trace.name, image=image)
    measure_peak(result)
    standin = (info.file_resident_kib - MODEL_IMAGE_KIB) * 1024 // 4096 * 4096
    assert f"map({standin}, percent_written = 100) lives forever" in result.text
    assert "#   image      the program's code and files, " in result.text and "stood in by an anonymous mapping" \
        in result.text
    # the stand-in is not one of the program's own mappings (the capture has none): no mapping row in the header
    assert not any(row[0] == "mapped bytes, peak" for row in result.figures)

    binary = build(tmp_path / "model.scn").binary
    report = json.loads(subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout)
    model_kib = report["memory"]["peak_rss_kib"]
    program_kib = program_peak_rss_kib([str(exe), str(data)])
    # under glibc, both: the program's 16 MiB of file pages are the model's anonymous ones (without: about 0.2x)
    assert 0.75 <= model_kib / program_kib <= 1.33, (model_kib, program_kib)

    left_out = write_model(TraceSource(trace, extra_events=True).events, tmp_path / "heap.scn",
                           source_name=trace.name, image=image_of(source, left_out=True))
    assert "percent_written = 100) lives forever" not in left_out.text
    assert "left out (--no-image" in left_out.text


def test_a_log_of_an_older_tracer_has_no_image_and_its_model_says_unknown(tmp_path):
    trace = FIXTURES / "trace" / "own_maps.trace"      # written before the tracer read RssFile: the field was 0
    info = parse_preload_log(trace).info
    assert info.ended and info.file_resident_kib is None
    assert "image at the end: unknown (the tracer that wrote this log did not record it)" in \
        run_scenc("trace-stats", str(trace))
    assert json.loads(run_scenc("trace-stats", "--json", str(trace)))["preload"]["file_resident_kib"] is None
    image = image_of(TraceSource(trace, extra_events=True))
    assert image.program_kib is None and image.standin_bytes == 0
    assert image.header_line() == "unknown (the tracer that wrote this log did not record it)"


def test_an_ltrace_capture_records_no_image(tmp_path):
    out = tmp_path / "m.scn"
    run_scenc("convert", "--model", "--no-measure", str(FIXTURES / "model" / "startup_teardown_e.log"), "-o", str(out))
    text = out.read_text()
    assert "#   image      unknown (an ltrace capture records none)" in text
    assert "percent_written = 100) lives forever" not in text


def test_the_stand_in_is_the_image_less_a_models_own_in_whole_pages():
    assert ProgramImage(MODEL_IMAGE_KIB + 10).standin_bytes == 8192
    assert ProgramImage(MODEL_IMAGE_KIB - 100).standin_bytes == 0
    assert "no stand-in" in ProgramImage(MODEL_IMAGE_KIB - 100).header_line()
    assert ProgramImage(40000, left_out=True).standin_bytes == 0
    assert ProgramImage(40000).header_line() == ("the program's code and files, 39.1 MiB resident at its end, stood "
                                                 "in by an anonymous mapping of 37.1 MiB")
