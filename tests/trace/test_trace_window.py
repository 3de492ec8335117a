"""A window marked in a threaded program's log: the marks cut each thread's own order where it was.

Real parts: a C program with two threads, the tracer preloaded, its control thread driven through
trace/capture/window.py as `scenc capture --server` drives it, the C converter and the Python reader. The
program's threads wait (on a pipe) at each mark, as a server waits for its client: their first records
after a wait carry clocks behind the time, which a window by time alone would put before the mark.
"""

import subprocess

from scenc.trace.capture.preload import prepare_preload
from scenc.trace.capture.window import WindowControl
from scenc.trace.opsfile import SETUP, read_header, read_ops
from scenc.trace.replay import convert_log
from scenc.trace.source import TraceSource

# Each thread: 40 blocks of 100 bytes made, 20 of them freed (before); the program says "waiting" and reads a
# line; 30 blocks of 200 made and freed, and the other thread's first 10 blocks of 100 freed (the window);
# "waiting" and a line again; everything freed (after).
PROGRAM = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static char *kept[2][40];
static pthread_barrier_t gate;
static void step(int me) {
    pthread_barrier_wait(&gate);
    if (me == 0) {
        char line[8];
        printf("waiting\n");
        fflush(stdout);
        if (!fgets(line, sizeof line, stdin)) exit(1);
    }
    pthread_barrier_wait(&gate);
}
static void *work(void *arg) {
    int me = (int)(long)arg;
    for (int i = 0; i < 40; i++) kept[me][i] = malloc(100);
    for (int i = 20; i < 40; i++) { free(kept[me][i]); kept[me][i] = NULL; }
    step(me);
    for (int i = 0; i < 30; i++) { char *p = malloc(200); *p = 1; free(p); }
    pthread_barrier_wait(&gate);
    for (int i = 0; i < 10; i++) { free(kept[1 - me][i]); kept[1 - me][i] = NULL; }
    step(me);
    for (int i = 0; i < 40; i++) free(kept[me][i]);
    return NULL;
}
int main(void) {
    static char in[4096], out[4096];      /* stdio's buffers not from malloc: every call is the threads' */
    setvbuf(stdin, in, _IOFBF, sizeof in);
    setvbuf(stdout, out, _IOFBF, sizeof out);
    pthread_t t[2];
    pthread_barrier_init(&gate, NULL, 2);
    for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, work, (void *)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    return 0;
}
"""


def test_two_waiting_threads_are_cut_where_each_one_was(tmp_path):
    source = tmp_path / "window.c"
    source.write_text(PROGRAM)
    prog = tmp_path / "window"
    subprocess.run(["gcc", "-O1", "-pthread", "-fno-builtin", "-o", str(prog), str(source)], check=True)
    log = tmp_path / "window.trace"
    with WindowControl() as control:
        _, _, _, env, _, _ = prepare_preload([str(prog)], log, None)
        proc = subprocess.Popen([str(prog)], env={**env, **control.env}, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE)
        assert proc.stdout.readline() == b"waiting\n"
        assert control.mark("open") is None
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == b"waiting\n"          # the window's work is done
        assert control.mark("close") is None
        proc.stdin.write(b"go\n")
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    ops_path = tmp_path / "window.ops"
    report, _ = convert_log(log, ops_path, "none")
    assert report.window["opened"] and report.window["closed"]
    assert report.window["setup_objects"] >= 40               # 20 of 100 bytes left in each thread, and libc's
    flags = read_header(ops_path.read_bytes(), ops_path).flags
    _, ops = read_ops(ops_path)
    setup = [op for i, t in enumerate(ops) if flags[i] & SETUP for op in t]
    window = [op for i, t in enumerate(ops) if not flags[i] & SETUP for op in t]
    assert [op[8] for op in setup].count(100) == 40
    assert sorted(op[8] for op in window if op[0] == "malloc") == [200] * 60
    # the window's frees: the 60 blocks of 200, and 10 of 100 per thread freed by the other one
    assert sum(op[0] == "free" for op in window) == 60 + 20
    events = list(TraceSource(log, extra_events=True, window=True).events)
    sizes = [e.size for e in events if e.kind == "malloc"]
    assert sizes.count(100) == 40 and sizes.count(200) == 60
    assert sum(e.kind == "free" for e in events) == 80


def test_a_reservation_made_writable_before_the_window_is_made_writable_at_its_open():
    """The generator alone, on events written here (what the reader yields for a log with marks): a 64 KiB
    PROT_NONE reservation whose middle 16 KiB mprotect made writable before ready is remade at the open as its
    three parts, the middle one writable, so the model holds it as memory."""
    from scenc.trace.events import AllocEvent
    from scenc.trace.window import windowed_events

    def event(line, kind, size, nmemb=1, align=None, old=None, res=None):
        return AllocEvent(line, 7, line / 1000, kind, size, nmemb, align, old, res, False, line, None)
    base = 0x7f0000000000
    events = [event(1, "mmap", 65536, 0, 0x22, res=base),
              event(2, "mprotect", 16384, 3, old=base + 16384),
              event(3, "window", 1), event(4, "malloc", 100, res=0x1000), event(5, "window", 2)]
    made = [(e.kind, e.result_ptr - base, e.size, e.nmemb) for e in windowed_events(events) if e.kind == "mmap"]
    assert sorted(made) == [("mmap", 0, 16384, 0), ("mmap", 16384, 16384, 3), ("mmap", 32768, 32768, 0)]


# Counts the sockets among this process's descriptors from 900 up (where the tracer keeps its control socket),
# then forks; the child counts its own.
FORKS = r"""
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static int high_sockets(void) {
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d && (e = readdir(d));) {
        char path[64], target[64];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, target, sizeof target - 1);
        if (len > 0 && atoi(e->d_name) >= 900 && strncmp(target, "socket:", 7) == 0) n++;
    }
    if (d) closedir(d);
    return n;
}
int main(void) {
    printf("parent %d\n", high_sockets());
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        printf("child %d\n", high_sockets());
        fflush(stdout);
        _exit(0);
    }
    waitpid(child, NULL, 0);
    return 0;
}
"""


def test_a_forked_child_does_not_keep_the_control_socket(tmp_path):
    """Only the process scenc launched talks to scenc: a server's forked worker that kept the control socket
    open would keep scenc from seeing it end with its server."""
    source = tmp_path / "forks.c"
    source.write_text(FORKS)
    prog = tmp_path / "forks"
    subprocess.run(["gcc", "-O1", "-o", str(prog), str(source)], check=True)
    with WindowControl() as control:
        _, _, _, env, _, _ = prepare_preload([str(prog)], tmp_path / "forks.trace", None)
        out = subprocess.run([str(prog)], env={**env, **control.env}, stdout=subprocess.PIPE, timeout=30,
                             check=True).stdout.decode().split("\n")
    assert out[:2] == ["parent 1", "child 0"], out
