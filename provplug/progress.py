"""Progress of long work: a live line on a terminal, plain lines elsewhere.

On a terminal (and not under CI) the stage in progress is one line redrawn in
place by ``rich``: a spinner, the stage, the items done so far, the percent
done and the time left when the total is known, and the time the stage has
taken. The line always fits the terminal: the stage's label is shortened
(``…``), never a number. A finished stage is printed once, for good, and the
live line is taken down, so whatever the command prints next (its summary)
comes after the stages, never above a live line.

Anywhere else (a log file, a pipe, CI) the same updates are plain lines
``[provplug] stage: N items (Xs)``, at most one a second (a stage's last
update always), so logs stay small and greppable. ``rich`` is imported only
when a live line is drawn.

:func:`logs_shown` shows the records of provplug's loggers (a capture's run,
steps and commit) the same way while a command runs, when the application
has not configured logging itself.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions
    from rich.live import Live
    from rich.text import Text

# A progress bar (when the total is known) is drawn only when the label
# still gets ROOMY_LABEL cells.
BAR_WIDTH = 12
ROOMY_LABEL = 30


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and not os.environ.get("CI")


def clock_text(seconds: float) -> str:
    """``H:MM:SS``, the live line's time columns."""
    whole = int(max(seconds, 0.0))
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def _short_duration(seconds: float) -> str:
    """``1h02m05s``, ``2m05s`` or ``12s``: no colon, so a plain line's
    ``stage:`` stays the only one after the prefix."""
    whole = int(max(seconds, 0.0))
    hours, minutes, secs = whole // 3600, whole % 3600 // 60, whole % 60
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


@dataclass(frozen=True)
class StageReport:
    """What one update of a stage says: its label, and its numbers (the
    count, and with a known total the fraction done and the time left)."""

    stage: str
    done: int | None
    unit: str
    total: int | None
    elapsed: float  # seconds since the stage began

    def count(self, with_total: bool = True) -> str:
        if self.done is None:
            return ""
        of = f"/{self.total:,}" if self.total is not None and with_total else ""
        return f"{self.done:,}{of} {self.unit}".rstrip()

    @property
    def fraction(self) -> float | None:
        if self.total is None or self.done is None or self.total <= 0:
            return None
        return min(max(self.done / self.total, 0.0), 1.0)

    @property
    def seconds_left(self) -> float | None:
        """Time left at the pace so far; None until some work is done."""
        fraction = self.fraction
        if fraction is None or fraction == 0.0:
            return None
        return self.elapsed * (1.0 - fraction) / fraction

    def plain(self, since_start: float) -> str:
        count = f" {self.count()}" if self.count() else ""
        if self.fraction is not None:
            left = self.seconds_left
            eta = f", eta {_short_duration(left)}" if left is not None else ""
            count += f" ({self.fraction:.0%}{eta})"
        return f"[provplug] {self.stage}{':' if count else ''}{count} ({since_start:.1f}s)"

    def numbers(self, with_total: bool, finished: bool) -> list[str]:
        """The columns right of the label, in order; each is printed whole.
        A finished stage has no time left to show."""
        columns = [self.count(with_total)] if self.done is not None else []
        if self.fraction is not None:
            columns.append(f"{self.fraction:4.0%}")
            if not finished:
                left = self.seconds_left
                columns.append(f"eta {clock_text(left) if left is not None else '-:--:--'}")
        return [*columns, clock_text(self.elapsed)]


@dataclass(frozen=True)
class _Layout:
    bar: bool
    with_total: bool
    gap: int


# Richest first: the first that leaves the label MIN_LABEL cells is used; on a
# narrower terminal the last, with the label shortened further.
_LAYOUTS = (_Layout(True, True, 2), _Layout(False, True, 2), _Layout(False, False, 2), _Layout(False, False, 1))
MIN_LABEL = 16


