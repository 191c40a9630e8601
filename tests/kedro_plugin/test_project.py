"""``kedro run`` of examples/kedro_spaceflights, unchanged, under ``PROVPLUG_STORE``.

The expected answers are worked out by hand from the project's inputs
(data/01_raw):

companies.csv                       shuttles.parquet (price as text)        reviews.csv
id rating location     iata         id company price                        shuttle rating reviews
1  100%   Isle of Man  t            10 1       $1,325.0                     10      90     12
2  67%    Niue         f            11 2       $1,780.0                     11      72     4
3  38%    Niue         t            12 2       $4,107.0                     12      88     30
4  90%    Andorra      t            13 3       $2,050.0                     13      95     7
                                    14 4       $910.0                       14      60     2
                                    15 3       $3,200.0   (no review)

model_input_table joins reviewed shuttles (15 has no review, so it is left
out) with their companies. Niue's reviewed shuttles are 11, 12 and 13, so
price_by_location.avg_price for Niue = round((1780 + 4107 + 2050) / 3, 2) =
2645.67, derived from those three prices in model_input_table, which come
from data_processing.preprocessed_shuttles (the parsed prices), which come
from the text prices in shuttles; not from shuttle 15's $3,200.0 (dropped
by the join) and not from the join keys or the group key (§3: a joined or
aggregated column's parents are the cells it is computed from).

top_shuttles keeps the 2 best-reviewed shuttles: 13 (95) and 10 (90).
Shuttle 13's company_rating 0.38 is a copy of model_input_table's, a copy
of data_processing.preprocessed_companies' 0.38 (company 3), parsed from
companies' "38%".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import explore_every_way, snapshot

import provplug

from .helpers import copy_project, kedro_run, outputs

NODES = {  # node name -> its namespace
    "data_processing.preprocess_companies_node": "data_processing",
    "data_processing.preprocess_shuttles_node": "data_processing",
    "data_processing.create_model_input_table_node": "data_processing",
    "reporting.summarise_by_location_node": "reporting",
    "reporting.top_rated_shuttles_node": "reporting",
}
SOURCES = {"companies", "shuttles", "reviews"}
OUTPUTS = {
    "data_processing.preprocessed_companies",
    "data_processing.preprocessed_shuttles",
    "model_input_table",
    "price_by_location",
    "top_shuttles",
}
EXPECTED_OUTPUTS = {
    "price_by_location": [("Andorra", 910.0, 2), ("Isle of Man", 1325.0, 12), ("Niue", 2645.67, 41)],
    "top_shuttles": [(10, "Type V5", "Isle of Man", 1.0, 90), (13, "Type F5", "Niue", 0.38, 95)],
}


def _answer(answer: Any) -> list[tuple[str, str, Any]]:
    """The ancestors of an answer as (table, column, value), sorted: ids aside."""
    return sorted((v["table"], v["column"], v["value"]) for v in answer.to_dict()["lineage"])


def _failure(result: Any) -> str:
    return f"exit {result.returncode}\nstdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-4000:]}"


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """The project run once under PROVPLUG_STORE, then indexed as the README says."""
    root = tmp_path_factory.mktemp("kedro_captured")
    project, store = copy_project(root / "project"), root / "store.prov"
    result = kedro_run(project, store=store)
    assert result.returncode == 0, _failure(result)
    from provplug.cli.main import main

    assert main(["index", str(store)]) == 0  # docs/queries.md "Indexing": provplug index STORE
    yield project, store


@pytest.fixture(scope="module")
def without_provplug(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[tuple[Any, ...]]]]:
    """The project run once with no store configured: Kedro's own outputs."""
    root = tmp_path_factory.mktemp("kedro_plain")
    project = copy_project(root / "project")
    result = kedro_run(project)
    assert result.returncode == 0, _failure(result)
    return root, outputs(project)


