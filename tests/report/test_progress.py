"""report.progress: one line updated in place on a terminal (a real pseudo-terminal here, as a
person's shell would give scenc), on a pipe a round's line at most every PIPE_INTERVAL_S and the last
one at the end."""
import pytest
import io
import os
import pty
import select
import subprocess

from harness_support import SCENC, write_scenario

from scenc.report.progress import PIPE_INTERVAL_S, Progress


def test_on_a_terminal_one_line_is_redrawn_with_counts_times_and_the_run_in_progress():
    out = io.StringIO()
    p = Progress(stream=out, tty=True)
    p.update(0, 8, "warm-up glibc", 3.0)
    p.note("scenc: run 1 of glibc crashed")
    p.update(3, 8, "round 1/2  tcmalloc", 2.0)
    p.round_done("round 1/2 done")                  # not on a terminal: the line says it all
    text = out.getvalue()
    last = text.rsplit("\r", 1)[1]
    assert last.startswith("3/8 runs |") and "elapsed, about 2.0 s left; now round 1/2  tcmalloc" in last
    assert "\nscenc: run 1 of glibc crashed\n" in text.replace("\r", "\n")
    assert "round 1/2 done" not in text and text.count("\n") == 1          # only the note
    p.close()
    assert out.getvalue().endswith("\r")                                      # the line is cleared


def test_on_80_columns_the_bar_keeps_its_width_and_the_label_is_shortened():
    # issue 28: a long param set's label left the bar 0 or 1 character wide.
    from scenc.report.progress import MIN_BAR
    out = io.StringIO()                               # no fileno: 80 x 24, as a terminal that does not say
    p = Progress(stream=out, tty=True)
    p.update(22, 84, "round 6/50  jemalloc threads=2 iterations=1000000 maxsize=1024 [time+memory]", 33.0)
    line = out.getvalue().rsplit("\r", 1)[1]
    assert len(line) <= 80
    bar = line.split("|")[1]
    assert len(bar) >= MIN_BAR, line
    assert "about 33 s left; now round 6/50  jemall" in line and line.endswith("…")
    p.update(23, 84, "round 6/50  glibc", 30.0)   # a short label is left whole
    assert out.getvalue().rsplit("\r", 1)[1].endswith("now round 6/50  glibc")
    p.close()


def test_on_a_pipe_one_line_per_round_and_nothing_redrawn():
    out = io.StringIO()
    p = Progress(stream=out, tty=False)
    p.update(3, 8, "round 1/2  tcmalloc", 2.0)
    p.round_done("round 1/2 done: 4 runs in 1.2 s")
    p.close()
    assert out.getvalue() == "round 1/2 done: 4 runs in 1.2 s\n"


def test_on_a_pipe_at_most_a_line_every_interval_and_the_last_round_at_the_end():
    """The README's first command: 50 rounds in 45 s, a round every 0.9 s: a line per round was 50 lines."""
    now = [0.0]
    out = io.StringIO()
    p = Progress(stream=out, tty=False, clock=lambda: now[0])
    for r in range(1, 51):
        now[0] = 0.9 * r
        p.update(4 * r, 200, f"round {r}/50  glibc", 1.0)
        p.round_done(f"round {r}/50 done: {4 * r} runs in {now[0]:.1f} s")
    p.note("scenc: a failure is said at once")
    p.close()
    lines = out.getvalue().splitlines()
    rounds = [line for line in lines if line.startswith("round ")]
    times = [float(line.split(" in ")[1][:-2]) for line in rounds]
    assert len(rounds) <= 45 / PIPE_INTERVAL_S + 1 and len(rounds) >= 2
    assert all(b - a >= PIPE_INTERVAL_S for a, b in zip(times, times[1:-1]))   # the last is the summary
    assert rounds[-1] == "round 50/50 done: 200 runs in 45.0 s" and lines[-1] == rounds[-1]
    assert "scenc: a failure is said at once" in lines


def _run_scenc(args, stderr_is_a_terminal: bool) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if not stderr_is_a_terminal:
        done = subprocess.run(SCENC + args, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stderr
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(SCENC + args, env=env, stdout=subprocess.DEVNULL, stderr=secondary)
    os.close(secondary)
    chunks = []
    while True:
        ready, _, _ = select.select([primary], [], [], 300)
        assert ready, "scenc printed nothing for 5 minutes"
        try:
            chunk = os.read(primary, 65536)
        except OSError:          # EIO: the terminal's other end is closed, scenc is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(primary)
    assert proc.wait(timeout=60) == 0
    return b"".join(chunks).decode()


@pytest.mark.slow
def test_scenc_run_on_a_terminal_and_on_a_pipe(tmp_path):
    scn = write_scenario(tmp_path)
    args = ["run", str(scn), "--allocators", "glibc", "--runs", "3", "-o"]
    terminal = _run_scenc(args + [str(tmp_path / "t.json")], stderr_is_a_terminal=True)
    assert "\r" in terminal and "3/4 runs |" in terminal and "now round 3/3  glibc" in terminal
    assert "round 1/3 done" not in terminal
    piped = _run_scenc(args + [str(tmp_path / "p.json")], stderr_is_a_terminal=False)
    assert "\r" not in piped and "runs |" not in piped
    rounds = [line.split(":")[0] for line in piped.splitlines() if line.startswith("round ")]
    assert rounds[-1] == "round 3/3 done" and len(rounds) == len(set(rounds)) <= 3   # a few seconds: the last
