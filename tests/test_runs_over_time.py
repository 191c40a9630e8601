"""Runs over time (issue 26): numbers, context, ``--run`` everywhere, and the
latest run as the default answer to a table several runs wrote."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

import provplug
from provplug.cli.demo import adults, average_age, capture_people, person1
from provplug.errors import LineageQueryError
from provplug.ids import TABLE_SHIFT
from provplug.store.parquet import MANIFEST, ParquetStore
from provplug.store.runs import numbered, select_run

README_QUERY = ("lineage", "AvgAge.Age", "--where", "City = 'NY'")


@pytest.fixture(scope="module")
def people_twice(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's people pipeline run twice into one store: run 1 labelled
    ``first`` (through the Python API), run 2 as the README's example runs it."""
    store = tmp_path_factory.mktemp("twice") / "people.prov"
    with provplug.capture(spark, store=store, label="first", tags=["try"]) as run:
        average_age(adults(run.source(person1(spark), "Person1")))
    capture_people(spark, str(store))
    provplug.open(store).index(engine="local")
    return store


def _query(cli: Any, store: Path, *extra: str) -> dict[str, Any]:
    command, target, *rest = README_QUERY
    result = cli(command, store, target, *rest, *extra, "--json")
    assert result.code == 0, result
    return json.loads(result.out)


def test_the_readme_query_answers_from_the_latest_run_and_says_so(people_twice: Path, cli: Any) -> None:
    command, target, *rest = README_QUERY
    text = cli(command, people_twice, target, *rest)
    assert text.code == 0, text
    assert text.out.splitlines()[0] == "run 2: the latest of 2 runs that wrote AvgAge; --run picks another"
    assert "AvgAge.Age = 35.0" in text.out
    answer = _query(cli, people_twice)
    runs = provplug.open(people_twice).runs()
    assert [r["number"] for r in runs] == [1, 2]
    assert answer["run"] == {
        "id": runs[1]["run_id"],
        "number": 2,
        "label": None,
        "table": "AvgAge",
        "of": 2,
        "others": 1,
        "chosen": "latest",
    }
    # The cells queried are run 2's: their table is the AvgAge run 2 wrote.
    tables = {t["table_id"]: t["run_id"] for t in provplug.open(people_twice).tables()}
    assert {tables[q["value_id"] >> TABLE_SHIFT] for q in answer["query"]} == {runs[1]["run_id"]}


@pytest.mark.parametrize("how", ["1", "latest~1", "first", "id-prefix"])
def test_each_way_of_naming_run_1_selects_it(people_twice: Path, cli: Any, how: str) -> None:
    runs = provplug.open(people_twice).runs()
    wanted = runs[0]["run_id"][:-4] if how == "id-prefix" else how
    answer = _query(cli, people_twice, "--run", wanted)
    assert answer["run"]["id"] == runs[0]["run_id"]
    assert answer["run"]["number"] == 1 and answer["run"]["label"] == "first"
    assert answer["run"]["chosen"] == "given"
    text = cli(*README_QUERY[:1], people_twice, *README_QUERY[1:], "--run", wanted)
    assert text.out.splitlines()[0] == "run 1 (label first): chosen with --run; 2 runs that wrote AvgAge"


@pytest.mark.parametrize(
    ("wanted", "message"),
    [
        ("7", "unknown run '7' (runs: 2 numbered 1..2, labels first;"),
        ("latest~2", "no run 'latest~2': the store has only 2 runs"),
        ("nope", "unknown run 'nope'"),
    ],
)
def test_an_unknown_run_is_a_one_line_error(people_twice: Path, cli: Any, wanted: str, message: str) -> None:
    result = cli(*README_QUERY[:1], people_twice, *README_QUERY[1:], "--run", wanted)
    assert result.code == 2 and message in result.err and result.err.count("\n") == 1


def test_runs_shows_number_label_entry_point_and_counts(people_twice: Path, cli: Any) -> None:
    listed = cli("runs", people_twice, "--json")
    runs = json.loads(listed.out)
    assert [(r["number"], r["label"], r["tags"], r["status"]) for r in runs] == [
        (1, "first", ["try"], "committed"),
        (2, None, [], "committed"),
    ]
    # Run 1 was captured by this test module, run 2 by provplug.cli.demo: the calling modules.
    assert runs[0]["entry_point"]["type"] == "python" and runs[0]["entry_point"]["module"] == __name__
    assert runs[1]["entry_point"]["module"] == "provplug.cli.demo"
    assert all(r["engine"] == "spark" and r["spark_app_id"] for r in runs)
    assert all(r["started"] <= r["ended"] for r in runs)
    text = cli("runs", people_twice).out.splitlines()
    assert text[0].split()[:5] == ["#", "LABEL", "ENTRY", "POINT", "GIT"]
    assert text[1].split()[:4] == ["1", "first", "python", __name__]


