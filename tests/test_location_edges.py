"""provplug's side of location-based lineage: row runs, location edges and the
triples they stand for, the run file, and the check of declared rates.

Expected triples are written out by hand on small cases, and on random ones
taken from a simulated SDF run of the edge's actor (token by token, see
``provplug.location.simulate``) mapped to row numbers one token at a time.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from provplug import schema
from provplug.errors import DamagedStoreError, LocationError
from provplug.ids import value_id
from provplug.location import (
    Actor,
    Consumption,
    LocationEdge,
    Production,
    Rates,
    RowRuns,
    check_rates,
    dependency,
    expand,
    location_edge,
    simulate,
    workflow,
    workflow_of,
)
from provplug.plugin.writers import Destination
from provplug.store.locations import LOCATIONS, edges_json, locations_of, read_locations, write_locations
from provplug.store.parquet import ParquetStore

Triple = tuple[int, int, int, int, int]

P1 = 1 << 26  # first row number of Spark partition 1


def triples(edges: list[LocationEdge], chunk_rows: int = 1 << 20) -> list[Triple]:
    """The expanded triples as tuples (sorted), checking every batch's schema and size."""
    found: list[Triple] = []
    for batch in expand(edges, chunk_rows):
        assert batch.schema == schema.TRIPLES and 0 < batch.num_rows <= chunk_rows
        found.extend(zip(*(batch.column(i).to_pylist() for i in range(5)), strict=True))
    return sorted(found)


def t(op: int, src: tuple[int, int, int], dst: tuple[int, int, int]) -> Triple:
    return (value_id(*src), value_id(*dst), op, src[0], dst[0])


# -- row runs ----------------------------------------------------------------------------


def test_row_runs_map_positions_to_sparse_row_numbers_and_back() -> None:
    runs = RowRuns.partitions([3, 0, 2])
    assert runs == RowRuns((0, 2 * P1), (3, 2)) and runs.size == 5
    rows = [0, 1, 2, 2 * P1, 2 * P1 + 1]
    assert runs.rows_at([1, 2, 3, 4, 5]).tolist() == rows
    assert runs.positions_of(rows[::-1]).tolist() == [5, 4, 3, 2, 1]
    assert RowRuns.from_rows(rows) == runs
    assert [c.tolist() for c in runs.chunks(2)] == [[0, 1], [2], [2 * P1, 2 * P1 + 1]]
    assert RowRuns.of([(10, 2), (12, 3), (0, 1)]) == RowRuns((10, 0), (5, 1))  # continuing runs merge
    with pytest.raises(LocationError, match=r"outside 1\.\.5"):
        runs.rows_at([6])
    with pytest.raises(LocationError, match="row 3 is not a row"):
        runs.positions_of([3])
    with pytest.raises(LocationError, match="overlap"):
        RowRuns((0, 5), (10, 3))


def test_row_runs_use_the_spark_writers_row_numbers() -> None:
    from provplug_spark import writer

    from provplug.location.rows import ROW_IN_PARTITION_BITS

    assert ROW_IN_PARTITION_BITS == writer.ROW_IN_PARTITION_BITS


# -- expansion -----------------------------------------------------------------------


def test_an_aligned_edge_expands_to_the_hand_built_triples() -> None:
    # A select over table 3 (partitions of 2 and 1 rows) into table 4: out 0 = in 0,
    # out 1 = f(in 1, in 2), out 2 a literal (no input column: no triple).
    edge = location_edge(9, 3, 4, {0: [0], 1: [1, 2], 2: []}, RowRuns.partitions([2, 1]))
    expected = sorted(t(9, (3, i, r), (4, o, r)) for r in (0, 1, P1) for o, i in ((0, 0), (1, 1), (1, 2)))
    assert triples([edge]) == expected
    assert edge.triple_count == 9


