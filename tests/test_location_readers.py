"""Every reader of triples sees a location edge's triples as if they were stored.

Two stores hold the same lineage (two capture runs of one small pipeline,
the second with one source cell changed): in ``full`` every triple is
stored; in ``located`` the triples of an aligned select, a 2:1 pairing, a
moving window (fixed buffer 2) and a 1:2 split are location edges recorded
through the recorder, and only the last step (a sum) stores its triples.
The triples are derived by hand here, with plain loops over row numbers
(never :func:`provplug.location.expand`), and every reader must give the
same answer on both stores: the readers of :mod:`provplug.store.triples`,
both index engines, every query method on the driver and on Spark in both
directions, the exports, the workflow graph, browse, metrics and diff.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from test_index import read_index
from test_index_spark import comparable

import provplug
from provplug import ids
from provplug.ingest.recorder import StagedRun
from provplug.location import Rates, RowRuns, location_edge
from provplug.model import OpInfo, TableInfo
from provplug.store.open import open_store
from provplug.testing import TripleOracle

Triple = tuple[int, int, int]  # src, dst, op

WHEN = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
QTY_A = [3, 1, 4, 1, 5, 9]
QTY_B = [3, 1, 4, 2, 5, 9]  # one source cell changed: Orders.qty of position 4
PRICE = [2, 7, 1, 8, 2, 8]

# Row numbers as Spark capture gives them: (partition << 26) | index, a run per partition.
ORDER_ROWS = RowRuns.partitions([4, 2])
PAIR_ROWS = RowRuns.partitions([2, 1])
MOVING_ROWS = RowRuns.partitions([3, 3])
HALF_ROWS = RowRuns.partitions([8, 4])
TABLES = ("Orders", "Amounts", "PairSums", "Moving", "Halves", "Total")
LOCATED_OPS = ("Select", "Pairs", "Window", "Split")


def rows_of(runs: RowRuns) -> list[int]:
    return [int(r) for r in runs.rows_at(list(range(1, runs.size + 1)))]


@dataclass
class Captured:
    run_id: str
    tables: dict[str, int]  # name -> table id
    ops: dict[str, int]  # name -> op id
    triples: list[Triple]  # by hand, every triple of the run


def _capture(store: Any, qty: list[int], located: bool) -> Captured:
    with store.transaction("capture") as txn:
        run = StagedRun(store, txn)
        captured = _record(run, qty, located)
        run.finish()
    captured.run_id = txn.run_id
    return captured


def _record(run: StagedRun, qty: list[int], located: bool) -> Captured:
    columns = {
        "Orders": ["id", "qty", "price"],
        "Amounts": ["id", "amount"],
        "PairSums": ["total"],
        "Moving": ["window"],
        "Halves": ["id", "half"],
        "Total": ["grand"],
    }
    infos = {n: run.new_table(n, "source" if n == "Orders" else "output", columns[n]) for n in TABLES}
    t = {n: info.table_id for n, info in infos.items()}
    o, a, p, m, h = (rows_of(r) for r in (ORDER_ROWS, ORDER_ROWS, PAIR_ROWS, MOVING_ROWS, HALF_ROWS))
    amount = [q * c for q, c in zip(qty, PRICE, strict=True)]
    contents = {
        "Orders": ({"id": list(range(1, 7)), "qty": qty, "price": PRICE}, o),
        "Amounts": ({"id": list(range(1, 7)), "amount": amount}, a),
        "PairSums": ({"total": [amount[2 * j] + amount[2 * j + 1] for j in range(3)]}, p),
        "Moving": ({"window": [amount[k] + (amount[k - 1] if k else 0) for k in range(6)]}, m),
        "Halves": ({"id": [k // 2 + 1 for k in range(12)], "half": [qty[k // 2] for k in range(12)]}, h),
        "Total": ({"grand": [sum(amount)]}, [0]),
    }
    for name, (data, numbers) in contents.items():
        with run.rows_writer(t[name]) as rows:
            rows.write(pa.table(data), numbers)
        run.record_table(
            TableInfo(t[name], name, run.run_id, infos[name].origin, tuple(columns[name]), len(numbers), True)
        )

    def v(table: str, column: int, row: int) -> int:
        return ids.value_id(t[table], column, row)

    op_ids = {name: run.new_op_id() for name in (*LOCATED_OPS, "Sum")}
    by_op: dict[str, list[tuple[int, int]]] = {
        "Select": [(v("Orders", c, r), v("Amounts", out, r)) for r in o for c, out in ((0, 0), (1, 1), (2, 1))],
        "Pairs": [(v("Amounts", 1, a[i]), v("PairSums", 0, p[j])) for j in range(3) for i in (2 * j, 2 * j + 1)],
        "Window": [(v("Amounts", 1, a[i]), v("Moving", 0, m[k])) for k in range(6) for i in (k - 1, k) if i >= 0],
        "Split": [
            (v("Orders", c, o[k]), v("Halves", c, h[x])) for k in range(6) for x in (2 * k, 2 * k + 1) for c in (0, 1)
        ],
        "Sum": [(v("PairSums", 0, p[j]), v("Total", 0, 0)) for j in range(3)],
    }
    io = {
        "Select": ("Orders", "Amounts"),
        "Pairs": ("Amounts", "PairSums"),
        "Window": ("Amounts", "Moving"),
        "Split": ("Orders", "Halves"),
        "Sum": ("PairSums", "Total"),
    }
    for name, op in op_ids.items():
        src, dst = io[name]
        run.record_op(
            OpInfo(
                op,
                name,
                run.run_id,
                "builtin",
                (t[src],),
                (t[dst],),
                started=WHEN,
                finished=WHEN,
                triples=len(by_op[name]),
            )
        )
    edges = {
        "Select": location_edge(op_ids["Select"], t["Orders"], t["Amounts"], {0: [0], 1: [1, 2]}, ORDER_ROWS),
        "Pairs": location_edge(
            op_ids["Pairs"],
            t["Amounts"],
            t["PairSums"],
            {0: [1]},
            PAIR_ROWS,
            ORDER_ROWS,
            Rates(consumption=2, production=1),
        ),
        "Window": location_edge(
            op_ids["Window"], t["Amounts"], t["Moving"], {0: [1]}, MOVING_ROWS, ORDER_ROWS, Rates(buffer=2)
        ),
        "Split": location_edge(
            op_ids["Split"], t["Orders"], t["Halves"], {0: [0], 1: [1]}, HALF_ROWS, ORDER_ROWS, Rates(production=2)
        ),
    }
    with run.triples_writer() as writer:
        for name, pairs in by_op.items():
            if located and name in edges:
                run.record_location_edge(edges[name])
                continue
            writer.write([s for s, _ in pairs], [d for _, d in pairs], op_ids[name], dst_table=t[io[name][1]])
    triples = [(s, d, op_ids[name]) for name, pairs in by_op.items() for s, d in pairs]
    return Captured("", t, op_ids, triples)


@dataclass
class Pair:
    full: Any
    located: Any
    runs: dict[str, list[Captured]]  # "full"/"located" -> [run a, run b]

    def stores(self) -> Iterable[tuple[str, Any]]:
        return (("full", self.full), ("located", self.located))

    def hand_triples(self) -> list[Triple]:
        return sorted(x for c in self.runs["full"] for x in c.triples)

    def named_triples(self) -> list[tuple[int, int, str]]:
        """:meth:`hand_triples` with the op's name (as answers give it)."""
        names = {op: name for c in self.runs["full"] for name, op in c.ops.items()}
        return sorted((s, d, names[op]) for s, d, op in self.hand_triples())

    def same_run_ids(self, text: str) -> str:
        """``text`` of the located store with its run ids renamed to the full store's."""
        for mine, theirs in zip(self.runs["located"], self.runs["full"], strict=True):
            text = text.replace(mine.run_id, theirs.run_id)
        return text


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Pair:
    folder = tmp_path_factory.mktemp("located")
    stores = {kind: open_store(str(folder / f"{kind}.prov")) for kind in ("full", "located")}
    runs = {
        kind: [_capture(s, QTY_A, kind == "located"), _capture(s, QTY_B, kind == "located")]
        for kind, s in stores.items()
    }
    for a, b in zip(runs["full"], runs["located"], strict=True):  # fresh stores reserve the same ids
        assert (a.tables, a.ops, a.triples) == (b.tables, b.ops, b.triples)
    return Pair(stores["full"], stores["located"], runs)


