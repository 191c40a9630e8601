"""Browsing a store (``provplug runs``, ``tables``, ``show`` and their Python
equivalents) and choosing a run when two runs wrote a table of one name.

The store (tests/two_runs.py): a Spark capture (Person1 -> R1 -> Person2,
Steve and Mark kept) and a newer import that also has a table Person2
(values 101, 102) summed by R9 into Report (value 103).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import two_runs

import provplug
from provplug.errors import LineageQueryError
from provplug.store.open import open_store


@pytest.fixture(scope="module")
def two(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return two_runs.build(spark, tmp_path_factory.mktemp("browse"))


@pytest.fixture(scope="module")
def run_ids(two: Path) -> dict[str, str]:
    """Run id by kind: "capture" (the older run), "import" (the newer)."""
    return {r["kind"]: r["run_id"] for r in provplug.open(two).runs()}


def _json(cli: Any, *args: Any) -> Any:
    result = cli(*args, "--json")
    assert result.code == 0, result
    return json.loads(result.out)


# -- runs ---------------------------------------------------------------------------


def test_runs_lists_both_runs_oldest_first_with_their_counts(two: Path, cli: Any) -> None:
    runs = _json(cli, "runs", two)
    assert [r["kind"] for r in runs] == ["capture", "import"]
    counts = [{k: r[k] for k in ("tables", "ops", "values", "triples")} for r in runs]
    # Capture: Person1 (3 rows x 3 columns) and Person2 (2 x 3); R1 copies 2 rows x 3 columns.
    # Import: Person2 and Report, one op R9, values 101-103, two triples.
    assert counts == [
        {"tables": 2, "ops": 1, "values": 15, "triples": 6},
        {"tables": 2, "ops": 1, "values": 3, "triples": 2},
    ]
    assert runs[0]["committed"] < runs[1]["committed"]


def test_runs_text_is_one_aligned_line_per_run(two: Path, cli: Any, run_ids: dict[str, str]) -> None:
    result = cli("runs", two)
    assert result.code == 0, result
    header, first, second = result.out.splitlines()
    assert header.split() == [
        "#",
        "LABEL",
        "ENTRY",
        "POINT",
        "GIT",
        "STATUS",
        "STARTED",
        "ID",
        "TABLES",
        "OPS",
        "VALUES",
        "TRIPLES",
        "LOCATION_TRIPLES",
    ]
    # Run 1 was captured from the tests' helper module two_runs, with no label.
    assert first.split()[:4] == ["1", "-", "python", "two_runs"]
    assert first.split()[-6:] == [run_ids["capture"], "2", "1", "15", "6", "0"]
    assert second.split()[:3] == ["2", "-", "import"] and second.split()[-6:] == [
        run_ids["import"],
        "2",
        "1",
        "3",
        "2",
        "0",
    ]
    # Aligned: each column starts at the same place on every line, numbers end at the same place.
    assert header.index("ID") == first.index(run_ids["capture"]) == second.index(run_ids["import"])
    assert len(header) == len(first) == len(second)


# -- tables -------------------------------------------------------------------------


def test_tables_lists_every_run_s_tables_by_name(two: Path, cli: Any, run_ids: dict[str, str]) -> None:
    tables = _json(cli, "tables", two)
    cap, imp = run_ids["capture"], run_ids["import"]
    assert [(t["name"], t["run_id"], t["origin"], t["rows"], t["columns"]) for t in tables] == [
        ("Person1", cap, "source", 3, ["Name", "City", "Age"]),
        ("Person2", cap, "output", 2, ["Name", "City", "Age"]),
        ("Person2", imp, "imported", None, ["Age"]),
        ("Report", imp, "imported", None, ["Total"]),
    ]
    text = cli("tables", two).out.splitlines()
    assert text[0].split() == ["TABLE", "RUN", "ORIGIN", "ROWS", "COLUMNS"]
    assert text[2].split() == ["Person2", cap, "output", "2", "Name,", "City,", "Age"]
    assert text[3].split() == ["Person2", imp, "imported", "-", "Age"]


def test_tables_of_one_run_by_a_prefix_of_its_id(two: Path, cli: Any, run_ids: dict[str, str]) -> None:
    imp = run_ids["import"]
    prefix = imp[: len(imp) - 6]  # ids end in 12 random hex digits: 6 still tell the two apart
    assert [t["name"] for t in _json(cli, "tables", two, "--run", prefix)] == ["Person2", "Report"]
    assert [t["name"] for t in provplug.open(two).tables(run=run_ids["capture"])] == ["Person1", "Person2"]


# -- show ---------------------------------------------------------------------------


def test_show_a_captured_table(two: Path, cli: Any, run_ids: dict[str, str]) -> None:
    detail = _json(cli, "show", two, "Person2", "--run", run_ids["capture"])
    assert (detail["name"], detail["origin"], detail["rows"], detail["columns"]) == (
        "Person2",
        "output",
        2,
        ["Name", "City", "Age"],
    )
    assert (detail["run_id"], detail["run_kind"]) == (run_ids["capture"], "capture")
    (op,) = detail["written_by"]
    assert (op["name"], op["kind"], op["inputs"], op["triples"]) == ("R1", "builtin", ["Person1"], 6)
    assert sorted((r["values"]["Name"], r["values"]["City"], r["values"]["Age"]) for r in detail["sample"]) == [
        ("Mark", "NY", 40),
        ("Steve", "NY", 30),
    ]
    assert sorted(r["row"] for r in detail["sample"]) == [0, 1]


def test_show_text(two: Path, cli: Any, run_ids: dict[str, str]) -> None:
    result = cli("show", two, "Person1", "--run", run_ids["capture"][:20])
    assert result.code == 0, result
    lines = result.out.splitlines()
    assert lines[0].split() == ["table", "Person1"]
    assert lines[2].split() == ["origin", "source"] and lines[3].split() == ["rows", "3"]
    assert lines[5] == "written by  - (a source of its run)"
    assert lines[7] == "3 of 3 rows:"
    assert lines[8].split() == ["ROW", "Name", "City", "Age"]
    assert sorted(tuple(line.split()[1:]) for line in lines[9:]) == [
        ("Mark", "NY", "40"),
        ("Mary", "LA", "20"),
        ("Steve", "NY", "30"),
    ]


def test_show_an_imported_table_names_the_op_from_its_triples(two: Path, cli: Any) -> None:
    detail = _json(cli, "show", two, "Report")  # one run wrote a Report: no --run needed
    (op,) = detail["written_by"]
    assert (op["name"], op["kind"], op["inputs"], op["triples"]) == ("R9", "imported", ["Person2"], 2)
    assert detail["sample"] == [] and detail["stored_rows"] is False
    assert "written by  R9 (imported) from Person2" in cli("show", two, "Report").out


def test_show_reads_at_most_limit_rows(two: Path, cli: Any, run_ids: dict[str, str]) -> None:
    assert len(_json(cli, "show", two, "Person1", "--limit", "2")["sample"]) == 2
    assert _json(cli, "show", two, "Person1", "--limit", "0")["sample"] == []
    table_id = next(t["table_id"] for t in provplug.open(two).tables() if t["name"] == "Person1")
    head = open_store(two).read_rows(run_ids["capture"], table_id, limit=1)
    assert head.num_rows == 1


# -- one name, two runs -------------------------------------------------------------


def test_a_name_two_runs_wrote_is_the_latest_run_s_and_says_so(two: Path, cli: Any, run_ids: dict[str, str]) -> None:
    result = cli("show", two, "Person2")
    assert result.code == 0, result
    assert "run 2: the latest of 2 runs that wrote Person2; --run picks another" in result.out
    detail = _json(cli, "show", two, "Person2")
    assert detail["run_id"] == run_ids["import"] and (detail["run"]["number"], detail["run"]["of"]) == (2, 2)
    older = _json(cli, "show", two, "Person2", "--run", "1")
    assert older["run_id"] == run_ids["capture"] and older["run"]["chosen"] == "given"


def test_run_chooses_each_run_s_table(two: Path, run_ids: dict[str, str]) -> None:
    store = provplug.open(two)
    # The captured (older) Person2: Mark's Age 40 comes from Person1's Age 40.
    answer = store.lineage(table="Person2", column="Age", where="Name = 'Mark'", run=run_ids["capture"])
    assert [(r["table"], r["column"], r["value"]) for r in answer.lineage] == [("Person1", "Age", 40)]
    # The imported (newer) one has no rows to select from: the run's table was chosen, not the other.
    with pytest.raises(LineageQueryError, match="no stored rows"):
        store.lineage(table="Person2", column="Age", where="Name = 'Mark'", run=run_ids["import"])
    assert store.show("Person2", run=run_ids["import"])["origin"] == "imported"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["show", "{s}", "Nope"], "unknown table 'Nope' (tables: Person1, Person2, Report)"),
        (["show", "{s}", "Person2", "--run", "zzz"], "unknown run 'zzz' (runs: "),
        (["tables", "{s}", "--run", "zzz"], "unknown run 'zzz' (runs: "),
        (["show", "{s}", "Person2", "--run", "20"], "run '20' is ambiguous"),
        (["show", "{s}", "Person1", "--run", "{import}"], "wrote no table 'Person1'"),
        (["runs", "{s}-missing"], "no provplug store at"),
    ],
)
def test_errors_are_one_line_exit_2(
    two: Path, cli: Any, run_ids: dict[str, str], args: list[str], message: str
) -> None:
    result = cli(*(a.format(s=two, **run_ids) for a in args))
    assert result.code == 2, result
    (line,) = result.err.splitlines()
    assert message in line
    as_json = cli(*(a.format(s=two, **run_ids) for a in args), "--json")
    assert json.loads(as_json.err)["error"] == line.removeprefix("provplug: error: ")


# -- the Python API -----------------------------------------------------------------


def test_python_api_answers_as_the_commands(two: Path, cli: Any, run_ids: dict[str, str]) -> None:
    store = provplug.open(two)
    assert json.loads(json.dumps(store.runs())) == _json(cli, "runs", two)
    assert json.loads(json.dumps(store.tables())) == _json(cli, "tables", two)
    assert json.loads(json.dumps(store.show("Report"))) == _json(cli, "show", two, "Report")
    stats = store.stats()
    assert stats == _json(cli, "stats", two)
    assert (stats["runs"], stats["tables"], stats["triples"], stats["index_current"]) == (2, 4, 8, True)


def test_the_commands_load_no_heavy_library_to_parse() -> None:
    code = (
        "import argparse, sys\n"
        "from provplug.cli import delete_run, gc, runs, show, tables\n"
        "sub = argparse.ArgumentParser().add_subparsers()\n"
        "for cli in (runs, tables, show, delete_run, gc):\n"
        "    cli.add_parser(sub)\n"
        "print(sorted(m for m in ('pandas', 'pyarrow', 'pyspark', 'duckdb', 'numpy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
