"""Modules and ZoomOut / ZoomIn (Lipstick §4.1) on lineage answers.

The paper's running example with R1 and R2 as one module ``people``:
Person1 -> R1 -> Person2 -> R2 -> AvgAge. Person2 is written by R1 and read
only by R2, both of ``people``: an intermediate table. AvgAge is read by
nobody (an output), Person1 is read by R1 and written by no op of ``people``
(an input). So ZoomOut(people) of AvgAge.Age[NY]'s ancestors (fine:
Person2.Age 30, 40 <-R1- Person1.Age 30, 40) keeps Person1.Age 30 and 40,
linked straight to AvgAge.Age 35.0 by ``people``; ZoomIn gives the fine
answer back.

The Kedro example (examples/kedro_spaceflights): data_processing's nodes
write preprocessed_companies and preprocessed_shuttles, read only by its own
create_model_input_table_node (intermediate), and model_input_table, read by
reporting's nodes (an output). reporting writes price_by_location and
top_shuttles, read by nobody (outputs) and has no intermediate table.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import provplug
from provplug.cli.demo import adults, average_age, person1
from provplug.errors import CaptureError, LineageQueryError
from provplug.ingest.capture import _in_module
from provplug.model import StepInfo

NY = {"table": "AvgAge", "column": "Age", "where": "City = 'NY'"}


@pytest.fixture(scope="module")
def people(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from provplug.index.build import build_index
    from provplug.store.open import open_store

    store = tmp_path_factory.mktemp("zoom") / "people.prov"
    with provplug.capture(spark, store=str(store)) as run, provplug.module("people"):
        average_age(adults(run.source(person1(spark), "Person1")))
    build_index(open_store(str(store)), engine="local")
    return store


def _cells(answer: Any) -> set[tuple[str, str, Any]]:
    return {(r["table"], r["column"], r["value"]) for r in answer.lineage}


def _edges(answer: Any) -> set[tuple[tuple[str, Any], tuple[str, Any], str]]:
    cells = {r["value_id"]: (r["table"], r["value"]) for r in [*answer.query, *answer.lineage]}
    return {(cells[e["src"]], cells[e["dst"]], e["op"]) for e in answer.edges}


# -- the module context manager ---------------------------------------------------
def test_steps_inside_module_blocks_record_the_dotted_module() -> None:
    step = StepInfo("R1", (), ("Person2",), {"k": 1})
    assert _in_module(step) is step  # outside any block: unchanged
    with provplug.module("outer"):
        assert _in_module(step).params == {"k": 1, "module": "outer"}
        with provplug.module("inner"):
            assert _in_module(step).params["module"] == "outer.inner"
            own = StepInfo("n", (), ("t",), {"module": "ns"})  # a Kedro node's namespace inside a block
            assert _in_module(own).params["module"] == "outer.inner.ns"
    with pytest.raises(CaptureError, match="module name"), provplug.module(".bad"):
        pass


def test_the_captured_ops_carry_the_module(people: Path) -> None:
    ops = {o["name"]: json.loads(o["params"]) for o in provplug.open_store(people).ops().to_pylist()}
    assert ops == {"R1": {"module": "people"}, "R2": {"module": "people"}}


# -- the paper example ------------------------------------------------------------
def test_zoom_out_links_person1_straight_to_avgage_and_zoom_in_restores(people: Path) -> None:
    store = provplug.open(people)
    fine = store.lineage(**NY)
    assert _cells(fine) == {
        ("Person2", "Age", 30),
        ("Person2", "Age", 40),
        ("Person1", "Age", 30),
        ("Person1", "Age", 40),
    }
    coarse = store.zoom_out(fine, ["people"])
    assert _cells(coarse) == {("Person1", "Age", 30), ("Person1", "Age", 40)}
    assert _edges(coarse) == {
        (("Person1", 30), ("AvgAge", 35.0), "people"),
        (("Person1", 40), ("AvgAge", 35.0), "people"),
    }
    assert coarse.stats["zoom_out"] == ["people"]
    assert fine.edges and "people" not in {e["op"] for e in fine.edges}  # the fine answer is untouched
    back = store.zoom_in(coarse, ["people"])
    assert back == fine and back.edges == fine.edges and back.lineage == fine.lineage
    again = store.lineage(**NY)
    assert (back.query, back.lineage, back.edges) == (again.query, again.lineage, again.edges)  # the store too
    assert store.zoom_in(fine, ["people"]) is fine  # nothing zoomed out: already fine


def test_zoom_out_of_descendants_and_in_the_lineage_call(people: Path) -> None:
    store = provplug.open(people)
    down = store.lineage(table="Person1", column="Age", where="Name = 'Mark'", direction="down", zoom_out=["*"])
    assert _cells(down) == {("AvgAge", "Age", 35.0)}
    assert _edges(down) == {(("Person1", 40), ("AvgAge", 35.0), "people")}
    back = store.zoom_in(down, "*")
    fine = store.lineage(table="Person1", column="Age", where="Name = 'Mark'", direction="down")
    assert (back.query, back.lineage, back.edges) == (fine.query, fine.lineage, fine.edges)


def test_zoom_errors(people: Path) -> None:
    store = provplug.open(people)
    with pytest.raises(LineageQueryError, match="unknown module 'nope'"):
        store.lineage(**NY, zoom_out=["nope"])
    with pytest.raises(LineageQueryError, match="inside module 'people'"):
        store.lineage(table="Person2", column="Age", where="Name = 'Mark'", zoom_out=["people"])
    coarse = store.lineage(**NY, zoom_out=["people"])
    with pytest.raises(LineageQueryError, match="not zoomed out"):
        store.zoom_in(coarse, ["other"])
    from provplug.query.answer import LineageAnswer

    with pytest.raises(LineageQueryError, match="query again"):
        store.zoom_in(LineageAnswer.from_dict(coarse.to_dict()), ["people"])


def test_zoom_cli(people: Path, cli: Any) -> None:
    target = ("lineage", people, "AvgAge.Age", "--where", "City = 'NY'")
    coarse = cli(*target, "--zoom-out", "people", "--json")
    assert coarse.code == 0, coarse
    data = json.loads(coarse.out)
    assert {c["table"] for c in data["lineage"]} == {"Person1"}
    assert {e["op"] for e in data["edges"]} == {"people"} and data["stats"]["zoom_out"] == ["people"]
    text = cli(*target, "--zoom-out", "people")
    assert "people from Person1" in text.out and "(zoomed out: people)" in text.out, text
    fine = cli(*target, "--zoom-out", "*", "--zoom-in", "people", "--json")
    assert {c["table"] for c in json.loads(fine.out)["lineage"]} == {"Person1", "Person2"}
    bad = cli(*target, "--zoom-out", "nope")
    assert bad.code == 2 and "unknown module 'nope' (modules: people)" in bad.err, bad


# -- the Kedro example ------------------------------------------------------------
@pytest.fixture(scope="module")
def spaceflights(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The Kedro project run once under PROVPLUG_STORE, then indexed (as tests/kedro_plugin)."""
    pytest.importorskip("kedro")
    from kedro_plugin.helpers import copy_project, kedro_run

    root = tmp_path_factory.mktemp("zoom_kedro")
    store = root / "store.prov"
    result = kedro_run(copy_project(root / "project"), store=store)
    assert result.returncode == 0, result.stderr[-4000:]
    from provplug.cli.main import main

    assert main(["index", str(store), "--engine", "local"]) == 0
    yield store