@pytest.fixture(scope="module")
def indexed(pair: Pair) -> Pair:
    for _, store in pair.stores():
        provplug.open(store.root).index(theta=4, engine="local")
    return pair


def _sorted(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True))


# -- the read module ---------------------------------------------------------------------


def test_the_located_store_stores_only_the_sums_triples(pair: Pair) -> None:
    full, located = pair.full.stats(), pair.located.stats()
    assert full["triples"] == len(pair.hand_triples()) and full["location_triples"] == 0
    sums = sum(1 for c in pair.runs["located"] for _, _, op in c.triples if op == c.ops["Sum"])
    assert located["triples"] == sums
    assert located["location_edges"] == 2 * len(LOCATED_OPS)
    assert located["triples"] + located["location_triples"] == full["triples"]
    assert pair.located.verify() == located


def test_both_stores_read_the_hand_derived_triples(pair: Pair) -> None:
    from provplug.store.triples import triple_batches, triple_table

    for _, store in pair.stores():
        assert _sorted(triple_table(store, ["src", "dst", "op"])) == pair.hand_triples()
        small = list(triple_batches(store, ["src", "dst", "op"], batch_rows=5))
        assert max(b.num_rows for b in small) <= 5
        assert _sorted(pa.Table.from_batches(small)) == pair.hand_triples()
    tables = _sorted(triple_table(pair.located, ["src_table", "dst_table", "src", "dst"]))
    assert tables == _sorted(triple_table(pair.full, ["src_table", "dst_table", "src", "dst"]))


