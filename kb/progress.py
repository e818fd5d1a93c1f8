"""Progress of long work (index builds, embedding, ingest, evaluation) on stderr.

On a terminal: one line rewritten in place, with counts, rate and time left. Otherwise (a log
file, CI): a plain line every ``PLAIN_EVERY_S`` seconds (``KB_PROGRESS_EVERY``) and when the
stage ends, so a redirected run is never silent for minutes. With ``tick`` (the CLI's reporter)
a timer thread writes that line on time even when the work reports nothing for a while (one
long model call): the line says how long the stage has run. Counts name their unit
("check 40 pages: 7/8 rule families", "embed: 40/799 chunks"). A stage that ends within ``quiet_for_s`` (default 1 s, or
``KB_PROGRESS_AFTER``) prints nothing at all: quick commands keep a clean stderr. ``--quiet``
silences everything. The CLI installs the reporter; library code calls ``report`` and never prints.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

PLAIN_EVERY_S = 10.0


def _seconds_from_env(name: str, default: float, least: float) -> float:
    try:
        return max(least, float(os.environ.get(name, str(default))))
    except ValueError:
        return default


def _quiet_for_default() -> float:
    return _seconds_from_env("KB_PROGRESS_AFTER", 1.0, 0.0)


def _every_default() -> float:
    return _seconds_from_env("KB_PROGRESS_EVERY", PLAIN_EVERY_S, 0.1)


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
    every_s: float = field(default_factory=_every_default)
    tick: bool = False  # a timer thread writes the plain line on time (the CLI's reporter)
    _stage: str | None = None
    _started: float = 0.0
    _last_line: float = 0.0
    _shown: bool = False  # something of this stage was printed
    _open_line: bool = field(default=False, repr=False)
    _now: tuple[int, int, str] = (0, 0, "")  # the stage's last (done, total, unit)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _ticker: threading.Thread | None = field(default=None, repr=False)

    def __call__(self, stage: str, done: int, total: int, unit: str = "") -> None:
        """Thread-safe: an embedder's threads report each vector as it is made."""
        if self.quiet:
            return
        with self._lock:
            self._report(stage, done, total, unit)

    def _report(self, stage: str, done: int, total: int, unit: str, ticked: bool = False) -> None:
        stream = self.stream or sys.stderr
        now = self.clock()
        if stage != self._stage:
            self._end_line(stream)
            self._stage, self._started, self._last_line, self._shown = stage, now, now, False
        self._now = (done, total, unit)
        elapsed = now - self._started
        line = self._line(stage, done, total, elapsed, unit)
        finished = done >= total
        if not self._shown and elapsed < self.quiet_for_s:
            if finished:
                self._stage = None
            else:
                self._start_ticker(stream)
            return  # too early to say anything; a quick stage says nothing at all
        if stream.isatty():
            stream.write(f"\r\033[K{line}")
            self._open_line = self._shown = True
            if finished:
                self._end_line(stream)
        elif finished or now - self._last_line >= self.every_s or not self._shown:
            stream.write(line + (f" [{_duration(elapsed)} in]" if ticked and not finished else "") + "\n")
            self._last_line, self._shown = now, True
        if finished:
            self._stage = None
        else:
            self._start_ticker(stream)
        stream.flush()

    def _start_ticker(self, stream: TextIO) -> None:
        if self.tick and self._ticker is None and not stream.isatty():
            self._ticker = threading.Thread(target=self._tick, name="kb-progress", daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        """Write the open stage's line whenever ``every_s`` passes without one; end with the stage."""
        while True:
            with self._lock:
                if self._stage is None:
                    self._ticker = None
                    return
                due = max(self._last_line + self.every_s, self._started + self.quiet_for_s) - self.clock()
                if due <= 0:
                    self._report(self._stage, *self._now, ticked=True)
                    continue
            time.sleep(min(due, self.every_s))

    def close(self) -> None:
        """End the open stage without a line: its timer thread stops (a command that failed
        mid-stage, or a reporter replaced by the next command's, never writes again)."""
        with self._lock:
            self._stage = None

    def _end_line(self, stream: TextIO) -> None:
        if self._open_line:
            stream.write("\n")
            self._open_line = False

    @staticmethod
    def _line(stage: str, done: int, total: int, elapsed: float, unit: str = "") -> str:
        text = f"{stage}: {done}/{total}" + (f" {unit}" if unit else "")
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
    _reporter.close()
    _reporter = reporter


def report(stage: str, done: int, total: int, unit: str = "") -> None:
    """Report progress of ``stage`` (``done`` of ``total`` ``unit``) through the installed
    reporter (silent unless the CLI set one)."""
    _reporter(stage, done, total, unit)
