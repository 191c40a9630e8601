"""The explorer's JSON API answers exactly what the CLI's ``--json`` prints
(same documents, same format versions), refuses bad questions as the CLI
does, reads nothing outside the store, writes nothing, and serves other
requests while a slow query runs."""

from __future__ import annotations

import json
import threading
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA, snapshot

from .conftest import get


def without_timing(document: dict[str, Any]) -> dict[str, Any]:
    """A lineage document without its wall time (the one figure two runs of a query differ in)."""
    stats = {k: v for k, v in document.get("stats", {}).items() if k != "seconds"}
    return {**document, "stats": stats} if "stats" in document else document


def api(base: str, path: str, **params: Any) -> Any:
    status, body, _ = get(base + path.lstrip("/") + "?" + urllib.parse.urlencode(params, doseq=True))
    assert status == 200, body
    return body


def cli_json(cli: Any, *args: Any) -> Any:
    result = cli(*args)
    assert result.code == 0, result
    return json.loads(result.out)


LINEAGE_QUESTIONS = [
    (["AvgAge.Age", "--where", "City = 'NY'"], {"table": "AvgAge", "column": "Age", "where": "City = 'NY'"}),
    (
        ["AvgAge.Age", "--where", "City = 'NY'", "--depth", "1"],
        {"table": "AvgAge", "column": "Age", "where": "City = 'NY'", "depth": 1},
    ),
    (["AvgAge.Age", "--sources-only"], {"table": "AvgAge", "column": "Age", "sources_only": 1}),
    (["AvgAge.Age", "--summary"], {"table": "AvgAge", "column": "Age", "summary": 1}),
    (
        ["Person1.Age", "--where", "Name = 'Steve'", "--direction", "down"],
        {"table": "Person1", "column": "Age", "where": "Name = 'Steve'", "direction": "down"},
    ),
    (["Person2.*", "--where", "Name = 'Mark'"], {"table": "Person2", "column": "*", "where": "Name = 'Mark'"}),
]


@pytest.mark.parametrize(("argv", "params"), LINEAGE_QUESTIONS, ids=lambda x: str(x)[:40])
def test_api_lineage_equals_the_cli_json_on_the_readme_store(
    demo_store: Path, cli: Any, serve: Any, argv: list[str], params: dict[str, Any]
) -> None:
    expected = cli_json(cli, "lineage", demo_store, *argv, "--json")
    assert without_timing(api(serve(demo_store), "/api/lineage", **params)) == without_timing(expected)


def test_api_lineage_by_value_id_and_run_equals_the_cli(demo_store: Path, cli: Any, serve: Any) -> None:
    base = serve(demo_store)
    run = api(base, "/api/runs")[0]["run_id"]
    rows = api(base, "/api/rows", table="AvgAge", where="City = 'NY'")
    value = rows["rows"][0]["value_ids"]["Age"]
    expected = cli_json(cli, "lineage", demo_store, "--value-id", str(value), "--run", run, "--json")
    got = api(base, "/api/lineage", value_id=value, run=run)
    assert without_timing(got) == without_timing(expected)
    assert {(c["table"], c["value"]) for c in got["lineage"]} == {
        ("Person1", 30),
        ("Person1", 40),
        ("Person2", 30),
        ("Person2", 40),
    }


def test_api_browse_documents_equal_runs_tables_show_and_whatif(demo_store: Path, cli: Any, serve: Any) -> None:
    base = serve(demo_store)
    assert api(base, "/api/runs") == cli_json(cli, "runs", demo_store, "--json")
    assert api(base, "/api/tables") == cli_json(cli, "tables", demo_store, "--json")
    assert api(base, "/api/show", table="Person1", limit=3) == cli_json(
        cli, "show", demo_store, "Person1", "--limit", "3", "--json"
    )
    expected = cli_json(cli, "whatif", demo_store, "--delete", "Person1", "--where", "Name = 'Mark'", "--json")
    got = api(base, "/api/whatif", delete="Person1", where="Name = 'Mark'")
    assert without_timing(got) == without_timing(expected)
    avg = next(t for t in got["tables"] if t["table"] == "AvgAge")
    assert [c["cells"]["Age"] for c in avg["changed"]] == [{"old": 35.0, "new": 30.0, "known": True}]


