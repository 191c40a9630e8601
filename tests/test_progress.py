"""Progress: a live display on a terminal, plain throttled lines elsewhere."""

from __future__ import annotations

import io
import logging
import re
import time

import pytest
from rich.cells import cell_len
from rich.console import Console

from provplug.progress import Progress, StageReport, logs_shown, render_line


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class FakeClock:
    """A monotonic clock that moves only when told to, starting where asked."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def test_a_terminal_gets_the_live_display_unless_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert Progress(stream=_Terminal()).live
    assert not Progress(stream=io.StringIO()).live
    monkeypatch.setenv("CI", "true")
    assert not Progress(stream=_Terminal()).live


def test_live_display_shows_each_stage_with_its_last_count() -> None:
    stream = io.StringIO()
    with Progress(stream=stream, live=True) as progress:
        progress.update("reading triples", 1_000, "triples")
        progress.done("reading triples", 7_000, "triples")
        progress.done("published")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert "reading triples" in lines[0] and "7,000 triples" in lines[0] and "1,000" not in lines[0]
    assert "published" in lines[1]


def test_a_stage_the_work_stopped_in_is_crossed_not_ticked() -> None:
    screen = io.StringIO()
    with pytest.raises(KeyboardInterrupt), Progress(console=Console(width=80, file=screen)) as progress:
        progress.done("read triples", 3_000_000, "triples")
        progress.update("indexing triples", 1_000_000, "triples", total=3_000_000)
        raise KeyboardInterrupt
    lines = screen.getvalue().splitlines()
    assert [line[0] for line in lines] == ["✓", "✗"], lines
    assert "indexing triples" in lines[1] and "1,000,000/3,000,000 triples" in lines[1], lines


def _plain_scan(progress: Progress, clock: FakeClock | None = None) -> None:
    progress.update("scan", 1)  # the first update prints
    if clock is not None:
        clock.advance(5.0)
    progress.update("scan", 2)  # within the hour: dropped
    progress.done("scan", 3)


def _first_parts(stream: io.StringIO) -> list[str]:
    return [line.split(" (")[0] for line in stream.getvalue().splitlines()]


def test_plain_lines_are_throttled_but_done_always_prints() -> None:
    stream = io.StringIO()
    _plain_scan(Progress(stream=stream, every=3600))
    assert _first_parts(stream) == ["[provplug] scan: 1 items", "[provplug] scan: 3 items"]


@pytest.mark.parametrize("boot", [0.0, 0.25, 30.0])
def test_the_first_plain_line_prints_under_a_monotonic_clock_near_zero(
    monkeypatch: pytest.MonkeyPatch, boot: float
) -> None:
    """A freshly booted machine: time.monotonic() counts from boot, so it is
    smaller than the throttle's interval. The first update still prints."""
    clock = FakeClock(boot)
    monkeypatch.setattr(time, "monotonic", clock)
    stream = io.StringIO()
    _plain_scan(Progress(stream=stream, every=3600), clock)
    assert _first_parts(stream) == ["[provplug] scan: 1 items", "[provplug] scan: 3 items"]


def test_plain_lines_say_the_percent_and_time_left_when_the_total_is_known() -> None:
    clock = FakeClock(0.0)
    stream = io.StringIO()
    progress = Progress(stream=stream, every=0, clock=clock)
    progress.update("indexing triples", 0, "triples", total=4_000_000)
    clock.advance(10.0)
    progress.update("indexing triples", 1_000_000, "triples", total=4_000_000)
    clock.advance(50.0)
    progress.done("indexing triples", 4_000_000, "triples", total=4_000_000)
    assert stream.getvalue().splitlines() == [
        "[provplug] indexing triples: 0/4,000,000 triples (0%) (0.0s)",
        "[provplug] indexing triples: 1,000,000/4,000,000 triples (25%, eta 30s) (10.0s)",
        "[provplug] indexing triples: 4,000,000/4,000,000 triples (100%, eta 0s) (60.0s)",
    ]


