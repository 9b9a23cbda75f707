"""Progress of long steps (indexing, the model build) on stderr, with no extra dependency.

On a terminal: one line redrawn in place, a bar with the count, the rate and
the time left. Elsewhere (CI logs, `make demo | tee`, a service manager):
a plain line when the step starts, then at most one every ``interval``
seconds, then the final count and rate, so a log shows the step is alive
without a line per item.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

BAR_WIDTH = 30


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class Progress:
    """``update(done)`` as work completes, ``finish()`` at the end; ``total`` may grow."""

    def __init__(
        self,
        label: str,
        total: int,
        *,
        unit: str = "items",
        stream: TextIO | None = None,
        interval: float = 10.0,
        tty: bool | None = None,
        note: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.total = max(int(total), 0)
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.interval = interval
        self._clock = clock
        self._started = clock()
        self._last_line = -float("inf")
        self.done = 0
        self.note = note
        self._finished = False
        self._emit(force=True)

    # -- numbers ------------------------------------------------------------
    def rate(self) -> float:
        """Items per second; 0 until a second has passed (a rate over microseconds means nothing)."""
        elapsed = self._clock() - self._started
        return self.done / elapsed if elapsed >= 1.0 else 0.0

    def eta(self) -> float | None:
        rate = self.rate()
        if not rate or not self.total:
            return None
        return max(self.total - self.done, 0) / rate

    def describe(self) -> str:
        """``512/2054 entities (24%), 18.3/s, ETA 1m24s`` (or ``45%, ETA 4s: step`` in percent)."""
        eta = self.eta()
        if self.unit == "%":
            text = f"{self.done}%"
        else:
            pct = f" ({100 * self.done // self.total}%)" if self.total else ""
            text = f"{self.done}/{self.total} {self.unit}{pct}"
            if self.rate():
                text += f", {self.rate():.1f}/s"
        if eta is not None and self.done < self.total:
            text += f", ETA {_duration(eta)}"
        return text + (f": {self.note}" if self.note else "")

    # -- output ---------------------------------------------------------------
    def update(self, done: int, total: int | None = None, note: str | None = None) -> None:
        if total is not None:
            self.total = max(int(total), 0)
        if note is not None:
            force = note != self.note  # a new step is worth a line in a log
            self.note = note
        else:
            force = False
        self.done = max(int(done), 0)
        self._emit(force=force)

    def advance(self, n: int) -> None:
        self.update(self.done + n)

    def finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        elapsed = self._clock() - self._started
        if self.tty:
            self._draw()
            self.stream.write("\n")
        count = "done" if self.unit == "%" else f"{self.done} {self.unit}"
        rate = f" ({self.rate():.1f}/s)" if self.rate() and self.unit != "%" else ""
        self.stream.write(f"{self.label}: {count} in {_duration(elapsed)}{rate}\n")
        self.stream.flush()

    def _emit(self, force: bool = False) -> None:
        if self.tty:
            self._draw()
            return
        now = self._clock()
        if force or now - self._last_line >= self.interval:
            self._last_line = now
            self.stream.write(f"{self.label}: {self.describe()}\n")
            self.stream.flush()

    def _draw(self) -> None:
        filled = BAR_WIDTH * min(self.done, self.total) // self.total if self.total else 0
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        self.stream.write(f"\r{self.label} [{bar}] {self.describe()}\033[K")
        self.stream.flush()


def step_progress(label: str, *, stream: TextIO | None = None) -> Callable[[str, float], None]:
    """A ``progress(step, fraction)`` callback (the model build's) drawn as a Progress in percent."""
    bar: list[Progress] = []

    def report(step: str, fraction: float) -> None:
        if not bar:
            bar.append(Progress(label, 100, unit="%", stream=stream, interval=5.0, note=step))
        p = bar[0]
        p.update(int(round(fraction * 100)), note=step)
        if fraction >= 1.0:
            p.finish()

    return report