def test_rows_are_paged_and_filtered_with_the_cli_where(demo_store: Path, serve: Any) -> None:
    base = serve(demo_store)
    page = api(base, "/api/rows", table="Person1", where="City = 'NY'", offset=1, limit=1)
    assert (page["format"], page["total"], page["offset"], page["limit"]) == ("provplug-rows", 3, 1, 1)
    assert [r["values"]["Name"] for r in page["rows"]] == ["Mark"]
    everyone = api(base, "/api/rows", table="Person1")
    assert [r["values"]["Name"] for r in everyone["rows"]] == ["Steve", "Mark", "Shane", "Mary"]
    # Each cell's value id is the one the lineage query starts from.
    mark_age = page["rows"][0]["value_ids"]["Age"]
    answer = api(base, "/api/lineage", value_id=mark_age, direction="down")
    assert answer["query"][0]["value"] == 40 and {c["table"] for c in answer["lineage"]} == {"Person2", "AvgAge"}


def test_a_large_answer_s_slice_lists_one_table_s_cells_as_the_answer_holds_them(demo_store: Path, serve: Any) -> None:
    base = serve(demo_store)
    question = {"table": "AvgAge", "column": "Age"}
    whole = api(base, "/api/lineage", **question)
    part = api(base, "/api/lineage/slice", **question, of_table="Person1", limit=1, offset=1)
    person1 = [c for c in whole["lineage"] if c["table"] == "Person1"]
    assert part["total"] == len(person1) == 3 and part["lineage"] == person1[1:2]
    # The rows of the page's cells and of the queried cells, as the whole answer stores them.
    keys = {person1[1]["row"], *(q["row"] for q in whole["query"])}
    assert part["rows"] == {k: whole["rows"][k] for k in keys} and part["query"] == whole["query"]
    assert all(person1[1]["value_id"] in (e["src"], e["dst"]) for e in part["edges"]) and part["edges"]


def test_the_workflow_document_lists_tables_ops_reads_and_writes(demo_store: Path, serve: Any) -> None:
    wf = api(serve(demo_store), "/api/graph")
    assert [t["name"] for t in wf["tables"]] == ["AvgAge", "Person1", "Person2"]
    assert {(r["table"], r["op"]) for r in wf["reads"]} == {("Person1", "R1"), ("Person2", "R2")}
    assert {(w["op"], w["table"]) for w in wf["writes"]} == {("R1", "Person2"), ("R2", "AvgAge")}
    assert {o["name"]: o["triples"] for o in wf["ops"]} == {"R1": 9, "R2": 6}


@pytest.mark.parametrize(
    ("params", "cli_args"),
    [
        ({"table": "AvgAge", "column": "Age", "where": "Nope = 1"}, ["AvgAge.Age", "--where", "Nope = 1"]),
        ({"table": "Nowhere", "column": "Age"}, ["Nowhere.Age"]),
        (
            {"table": "AvgAge", "column": "Age", "where": "1=1; DROP TABLE x"},
            ["AvgAge.Age", "--where", "1=1; DROP TABLE x"],
        ),
    ],
)
def test_a_bad_question_is_the_cli_s_json_error_with_status_400(
    demo_store: Path, cli: Any, serve: Any, params: dict[str, Any], cli_args: list[str]
) -> None:
    status, body, _ = get(serve(demo_store) + "api/lineage?" + urllib.parse.urlencode(params))
    result = cli("lineage", demo_store, *cli_args, "--json")
    assert result.code == 2
    assert status == 400 and body == json.loads(result.err)


def test_malformed_parameters_are_one_line_errors(demo_store: Path, serve: Any) -> None:
    base = serve(demo_store)
    for query, says in [
        ("api/lineage?table=AvgAge&column=Age&depth=x", "depth must be a whole number"),
        ("api/lineage?table=AvgAge&column=Age&direction=sideways", "direction must be one of up, down"),
        ("api/lineage", "nothing to trace"),
        ("api/rows", "table is required"),
        ("api/diff?a=x", "two runs"),
        ("api/nothing", "no such API"),
    ]:
        status, body, _ = get(base + query)
        assert status in (400, 404) and says in body["error"] and "\n" not in body["error"], (query, body)