def test_a_filter_reads_the_same_triples_and_expands_no_edge_it_excludes(pair: Pair, monkeypatch: Any) -> None:
    from provplug.store import triples as read
    from provplug.store.triples import TripleFilter, triple_counts, triple_table

    a, b = pair.runs["full"]
    filters = [
        TripleFilter.of(ops=[a.ops["Pairs"], b.ops["Sum"]]),
        TripleFilter.of(runs=[b.run_id]),
        TripleFilter.of(dst_tables=[a.tables["Halves"]], src_tables=[a.tables["Orders"]]),
        TripleFilter.of(ops=[b.ops["Window"], a.ops["Split"]], runs=[b.run_id]),
    ]
    for where in filters:
        rename = TripleFilter.of(
            where.ops,
            where.src_tables,
            where.dst_tables,
            None if where.runs is None else [pair.runs["located"][1].run_id],
        )
        full = _sorted(triple_table(pair.full, ["src", "dst", "op"], where))
        assert full == _sorted(triple_table(pair.located, ["src", "dst", "op"], rename)), where
        assert full  # every filter selects something
        assert triple_counts(pair.full, where) == triple_counts(pair.located, rename)
    expanded: list[int] = []
    real = read.expand_positions

    def counting(edge: Any, *args: Any, **kwargs: Any) -> Any:
        expanded.append(edge.op)
        return real(edge, *args, **kwargs)

    monkeypatch.setattr(read, "expand_positions", counting)
    assert triple_table(pair.located, ["src"], TripleFilter.of(ops=[a.ops["Sum"], b.ops["Sum"]])).num_rows == 6
    assert expanded == []  # no edge of another op was expanded to be filtered out
    triple_table(pair.located, ["src"], TripleFilter.of(ops=[b.ops["Split"]]))
    assert expanded == [b.ops["Split"]]


