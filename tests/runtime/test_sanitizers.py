"""The C runtime and generated programs run clean under ThreadSanitizer,
AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer, built
by gcc and by clang.

Each scenario exercises one part of the runtime that threads share or that
frees memory late: MPMC channels (several producers, relays and consumers,
capacity 1 included), channel arrays, the dynamic barrier (threads leaving
it early), `lives` (delayed frees from the timing wheel, `forever`, 0),
realloc chains (variables and pool slots), write, work and nested measure regions,
the program's own mappings (map, unmap, their `lives`),
and the exact replay of a captured multi-threaded trace (cross-thread frees
wait on slot states). Programs are built twice per compiler, with
`-fsanitize=thread,undefined` and `-fsanitize=address,undefined`, and each
run must exit 0 with no sanitizer report on stderr and do the work its text
implies (the JSON counts).

Sanitizer options, and why:
- TSAN_OPTIONS=halt_on_error=1: the first race fails the run at once;
- ASAN_OPTIONS=detect_leaks=1: every scenario says `leaks free` (and the
  replayed trace leaves nothing live), so leak detection stays on and a
  leak in the runtime would fail the run; nothing here needs it off;
- UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1: gcc's UBSan recovers
  by default; this makes undefined behaviour fail the run too.

Marked `sanitizers`: `pytest -m sanitizers` runs these alone. Builds go to a
temporary SCENC_CACHE (the replay's ops path is part of its build key).
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from scenc.compiler.pipeline import build

from ltrace_samples import sample
from locations import REPO

pytestmark = pytest.mark.sanitizers


COMPILERS = ("gcc", "clang")
SANITIZERS = {
    "thread": ("-fsanitize=thread,undefined", "-fno-omit-frame-pointer"),
    "address": ("-fsanitize=address,undefined", "-fno-omit-frame-pointer"),
}
ENV = {
    "TSAN_OPTIONS": "halt_on_error=1",
    "ASAN_OPTIONS": "detect_leaks=1",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
}
REPORTS = ("WARNING: ThreadSanitizer", "ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
           "runtime error:", "SUMMARY: ")

ALLOCATIONS = ("malloc", "calloc", "aligned_alloc", "memalign", "posix_memalign")

SCENARIOS = {
    # Producers, relays and consumers on two channels, one of capacity 1.
    "mpmc": """
        scenario "mpmc"
        leaks free
        channel q capacity 1
        channel r capacity 7
        thread producer * 3 { repeat 300 { send(q, malloc(uniform(1, 256))) } }
        thread relay * 2 { repeat 450 { p = recv(q)  write(p, 1)  send(r, p) } }
        thread consumer * 3 { repeat 300 { free(recv(r)) } }
    """,
    # One feeder for every channel of an array, then pairs on their own channel.
    "channel-array": """
        scenario "channel-array"
        leaks free
        param n = 3
        channel inbox[n] capacity 1
        channel pair[n] capacity 4
        thread feeder { repeat 50 { for k in 0 .. n { send(inbox[k], malloc(32)) } } }
        thread worker * n {
            repeat 50 { free(recv(inbox[self])) }
            repeat 100 { send(pair[self], calloc(2, 16)) }
        }
        thread drain * n { repeat 100 { free(recv(pair[self])) } }
    """,
    # Barriers met a different number of times; threads that finish leave them.
    "barriers": """
        scenario "barriers"
        leaks free
        thread early * 2 { p = malloc(64)  barrier  free(p) }
        thread late * 3 {
            repeat 20 { p = malloc(16)  barrier  write(p, 2)  free(p) }
            pool objs[8]
            for i in 0 .. 8 { objs[i] = malloc(8 * (i + 1)) }
            barrier
            free_all(objs)
        }
    """,
    # Delayed frees: counts, distributions, 0 and forever, in threads side by side.
    "lives": """
        scenario "lives"
        leaks free
        thread mutator * 3 {
            repeat 20 { malloc(choice(64, 128)) lives forever }
            repeat 2000 {
                malloc(lognormal(median = 64, sigma = 1.5)) lives geometric(mean = 30)
                calloc(4, uniform(8, 64)) lives 7
                aligned_alloc(64, 128) lives 0
                p = malloc(8)
                free(p)
            }
        }
    """,
    # Realloc chains in variables and pool slots, growing and shrinking.
    "realloc-chains": """
        scenario "realloc-chains"
        leaks free
        thread builder * 2 {
            pool strings[6]
            repeat 20 {
                for i in 0 .. 6 { strings[i] = malloc(16) }
                for k in 1 .. 12 {
                    for i in 0 .. 6 { strings[i] = realloc(strings[i], k * 48 + uniform(0, 48)) }
                }
                free_all(strings)
            }
        }
        thread vector * 2 {
            repeat 20 {
                v = malloc(16)
                size = 16
                repeat 14 { size = size * 2  v = realloc(v, size) }
                v = realloc(v, 8)
                w = realloc(v, 100)
                free(w)
            }
        }
    """,
    # touch and partial writes: heads shorter and longer than the block, page-spanning blocks.
    "touch-write": """
        scenario "touch-write"
        leaks free
        thread worker * 2 {
            repeat 200 {
                p = malloc(uniform(1, 20000))
                touch(p)
                write(p, 2, bytes = uniform(0, 30000))
                q = realloc(p, uniform(1, 70000))
                touch(q)
                free(q)
            }
        }
    """,
    # Writes inside measured regions, nested and repeated, next to the C interface.
    "write-measure": """
        scenario "write-measure"
        leaks free
        thread worker * 3 {
            measure "outer" {
                repeat 50 {
                    measure "inner" {
                        p = malloc(pow2(4, 12))
                        write(p, 3)
                        work(uniform(0, 2000))
                        free(p)
                    }
                    a = memalign(64, 200)
                    b = posix_memalign(4096, 100)
                    write(a, 1)
                    write(b, 1)
                    free(a)
                    free(b)
                }
            }
        }
    """,
    # Thread churn: successors started by ending threads, inheriting objects
    # through a channel, next to a group that meets them at barriers.
    "churn": """
        scenario "churn"
        leaks free
        param n = 12
        param k = 3
        channel heir[k] capacity 16
        thread worker * n at most k {
            pool objs[16]
            if self < k { for i in 0 .. 16 { objs[i] = malloc(uniform(8, 256)) } }
            else { for i in 0 .. 16 { objs[i] = recv(heir[self % k]) } }
            barrier
            repeat 200 { i = random(16)  free(objs[i])  objs[i] = malloc(uniform(8, 256)) }
            if self + k < n { for i in 0 .. 16 { send(heir[self % k], objs[i]) } }
        }
        thread steady * 2 { repeat 6 { p = malloc(64)  barrier  free(p) } }
    """,
    # Shared slots swapped by several threads at once, emptied by a last thread.
    "shared-swap": """
        scenario "shared-swap"
        leaks free
        shared pool transfer[64]
        thread worker * 4 {
            pool objs[32]
            for i in 0 .. 32 { objs[i] = malloc(uniform(16, 512)) }
            repeat 3000 {
                i = random(32)
                if random(100) < 25 { objs[i] = swap(transfer[random(64)], objs[i]) }
                else { write(objs[i], 1) }
            }
            free_all(objs)
        }
        thread cleanup { barrier  free_all(transfer) }
    """,
    # The program's own mappings: mapped, touched, unmapped by a statement, by `lives` (the wheel's
    # marked pointers) and by `leaks free`, in threads side by side.
    "maps": """
        scenario "maps"
        leaks free
        touch_new first
        thread mapper * 3 {
            m = map(uniform(4K, 256K))
            touch(m)
            repeat 200 {
                map(pow2(12, 18)) lives uniform(0, 5)
                p = malloc(uniform(1, 512))
                write(p, 1)
                free(p)
            }
            map(64K) lives forever
            unmap(m)
            k = map(8K)
            write(k, 1)
        }
    """,
    # Branches on draws; lifetimes after recv and after realloc.
    "if-lives": """
        scenario "if-lives"
        leaks free
        channel q capacity 8
        thread producer * 2 {
            repeat 500 {
                if random(4) == 0 { send(q, malloc(uniform(1, 64))) } else { send(q, calloc(2, 32)) }
            }
        }
        thread consumer * 2 {
            repeat 500 {
                recv(q) lives uniform(0, 30)
                p = malloc(16)
                if random(100) >= 50 { realloc(p, 200) lives geometric(mean = 10) }
                else { p = realloc(p, 8)  realloc(p, 300) lives forever }
            }
        }
    """,
}


@pytest.fixture(scope="module", autouse=True)
def sanitizer_cache(tmp_path_factory):
    old = os.environ.get("SCENC_CACHE")
    os.environ["SCENC_CACHE"] = str(tmp_path_factory.mktemp("sanitizer-cache"))
    yield
    if old is None:
        del os.environ["SCENC_CACHE"]
    else:
        os.environ["SCENC_CACHE"] = old


def sanitizer_env():
    env = dict(os.environ)
    env.update(ENV)
    return env


def run_sanitized(path: Path, cc: str, sanitizer: str, probe_set: str = "", **env) -> dict:
    """Build with the sanitizer (and the probes of `probe_set`), run, and insist on a clean exit
    and a clean stderr."""
    from scenc import probes
    program = build(path, {}, cc=cc, extra_flags=SANITIZERS[sanitizer], probes=probes.c_parts(probe_set))
    proc = subprocess.run([str(program.binary)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=120, env={**sanitizer_env(), **env})
    assert proc.returncode == 0, proc.stderr[-4000:]
    for marker in REPORTS:
        assert marker not in proc.stderr, proc.stderr[-4000:]
    return json.loads(proc.stdout)


def totals(report: dict, key: str) -> int:
    return sum(t["ops"][key] if key in t["ops"] else t[key] for t in report["threads"])


def write_scenario(folder: Path, name: str) -> Path:
    path = folder / f"{name}.scn"
    path.write_text(textwrap.dedent(SCENARIOS[name]))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("sanitizer", sorted(SANITIZERS))
@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_runs_clean_under_the_sanitizer(tmp_path, name, cc, sanitizer):
    report = run_sanitized(write_scenario(tmp_path, name), cc, sanitizer)
    allocated = sum(totals(report, k) for k in ALLOCATIONS)
    # `leaks free`: every object allocated is freed by the end, by the scenario or the runtime.
    assert allocated > 0
    assert totals(report, "free") == allocated
    assert totals(report, "sends") == totals(report, "recvs")
    assert all(t["failed"] == 0 for t in report["threads"])
    if "mapped" in report:      # every mapping unmapped too, and none left
        assert totals(report, "maps") == totals(report, "unmaps") > 0 and report["mapped"]["final_bytes"] == 0


def test_the_mpmc_scenario_moves_every_object_through_both_channels(tmp_path):
    report = run_sanitized(write_scenario(tmp_path, "mpmc"), "clang", "thread")
    by_group = {}
    for t in report["threads"]:
        by_group.setdefault(t["group"], []).append(t)
    assert [t["sends"] for t in by_group["producer"]] == [300] * 3
    assert [(t["recvs"], t["sends"]) for t in by_group["relay"]] == [(450, 450)] * 2
    assert [(t["recvs"], t["ops"]["free"]) for t in by_group["consumer"]] == [(300, 300)] * 3


def test_measured_regions_are_entered_as_written(tmp_path):
    report = run_sanitized(write_scenario(tmp_path, "write-measure"), "gcc", "address")
    for t in report["threads"]:
        assert t["regions"]["outer"]["entries"] == 1
        assert t["regions"]["inner"]["entries"] == 50
        assert t["writes"] == 50 * 3


@pytest.mark.slow
@pytest.mark.parametrize("sanitizer", sorted(SANITIZERS))
@pytest.mark.parametrize("cc", COMPILERS)
def test_measured_regions_under_the_default_probes_run_clean(tmp_path, cc, sanitizer):
    # scenc run's default probes (time+memory): the regions' ticks, the time probe's CPU reads
    # around long entries and its per-thread estimates, the memory sampler beside them.
    report = run_sanitized(write_scenario(tmp_path, "write-measure"), cc, sanitizer, "time+memory")
    own = report["probes"]["time"]["threads"]
    for t, extra in zip(report["threads"], own):
        assert t["regions"]["inner"]["entries"] == 50
        assert extra["region_cpu_timed"][0] <= 1            # outer: its one entry, if long enough
        assert extra["region_cpu_timed"][1] <= 50
        for slot, name in enumerate(("outer", "inner")):
            assert 0 < extra["region_cpu_ns"][slot] <= t["regions"][name]["ns"] * 1.05 + 100_000


@pytest.fixture(scope="module")
def replay_scenario(tmp_path_factory):
    from scenc.trace.ltrace import parse_file
    from scenc.trace.replay import write_replay
    folder = tmp_path_factory.mktemp("replay")
    path = folder / "mt_pthread.scn"
    report = write_replay(parse_file(sample("mt_pthread_e.log")), path, "mt_pthread_e.log")
    # Leak detection stays on only because the capture frees everything it allocates.
    assert report.live_at_end == 0 and report.cross_thread_waits > 0
    return path, report


@pytest.mark.slow
@pytest.mark.parametrize("sanitizer", sorted(SANITIZERS))
@pytest.mark.parametrize("cc", COMPILERS)
def test_replay_of_a_captured_trace_runs_clean(replay_scenario, cc, sanitizer):
    path, converted = replay_scenario
    report = run_sanitized(path, cc, sanitizer)
    got = [{k: v for k, v in t["ops"].items() if v} for t in report["threads"]]
    assert got == converted.counts


@pytest.fixture(scope="module")
def churn_replay(tmp_path_factory):
    """bench/programs/thread_churn.c captured with the preload tracer: threads created, joined and ended during the
    replay, the captured main thread on the main thread, every block touched page by page."""
    from scenc.trace.capture.preload import capture_preload
    from scenc.trace.tracerlog import parse_preload_log
    from scenc.trace.replay import write_replay
    folder = tmp_path_factory.mktemp("churn")
    churn = folder / "churn"
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(churn), str(REPO / "bench" /
                                                                     "programs" / "thread_churn.c")], check=True)
    capture = capture_preload([str(churn), "40", "100"], folder / "churn.trace", stdout=subprocess.DEVNULL)
    assert capture.ok, capture.warnings
    path = folder / "churn.scn"
    report = write_replay(parse_preload_log(capture.path, extra_events=True), path, "churn.trace", touch="pages",
                          main_tid=capture.info.pid)
    assert report.spawned == 40 and report.joined >= 38 and report.peak_threads == 3
    return path, report


@pytest.mark.slow
@pytest.mark.parametrize("sanitizer", sorted(SANITIZERS))
@pytest.mark.parametrize("cc", COMPILERS)
def test_replay_with_thread_lifetimes_runs_clean(churn_replay, cc, sanitizer):
    path, converted = churn_replay
    # glibc's own blocks (stdio, thread bookkeeping) stay live at the program's end, so they would stay live in
    # the replay too: leak detection is off here, and on for every other replay and scenario.
    report = run_sanitized(path, cc, sanitizer, ASAN_OPTIONS="detect_leaks=0")
    got = [{k: v for k, v in t["ops"].items() if v} for t in report["threads"]]
    assert got == converted.counts


@pytest.mark.slow
@pytest.mark.parametrize("sanitizer", ["thread", "address", "undefined"])
def test_scenc_exec_sanitize_option(tmp_path, sanitizer):
    """The user's way in: `scenc exec --sanitize ...` builds with it and reports nothing."""
    path = write_scenario(tmp_path, "mpmc")
    proc = subprocess.run([sys.executable, "-m", "scenc.cli", "exec", "--sanitize", sanitizer, "--json",
                           str(path)], capture_output=True, text=True, timeout=300, env=sanitizer_env())
    assert proc.returncode == 0, proc.stderr[-4000:]
    for marker in REPORTS:
        assert marker not in proc.stderr, proc.stderr[-4000:]
    assert totals(json.loads(proc.stdout), "free") == 900