def test_show_and_the_python_api_default_to_the_latest_run(people_twice: Path, cli: Any) -> None:
    shown = json.loads(cli("show", people_twice, "AvgAge", "--json").out)
    assert shown["run"]["number"] == 2 and shown["run"]["of"] == 2
    first = json.loads(cli("show", people_twice, "AvgAge", "--run", "first", "--json").out)
    assert first["run"]["number"] == 1 and first["run_id"] != shown["run_id"]
    assert "run 2: the latest of 2 runs that wrote AvgAge" in cli("show", people_twice, "AvgAge").out


# -- numbers --------------------------------------------------------------------------------


def test_concurrent_commits_never_share_a_number(tmp_path: Path) -> None:
    store = ParquetStore(str(tmp_path / "s.prov"))
    store.create()
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def commit_runs() -> None:
        try:
            start.wait()
            for _ in range(3):
                with store.transaction("capture"):
                    pass
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=commit_runs) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    numbers = [m["number"] for m in store.runs()]
    assert sorted(numbers) == list(range(1, 25))


def test_a_number_another_writer_holds_is_skipped_and_never_reused(tmp_path: Path) -> None:
    store = ParquetStore(str(tmp_path / "s.prov"))
    with store.transaction("capture"):
        pass
    # Another writer has reserved number 2 and not renamed its run yet (or died).
    assert store.create_exclusive(store.path("_ids", "runs", "2"), "other-run")
    with store.transaction("capture") as txn:
        pass
    assert txn.number == 3
    store.delete_run(txn.run_id)
    with store.transaction("capture") as again:
        pass
    assert again.number == 4 and [m["number"] for m in store.runs()] == [1, 4]


def test_a_store_from_before_numbering_is_numbered_by_commit_order(tmp_path: Path) -> None:
    store = ParquetStore(str(tmp_path / "old.prov"))
    for _ in range(2):
        with store.transaction("capture"):
            pass
    for folder in (tmp_path / "old.prov" / "runs").iterdir():  # as an older provplug wrote them
        manifest = json.loads((folder / MANIFEST).read_text())
        for key in ("number", "status", "ended"):
            del manifest[key]
        (folder / MANIFEST).write_text(json.dumps(manifest))
    for numbers in (tmp_path / "old.prov" / "_ids" / "runs").iterdir():
        numbers.unlink()
    (tmp_path / "old.prov" / "_ids" / "runs").rmdir()
    old = store.runs()
    assert [m["number"] for m in old] == [1, 2]
    assert old[0]["committed"] < old[1]["committed"]
    with store.transaction("capture") as txn:
        pass
    assert txn.number == 3
    assert select_run(store.runs(), "latest~2")["run_id"] == old[0]["run_id"]
    assert select_run(store.runs(), "2")["run_id"] == old[1]["run_id"]


def test_a_label_that_reads_as_a_number_or_latest_is_refused(spark: Any, tmp_path: Path) -> None:
    from provplug.errors import CaptureError

    for label in ("12", "latest", "latest~1", "2026-run", ""):
        with (
            pytest.raises(CaptureError, match="run label"),
            provplug.capture(spark, store=tmp_path / "s.prov", label=label),
        ):
            pass
    assert not (tmp_path / "s.prov").exists()


def test_a_digit_string_no_run_has_as_number_is_an_id_prefix() -> None:
    runs = numbered([{"run_id": "20261126T1-a", "committed": "1"}, {"run_id": "20261127T1-b", "committed": "2"}])
    assert select_run(runs, "2")["run_id"] == "20261127T1-b"
    assert select_run(runs, "2026112 7".replace(" ", ""))["run_id"] == "20261127T1-b"
    with pytest.raises(LineageQueryError, match="ambiguous"):
        select_run(runs, "2026")


def test_observers_learn_the_number_of_the_committed_run(spark: Any, tmp_path: Path) -> None:
    numbers = []
    for _ in range(2):
        with provplug.capture(spark, store=tmp_path / "s.prov") as run:
            assert run.info.number is None  # not committed yet: no number
        numbers.append((run.info.status, run.info.number))
    assert numbers == [("committed", 1), ("committed", 2)]