def test_a_batching_edge_expands_to_the_hand_built_triples() -> None:
    # Two input rows per output row: output positions 1, 2, 3 (rows 0, 1, P1) come
    # from input positions 1-2, 3-4, 5-6 (rows 100, 101 | 102, 200 | 201, 202).
    edge = location_edge(5, 1, 2, {0: [1]}, RowRuns.partitions([2, 1]), RowRuns.of([(100, 3), (200, 3)]), Rates(2, 1))
    pairs = [(100, 0), (101, 0), (102, 1), (200, 1), (201, P1), (202, P1)]
    assert triples([edge]) == sorted(t(5, (1, 1, s), (2, 0, d)) for s, d in pairs)


def test_a_buffered_fan_out_edge_expands_to_the_hand_built_triples() -> None:
    # c = 1, p = 2, buffer 2: output k is firing ceil(k/2), which uses input positions
    # max(1, f-1)..f: rows 10 | 10 | 10, 11 | 10, 11 | 11, 12 | 11, 12 for outputs 0..5.
    edge = location_edge(7, 1, 2, {3: [0]}, RowRuns.of([(0, 6)]), RowRuns.of([(10, 3)]), Rates(1, 2, buffer=2))
    pairs = [(10, 0), (10, 1), (10, 2), (11, 2), (10, 3), (11, 3), (11, 4), (12, 4), (11, 5), (12, 5)]
    assert triples([edge]) == sorted(t(7, (1, 0, s), (2, 3, d)) for s, d in pairs)


def random_runs(rnd: random.Random, size: int) -> RowRuns:
    runs, first = [], 0
    while size:
        count = rnd.randint(1, size)
        first += rnd.randint(1, 50)
        runs.append((first, count))
        first += count
        size -= count
    return RowRuns.of(runs)


def simulated_triples(edge: LocationEdge) -> list[Triple]:
    """The edge's triples from an SDF run of its actor, one token at a time."""
    assert edge.src_rows is not None
    r = edge.rates
    graph = workflow(
        [Actor("A", (Consumption("I", r.consumption, r.buffer, r.dynamic),), (Production("O", r.production),))]
    )
    run = simulate(graph, {"I": edge.src_rows.size}, max_firings=10_000)
    found = []
    for k in range(1, edge.dst_rows.size + 1):
        out_row = int(edge.dst_rows.rows_at([k])[0])
        for _, j in run.used[("O", k)]:
            in_row = int(edge.src_rows.rows_at([j])[0])
            found.extend(
                t(edge.op, (edge.src_table, i, in_row), (edge.dst_table, o, out_row)) for o, i in edge.column_pairs
            )
    return sorted(found)


def test_expansion_equals_a_simulated_run_on_random_edges() -> None:
    for seed in range(120):
        rnd = random.Random(seed)
        c, p = rnd.randint(1, 4), rnd.randint(1, 4)
        kind = rnd.random()
        rates = Rates(c, p, buffer=c + rnd.randint(0, 4)) if kind < 0.3 else Rates(c, p, dynamic=kind < 0.4)
        firings = rnd.randint(0, 12)
        src = random_runs(rnd, firings * c + rnd.randint(0, c))
        columns = {o: rnd.sample(range(6), rnd.randint(1, 3)) for o in rnd.sample(range(5), rnd.randint(1, 3))}
        edge = location_edge(seed + 1, 2, 3, columns, random_runs(rnd, firings * p), src, rates)
        chunk = rnd.choice([1, 3, 7, 1 << 20])
        expected = simulated_triples(edge)
        assert triples([edge], chunk) == expected, seed
        assert edge.triple_count == len(expected)


def test_expansion_streams_bounded_batches() -> None:
    # Dynamic buffering: output k uses every input so far, so one position alone
    # (the last: 30 inputs x 2 columns) exceeds the chunk and must be split too.
    edge = location_edge(3, 1, 2, {0: [0, 1]}, RowRuns.of([(0, 10)]), RowRuns.of([(0, 30)]), Rates(3, 1, dynamic=True))
    small = triples([edge], chunk_rows=7)
    assert small == triples([edge]) and len(small) == edge.triple_count == 2 * sum(3 * f for f in range(1, 11))
    aligned = location_edge(4, 1, 2, {0: [0]}, RowRuns.partitions([1000, 5]))
    assert max(b.num_rows for b in expand([aligned], 64)) == 64
    assert sum(b.num_rows for b in expand([aligned], 64)) == 1005


