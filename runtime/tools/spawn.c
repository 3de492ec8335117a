/* scenc-spawn: start one command and report what wait4 says about it.
 *
 * usage: scenc-spawn REPORT_FD PROGRAM [ARGS...]
 *
 * scenc runs real programs through this launcher rather than forking them
 * from Python: on Linux a process's peak RSS (ru_maxrss) starts from the
 * address space it was forked from, so a child of the Python interpreter
 * would inherit the interpreter's peak. Forked from this small launcher, the
 * program's peak is its own. The launcher also takes the times itself, right
 * around fork and wait4, so scenc's own start-up is not in them.
 *
 * Environment read here (and removed before the program starts):
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
 * One line goes to REPORT_FD when the program has ended:
 *   status=<wait status> wall_ns=N user_us=N sys_us=N maxrss_kib=N minflt=N majflt=N exec_errno=N
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long tv_us(struct timeval tv) {
    return (long long)tv.tv_sec * 1000000LL + tv.tv_usec;
}

/* Die with the parent: a server must not outlive the scenc that started it. */
static void die_with_parent(pid_t parent) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)   /* the parent died before prctl */
        _exit(127);
}

/* In the child, between fork and exec: the limit and the preload. */
static void prepare_child(void) {
    const char *limit = getenv("SCENC_SPAWN_DATA_LIMIT");
    if (limit && *limit) {
        struct rlimit rl;
        rlim_t want = (rlim_t)strtoull(limit, NULL, 10);
        if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want)
            want = rl.rlim_max;   /* the user's own stricter limit stays */
        rl.rlim_cur = rl.rlim_max = want;
        setrlimit(RLIMIT_DATA, &rl);
    }
    const char *preload = getenv("SCENC_SPAWN_PRELOAD");
    if (preload && *preload)
        setenv("LD_PRELOAD", preload, 1);
    else
        unsetenv("LD_PRELOAD");
    unsetenv("SCENC_SPAWN_PRELOAD");
    unsetenv("SCENC_SPAWN_DATA_LIMIT");
    unsetenv("SCENC_SPAWN_SERVER");
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: scenc-spawn REPORT_FD PROGRAM [ARGS...]\n");
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
