"""The semantic checks: each kind of mistake gives its positioned message, and
correct scenarios (the language sketch's six examples) give none.

Scenarios are inline strings. Limits that depend on the machine (MemTotal)
are read from the real /proc/meminfo, as the checks themselves do, and the
scenarios that cross them are sized from it.
"""

import json
import subprocess
import sys
import textwrap

import pytest

from scenc.compiler.pipeline import build, load
from scenc.scenario.checks import check, estimate_peak
from scenc.system.machine import mem_total
from scenc.scenario.parser import parse
from scenc.scenario.resolve import resolve


def diagnostics(source, params=None, filename="test.scn"):
    scenario = parse(textwrap.dedent(source), filename)
    return check(resolve(scenario, params or {}))


def where(d):
    return f"{d.pos.line}:{d.pos.col}"


def errors(source, **kw):
    return [(where(d), d.message) for d in diagnostics(source, **kw) if d.severity == "error"]


def warnings(source, **kw):
    return [(where(d), d.message) for d in diagnostics(source, **kw) if d.severity == "warning"]


def one(found, position, phrase):
    """Exactly one diagnostic, at `position`, containing `phrase`."""
    assert len(found) == 1, found
    assert found[0][0] == position, found
    assert phrase in found[0][1], found


# ------------------------------------------------------------ the sketch's six examples

LOOP = """\
    # loop.scn
    scenario "loop"
    seed 42

    param threads    = 2          # overridable: scenc run loop.scn --param threads=1,2,4
    param iterations = 1_000_000
    param maxsize    = 1024

    thread worker * threads {
        repeat iterations {
            p = malloc(uniform(1, maxsize))
            free(p)
        }
    }
"""

LARSON = """\
    scenario "larson"
    param threads = 2
    param slots   = 1000
    param rounds  = 2_000_000

    thread worker * threads {
        pool objs[slots]
        for i in 0 .. slots { objs[i] = malloc(uniform(16, 128)) }
        repeat rounds {
            i = random(slots)
            free(objs[i])
            objs[i] = malloc(uniform(16, 128))
        }
        free_all(objs)
    }
"""

# Adapted: the repeat count is a param, so that a test run can be short.
PRODUCER_CONSUMER = """\
    scenario "producer-consumer"
    param pairs = 2
    param items = 1_000_000
    channel q capacity 5000          # bounded queue of pointers between threads

    thread producer * pairs {
        repeat items { send(q, malloc(uniform(1, 4096))) }
    }
    thread consumer * pairs {
        repeat items { free(recv(q)) }
    }
"""

# Adapted: the sketch shows a bare thread; a scenario line and a param for the count.
LIFETIMES = """\
    scenario "lifetimes"
    param items = 1_000_000
    thread mutator * 4 {
        repeat items {
            malloc(lognormal(median = 64, sigma = 1.5)) lives geometric(mean = 100)
        }
    }
"""

CACHE_SCRATCH = """\
    scenario "cache-scratch"
    param threads = 2
    param writes  = 1_000_000
    channel inbox[threads] capacity 1     # one channel per thread

    thread main {
        for k in 0 .. threads { send(inbox[k], malloc(8)) }
    }
    thread worker * threads {
        free(recv(inbox[self]))            # self = this thread's index in its group
        barrier                            # every thread still running meets here; a thread
                                           # that has finished (main, above) no longer counts
        measure "thrash" {                 # a named region that timing probes report
            repeat 100 {
                p = malloc(8)
                write(p, writes / threads) # write the object's bytes that many times
                free(p)
            }
        }
    }
"""

# Adapted: the sketch's three lines inside a thread, with the frees they need.
C_INTERFACE = """\
    scenario "c-interface"
    thread main {
        p = calloc(16, 64)
        p = realloc(p, 4096)
        q = aligned_alloc(64, 256)        # also memalign(a, n) and posix_memalign(a, n)
        r = memalign(64, 100)
        s = posix_memalign(16, 100)
        free(p)
        free(q)
        free(r)
        free(s)
    }
"""

SKETCH = {
    "loop": (LOOP, {"iterations": 1000}),
    "larson": (LARSON, {"slots": 100, "rounds": 1000}),
    "producer-consumer": (PRODUCER_CONSUMER, {"items": 1000}),
    "lifetimes": (LIFETIMES, {"items": 1000}),
    "cache-scratch": (CACHE_SCRATCH, {"writes": 1000}),
    "c-interface": (C_INTERFACE, {}),
}


@pytest.mark.parametrize("name", sorted(SKETCH))
def test_sketch_examples_give_no_error_and_no_warning(name):
    source, small = SKETCH[name]
    for params in ({}, small):
        assert diagnostics(source, params) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SKETCH))
