"""Progress lines for long work: stage, items done, elapsed; at most one a second."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Report ``stage: N items (Xs)`` to a stream; silent when ``enabled`` is false."""

    def __init__(self, enabled: bool = True, stream: TextIO | None = None, every: float = 1.0) -> None:
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.every = every
        self.t0 = time.monotonic()
        self._last = 0.0

    def update(self, stage: str, done: int | None = None, unit: str = "items", force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last < self.every:
            return
        self._last = now
        count = f" {done:,} {unit}" if done is not None else ""
        print(f"[provplug] {stage}:{count} ({now - self.t0:.1f}s)", file=self.stream, flush=True)

    def done(self, stage: str, done: int | None = None, unit: str = "items") -> None:
        self.update(stage, done, unit, force=True)


SILENT = Progress(enabled=False)
