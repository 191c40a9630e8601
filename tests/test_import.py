"""`provplug import` and `provplug stats`: the paper's Table 4, bad input, crashes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
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
    from provplug.ingest.importer import import_provenance

    store = provplug.open_store(store_path)
    import_provenance(store, TABLE4, TABLE4_VALUES)
    tables = {r["table_id"]: r["name"] for r in store.tables().to_pylist()}
    ops = {r["op_id"]: r["name"] for r in store.ops().to_pylist()}
    got = {
        (t["src"], t["dst"], ops[t["op"]], tables[t["src_table"]], tables[t["dst_table"]])
        for t in store.triples().to_table().to_pylist()
    }
    assert (15, 23, "R2", "Person2", "AvgAge") in got
    assert (3, 15, "R1", "Person1", "Person2") in got
    assert len(got) == 15
    columns = {r["name"]: r["columns"] for r in store.tables().to_pylist()}
    assert columns["AvgAge"] == ["City", "Age"]


def test_values_not_listed_belong_to_unknown(store_path: Path, tmp_path: Path) -> None:
    import provplug
    from provplug.ingest.importer import import_provenance

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
def test_bad_triples_give_one_line_error_and_leave_store_unchanged(
    cli, store_path: Path, tmp_path: Path, case: str
) -> None:
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
        r = cli("import", store_path, "--triples", TABLE4, "--values", _write(tmp_path / "v.csv", text), "--quiet")
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
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
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
    from provplug.ingest.importer import import_provenance
    from provplug.plugin.manager import Plugins

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
        subprocess.Popen(
            [sys.executable, "-m", "provplug", "import", str(store_path), "--triples", str(f), "--quiet"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
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


# -- issue 18: an O(triples) cycle check, also across runs; progress; duplicates


def _reachable(n: int, src: np.ndarray, dst: np.ndarray, start: int) -> set[int]:
    succ: dict[int, list[int]] = {}
    for s, d in zip(src.tolist(), dst.tolist(), strict=True):
        succ.setdefault(s, []).append(d)
    seen, todo = set(), [start]
    while todo:
        for nxt in succ.get(todo.pop(), []):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _reference_acyclic(n: int, src: np.ndarray, dst: np.ndarray) -> bool:
    return all(v not in _reachable(n, src, dst, v) for v in range(n))


@pytest.mark.parametrize("small_frontier", [1, 8, 10**9], ids=["vectorised", "mixed", "walked"])
def test_topological_order_agrees_with_a_reference(monkeypatch, small_frontier: int) -> None:
    from provplug.ingest import importer

    monkeypatch.setattr(importer, "SMALL_FRONTIER", small_frontier)
    rng = np.random.default_rng(small_frontier)
    for _ in range(300):
        n = int(rng.integers(1, 30))
        src, dst = rng.integers(0, n, int(rng.integers(0, 60))), rng.integers(0, n, int(rng.integers(0, 60)))
        src, dst = src[: min(len(src), len(dst))], dst[: min(len(src), len(dst))]
        if rng.random() < 0.5:  # a DAG: edges go forward in a random order of the values
            rank = rng.permutation(n)
            forward = rank[src] < rank[dst]
            src, dst = src[forward], dst[forward]
        ordering = importer.topological_order(src, dst, n)
        assert ordering.acyclic == _reference_acyclic(n, src, dst)
        if ordering.acyclic:
            assert ordering.ordered == n and ordering.edges_relaxed == len(src)
        else:
            value = importer.a_value_on_a_cycle(src, dst, ordering)
            assert value in _reachable(n, src, dst, value)


def test_the_cycle_check_relaxes_each_edge_once_whatever_the_depth() -> None:
    """The old check made one pass over all edges per level of the graph
    (O(depth x edges)); the topological sort touches each edge once."""
    from provplug.ingest.importer import a_value_on_a_cycle, topological_order

    n = 300_000  # a chain: depth 300,000
    src = np.arange(n - 1)
    ordering = topological_order(src, src + 1, n)
    assert ordering.acyclic and ordering.edges_relaxed == n - 1
    width, depth = 100, 3_000  # a ladder: each value fed by its own chain and the next one
    level, chain = np.divmod(np.arange(width, width * depth), width)
    lsrc = np.concatenate([(level - 1) * width + chain, (level - 1) * width + (chain + 1) % width])
    ldst = np.concatenate([level * width + chain, level * width + chain])
    ordering = topological_order(lsrc, ldst, width * depth)
    assert ordering.acyclic and ordering.edges_relaxed == len(lsrc) and ordering.rounds == depth
    # A cycle closed at the far end of the chain is found, and a value on it named.
    csrc, cdst = np.append(src, n - 1), np.append(src + 1, 0)
    ordering = topological_order(csrc, cdst, n)
    assert not ordering.acyclic and ordering.ordered == 0
    assert 0 <= a_value_on_a_cycle(csrc, cdst, ordering) < n


def test_import_of_a_deep_chain_within_one_table(cli, store_path: Path, tmp_path: Path) -> None:
    chain = tmp_path / "chain.parquet"
    ids_ = np.arange(1, 200_001)
    pq.write_table(pa.table({"src": ids_[:-1], "dst": ids_[1:], "op": ["S"] * (len(ids_) - 1)}), chain)
    assert cli("import", store_path, "--triples", chain, "--quiet").code == 0
    assert json.loads(cli("stats", store_path, "--json").out)["triples"] == 199_999


PHASES = (
    "reading values",
    "sorting values",
    "read values",
    "reading triples",
    "read triples",
    "numbering values",
    "numbered values",
    "deduplicating triples",
    "deduplicated triples",
    "cycle check: table graph",
    "cycle check: ordering values",
    "cycle check: ordered values",
    "cycle check: reading earlier triples in range",
    "cycle check: earlier runs share values",
    "cycle check: reading earlier imported triples",
    "cycle check: read earlier imported triples",
    "cycle check: numbering values with earlier runs",
    "cycle check: ordering values with earlier runs",
    "cycle check: ordered values with earlier runs",
    "writing triples",
    "wrote triples",
    "writing values",
    "wrote values",
    "committing",
    "import committed",
)


def test_import_reports_progress_through_every_phase(store_path: Path, tmp_path: Path, monkeypatch) -> None:
    """Each phase of a long import says what it does (at most once a second
    by default; here every update is printed)."""
    import io

    from provplug.ingest import importer
    from provplug.progress import Progress

    monkeypatch.setattr(importer, "BATCH_ROWS", 1000)
    importer.import_provenance(provplug_store(store_path), TABLE4, TABLE4_VALUES)
    # A chain inside one table (so values are ordered one by one) from value
    # 23 of the earlier run (so the earlier run's triples are ordered too).
    ids_ = np.array([23, *range(1000, 6000)])
    triples, values = tmp_path / "t.parquet", tmp_path / "v.parquet"
    pq.write_table(
        pa.table({"src": ids_[:-1], "dst": ids_[1:], "op": ["S"] * (len(ids_) - 1)}), triples, row_group_size=1000
    )
    pq.write_table(pa.table({"value_id": ids_, "table": ["T"] * len(ids_)}), values, row_group_size=1000)
    stream = io.StringIO()
    importer.import_provenance(provplug_store(store_path), triples, values, progress=Progress(stream=stream, every=0))
    lines = stream.getvalue().splitlines()
    first = {}
    for k, line in enumerate(lines):
        assert line.startswith("[provplug] "), line
        first.setdefault(line[len("[provplug] ") :].rsplit(":", 1)[0], k)
    missing = [p for p in PHASES if p not in first]
    assert not missing, lines
    assert [first[p] for p in PHASES] == sorted(first[p] for p in PHASES), lines
    assert sum(line.startswith("[provplug] reading triples:") for line in lines) == 5  # one a batch


CROSS_RUN_CYCLES = {
    # name: (earlier imports, the import that closes a cycle); values are "id:table" lists
    "two runs, two values": ([("1,2", "")], ("2,1", "")),
    "through values only an earlier run holds": ([("1,2 2,3 3,4", "")], ("4,1", "")),
    "across three runs": ([("1,2", ""), ("2,3", "")], ("3,1", "")),
    "tables acyclic within each run": ([("1,2", "1:A 2:B")], ("2,1", "2:B 1:A")),
    # the middle run's value range holds no value of the import: it is read all the same
    "through a run sharing no value with the import": ([("1,50", ""), ("50,60", ""), ("60,3", "")], ("3,1", "")),
}


def _import_files(tmp_path: Path, name: str, edges: str, values: str) -> list[Path]:
    triples = _write(tmp_path / f"{name}.csv", "src,dst,op\n" + "".join(f"{e},{name}\n" for e in edges.split()))
    if not values:
        return [triples]
    rows = "".join(f"{v.replace(':', ',')}\n" for v in values.split())
    return [triples, _write(tmp_path / f"{name}-values.csv", "value_id,table\n" + rows)]


def _import_args(files: list[Path]) -> list[str | Path]:
    return ["--triples", files[0], *(["--values", files[1]] if len(files) > 1 else [])]


@pytest.mark.parametrize("case", sorted(CROSS_RUN_CYCLES))
def test_an_import_closing_a_cycle_with_earlier_runs_is_rejected(
    cli, store_path: Path, tmp_path: Path, case: str
) -> None:
    earlier, closing = CROSS_RUN_CYCLES[case]
    for k, (edges, values) in enumerate(earlier):
        r = cli("import", store_path, *_import_args(_import_files(tmp_path, f"E{k}", edges, values)), "--quiet")
        assert r.code == 0, r
    before = snapshot(store_path)
    r = cli("import", store_path, *_import_args(_import_files(tmp_path, "N", *closing)), "--quiet")
    assert r.code == 2 and r.err.count("\n") == 1, r
    assert "cycle with triples of earlier runs" in r.err and "among its own ancestors" in r.err
    assert snapshot(store_path) == before


def test_an_import_sharing_values_with_earlier_runs_without_a_cycle_is_accepted(
    cli, store_path: Path, tmp_path: Path
) -> None:
    assert cli("import", store_path, *_import_args(_import_files(tmp_path, "E", "1,2 2,3", "")), "--quiet").code == 0
    r = cli("import", store_path, *_import_args(_import_files(tmp_path, "N", "0,1 3,4 1,3", "")), "--quiet")
    assert r.code == 0, r
    assert json.loads(cli("stats", store_path, "--json").out)["triples"] == 5


def test_duplicate_triples_are_stored_and_counted_once(store_path: Path, tmp_path: Path, monkeypatch) -> None:
    from provplug.ingest import importer

    monkeypatch.setattr(importer, "BATCH_ROWS", 2)  # duplicates fall into different batches
    rows = [(1, 2, "R"), (2, 3, "R"), (1, 2, "R"), (1, 2, "S"), (2, 3, "R"), (1, 2, "R"), (3, 4, "S")]
    triples = tmp_path / "dup.parquet"
    pq.write_table(
        pa.table({k: [r[i] for r in rows] for i, k in enumerate(("src", "dst", "op"))}), triples, row_group_size=2
    )
    store = provplug_store(store_path)
    result = importer.import_provenance(store, triples)
    assert result["triples"] == 4 and result["duplicates"] == 3
    assert store.stats()["triples"] == 4
    ops = {r["op_id"]: r["name"] for r in store.ops().to_pylist()}
    stored = [(t["src"], t["dst"], ops[t["op"]]) for t in store.triples().to_table().to_pylist()]
    assert sorted(stored) == sorted(set(rows))
    assert {r["name"]: r["triples"] for r in store.ops().to_pylist()} == {"R": 2, "S": 2}


@pytest.mark.parametrize("part_rows", [7, 1000, 1 << 22])
def test_values_are_numbered_densely_in_order(monkeypatch, part_rows: int) -> None:
    """Sorting in parts (for progress lines) numbers values as one sort would."""
    from provplug.ingest import importer

    monkeypatch.setattr(importer, "PART_ROWS", part_rows)
    rng = np.random.default_rng(part_rows)
    values = np.concatenate([rng.integers(0, 2**46, 3000), np.full(500, 12345), rng.integers(0, 50, 500)])
    rng.shuffle(values)
    nodes, dense = importer._dense_numbers(values)
    expected_nodes, expected_dense = np.unique(values, return_inverse=True)
    assert np.array_equal(nodes, expected_nodes) and np.array_equal(dense, expected_dense)


def test_the_two_deduplications_agree() -> None:
    from provplug.ingest.importer import _unique_by_key, _unique_by_lexsort

    rng = np.random.default_rng(0)
    src, dst, op = rng.integers(0, 50, 5000), rng.integers(0, 50, 5000), rng.integers(0, 3, 5000)
    by_key = _unique_by_key(src, dst, op, 50, 3)
    by_lexsort = _unique_by_lexsort(src, dst, op)
    assert all(np.array_equal(a, b) for a, b in zip(by_key, by_lexsort, strict=True))
    assert len(by_key[0]) == len(set(zip(src.tolist(), dst.tolist(), op.tolist(), strict=True)))


BLANK_NAMES = {
    "empty table name": ("values", "value_id,table\n1,A\n2,\n"),
    "blank table name": ("values", 'value_id,table\n1,A\n2,"  "\n'),
    "empty op name": ("triples", "src,dst,op\n1,2,R\n2,3,\n"),
    "blank op name": ("triples", 'src,dst,op\n1,2,R\n2,3," "\n'),
}


@pytest.mark.parametrize("case", sorted(BLANK_NAMES))
def test_blank_table_and_op_names_are_rejected(cli, store_path: Path, tmp_path: Path, case: str) -> None:
    assert cli("import", store_path, "--triples", TABLE4, "--quiet").code == 0
    before = snapshot(store_path)
    which, text = BLANK_NAMES[case]
    bad = _write(tmp_path / f"{which}.csv", text)
    good = _write(tmp_path / "good.csv", "src,dst,op\n1,2,R\n")
    args = ("--triples", good, "--values", bad) if which == "values" else ("--triples", bad)
    r = cli("import", store_path, *args, "--quiet")
    assert r.code == 2 and r.err.count("\n") == 1, r
    assert str(bad) in r.err and "empty" in r.err
    assert snapshot(store_path) == before


def test_blank_table_name_in_parquet_values(cli, store_path: Path, tmp_path: Path) -> None:
    values = tmp_path / "v.parquet"
    pq.write_table(pa.table({"value_id": [1, 2], "table": ["A", ""]}), values)
    r = cli(
        "import",
        store_path,
        "--triples",
        _write(tmp_path / "t.csv", "src,dst,op\n1,2,R\n"),
        "--values",
        values,
        "--quiet",
    )
    assert r.code == 2 and str(values) in r.err and r.err.count("\n") == 1, r
    assert not store_path.exists()


def test_only_imported_triples_of_earlier_runs_are_read_for_the_cycle_check(store_path: Path, tmp_path: Path) -> None:
    """Captured ids carry their table in the high bits: they never meet imported ids."""
    import io

    from provplug import ids
    from provplug.ingest.importer import import_provenance
    from provplug.progress import Progress
    from provplug.schema import TRIPLES

    store = provplug_store(store_path)
    import_provenance(store, _write(tmp_path / "e.csv", "src,dst,op\n1,2,A\n"))
    captured = [ids.value_id(7, 0, r) for r in range(4)]
    with store.transaction("capture") as txn:
        store.fs.create_dir(txn.path("triples"))
        pq.write_table(
            pa.table(
                {"src": captured[:3], "dst": captured[1:], "op": [1] * 3, "src_table": [7] * 3, "dst_table": [7] * 3},
                schema=TRIPLES,
            ),
            txn.path("triples", "part-0.parquet"),
        )
        txn.mark_dataset("triples")
    stream = io.StringIO()
    import_provenance(store, _write(tmp_path / "n.csv", "src,dst,op\n2,3,B\n"), progress=Progress(stream=stream))
    assert "earlier runs share values: 1 triples read" in stream.getvalue()
    assert "read earlier imported triples: 1 triples" in stream.getvalue()
    assert store.stats()["triples"] == 5


def _cycle_check_lines(store: Any, tmp_path: Path, name: str, edges: str) -> list[str]:
    import io

    from provplug.ingest.importer import import_provenance
    from provplug.progress import Progress

    stream = io.StringIO()
    import_provenance(store, _import_files(tmp_path, name, edges, "")[0], progress=Progress(stream=stream))
    lines = [line for line in stream.getvalue().splitlines() if "cycle check: " in line and "earlier" in line]
    return [line.split("cycle check: ", 1)[1].rsplit(" (", 1)[0] for line in lines]  # without the elapsed time


def test_the_cycle_check_reads_only_earlier_row_groups_whose_value_range_holds_a_new_value(
    store_path: Path, tmp_path: Path
) -> None:
    """Replicas with shifted ids (the paper's evaluation) read no earlier triple,
    so an import's cost does not grow with the store; an overlapping range is read."""
    store = provplug_store(store_path)
    unrelated = "earlier runs share no value: {} triples read ({} of {} row groups in range)"
    assert _cycle_check_lines(store, tmp_path, "A", "1,2 2,3") == [unrelated.format(0, 0, 0)]
    assert _cycle_check_lines(store, tmp_path, "B", "100,110 110,120") == [unrelated.format(0, 0, 1)]
    assert _cycle_check_lines(store, tmp_path, "C", "200,201") == [unrelated.format(0, 0, 2)]
    # 105 lies inside run B's range 100..120 without being one of its values: B is read, A and C are not.
    assert _cycle_check_lines(store, tmp_path, "D", "105,106") == [unrelated.format(2, 1, 3)]
    # 3 is A's: A is read to find it, then every earlier triple for the cycle check.
    assert _cycle_check_lines(store, tmp_path, "E", "3,4")[:2] == [
        "earlier runs share values: 2 triples read",
        "read earlier imported triples: 6 triples",
    ]
    assert store.stats()["triples"] == 7


def test_values_are_written_in_row_groups_a_cold_query_can_pick(store_path: Path, tmp_path: Path, monkeypatch) -> None:
    from provplug.ingest import importer

    monkeypatch.setattr(importer, "VALUES_ROW_GROUP", 4)
    ids_ = np.arange(1, 12)
    triples, values = tmp_path / "t.parquet", tmp_path / "v.parquet"
    pq.write_table(pa.table({"src": ids_[:-1], "dst": ids_[1:], "op": ["S"] * 10}), triples)
    pq.write_table(pa.table({"value_id": ids_, "table": ["T"] * 11}), values)
    importer.import_provenance(provplug_store(store_path), triples, values)
    (written,) = store_path.glob("runs/*/values.parquet")
    meta = pq.ParquetFile(written).metadata
    assert [meta.row_group(g).num_rows for g in range(meta.num_row_groups)] == [4, 4, 3]
    assert pq.read_table(written).column("value_id").to_pylist() == ids_.tolist()


def test_a_damaged_earlier_triples_file_is_a_one_line_error_naming_it(cli, store_path: Path, tmp_path: Path) -> None:
    assert cli("import", store_path, "--triples", TABLE4, "--quiet").code == 0
    part = next(store_path.glob("runs/*/triples/part-00000.parquet"))
    part.write_bytes(part.read_bytes()[:-20])
    r = cli("import", store_path, "--triples", _write(tmp_path / "t.csv", "src,dst,op\n23,99,R\n"), "--quiet")
    assert r.code == 2 and r.err.count("\n") == 1 and "Traceback" not in r.err, r
    assert str(part) in r.err


# -- row lineage (what-if and depends on imported provenance) ----------------------
def _paper_with_rows(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Table 4's values with their rows (Person1 ids 1-12: rows 0-3; Person2
    13-21: rows 0-2; AvgAge 22-25: rows 0-1), R1/R2's row lineage and rules."""
    lines = TABLE4_VALUES.read_text().split()
    firsts = {"Person1": 1, "Person2": 13, "AvgAge": 22}
    widths = {"Person1": 3, "Person2": 3, "AvgAge": 2}
    rows = ["value_id,table,column,row"]
    for line in lines[1:]:
        vid, table, _ = line.split(",")
        rows.append(f"{line},{(int(vid) - firsts[table]) // widths[table]}")
    values = _write(tmp_path / "values.csv", "\n".join(rows) + "\n")
    lineage = _write(
        tmp_path / "rows.csv",
        "op,out_table,out_row,member,in_table,in_row\n"
        "R1,Person2,0,0,Person1,0\nR1,Person2,1,0,Person1,1\nR1,Person2,2,0,Person1,2\n"
        "R2,AvgAge,0,0,Person2,0\nR2,AvgAge,0,1,Person2,1\nR2,AvgAge,1,0,Person2,2\n",
    )
    rules = [
        {
            "op": "R1",
            "out_table": "Person2",
            "existence": "exact",
            "columns": {c: {"kind": "copy", "table": "Person1", "column": c} for c in ("Name", "City", "Age")},
            "deciding": {"Person1": ["Age"]},
        },
        {
            "op": "R2",
            "out_table": "AvgAge",
            "existence": "exact",
            "columns": {
                "City": {"kind": "copy", "table": "Person2", "column": "City"},
                "Age": {"kind": "aggregate", "function": "avg", "table": "Person2", "column": "Age"},
            },
            "deciding": {"Person2": ["City"]},
        },
    ]
    return values, lineage, _write(tmp_path / "rules.json", json.dumps(rules))


def test_imported_row_lineage_answers_whatif_and_depends(cli, store_path: Path, tmp_path: Path) -> None:
    import provplug
    from provplug.whatif.values import UNKNOWN

    values, lineage, rules = _paper_with_rows(tmp_path)
    r = cli(
        "import",
        store_path,
        "--triples",
        TABLE4,
        "--values",
        values,
        "--row-lineage",
        lineage,
        "--row-rules",
        rules,
        "--quiet",
    )
    assert r.code == 0, r
    store = provplug.open(store_path)
    ops = {o["name"]: (o["inputs"], o["outputs"]) for o in provplug.open_store(store_path).ops().to_pylist()}
    tables = {t["name"]: t["table_id"] for t in provplug.open_store(store_path).tables().to_pylist()}
    assert ops["R2"] == ([tables["Person2"]], [tables["AvgAge"]])
    mark = store.whatif(value_id=6)  # Mark's Age (paper id 6): his Person2 row 1 goes, NY's row changes
    assert [r.row for r in mark.table("Person2").vanished] == [1]  # type: ignore[union-attr]
    (ny,) = mark.table("AvgAge").changed  # type: ignore[union-attr]
    assert ny.row == 0 and ny.changes == {"Age": (None, UNKNOWN)}  # no stored values to recompute from
    both = store.whatif(value_id=[3, 6])  # Steve and Mark: NY (paper id 23) vanishes
    assert [r.row for r in both.table("AvgAge").vanished] == [0]  # type: ignore[union-attr]
    # AvgAge ids: 22 NY's City, 23 NY's Age, 24 LA's City. Shane (9) reaches only LA; Steve and Mark remove NY;
    # Mark alone changes NY's Age to a value an import without stored rows cannot recompute.
    assert store.depends(9, 23).answer == "no" and store.depends([3, 6], 23).answer == "yes"
    assert store.depends(6, 23).answer == "unknown" and store.depends(6, 22).answer == "no"
    assert provplug.open(store_path).whatif(value_id=12).tables[0].deleted  # Mary: deleted, nothing else
    assert [t.table for t in provplug.open(store_path).whatif(value_id=12).tables] == ["Person1"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"row-rules": None}, "go together"),
        ({"lineage": "op,out_table,out_row,in_table,in_row\nR1,Nope,0,Person1,0\n"}, "table 'Nope' is not a table"),
        ({"lineage": "op,out_table,out_row,in_table,in_row\nR9,Person2,0,Person1,0\n"}, "no rules for op 'R9'"),
        (
            {"extra-rule": {"op": "R9", "out_table": "Person2", "existence": "exact", "columns": {}}},
            "op 'R9' is not an op",
        ),
        ({"lineage": "op,out_table,out_row,in_table,in_row\nR1,Person2,-1,Person1,0\n"}, "'out_row' -1 outside"),
        (
            {"lineage": "op,out_table,out_row,in_table,in_row\nR1,AvgAge,0,Person1,0\n"},
            "no rules for op 'R1' writing 'AvgAge'",
        ),
        ({"rules": "[{"}, "is not JSON"),
        ({"rules": '[{"op": "R1", "out_table": "Person2", "existence": "maybe", "columns": {}}]'}, "unknown existence"),
        (
            {
                "rules": '[{"op": "R1", "out_table": "Person2", "existence": "exact", "columns": '
                '{"Age": {"kind": "aggregate", "function": "median", "table": "Person1", "column": "Age"}}}]'
            },
            "unknown aggregate",
        ),
        ({"rules": '[{"op": "R1", "existence": "exact", "columns": {}}]'}, "missing 'out_table'"),
    ],
)
def test_bad_row_lineage_is_one_line_and_writes_nothing(
    cli, store_path: Path, tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    values, lineage, rules = _paper_with_rows(tmp_path)
    if "lineage" in change:
        lineage = _write(tmp_path / "bad-rows.csv", change["lineage"])
    if "rules" in change:
        rules = _write(tmp_path / "bad-rules.json", change["rules"])
    if "extra-rule" in change:
        rules = _write(tmp_path / "more-rules.json", json.dumps([*json.loads(rules.read_text()), change["extra-rule"]]))
    args = ["--row-lineage", lineage] + ([] if "row-rules" in change else ["--row-rules", rules])
    r = cli("import", store_path, "--triples", TABLE4, "--values", values, *args, "--quiet")
    assert r.code == 2 and message in r.err and r.err.count("\n") == 1, r
    assert not store_path.exists() or provplug_runs(store_path) == 0


def provplug_runs(path: Path) -> int:
    import provplug

    return len(provplug.open_store(path).runs())