def test_a_checked_scenario_also_compiles_and_runs(name, tmp_path):
    source, small = SKETCH[name]
    path = tmp_path / f"{name}.scn"
    path.write_text(textwrap.dedent(source))
    assert load(path, small).warnings == []
    program = build(path, small)
    proc = subprocess.run([str(program.binary)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert all(t["failed"] == 0 for t in json.loads(proc.stdout)["threads"])


# ------------------------------------------------------------ pointer states

def test_double_free_names_the_first_free():
    one(errors("""\
        thread worker {
            p = malloc(64)
            free(p)
            free(p)
        }
    """), "4:10", "p is already freed (freed at line 3)")


def test_free_in_a_loop_may_free_twice():
    one(errors("""\
        thread worker {
            p = malloc(64)
            repeat 3 {
                free(p)
            }
        }
    """), "4:14", "p may already be freed (freed at line 4)")


def test_write_after_free_is_a_use_after_free():
    one(errors("""\
        thread worker {
            p = malloc(64)
            free(p)
            write(p, 1)
        }
    """), "4:11", "p is already freed (freed at line 3)")


def test_a_sent_pointer_is_moved_away():
    one(errors("""\
        channel c capacity 1
        thread worker {
            q = malloc(8)
            send(c, q)
            free(q)
        }
        thread sink { free(recv(c)) }
    """), "5:10", "q is already moved away (sent to c at line 4)")


def test_realloc_into_another_name_moves_the_old_one():
    one(errors("""\
        thread worker {
            r = malloc(8)
            s = realloc(r, 64)
            realloc_me = realloc(r, 128)
            free(s)
            free(realloc_me)
        }
    """), "4:26", "r is already moved away (realloc'ed into s at line 3)")


def test_a_copy_moves_the_object_to_the_new_name():
    one(errors("""\
        thread worker {
            s = malloc(8)
            t = s
            free(t)
            free(s)
        }
    """), "5:10", "s is already moved away (copied to t at line 3)")


def test_use_before_assignment_when_a_loop_may_not_run():
    one(errors("""\
        param n = 3
        thread worker {
            repeat n { a = malloc(8) free(a) }
            repeat 0 { b = malloc(8) }
            free(b)
        }
    """), "5:10", "b may be used before it is assigned")


def test_a_loop_with_a_positive_constant_count_runs():
    src = """\
        param n = 2
        thread worker {
            repeat n { a = malloc(8) free(a) }
            b = malloc(1)
            free(b)
            repeat n { b = malloc(8) }
            free(b)
        }
    """
    assert errors(src) == []
    # ... but its second turn overwrites the first object.
    one(warnings(src), "6:16", "b may still hold the object allocated at line 6")
    # With the count overridden to 0 the body may not have run: b may be the freed one.
    one(errors(src, params={"n": 0}), "7:10", "b may already be freed (freed at line 5)")


def test_free_all_then_free_of_a_slot():
    one(errors("""\
        leaks free
        thread worker {
            pool objs[4]
            for i in 0 .. 4 { objs[i] = malloc(8) }
            free_all(objs)
            free(objs[2])
        }
    """), "6:10", "objs[2] is already freed (free_all(objs) at line 5 emptied every slot)")


def test_pools_are_never_blamed_for_what_only_the_runtime_knows():
    # Freeing random slots, some maybe empty or freed before: the runtime's business.
    assert diagnostics("""\
        thread worker {
            pool objs[10]
            repeat 100 {
                i = random(10)
                free(objs[i])
                objs[i] = malloc(8)
                write(objs[random(10)], 1)
            }
            free_all(objs)
        }
    """) == []


# ------------------------------------------------------------ leaks

def test_a_pointer_live_at_the_end_of_its_thread_is_a_warning():
    src = """\
        thread worker {
            p = malloc(8)
        }
    """
    assert errors(src) == []
    one(warnings(src), "2:9", "p is still allocated when thread worker ends; add free(p) or write `leaks free`")
    assert diagnostics("leaks free\n" + textwrap.dedent(src)) == []


def test_a_pool_never_freed_is_a_warning():
    src = """\
        thread worker {
            pool objs[4]
            for i in 0 .. 4 { objs[i] = malloc(8) }
        }
    """
    one(warnings(src), "2:10", "pool objs still holds objects when thread worker ends; add free_all(objs)")
    assert diagnostics("leaks free\n" + textwrap.dedent(src)) == []


def test_a_pool_emptied_slot_by_slot_does_not_leak():
    assert diagnostics("""\
        thread worker {
            pool objs[4]
            for i in 0 .. 4 { objs[i] = malloc(8) }
            for i in 0 .. 4 { free(objs[i]) }
        }
    """) == []


def test_overwriting_a_live_pointer_leaks_it():
    one(warnings("""\
        thread worker {
            p = malloc(8)
            p = malloc(16)
            free(p)
        }
    """), "3:5", "p still holds the object allocated at line 2; assigning it again leaks that object")


def test_an_object_nothing_keeps_is_lost():
    one(warnings("""\
        thread worker {
            write(malloc(8), 1)
        }
    """), "2:11", "the object from malloc() is lost")


# ------------------------------------------------------------ channels

def test_recv_on_a_channel_nobody_sends_to():
    one(errors("""\
        channel q capacity 4
        thread worker {
            free(recv(q))
        }
    """), "3:10", "nobody sends to q: this recv would wait forever")


def test_more_recvs_than_sends_waits_forever():
    src = """\
        param pairs = 2
        channel q capacity 100
        thread producer * pairs {
            repeat 500 { send(q, malloc(8)) }
        }
        thread consumer * pairs {
            repeat 1000 { free(recv(q)) }
        }
    """
    one(errors(src), "7:24", "recv on q would wait forever: 2000 recv but only 1000 send")
    # Thread counts are params too: the totals follow overrides.
    one(errors(src, params={"pairs": 3}), "7:24", "3000 recv but only 1500 send")


def test_more_sends_than_recvs_leaks_or_blocks():
    src = """\
        param extra = 50
        channel q capacity 100
        thread producer {
            for i in 0 .. 1000 + extra { send(q, malloc(8)) }
        }
        thread consumer {
            repeat 10 { repeat 100 { free(recv(q)) } }
        }
    """
    assert errors(src) == []
    one(warnings(src), "4:34", "50 objects sent to q are never received and stay allocated (1050 send, 1000 recv)")
    one(errors(src, params={"extra": 101}), "4:34",
        "send on q would block forever: 1101 send but only 1000 recv and a capacity of 100")


def test_channel_arrays_are_counted_channel_by_channel():
    src = """\
        param threads = 2
        channel inbox[threads] capacity 1
        thread main {
            send(inbox[0], malloc(8))
            send(inbox[0], malloc(8))
        }
        thread worker * threads {
            free(recv(inbox[self]))
        }
    """
    one(errors(src), "8:10", "recv on inbox[1] would wait forever: 1 recv but no send")
    one(warnings(src), "4:5", "1 object sent to inbox[0] is never received")


def test_a_channel_index_out_of_range_for_some_thread():
    assert errors("""\
        channel inbox[2] capacity 1
        thread main {
            for k in 0 .. 3 { send(inbox[k], malloc(8)) }
        }
        thread worker * 3 {
            free(recv(inbox[self]))
        }
    """) == [("3:34", "inbox[k] is out of range when k = 2: inbox has 2 channels (0 .. 1)"),
             ("6:21", "inbox[self] is out of range when self = 2: inbox has 2 channels (0 .. 1)")]


def test_counts_only_known_at_run_time_are_not_compared():
    assert diagnostics("""\
        channel q capacity 10
        thread producer {
            n = random(100)
            repeat n { send(q, malloc(8)) }
        }
        thread consumer {
            repeat 3 { free(recv(q)) }
        }
    """) == []


# ------------------------------------------------------------ sizes and numbers

def sized(line, **kw):
    """Diagnostics of one statement, on line 3 of a scenario that frees everything."""
    return diagnostics(f"leaks free\nthread t {{\n    {line}\n}}\n", **kw)


SIZE_MISTAKES = [
    # (statement, the text the caret points at, phrase)
    ("p = malloc(-5)", "-5", "a size must not be negative, not -5"),
    ("p = malloc(uniform(-1, 64))", "-1", "a size must not be negative, but uniform() here can draw -1"),
    ("p = malloc(choice(16, -8))", "-8", "a size must not be negative"),
    ("p = malloc(weighted { -4: 1, 8: 1 })", "-4", "a size must not be negative"),
    ("p = malloc(uniform(64, 16))", "64", "uniform(a, b) needs a <= b, not 64 > 16"),
    ("p = malloc(pow2(3, 41))", "41", "pow2() exponents run from 0 to 40, not 41"),
    ("p = malloc(pow2(9, 4))", "9", "pow2(lo, hi) needs lo <= hi, not 9 > 4"),
    ("p = aligned_alloc(24, 64)", "24", "an alignment must be a power of two, not 24"),
    ("p = memalign(0, 64)", "0", "an alignment must be a power of two, not 0"),
    ("p = posix_memalign(4, 64)", "4", "posix_memalign needs an alignment of at least 8"),
    ("p = calloc(1G * 1G, 1G * 1G)", "calloc", "calloc's count x size can overflow"),
    ("p = calloc(1024, 2G)", "calloc", "asks for 2.0 TiB in one allocation, more than 1 TiB"),
    ("p = malloc(random(0))", "0", "random(n) draws from 0 to n - 1, so n must be at least 1, not 0"),
    ("p = malloc(2048G)", "2048G", "this size asks for 2.0 TiB in one allocation, more than 1 TiB"),
    ("p = malloc(uniform(1, 2048G))", "2048G", "this size can reach 2.0 TiB in one allocation"),
    ("p = malloc(lognormal(median = 0, sigma = 1))", "0", "lognormal median must be above 0, not 0"),
    ("p = malloc(lognormal(median = 64, sigma = -1))", "-1", "lognormal sigma must not be negative, not -1"),
    ("p = malloc(geometric(mean = 0.5))", "0.5", "geometric mean must be at least 1, not 0.5"),
    ("p = malloc(weighted { 16: -1, 32: 2 })", "-1", "a weight must not be negative, not -1"),
    ("p = malloc(weighted { 16: 0, 32: 0 })", "weighted", "every weight is zero"),
    ("repeat -3 { }", "-3", "a repeat count must not be negative, not -3"),
    ("malloc(8) lives -2", "-2", "a lifetime must not be negative, not -2"),
    ("malloc(8) lives uniform(-2, 5)", "-2", "a lifetime must not be negative, but uniform() here can draw -2"),
    ("pool objs[-1]", "-1", "a pool's size must not be negative, not -1"),
    ("p = malloc(8) write(p, -1)", "-1", "a write count must not be negative, not -1"),
]


@pytest.mark.parametrize("line, at, phrase", SIZE_MISTAKES, ids=[c[0] for c in SIZE_MISTAKES])
def test_size_and_number_mistakes_point_at_the_argument(line, at, phrase):
    found = [d for d in sized(line) if d.severity == "error"]
    assert len(found) == 1, [d.message for d in found]
    assert (found[0].pos.line, found[0].pos.col) == (3, 5 + line.index(at)), found[0].message
    assert phrase in found[0].message


def test_an_allocation_larger_than_this_machine():
    mem = mem_total()
    found = diagnostics("leaks free\nparam size = 1\nthread t {\n    p = malloc(size)\n}\n",
                        params={"size": mem + 1})
    assert [(where(d), d.severity) for d in found] == [("4:16", "error")]
    assert "in one allocation, more than this machine's" in found[0].message


def test_zero_sizes():
    assert sized("p = malloc(0)") == []  # malloc(0) is legal C and a real case to measure
    found = sized("p = malloc(choice(0))")
    assert [(where(d), d.severity) for d in found] == [("3:16", "warning")]
    assert "every size drawn here is 0" in found[0].message


def test_histogram_files(tmp_path):
    scn = tmp_path / "s.scn"
    (tmp_path / "sizes.csv").write_text("size,count\n16,3\n64,1\n")
    ok = "leaks free\nthread t {\n    p = malloc(histogram(\"sizes.csv\"))\n}\n"
    assert diagnostics(ok, filename=str(scn)) == []

    missing = diagnostics(ok.replace("sizes.csv", "nope.csv"), filename=str(scn))
    assert [where(d) for d in missing] == ["3:26"]
    assert "histogram file 'nope.csv' does not exist" in missing[0].message

    outside = diagnostics(ok.replace("sizes.csv", "../sizes.csv"), filename=str(scn))
    assert [where(d) for d in outside] == ["3:26"]
    assert "outside the scenario's folder" in outside[0].message


def test_a_histogram_file_rewritten_between_two_checks_is_read_again(tmp_path):
    """Histogram tables are made once per content (compiler/distributions.py, histogram_table): a file that
    changes between two checks in one process is checked as it is now."""
    scn = tmp_path / "s.scn"
    text = "leaks free\nthread t {\n    p = malloc(histogram(\"sizes.csv\"))\n}\n"
    (tmp_path / "sizes.csv").write_text("size,count\n16,3\n")
    assert diagnostics(text, filename=str(scn)) == []
    (tmp_path / "sizes.csv").write_text("size,count\n16,-3\n")
    found = diagnostics(text, filename=str(scn))
    assert [where(d) for d in found] == ["3:26"] and "must not be negative" in found[0].message
    (tmp_path / "sizes.csv").write_text("size,count\n16,3\n")
    assert diagnostics(text, filename=str(scn)) == []


# ------------------------------------------------------------ peak live memory

def test_peak_bounds_of_the_sketch_examples():
    def peak(name, params=None):
        return estimate_peak(resolve(parse(textwrap.dedent(SKETCH[name][0])), params or {}))

    # Each thread holds one object of 1 .. maxsize bytes at a time.
    assert peak("loop") == (2 * 1, 2 * 1024)
    # Two pools of 1000 slots of 16 .. 128 bytes.
    assert peak("larson") == (2 * 1000 * 16, 2 * 1000 * 128)
    # Producers hold nothing; the channel up to its capacity; each consumer one object in flight.
    low, high = peak("producer-consumer")
    assert low == 2 * 1 and high == 5000 * 4096 + 2 * 4096 + 2 * 4096
    # calloc 16 x 64, grown to 4096, with the others: all live at once.
    assert peak("c-interface") == (4096 + 256 + 100 + 100,) * 2


def test_lives_forever_accumulates_and_lives_l_is_bounded_by_l():
    low, high = estimate_peak(resolve(parse(textwrap.dedent("""\
        thread worker * 2 {
            repeat 1000 { malloc(1M) lives forever }
            repeat 50 { malloc(1K) lives 10 }
        }
    """))))
    assert low == high == 2 * (1000 * (1 << 20) + 10 * 1024)


def test_unknown_sizes_give_no_upper_bound():
    low, high = estimate_peak(resolve(parse("thread t { n = 16  repeat 10 { n = n * 2 } p = malloc(n) free(p) }")))
    assert high is None and low >= 0


def test_a_scenario_that_cannot_fit_is_an_error():
    size = 1 << 30
    slots = mem_total() // size + 1
    src = """\
        param slots = 1
        thread worker {
            pool objs[slots]
            for i in 0 .. slots { objs[i] = malloc(1G) }
            free_all(objs)
        }
    """
    found = errors(src, params={"slots": slots})
    assert len(found) == 1 and found[0][0] == "2:8", found
    assert f"needs at least {slots}.0 GiB live at its peak but this machine has" in found[0][1]


def test_a_scenario_that_may_not_fit_is_a_warning():
    slots = mem_total() // (1 << 30) + 1
    src = """\
        param slots = 1
        thread worker {
            pool objs[slots]
            for i in 0 .. slots { objs[i] = malloc(uniform(1, 1G)) }
            free_all(objs)
        }
    """
    assert errors(src, params={"slots": slots}) == []
    found = warnings(src, params={"slots": slots})
    assert len(found) == 1 and found[0][0] == "2:8", found
    assert f"may need up to {slots}.0 GiB live at its peak" in found[0][1]


# ------------------------------------------------------------ the command line

def scenc(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "scenc.cli", *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, cwd=cwd, timeout=120)


@pytest.mark.slow
def test_scenc_check_fails_on_errors_with_position_and_caret(tmp_path):
    path = tmp_path / "bad.scn"
    path.write_text("thread worker {\n    p = malloc(64)\n    free(p)\n    free(p)\n}\n")
    proc = scenc("check", str(path))
    assert proc.returncode == 1
    assert f"{path}:4:10: error: p is already freed (freed at line 3)" in proc.stderr
    assert "        free(p)\n             ^" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_scenc_check_passes_with_warnings(tmp_path):
    path = tmp_path / "leaky.scn"
    path.write_text("thread worker {\n    p = malloc(64)\n}\n")
    proc = scenc("check", str(path))
    assert proc.returncode == 0, proc.stderr
    assert f"{path}:2:9: warning: p is still allocated when thread worker ends" in proc.stderr
    assert "1 warning" in proc.stdout


def test_realloc_inside_send_moves_the_pointer_in_checks_and_in_the_program(tmp_path):
    # The checks treat r as moved by the realloc; the program must clear it too,
    # or `leaks free` would free the old block a second time when main ends.
    path = tmp_path / "handoff.scn"
    path.write_text(textwrap.dedent("""\
        leaks free
        channel c capacity 1
        thread main {
            r = malloc(8)
            send(c, realloc(r, 100000))
        }
        thread sink { free(recv(c)) }
    """))
    assert load(path).warnings == []
    bad = path.read_text().replace("send(c, realloc(r, 100000))", "send(c, realloc(r, 100000))\n    free(r)")
    assert "r is already moved away (passed to realloc at line 5)" in diagnostics(bad)[0].message
    proc = subprocess.run([str(build(path).binary)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    main = [t for t in json.loads(proc.stdout)["threads"] if t["group"] == "main"][0]
    assert main["ops"]["free"] == 0  # nothing left for `leaks free` to free