BROKEN_C = {
    # A heap overflow by one byte.
    "address": ("ERROR: AddressSanitizer",
                "#include <stdlib.h>\n#include <string.h>\n"
                "int main(void) { char *volatile p = malloc(8); memset(p, 1, 9); free(p); return 0; }\n"),
    # Two threads increment one plain int.
    "thread": ("WARNING: ThreadSanitizer",
               "#include <pthread.h>\nstatic int n;\n"
               "static void *bump(void *a) { for (int i = 0; i < 100000; i++) n++; return a; }\n"
               "int main(void) { pthread_t a, b; pthread_create(&a, 0, bump, 0); pthread_create(&b, 0, bump, 0);\n"
               "  pthread_join(a, 0); pthread_join(b, 0); return n == 0; }\n"),
}


@pytest.mark.parametrize("sanitizer", sorted(BROKEN_C))
def test_the_sanitizers_do_catch_a_broken_program_here(tmp_path, sanitizer):
    """A clean run above means something only if the sanitizer works on this machine:
    a program with a real bug (written in C by hand: no scenario can express one) is caught."""
    from scenc.compiler import build as builder
    marker, source = BROKEN_C[sanitizer]
    c_file = tmp_path / "broken.c"
    c_file.write_text(source)
    binary = tmp_path / "broken"
    subprocess.run([builder.find_compiler("gcc"), *SANITIZERS[sanitizer], "-pthread", "-O0", str(c_file),
                    "-o", str(binary)], check=True, capture_output=True)
    proc = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60, env=sanitizer_env())
    assert proc.returncode != 0
    assert marker in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("cc", COMPILERS)
