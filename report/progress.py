"""Progress of `scenc run`: a bar with ETA on a terminal, plain lines otherwise.

Everything goes to stderr so stdout keeps only the result table. Notes
(failures, warnings) are printed on their own line above the bar, so they
stay on screen after the bar moves on.
"""

import sys
import time


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
    WIDTH = 24

    def __init__(self, stream=None, tty=None, quiet=False):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.quiet = quiet
        self.started = time.monotonic()
        self._bar_shown = False

    def _clear(self):
        if self._bar_shown:
            self.stream.write("\r\x1b[K")
            self._bar_shown = False

    def note(self, text: str) -> None:
        """A line that must be seen (a failure, a warning), even when quiet."""
        self._clear()
        self.stream.write(text.rstrip("\n") + "\n")
        self.stream.flush()

    def info(self, text: str) -> None:
        if not self.quiet:
            self.note(text)

    def update(self, done: int, total: int, label: str, eta_s=None) -> None:
        """The bar after `done` of `total` runs; on a pipe nothing (see round_done)."""
        if self.quiet or not self.tty:
            return
        filled = int(self.WIDTH * done / total) if total else self.WIDTH
        bar = "#" * filled + "." * (self.WIDTH - filled)
        eta = f"  ETA {format_duration(eta_s)}" if eta_s is not None else ""
        line = f"[{bar}] {done}/{total} runs{eta}  {label}"
        self._clear()
        self.stream.write(line[:200])
        self.stream.flush()
        self._bar_shown = True

    def round_done(self, text: str) -> None:
        """One line per round when there is no terminal to redraw a bar on."""
        if self.quiet or self.tty:
            return
        self.note(text)

    def close(self) -> None:
        self._clear()
        self.stream.flush()
