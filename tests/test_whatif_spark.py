"""What-if and dependency on CAPTURED Spark pipelines (docs/queries.md "What-if"):

* the paper's running example (the demo's capture): deleting Mark, Steve
  and Mark, Mary, with ``depends`` agreeing with each;
* Lipstick Examples 4.3-4.5 (003 §4.2-4.3), the dealer fragment of §2.2
  rebuilt as a pipeline: cars C1 Accord, C2 Civic, C3 Civic (the dealer's
  state) and request I1 = (P1, B1, Civic). NumCarsByModel counts the cars of
  the requested model (cars joined with the request, grouped: (Civic, 2));
  InventoryBids joins the request with that count and prices the bid with a
  UDF over the request's fields ((B1, P1, Civic, $20K)): the bid exists
  through the join, its amount does not read the count;
* a property test: random pipelines (filters, inner/left/full joins, group
  aggregates, distinct, union) over small random tables, captured; for random
  deletions, the what-if applied to the captured outputs equals re-running
  the same pipeline with plain Spark on the reduced inputs, as multisets.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

import provplug
from provplug.store.open import open_store
from provplug.whatif.answer import WhatIfAnswer
from provplug.whatif.values import UNKNOWN


def _rows(answer: WhatIfAnswer, table: str, kind: str) -> list[Any]:
    effect = answer.table(table)
    return [] if effect is None else [r.values for r in getattr(effect, kind)]


# -- the paper's running example, captured ---------------------------------------
def test_paper_example_deleting_mark(demo_store: Path) -> None:
    store = provplug.open(demo_store)
    answer = store.whatif("Person1", "Name = 'Mark'")
    assert _rows(answer, "Person2", "vanished") == [{"Name": "Mark", "City": "NY", "Age": 40}]
    (ny,) = answer.table("AvgAge").changed  # type: ignore[union-attr]
    assert (ny.values, ny.changes) == ({"City": "NY", "Age": 35.0}, {"Age": (35.0, 30.0)})
    assert answer.table("AvgAge").untouched == 1  # type: ignore[union-attr]  # LA
    mark = store.depends("Person1.*", "AvgAge.Age", a_where="Name = 'Mark'", b_where="City = 'NY'")
    assert mark.answer == "yes" and [s["effect"] for s in mark.path] == ["deleted", "vanishes", "changes"]
    assert store.depends("Person1.*", "AvgAge.Age", a_where="Name = 'Mark'", b_where="City = 'LA'").answer == "no"


def test_paper_example_deleting_steve_and_mark_and_mary(demo_store: Path) -> None:
    store = provplug.open(demo_store)
    both = store.whatif("Person1", "Name IN ('Steve', 'Mark')")
    assert _rows(both, "AvgAge", "vanished") == [{"City": "NY", "Age": 35.0}]
    assert both.table("AvgAge").changed == []  # type: ignore[union-attr]
    ny = store.depends("Person1.*", "AvgAge.*", a_where="Name IN ('Steve', 'Mark')", b_where="City = 'NY'")
    assert ny.answer == "yes" and ny.path[-1]["effect"] == "vanishes"
    mary = store.whatif("Person1", "Name = 'Mary'")
    assert [t.table for t in mary.tables] == ["Person1"]
    for target in ("Person2.*", "AvgAge.*"):
        assert store.depends("Person1.*", target, a_where="Name = 'Mary'").answer == "no"


# -- Lipstick Examples 4.3-4.5 ----------------------------------------------------
@provplug.step("M_dealer1_count", output="NumCarsByModel")
def num_cars_by_model(cars: Any, requests: Any) -> Any:
    from pyspark.sql import functions as F

    return cars.join(requests, "Model").groupBy("Model").agg(F.count("*").alias("NumCars"))


@provplug.step("M_dealer1_bid", output="InventoryBids")
def inventory_bids(requests: Any, counts: Any) -> Any:
    from pyspark.sql import functions as F

    # The dealer's black-box pricing (CalcBid), over the request's fields only; a
    # lambda, so that Spark's workers receive it by value rather than by module.
    calc_bid = F.udf(lambda user, model: "$20K", "string")
    return requests.join(counts, "Model").select(
        "BidId", "UserId", "Model", calc_bid("UserId", "Model").alias("Amount")
    )


@pytest.fixture(scope="module")
def dealer(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lipstick") / "dealer.prov"
    cars = spark.createDataFrame([("C1", "Accord"), ("C2", "Civic"), ("C3", "Civic")], "CarId string, Model string")
    requests = spark.createDataFrame(
        [("I1", "P1", "B1", "Civic")], "RequestId string, UserId string, BidId string, Model string"
    )
    with provplug.capture(spark, store=path) as run:
        r = run.source(requests, "Requests")
        inventory_bids(r, num_cars_by_model(run.source(cars, "Cars"), r))
    return path


def test_lipstick_tables_as_in_example_2_3(dealer: Path) -> None:
    store = provplug.open(dealer)
    assert [r["row"] for r in store.records(store.cells(table="NumCarsByModel", column="*"))][:1] == [
        {"Model": "Civic", "NumCars": 2}
    ]
    bid = store.records(store.cells(table="InventoryBids", column="Amount"))
    assert [r["row"] for r in bid] == [{"BidId": "B1", "UserId": "P1", "Model": "Civic", "Amount": "$20K"}]


def test_lipstick_example_4_3_deleting_car_c2_recomputes_the_count_and_keeps_the_bid(dealer: Path) -> None:
    answer = provplug.open(dealer).whatif("Cars", "CarId = 'C2'")
    (civic,) = answer.table("NumCarsByModel").changed  # type: ignore[union-attr]
    assert (civic.values, civic.changes) == ({"Model": "Civic", "NumCars": 2}, {"NumCars": (2, 1)})
    assert answer.table("InventoryBids") is None  # untouched: the bid survives


def test_lipstick_example_4_4_deleting_request_i1_removes_every_output(dealer: Path) -> None:
    answer = provplug.open(dealer).whatif("Requests", "RequestId = 'I1'")
    assert _rows(answer, "NumCarsByModel", "vanished") == [{"Model": "Civic", "NumCars": 2}]
    assert _rows(answer, "InventoryBids", "vanished") == [
        {"BidId": "B1", "UserId": "P1", "Model": "Civic", "Amount": "$20K"}
    ]
    for table in ("NumCarsByModel", "InventoryBids"):
        effect = answer.table(table)
        assert effect is not None and effect.untouched == 0 and not effect.changed and not effect.unknown


def test_lipstick_example_4_5_the_bid_depends_on_i1_not_on_c2(dealer: Path, cli: Any) -> None:
    store = provplug.open(dealer)
    c2 = store.depends("Cars.*", "InventoryBids.*", a_where="CarId = 'C2'")
    assert (c2.answer, c2.depends) == ("no", False)
    i1 = store.depends("Requests.*", "InventoryBids.*", a_where="RequestId = 'I1'")
    assert (i1.answer, i1.depends) == ("yes", True)
    assert [s["table"] for s in i1.path] == ["Requests", "InventoryBids"] and i1.ops == ["M_dealer1_bid"]
    # The count depends on C2 (it changes), the bid's amount does not.
    assert store.depends("Cars.*", "NumCarsByModel.NumCars", a_where="CarId = 'C2'").answer == "yes"
    text = cli("depends", dealer, "Cars.*", "InventoryBids.Amount", "--a-where", "CarId = 'C2'")
    assert text.code == 0 and text.out.startswith("no: InventoryBids.Amount = '$20K'"), text


# -- what cannot be told is said, never guessed (docs/capture-semantics.md) ------------------------
@pytest.fixture(scope="module")
def undecidable(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Steps over the cells an upstream aggregate changes, and opaque ops."""
    from pyspark.sql import functions as F

    path = tmp_path_factory.mktemp("undecidable") / "u.prov"
    s = spark.createDataFrame([(1, "a", 1), (1, "b", 2), (2, "a", 3)], SCHEMA)
    r = spark.createDataFrame([(1, "x", 10)], SCHEMA)
    steps: dict[str, Callable[..., Any]] = {
        "F": lambda a, r: a.filter("s > 3"),  # a filter over a sum
        "J": lambda a, r: a.join(r, a["n"] == r["k"]).select(a["g"], "s", "v"),  # a join key over a count
        "G": lambda a, r: a.groupBy("s").count(),  # a group key over a sum
        "D": lambda a, r: a.select("g", (F.col("s") * 2).alias("d")),  # computed over a sum
    }
    with provplug.capture(spark, store=path) as run:
        src, right = run.source(s, "S"), run.source(r, "R")
        sums = provplug.step("sums", output="A")(
            lambda df: df.groupBy("g").agg(F.sum("v").alias("s"), F.count("*").alias("n"))
        )(src)
        for name, fn in steps.items():
            provplug.step(name.lower(), output=name)(fn)(sums, right)
        provplug.step("limit", output="L")(lambda df: df.orderBy("v").limit(2))(src)
        provplug.step("anti", output="N")(lambda df, r: df.join(r, "k", "left_anti"))(src, right)
        provplug.step("padded", output="P")(
            lambda df, r: df.join(r.select("k", F.col("v").alias("rv")), "k", "left").select("rv").distinct()
        )(src, right)
    return path


