"""Location lineage at capture (issue 15, docs/capture-semantics.md): row-aligned Spark
steps store one location edge instead of their triples, and nothing a reader
sees changes.

A pipeline mixing row-aligned steps (select, withColumn, cast, a Python UDF,
a pandas UDF) with filters, a join, an aggregate and a two-output step is
captured twice, with location lineage on and off. The stores number the
aligned outputs' rows differently (input row numbers vs partition numbers),
so they are compared through labels: (table, column, row key).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import provplug
from provplug import ids
from provplug.location import expand
from provplug.store.locations import LOCATIONS, locations_of
from provplug.store.open import open_store
from provplug.testing import StoreContents, Triple, keyed

F = pytest.importorskip("pyspark.sql.functions")

T_ROWS = [(k, k % 4, 10 * k, f"n{k}") for k in range(1, 7)]
D_ROWS = [(k, f"d{k % 3}") for k in range(1, 7)]
ALIGNED_STEPS = {"Widen", "Narrow", "Label", "Split"}  # Split: only its first output ("Kept") is aligned


@pytest.fixture
def location_lineage(spark: Any) -> Iterator[None]:
    """The session's conf leaves the choice to the capture's keyword."""
    from provplug_spark.aligned import LOCATION_LINEAGE_CONF

    spark.conf.unset(LOCATION_LINEAGE_CONF)
    yield


@provplug.step("Widen", output="Wide")
def widen(t: Any) -> Any:
    shout = F.udf(lambda s: s.upper(), "string")
    return (
        t.withColumn("ab", F.col("a") + F.col("b"))
        .withColumn("one", F.lit(1))
        .withColumn("su", shout("s"))
        .withColumn("bs", F.col("b").cast("string"))
    )


@provplug.step("Keep", output="Kept0")
def keep(wide: Any) -> Any:
    return wide.filter(F.col("a") > 0)


@provplug.step("Narrow", output="Narrow")
def narrow(kept: Any) -> Any:
    @F.pandas_udf("long")
    def double(v: pd.Series) -> pd.Series:
        return v * 2

    return kept.select("k", double("ab").alias("ab2"), F.concat("su", "bs").alias("sb"), F.lit("x").alias("x"))


@provplug.step("Join", output="Joined")
def join(narrowed: Any, d: Any) -> Any:
    return narrowed.join(d, "k")


@provplug.step("Total", output="Totals")
def total(joined: Any) -> Any:
    return joined.groupBy("g").agg(F.sum("ab2").alias("s"), F.count("*").alias("n"))


@provplug.step("Label", output="Labelled")
def label(totals: Any) -> Any:
    return totals.select("g", (F.col("s") / F.col("n")).alias("mean"), F.upper("g").alias("gu"))


@provplug.step("Split", output=("Kept", "Odd"))
def split(t: Any) -> Any:
    return t.select("k", F.col("s").alias("name")), t.filter(F.col("k") % 2 == 1).select("k", "a")


def _capture(spark: Any, store: Path, on: bool) -> None:
    with provplug.capture(spark, store=store, location_lineage=on) as run:
        t = run.source(spark.createDataFrame(T_ROWS, "k int, a int, b int, s string").repartition(3), "T")
        d = run.source(spark.createDataFrame(D_ROWS, "k int, g string").coalesce(1), "D")
        label(total(join(narrow(keep(widen(t))), d)))
        split(t)


KEYS = {"Totals": ("g",), "Labelled": ("g",), "Exploded": ("k", "v")}  # every other table: its first column, k


@pytest.fixture(scope="module")
def stores(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from provplug_spark.aligned import LOCATION_LINEAGE_CONF

    spark.conf.unset(LOCATION_LINEAGE_CONF)  # module scope: before the per-test fixtures run
    on, off = tmp_path_factory.mktemp("loc") / "on.prov", tmp_path_factory.mktemp("loc") / "off.prov"
    _capture(spark, on, True)
    _capture(spark, off, False)
    return on, off


class _Read(StoreContents):
    """A store read back with its location edges expanded into its triples."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.triples = self.store.stored_triples().to_table().to_pylist()  # the stored triple files alone
        self.stored = len(self.triples)
        self.edges = locations_of(self.store)
        for batch in expand(self.edges):
            self.triples.extend(batch.to_pylist())

    def labelled(self) -> set[Triple]:
        return self.labelled_triples(keyed(KEYS))


