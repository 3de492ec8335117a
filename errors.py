"""scenc's errors that reach the user, and the exit codes they end in.

A command raises `UsageError` for a command line (or an input file) it cannot
carry out; `cli.main` is the one place that turns it, and every other error,
into a message and an exit code. The exit codes below are the only ones scenc
uses; docs/running.md lists them for users. Imports nothing of scenc.
"""

EXIT_OK = 0
EXIT_SCENARIO = 1       # the scenario has errors (file:line:col)
EXIT_BUILD = 2          # the C compiler failed
EXIT_RUN = 3            # a run failed, or the runs could not start or be saved; convert's C tool failed
EXIT_INCOMPLETE = 4     # capture, trace-stats, convert: done, but the capture is incomplete or saw nothing
EXIT_WORSE = 5          # compare --fail-if-worse: an allocator significantly worse in a later file (a CI gate)
EXIT_USAGE = 64         # a command line or an input that cannot be used (not a capture, not a result file ...)
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT); `scenc run` also exits 143 on SIGTERM


class UsageError(Exception):
    """A command line that cannot be carried out; the message says why."""

    def render(self) -> str:
        return f"scenc: {self}"


class UnusableInput(UsageError):
    """An input a command cannot use, whose message is already a whole line (it names the command or file)."""

    def render(self) -> str:
        return str(self)
