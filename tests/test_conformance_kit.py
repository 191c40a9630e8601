"""provplug.testing itself: the oracle computes lineage by hand-checkable
traversal, and every contract check rejects a store that breaks its rule
(stores written directly through a transaction, each with one fault)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import provplug
from provplug import ids, schema
from provplug.errors import LineageQueryError
from provplug.model import OpInfo, TableInfo
from provplug.store.open import open_store
from provplug.testing import (
    ContractViolation,
    StoreContents,
    TripleOracle,
    assert_lineage_matches_oracle,
    assert_outputs_match,
    assert_registered_through_entry_point,
    assert_run_is_atomic,
    assert_store_conforms,
)
from provplug.testing import oracle as oracle_module

Cell = tuple[int, int, int]  # (table index, column index, row number)


@dataclass
class Fault:
    """How the written store departs from a conforming one (default: it does not)."""

    edges: Sequence[tuple[Cell, Cell]] = ((0, 0, 0), (1, 0, 0)), ((0, 1, 0), (1, 0, 0)), ((0, 0, 1), (1, 0, 1))
    row_numbers: Sequence[int] = (0, 1)  # of both tables
    catalogued_rows: int = 2
    op_outputs: Sequence[int] = (1,)  # table indexes
    op_triples: int | None = 3
    extra: list[str] = field(default_factory=list)


def write(path: Path, fault: Fault) -> None:
    """Table In (a, b) -> op Copy -> table Out (x), two rows each, Copy's triples as ``fault`` says."""
    store = open_store(path)
    with store.transaction("capture") as txn:
        tids = [txn.reserve("tables"), txn.reserve("tables")]
        for tid, (name, columns) in zip(tids, [("In", ("a", "b")), ("Out", ("x",))], strict=True):
            txn.add_table(TableInfo(tid, name, txn.run_id, "source", columns, fault.catalogued_rows, True))
            data: dict[str, list[object]] = {c: [f"{c}{r}" for r in fault.row_numbers] for c in columns}
            data[schema.ROW_COLUMN] = list(fault.row_numbers)
            Path(txn.path("rows", str(tid))).mkdir(parents=True)
            pq.write_table(pa.table(data), txn.path("rows", str(tid), "part-0.parquet"))
        txn.mark_dataset("rows")
        op = txn.reserve("ops")
        txn.add_op(
            OpInfo(
                op,
                "Copy",
                txn.run_id,
                "builtin",
                (tids[0],),
                tuple(tids[t] for t in fault.op_outputs),
                triples=fault.op_triples,
            )
        )
        src = [ids.value_id(tids[t], c, r) for (t, c, r), _ in fault.edges]
        dst = [ids.value_id(tids[t], c, r) for _, (t, c, r) in fault.edges]
        Path(txn.path("triples")).mkdir()
        table = pa.table(
            {
                "src": src,
                "dst": dst,
                "op": [op] * len(src),
                "src_table": [s >> ids.TABLE_SHIFT for s in src],
                "dst_table": [d >> ids.TABLE_SHIFT for d in dst],
            },
            schema=schema.TRIPLES,
        )
        pq.write_table(table, txn.path("triples", "part-0.parquet"))
        txn.mark_dataset("triples")


# -- the oracle --------------------------------------------------------------------------------
def test_the_oracle_walks_the_graph_by_hand() -> None:
    # 1 -> 2 -> 3 <- 4, 3 -> 5 (ops p, q, r, s)
    oracle = TripleOracle([(1, 2, "p"), (2, 3, "q"), (4, 3, "r"), (3, 5, "s")])
    assert oracle.ancestors([3]) == {1, 2, 4}
    assert oracle.descendants([2]) == {3, 5}
    assert oracle.reach([2, 3], "up") == {1, 4}  # queried values are never in the answer
    up = oracle.answer([3], "up")
    assert up.edges == {(1, 2), (2, 3), (4, 3)} and up.triples == {(1, 2, "p"), (2, 3, "q"), (4, 3, "r")}
    assert oracle.answer([3], "down").triples == {(3, 5, "s")}
    with pytest.raises(LineageQueryError, match="unknown direction 'sideways'"):
        oracle.reach([3], "sideways")


def test_the_store_read_back_labels_and_answers_as_written(tmp_path: Path) -> None:
    path = tmp_path / "ok.prov"
    write(path, Fault())
    got = StoreContents(path)
    assert got.rows == {
        "In": {0: {"a": "a0", "b": "b0"}, 1: {"a": "a1", "b": "b1"}},
        "Out": {0: {"x": "x0"}, 1: {"x": "x1"}},
    }
    by_content = got.labelled_triples(lambda table, number, row: tuple(row.values()))
    assert by_content == {
        (("In", "a", ("a0", "b0")), ("Out", "x", ("x0",)), "Copy"),
        (("In", "b", ("a0", "b0")), ("Out", "x", ("x0",)), "Copy"),
        (("In", "a", ("a1", "b1")), ("Out", "x", ("x1",)), "Copy"),
    }
    assert TripleOracle.of_store(path).triples == got.oracle.triples
    assert len(got.oracle.triples) == 3


