"""Clear errors on the command line (issue 18, items 4 and 9): what is
missing is named, errors under --json are JSON, answers are valid JSON (no
NaN), damaged store files are one line, and bad numbers are usage errors."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import DATA, snapshot

from provplug import ids, schema
from provplug.index import build_index
from provplug.ingest.importer import import_provenance
from provplug.ingest.recorder import StagedRun
from provplug.model import OpInfo, TableInfo
from provplug.store.open import open_store
from provplug.store.parquet import ParquetStore


@pytest.fixture
def table4(tmp_path: Path) -> Path:
    path = tmp_path / "t4.prov"
    import_provenance(open_store(path), DATA / "paper_table4_triples.csv", DATA / "paper_table4_values.csv")
    build_index(path, engine="local")
    return path


def _one_line(result: Any) -> str:
    assert result.code == 2 and result.out == "", result
    assert result.err.startswith("provplug") and result.err.count("\n") == 1, result
    return str(result.err)


def _json_error(result: Any) -> dict[str, Any]:
    assert result.code == 2 and result.out == "", result
    assert result.err.count("\n") == 1, result
    error: dict[str, Any] = json.loads(result.err)
    assert set(error) == {"error", "type"}
    return error


# -- what is missing is named ----------------------------------------------------------


def test_lineage_without_a_target_says_what_is_missing(table4: Path, cli: Any) -> None:
    err = _one_line(cli("lineage", table4))
    assert "nothing to trace: give TABLE.COLUMN (with --where) or --value-id N" in err
    assert "not both" not in err
    assert "not both" in _one_line(cli("lineage", table4, "AvgAge.Age", "--value-id", "1"))


# -- errors under --json are JSON ---------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kind", "message"),
    [
        (["--value-id", "999"], "LineageQueryError", "unknown value id 999"),
        ([], "LineageQueryError", "nothing to trace"),
        (["--value-id", "x"], "UsageError", "argument --value-id: invalid int value: 'x'"),
        (["--value-id", "23", "--tau", "-1"], "UsageError", "argument --tau: must be a non-negative"),
    ],
)
def test_errors_under_json_are_a_json_object_on_stderr(
    table4: Path, cli: Any, args: list[str], kind: str, message: str
) -> None:
    error = _json_error(cli("lineage", table4, *args, "--json"))
    assert error["type"] == kind and message in error["error"], error


def test_store_errors_under_json_too(tmp_path: Path, cli: Any) -> None:
    error = _json_error(cli("lineage", tmp_path / "missing.prov", "--value-id", "1", "--json"))
    assert error["type"] == "StoreError" and "no provplug store" in error["error"]
    error = _json_error(cli("stats", tmp_path / "missing.prov", "--json"))
    assert error["type"] == "StoreError"


def test_without_json_errors_stay_text(table4: Path, cli: Any) -> None:
    result = cli("lineage", table4, "--value-id", "x")
    assert result.code == 2 and result.err.startswith("usage: provplug lineage")
    assert result.err.splitlines()[-1] == "provplug lineage: error: argument --value-id: invalid int value: 'x'"


# -- answers are valid JSON --------------------------------------------------------------

SPECIAL = [float("nan"), float("inf"), float("-inf"), 1.5]


def _store_with_special_floats(path: Path) -> tuple[int, list[int]]:
    """M.v holds NaN, inf, -inf, 1.5; each N.v cell derives from the M.v cell
    of its row. Return N.v's first value id and M.v's value ids."""
    store = open_store(path)
    with store.transaction("capture") as txn:
        tids = [txn.reserve("tables") for _ in range(2)]
        for tid, name in zip(tids, ("M", "N"), strict=True):
            txn.add_table(TableInfo(tid, name, txn.run_id, "source", ("k", "v"), len(SPECIAL), True))
            folder = Path(txn.path("rows", str(tid)))
            folder.mkdir(parents=True)
            rows = {"k": list("abcd"), "v": SPECIAL, schema.ROW_COLUMN: list(range(len(SPECIAL)))}
            pq.write_table(pa.table(rows), folder / "part-0.parquet")
        txn.mark_dataset("rows")
        op = txn.reserve("ops")
        txn.add_op(OpInfo(op, "copy", txn.run_id, "builtin", (tids[0],), (tids[1],)))
        src = [ids.value_id(tids[0], 1, r) for r in range(len(SPECIAL))]
        dst = [ids.value_id(tids[1], 1, r) for r in range(len(SPECIAL))]
        Path(txn.path("triples")).mkdir()
        triples = {
            "src": pa.array(src, pa.int64()),
            "dst": pa.array(dst, pa.int64()),
            "op": pa.array([op] * len(src), pa.int64()),
            "src_table": pa.array([tids[0]] * len(src), pa.int32()),
            "dst_table": pa.array([tids[1]] * len(src), pa.int32()),
        }
        pq.write_table(pa.table(triples, schema=schema.TRIPLES), txn.path("triples", "part-0.parquet"))
        txn.mark_dataset("triples")
    return dst[0], src


def _strict_json(text: str) -> Any:
    def reject(constant: str) -> Any:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=reject)


def test_nan_and_infinities_are_null_in_json(tmp_path: Path, cli: Any) -> None:
    path = tmp_path / "floats.prov"
    first, sources = _store_with_special_floats(path)
    build_index(path, engine="local")
    result = cli("lineage", path, "N.v", "--where", "k <> 'x'", "--direction", "up", "--json")
    assert result.code == 0, result
    answer = _strict_json(result.out)
    by_id = {r["value_id"]: r for r in answer["lineage"]}
    assert [by_id[v]["value"] for v in sources] == [None, None, None, 1.5]
    assert [answer["rows"][by_id[v]["row"]] for v in sources] == [
        {"k": k, "v": v} for k, v in zip("abcd", [None, None, None, 1.5], strict=True)
    ]
    assert [q["value"] for q in answer["query"]] == [None, None, None, 1.5]
    # the tree still tells them apart
    tree = cli("lineage", path, "--value-id", str(first)).out.splitlines()
    assert tree[0].startswith("N.v = nan") and any("M.v = nan" in line for line in tree), tree


# -- damaged store files are one line ---------------------------------------------------


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


def _run_file(store: Path, name: str) -> Path:
    return next((store / "runs").glob(f"*/{name}"))


@pytest.mark.parametrize("command", ["index", "lineage-rq"])
def test_a_truncated_triples_file_is_one_line_naming_it(table4: Path, cli: Any, command: str) -> None:
    damaged = next(_run_file(table4, "triples").rglob("*.parquet"))
    _truncate(damaged)
    if command == "index":
        result = cli("index", table4, "--quiet")
    else:  # RQ reads the store's triples, not the index
        result = cli("lineage", table4, "--value-id", "23", "--method", "rq")
    err = _one_line(result)
    assert "damaged store" in err and str(damaged) in err, err


def test_a_truncated_value_mapping_is_one_line(table4: Path, cli: Any) -> None:
    damaged = _run_file(table4, "values.parquet")
    _truncate(damaged)
    err = _one_line(cli("lineage", table4, "--value-id", "23"))
    assert "damaged store" in err and str(damaged) in err, err


def test_a_run_without_manifest_is_not_blamed_on_the_split_chooser(tmp_path: Path, cli: Any) -> None:
    path = tmp_path / "s.prov"
    store = open_store(path)
    _two_runs_the_second_reading_the_first(store)
    lost = next(p for p in (path / "runs").iterdir() if not (p / "triples").exists())
    os.remove(lost / "_manifest.json")
    before = snapshot(path)
    err = _one_line(cli("index", path, "--quiet"))
    assert "damaged store" in err and "split" not in err, err
    assert snapshot(path) == before


def _two_runs_the_second_reading_the_first(store: ParquetStore) -> None:
    with store.transaction("capture") as txn:
        a = txn.reserve("tables")
        txn.add_table(TableInfo(a, "A", txn.run_id, "source", ("x",), 3, False))
    with store.transaction("capture") as txn:
        b = txn.reserve("tables")
        txn.add_table(TableInfo(b, "B", txn.run_id, "output", ("x",), 3, False))
        op = txn.reserve("ops")
        txn.add_op(OpInfo(op, "f", txn.run_id, "builtin", (a,), (b,)))
        run = StagedRun(store, txn)
        with run.triples_writer("part") as writer:
            rows = range(3)
            writer.write(
                [ids.value_id(a, 0, r) for r in rows],
                [ids.value_id(b, 0, r) for r in rows],
                op,
                src_table=a,
                dst_table=b,
            )
        run.finish()


# -- bad numbers are usage errors --------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["lineage", "{store}", "--value-id", "23", "--tau", "-1"],
            "argument --tau: must be a non-negative number of triples, not -1",
        ),
        (
            ["lineage", "{store}", "--value-id", "23", "--tau", "many"],
            "argument --tau: must be a non-negative number of triples, not 'many'",
        ),
        (["index", "{store}", "--theta", "-5"], "argument --theta: must be a positive number of values, not -5"),
        (["index", "{store}", "--theta", "0"], "argument --theta: must be a positive number of values, not 0"),
    ],
)
def test_negative_tau_and_theta_are_usage_errors(table4: Path, cli: Any, args: list[str], message: str) -> None:
    before = snapshot(table4)
    result = cli(*[a.format(store=table4) for a in args])
    assert result.code == 2 and result.out == ""
    assert result.err.splitlines()[-1] == f"provplug {args[0]}: error: {message}", result
    assert snapshot(table4) == before


def test_negative_tau_from_python(table4: Path) -> None:
    import provplug
    from provplug.errors import LineageQueryError

    with pytest.raises(LineageQueryError, match="tau must be a non-negative number of triples"):
        provplug.open(table4).lineage(value_id=23, tau=-1)


def _scramble_pages(path: Path) -> None:
    """Overwrite the data pages but keep the footer: the file opens, its
    pages do not decode."""
    data = bytearray(path.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little") + 8
    for i in range(4, len(data) - footer):
        data[i] = 0xFF
    path.write_bytes(bytes(data))


def test_stats_reports_a_truncated_triples_file(table4: Path, cli: Any) -> None:
    damaged = next(_run_file(table4, "triples").rglob("*.parquet"))
    _truncate(damaged)
    err = _one_line(cli("stats", table4))
    assert "damaged store" in err and damaged.name in err, err


def test_scrambled_pages_behind_an_intact_footer_are_one_line_naming_the_file(table4: Path, cli: Any) -> None:
    damaged = next(_run_file(table4, "triples").rglob("*.parquet"))
    _scramble_pages(damaged)
    err = _one_line(cli("lineage", table4, "--value-id", "23", "--method", "rq"))
    assert "damaged store" in err and damaged.name in err, err


def test_options_may_come_before_a_commands_positional_arguments() -> None:
    from provplug.cli.main import build_parser

    args = build_parser().parse_args(["lineage", "S.prov", "--run", "20260501", "--where", "City = 'NY'", "AvgAge.Age"])
    assert (args.store, args.target, args.run, args.where) == ("S.prov", "AvgAge.Age", "20260501", ["City = 'NY'"])


def test_format_json_makes_errors_json(cli, tmp_path) -> None:
    for flags in (["--format", "json"], ["--format=json"]):
        r = cli("lineage", tmp_path / "missing.prov", "T.C", *flags)
        assert r.code == 2 and json.loads(r.err)["type"] == "StoreError", r
    r = cli("lineage", tmp_path / "missing.prov", "T.C", "--format", "svg")
    assert r.code == 2 and r.err.startswith("provplug: error:"), r


def test_a_scripts_own_json_flag_does_not_change_provplugs_error_format(cli, tmp_path) -> None:
    for store in ([tmp_path / "s.prov"], ["--store", tmp_path / "s.prov"]):  # the form, and the deprecated one
        r = cli("run", *store, tmp_path / "missing.py", "--json")
        assert r.code == 2 and r.err.startswith("provplug: error: no such script"), r
