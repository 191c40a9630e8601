"""``provplug diff``: two captured runs of one pipeline, compared cell by cell,
with the changed source cells that explain each changed output cell."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from provplug.cli.demo import adults, average_age

# The paper's Person1 (Steve NY 30, Mark NY 40, Shane LA 40, Mary NY 20) and variations of it.
BASE = [("Steve", "NY", 30), ("Mark", "NY", 40), ("Shane", "LA", 40), ("Mary", "NY", 20)]
STEVE_OLDER = [("Steve", "NY", 32), *BASE[1:]]  # one source cell changes
SHANE_GONE_ANN_NEW = [*BASE[:2], BASE[3], ("Ann", "SF", 50)]  # a row removed, a row added


def _capture(spark: Any, store: Path, people: list[tuple[str, str, int]]) -> str:
    from provplug.ingest.capture import capture
    from provplug.store.open import open_store

    before = {m["run_id"] for m in open_store(str(store)).runs()} if store.exists() else set()
    with capture(spark, store=str(store)) as run:
        df = spark.createDataFrame(people, "Name string, City string, Age int").coalesce(1)
        average_age(adults(run.source(df, "Person1")))
    (new,) = {m["run_id"] for m in open_store(str(store)).runs()} - before
    return str(new)


@pytest.fixture(scope="module")
def runs(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from provplug.index.build import build_index
    from provplug.store.open import open_store

    store = tmp_path_factory.mktemp("diff") / "people.prov"
    ids = {
        "base": _capture(spark, store, BASE),
        "older": _capture(spark, store, STEVE_OLDER),
        "again": _capture(spark, store, BASE),
        "changed_rows": _capture(spark, store, SHANE_GONE_ANN_NEW),
    }
    build_index(open_store(str(store)))
    return {"store": store, **ids}


def _diff(cli: Any, *args: Any) -> dict[str, Any]:
    result = cli("diff", *args, "--json")
    assert result.code == 0, result
    return dict(json.loads(result.out))


def _table(result: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in result["tables"] if t["table"] == name)


def test_a_changed_source_cell_explains_the_changed_average(cli: Any, runs: dict[str, Any]) -> None:
    result = _diff(cli, runs["store"], runs["base"], runs["older"])
    avg = _table(result, "AvgAge")
    # NY: avg(30, 40) = 35.0 before, avg(32, 40) = 36.0 after; LA (40.0) is untouched.
    assert [(c["column"], c["key"], c["old"], c["new"]) for c in avg["changed"]] == [
        ("Age", {"City": "NY"}, 35.0, 36.0)
    ]
    assert avg["added"] == [] and avg["removed"] == [] and avg["key"] == ["City"]
    (cell,) = avg["changed"]
    assert [(b["table"], b["column"], b["key"], b["status"], b["old"], b["new"]) for b in cell["because"]] == [
        ("Person1", "Age", {"Name": "Steve", "City": "NY"}, "changed", 30, 32)
    ]
    # The intermediate table and the source differ in Steve's age only.
    for name in ("Person2", "Person1"):
        table = _table(result, name)
        assert [(c["column"], c["key"], c["old"], c["new"]) for c in table["changed"]] == [
            ("Age", {"Name": "Steve", "City": "NY"}, 30, 32)
        ]
    assert result["explained"] is True

    text = cli("diff", runs["store"], runs["base"][:18], runs["older"]).out  # unique prefixes
    assert "AvgAge.Age [City=NY]: 35.0 → 36.0" in text
    assert "    because Person1.Age [Name=Steve, City=NY]: 30 → 32" in text


def test_identical_runs_have_no_difference(cli: Any, runs: dict[str, Any]) -> None:
    result = _diff(cli, runs["store"], runs["base"], runs["again"])
    assert [t["table"] for t in result["tables"]] == ["Person1", "Person2", "AvgAge"]
    assert all(not (t["changed"] or t["added"] or t["removed"]) for t in result["tables"])
    assert "no differences in 3 tables" in cli("diff", runs["store"], runs["base"], runs["again"]).out


def test_rows_in_one_run_only_are_added_or_removed(cli: Any, runs: dict[str, Any]) -> None:
    result = _diff(cli, runs["store"], runs["base"], runs["changed_rows"])
    avg = _table(result, "AvgAge")
    # Shane was LA's only adult, Ann is SF's; NY keeps Steve 30 and Mark 40.
    assert avg["changed"] == []
    assert avg["removed"] == [{"key": {"City": "LA"}, "row": {"City": "LA", "Age": 40.0}}]
    assert avg["added"] == [{"key": {"City": "SF"}, "row": {"City": "SF", "Age": 50.0}}]
    person2 = _table(result, "Person2")
    assert [r["key"] for r in person2["removed"]] == [{"Name": "Shane", "City": "LA"}]
    assert [r["key"] for r in person2["added"]] == [{"Name": "Ann", "City": "SF"}]
    text = cli("diff", runs["store"], runs["base"], runs["changed_rows"]).out
    assert "  - AvgAge [City=LA]: City=LA, Age=40.0" in text and "  + AvgAge [City=SF]: City=SF, Age=50.0" in text


def test_a_target_limits_the_diff_to_its_cells(cli: Any, runs: dict[str, Any]) -> None:
    store, a, b = runs["store"], runs["base"], runs["older"]
    la = _diff(cli, store, a, b, "AvgAge.Age", "--where", "City = 'LA'")
    assert [t["table"] for t in la["tables"]] == ["AvgAge"] and la["tables"][0]["changed"] == []
    ny = _diff(cli, store, a, b, "AvgAge.Age", "--where", "City = 'NY'", "--key", "City")
    assert [(c["old"], c["new"]) for c in ny["tables"][0]["changed"]] == [(35.0, 36.0)]
    # --key decides: keyed on the average itself, 35.0 and 36.0 are different rows.
    by_value = _diff(cli, store, a, b, "AvgAge.Age", "--key", "Age")
    assert by_value["tables"][0]["key"] == ["Age"]
    assert [r["key"] for r in by_value["tables"][0]["removed"]] == [{"Age": 35.0}]
    assert [r["key"] for r in by_value["tables"][0]["added"]] == [{"Age": 36.0}]


def test_bad_runs_are_one_line_errors(cli: Any, runs: dict[str, Any]) -> None:
    store = runs["store"]
    unknown = cli("diff", store, "nope", runs["base"])
    assert unknown.code == 2 and "unknown run 'nope' (runs: " in unknown.err and unknown.err.count("\n") == 1
    ambiguous = cli("diff", store, "20", runs["base"])  # no run 20: an id prefix every run has
    assert ambiguous.code == 2 and "ambiguous" in ambiguous.err
    missing = cli("diff", store, runs["base"], runs["older"], "Nope.Age")
    assert missing.code == 2 and "no table 'Nope'" in missing.err


def test_export_of_one_run_among_runs_that_share_table_names(cli: Any, runs: dict[str, Any]) -> None:
    from prov.model import ProvDocument

    store = runs["store"]
    latest = cli("export", store, "AvgAge.Age", "--where", "City = 'NY'", "--format", "prov-json")
    assert latest.code == 0 and "run 4: the latest of 4 runs that wrote AvgAge" in latest.err  # and says so
    out = cli("export", store, "--run", runs["older"], "AvgAge.Age", "--where", "City = 'NY'", "--format", "prov-json")
    assert out.code == 0, out
    doc = ProvDocument.deserialize(content=out.out, format="json")
    labels = (str(v) for r in doc.get_records() for k, v in r.attributes if str(k) == "prov:label")
    values = sorted(label for label in labels if " = " in label)
    # The older run's NY average: avg(32, 40) = 36.0, from Steve's 32 and Mark's 40.
    assert values == [
        "AvgAge.Age = 36.0",
        "Person1.Age = 32",
        "Person1.Age = 40",
        "Person2.Age = 32",
        "Person2.Age = 40",
    ]
    events = json.loads(cli("export", store, "--format", "openlineage").out)
    assert [e["job"]["name"] for e in events] == ["R1", "R2"] * 4  # every run's ops, oldest first
    one_run = json.loads(cli("export", store, "--run", runs["again"][:20], "--format", "openlineage").out)
    assert [e["job"]["name"] for e in one_run] == ["R1", "R2"]


def test_without_an_index_the_cells_still_differ_and_the_why_says_what_to_do(
    cli: Any, runs: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from provplug.errors import NotIndexedError
    from provplug.query.lineage import LineageQueries

    def not_indexed(*args: Any, **kwargs: Any) -> Any:
        raise NotIndexedError("the index of STORE predates 1 run(s): re-run `provplug index STORE`")

    monkeypatch.setattr(LineageQueries, "lineage", not_indexed)
    result = _diff(cli, runs["store"], runs["base"], runs["older"])
    assert [(c["old"], c["new"], c["because"]) for c in _table(result, "AvgAge")["changed"]] == [(35.0, 36.0, [])]
    assert "provplug index" in result["explained"]
    assert "not explained: the index of STORE predates" in cli("diff", runs["store"], runs["base"], runs["older"]).out
