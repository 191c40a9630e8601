"""Fail open (issue 25): a step whose plan provplug cannot capture cell by cell
becomes a *coarse step* -- its rows are stored as usual, no triple is
written, and coarse edges say which input columns each output column may
derive from. Lineage answers that reach one say so and go on from the whole
columns behind it; ``strict=True`` keeps the refusal.

Hand derivation for the cogroup pipeline below. A (k, s, v): (1, x, 10),
(2, y, 20), (1, z, 30); B (k, w): (1, 100), (2, 200). ``cog`` cogroups A and
B by k and sums v and w: C (k, total) = (1, 140), (2, 220) -- a pandas
function over whole groups, which provplug cannot trace cell by cell.
``final`` doubles the total: D (k, t2) = (1, 280), (2, 440), exactly.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import provplug
from provplug.errors import CaptureError
from provplug.index import build_index
from provplug.store.open import open_store

from .helpers import labelled_triples, ops, table_rows

F = pytest.importorskip("pyspark.sql.functions")
METHODS = ("rq", "ccprov", "csprov", "auto")
A_ROWS = ([(1, "x", 10), (2, "y", 20), (1, "z", 30)], "k int, s string, v int")
B_ROWS = ([(1, 100), (2, 200)], "k int, w int")


@provplug.step("cog", output="C")
def cog(a: Any, b: Any) -> Any:
    def merge(left: pd.DataFrame, right: pd.DataFrame) -> pd.DataFrame:  # local: pickled by value for the workers
        key = left.k.iloc[0] if len(left) else right.k.iloc[0]
        return pd.DataFrame({"k": [key], "total": [int(left.v.sum() + right.w.sum())]})

    return a.groupBy("k").cogroup(b.groupBy("k")).applyInPandas(merge, "k int, total long")


@provplug.step("final", output="D")
def final(c: Any) -> Any:
    return c.select("k", (F.col("total") * 2).alias("t2"))


def _pipeline(spark: Any, store: Path, **kwargs: Any) -> list[tuple[int, int]]:
    with provplug.capture(spark, store=store, **kwargs) as run:
        a = run.source(spark.createDataFrame(*A_ROWS).coalesce(1), "A")
        b = run.source(spark.createDataFrame(*B_ROWS).coalesce(1), "B")
        return sorted((r.k, r.t2) for r in final(cog(a, b)).collect())


@pytest.fixture(scope="module")
def coarse_store(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[int, int]]]:
    store = tmp_path_factory.mktemp("coarse") / "store.prov"
    result = _pipeline(spark, store)
    build_index(store, engine="local")
    return store, result


def test_a_refused_step_is_stored_as_a_coarse_step_and_the_pipeline_is_unchanged(
    coarse_store: tuple[Path, list[tuple[int, int]]],
) -> None:
    store, result = coarse_store
    assert result == [(1, 280), (2, 440)]
    recorded = ops(store)
    assert recorded["cog"]["kind"] == "coarse" and recorded["cog"]["triples"] == 0
    assert "cogroup" in recorded["cog"]["params"]
    assert sorted((r["k"], r["total"]) for r in table_rows(store, "C")) == [(1, 140), (2, 220)]
    # Downstream of the coarse step, capture is exact again: D's cells from C's, row by row.
    assert labelled_triples(store, {"C": ("k",), "D": ("k",)}) == {
        (("C", "total", 1), ("D", "t2", 1), "final"),
        (("C", "total", 2), ("D", "t2", 2), "final"),
        (("C", "k", 1), ("D", "k", 1), "final"),
        (("C", "k", 2), ("D", "k", 2), "final"),
    }


def test_the_coarse_edges_name_every_column_a_cogroup_output_may_come_from(
    coarse_store: tuple[Path, list[tuple[int, int]]],
) -> None:
    from provplug.store.coarse import coarse_of

    store, _ = coarse_store
    tables = {t["name"]: t["table_id"] for t in open_store(store).tables().to_pylist()}
    edges = {(e.src_table, e.dst_table): e for e in coarse_of(open_store(store))}
    assert set(edges) == {(tables["A"], tables["C"]), (tables["B"], tables["C"])}
    # A pandas function over whole groups: each output column on every column it was given.
    assert edges[tables["A"], tables["C"]].columns == ((0, (0, 1, 2)), (1, (0, 1, 2)))
    assert edges[tables["B"], tables["C"]].columns == ((0, (0, 1)), (1, (0, 1)))
    assert all("cogroup" in e.reason for e in edges.values())


@pytest.mark.parametrize("method", METHODS)
def test_lineage_up_stops_exactly_at_the_coarse_step_and_continues_from_whole_columns(
    coarse_store: tuple[Path, list[tuple[int, int]]], method: str
) -> None:
    store, _ = coarse_store
    answer = provplug.open(store).lineage(table="D", column="t2", where="k = 1", method=method)
    # Cell level up to the coarse step: C.total of k=1 only (the index merged nothing through it).
    assert [(r["table"], r["column"], r["value"]) for r in answer.lineage] == [("C", "total", 140)]
    (crossing,) = answer.coarse
    assert crossing["op"] == "cog" and "cogroup" in crossing["reason"] and crossing["rows"] == "all"
    assert [(t["table"], t["columns"]) for t in crossing["from"]] == [("C", ["total"])]
    assert [(t["table"], t["columns"]) for t in crossing["continues_from"]] == [
        ("A", ["k", "s", "v"]),
        ("B", ["k", "w"]),
    ]
    text = answer.render()
    assert "coarse step cog" in text and "every row of A.{k, s, v}; B.{k, w}" in text
    assert provplug.api.LineageAnswer.from_dict(answer.to_dict()).coarse == answer.coarse


def test_lineage_down_crosses_into_the_whole_output_and_beyond(
    coarse_store: tuple[Path, list[tuple[int, int]]],
) -> None:
    store, _ = coarse_store
    answer = provplug.open(store).lineage(table="A", column="v", where="s = 'x'", direction="down")
    assert answer.lineage == []  # no triple leaves A: the coarse step has none
    (crossing,) = answer.coarse
    assert [(t["table"], t["columns"]) for t in crossing["continues_from"]] == [("C", ["k", "total"])]
    assert [(t["table"], t["columns"]) for t in crossing["beyond"]] == [("D", ["k", "t2"])]


def test_an_answer_that_crosses_no_coarse_step_says_nothing_of_them(
    coarse_store: tuple[Path, list[tuple[int, int]]],
) -> None:
    store, _ = coarse_store
    answer = provplug.open(store).lineage(table="D", column="t2", where="k = 1", direction="down")
    assert answer.coarse == [] and "coarse" not in answer.to_dict()


def test_strict_keeps_the_refusal_and_commits_nothing(spark: Any, tmp_path: Path) -> None:
    store = tmp_path / "strict.prov"
    with pytest.raises(CaptureError, match="cogroup"):
        _pipeline(spark, store, strict=True)
    assert not store.exists() or open_store(store).runs() == []


SCRIPT = """
import sys
import pandas as pd
from pyspark.sql import SparkSession