def test_disabled_progress_writes_nothing() -> None:
    stream = io.StringIO()
    Progress(enabled=False, stream=stream, live=True).done("scan", 3)
    assert stream.getvalue() == ""


# -- the live display at a terminal's width -----------------------------------

# What `provplug index` reports for a store of 3.5 million triples (the stages
# of index/local_engine.py and index/build.py), with totals where they are known.
TRIPLES, VALUES = 3_527_184, 2_271_845
LONG_SPLITS = 'splits (chosen): {"people_with_a_long_table_name": ["orders_by_customer", "orders_by_region"]}'
INDEX_STAGES: list[tuple[str, list[int], str, int | None]] = [
    ("read triples", [TRIPLES], "triples", None),
    ("reading triples: values", [1_048_576, 2_097_152, TRIPLES], "triples", TRIPLES),
    ("reading triples: values", [VALUES], "values", None),
    ("components", [1_200_000, TRIPLES], "triples", TRIPLES),
    ("sets at split depth 1", [2_345_678], "edges kept", None),
    (LONG_SPLITS, [], "items", None),
    ("indexing triples", [1_000_000, 2_000_000, TRIPLES], "triples", TRIPLES),
    ("deduplicated triples", [TRIPLES], "unique triples (12,345 duplicates)", None),
    ("wrote values", [VALUES], "values", None),
    ("index 20261126T2301-000001 published", [987_654], "sets", None),
]
SUMMARY = f"indexed {TRIPLES:,} triples, {VALUES:,} values: 987,654 sets"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
CLOCK = re.compile(r"\d+:\d\d:\d\d")


def _drive_index(progress: Progress, clock: FakeClock) -> None:
    """Stages as the index build sends them; like the CLI, the display is not closed."""
    for stage, counts, unit, total in INDEX_STAGES:
        if not counts:
            progress.done(stage)
            continue
        for count in counts[:-1]:
            clock.advance(7.0)
            progress.update(stage, count, unit, total=total)
        clock.advance(7.0)
        progress.done(stage, counts[-1], unit, total=total)


def _drawn_lines(output: str) -> list[str]:
    """Every line drawn on the terminal, redraws included (control codes removed)."""
    return [line for line in re.split(r"[\r\n]", ANSI.sub("", output)) if line.strip()]


def _cut_numbers(line: str) -> list[str]:
    """Numbers with thousands separators in ``line`` that are not whole reported ones."""
    whole = {f"{n:,}" for _, counts, _, total in INDEX_STAGES for n in [*counts, total or 0]} | {"12,345"}
    return [n for n in re.findall(r"\d[\d,]*", CLOCK.sub("", line)) if "," in n and n not in whole]


@pytest.mark.parametrize("width", [60, 80, 120])
def test_the_index_display_fits_the_terminal_and_never_cuts_a_number(
    width: int, capsys: pytest.CaptureFixture[str]
) -> None:
    screen = io.StringIO()
    clock = FakeClock(0.0)
    progress = Progress(console=Console(width=width, force_terminal=True, file=screen), clock=clock)
    _drive_index(progress, clock)
    print(SUMMARY)  # the CLI's summary, printed before the display is closed at exit
    progress.close()

    drawn = _drawn_lines(screen.getvalue())
    assert all(cell_len(line) <= width for line in drawn), [line for line in drawn if cell_len(line) > width]
    assert not [n for line in drawn for n in _cut_numbers(line)], drawn
    # Each stage ends as one line, in order, with its count and the time it took.
    finished = [line for line in drawn if line.startswith("✓")]
    assert len(finished) == len(INDEX_STAGES), finished
    assert all(cell_len(line) == width for line in finished), finished  # numbers flush right, in columns
    for line, (stage, counts, _unit, total) in zip(finished, INDEX_STAGES, strict=True):
        assert line.endswith(f" 0:00:{7 * len(counts):02d}"), line  # from the end of the stage before
        label = line[2:].split("  ")[0].split(" " + (f"{counts[-1]:,}" if counts else "0:"))[0].strip()
        assert stage.startswith(label.removesuffix("…")) and len(label) >= 4, (stage, label)  # shortened, not garbled
        if counts:
            assert f"{counts[-1]:,} " in line, line
        assert ("100%" in line) == (total is not None), line
    assert finished[-1].startswith("✓ index 20261126T2301-000001 publ"), finished[-1]
    # The summary went to stdout as printed, not into the display above a live line.
    assert capsys.readouterr().out == SUMMARY + "\n"
    assert ANSI.sub("", screen.getvalue()).rstrip().endswith(finished[-1])


