"""Progress: a live display on a terminal, plain throttled lines elsewhere."""

from __future__ import annotations

import io

import pytest

from provplug.progress import Progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


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


def test_plain_lines_are_throttled_but_done_always_prints() -> None:
    stream = io.StringIO()
    progress = Progress(stream=stream, every=3600)
    progress.update("scan", 1)  # the first update prints
    progress.update("scan", 2)  # within the hour: dropped
    progress.done("scan", 3)
    lines = stream.getvalue().splitlines()
    assert [line.split(" (")[0] for line in lines] == ["[provplug] scan: 1 items", "[provplug] scan: 3 items"]


def test_disabled_progress_writes_nothing() -> None:
    stream = io.StringIO()
    Progress(enabled=False, stream=stream, live=True).done("scan", 3)
    assert stream.getvalue() == ""