def test_aligned_steps_store_edges_instead_of_triples(stores: tuple[Path, Path], location_lineage: None) -> None:
    on, off = _Read(stores[0]), _Read(stores[1])
    ops = {o["op_id"]: o["name"] for o in on.store.ops().to_pylist()}
    assert {ops[e.op] for e in on.edges} == ALIGNED_STEPS
    assert {on.by_id[e.dst_table]["name"] for e in on.edges} == {"Wide", "Narrow", "Labelled", "Kept"}
    assert all(e.src_rows is None for e in on.edges)  # aligned: output row r is input row r
    assert off.edges == [] and not list(Path(stores[1]).glob(f"runs/*/{LOCATIONS}"))
    widen_edge = next(e for e in on.edges if ops[e.op] == "Widen")
    # k a b s | ab one su bs: ab <- a, b; one (a literal) has no entry; su <- s (the UDF's argument); bs <- b
    assert widen_edge.columns == ((0, (0,)), (1, (1,)), (2, (2,)), (3, (3,)), (4, (1, 2)), (6, (3,)), (7, (2,)))
    assert widen_edge.dst_rows.size == len(T_ROWS)
    assert on.stored < off.stored and on.stored + sum(e.triple_count for e in on.edges) == off.stored
    assert on.labelled() == off.labelled()


def test_aligned_outputs_keep_their_input_rows_numbers(stores: tuple[Path, Path], location_lineage: None) -> None:
    on = _Read(stores[0])
    tables = {t["name"]: t["table_id"] for t in on.by_id.values()}
    t_rows = {r["k"]: n for n, r in on.rows_by_id[tables["T"]].items()}
    for name in ("Wide", "Kept"):  # one row per input row, numbered as it
        assert {r["k"]: n for n, r in on.rows_by_id[tables[name]].items()} == t_rows
    # Row lineage is kept and agrees with the numbering: each row's one member is its own number.
    from provplug.ingest.rowlineage import lineage_of

    dataset = lineage_of(open_store(stores[0]))
    assert dataset is not None
    records = dataset.to_table().to_pylist()
    wide = [(r["out_row"], r["in_row"]) for r in records if r["out_table"] == tables["Wide"]]
    assert sorted(wide) == sorted((n, n) for n in t_rows.values())


def test_catalogue_and_manifest_counts_agree_on_and_off(stores: tuple[Path, Path], location_lineage: None) -> None:
    on, off = open_store(stores[0]), open_store(stores[1])
    by_name = {o["name"]: o["triples"] for o in off.ops().to_pylist()}
    assert {o["name"]: o["triples"] for o in on.ops().to_pylist()} == by_name  # the triples each op stands for
    manifest = json.loads(next(Path(stores[0]).glob("runs/*/_manifest.json")).read_text())
    assert LOCATIONS in manifest["datasets"]


def test_the_switch_in_the_session_conf_turns_it_off(spark: Any, tmp_path: Path, location_lineage: None) -> None:
    from provplug_spark.aligned import LOCATION_LINEAGE_CONF

    spark.conf.set(LOCATION_LINEAGE_CONF, "false")
    try:
        with provplug.capture(spark, store=tmp_path / "s.prov", location_lineage=True) as run:
            widen(run.source(spark.createDataFrame(T_ROWS, "k int, a int, b int, s string"), "T"))
    finally:
        spark.conf.unset(LOCATION_LINEAGE_CONF)
    store = open_store(tmp_path / "s.prov")
    assert locations_of(store) == [] and store.triples().count_rows() > 0