def test_bad_edges_are_refused() -> None:
    runs = RowRuns.of([(0, 4)])
    with pytest.raises(LocationError, match="1:1 rates"):
        location_edge(1, 1, 2, {0: [0]}, runs, None, Rates(2, 1))
    with pytest.raises(LocationError, match="cannot turn 4 input rows into 3 output rows"):
        location_edge(1, 1, 2, {0: [0]}, RowRuns.of([(0, 3)]), runs, Rates(1, 2))
    with pytest.raises(LocationError, match="cannot turn 4 input rows into 3 output rows"):
        location_edge(1, 1, 2, {0: [0]}, RowRuns.of([(0, 3)]), runs, Rates(2, 1))
    with pytest.raises(LocationError, match="distinct input columns"):
        location_edge(1, 1, 2, {0: [1, 1]}, runs)


def test_the_workflow_of_edges_chains_their_positions() -> None:
    # op 1: table 1 -> 2 two rows into one; op 2: table 2 -> 3 row-aligned.
    batching = location_edge(1, 1, 2, {0: [0]}, RowRuns.of([(0, 3)]), RowRuns.of([(0, 6)]), Rates(2, 1))
    aligned = location_edge(2, 2, 3, {0: [0]}, RowRuns.of([(0, 3)]))
    graph = workflow_of([batching, aligned])
    assert {c: p.to_set() for c, p in dependency(graph, "3", 2).items()} == {"2": {2}, "1": {3, 4}}
    clash = location_edge(5, 1, 3, {0: [0]}, RowRuns.of([(0, 3)]), RowRuns.of([(0, 6)]), Rates(1, 1))
    with pytest.raises(LocationError, match="two different rates"):
        workflow_of([batching, location_edge(1, 1, 4, {0: [0]}, RowRuns.of([(0, 6)]), RowRuns.of([(0, 6)]))])
    with pytest.raises(LocationError, match="every input"):
        workflow_of([clash, location_edge(5, 4, 2, {0: [0]}, RowRuns.of([(0, 3)]), RowRuns.of([(0, 3)]))])


# -- the run file --------------------------------------------------------------------


def sample_edges() -> list[LocationEdge]:
    return [
        location_edge(9, 3, 4, {0: [0], 1: [1, 2]}, RowRuns.partitions([2, 1])),
        location_edge(5, 1, 2, {0: [1]}, RowRuns.partitions([2, 1]), RowRuns.of([(100, 3), (200, 3)]), Rates(2, 1)),
        location_edge(7, 1, 2, {3: [0]}, RowRuns.of([(0, 6)]), RowRuns.of([(10, 3)]), Rates(1, 2, buffer=2)),
    ]


def test_locations_json_round_trips(tmp_path: Path) -> None:
    where = Destination(str(tmp_path), str(tmp_path), str(tmp_path))
    write_locations(where, sample_edges())
    assert read_locations(pafs.LocalFileSystem(), str(tmp_path / LOCATIONS)) == sample_edges()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"format": "provplug-locations", "version": 1, "edges": [', "damaged store file"),
        ('{"format": "other"}', "not a provplug locations file"),
        ('{"format": "provplug-locations", "version": 7, "edges": []}', "unsupported version 7"),
        (edges_json(sample_edges()[:1]).replace('"consumption": 1', '"consumption": 0'), "positive integer"),
        (edges_json(sample_edges()[:1]).replace('"counts": [2, 1]', '"counts": [2]'), "2 run starts for 1"),
        (edges_json(sample_edges()[:1]).replace('"src_table": 3', '"src_table": 0'), "table id 0 outside"),
        (edges_json(sample_edges()[:1]).replace('"firsts": [0, ', '"firsts": [0.5, '), "holds integers"),
    ],
)
def test_a_damaged_locations_file_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / LOCATIONS).write_text(text)
    with pytest.raises(DamagedStoreError, match=message) as caught:
        read_locations(pafs.LocalFileSystem(), str(tmp_path / LOCATIONS))
    assert "\n" not in str(caught.value)