def test_no_file_outside_the_store_is_served(demo_store: Path, serve: Any) -> None:
    base = serve(demo_store)
    assert get(base + "static/app.js")[0] == 200
    for path in [
        "static/../../../../etc/passwd",
        "static/%2e%2e/%2e%2e/errors.py",
        "static/..%2fapp.py",
        "static/%2e%2e%2f%2e%2e%2fpyproject.toml",
        "etc/passwd",
    ]:
        status, body, _ = get(base + path)
        assert status == 404 and "root:" not in str(body), (path, status)
    status, body, _ = get(base + "api/rows?" + urllib.parse.urlencode({"table": "../../../etc/passwd"}))
    assert status == 400 and body["error"].startswith("unknown table")


def test_pages_carry_a_policy_that_runs_only_the_explorer_s_own_scripts(demo_store: Path, serve: Any) -> None:
    status, body, headers = get(serve(demo_store) + "lineage?table=AvgAge&column=Age")
    assert status == 200 and '<script src="/static/app.js"' in body
    assert "script-src 'self'" in headers["content-security-policy"]
    assert "http" not in body.replace("http-equiv", "")  # nothing from another origin


def test_another_host_name_gets_nothing(demo_store: Path, serve: Any) -> None:
    status, body, _ = get(serve(demo_store) + "api/runs", headers={"Host": "attacker.example"})
    assert status == 400 and "attacker" not in str(body)


def test_nothing_is_written_to_the_store(demo_store: Path, serve: Any) -> None:
    before = snapshot(demo_store)
    base = serve(demo_store)
    for path in [
        "api/runs",
        "api/tables",
        "api/stats",
        "api/graph",
        "api/rows?table=Person1",
        "api/lineage?table=AvgAge&column=Age",
        "api/whatif?delete=Person1",
        "lineage?table=AvgAge&column=Age",
    ]:
        assert get(base + path)[0] == 200, path
    assert snapshot(demo_store) == before


def test_a_slow_query_does_not_hold_up_other_requests(demo_store: Path, serve: Any, monkeypatch: Any) -> None:
    from provplug.ui import documents

    release, entered = threading.Event(), threading.Event()
    original = documents.lineage_answer

    def slow(*args: Any) -> Any:
        entered.set()
        release.wait(120)
        return original(*args)

    monkeypatch.setattr(documents, "lineage_answer", slow)
    base = serve(demo_store)
    answers: list[Any] = []
    waiting = threading.Thread(target=lambda: answers.append(get(base + "api/lineage?table=AvgAge&column=Age")))
    waiting.start()
    try:
        assert entered.wait(120)
        status, runs, _ = get(base + "api/runs")  # served while the query is still held
        assert status == 200 and len(runs) == 1 and answers == []
    finally:
        release.set()
        waiting.join(120)
    assert answers[0][0] == 200


def test_the_api_equals_the_cli_on_an_imported_store(tmp_path: Path, cli: Any, serve: Any) -> None:
    store = tmp_path / "imported.prov"
    assert cli("import", store, "--triples", DATA / "paper_table4_triples.csv", "--quiet").code == 0
    assert cli("index", store).code == 0
    base = serve(store)
    value = json.loads(cli("lineage", store, "--value-id", "14", "--json").out)
    for params, argv in [
        ({"value_id": 14}, ["--value-id", "14"]),
        ({"value_id": [14, 9], "direction": "down"}, ["--value-id", "14", "--value-id", "9", "--direction", "down"]),
        ({"value_id": 14, "summary": 1}, ["--value-id", "14", "--summary"]),
    ]:
        expected = cli_json(cli, "lineage", store, *argv, "--json")
        assert without_timing(api(base, "/api/lineage", **params)) == without_timing(expected)
    assert value["lineage"], value
    assert api(base, "/api/tables") == cli_json(cli, "tables", store, "--json")


def test_ui_help_and_the_missing_extra(cli: Any, demo_store: Path, monkeypatch: Any) -> None:
    import importlib.util

    shown = cli("ui", "--help")
    assert shown.code == 0 and "--host" in shown.out and "--port" in shown.out and "--open" in shown.out
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "starlette" else real(name, *a))
    result = cli("ui", demo_store, "--port", "0")
    assert result.code == 2 and result.err.strip() == (
        "provplug: error: provplug ui needs starlette: pip install 'provplug[ui]'"
    )