def _answers(path: Path) -> dict[tuple[Any, ...], Any]:
    """Every lineage answer of every cell of every table, by method and
    direction, in labels: (query label, method, direction) -> (lineage labels, edge labels)."""
    read = StoreContents(path)
    label = keyed(KEYS)
    store = provplug.open(path)
    answers: dict[tuple[Any, ...], Any] = {}
    for table_id, rows in read.rows_by_id.items():
        columns = read.by_id[table_id]["columns"]
        for row in rows:
            for column in range(len(columns)):
                vid = ids.value_id(table_id, column, row)
                for method in ("rq", "ccprov", "csprov"):
                    for direction in ("up", "down"):
                        answer = store.lineage(vid, method=method, direction=direction)
                        answers[(read.label(vid, label), method, direction)] = (
                            frozenset(read.label(r["value_id"], label) for r in answer.lineage),
                            frozenset(
                                (read.label(e["src"], label), read.label(e["dst"], label), e["op"])
                                for e in answer.edges
                            ),
                        )
    return answers


def test_every_answer_and_the_index_are_the_same_on_and_off(stores: tuple[Path, Path], location_lineage: None) -> None:
    from provplug.index import build_index

    metas = [build_index(open_store(path), engine="local") for path in stores]
    assert metas[0]["counts"] == metas[1]["counts"]  # components, sets, set dependencies, triples, ...
    assert metas[0]["workflow"] == metas[1]["workflow"]
    on, off = _answers(stores[0]), _answers(stores[1])
    assert len(on) == len(off) > 500
    assert on == off
    assert any(lineage for lineage, _ in on.values())  # answers with content, not all empty


def _edge_cases(spark: Any, store: Path, parquet: str, on: bool) -> None:
    steps = {
        "Sorted": lambda t: t.orderBy(F.col("k").desc()),
        "Limited": lambda t: t.limit(3),
        "Repartitioned": lambda t: t.repartition(2).select("k", "a"),
        "Exploded": lambda t: t.select("k", F.explode(F.array("a", "b")).alias("v")),
        "Literal": lambda t: t.select(F.lit(1).alias("one")),
        "Same": lambda t: t,
    }
    with provplug.capture(spark, store=store, location_lineage=on) as run:
        t = run.source(spark.createDataFrame(T_ROWS, "k int, a int, b int, s string").repartition(2), "T")
        p = run.source(spark.read.parquet(parquet), "P")  # copied files: rows numbered by file offset
        outs = {name: provplug.step(name, output=name)(body)(t) for name, body in steps.items()}
        provplug.step("Chained", output="Chained")(lambda x: x.withColumn("ab", F.col("a") * F.col("b")))(outs["Same"])
        provplug.step("OverParquet", output="OverParquet")(lambda x: x.select("k", (F.col("a") + 1).alias("a1")))(p)


def test_only_certainly_aligned_steps_become_edges(spark: Any, tmp_path: Path, location_lineage: None) -> None:
    parquet = str(tmp_path / "p.parquet")
    spark.createDataFrame(T_ROWS, "k int, a int, b int, s string").repartition(2).write.parquet(parquet)
    stores = tmp_path / "on.prov", tmp_path / "off.prov"
    _capture_both = [_edge_cases(spark, s, parquet, on) for s, on in zip(stores, (True, False), strict=True)]
    assert len(_capture_both) == 2
    on, off = _Read(stores[0]), _Read(stores[1])
    names = {o["op_id"]: o["name"] for o in on.store.ops().to_pylist()}
    assert {names[e.op] for e in on.edges} == {"Same", "Chained", "OverParquet"}
    tables = {t["name"]: t["table_id"] for t in on.by_id.values()}
    over = next(e for e in on.edges if names[e.op] == "OverParquet")
    assert over.src_table == tables["P"] and over.dst_rows.size == len(T_ROWS)
    assert set(on.rows_by_id[tables["OverParquet"]]) == set(on.rows_by_id[tables["P"]])  # file-offset numbers kept
    chained = next(e for e in on.edges if names[e.op] == "Chained")
    assert chained.src_table == tables["Same"] and set(on.rows_by_id[tables["Chained"]]) == set(
        on.rows_by_id[tables["T"]]
    )
    assert on.labelled() == off.labelled()