def test_slices_of_an_edge_give_exactly_its_triples() -> None:
    from provplug.location import expand, expand_positions
    from provplug.store.triples import edge_slices

    runs = RowRuns.partitions([5, 4, 3])
    edges = [
        location_edge(1, 1, 2, {0: [0, 1], 1: [1]}, runs),
        location_edge(2, 1, 3, {0: [0]}, RowRuns.partitions([6]), runs, Rates(consumption=2, production=1)),
        location_edge(3, 1, 4, {0: [1]}, runs, runs, Rates(buffer=3)),
        location_edge(
            4, 1, 5, {0: [0]}, RowRuns.partitions([4]), runs, Rates(consumption=3, production=1, dynamic=True)
        ),
        location_edge(5, 1, 6, {0: [0]}, RowRuns.partitions([24]), runs, Rates(production=2)),
    ]
    for slice_triples in (1, 3, 7, 1000):
        slices = edge_slices(edges, slice_triples)
        got = [b for i, first, last in slices for b in expand_positions(edges[i], first, last, 4)]
        assert _sorted(pa.Table.from_batches(got)) == _sorted(pa.Table.from_batches(list(expand(edges))))
        for i, edge in enumerate(edges):  # the slices of an edge partition its positions
            bounds = [(f, last) for j, f, last in slices if j == i]
            assert bounds[0][0] == 1 and bounds[-1][1] == edge.dst_rows.size
            assert all(prev[1] + 1 == nxt[0] for prev, nxt in itertools.pairwise(bounds))


def test_the_spark_frame_holds_the_same_triples(pair: Pair, spark: Any, monkeypatch: Any) -> None:
    from provplug.store import triples as read
    from provplug.store.triples import TripleFilter, triples_frame

    monkeypatch.setattr(read, "SLICE_TRIPLES", 4)  # many slices: many tasks, each expanding a piece
    for _, store in pair.stores():
        rows = triples_frame(spark, store, ["src", "dst", "op"]).collect()
        assert sorted(tuple(r) for r in rows) == pair.hand_triples()
    a = pair.runs["full"][0]
    where = TripleFilter.of(ops=[a.ops["Split"], a.ops["Sum"]])
    got = triples_frame(spark, pair.located, ["dst", "op"], where).collect()
    assert sorted(tuple(r) for r in got) == sorted((d, op) for _, d, op in pair.hand_triples() if op in where.ops)  # type: ignore[operator]


def test_damaged_location_edges_are_one_line(pair: Pair, tmp_path: Path) -> None:
    import shutil

    from provplug.errors import DamagedStoreError
    from provplug.store.locations import LOCATIONS
    from provplug.store.triples import triple_table

    copy = tmp_path / "copy.prov"
    shutil.copytree(pair.located.root, copy)
    store = open_store(str(copy))
    run = pair.runs["located"][0].run_id
    (copy / "runs" / run / LOCATIONS).write_text('{"format": "provplug-locations", "version": 1, "edges": [{"op"')
    for read in (lambda: triple_table(store), store.verify):
        with pytest.raises(DamagedStoreError, match=LOCATIONS) as caught:
            read()
        assert "\n" not in str(caught.value)


def test_verify_checks_the_edges_against_the_manifests_count(pair: Pair, tmp_path: Path) -> None:
    import shutil

    from provplug.errors import DamagedStoreError
    from provplug.store import parquet as store_module
    from provplug.store.locations import LOCATIONS

    assert store_module.LOCATIONS == LOCATIONS
    copy = tmp_path / "copy.prov"
    shutil.copytree(pair.located.root, copy)
    manifest = copy / "runs" / pair.runs["located"][1].run_id / "_manifest.json"
    record = json.loads(manifest.read_text())
    record["counts"]["location_triples"] += 1
    manifest.write_text(json.dumps(record))
    with pytest.raises(DamagedStoreError, match="location edges stand for 59 triples, its manifest says 60"):
        open_store(str(copy)).verify()


# -- the index ---------------------------------------------------------------------------


def _index(store: Any) -> dict[str, Any]:
    found = comparable(read_index(store))
    found["meta"].pop("runs")  # run ids differ between the stores; everything else must not
    return found


def test_both_engines_index_the_located_store_as_the_full_one(pair: Pair, spark: Any) -> None:
    from provplug.index import build_index

    build_index(pair.full, theta=4, engine="local")
    full = _index(pair.full)
    assert full["meta"]["counts"]["triples"] == len(pair.hand_triples())
    assert full["meta"]["counts"]["sets"] > full["meta"]["counts"]["components"] > 1
    build_index(pair.located, theta=4, engine="local")
    assert _index(pair.located) == full
    build_index(pair.located, theta=4, engine="spark", spark=spark)
    assert _index(pair.located) == full