def merge(left, right):
    key = left.k.iloc[0] if len(left) else right.k.iloc[0]
    return pd.DataFrame({"k": [key], "total": [int(left.v.sum() + right.w.sum())]})

spark = SparkSession.builder.getOrCreate()
data, out = sys.argv[1], sys.argv[2]
a = spark.read.parquet(data + "/a")
b = spark.read.parquet(data + "/b")
a.groupBy("k").cogroup(b.groupBy("k")).applyInPandas(merge, "k int, total long").write.parquet(out + "/totals")
"""


def _script_inputs(spark: Any, tmp_path: Path) -> tuple[Path, Path]:
    script, data = tmp_path / "cogroup.py", tmp_path / "data"
    script.write_text(textwrap.dedent(SCRIPT))
    spark.createDataFrame(*A_ROWS).coalesce(1).write.parquet(str(data / "a"))
    spark.createDataFrame(*B_ROWS).coalesce(1).write.parquet(str(data / "b"))
    return script, data


def test_provplug_run_stores_a_cogroup_write_as_a_coarse_step(spark: Any, cli: Any, tmp_path: Path) -> None:
    script, data = _script_inputs(spark, tmp_path)
    store = tmp_path / "run.prov"
    result = cli("run", store, script, data, tmp_path / "out")
    assert result.code == 0, result.err
    assert "1 coarse step (write:totals: cannot capture cogroup" in result.err
    written = sorted(tuple(r) for r in spark.read.parquet(str(tmp_path / "out" / "totals")).collect())
    assert written == [(1, 140), (2, 220)]  # the plain pipeline's result
    assert sorted((r["k"], r["total"]) for r in table_rows(store, "totals")) == written
    assert ops(store)["write:totals"]["kind"] == "coarse"


def test_provplug_run_strict_refuses_before_the_write(spark: Any, tmp_path: Path) -> None:
    script, data = _script_inputs(spark, tmp_path)
    store = tmp_path / "strict.prov"
    done = subprocess.run(
        [sys.executable, "-m", "provplug", "run", "--strict", str(store), str(script), str(data), str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode != 0
    assert "cogroup" in done.stderr
    assert not (tmp_path / "o" / "totals").exists()  # today's refusal: before the real write
    assert not store.exists() or open_store(store).runs() == []


def test_whatif_reports_every_row_behind_a_coarse_step_as_unknown(
    coarse_store: tuple[Path, list[tuple[int, int]]],
) -> None:
    store, _ = coarse_store
    answer = provplug.open(store).whatif("A", "s = 'x'")
    c = answer.table("C")
    assert c is not None and c.every_row_unknown is not None
    assert "cog is a coarse step" in c.every_row_unknown and "cogroup" in c.every_row_unknown
    d = answer.table("D")
    assert d is not None and d.every_row_unknown is not None  # and so is everything after it


def test_exports_mark_the_coarse_step(coarse_store: tuple[Path, list[tuple[int, int]]], cli: Any) -> None:
    store, _ = coarse_store
    prov = cli("export", store, "D.t2", "--where", "k = 1", "--format", "prov-json")
    assert prov.code == 0, prov.err
    document = json.loads(prov.out)
    (activity,) = [a for a in document["activity"].values() if a["prov:label"] == "cog"]
    assert activity["pp:kind"] == "coarse" and "cogroup" in activity["pp:coarseReason"]
    coarse = [d for d in document["wasDerivedFrom"].values() if d.get("pp:coarse")]
    assert sorted(d["pp:columns"] for d in coarse) == ["k<-k,s,v; total<-k,s,v", "k<-k,w; total<-k,w"]
    events = cli("export", store, "--format", "openlineage")
    assert events.code == 0, events.err
    (event,) = [e for e in json.loads(events.out) if e["job"]["name"].endswith("cog")]
    (output,) = event["outputs"]
    fields = output["facets"]["columnLineage"]["fields"]
    assert sorted((f["name"], f["field"]) for f in fields["total"]["inputFields"]) == [
        ("A", "k"),
        ("A", "s"),
        ("A", "v"),
        ("B", "k"),
        ("B", "w"),
    ]
    assert all(
        t["description"].startswith("coarse step: cannot capture cogroup")
        for f in fields["total"]["inputFields"]
        for t in f["transformations"]
    )
