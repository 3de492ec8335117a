/* fidelity.py's runner (not a program under test): run a command once, print its wall time and peak RSS.
 *
 *   launch [NAME=VALUE ...] -- COMMAND [ARGS...]
 *
 * prints "WALL_NS MAXRSS_KIB STATUS" (STATUS: exit code, or -signal). The
 * NAME=VALUE pairs are set in the command's environment only (LD_PRELOAD of
 * the allocator), not in this launcher's. Why a launcher: Linux counts in a
 * child's ru_maxrss the memory of the process it was forked from, up to its
 * exec; a child of the Python bench would show the bench's own 50-60 MiB,
 * a child of this small program shows its own peak. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
  int cmd = 1;
  while (cmd < argc && strcmp(argv[cmd], "--") != 0) cmd++;
  if (cmd + 1 >= argc) { fprintf(stderr, "usage: launch [NAME=VALUE ...] -- COMMAND [ARGS...]\n"); return 2; }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pid_t pid = fork();
  if (pid < 0) { perror("fork"); return 2; }
  if (pid == 0) {
    for (int i = 1; i < cmd; i++) putenv(argv[i]);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 1);
    execvp(argv[cmd + 1], argv + cmd + 1);
    perror(argv[cmd + 1]);
    _exit(127);
  }
  int status;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) < 0) { perror("wait4"); return 2; }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  long long ns = (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  printf("%lld %ld %d\n", ns, ru.ru_maxrss, code);
  return 0;
}