def test_what_cannot_be_told_is_reported_unknown(undecidable: Path) -> None:
    store = provplug.open(undecidable)
    answer = store.whatif("S", "v = 1")  # A's row 'a': s 4 -> 3, n 2 -> 1
    (a,) = answer.table("A").changed  # type: ignore[union-attr]
    assert a.changes == {"s": (4, 3), "n": (2, 1)}
    for name in ("F", "J", "G"):  # a changed cell decides which rows exist
        effect = answer.table(name)
        assert effect is not None and effect.rows_may_appear and "decides" in effect.rows_may_appear, (name, effect)
        assert not effect.vanished and not effect.changed, (name, effect)
    (d,) = answer.table("D").changed  # type: ignore[union-attr]
    assert d.changes == {"d": (8, UNKNOWN)}  # changed, value unknown
    limited = answer.table("L")
    assert limited is not None and limited.rows_may_appear and "limit" in limited.rows_may_appear
    assert not limited.vanished
    anti = store.whatif("R", "k = 1").table("N")  # S's k = 1 rows lose their match: they may appear
    assert anti is not None and anti.rows_may_appear and "anti join" in anti.rows_may_appear
    padded = store.whatif("R", "k = 1").table("P")  # distinct over the null-padded side
    assert padded is not None and (padded.unknown or padded.rows_may_appear) and not padded.vanished


