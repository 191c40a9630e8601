"""A store on the S3 server (issue 27): every command answers as on local
disk (compared as JSON), with the object-store commit protocol: no rename."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_lineage_support import PAPER_TABLES  # type: ignore[import-not-found]

from provplug import ids, schema
from provplug.model import OpInfo, TableInfo
from provplug.store.open import open_store
from provplug.store.parquet import ParquetStore

from .servers import S3Server

TRIPLES = Path(__file__).resolve().parents[2] / "examples" / "data" / "paper_table4_triples.csv"


def write_paper_run(store: ParquetStore, older: bool = False) -> None:
    """The paper's Tables 1-4 as one captured run (stored rows, packed ids),
    written through the store's filesystem (so on S3 as on disk). ``older``:
    Person1's Mary is 25, so a diff between two runs has cells to show."""
    fs = store.fs
    with store.transaction("capture") as txn:
        packed, table_ids = {}, []
        for name, columns, rows, first in PAPER_TABLES:
            tid = txn.reserve("tables")
            table_ids.append(tid)
            rows = [("Mary", "NY", 25) if older and r[0] == "Mary" and name == "Person1" else r for r in rows]
            txn.add_table(
                TableInfo(tid, name, txn.run_id, "source" if name == "Person1" else "output", columns, len(rows), True)
            )
            data: dict[str, Any] = {c: [r[i] for r in rows] for i, c in enumerate(columns)}
            data[schema.ROW_COLUMN] = list(range(len(rows)))
            fs.create_dir(txn.path("rows", str(tid)), recursive=True)
            pq.write_table(pa.table(data), txn.path("rows", str(tid), "part-0.parquet"), filesystem=fs)
            for r in range(len(rows)):
                for c in range(len(columns)):
                    packed[first + r * len(columns) + c] = ids.value_id(tid, c, r)
        txn.mark_dataset("rows")
        ops = {"R1": txn.reserve("ops"), "R2": txn.reserve("ops")}
        txn.add_op(OpInfo(ops["R1"], "R1", txn.run_id, "builtin", (table_ids[0],), (table_ids[1],)))
        txn.add_op(OpInfo(ops["R2"], "R2", txn.run_id, "builtin", (table_ids[1],), (table_ids[2],)))
        lines = [line.split(",") for line in TRIPLES.read_text().split()[1:]]
        src = [packed[int(s)] for s, _, _ in lines]
        dst = [packed[int(d)] for _, d, _ in lines]
        triples = {
            "src": pa.array(src, pa.int64()),
            "dst": pa.array(dst, pa.int64()),
            "op": pa.array([ops[o] for _, _, o in lines], pa.int64()),
            "src_table": pa.array([s >> ids.TABLE_SHIFT for s in src], pa.int32()),
            "dst_table": pa.array([d >> ids.TABLE_SHIFT for d in dst], pa.int32()),
        }
        fs.create_dir(txn.path("triples"), recursive=True)
        pq.write_table(pa.table(triples, schema=schema.TRIPLES), txn.path("triples", "part-0.parquet"), filesystem=fs)
        txn.mark_dataset("triples")


# Every question of the done-when list, as CLI arguments after the store.
QUESTIONS: list[tuple[str, ...]] = [
    *(
        ("lineage", "{store}", "AvgAge.Age", "--where", "City = 'NY'", "--method", m, "--json")
        for m in ("csprov", "ccprov", "rq")
    ),
    *(
        (
            "lineage",
            "{store}",
            "Person1.Age",
            "--where",
            "Name = 'Mark'",
            "--direction",
            "down",
            "--method",
            m,
            "--json",
        )
        for m in ("csprov", "ccprov", "rq")
    ),
    ("whatif", "{store}", "--delete", "Person1", "--where", "City = 'LA'", "--json"),
    ("export", "{store}", "AvgAge.Age", "--where", "City = 'NY'", "--format", "prov-json"),
    ("diff", "{store}", "1", "2", "Person1", "--json"),
    ("runs", "{store}", "--json"),
    ("stats", "{store}", "--json"),
]