def test_the_converter_runs_clean(tmp_path, cc):
    """runtime/tools/convert.c under AddressSanitizer and UBSan, reading real tracer logs (threads, mappings, the
    moved-realloc race) and a stream of random events; it must write what the plain build writes."""
    from scenc.trace.replay import _feed
    from scenc.trace.native import converter_program
    from converter_inputs import TRACES, race_log, random_events
    checked = converter_program(cc, SANITIZERS["address"])
    plain = converter_program(cc)
    stream = tmp_path / "events.bin"
    with open(stream, "wb") as f:
        _feed(iter(random_events(3, 20000)), f)
    inputs = [["--log", str(REPO / "tests" / "fixtures" / "trace" / name)] for name in TRACES]
    inputs += [["--log", str(race_log(tmp_path / "race.trace"))], ["--events"]]
    for args in [[*a, "--touch", touch] for a in inputs for touch in ("2", "auto")]:     # auto: its page counts
        outputs = []
        for binary in (checked, plain):
            ops = tmp_path / f"{binary.parent.name}.ops"
            with open(stream, "rb") as stdin:
                proc = subprocess.run([str(binary), *args, "--ops", str(ops)], stdin=stdin,
                                      capture_output=True, text=True, timeout=120, env=sanitizer_env())
            assert proc.returncode == 0, (args, proc.stderr[-4000:])
            for marker in REPORTS:
                assert marker not in proc.stderr, proc.stderr[-4000:]
            outputs.append((ops.read_bytes(), proc.stdout))
        assert outputs[0] == outputs[1], args