def test_production_reduction_keeps_every_triple(spark: Any, tmp_path: Path, location_lineage: None) -> None:
    """Production mode filters the stored triples to paths from kept rows:
    it needs them all, so no step becomes an edge."""
    store = tmp_path / "r.prov"
    with provplug.capture(spark, store=store, reduce={"T": "sample:ratio=0.5,seed=1"}, reduce_mode="production") as run:
        widen(run.source(spark.createDataFrame(T_ROWS, "k int, a int, b int, s string"), "T"))
    opened = open_store(store)
    assert locations_of(opened) == [] and opened.triples().count_rows() > 0


def _pairs_capture(spark: Any, store: Path, on: bool, group: Any, rates: dict[str, int]) -> None:
    @provplug.step("Pairs", output="Pairs", rates=rates)
    def pairs(t: Any) -> Any:
        return t.groupBy(group.alias("pair")).agg(F.sum("a").alias("sa")).orderBy("pair").coalesce(1)

    with provplug.capture(spark, store=store, location_lineage=on) as run:
        # One partition: rows 0..5 in k order; the output's rows 0..2 in pair order.
        pairs(run.source(spark.createDataFrame(T_ROWS, "k int, a int, b int, s string").coalesce(1), "T"))


def test_declared_rates_become_a_rated_edge_once_the_data_confirms_them(
    spark: Any, tmp_path: Path, location_lineage: None
) -> None:
    consecutive = F.floor((F.col("k") - 1) / 2)  # pairs (1, 2), (3, 4), (5, 6): 2 rows in, 1 out
    stores = tmp_path / "on.prov", tmp_path / "off.prov"
    for store, on in zip(stores, (True, False), strict=True):
        _pairs_capture(spark, store, on, consecutive, {"consumption": 2, "production": 1})
    on_read, off_read = _Read(stores[0]), _Read(stores[1])
    (edge,) = on_read.edges
    assert (edge.rates.consumption, edge.rates.production) == (2, 1) and edge.src_rows is not None
    assert edge.columns == ((0, (0,)), (1, (1,)))  # pair <- k, sa <- a
    assert on_read.stored == 0 and off_read.stored == edge.triple_count == 12
    assert off_read.edges == []
    assert on_read.labelled() == off_read.labelled()
    (op,) = on_read.store.ops().to_pylist()
    assert json.loads(op["params"])["rates"]["consumption"] == 2 and op["triples"] == 12  # recorded with the op


def test_a_declaration_the_data_contradicts_fails_the_run(spark: Any, tmp_path: Path, location_lineage: None) -> None:
    from provplug.errors import LocationError

    interleaved = F.col("k") % 3  # groups (3, 6), (1, 4), (2, 5): not consecutive input rows
    store = tmp_path / "bad.prov"
    with pytest.raises(LocationError, match=r"Pairs declares consumption 2, production 1, but its output row"):
        _pairs_capture(spark, store, True, interleaved, {"consumption": 2, "production": 1})
    assert not list(store.glob("runs/*/_manifest.json"))  # nothing committed


def test_rates_are_checked_when_declared() -> None:
    from provplug.errors import LocationError

    with pytest.raises(LocationError, match="production rate"):
        provplug.step("Bad", output="B", rates={"consumption": 1, "production": 0})
    with pytest.raises(LocationError, match="rates"):
        provplug.step("Bad", output="B", rates={"speed": 2})


