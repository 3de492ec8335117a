/* scenc-spawn: start commands and report what wait4 says about each.
 *
 * usage: scenc-spawn --serve REQUEST_FD REPLY_FD OUT_FD ERR_FD PROOF_FD   every run of a session
 *        scenc-spawn REPORT_FD PROGRAM [ARGS...]                   one run (a server, and its client)
 *
 * scenc runs real programs through this launcher rather than forking them
 * from Python: on Linux a process's peak RSS (ru_maxrss) starts from the
 * address space it was forked from, so a child of the Python interpreter
 * would inherit the interpreter's peak. Forked from this small launcher, the
 * program's peak is its own. The launcher also takes the times itself, right
 * around fork and wait4 of the program (and of nothing else), so scenc's own
 * work between runs is not in them.
 *
 * The launcher stays up for the whole session (run/program/runner.py's
 * LauncherRunner starts it once), so a run costs scenc no fork and exec of its
 * own: Python's fork of itself and the launcher's exec were most of the 2.5-4.6 ms
 * scenc spent between runs when a launcher was started for each. A request
 * is a u32 length, then that many bytes of NUL-terminated strings:
 *     cwd ("": the launcher's), stdin ("": /dev/null), RLIMIT_DATA bytes ("": none),
 *     argc, argv[0..argc), envc, env[0..envc) ("NAME=value", LD_PRELOAD included)
 * For each request the launcher notes where OUT_FD, ERR_FD and PROOF_FD end (the files
 * the program's stdout and stderr go to, and the preload proof's, which each process of
 * the program appends a line to), forks the program and writes two
 * fixed binary records (native byte order; struct started and struct ended below) to
 * REPLY_FD: the program's pid as soon as it is forked (scenc kills its process group,
 * the program's own session, on a timeout or Ctrl-C), then, when it has ended, its
 * wait status and rusage, where its stdout and stderr are in their files, and after the
 * record the proof file's bytes written during the run (proof.c's lines). Records rather than text
 * lines, and the proof in the reply rather than a file scenc opens: between two runs
 * scenc's own work is a share of a short program's time, and parsing and file calls
 * were most of it. A program that crashes, or is killed, is only a report; the launcher ends
 * when REQUEST_FD reaches its end (scenc is done, or gone).
 *
 * The launcher itself runs without LD_PRELOAD; the program's comes in its request.
 *
 * One run (`scenc run --server`: the server and its client): the program's stdin,
 * stdout, stderr and cwd are the launcher's; the report goes to REPORT_FD. The
 * environment read here (and removed before the program starts):
 *   SCENC_SPAWN_PRELOAD     becomes the program's LD_PRELOAD (the launcher
 *                           itself runs without one);
 *   SCENC_SPAWN_DATA_LIMIT  bytes of RLIMIT_DATA for the program (a stricter
 *                           hard limit already in place stays);
 *   SCENC_SPAWN_SERVER      "1": the program is a server that scenc stops itself
 *                           (`scenc run --server`). It gets a process group of
 *                           its own, so scenc can signal the server and all it
 *                           started without signalling the launcher, whose wait4
 *                           must still see the server end; the launcher writes
 *                           "pid=N" to REPORT_FD as soon as the server exists.
 *                           The launcher and the server die with their parent
 *                           (PR_SET_PDEATHSIG): a killed scenc leaves no server.
 *
 * The report of one run (REPORT_FD), one line:
 *   status=<wait status> wall_ns=N user_us=N sys_us=N maxrss_kib=N minflt=N majflt=N exec_errno=N
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long tv_us(struct timeval tv) {
    return (long long)tv.tv_sec * 1000000LL + tv.tv_usec;
}

/* In the child: RLIMIT_DATA of `limit` bytes, a stricter hard limit already in place staying. */
static void limit_data(const char *limit) {
    if (!limit || !*limit) return;
    struct rlimit rl;
    rlim_t want = (rlim_t)strtoull(limit, NULL, 10);
    if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want)
        want = rl.rlim_max;   /* the user's own stricter limit stays */
    rl.rlim_cur = rl.rlim_max = want;
    setrlimit(RLIMIT_DATA, &rl);
}