@pytest.fixture(scope="module")
def kedro_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Kedro example project run under PROVPLUG_STORE, indexed (as the Kedro tests build it)."""
    from kedro_plugin.helpers import copy_project, kedro_run

    from provplug.cli.main import main

    root = tmp_path_factory.mktemp("kedro_ui")
    store = root / "store.prov"
    result = kedro_run(copy_project(root / "project"), store=store)
    assert result.returncode == 0, result.stderr[-3000:]
    assert main(["index", str(store)]) == 0
    return store


def test_the_api_equals_the_cli_on_the_kedro_example_store(kedro_store: Path, cli: Any, serve: Any) -> None:
    base = serve(kedro_store)
    for params, argv in [
        (
            {"table": "price_by_location", "column": "avg_price", "where": "company_location = 'Niue'"},
            ["price_by_location.avg_price", "--where", "company_location = 'Niue'"],
        ),
        (
            {"table": "shuttles", "column": "price", "direction": "down", "depth": 2},
            ["shuttles.price", "--direction", "down", "--depth", "2"],
        ),
        ({"table": "top_shuttles", "column": "*", "summary": 1}, ["top_shuttles.*", "--summary"]),
    ]:
        expected = cli_json(cli, "lineage", kedro_store, *argv, "--json")
        assert without_timing(api(base, "/api/lineage", **params)) == without_timing(expected), argv
    niue = api(base, "/api/lineage", table="price_by_location", column="avg_price", where="company_location = 'Niue'")
    assert sorted(c["value"] for c in niue["lineage"] if c["table"] == "shuttles") == [
        "$1,780.0",
        "$2,050.0",
        "$4,107.0",
    ]


def test_the_diff_of_two_runs_equals_the_cli(spark: Any, tmp_path: Path, cli: Any, serve: Any) -> None:
    import provplug
    from provplug.cli.demo import adults, average_age

    store = tmp_path / "two.prov"
    for mark in (40, 50):
        people = spark.createDataFrame(
            [("Steve", "NY", 30), ("Mark", "NY", mark), ("Mary", "LA", 20)], "Name string, City string, Age int"
        ).coalesce(1)
        with provplug.capture(spark, store=store) as run:
            average_age(adults(run.source(people, "Person1")))
    assert cli("index", store).code == 0
    base = serve(store)
    first, second = (r["run_id"] for r in api(base, "/api/runs"))
    expected = cli_json(cli, "diff", store, first, second, "--json")
    got = api(base, "/api/diff", a=first, b=second)
    assert got == expected
    avg = next(t for t in got["tables"] if t["table"] == "AvgAge")
    assert [(c["column"], c["old"], c["new"]) for c in avg["changed"]] == [("Age", 35.0, 40.0)]
    one = api(base, "/api/diff", a=first, b=second, table="AvgAge", column="Age")
    assert one == cli_json(cli, "diff", store, first, second, "AvgAge.Age", "--json")


def test_opening_a_lineage_page_starts_its_summary_which_the_page_s_request_then_gets(
    demo_store: Path, cli: Any, serve: Any, monkeypatch: Any
) -> None:
    from provplug.ui import documents

    asked: list[Any] = []
    started = threading.Event()
    original = documents.lineage_answer

    def counted(store: Any, question: Any, caches: Any) -> Any:
        asked.append(question)
        started.set()
        return original(store, question, caches)

    monkeypatch.setattr(documents, "lineage_answer", counted)
    base = serve(demo_store)
    status, page, _ = get(base + "lineage?" + urllib.parse.urlencode({"table": "AvgAge", "column": "Age"}))
    assert status == 200 and "<html" in page.lower()
    assert started.wait(120)  # the page alone started the query, before any API request
    summary = api(base, "/api/lineage", table="AvgAge", column="Age", summary=1)
    assert summary == cli_json(cli, "lineage", demo_store, "AvgAge.Age", "--summary", "--json")
    assert len(asked) == 1  # the API's summary is the one the page started, not a second query


def test_a_lineage_page_without_a_valid_question_starts_nothing(demo_store: Path, serve: Any, monkeypatch: Any) -> None:
    from provplug.ui import app, documents

    monkeypatch.setattr(documents, "lineage_answer", lambda *args: pytest.fail("no query for a page without one"))
    threads: list[Any] = []
    original = app.prefetch_summary
    monkeypatch.setattr(app, "prefetch_summary", lambda *args: threads.append(original(*args)))
    base = serve(demo_store)
    for query in ["", "depth=x&table=AvgAge&column=Age", "where=City%20%3D%20'NY'"]:
        status, _, _ = get(base + "lineage?" + query)
        assert status == 200
    assert threads == [None, None, None]
