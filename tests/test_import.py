"""`provplug import` and `provplug stats`: the paper's Table 4, bad input, crashes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import DATA, snapshot

TABLE4 = DATA / "paper_table4_triples.csv"
TABLE4_VALUES = DATA / "paper_table4_values.csv"


def test_table4_import_reports_15_triples_and_3_tables(cli, store_path: Path) -> None:
    r = cli("import", store_path, "--triples", TABLE4, "--values", TABLE4_VALUES, "--quiet")
    assert r.code == 0, r
    stats = json.loads(cli("stats", store_path, "--json").out)
    assert stats["triples"] == 15
    assert stats["tables"] == 3
    assert stats["ops"] == 2  # R1, R2
    assert stats["values"] == 25
    assert stats["runs"] == 1


def test_imported_triples_keep_ids_and_carry_their_tables(store_path: Path) -> None:
    import provplug
    from provplug.importer import import_provenance

    store = provplug.open_store(store_path)
    import_provenance(store, TABLE4, TABLE4_VALUES)
    tables = {r["table_id"]: r["name"] for r in store.tables().to_pylist()}
    ops = {r["op_id"]: r["name"] for r in store.ops().to_pylist()}
    got = {(t["src"], t["dst"], ops[t["op"]], tables[t["src_table"]], tables[t["dst_table"]])
           for t in store.triples().to_table().to_pylist()}
    assert (15, 23, "R2", "Person2", "AvgAge") in got
    assert (3, 15, "R1", "Person1", "Person2") in got
    assert len(got) == 15
    columns = {r["name"]: r["columns"] for r in store.tables().to_pylist()}
    assert columns["AvgAge"] == ["City", "Age"]


def test_values_not_listed_belong_to_unknown(store_path: Path, tmp_path: Path) -> None:
    import provplug
    from provplug.importer import import_provenance

    store = provplug.open_store(store_path)
    import_provenance(store, TABLE4)
    assert [r["name"] for r in store.tables().to_pylist()] == ["unknown"]
    assert store.stats()["values"] == 22  # Mary's 10, 11, 12 are on no triple


def test_parquet_input_and_appending_runs_never_rewrite_earlier_ones(cli, store_path: Path, tmp_path: Path) -> None:
    pq.write_table(pa.table({"src": [100, 101], "dst": [102, 102], "op": ["X", "X"]}), tmp_path / "t.parquet")
    assert cli("import", store_path, "--triples", TABLE4, "--quiet").code == 0
    before = snapshot(store_path / "runs")
    assert cli("import", store_path, "--triples", tmp_path / "t.parquet", "--quiet").code == 0
    after = snapshot(store_path / "runs")
    assert all(after[k] == v for k, v in before.items())
    assert json.loads(cli("stats", store_path, "--json").out)["triples"] == 17


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


BAD_INPUTS = {
    "no dst column": ("src,dest,op\n1,2,R\n", "no 'dst' column"),
    "non-integer id": ("src,dst,op\n1,2,R\n1,x,R\n", "dst"),
    "self loop": ("src,dst,op\n1,1,R\n", "cycle"),
    "cycle": ("src,dst,op\n1,2,R\n2,3,R\n3,1,R\n", "cycle"),
    "negative id": ("src,dst,op\n-1,2,R\n", "outside the imported id range"),
    "empty": ("src,dst,op\n", "no triple"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_triples_give_one_line_error_and_leave_store_unchanged(cli, store_path: Path, tmp_path: Path, case: str) -> None:
    assert cli("import", store_path, "--triples", TABLE4, "--values", TABLE4_VALUES, "--quiet").code == 0
    before = snapshot(store_path)
    text, message = BAD_INPUTS[case]
    r = cli("import", store_path, "--triples", _write(tmp_path / "bad.csv", text), "--quiet")
    assert r.code != 0
    assert r.err.startswith("provplug: error:") and r.err.count("\n") == 1, r.err
    assert message in r.err
    assert "Traceback" not in r.err
    assert snapshot(store_path) == before


def test_bad_input_on_a_new_store_creates_nothing(cli, store_path: Path, tmp_path: Path) -> None:
    r = cli("import", store_path, "--triples", _write(tmp_path / "bad.csv", "src,dst,op\n1,x,R\n"))
    assert r.code != 0 and r.err.count("\n") == 1
    assert not store_path.exists()


def test_missing_file(cli, store_path: Path, tmp_path: Path) -> None:
    r = cli("import", store_path, "--triples", tmp_path / "nope.csv")
    assert r.code != 0 and "no such file" in r.err and r.err.count("\n") == 1
    assert not store_path.exists()


def test_store_path_that_is_a_regular_file(cli, tmp_path: Path) -> None:
    target = _write(tmp_path / "not-a-store", "precious")
    before = snapshot(target)
    r = cli("import", target, "--triples", TABLE4)
    assert r.code != 0 and "is a file" in r.err and r.err.count("\n") == 1
    assert snapshot(target) == before
    r = cli("stats", target)
    assert r.code != 0 and r.err.count("\n") == 1


def test_bad_values_file(cli, store_path: Path, tmp_path: Path) -> None:
    assert cli("import", store_path, "--triples", TABLE4, "--quiet").code == 0
    before = snapshot(store_path)
    for text in ("value_id,tbl\n1,A\n", "value_id,table\n1,A\n1,B\n", "value_id,table\nq,A\n"):
        r = cli("import", store_path, "--triples", TABLE4, "--values", _write(tmp_path / "v.csv", text))
        assert r.code != 0 and r.err.count("\n") == 1, r
    assert snapshot(store_path) == before


def test_stats_on_missing_store(cli, tmp_path: Path) -> None:
    r = cli("stats", tmp_path / "missing")
    assert r.code != 0 and "no provplug store" in r.err


def test_killed_import_leaves_the_store_as_it_was(cli, store_path: Path, tmp_path: Path) -> None:
    assert cli("import", store_path, "--triples", TABLE4, "--quiet").code == 0
    before = snapshot(store_path)
    big = tmp_path / "big.csv"
    with big.open("w") as f:  # a long chain: slow enough to be killed mid-way
        f.write("src,dst,op\n")
        f.writelines(f"{i},{i + 1},S\n" for i in range(1000, 4_000_000))
    proc = subprocess.Popen(
        [sys.executable, "-m", "provplug", "import", str(store_path), "--triples", str(big)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    staging = store_path / "_staging"
    deadline = time.monotonic() + 60
    while not any(staging.glob("*/triples/*.parquet")):
        assert proc.poll() is None, "import finished before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert snapshot(store_path, skip=("_staging", "_ids")) == {
        k: v for k, v in before.items() if k.split("/")[0] not in ("_staging", "_ids")
    }
    assert json.loads(cli("stats", store_path, "--json").out)["triples"] == 15
    # The dead writer's leftovers are collected by the next writer (or explicitly).
    import provplug

    assert len(provplug.open_store(store_path).collect_garbage()) == 1
    assert snapshot(store_path) == before


def test_import_fires_the_run_hooks(store_path: Path, tmp_path: Path, mocker) -> None:
    from provplug.importer import import_provenance
    from provplug.plugins import Plugins

    plugins = Plugins.load(autoload=False)
    started = mocker.patch.object(plugins, "run_started")
    finished = mocker.patch.object(plugins, "run_finished")
    import_provenance(provplug_store(store_path), TABLE4, plugins=plugins)
    assert started.call_args.args[0].kind == "import"
    run, error = finished.call_args.args
    assert run.status == "committed" and error is None
    bad = tmp_path / "bad.csv"
    bad.write_text("src,dst,op\n1,2,R\n2,1,R\n")
    with pytest.raises(Exception, match="cycle"):
        import_provenance(provplug_store(store_path), bad, plugins=plugins)
    run, error = finished.call_args.args
    assert run.status == "failed" and "cycle" in str(error)


def test_concurrent_imports_lose_nothing(store_path: Path, tmp_path: Path) -> None:
    """Writers in separate processes share one store: every run lands, ids never collide."""
    files = []
    for k in range(4):
        f = tmp_path / f"t{k}.csv"
        f.write_text("src,dst,op\n" + "".join(f"{i},{i + 1},S{k}\n" for i in range(k * 1000, k * 1000 + 500)))
        files.append(f)
    procs = [
        subprocess.Popen([sys.executable, "-m", "provplug", "import", str(store_path), "--triples", str(f), "--quiet"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for f in files
    ]
    assert all(p.wait() == 0 for p in procs), [p.stderr.read() for p in procs]
    store = provplug_store(store_path)
    stats = store.stats()
    assert stats["runs"] == 4 and stats["triples"] == 2000 and stats["ops"] == 4
    table_ids = [r["table_id"] for r in store.tables().to_pylist()]
    assert len(set(table_ids)) == len(table_ids) == 4


def provplug_store(path: Path):
    import provplug

    return provplug.open_store(path)