/* Die with the parent: a server must not outlive the scenc that started it. */
static void die_with_parent(pid_t parent) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)   /* the parent died before prctl */
        _exit(127);
}

/* In the child, between fork and exec: the limit and the preload. */
static void prepare_child(void) {
    limit_data(getenv("SCENC_SPAWN_DATA_LIMIT"));
    const char *preload = getenv("SCENC_SPAWN_PRELOAD");
    if (preload && *preload)
        setenv("LD_PRELOAD", preload, 1);
    else
        unsetenv("LD_PRELOAD");
    unsetenv("SCENC_SPAWN_PRELOAD");
    unsetenv("SCENC_SPAWN_DATA_LIMIT");
    unsetenv("SCENC_SPAWN_SERVER");
}

/* --------------------------------------------------------------- serving */
#define STARTED 0x50435353u   /* "SSCP": the program is forked */
#define ENDED 0x45435353u     /* "SSCE": the program has ended */

struct started {
    uint32_t kind;
    int32_t pid;
};

struct ended {
    uint32_t kind;
    int32_t status;           /* wait status */
    int64_t wall_ns, user_us, sys_us, maxrss_kib, minflt, majflt;
    int32_t exec_errno;       /* exec failed with this errno (0: it did not) */
    uint32_t proof_bytes;     /* the proof file's bytes that follow the record */
    int64_t out_from, out_bytes, err_from, err_bytes;   /* where in OUT_FD, ERR_FD the run's output is */
};
_Static_assert(sizeof(struct started) == 8 && sizeof(struct ended) == 96, "run/program/runner.py reads these sizes");

static int write_all(int fd, struct iovec *iov, int n) {
    while (n > 0) {
        ssize_t put = writev(fd, iov, n);
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0) return -1;
        while (n > 0 && (size_t)put >= iov->iov_len) {
            put -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + put;
            iov->iov_len -= (size_t)put;
        }
    }
    return 0;
}

static int64_t file_bytes(int fd) {
    struct stat st;
    return fstat(fd, &st) == 0 ? (int64_t)st.st_size : 0;
}

/* The proof file's lines from `from` on: those of this run's processes. */
static char *read_proof(int fd, int64_t from, uint32_t *len) {
    static char *buf;
    static size_t cap;
    int64_t size = file_bytes(fd) - from;
    if (size < 0) size = 0;
    if (size > (int64_t)UINT32_MAX / 2) size = (int64_t)UINT32_MAX / 2;
    if ((size_t)size > cap) {
        char *grown = realloc(buf, (size_t)size);
        if (!grown) size = (int64_t)cap;
        else buf = grown, cap = (size_t)size;
    }
    size_t got = 0;
    while (got < (size_t)size) {
        ssize_t n = pread(fd, buf + got, (size_t)size - got, (off_t)(from + (int64_t)got));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    *len = (uint32_t)got;
    return buf;
}

/* Where a run's bytes of a file the program writes to (its stdout, stderr, the proof's lines) will
 * start: its end. The files are emptied only once they hold KEPT_BYTES: truncating a file is a
 * journal update on ext4 that may wait for another process's fsync, and a file truncated to nothing
 * has its blocks written out when a process that wrote it closes it (the auto_da_alloc safeguard),
 * which the next truncation then waits for: a few milliseconds every run on a busy disk. */
#define KEPT_BYTES (1 << 20)
static int64_t run_start(int fd) {
    off_t end = lseek(fd, 0, SEEK_END);       /* where the program's writes (sharing the offset) go */
    if (end < 0) return -1;
    if (end < KEPT_BYTES) return (int64_t)end;
    return ftruncate(fd, 0) == 0 && lseek(fd, 0, SEEK_SET) == 0 ? 0 : -1;
}

/* Waits for the program, then writes its record: its wait status and rusage, nothing else's. */
static int report(int fd, pid_t pid, long long t0, int errpipe, int out, int err, int proof,
                  const int64_t from[3]) {
    int status = 0;
    struct rusage ru;
    siginfo_t ended;
    while (waitid(P_PID, (id_t)pid, &ended, WEXITED | WNOWAIT) < 0) {   /* ended, not reaped yet */
        if (errno != EINTR) {
            perror("scenc-spawn: waitid");
            return -1;
        }
    }
    long long wall = now_ns() - t0;
    /* The program's group killed before its leader is reaped (the zombie keeps the group's id from being
     * reused): a child it left running (`sleep 1000 &`) must not outlive the run. */
    kill(-pid, SIGKILL);
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            perror("scenc-spawn: wait4");
            return -1;
        }
    }
    int exec_errno = 0;
    if (read(errpipe, &exec_errno, sizeof exec_errno) != (ssize_t)sizeof exec_errno)
        exec_errno = 0;
    close(errpipe);
    struct ended r = {ENDED, status, wall, tv_us(ru.ru_utime), tv_us(ru.ru_stime), ru.ru_maxrss, ru.ru_minflt,
                      ru.ru_majflt, exec_errno, 0, from[0], file_bytes(out) - from[0], from[1],
                      file_bytes(err) - from[1]};
    char *lines = read_proof(proof, from[2], &r.proof_bytes);
    struct iovec iov[2] = {{&r, sizeof r}, {lines, r.proof_bytes}};
    return write_all(fd, iov, r.proof_bytes ? 2 : 1);
}