def test_locations_of_reads_every_committed_run(tmp_path: Path) -> None:
    store = ParquetStore(str(tmp_path / "s.prov"))
    edges = sample_edges()
    for part in (edges[:2], [], edges[2:]):
        with store.transaction("capture") as txn:
            if part:
                store.write_text(txn.path(LOCATIONS), edges_json(part))
                txn.mark_dataset(LOCATIONS)
    assert locations_of(store) == edges
    last = store.runs()[-1]["run_id"]
    (tmp_path / "s.prov" / "runs" / last / LOCATIONS).unlink()
    with pytest.raises(DamagedStoreError, match=f"{LOCATIONS} is missing"):
        locations_of(store)


# -- checking declared rates -------------------------------------------------------------


BATCH_IN = RowRuns.of([(100, 3), (200, 3)])
BATCH_OUT = RowRuns.partitions([2, 1])
BATCH_PAIRS = [(100, 0), (101, 0), (102, 1), (200, 1), (201, P1), (202, P1)]


def observed(pairs: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    return np.array([s for s, _ in pairs]), np.array([d for _, d in pairs])


def test_data_that_matches_the_declared_rates_passes() -> None:
    rows = RowRuns.partitions([3, 2])
    all_rows = rows.rows_at(np.arange(1, 6))
    check_rates("R", Rates(), rows, rows, all_rows, all_rows)
    shuffled = [*BATCH_PAIRS[::-1], BATCH_PAIRS[0]]  # any order, a pair seen twice is one pair
    check_rates("B", Rates(2, 1), BATCH_IN, BATCH_OUT, *observed(shuffled))


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        (  # output row 1 read 201 instead of 200
            [(100, 0), (101, 0), (102, 1), (201, 1), (201, P1), (202, P1)],
            r"output row 1 comes from input rows \[102, 201\] where the rates say \[102, 200\]",
        ),
        (  # a pair missing
            BATCH_PAIRS[:-1],
            rf"output row {P1} comes from input rows \[201\] where the rates say \[201, 202\]",
        ),
        (  # an extra pair
            [*BATCH_PAIRS, (202, 0)],
            r"output row 0 comes from input rows \[100, 101, 202\] where the rates say \[100, 101\]",
        ),
        ([*BATCH_PAIRS, (999, 0)], "row 999 is not a row of its input"),
        ([*BATCH_PAIRS, (100, 7)], "row 7 is not a row of its output"),
    ],
)
def test_data_that_contradicts_the_declared_rates_is_an_error(pairs: list[tuple[int, int]], message: str) -> None:
    with pytest.raises(LocationError, match=message):
        check_rates("B", Rates(2, 1), BATCH_IN, BATCH_OUT, *observed(pairs))


def test_a_filter_declared_row_aligned_is_caught() -> None:
    # Five input rows, rows 0, 1, 3 kept and numbered 0, 1, 2: the third output
    # row came from input position 4, where 1:1 says position 3.
    rows_in, rows_out = RowRuns.of([(0, 5)]), RowRuns.of([(0, 3)])
    with pytest.raises(LocationError, match=r"output row 2 comes from input rows \[3\] where the rates say \[2\]"):
        check_rates("F", Rates(1, 1), rows_in, rows_out, [0, 1, 3], [0, 1, 2])
    # Rows left unread at the end are SDF's unconsumed tokens: the edge's triples are the data's.
    check_rates("L", Rates(1, 1), rows_in, rows_out, [0, 1, 2], [0, 1, 2])
    with pytest.raises(LocationError, match="consumption 1, production 2 cannot turn 5 input rows into 3 output rows"):
        check_rates("P", Rates(1, 2), rows_in, rows_out, [0, 1, 2], [0, 1, 2])


def test_expanded_batches_are_arrow_record_batches() -> None:
    batches = list(expand(sample_edges()))
    assert all(isinstance(b, pa.RecordBatch) for b in batches)
    assert pa.Table.from_batches(batches).num_rows == sum(e.triple_count for e in sample_edges())