# -- the store checks --------------------------------------------------------------------------
def test_a_conforming_store_passes(tmp_path: Path) -> None:
    write(tmp_path / "ok.prov", Fault())
    assert len(assert_store_conforms(tmp_path / "ok.prov", dense_rows=True).triples) == 3


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (Fault(edges=[((0, 0, 5), (1, 0, 0))], op_triples=1), "stores no row 5"),
        (Fault(edges=[((0, 2, 0), (1, 0, 0))], op_triples=1), "column 2 of table 'In' does not exist"),
        (Fault(op_outputs=(0,)), "op 'Copy' does not write table 'Out'"),
        (Fault(op_triples=4), "op 'Copy' records 4 triples, the store holds 3"),
        (Fault(edges=[((0, 0, 0), (1, 0, 0))] * 2, op_triples=2), "is stored twice"),
        (Fault(catalogued_rows=3), "stores 2 rows, its catalogue entry says 3"),
    ],
)
def test_each_broken_rule_is_named(tmp_path: Path, fault: Fault, message: str) -> None:
    write(tmp_path / "bad.prov", fault)
    with pytest.raises(ContractViolation, match=message):
        assert_store_conforms(tmp_path / "bad.prov")


def test_dense_rows_are_required_only_when_asked(tmp_path: Path) -> None:
    write(tmp_path / "gaps.prov", Fault(row_numbers=(0, 7), edges=[((0, 0, 7), (1, 0, 7))], op_triples=1))
    assert_store_conforms(tmp_path / "gaps.prov")  # Spark numbers rows by partition: gaps are fine
    with pytest.raises(ContractViolation, match=r"row numbers are not 0\.\.1"):
        assert_store_conforms(tmp_path / "gaps.prov", dense_rows=True)


def test_stored_outputs_must_be_what_was_produced(tmp_path: Path) -> None:
    write(tmp_path / "ok.prov", Fault())
    assert_outputs_match(tmp_path / "ok.prov", {"Out": [{"x": "x1"}, {"x": "x0"}]})  # in any order
    with pytest.raises(ContractViolation, match="stored rows differ"):
        assert_outputs_match(tmp_path / "ok.prov", {"Out": [{"x": "x0"}, {"x": "x0"}]})
    with pytest.raises(ContractViolation, match="no table 'Elsewhere'"):
        assert_outputs_match(tmp_path / "ok.prov", {"Elsewhere": []})


def test_a_store_of_several_runs_conforms_and_outputs_need_their_run(tmp_path: Path) -> None:
    path = tmp_path / "twice.prov"
    write(path, Fault())
    write(path, Fault(edges=[((0, 0, 0), (1, 0, 1))], op_triples=1))  # same names, other ids
    assert len(assert_store_conforms(path, dense_rows=True).triples) == 4
    assert len(assert_store_conforms(path, run="latest").triples) == 1
    with pytest.raises(ContractViolation, match="2 runs wrote a table 'Out': say which run"):
        assert_outputs_match(path, {"Out": [{"x": "x0"}, {"x": "x1"}]})
    assert_outputs_match(path, {"Out": [{"x": "x0"}, {"x": "x1"}]}, run="latest")


def test_a_failed_run_must_raise_and_leave_nothing(tmp_path: Path) -> None:
    path = tmp_path / "atomic.prov"
    with pytest.raises(ContractViolation, match="raised nothing"):
        assert_run_is_atomic(path, lambda: None)

    def commits_then_fails() -> None:
        write(path, Fault())
        raise RuntimeError("after the commit")

    with pytest.raises(ContractViolation, match="left a store with runs"):
        assert_run_is_atomic(path, commits_then_fails, RuntimeError)
    with pytest.raises(ContractViolation, match="changed the committed contents"):
        assert_run_is_atomic(path, commits_then_fails, RuntimeError)


def test_an_adapter_nobody_registers_is_reported() -> None:
    with pytest.raises(ContractViolation, match="no plugin registers an adapter named 'nosuch'"):
        assert_registered_through_entry_point("nosuch")


def test_the_shipped_adapters_register_through_entry_points() -> None:
    assert {assert_registered_through_entry_point(name).name for name in ("spark", "beam")} == {"spark", "beam"}


# -- lineage against the oracle ------------------------------------------------------------------
def test_answers_are_compared_with_the_oracle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "ok.prov"
    write(path, Fault())
    assert_lineage_matches_oracle(path)  # indexes the store first
    assert provplug.open(path).lineage(value_id=StoreContents(path).triples[0]["dst"]).lineage
    real = oracle_module.TripleOracle.answer

    def one_edge_short(self: TripleOracle, values: Sequence[int], direction: str) -> oracle_module.OracleAnswer:
        answer = real(self, values, direction)
        return oracle_module.OracleAnswer(answer.values, answer.edges, frozenset(list(answer.triples)[1:]))

    monkeypatch.setattr(oracle_module.TripleOracle, "answer", one_edge_short)
    with pytest.raises(ContractViolation, match="answer differs from the oracle's"):
        assert_lineage_matches_oracle(path)