static int read_all(int fd, void *buf, size_t n) {
    char *p = buf;
    while (n) {
        ssize_t got = read(fd, p, n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return got == 0 && p == buf ? 0 : -1;   /* 0: the end, between requests */
        p += got;
        n -= (size_t)got;
    }
    return 1;
}

/* The next string of a request; NULL when it runs past the end. */
static char *field(char **at, char *end) {
    char *s = *at, *nul = s < end ? memchr(s, 0, (size_t)(end - s)) : NULL;
    if (!nul) return NULL;
    *at = nul + 1;
    return s;
}

static char **strings(char **at, char *end) {
    char *count = field(at, end);
    if (!count) return NULL;
    long n = strtol(count, NULL, 10);
    if (n < 0 || n > (end - *at)) return NULL;
    char **v = calloc((size_t)n + 1, sizeof *v);
    if (!v) return NULL;
    for (long i = 0; i < n; i++)
        if (!(v[i] = field(at, end))) {
            free(v);
            return NULL;
        }
    return v;
}

/* One request: fork the program, tell its pid, wait, report. -1 when the request or a reply cannot be made. */
static int serve_one(char *req, char *end, int reply, int out, int err, int proof) {
    char *at = req;
    char *cwd = field(&at, end), *in = field(&at, end), *limit = field(&at, end);
    char **argv = cwd && in && limit ? strings(&at, end) : NULL;
    char **envp = argv ? strings(&at, end) : NULL;
    if (!envp || !argv[0]) {
        free(argv);
        fprintf(stderr, "scenc-spawn: a malformed request\n");
        return -1;
    }
    int errpipe[2];
    int64_t from[3] = {run_start(out), run_start(err), run_start(proof)};
    if (from[0] < 0 || from[1] < 0 || from[2] < 0) {
        perror("scenc-spawn: the output files");
        return -1;
    }
    if (pipe2(errpipe, O_CLOEXEC) != 0) {
        perror("scenc-spawn: pipe");
        return -1;
    }
    long long t0 = now_ns();
    pid_t pid = fork();
    if (pid < 0) {
        perror("scenc-spawn: fork");
        return -1;
    }
    if (pid == 0) {
        close(errpipe[0]);
        setsid();                             /* its own session and process group: scenc kills it whole */
        signal(SIGPIPE, SIG_DFL);
        int e = 0, fd = open(*in ? in : "/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0 || dup2(fd, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0 || (*cwd && chdir(cwd) != 0))
            e = errno;
        if (!e) {
            limit_data(limit);
            environ = envp;                   /* execvp looks PATH up in the program's environment */
            execvp(argv[0], argv);
            e = errno;
        }
        if (write(errpipe[1], &e, sizeof e) < 0) { /* nothing more to say */ }
        _exit(127);
    }
    close(errpipe[1]);
    free(argv);
    free(envp);
    struct started started = {STARTED, (int32_t)pid};
    struct iovec iov = {&started, sizeof started};
    if (write_all(reply, &iov, 1) != 0) return -1;
    return report(reply, pid, t0, errpipe[0], out, err, proof, from);
}

static int serve(int request, int reply, int out, int err, int proof) {
    signal(SIGPIPE, SIG_IGN);                 /* scenc gone: a failed write ends the loop */
    fcntl(request, F_SETFD, FD_CLOEXEC);
    fcntl(reply, F_SETFD, FD_CLOEXEC);
    fcntl(out, F_SETFD, FD_CLOEXEC);
    fcntl(err, F_SETFD, FD_CLOEXEC);
    fcntl(proof, F_SETFD, FD_CLOEXEC);
    char *buf = NULL;
    size_t cap = 0;
    for (;;) {
        uint32_t len;
        int got = read_all(request, &len, sizeof len);
        if (got <= 0) return got == 0 ? 0 : 2;
        if (len > cap) {
            free(buf);
            cap = len;
            if (!(buf = malloc(cap))) return 2;
        }
        if (read_all(request, buf, len) != 1) return 2;
        if (serve_one(buf, buf + len, reply, out, err, proof) != 0) return 2;
    }
}

/* One run: `scenc-spawn REPORT_FD PROGRAM [ARGS...]`. */
static int run_once(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: scenc-spawn REPORT_FD PROGRAM [ARGS...] | --serve REQUEST_FD REPLY_FD OUT_FD ERR_FD PROOF_FD\n");
        return 2;
    }
    int report = atoi(argv[1]);
    int errpipe[2];
    /* The program must not inherit the report; a close-on-exec pipe tells
     * the launcher whether exec itself failed. */
    if (fcntl(report, F_SETFD, FD_CLOEXEC) != 0 || pipe2(errpipe, O_CLOEXEC) != 0) {
        perror("scenc-spawn");
        return 2;
    }
    const char *server_flag = getenv("SCENC_SPAWN_SERVER");
    int server = server_flag && !strcmp(server_flag, "1");
    pid_t launcher = getpid();
    if (server)
        die_with_parent(getppid());
    long long t0 = now_ns();
    pid_t pid = fork();
    if (pid < 0) {
        perror("scenc-spawn: fork");
        return 2;
    }
    if (pid == 0) {
        close(errpipe[0]);
        if (server) {
            setpgid(0, 0);
            die_with_parent(launcher);
        }
        prepare_child();
        execvp(argv[2], argv + 2);
        int e = errno;
        if (write(errpipe[1], &e, sizeof e) < 0) { /* nothing more to say */ }
        _exit(127);
    }
    close(errpipe[1]);
    if (server) {
        /* Both sides set the group, so it exists whichever runs first. */
        setpgid(pid, pid);
        dprintf(report, "pid=%d\n", (int)pid);
    }
    int status = 0;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            perror("scenc-spawn: wait4");
            return 2;
        }
    }
    long long wall = now_ns() - t0;
    int exec_errno = 0;
    if (read(errpipe[0], &exec_errno, sizeof exec_errno) != (ssize_t)sizeof exec_errno)
        exec_errno = 0;
    dprintf(report, "status=%d wall_ns=%lld user_us=%lld sys_us=%lld maxrss_kib=%ld minflt=%ld "
                    "majflt=%ld exec_errno=%d\n", status, wall, tv_us(ru.ru_utime), tv_us(ru.ru_stime),
            ru.ru_maxrss, ru.ru_minflt, ru.ru_majflt, exec_errno);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 7 && strcmp(argv[1], "--serve") == 0)
        return serve(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]));
    return run_once(argc, argv);
}
