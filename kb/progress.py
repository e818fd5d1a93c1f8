"""Progress of long work (index builds, embedding, ingest, evaluation) on stderr.

On a terminal: one line rewritten in place, with counts, rate and time left. Otherwise (a log
file, CI): a plain line every ``PLAIN_EVERY_S`` seconds and when the stage ends, so a redirected
run is never silent for minutes. A stage that ends within ``quiet_for_s`` (default 1 s, or
``KB_PROGRESS_AFTER``) prints nothing at all: quick commands keep a clean stderr. ``--quiet``
silences everything. The CLI installs the reporter; library code calls ``report`` and never prints.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

PLAIN_EVERY_S = 10.0


def _quiet_for_default() -> float:
    try:
        return max(0.0, float(os.environ.get("KB_PROGRESS_AFTER", "1")))
    except ValueError:
        return 1.0


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


@dataclass
class Reporter:
    """Turns ``(stage, done, total)`` calls into progress lines on ``stream``."""

    stream: TextIO | None = None  # None: sys.stderr at the time of the call
    quiet: bool = False
    clock: Callable[[], float] = time.monotonic
    quiet_for_s: float = field(default_factory=_quiet_for_default)
    _stage: str | None = None
    _started: float = 0.0
    _last_line: float = 0.0
    _shown: bool = False  # something of this stage was printed
    _open_line: bool = field(default=False, repr=False)

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self.quiet:
            return
        stream = self.stream or sys.stderr
        now = self.clock()
        if stage != self._stage:
            self._end_line(stream)
            self._stage, self._started, self._last_line, self._shown = stage, now, now, False
        elapsed = now - self._started
        line = self._line(stage, done, total, elapsed)
        finished = done >= total
        if not self._shown and elapsed < self.quiet_for_s:
            if finished:
                self._stage = None
            return  # too early to say anything; a quick stage says nothing at all
        if stream.isatty():
            stream.write(f"\r\033[K{line}")
            self._open_line = self._shown = True
            if finished:
                self._end_line(stream)
        elif finished or now - self._last_line >= PLAIN_EVERY_S or not self._shown:
            stream.write(line + "\n")
            self._last_line, self._shown = now, True
        if finished:
            self._stage = None
        stream.flush()

    def _end_line(self, stream: TextIO) -> None:
        if self._open_line:
            stream.write("\n")
            self._open_line = False

    @staticmethod
    def _line(stage: str, done: int, total: int, elapsed: float) -> str:
        text = f"{stage}: {done}/{total}"
        if done >= total:
            return f"{text} in {_duration(elapsed)}"
        if done > 0 and elapsed > 0:
            rate = done / elapsed
            speed = f"{rate:.1f}/s" if rate >= 1 else f"{1 / rate:.1f}s each"
            return f"{text} ({speed}, about {_duration((total - done) / rate)} left)"
        return text


_reporter = Reporter(quiet=True)  # library use (tests, the Python API) prints nothing


def set_reporter(reporter: Reporter) -> None:
    global _reporter
    _reporter = reporter


def report(stage: str, done: int, total: int) -> None:
    """Report progress of ``stage`` through the installed reporter (silent unless the CLI set one)."""
    _reporter(stage, done, total)