NIUE = {"table": "price_by_location", "column": "avg_price", "where": "company_location = 'Niue'"}
PRICES = {("$1,780.0", 1780.0), ("$4,107.0", 4107.0), ("$2,050.0", 2050.0)}


def test_kedro_zoom_out_of_data_processing_hides_the_preprocessed_tables(spaceflights: Path) -> None:
    store = provplug.open(spaceflights)
    fine = store.lineage(**NIUE)
    coarse = store.zoom_out(fine, ["data_processing"])
    assert {r["table"] for r in coarse.lineage} == {"model_input_table", "shuttles"}
    assert _edges(coarse) == {
        *((("shuttles", text), ("model_input_table", number), "data_processing") for text, number in PRICES),
        *(
            (("model_input_table", number), ("price_by_location", 2645.67), "reporting.summarise_by_location_node")
            for _, number in PRICES
        ),
    }
    both = store.zoom_out(coarse, ["reporting"])  # zooming out further: every op is a module now
    assert {e["op"] for e in both.edges} == {"data_processing", "reporting"}
    assert store.zoom_in(both, ["reporting"]) == coarse
    assert store.zoom_in(both, ["reporting", "data_processing"]) == fine
    assert store.zoom_in(coarse, ["data_processing"]) == fine


def test_kedro_zoom_out_of_reporting_only_relabels(spaceflights: Path) -> None:
    store = provplug.open(spaceflights)
    fine = store.lineage(table="top_shuttles", column="company_rating", where="shuttle_id = 13")
    coarse = store.zoom_out(fine, ["reporting"])
    assert coarse.lineage == fine.lineage  # reporting has no intermediate table
    assert sorted(e["op"] for e in coarse.edges) == sorted(
        ["reporting", "data_processing.create_model_input_table_node", "data_processing.preprocess_companies_node"]
    )
    assert store.zoom_in(coarse, ["reporting"]) == fine