def answers(cli: Any, store: str, questions: Sequence[tuple[str, ...]] = QUESTIONS) -> dict[str, Any]:
    """Each question's JSON answer (exit code 0 asserted), with what differs
    by nature between two stores (run ids, times, the store's name) blanked."""
    out = {}
    for question in questions:
        args = [a.format(store=store) for a in question]
        result = cli(*args)
        assert result.code == 0, (args, result)
        out[" ".join(question)] = _comparable(json.loads(result.out), store)
    return out


_RUN_ID = re.compile(r"\d{8}T\d{6}-[0-9a-f]{12}")
_GENERATION = re.compile(r"gen-\d{8}T\d{6}-[0-9a-f]+")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[.\d]*(\+00:00|Z)?")
_VARYING = {"seconds", "elapsed", "elapsed_s", "bytes", "index_bytes", "wall_s", "took_s"}


def _comparable(answer: Any, store: str) -> Any:
    if isinstance(answer, dict):
        return {k: _comparable(v, store) for k, v in answer.items() if k not in _VARYING}
    if isinstance(answer, list):
        return [_comparable(v, store) for v in answer]
    if isinstance(answer, str):
        answer = _GENERATION.sub("GEN", _RUN_ID.sub("RUN", answer.replace(store, "STORE")))
        return _TIME.sub("TIME", answer)
    return answer


def _two_runs_indexed(cli: Any, uri: str) -> None:
    store = open_store(uri)
    write_paper_run(store, older=True)
    write_paper_run(store)
    assert cli("index", uri, "--local", "--quiet").code == 0


def test_every_command_answers_on_s3_as_on_local_disk(cli: Any, s3_env: S3Server, tmp_path: Path) -> None:
    local, remote = str(tmp_path / "people.prov"), s3_env.uri("people-answers")
    _two_runs_indexed(cli, local)
    _two_runs_indexed(cli, remote)
    expected = answers(cli, local)
    assert expected["diff {store} 1 2 Person1 --json"]  # the runs differ: the diff has something to compare
    assert answers(cli, remote) == expected


def test_delete_run_and_gc_on_s3(cli: Any, s3_env: S3Server) -> None:
    uri = s3_env.uri("people-delete")
    _two_runs_indexed(cli, uri)
    first = json.loads(cli("runs", uri, "--json").out)[0]["run_id"]
    deleted = cli("delete-run", uri, "1", "--json")
    assert deleted.code == 0, deleted
    assert [r["number"] for r in json.loads(cli("runs", uri, "--json").out)] == [2]
    assert _keys(s3_env, f"people-delete/runs/{first}/") == []  # its files are gone: no rename anywhere
    assert cli("index", uri, "--local", "--quiet").code == 0
    answer = cli("lineage", uri, "AvgAge.Age", "--where", "City = 'NY'", "--json")
    assert answer.code == 0 and json.loads(answer.out)["run"]["number"] == 2, answer
    collected = cli("gc", uri, "--now", "--json")
    assert collected.code == 0, collected


def _keys(s3: S3Server, prefix: str) -> list[str]:
    listed = s3.client().list_objects_v2(Bucket=s3.bucket, Prefix=prefix)  # type: ignore[attr-defined]
    return sorted(o["Key"] for o in listed.get("Contents", []))


@pytest.mark.parametrize("scheme", ["s3a", "s3n"])
def test_hadoop_s3_schemes_name_the_same_store(s3_env: S3Server, scheme: str) -> None:
    uri = s3_env.uri(f"people-{scheme}")
    write_paper_run(open_store(uri))
    hadoop = open_store(uri.replace("s3://", f"{scheme}://", 1))
    assert [m["counts"]["triples"] for m in hadoop.runs()] == [15]