def render_line(report: StageReport, width: int, mark: str | Text, finished: bool = False) -> Text:
    """``report`` as one line of ``width`` cells: ``mark`` (spinner or tick),
    the label shortened to fit, then the numbers, flush right and whole. Only
    on a terminal too narrow for the numbers themselves is the line longer
    than ``width`` (the console then wraps it: a number is never cut)."""
    from rich.cells import cell_len
    from rich.text import Text

    mark_text = mark if isinstance(mark, Text) else Text(mark)
    wanted = min(cell_len(report.stage), MIN_LABEL)
    for layout in _LAYOUTS:
        numbers = report.numbers(layout.with_total, finished)
        bar = layout.bar and report.fraction is not None
        fixed = mark_text.cell_len + 1 + sum(layout.gap + cell_len(n) for n in numbers)
        room = width - fixed - (layout.gap + BAR_WIDTH if bar else 0)
        if room >= max(wanted, ROOMY_LABEL if bar else 0):
            break
    label = Text(report.stage, no_wrap=True, overflow="ellipsis")
    label.truncate(max(room, 1), overflow="ellipsis", pad=True)
    line = Text.assemble(mark_text, " ", label)
    for k, number in enumerate(numbers):
        line.append(" " * layout.gap)
        if bar and k == 1:  # between the count and the percent
            line.append_text(_bar(report.fraction or 0.0))
            line.append(" " * layout.gap)
        line.append(number, "cyan" if k == 0 and report.done is not None else "")
    return line


def _bar(fraction: float) -> Text:
    from rich.text import Text

    full = round(fraction * BAR_WIDTH)
    return Text.assemble(("━" * full, "magenta"), ("━" * (BAR_WIDTH - full), "grey23"))


# Set by `provplug --quiet` for the whole command, so that the Progress objects
# the library makes on its own (metrics, exports, Spark queries) are silent too.
_silenced: contextvars.ContextVar[bool] = contextvars.ContextVar("provplug_progress_silenced", default=False)


@contextlib.contextmanager
def silenced() -> Iterator[None]:
    """Within this block every :class:`Progress` made is disabled."""
    token = _silenced.set(True)
    try:
        yield
    finally:
        _silenced.reset(token)