# -- property test: random pipelines, what-if = re-run, exactly ---------------------
KINDS = ("filter", "inner", "left", "full", "aggregate", "distinct", "union", "global")
# Predicate -> the columns it reads.
PREDICATES = {
    "k >= 1": {"k"},
    "g <> 'b'": {"g"},
    "v > 3": {"v"},
    "v IS NULL": {"v"},
    "k = 2 OR g = 'a'": {"k", "g"},
    "v <= 5 AND k < 3": {"k", "v"},
}
SCHEMA = "k bigint, g string, v bigint"


@dataclasses.dataclass(frozen=True)
class Shape:
    """A table as the next steps read it: an aggregate's output or not, and
    which of its uniform columns (k, g, v) a deletion upstream may change
    (an aggregate's count and sum, an outer join's padded side)."""

    aggregated: bool
    volatile: frozenset[str]


@dataclasses.dataclass
class Pipeline:
    """Sources (name -> rows) and steps (name, output, inputs, function over DataFrames)."""

    sources: dict[str, list[tuple[Any, ...]]]
    steps: list[tuple[str, str, list[str], Callable[..., Any]]]

    def run(self, frames: dict[str, Any], decorate: bool) -> dict[str, Any]:
        tables = dict(frames)
        for name, output, inputs, fn in self.steps:
            step = provplug.step(name, output=output)(fn) if decorate else fn
            tables[output] = step(*(tables[i] for i in inputs))
        return tables

    def rerun(self, spark: Any, frames: dict[str, Any]) -> dict[str, list[tuple[Any, ...]]]:
        """Plain Spark, each step's output collected once and fed on as rows."""
        tables, rows = dict(frames), {}
        for _, output, inputs, fn in self.steps:
            frame = fn(*(tables[i] for i in inputs))
            rows[output] = [tuple(r) for r in frame.collect()]
            tables[output] = spark.createDataFrame(rows[output], frame.schema).coalesce(1)
        return rows


def _uniform(df: Any, aggregated: bool) -> Any:
    """Every table read as (k, g, v): an aggregate's (key or count, key or 'z', sum)."""
    from pyspark.sql import functions as F

    if not aggregated:
        return df.select("k", "g", "v")
    k = F.col("k") if "k" in df.columns else F.col("n")
    g = F.col("g") if "g" in df.columns else F.lit("z")
    return df.select(k.alias("k"), g.alias("g"), F.col("s").alias("v"))