def test_the_check_of_a_declaration_runs_on_spark_not_on_the_driver(
    spark: Any, tmp_path: Path, location_lineage: None, mocker: Any
) -> None:
    """The driver reads no triple file and collects no more than a few rows
    of any Spark result while the step's triples are checked."""
    import pyarrow.parquet as pq
    from pyspark.sql.classic.dataframe import DataFrame

    collected: list[int] = []
    collect = DataFrame.collect

    def counted(frame: DataFrame) -> list[Any]:
        rows = collect(frame)
        collected.append(len(rows))
        return rows

    mocker.patch.object(DataFrame, "collect", counted)
    for bulk in ("toArrow", "toPandas", "toLocalIterator"):
        mocker.patch.object(DataFrame, bulk, side_effect=AssertionError(f"{bulk} on the driver"))
    mocker.patch.object(pq, "read_table", side_effect=AssertionError("a triple file read on the driver"))
    n = 4000
    rows = [(k, k % 4, 10 * k, "") for k in range(1, n + 1)]

    @provplug.step("Pairs", output="Pairs", rates={"consumption": 2, "production": 1})
    def pairs(t: Any) -> Any:
        return (
            t.groupBy(F.floor((F.col("k") - 1) / 2).alias("pair"))
            .agg(F.sum("a").alias("sa"))
            .orderBy("pair")
            .coalesce(1)
        )

    store = tmp_path / "big.prov"
    with provplug.capture(spark, store=store, location_lineage=True) as run:
        pairs(run.source(spark.createDataFrame(rows, "k int, a int, b int, s string").coalesce(1), "T"))
    (edge,) = locations_of(open_store(store))
    assert edge.triple_count == 2 * n and edge.dst_rows.size == n // 2
    assert collected and max(collected) <= 50  # writer results (files, runs) and the check's empty difference


def _neighbours_capture(spark: Any, store: Path, rates: dict[str, int]) -> None:
    """Each row beside the previous one's ``b``: output row r comes from input
    rows r-1 and r, but its ``b`` from row r-1 only."""

    @provplug.step("Neighbours", output="Neighbours", rates=rates)
    def neighbours(t: Any) -> Any:
        this, previous = t.alias("this"), t.alias("previous")
        joined = this.join(previous, F.col("this.k") == F.col("previous.k") + 1, "left")
        return joined.select("this.k", "this.a", F.col("previous.b").alias("pb")).orderBy("k").coalesce(1)

    with provplug.capture(spark, store=store, location_lineage=True) as run:
        neighbours(run.source(spark.createDataFrame(T_ROWS, "k int, a int, b int, s string").coalesce(1), "T"))


def test_a_declaration_whose_rows_hold_but_whose_columns_do_not_fails(
    spark: Any, tmp_path: Path, location_lineage: None
) -> None:
    """Rows 1:1 with a buffer of 2 are right, but the declaration stands for
    every column from both rows: output row 0's pb would come from input row
    0's b, which it does not read."""
    from provplug.errors import LocationError

    store = tmp_path / "columns.prov"
    with pytest.raises(LocationError) as raised:
        _neighbours_capture(spark, store, {"consumption": 1, "production": 1, "buffer": 2})
    message = str(raised.value)
    assert message.startswith(
        "step Neighbours: its rows follow the declared consumption 1, production 1, buffer 2, "
        "but its cells do not all come from the same input columns"
    )
    # k, a from their own row and pb from the previous one: 6 + 6 + 5 captured, 3 + 5 * 6 declared
    assert "output row 0 column 2 from input row 0 column 2: captured 0 time(s), declared 1" in message
    assert "17 triples captured, the declaration stands for 33" in message
    assert not list(store.glob("runs/*/_manifest.json"))  # nothing committed


def test_a_declaration_whose_rows_do_not_hold_names_the_first_wrong_output_row(
    spark: Any, tmp_path: Path, location_lineage: None
) -> None:
    """1:1 without a buffer: output row 0 comes from input row 0 alone, as
    declared; row 1 is the first to read another row (0) too."""
    from provplug.errors import LocationError

    store = tmp_path / "rows.prov"
    with pytest.raises(
        LocationError,
        match=r"^step Neighbours declares consumption 1, production 1, but its output "
        r"row 1 comes from input rows \[0, 1\] where the rates say \[1\]$",
    ):
        _neighbours_capture(spark, store, {"consumption": 1, "production": 1})
    assert not list(store.glob("runs/*/_manifest.json"))


