"""Progress of long work: a live bar on a terminal, plain lines elsewhere.

On a terminal (and not under CI) each stage is one line of a ``rich`` progress
display: a spinner, the stage, the items done so far and the elapsed time,
redrawn in place. Anywhere else (a log file, a pipe, CI) the same updates are
plain lines ``[provplug] stage: N items (Xs)``, at most one a second, so logs
stay small and greppable. ``rich`` is imported only when a bar is drawn.
"""

from __future__ import annotations

import atexit
import os
import sys
import time
from typing import Any, TextIO


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and not os.environ.get("CI")


class Progress:
    """Report the stages of long work to ``stream`` (stderr by default);
    silent when ``enabled`` is false. ``live`` forces (True) or forbids
    (False) the terminal display; by default it is used on a terminal."""

    def __init__(
        self, enabled: bool = True, stream: TextIO | None = None, every: float = 1.0, live: bool | None = None
    ) -> None:
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.every = every
        self.live = _is_terminal(self.stream) if live is None else live
        self.t0 = time.monotonic()
        self._last = 0.0
        self._bar: _LiveBar | None = None

    def update(self, stage: str, done: int | None = None, unit: str = "items", force: bool = False) -> None:
        if not self.enabled:
            return
        if self.live:
            if self._bar is None:
                self._bar = _LiveBar(self.stream)
            self._bar.show(stage, done, unit)
            return
        now = time.monotonic()
        if not force and now - self._last < self.every:
            return
        self._last = now
        count = f" {done:,} {unit}" if done is not None else ""
        print(f"[provplug] {stage}:{count} ({now - self.t0:.1f}s)", file=self.stream, flush=True)

    def done(self, stage: str, done: int | None = None, unit: str = "items") -> None:
        """The last update of ``stage`` (always shown)."""
        self.update(stage, done, unit, force=True)
        if self._bar is not None:
            self._bar.finish_stage()

    def close(self) -> None:
        """Stop the terminal display (also done at exit)."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _LiveBar:
    """One ``rich`` display; a task (line) per stage."""

    def __init__(self, stream: TextIO) -> None:
        from rich.console import Console
        from rich.progress import Progress as RichProgress
        from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

        self.display = RichProgress(
            SpinnerColumn(finished_text="[green]✓"),
            TextColumn("{task.description}"),
            TextColumn("[cyan]{task.fields[count]}"),
            TimeElapsedColumn(),
            console=Console(file=stream),
        )
        self.stage: str | None = None
        self.task: Any = None
        self.display.start()
        atexit.register(self.stop)  # a command that returns early still leaves a clean terminal

    def show(self, stage: str, done: int | None, unit: str) -> None:
        if stage != self.stage:
            self.finish_stage()
            self.stage = stage
            self.task = self.display.add_task(stage, total=None, count="")
        if done is not None:
            self.display.update(self.task, count=f"{done:,} {unit}")

    def finish_stage(self) -> None:
        if self.task is not None:
            self.display.update(self.task, total=1, completed=1)
            self.display.stop_task(self.task)
        self.stage, self.task = None, None

    def stop(self) -> None:
        self.finish_stage()
        self.display.stop()


SILENT = Progress(enabled=False)