def _aggregates() -> list[Any]:
    from pyspark.sql import functions as F

    return [
        F.count("*").alias("n"),
        F.count("v").alias("c"),
        F.sum("v").alias("s"),
        F.avg("v").alias("a"),
        F.min("v").alias("lo"),
        F.max("v").alias("hi"),
        F.count_distinct("v").alias("d"),
    ]


def _step_function(kind: str, rng: random.Random, shapes: list[Shape]) -> tuple[Callable[..., Any], int, Shape] | None:
    """A step of ``kind`` over inputs of ``shapes`` whose rows and cells a
    what-if can tell exactly (docs/capture-semantics.md: no filter, join key, group key or
    distinct over a cell a deletion upstream may change): (function,
    inputs, output shape); None when ``kind`` cannot be such a step here."""
    from pyspark.sql import functions as F

    flags = [s.aggregated for s in shapes]
    first = shapes[0].volatile
    if kind == "filter":
        usable = [p for p, cols in PREDICATES.items() if not cols & first]
        if not usable:
            return None
        predicate = rng.choice(usable)
        return (lambda a: _uniform(a, flags[0]).filter(predicate)), 1, Shape(False, first)
    if kind in ("inner", "left", "full"):
        keys = [c for c in ("k", "g") if c not in first | shapes[1].volatile]
        if not keys:
            return None
        key = rng.choice(keys)

        def join(a: Any, b: Any) -> Any:
            left = _uniform(a, flags[0])
            right = _uniform(b, flags[1]).select(*(F.col(c).alias(f"r{c}") for c in ("k", "g", "v")))
            joined = left.join(right, left[key] == right[f"r{key}"], kind)
            return joined.select(left["k"], left["g"], right["rv"].alias("v"))

        volatile = {
            "inner": (first & {"k", "g"}) | (shapes[1].volatile & {"v"}),
            "left": (first & {"k", "g"}) | {"v"},
            "full": {"k", "g", "v"},
        }[kind]
        return join, 2, Shape(False, frozenset(volatile))
    if kind in ("aggregate", "global"):
        options = [] if kind == "global" else [k for k in (["k"], ["g"], ["k", "g"]) if not set(k) & first]
        if kind == "aggregate" and not options:
            return None
        keys = rng.choice(options) if options else []

        def aggregate(a: Any) -> Any:
            return _uniform(a, flags[0]).groupBy(*keys).agg(*_aggregates())

        return aggregate, 1, Shape(True, frozenset({"v"} | ({"k"} if "k" not in keys else set())))
    if kind == "distinct":
        if first:
            return None
        return (lambda a: _uniform(a, flags[0]).distinct()), 1, Shape(False, frozenset())
    return (
        (lambda a, b: _uniform(a, flags[0]).union(_uniform(b, flags[1]))),
        2,
        Shape(False, first | shapes[1].volatile),
    )


def random_pipeline(seed: int) -> Pipeline:
    rng = random.Random(seed)
    sources = {}
    for s in range(rng.randint(2, 3)):
        sources[f"S{s}"] = [
            (rng.randint(0, 3), rng.choice("abc"), rng.choice([None, *range(10)])) for _ in range(rng.randint(3, 7))
        ]
    tables = {name: Shape(False, frozenset()) for name in sources}
    steps = []
    for i in range(rng.randint(2, 4)):
        names = list(tables)
        made = None
        while made is None:
            kind = rng.choice(KINDS)
            chosen = [rng.choice(names[-3:]) if rng.random() < 0.7 else rng.choice(names) for _ in range(2)]
            made = _step_function(kind, rng, [tables[c] for c in chosen])
        fn, arity, shape = made
        output = f"T{i}"
        steps.append((f"{kind}{i}", output, chosen[:arity], fn))
        tables[output] = shape
    return Pipeline(sources, steps)


def _frames(spark: Any, sources: dict[str, list[tuple[Any, ...]]]) -> dict[str, Any]:
    return {n: spark.createDataFrame(rows, SCHEMA).coalesce(1) for n, rows in sources.items()}


def _stored(store: Any, table: Any) -> dict[int, tuple[Any, ...]]:
    from provplug import schema

    data = store.read_rows(table.run_id, table.table_id)
    if data is None:  # an empty table
        return {}
    numbers = data.column(schema.ROW_COLUMN).to_pylist()
    values = data.select(list(table.columns)).to_pylist()
    return {int(n): tuple(v.values()) for n, v in zip(numbers, values, strict=True)}