def test_the_aggregate_cell_derives_from_the_prices_of_the_reviewed_shuttles(captured: tuple[Path, Path]) -> None:
    _, store = captured
    answer = provplug.open(store).lineage(
        table="price_by_location", column="avg_price", where="company_location = 'Niue'"
    )
    assert [(v["table"], v["column"], v["value"]) for v in answer.to_dict()["query"]] == [
        ("price_by_location", "avg_price", 2645.67)
    ]
    assert _answer(answer) == sorted(
        [
            ("model_input_table", "price", 1780.0),
            ("model_input_table", "price", 4107.0),
            ("model_input_table", "price", 2050.0),
            ("data_processing.preprocessed_shuttles", "price", 1780.0),
            ("data_processing.preprocessed_shuttles", "price", 4107.0),
            ("data_processing.preprocessed_shuttles", "price", 2050.0),
            ("shuttles", "price", "$1,780.0"),
            ("shuttles", "price", "$4,107.0"),
            ("shuttles", "price", "$2,050.0"),
        ]
    )
    assert {e["op"] for e in answer.to_dict()["edges"]} == {
        "reporting.summarise_by_location_node",
        "data_processing.create_model_input_table_node",
        "data_processing.preprocess_shuttles_node",
    }


def test_the_filtered_cell_derives_across_both_pipelines_from_one_company_cell(captured: tuple[Path, Path]) -> None:
    _, store = captured
    answer = provplug.open(store).lineage(table="top_shuttles", column="company_rating", where="shuttle_id = 13")
    assert _answer(answer) == sorted(
        [
            ("model_input_table", "company_rating", 0.38),
            ("data_processing.preprocessed_companies", "company_rating", 0.38),
            ("companies", "company_rating", "38%"),
        ]
    )
    assert sorted(e["op"] for e in answer.to_dict()["edges"]) == sorted(
        [
            "reporting.top_rated_shuttles_node",
            "data_processing.create_model_input_table_node",
            "data_processing.preprocess_companies_node",
        ]
    )


def test_ops_are_the_nodes_with_their_namespace_and_tables_the_catalog_entries(captured: tuple[Path, Path]) -> None:
    import json

    _, store = captured
    target = provplug.open_store(store)
    (run,) = target.runs()
    assert run["counts"]["ops"] == len(NODES)
    ops = {op["name"]: json.loads(op["params"]) for op in target.ops().to_pylist()}
    assert {name: params["module"] for name, params in ops.items()} == NODES
    assert ops["reporting.top_rated_shuttles_node"]["params:reporting.top_n"] == 2  # the parameter it read
    tables = {t["name"]: t["origin"] for t in target.tables().to_pylist()}
    assert tables == {**dict.fromkeys(SOURCES, "source"), **dict.fromkeys(OUTPUTS, "output")}


def test_without_a_store_the_run_is_unchanged_and_writes_no_store(
    captured: tuple[Path, Path], without_provplug: tuple[Path, dict[str, list[tuple[Any, ...]]]]
) -> None:
    captured_project, _ = captured
    root, plain = without_provplug
    assert plain == outputs(captured_project)  # capture changed no output
    assert {k: plain[k] for k in EXPECTED_OUTPUTS} == EXPECTED_OUTPUTS
    assert not [p for p in root.rglob("*") if p.name == "provplug-store.json"]  # no store anywhere


def _reduce_companies(project: Path, mode: str | None = None) -> None:
    """``provplug: {reduce: {companies: keep Niue's}}`` (and ``reduce_mode``) in the project's local parameters."""
    settings = {"reduce": {"companies": "keep:where=company_location = 'Niue'"}}
    if mode is not None:
        settings["reduce_mode"] = mode  # type: ignore[assignment]
    import yaml

    (project / "conf" / "local" / "parameters.yml").write_text(yaml.safe_dump({"provplug": settings}))


THESIS_WARNING = "computed from the kept rows only"


def test_a_reduction_keeps_every_output_of_the_run_without_provplug(
    without_provplug: tuple[Path, dict[str, list[tuple[Any, ...]]]], tmp_path: Path
) -> None:
    """provplug: {reduce: ...} with no mode named is production: Kedro saves
    exactly the outputs of a run without provplug (Isle of Man and Andorra
    included), nothing warns, and only the kept companies' cells start triples."""
    _, plain = without_provplug
    assert {k: plain[k] for k in EXPECTED_OUTPUTS} == EXPECTED_OUTPUTS
    store = tmp_path / "reduced.prov"
    reduced_project = copy_project(tmp_path / "reduced")
    _reduce_companies(reduced_project)
    result = kedro_run(reduced_project, store=store)
    assert result.returncode == 0, _failure(result)
    assert outputs(reduced_project) == plain
    assert THESIS_WARNING not in result.stdout + result.stderr
    (run,) = provplug.open_store(store).runs()
    assert run["reduction"]["mode"] == "production"
    opened = provplug.open(store)
    niue = opened.lineage(table="top_shuttles", column="company_rating", where="shuttle_id = 13", method="rq")
    assert ("companies", "company_rating", "38%") in _answer(niue)  # company 3 (Niue) was kept
    isle_of_man = opened.lineage(table="top_shuttles", column="company_rating", where="shuttle_id = 10", method="rq")
    assert isle_of_man.lineage == []  # company 1 was not kept: no path from it is stored


