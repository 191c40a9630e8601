"""The tables (provplug_beam.tables): row numbers, as the rows and the
triples of the store use them, and their determinism."""

from __future__ import annotations

from pathlib import Path

from provplug.testing import StoreContents

from .helpers import PEOPLE, capture_filter, captured


def test_rows_and_triples_agree_on_row_numbers(kinds: StoreContents) -> None:
    for t in kinds.triples:
        for vid in (t["src"], t["dst"]):
            table, column, row = kinds.cell(vid)
            assert row in kinds.rows[table] and column in kinds.rows[table][row]
    for name, table in kinds.tables.items():
        assert sorted(kinds.rows[name]) == list(range(table["rows"]))


def test_row_numbers_are_deterministic(tmp_path: Path) -> None:
    a, b = tmp_path / "a.prov", tmp_path / "b.prov"
    capture_filter(a, PEOPLE)
    capture_filter(b, PEOPLE)
    ca, cb = captured(a), captured(b)
    assert ca.rows == cb.rows
    key = lambda t: (t["src"], t["dst"])  # noqa: E731
    assert sorted(map(key, ca.triples)) == sorted(map(key, cb.triples))
