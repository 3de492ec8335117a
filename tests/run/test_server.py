"""`scenc run --server 'CMD' --ready ... -- CLIENT`: a server under each allocator, its client under none.

Real parts: a C server written for these tests (tests/fixtures/alloc_server.c, compiled here: it mallocs
per request), a Python client (tests/fixtures/alloc_client.py, which prints its own LD_PRELOAD and its
requests per second), real allocators preloaded, real sockets on 127.0.0.1 at ports the kernel picks, /proc
to find the server after Ctrl-C. Nothing asserts that one allocator is faster than another.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scenc.run.program.server import Readiness, ServerSpec, ServerSpecError, parse_signal
from scenc.run.program.target import ProgramError, ProgramTarget
from harness_support import measured, read_lines, scenc, start_scenc
from locations import TESTS

FIXTURES = TESTS / "fixtures"
CLIENT = FIXTURES / "alloc_client.py"
METRIC = ("--metric", r"requests/s: ([0-9.]+)", "--higher-is-better")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("server") / "alloc_server"
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(out), str(FIXTURES / "alloc_server.c")],
                   check=True)
    return out


def client(port, count=300, size=4000):
    return [sys.executable, CLIENT, port, count, size]


# --------------------------------------------------------------------------- the options, alone
def test_readiness_forms_and_their_mistakes():
    assert Readiness.parse("tcp:6379") == Readiness("tcp", port=6379)
    assert Readiness.parse("tcp:localhost:7000") == Readiness("tcp", host="localhost", port=7000)
    assert Readiness.parse("tcp:[::1]:7000").host == "::1"
    assert Readiness.parse("file:/run/x.pid") == Readiness("file", path="/run/x.pid")
    assert Readiness.parse("after:1.5").seconds == 1.5
    for bad, words in (("tcp:http", "port must be a number"), ("tcp:70000", "port must be a number"),
                       ("udp:53", "not a way to wait"), ("6379", "give tcp:PORT"), ("after:soon", "seconds")):
        with pytest.raises(ServerSpecError, match=words):
            Readiness.parse(bad)


def test_stop_signals_by_name_or_number():
    assert parse_signal("SIGINT") == signal.SIGINT and parse_signal("term") == signal.SIGTERM
    assert parse_signal("9") == signal.SIGKILL
    with pytest.raises(ServerSpecError, match="not a signal"):
        parse_signal("SIGNOPE")


def test_a_server_target_fills_its_params_and_reads_back():
    target = ProgramTarget.from_options(["bench", "-c", "{n}", "-p", "{port}"], server="srv --port {port} --threads {n}",
                                        ready="tcp:{port}", stop="SIGINT", metric="rps: ([0-9.]+)",
                                        higher_is_better=True)
    assert target.placeholders() == ["port", "n"] and target.name == "srv"
    filled = target.for_params({"port": 7001, "n": 4})
    assert filled.server.argv == ("srv", "--port", "7001", "--threads", "4") and filled.server.ready == "tcp:7001"
    assert filled.argv == ("bench", "-c", "4", "-p", "7001") and filled.server.stop_signal == signal.SIGINT
    assert ProgramTarget.from_json(filled.to_json()) == filled
    assert "server" not in ProgramTarget(("./prog",)).to_json()      # files of programs without one: unchanged
    assert filled.describe().startswith("server srv --port 7001") and "client bench -c 4" in filled.describe()


def test_several_metrics_each_with_a_name_of_its_own():
    target = ProgramTarget.from_options(["redis-benchmark"], metric=["SET: ([0-9.]+) requests", "GET: ([0-9.]+) requests"],
                                        higher_is_better=True)
    assert [m.metric_name for m in target.reported] == ["reported:SET", "reported:GET"]
    assert not any(m.lower_is_better for m in target.reported)
    assert ProgramTarget.from_json(target.to_json()) == target
    assert target.to_json()["metric"]["name"] == "SET"         # an older scenc still reads the first
    with pytest.raises(ProgramError, match="both be named 'rps'"):
        ProgramTarget.from_options(["bench"], metric=["rps: ([0-9.]+)", "rps: ([0-9.]+) again"])


def test_a_server_needs_ready_and_a_client():
    with pytest.raises(ProgramError, match="needs --ready"):
        ProgramTarget.from_options(["client"], server="srv")
    with pytest.raises(ProgramError, match="needs its client"):
        ProgramTarget.from_options([], server="srv", ready="tcp:1")
    with pytest.raises(ProgramError, match="is empty"):
        ProgramTarget.from_options(["client"], server="  ", ready="tcp:1")


def test_server_options_without_a_server_are_refused(tmp_path):
    done = scenc("run", "--ready", "tcp:7000", "--allocators", "glibc", "--", "true")
    assert done.returncode == 64 and "--ready go with --server" in done.stderr
    done = scenc("run", "--server", "redis-server", "--allocators", "glibc", "--", "true")
    assert done.returncode == 64 and "--server needs --ready" in done.stderr


# --------------------------------------------------------------------------- runs
@pytest.mark.slow
def test_the_server_is_measured_under_each_allocator_and_its_client_under_none(tmp_path, server):
    port, out = free_port(), tmp_path / "r.json"
    done = scenc("run", "--server", f"{server} {port} 2000", "--ready", f"tcp:{port}", "--allocators",
                 "glibc,jemalloc", "--runs", 2, "--warmup", 1, *METRIC, "--show-output", "-o", out, "--",
                 *client(port, 3000))
    assert done.returncode == 0, done.stderr
    header, *runs = read_lines(out)
    assert header["targets"]["command"]["server"]["argv"] == [str(server), str(port), "2000"]
    assert len(measured(runs)) == 4 and all(r.ok for r in runs)
    jemalloc = os.path.realpath(header["allocators"]["jemalloc"]["path"])
    for run in measured(runs):
        m = run.metrics
        # The server's memory (2000 live blocks of 4000 bytes: above 8 MB) and the client's figure.
        assert m["peak_rss_kib"] > 8000 and m["reported:requests"] > 0 and m["wall_s"] > 0
        assert m["ready_s"] >= 0 and m["client_peak_rss_kib"] > 0
        assert run.server["ended"] == "exit status 0" and run.server["stopped_by"] == "SIGTERM"
        assert run.proof["processes"] == 1               # the server alone loaded the proof
        for obj in run.proof["objects"]:
            if run.allocator == "jemalloc":
                assert os.path.realpath(obj) == jemalloc
            else:
                assert os.path.basename(obj).startswith("libc.so"), obj
    # The client printed its own environment: never a preload, in any run (warm-ups too).
    said = [line for line in done.stdout.splitlines() if line.startswith("client LD_PRELOAD=")]
    assert len(said) == 6 and set(said) == {"client LD_PRELOAD=[]"}, said
    assert "alloc_server: listening" in done.stderr                   # --show-output shows the server's too
    assert "requests (reported by the program) (higher is better)" in done.stdout
    assert "wall time is the client's" in done.stdout
    assert "server pid" not in done.stdout
    assert not _processes_of(str(server))


@pytest.mark.slow
def test_a_sweep_reaches_the_server_command(tmp_path, server):
    port, out = free_port(), tmp_path / "r.json"
    done = scenc("run", "--param", "live=100,3000", "--server", f"{server} {port} {{live}}", "--ready",
                 f"tcp:{port}", "--allocators", "glibc", "--runs", 2, "--warmup", 0, "-o", out, "-q", "--",
                 *client(port, 3000))
    assert done.returncode == 0, done.stderr
    _, *runs = read_lines(out)
    peak = {live: max(r.metrics["peak_rss_kib"] for r in runs if r.params == {"live": live}) for live in (100, 3000)}
    assert peak[3000] > peak[100] + 8000          # 2900 more live blocks of 4000 bytes in the server
    assert "(live=3000)" in done.stdout


@pytest.mark.slow
def test_a_server_that_never_opens_its_port_fails_its_run_with_its_output(tmp_path):
    port, out = free_port(), tmp_path / "r.json"
    done = scenc("run", "--server", "sh -c 'echo starting up; exec sleep 60'", "--ready", f"tcp:{port}",
                 "--ready-timeout", "1s", "--allocators", "glibc", "--runs", 2, "-o", out, "--", *client(port))
    assert done.returncode == 3
    _, *runs = read_lines(out)
    assert len(runs) == 1 and runs[0].status == "timeout" and runs[0].warmup
    assert f"not ready after 1 s (waiting for a connection to 127.0.0.1:{port}" in runs[0].problem
    assert "starting up" in runs[0].stdout_tail                        # the server's output is kept
    assert "not ready after 1 s" in done.stdout


@pytest.mark.slow
def test_a_port_in_use_and_a_server_dying_under_load_are_failed_runs_with_a_sentence(tmp_path, server):
    port, out = free_port(), tmp_path / "r.json"
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        done = scenc("run", "--server", f"{server} {port}", "--ready", f"tcp:{port}", "--allocators", "glibc",
                     "--runs", 2, "-o", out, "--", *client(port))
    assert done.returncode == 3
    _, *runs = read_lines(out)
    assert runs[0].status == "crashed" and f"port {port} on 127.0.0.1 is already in use" in runs[0].problem

    out = tmp_path / "dies.json"
    done = scenc("run", "--server", f"{server} {port} 100 50", "--ready", f"tcp:{port}", "--allocators",
                 "glibc,jemalloc", "--runs", 2, "--warmup", 0, "-o", out, "--", *client(port))
    assert done.returncode == 3
    _, *runs = read_lines(out)
    assert len(runs) == 4 and all(r.status == "crashed" for r in runs)   # every run kept, each with its reason
    assert all(r.problem == "the server died under load (killed by SIGABRT)" for r in runs), runs[0].problem


@pytest.mark.slow
def test_a_failing_client_fails_its_run_and_the_server_is_stopped(tmp_path, server):
    port, out = free_port(), tmp_path / "r.json"
    done = scenc("run", "--server", f"{server} {port}", "--ready", f"tcp:{port}", "--allocators", "glibc",
                 "--runs", 2, "-o", out, "--", "sh", "-c", "echo no such request >&2; exit 4")
    assert done.returncode == 3
    _, *runs = read_lines(out)
    assert runs[0].status == "crashed" and runs[0].problem == "the client: exit status 4"
    assert "no such request" in runs[0].stderr_tail and runs[0].server["stopped_by"] == "SIGTERM"
    assert not _processes_of(str(server))


def _processes_of(word: str) -> list:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read().split(b"\0")[0] == word.encode():
                    found.append(int(pid))
        except OSError:
            pass
    return found


@pytest.mark.slow
def test_ctrl_c_leaves_no_server_behind(tmp_path, server):
    port, out = free_port(), tmp_path / "r.json"
    proc = start_scenc("run", "--server", f"{server} {port}", "--ready", f"tcp:{port}", "--allocators", "glibc",
                       "--runs", 5, "--warmup", 0, "-o", out, "--", *client(port, 10_000_000))
    deadline, pids = time.monotonic() + 60, []
    while time.monotonic() < deadline and not pids:
        time.sleep(0.1)
        pids = _processes_of(str(server))
    assert pids, "the server never started"
    time.sleep(0.5)                                # the client is under way
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists(), f"server {pid} is still there after Ctrl-C"
    header, *runs = read_lines(out)
    assert header["status"] == "interrupted" and runs == []             # the interrupted run is not saved


# --------------------------------------------------------------------------- a server captured, and replayed beside it
@pytest.mark.slow
def test_a_captured_server_converts_and_its_replay_runs_beside_it(tmp_path, server):
    port, log = free_port(), tmp_path / "server.trace"
    done = scenc("capture", "--method", "preload", "-o", log, "--server", f"{server} {port} 500", "--ready",
                 f"tcp:{port}", "--", *client(port, 1000))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "client LD_PRELOAD=[]" in done.stdout                        # the client is not traced either
    # scenc's words go to stderr, the client's output to stdout as it wrote it.
    assert f"server {server} {port} 500: ready at" in done.stderr and "stopped by SIGTERM (exit status 0)" in done.stderr
    assert not list(tmp_path.glob("server.trace.*"))                   # the client left no log of its own
    stats = scenc("trace-stats", log)
    assert stats.returncode == 0 and "malloc" in stats.stdout
    # 1000 requests: 1000 mallocs of 4000 bytes, 500 of them freed by the ring, the rest at the stop.
    converted = scenc("convert", log, "-o", tmp_path / "server.scn")
    assert converted.returncode == 0, converted.stderr
    out = tmp_path / "side.json"
    side = scenc("run", tmp_path / "server.scn", "--server", f"{server} {port} 500", "--ready", f"tcp:{port}",
                 "--allocators", "glibc,jemalloc", "--runs", 2, "--warmup", 0, "-o", out, "--", *client(port, 1000))
    assert side.returncode == 0, side.stderr
    assert "beside the program (same session, interleaved rounds)" in side.stdout
    _, *runs = read_lines(out)
    assert {r.target for r in runs} == {"scenario", "command"} and len(runs) == 8


@pytest.mark.slow
def test_capture_of_a_server_that_never_gets_ready_says_so(tmp_path):
    port, log = free_port(), tmp_path / "server.trace"
    done = scenc("capture", "--method", "preload", "-o", log, "--server", "sleep 30", "--ready", f"tcp:{port}",
                 "--ready-timeout", "1s", "--", *client(port))
    assert done.returncode == 4
    assert "the server was not ready after 1 s" in done.stderr
    refused = scenc("capture", "--method", "ltrace", "-o", log, "--server", "sleep 30", "--ready", f"tcp:{port}", "--", *client(port))
    assert refused.returncode == 64 and "needs --method preload" in refused.stderr


@pytest.mark.slow
def test_a_captured_server_replays_its_window_from_ready_to_the_clients_end(tmp_path, server):
    """The server (STARTUP 30) mallocs and frees 30 blocks of 1111 bytes and keeps 30 of 2222 before it listens;
    the client's 200 requests malloc 4000 bytes each (a ring of 50 live); at SIGTERM, after the client's end, the
    server frees the ring and the kept blocks. The window's replay: no 1111, the 2222s made by the set-up and
    never freed, every request's malloc, none of the frees made after the client's end."""
    from scenc.trace.opsfile import SETUP, read_header, read_ops
    from scenc.trace.source import TraceSource
    port, log = free_port(), tmp_path / "server.trace"
    done = scenc("capture", "-o", log, "--server", f"{server} {port} 50 0 30", "--ready", f"tcp:{port}",
                 "--", *client(port, 200))
    assert done.returncode == 0, done.stderr
    assert "the log marks the window from ready to the client's end" in done.stderr
    converted = scenc("convert", log, "-o", tmp_path / "window.scn")
    assert converted.returncode == 0, converted.stderr
    assert "live at ready are made by an untimed set-up" in converted.stdout
    ops_path = tmp_path / "window.ops"
    flags = read_header(ops_path.read_bytes(), ops_path).flags
    _, ops = read_ops(ops_path)
    setup = [ops[i] for i, f in enumerate(flags) if f & SETUP]
    assert len(setup) == 1 and all(op[0] == "malloc" for op in setup[0])
    made = [op[8] for op in setup[0]]
    assert made.count(2222) == 30 and 1111 not in made
    window = [op for i, t in enumerate(ops) if not flags[i] & SETUP for op in t]
    mallocs = [op[8] for op in window if op[0] == "malloc"]
    assert mallocs.count(4000) == 200 and 1111 not in mallocs and 2222 not in mallocs
    kept = {op[3] for op in setup[0] if op[8] == 2222}
    freed = {op[3] for op in window if op[0] == "free"}
    assert not kept & freed                                     # their frees came after the client's end
    size_of, ring = {}, 0
    for op in window:                                           # the ring's frees under load, not its last 50
        if op[0] == "malloc":
            size_of[op[3]] = op[8]
        elif op[0] == "free":
            ring += size_of.pop(op[3], None) == 4000
    assert ring == 200 - 50
    whole = scenc("convert", "--whole", log, "-o", tmp_path / "whole.scn")
    assert whole.returncode == 0 and "window" not in whole.stdout.split("calls:")[0]
    _, all_ops = read_ops(tmp_path / "whole.ops")
    assert [op[8] for t in all_ops for op in t if op[0] == "malloc"].count(1111) == 30
    # The model reads the same window: the set-up's objects first, then the requests, nothing after the end.
    events = list(TraceSource(log, extra_events=True, window=True).events)
    sizes = [e.size for e in events if e.kind == "malloc"]
    assert 1111 not in sizes and sizes.count(2222) == 30 and sizes.count(4000) == 200
    assert sizes.index(4000) > max(i for i, s in enumerate(sizes) if s == 2222)
    request = {e.result_ptr for e in events if e.kind == "malloc" and e.size == 4000}
    assert sum(e.kind == "free" and e.old_ptr in request for e in events) == 200 - 50
    # trace-stats describes the window as convert replays it, and the whole life with --whole
    stats = scenc("trace-stats", log)
    assert stats.returncode == 0 and "window: the server's window from ready to its client's end" in stats.stdout
    in_window = json.loads(scenc("trace-stats", log, "--json").stdout)
    whole_life = json.loads(scenc("trace-stats", log, "--whole", "--json").stdout)
    assert in_window["window"] and not whole_life["window"]
    assert in_window["events"] <= whole_life["events"] - 60     # the 1111s' mallocs and frees, the frees after the end
    # convert --model reads that window too (the Python reader; a log without marks goes to the C collector)
    model = scenc("convert", "--model", "--no-measure", log, "-o", tmp_path / "model.scn")
    whole_model = scenc("convert", "--model", "--no-measure", "--whole", log, "-o", tmp_path / "whole-model.scn")
    assert model.returncode == 0 and whole_model.returncode == 0, model.stderr + whole_model.stderr
    def captured_calls(text):
        return int(next(line.split()[1] for line in text.splitlines() if line.split()[:1] == ["calls"]))
    # the 30 mallocs and frees of 1111 bytes before ready and the frees after the client's end are not modelled
    assert captured_calls(model.stdout) <= captured_calls(whole_model.stdout) - 60