class Progress:
    """Report the stages of long work to ``stream`` (stderr by default);
    silent when ``enabled`` is false. ``live`` forces (True) or forbids
    (False) the terminal display; by default it is used on a terminal.
    ``console`` is a ``rich`` console to draw the live line on (its width is
    the line's; tests give one with a fixed width), ``clock`` the source of
    seconds (``time.monotonic``)."""

    def __init__(
        self,
        enabled: bool = True,
        stream: TextIO | None = None,
        every: float = 1.0,
        live: bool | None = None,
        console: Console | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.enabled = enabled and not _silenced.get()
        self.stream = stream if stream is not None else sys.stderr
        self.every = every
        self.live = (console is not None or _is_terminal(self.stream)) if live is None else live
        self.console = console
        self.clock = clock if clock is not None else time.monotonic
        self.t0 = self.clock()
        # When the last plain line was printed; None: never. Not 0.0: a
        # monotonic clock may start near zero (at boot), where 0.0 is "just now".
        self._last_printed: float | None = None
        self._stage: str | None = None
        self._stage_began = self._last_heard = self.t0
        self._bar: _LiveLine | None = None
        self._lock = threading.RLock()  # log records (LogLines) come from any thread

    def update(
        self, stage: str, done: int | None = None, unit: str = "items", force: bool = False, total: int | None = None
    ) -> None:
        """``done`` of ``total`` (None: unknown) ``unit`` so far in ``stage``;
        plain lines are dropped within ``every`` seconds of the last unless
        ``force``."""
        if not self.enabled:
            return
        with self._lock:
            report = self._report(stage, done, unit, total)
            if self.live:
                self._live_line().show(report, self._stage_began)
            elif force or self._last_printed is None or self._last_heard - self._last_printed >= self.every:
                self._print(report)

    def done(self, stage: str, done: int | None = None, unit: str = "items", total: int | None = None) -> None:
        """The last update of ``stage``, always shown (on a terminal: for good)."""
        if not self.enabled:
            return
        with self._lock:
            report = self._report(stage, done, unit, total)
            self._stage = None
            if self.live:
                self._live_line().finish(report)
            else:
                self._print(report)

    def _report(self, stage: str, done: int | None, unit: str, total: int | None) -> StageReport:
        now = self.clock()
        if stage != self._stage:
            # A stage is often first heard of when it ends: it began when the last one was heard of.
            self._stage, self._stage_began = stage, self._last_heard
        self._last_heard = now
        return StageReport(stage, done, unit, total, now - self._stage_began)

    def _print(self, report: StageReport) -> None:
        self._last_printed = self._last_heard
        print(report.plain(self._last_heard - self.t0), file=self.stream, flush=True)

    def _live_line(self) -> _LiveLine:
        if self._bar is None:
            self._bar = _LiveLine(self._console(), self.clock)
        return self._bar

    def close(self) -> None:
        """Stop the terminal display (also done at exit); a stage still in
        progress (no :meth:`done`: the work stopped in it) is shown crossed."""
        if self._bar is not None:
            self._bar.stop()
            atexit.unregister(self._bar.stop)
            self._bar = None

    def _console(self) -> Console:
        if self.console is None:
            from rich.console import Console

            self.console = Console(file=self.stream)
        return self.console

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _LiveLine:
    """The stage in progress, redrawn in place; finished stages printed above it."""

    def __init__(self, console: Console, clock: Callable[[], float]) -> None:
        self.console = console
        self.clock = clock
        self.report: StageReport | None = None
        self.began = 0.0
        self.live: Live | None = None
        from rich.spinner import Spinner

        self.spinner = Spinner("dots")  # its frames and their interval only
        atexit.register(self.stop)  # a command that returns early still leaves a clean terminal

    def show(self, report: StageReport, began: float) -> None:
        if self.report is not None and report.stage != self.report.stage:
            self.finish_stage()
        self.report, self.began = report, began
        if self.live is None:
            from rich.live import Live

            # Transient: the live line is erased when it stops and the stage's last report
            # printed for good. The command's own output goes to stdout, not redirected
            # (rich would send it to this console, stderr, above the live line).
            self.live = Live(
                _Redrawn(self), console=self.console, transient=True, redirect_stdout=False, refresh_per_second=4
            )
            self.live.start()
        else:
            self.live.refresh()

    def finish(self, report: StageReport) -> None:
        """``report`` is its stage's last: print it for good (no live line is started for it)."""
        if self.report is not None and report.stage != self.report.stage:
            self.finish_stage()
        self.report = report
        self.finish_stage()

    def current(self, width: int) -> Text:
        from rich.text import Text

        report = self.report
        if report is None:
            return Text()
        now = self.clock()
        elapsed = StageReport(report.stage, report.done, report.unit, report.total, now - self.began)
        frame = self.spinner.frames[int((now - self.began) * 1000 / self.spinner.interval) % len(self.spinner.frames)]
        return render_line(elapsed, width, Text(frame, "green"))

    def finish_stage(self, ended: bool = True) -> None:
        """Take the live line down and print the stage's last report for good:
        ticked, or crossed when the stage never ``ended`` (the work stopped in it)."""
        if self.live is not None:
            self.live.stop()
            self.live = None
        if self.report is not None:
            from rich.text import Text

            mark = Text("✓", "green") if ended else Text("✗", "red")
            self.console.print(render_line(self.report, self.console.width, mark, finished=True))
        self.report = None

    def stop(self) -> None:
        self.finish_stage(ended=False)


class _Redrawn:
    """What the live display draws at each refresh: the current stage at the console's width."""

    def __init__(self, line: _LiveLine) -> None:
        self.line = line

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        yield self.line.current(options.max_width)


class LogLines(logging.Handler):
    """Shows each log record as a finished stage of ``progress`` (a line of its own)."""

    def __init__(self, progress: Progress, level: int = logging.INFO) -> None:
        super().__init__(level)
        self.progress = progress

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.progress.done(self.format(record))
        except Exception:  # logging's own policy: report the failed record, never break the caller
            self.handleError(record)


@contextlib.contextmanager
def logs_shown(progress: Progress, name: str = "provplug") -> Iterator[None]:
    """While the block runs, show the INFO records of the ``name`` loggers on
    ``progress``: what a long command is doing, at the pace it happens. Not
    when the application has configured logging itself (its handlers decide
    where records go, as for any library), nor when ``progress`` is silent."""
    logger = logging.getLogger(name)
    if not progress.enabled or logger.hasHandlers():
        yield
        return
    with handler_attached(logger, LogLines(progress)):
        yield


@contextlib.contextmanager
def handler_attached(logger: logging.Logger, handler: logging.Handler) -> Iterator[None]:
    """``handler`` on ``logger``, which passes INFO records at least, for
    the block; both as they were after it (a process may run many commands)."""
    level = logger.level
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


SILENT = Progress(enabled=False)