def _predict(answer: WhatIfAnswer, table: Any, before: dict[int, tuple[Any, ...]]) -> tuple[list[tuple[Any, ...]], int]:
    """The table after the deletion as the what-if says (every row and cell
    known, or the test fails), and how many of its rows it says vanish or change."""
    effect = answer.table(table.name)
    if effect is None:
        return list(before.values()), 0
    assert effect.every_row_unknown is None and effect.rows_may_appear is None, effect
    assert not effect.unknown, effect.unknown
    gone = {r.row for r in [*effect.deleted, *effect.vanished]}
    changed = {r.row: r.changes for r in effect.changed}
    after = []
    for number, row in before.items():
        if number in gone:
            continue
        cells = dict(zip(table.columns, row, strict=True))
        for column, (_, new) in changed.get(number, {}).items():
            assert new is not UNKNOWN, (table.name, number, column)
            cells[column] = new
        after.append(tuple(cells.values()))
    return after, len(effect.vanished) + len(effect.changed)


def _capture(
    spark: Any, path: Path, pipeline: Pipeline
) -> tuple[dict[str, Any], dict[str, dict[int, tuple[Any, ...]]]]:
    """Capture ``pipeline`` into ``path``: its tables (name -> catalog entry) and stored rows."""
    from provplug.query.catalog import catalog_for

    with provplug.capture(spark, store=path) as run:
        frames = {n: run.source(df, n) for n, df in _frames(spark, pipeline.sources).items()}
        pipeline.run(frames, decorate=True)
    store = open_store(path)
    tables = {t.name: t for t in catalog_for(store).tables.values()}
    return tables, {name: _stored(store, t) for name, t in tables.items()}


def _check_deletion(
    spark: Any,
    path: Path,
    pipeline: Pipeline,
    tables: dict[str, Any],
    before: dict[str, dict[int, tuple[Any, ...]]],
    doomed: dict[str, set[int]],
) -> Counter[str]:
    """The what-if of deleting ``doomed`` (source -> row numbers) equals the re-run, table by table."""
    value_ids = [v for s, rows in doomed.items() for v in store_ids(tables[s], rows)]
    answer = provplug.open(path).whatif(value_id=value_ids)
    reduced = {
        s: [row for n, row in sorted(before[s].items()) if n not in doomed.get(s, set())] for s in pipeline.sources
    }
    rerun = pipeline.rerun(spark, _frames(spark, reduced))
    outcome: Counter[str] = Counter()
    for name, output, _, _ in pipeline.steps:
        predicted, touched = _predict(answer, tables[output], before[output])
        assert Counter(predicted) == Counter(rerun[output]), (
            doomed,
            name,
            sorted(predicted, key=repr),
            sorted(rerun[output], key=repr),
        )
        outcome["tables"] += 1
        outcome["rows vanished or changed"] += touched
    return outcome


def _check_pipeline(spark: Any, path: Path, seed: int, deletions: int) -> Counter[str]:
    pipeline = random_pipeline(seed)
    tables, before = _capture(spark, path, pipeline)
    rng = random.Random(seed * 7919)
    outcome: Counter[str] = Counter()
    for _ in range(deletions):
        chosen = rng.sample(sorted(pipeline.sources), rng.randint(1, 2))
        doomed = {s: set(rng.sample(sorted(before[s]), rng.randint(1, min(2, len(before[s]))))) for s in chosen}
        try:
            outcome += _check_deletion(spark, path, pipeline, tables, before, doomed)
        except AssertionError as exc:
            raise AssertionError(f"seed {seed}, steps {[s[0] for s in pipeline.steps]}: {exc}") from exc
    return outcome


def store_ids(table: Any, rows: set[int]) -> list[int]:
    from provplug import ids

    return [ids.value_id(table.table_id, 0, r) for r in sorted(rows)]


def _property(spark: Any, tmp_path: Path, seeds: Sequence[int], deletions: int) -> Counter[str]:
    outcome: Counter[str] = Counter()
    for seed in seeds:
        outcome += _check_pipeline(spark, tmp_path / f"p{seed}.prov", seed, deletions)
    assert outcome["rows vanished or changed"] > 0, outcome  # not vacuous: the deletions reach downstream
    return outcome


def test_whatif_equals_rerunning_random_pipelines(spark: Any, tmp_path: Path) -> None:
    _property(spark, tmp_path, range(6), deletions=2)


@pytest.mark.slow
def test_whatif_equals_rerunning_random_pipelines_at_length(spark: Any, tmp_path: Path) -> None:
    _property(spark, tmp_path, range(100, 130), deletions=6)
