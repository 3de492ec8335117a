"""Progress of `scenc run`: one line updated in place on a terminal, plain lines otherwise.

On a terminal the line is a tqdm bar: runs done/total, time elapsed, time left (scenc's
own estimate: the runs still planned times each configuration's mean duration, which
knows more than tqdm's rate) and the run in progress. On a pipe or a file there is no
bar: a round's line (`round_done`) at most every PIPE_INTERVAL_S, and the last one at the
end (`close`), so a log stays short: the README's first command (50 rounds in 45 s) writes 5.

Everything goes to stderr so stdout keeps only the result table. Notes (failures,
warnings) are printed on their own line above the bar, so they stay on screen after
the bar moves on.
"""

import os
import sys
import time

from tqdm import tqdm

BAR_FORMAT = "{n}/{total} runs |{bar}| {elapsed} elapsed{postfix}"
PIPE_INTERVAL_S = 10.0   # on a pipe, at most a line this often (and the last at the end)
BAR_INTERVAL_S = 0.1     # on a terminal, the bar redrawn at most this often (as tqdm's own default)
MIN_BAR = 10  # columns the bar keeps at least: the label of the run in progress is shortened first


def format_duration(seconds: float) -> str:
    if seconds is None:
        return "?"
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class Progress:
    def __init__(self, stream=None, tty=None, quiet=False, clock=time.monotonic):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.quiet = quiet
        self.clock = clock
        self.started = clock()
        self._bar = None
        self._shown_at = self.started      # on a pipe: when the last round's line was written
        self._drawn_at = None              # on a terminal: when the bar was last drawn
        self._pending = None               # on a pipe: the last round's line, not written yet

    def note(self, text: str) -> None:
        """A line that must be seen (a failure, a warning), even when quiet."""
        if self._bar is not None:
            self._bar.write(text.rstrip("\n"), file=self.stream)   # above the bar, which is redrawn
        else:
            self.stream.write(text.rstrip("\n") + "\n")
        self.stream.flush()

    def info(self, text: str) -> None:
        if not self.quiet:
            self.note(text)

    @property
    def shows_bar(self) -> bool:
        """Is there a bar for `update` to draw (a terminal, not --quiet)?"""
        return self.tty and not self.quiet

    def due(self) -> bool:
        """Is it time to redraw the bar? At most every BAR_INTERVAL_S: a session of short runs would
        otherwise spend a share of each run redrawing it (and what `update` is given costs the session
        a little to work out, so it asks first)."""
        return self.shows_bar and (self._drawn_at is None or self.clock() - self._drawn_at >= BAR_INTERVAL_S)

    def update(self, done: int, total: int, label: str, eta_s=None) -> None:
        """The line after `done` of `total` runs, `label` the run starting now; on a pipe
        nothing (see round_done)."""
        if self.quiet or not self.tty:
            return
        if self._bar is None:
            columns, lines = self._size()
            self._bar = tqdm(total=total, file=self.stream, bar_format=BAR_FORMAT, ncols=columns,
                             nrows=lines, leave=False, mininterval=0, smoothing=0)
        self._bar.ncols, self._bar.nrows = self._size()     # the terminal may have been resized
        left = f"about {format_duration(eta_s)} left; " if eta_s is not None else ""
        self._bar.total = total
        self._bar.n = done
        self._bar.set_postfix_str(self._postfix(done, total, left, label), refresh=False)
        self._bar.refresh()
        self._drawn_at = self.clock()

    def _postfix(self, done: int, total: int, left: str, label: str) -> str:
        """What follows the bar, shortened so that the bar keeps MIN_BAR columns of the line
        (a long param set's label would otherwise leave it none on 80 columns)."""
        elapsed = tqdm.format_interval(self._bar.format_dict["elapsed"])
        fixed = len(f"{done}/{total} runs |") + MIN_BAR + len(f"| {elapsed} elapsed, {left}now ")
        room = self._bar.ncols - fixed
        if len(label) > room:
            label = label[:room - 1] + "…" if room >= 8 else ""
        text = f"{left}now {label}" if label else left.rstrip("; ")
        return text                                        # tqdm puts ", " before it

    def _size(self):
        """The terminal's columns and lines; 80 x 24 where it does not say (a new pseudo-terminal
        says 0 x 0, on which tqdm would draw nothing)."""
        try:
            size = os.get_terminal_size(self.stream.fileno())
        except (AttributeError, OSError, ValueError):
            return 80, 24
        return size.columns or 80, size.lines or 24

    def round_done(self, text: str) -> None:
        """A round's line when there is no terminal to redraw a line on: written if PIPE_INTERVAL_S passed
        since the last one, else kept for `close` (a later round's replaces it)."""
        if self.quiet or self.tty:
            return
        self._pending = text
        if self.clock() - self._shown_at >= PIPE_INTERVAL_S:
            self._show_pending()

    def _show_pending(self) -> None:
        text, self._pending = self._pending, None
        self._shown_at = self.clock()
        self.note(text)

    def close(self) -> None:
        """The end: the bar cleared, or on a pipe the last round's line if it was not written yet."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self._pending is not None:
            self._show_pending()
        self.stream.flush()