@pytest.mark.parametrize("width", [60, 80, 120])
def test_a_stage_in_progress_shows_percent_time_left_and_elapsed_in_the_width(width: int) -> None:
    report = StageReport("reading triples: values", 2_271_845, "triples", TRIPLES, elapsed=23.0)
    line = render_line(report, width, "⠋").plain
    assert cell_len(line) == width, line
    assert "2,271,845" in line, line
    assert re.search(r" 64% +eta 0:00:12 +0:00:23$", line), line
    assert (f"/{TRIPLES:,}" in line) == (width >= 80), line  # the total where there is room for it
    assert line.startswith("⠋ reading triple"), line


def test_a_long_label_is_shortened_and_the_time_column_kept() -> None:
    line = render_line(StageReport(LONG_SPLITS, None, "items", None, 3.0), 80, "✓").plain
    assert cell_len(line) == 80 and line.endswith("…  0:00:03"), line


def test_a_terminal_too_narrow_for_the_numbers_wraps_rather_than_cuts() -> None:
    report = StageReport("deduplicated triples", TRIPLES, "unique triples (12,345 duplicates)", None, 3.0)
    line = render_line(report, 30, "✓").plain
    assert f"{TRIPLES:,} unique triples (12,345 duplicates)" in line and line.endswith("0:00:03"), line


# -- log records shown as progress lines ----------------------------------------


def _said(stream: io.StringIO) -> list[str]:
    return [line.rsplit(" (", 1)[0] for line in stream.getvalue().splitlines()]


def test_provplug_log_records_are_shown_while_nothing_else_shows_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logging.root, "handlers", [])  # as in a shell: logging not configured
    logger = logging.getLogger("provplug.ingest.capture")
    level = logging.getLogger("provplug").level
    stream = io.StringIO()
    with logs_shown(Progress(stream=stream, every=3600)):
        logger.info("step %s started", "join")
        logger.debug("not for people")
        logger.info("run %s committed", "r1")  # within the hour: shown all the same (each is a stage's end)
    logger.info("after the command")
    assert _said(stream) == ["[provplug] step join started", "[provplug] run r1 committed"]
    assert logging.getLogger("provplug").level == level and not logging.getLogger("provplug").handlers


def test_an_application_that_configured_logging_gets_the_records_there_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="provplug")  # pytest's handler on the root logger: configured
    stream = io.StringIO()
    with logs_shown(Progress(stream=stream)):
        logging.getLogger("provplug.ingest.capture").info("step join started")
    assert stream.getvalue() == ""
    assert [(r.name, r.getMessage()) for r in caplog.records] == [("provplug.ingest.capture", "step join started")]


def test_a_silent_progress_shows_no_log_record(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logging.root, "handlers", [])
    stream = io.StringIO()
    with logs_shown(Progress(enabled=False, stream=stream)):
        logging.getLogger("provplug.ingest.capture").warning("step join started")
    assert stream.getvalue() == "" and not logging.getLogger("provplug").handlers


def test_quiet_silences_every_progress_made_inside_it() -> None:
    from provplug.progress import silenced

    with silenced():
        inside = Progress(stream=io.StringIO(), live=False)
    outside = Progress(stream=io.StringIO(), live=False)
    assert (inside.enabled, outside.enabled) == (False, True)