# -- queries -----------------------------------------------------------------------------

METHODS = ("rq", "ccprov", "csprov", "auto")


def _answer(answer: Any) -> tuple[set[int], set[tuple[int, int, str]]]:
    d = answer.to_dict()
    return {r["value_id"] for r in d["lineage"]}, {(e["src"], e["dst"], e["op"]) for e in d["edges"]}


def _expected(
    triples: list[tuple[int, int, str]], values: list[int], direction: str
) -> tuple[set[int], set[tuple[int, int, str]]]:
    answer = TripleOracle(triples).answer(values, direction)
    return set(answer.values), set(answer.triples)


def _values(captured: Captured) -> list[int]:
    sizes = {
        "Orders": (3, ORDER_ROWS),
        "Amounts": (2, ORDER_ROWS),
        "PairSums": (1, PAIR_ROWS),
        "Moving": (1, MOVING_ROWS),
        "Halves": (2, HALF_ROWS),
    }
    found = [ids.value_id(captured.tables["Total"], 0, 0)]
    for name, (columns, runs) in sizes.items():
        found += [ids.value_id(captured.tables[name], c, r) for c in range(columns) for r in rows_of(runs)]
    return found


def test_every_method_answers_every_value_alike_on_the_driver(indexed: Pair) -> None:
    triples = indexed.named_triples()
    opened = {kind: provplug.open(store.root) for kind, store in indexed.stores()}
    values = _values(indexed.runs["full"][1])
    assert len(values) == 64
    for direction in ("up", "down"):
        for value in values:
            expected = _expected(triples, [value], direction)
            for method in METHODS:
                for kind, store in opened.items():
                    answer = store.lineage(value_id=value, method=method, direction=direction, tau=10**9)
                    assert answer.stats["path"] == "driver"
                    assert _answer(answer) == expected, (kind, method, direction, value)


def test_every_method_answers_alike_on_spark(indexed: Pair, spark: Any) -> None:
    triples = indexed.named_triples()
    values = _values(indexed.runs["full"][0])
    batch = [*values[:2], *values[20:22], *values[33:35], *values[-3:]]  # one query: the union of their lineages
    opened = provplug.open(indexed.located.root)  # the full store's Spark paths are those every other test runs
    for direction in ("up", "down"):
        expected = _expected(triples, batch, direction)
        for method in METHODS:
            answer = opened.lineage(value_id=batch, method=method, direction=direction, tau=0, spark=spark)
            assert answer.stats["path"] == "spark"
            assert _answer(answer) == expected, (method, direction)


# -- exports, graph, browse, metrics, diff -------------------------------------------------