@pytest.mark.parametrize(
    "rates",
    [
        {"consumption": 2, "production": 1},
        {"consumption": 1, "production": 3},
        {"consumption": 2, "production": 3, "buffer": 5},
        {"consumption": 1, "production": 2, "dynamic": True},
    ],
)
def test_the_membership_of_a_triple_in_an_edge_is_its_expansion(rates: dict[str, Any]) -> None:
    """:func:`declared.inside` (arithmetic on positions) against the edge's
    expanded triples, for every triple near them: shifted rows, other
    columns, other tables, rows of no table."""
    import numpy as np
    from provplug_spark.declared import inside

    from provplug.location import Rates, RowRuns, location_edge

    declared = Rates(**rates)
    firings = 4
    src = RowRuns.of([(3, 5), (1 << 26, declared.consumption * firings)])  # two runs, as two partitions give
    dst = RowRuns.of([(0, declared.production), (5 << 26, declared.production * (firings - 1))])
    edge = location_edge(7, 2, 9, {0: (1,), 2: (0, 3)}, dst, src, declared)
    expected = {(b.column(0)[i].as_py(), b.column(1)[i].as_py()) for b in expand([edge]) for i in range(b.num_rows)}
    assert len(expected) == edge.triple_count
    near = {
        (ids.value_id(table, column, max(0, row + shift)), d)
        for s, d in expected
        for table, column, row in [ids.unpack(s)]
        for shift in (-1, 0, 1, 1 << 26)
    }
    near |= {
        (ids.value_id(t, c, r), ids.value_id(9, out, ids.unpack(d)[2]))
        for s, d in expected
        for t, c, r in [ids.unpack(s)]
        for out in (0, 1, 2)
    }
    near |= {(s, d + (1 << ids.TABLE_SHIFT)) for s, d in expected} | {
        (s + (1 << ids.TABLE_SHIFT), d) for s, d in expected
    }
    candidates = sorted(near | expected)
    src_ids, dst_ids = (np.array(side, dtype=np.int64) for side in zip(*candidates, strict=True))
    found = inside(edge, src_ids, dst_ids)
    assert {c for c, yes in zip(candidates, found.tolist(), strict=True) if yes} == expected


def test_the_check_compares_multisets(spark: Any) -> None:
    """:func:`declared.check` on hand-made triples: the edge's own pass in any
    order; a triple written twice (alone, or in place of another), a
    missing cell and an input row outside the window each fail, naming where."""
    from provplug_spark.declared import check

    from provplug.errors import LocationError
    from provplug.location import Rates, RowRuns, location_edge

    edge = location_edge(3, 1, 2, {0: (0,), 1: (1,)}, RowRuns.of([(0, 3)]), RowRuns.of([(0, 6)]), Rates(2, 1))
    exact = sorted((b.column(0)[i].as_py(), b.column(1)[i].as_py()) for b in expand([edge]) for i in range(b.num_rows))
    assert len(exact) == 12

    def checked(triples: list[tuple[int, int]]) -> None:
        check(
            spark, "Pairs", edge, spark.createDataFrame(triples, "src BIGINT, dst BIGINT").repartition(3), len(triples)
        )

    checked(exact[::-1])
    swapped = [*exact[:-1], exact[0]]  # the last cell's triple missing, the first's twice
    first, last = ids.unpack(exact[0][1]), ids.unpack(exact[-1][1])
    with pytest.raises(
        LocationError,
        match=rf"from the same input columns \(output row {first[2]} column {first[1]} "
        r"from input row \d+ column \d+: captured 2 time\(s\), declared 1; 12 triples",
    ):
        checked(swapped)
    with pytest.raises(LocationError, match=r"captured 2 time\(s\), declared 1; 13 triples"):
        checked([*exact, exact[3]])  # the same set: only a multiset comparison sees it
    without = [t for t in exact if t != exact[-1]]
    with pytest.raises(
        LocationError, match=rf"output row {last[2]} column {last[1]} .*captured 0 time\(s\), declared 1"
    ):
        checked(without)
    elsewhere = [(s - 2 if ids.unpack(s)[2] == 5 else s, d) for s, d in exact]  # output row 2 reads input row 3, not 5
    with pytest.raises(
        LocationError, match=r"output row 2 comes from input rows \[3, 4\] where the rates say \[4, 5\]$"
    ):
        checked(elsewhere)
