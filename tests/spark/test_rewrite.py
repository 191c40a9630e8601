"""The traversal (provplug_spark.rewrite): rules composed through whole steps,
from the paper's running example to chained bodies with several inputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import provplug
from provplug.store.open import open_store

from .helpers import (
    L_ROWS,
    R_ROWS,
    F,
    capture,
    expect,
    labelled_triples,
    ops,
    table_rows,
)


# -- the paper's running example (Table 4) -------------------------------------------------
def test_running_example_gives_the_15_triples_of_table_4(spark: Any, store_path: Path, group_joins: Any) -> None:
    import csv

    import people_spark  # examples/ on sys.path (see module fixture below)
    from conftest import DATA

    people_spark.capture_people(spark, str(store_path))

    names = [p[0] for p in people_spark.PERSON1]
    # Row order of each table in the paper (Table 4): AvgAge's first row is NY (22 <- 14, 17).
    row_keys = {"Person1": names, "Person2": names[:3], "AvgAge": ["NY", "LA"]}
    with open(DATA / "paper_table4_values.csv") as f:
        values = list(csv.DictReader(f))
    width = {t: sum(1 for v in values if v["table"] == t) // len(k) for t, k in row_keys.items()}
    first_id = {t: min(int(v["value_id"]) for v in values if v["table"] == t) for t in row_keys}
    paper_label = {
        int(v["value_id"]): (
            v["table"],
            v["column"],
            row_keys[v["table"]][(int(v["value_id"]) - first_id[v["table"]]) // width[v["table"]]],
        )
        for v in values
    }
    with open(DATA / "paper_table4_triples.csv") as f:
        paper = {(paper_label[int(t["src"])], paper_label[int(t["dst"])], t["op"]) for t in csv.DictReader(f)}
    assert len(paper) == 15

    got = labelled_triples(store_path, {"Person1": ("Name",), "Person2": ("Name",), "AvgAge": ("City",)})
    assert got == paper
    assert not any(src[2] == "Mary" for src, _, _ in got)  # Mary's values have no triple
    r1, r2 = ops(store_path)["R1"], ops(store_path)["R2"]
    assert (r1["kind"], r1["operations"], r1["triples"]) == ("builtin", ["Filter"], 9)
    assert (r2["kind"], r2["operations"], r2["triples"]) == ("builtin", ["Aggregate"], 6)
    assert r2["inputs"] == r1["outputs"]
    assert sorted(table_rows(store_path, "AvgAge"), key=lambda r: r["City"]) == [
        {"City": "LA", "Age": 40.0},
        {"City": "NY", "Age": 35.0},
    ]


@pytest.fixture(autouse=True, scope="module")
def _examples_on_path() -> Any:
    import sys

    from conftest import EXAMPLES

    sys.path.insert(0, str(EXAMPLES))
    yield
    sys.path.remove(str(EXAMPLES))


# -- steps with several inputs / a chained body --------------------------------------------
def test_step_with_two_inputs(spark: Any, store_path: Path) -> None:
    @provplug.step("Two", output="Out")
    def pair(left: Any, right: Any) -> Any:
        return left.join(right, "k", "left").select("x", F.concat("x", "y").alias("xy"))

    capture(spark, store_path, {"L": L_ROWS, "R": R_ROWS}, lambda f: pair(f["L"], f["R"]))
    want = expect(
        "Two",
        "Out",
        {
            ("x", "a"): [("L", "x", 1)],
            ("xy", "a"): [("L", "x", 1), ("R", "y", 1)],
            ("x", "b"): [("L", "x", 2)],
            ("xy", "b"): [("L", "x", 2)],  # y is null for k=2
        },
    )
    assert labelled_triples(store_path) == want
    tables = {t["name"]: t["table_id"] for t in open_store(store_path).tables().to_pylist()}
    assert ops(store_path)["Two"]["inputs"] == sorted([tables["L"], tables["R"]])


def test_chained_filter_join_groupby_withcolumn(spark: Any, store_path: Path) -> None:
    @provplug.step("Chain", output="Out")
    def revenue(orders: Any, customers: Any) -> Any:
        return (
            orders.filter(F.col("amount") > 6)
            .join(customers, "cust")
            .groupBy("region")
            .agg(F.sum("amount").alias("total"))
            .withColumn("double", F.col("total") * 2)
        )

    orders = ([(1, "c1", 10), (2, "c1", 20), (3, "c2", 5), (4, "c3", 7)], "oid int, cust string, amount int")
    customers = ([("c1", "EU"), ("c2", "US")], "cust string, region string")
    # A DataFrame a step returns reads the run's staged rows: use it inside the run.
    result = capture(spark, store_path, {"O": orders, "C": customers}, lambda f: revenue(f["O"], f["C"]).collect())
    assert [r.asDict() for r in result] == [{"region": "EU", "total": 30, "double": 60}]
    want = expect(
        "Chain",
        "Out",
        {
            ("region", "EU"): [("C", "region", "c1")],
            ("total", "EU"): [("O", "amount", 1), ("O", "amount", 2)],
            ("double", "EU"): [("O", "amount", 1), ("O", "amount", 2)],
        },
    )
    assert labelled_triples(store_path) == want
    op = ops(store_path)["Chain"]
    assert {"Filter", "Join", "Aggregate", "Project"} <= set(op["operations"])
    assert op["triples"] == 5 and op["started"] <= op["finished"]