def _canonical(value: Any) -> Any:
    """An export's JSON with the order of its records, the names of its
    blank nodes (``_:idN``, numbered in triple order) and OpenLineage's run
    UUIDs (derived from the store's run ids) left out."""
    if isinstance(value, dict):
        if value and all(str(k).startswith("_:") for k in value):
            return sorted(json.dumps(_canonical(v), sort_keys=True) for v in value.values())
        return {k: "RUN" if k == "runId" else _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return sorted((_canonical(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    return value


@pytest.mark.parametrize("fmt", ["prov-json", "openlineage"])
def test_exports_are_identical(indexed: Pair, fmt: str) -> None:
    from provplug.export import Target, export

    full_run, located_run = indexed.runs["full"][1].run_id, indexed.runs["located"][1].run_id
    whole = [
        export(s, fmt, run=r, namespace="n") for s, r in ((indexed.full, full_run), (indexed.located, located_run))
    ]
    assert _canonical(json.loads(indexed.same_run_ids(whole[1]))) == _canonical(json.loads(whole[0]))
    if fmt == "prov-json":  # every triple is a derivation
        derived = json.loads(whole[0])["wasDerivedFrom"]
        assert len(derived) == len(indexed.runs["full"][1].triples)
    else:  # the split's column lineage is there: from the located edge's column map
        assert '"name": "Halves"' in whole[1] and '"half"' in whole[1]
    target = Target(table="Total", column="grand")
    answers = [
        export(s, fmt, run=r, target=target, namespace="n")
        for s, r in ((indexed.full, full_run), (indexed.located, located_run))
    ]
    assert _canonical(json.loads(indexed.same_run_ids(answers[1]))) == _canonical(json.loads(answers[0]))


def test_column_lineage_is_identical(pair: Pair) -> None:
    from provplug.export.column_lineage import column_pairs
    from provplug.export.scope import ops_of, tables_of

    found = []
    for _, store in pair.stores():
        tables = {t.table_id: t for t in tables_of(store)}
        pairs = column_pairs(store, ops_of(store), tables)
        found.append(
            sorted(
                json.dumps(p, default=str, sort_keys=True)
                for ps in pairs.values()
                for p in (x._asdict() if hasattr(x, "_asdict") else vars(x) for x in ps)
            )
        )
    assert found[0] == found[1]
    assert len(found[0]) >= 2 * 6  # select's 3, pairs', window's, split's 2, sum's, per run


def test_the_workflow_graph_counts_the_edges_triples(pair: Pair) -> None:
    from provplug.explore.graph import as_text, workflow_of

    texts = [as_text(workflow_of(store)) for _, store in pair.stores()]
    assert texts[1] == texts[0]
    split = sum(1 for c in pair.runs["full"] for _, _, op in c.triples if op == c.ops["Split"])
    assert f"Split (2 runs): {split:,} triples" in texts[0]
    run = pair.runs["full"][0].run_id, pair.runs["located"][0].run_id
    assert as_text(workflow_of(pair.located, run[1])) == as_text(workflow_of(pair.full, run[0]))


def test_browse_shows_the_same_writers_and_both_counts(pair: Pair) -> None:
    from provplug.explore.browse import render_runs, run_records, table_detail

    details = [table_detail(store, "Halves", pair.runs[kind][0].run_id) for kind, store in pair.stores()]
    assert details[1]["written_by"] == details[0]["written_by"]
    full, located = run_records(pair.full), run_records(pair.located)
    for f, loc in zip(full, located, strict=True):
        assert f["triples"] == loc["triples"] + loc["location_triples"] and f["location_triples"] == 0
        assert loc["location_triples"] > 0
    assert "LOCATION_TRIPLES" in render_runs(located).splitlines()[0]


def test_metrics_of_the_located_run_are_those_of_the_full_run(pair: Pair) -> None:
    from provplug.reduce.metrics import compare

    a_full, a_located = pair.runs["full"][0].run_id, pair.runs["located"][0].run_id
    against_itself = compare(pair.full, pair.full, run_full=a_full, run_reduced=a_full)
    against_located = compare(pair.full, pair.located, run_full=a_full, run_reduced=a_located)
    assert against_located["tables"] == against_itself["tables"]
    assert all(t["rows_full"] == t["rows"] and t["prov"] > 0 for t in against_located["tables"]), against_located
    assert (
        against_located["reduced"]["location_triples"] + against_located["reduced"]["triples"]
        == against_located["full"]["triples"]
    )


def test_diff_explains_the_change_alike(indexed: Pair) -> None:
    from provplug.diff import diff_runs

    results = []
    for kind, store in indexed.stores():
        a, b = (c.run_id for c in indexed.runs[kind])
        results.append(json.dumps(diff_runs(store, a, b), sort_keys=True, default=str))
    assert indexed.same_run_ids(results[1]) == results[0]
    found = json.loads(results[0])
    assert found["explained"] is True
    changed = {t["table"] for t in found["tables"] if t["changed"]}
    assert changed == set(TABLES)
    (total,) = (t for t in found["tables"] if t["table"] == "Total")
    (cause,) = total["changed"][0]["because"]  # traced back through the located steps
    assert (cause["table"], cause["column"], cause["old"], cause["new"]) == ("Orders", "qty", 1, 2)