def test_thesis_mode_only_when_named_changes_the_outputs_and_warns(tmp_path: Path) -> None:
    """reduce_mode: thesis, named: the nodes run on Niue's companies only, so
    Kedro saves other outputs, and the run's output says so."""
    project = copy_project(tmp_path / "thesis")
    _reduce_companies(project, "thesis")
    result = kedro_run(project, store=tmp_path / "thesis.prov")
    assert result.returncode == 0, _failure(result)
    assert THESIS_WARNING in result.stdout + result.stderr and "reduce_mode='thesis'" in result.stdout + result.stderr
    thesis = outputs(project)
    # Only Niue's reviewed shuttles 11 (72), 12 (88) and 13 (95) remain.
    assert thesis["price_by_location"] == [("Niue", 2645.67, 41)]
    assert [(r[0], r[2], r[3], r[4]) for r in thesis["top_shuttles"]] == [
        (12, "Niue", 0.67, 88),
        (13, "Niue", 0.38, 95),
    ]


def test_a_failing_node_commits_nothing_and_kedro_run_fails(captured: tuple[Path, Path], tmp_path: Path) -> None:
    import shutil

    _, committed = captured
    store = Path(shutil.copytree(committed, tmp_path / "store.prov"))  # a store with one run already
    before = snapshot(store, skip=("_staging", "_ids"))
    project = copy_project(tmp_path / "project")
    # reporting.top_rated_shuttles_node raises; the three data_processing nodes and
    # summarise_by_location_node have been captured by then.
    result = kedro_run(project, "--params", "reporting.top_n=0", store=store)
    assert result.returncode != 0
    assert "reporting.top_n must be at least 1" in result.stdout + result.stderr
    assert snapshot(store, skip=("_staging", "_ids")) == before
    assert len(provplug.open_store(store).runs()) == 1
    assert not list((store / "_staging").iterdir())


def test_the_readme_kedro_commands_answer_as_documented(captured: tuple[Path, Path], cli: Any) -> None:
    """docs/capturing.md's Kedro block: its `kedro run` line is what `captured` ran
    (PROVPLUG_STORE set, the project unchanged); its provplug lines, run on
    that store, print Niue's average price from the three reviewed shuttles."""
    import re
    import shlex

    from conftest import REPO

    page = (REPO / "docs" / "capturing.md").read_text()
    block = re.search(r"## Kedro\n.*?```bash\n(.*?)```", page, flags=re.S).group(1)  # type: ignore[union-attr]
    lines = block.strip().splitlines()
    assert "PROVPLUG_STORE=spaceflights.prov kedro run" in lines
    assert "export DO_NOT_TRACK=1 KEDRO_DISABLE_TELEMETRY=true" in lines
    _, store = captured
    commands = [shlex.split(line) for line in lines if line.startswith("provplug ")]
    assert [c[:2] for c in commands] == [["provplug", "index"], ["provplug", "lineage"]]
    for argv in commands:
        result = cli(*[str(store) if a == "spaceflights.prov" else a for a in argv[1:]])
        assert result.code == 0, result
    tree = result.out
    assert tree.startswith("price_by_location.avg_price = 2645.67"), tree
    for price in ("$1,780.0", "$4,107.0", "$2,050.0"):
        assert price in tree, tree
    assert "$3,200.0" not in tree and "$910.0" not in tree, tree


def test_the_kedro_store_can_be_browsed_drawn_and_exported(captured: tuple[Path, Path], cli: Any) -> None:
    _, store = captured
    found = explore_every_way(cli, store, "price_by_location", "avg_price", "company_location = 'Niue'", set(NODES))
    assert {t["name"] for t in found["tables"]} == SOURCES | OUTPUTS
