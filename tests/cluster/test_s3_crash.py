"""Kill the writer at each step of the commit on the S3 store (issue 27):
readers see the run whole or not at all, and ``gc`` removes what it left."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from provplug.store.open import open_store

from .servers import S3Server

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
MOST_STEPS = 60  # a run of the paper's tables takes fewer writes; more would be a runaway loop


def _write_killed_at(s3: S3Server, uri: str, step: int) -> int:
    env = {**s3.env(), "PYTHONPATH": f"{TESTS.parent}:{TESTS}", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, str(HERE / "crashing_writer.py"), uri, str(step)], env=env).returncode


def test_a_writer_killed_at_any_step_leaves_the_run_whole_or_absent(s3_env: S3Server) -> None:
    uri = s3_env.uri("crash")
    open_store(uri).create()
    committed = 0
    for step in range(1, MOST_STEPS):
        code = _write_killed_at(s3_env, uri, step)
        assert code in (0, -9), f"the writer failed at step {step} without being killed ({code})"
        store = open_store(uri)
        runs = store.runs()
        if code == 0:
            assert len(runs) == committed + 1
            break
        # Whole or absent: every visible run verifies, with all its 15 triples.
        assert len(runs) in (committed, committed + 1), (step, runs)
        assert store.verify()["triples"] == 15 * len(runs), step
        _collect(uri)
        _assert_only_committed_runs_left(s3_env, uri)
        committed = len(runs)
    else:
        raise AssertionError(f"the writer never finished in {MOST_STEPS} steps")
    assert step > 10, "the writer was never killed mid-commit"


def _collect(uri: str) -> None:
    store = open_store(uri)
    for item in store.garbage():
        assert store.remove_garbage(item), item
    assert store.garbage() == []


def _assert_only_committed_runs_left(s3: S3Server, uri: str) -> None:
    store = open_store(uri)
    run_ids = {m["run_id"] for m in store.runs()}
    listed = s3.client().list_objects_v2(Bucket=s3.bucket, Prefix="crash/runs/")  # type: ignore[attr-defined]
    folders = {o["Key"].split("/")[2] for o in listed.get("Contents", [])} - {""}
    assert folders <= run_ids, f"left behind: {folders - run_ids}"
    # The dead writers' id reservations are released: every reserved table id is a committed run's.
    owners = {store.read_text(store.path("_ids", "tables", str(t))) for t in _ids(store, "tables")}
    assert owners <= run_ids, owners - run_ids


def _ids(store: object, kind: str) -> list[str]:
    import pyarrow.fs as pafs

    from provplug.store.parquet import ParquetStore

    assert isinstance(store, ParquetStore)
    return [i.base_name for i in store.fs.get_file_info(pafs.FileSelector(store.path("_ids", kind)))]


def test_concurrent_writers_on_s3_take_distinct_ids_and_numbers(s3_env: S3Server) -> None:
    """Put-if-absent reservations: writers racing on one store never lose each other's work."""
    uri = s3_env.uri("race")
    open_store(uri).create()
    env = {**s3_env.env(), "PYTHONPATH": f"{TESTS.parent}:{TESTS}", "PATH": "/usr/bin:/bin"}
    writers = [
        subprocess.Popen([sys.executable, str(HERE / "crashing_writer.py"), uri, str(10**6)], env=env) for _ in range(3)
    ]
    assert [w.wait() for w in writers] == [0, 0, 0]
    store = open_store(uri)
    assert sorted(m["number"] for m in store.runs()) == [1, 2, 3]
    table_ids = store.tables().column("table_id").to_pylist()
    assert len(table_ids) == len(set(table_ids)) == 9
    assert store.verify()["triples"] == 45


def test_put_if_absent_is_one_conditional_write_on_s3(s3_env: S3Server) -> None:
    """The server decides (If-None-Match), not a check before the write: None would mean no conditional put."""
    from provplug.store.objectstore import put_if_absent

    store = open_store(s3_env.uri("once"))
    store.create()
    path = store.path("_ids", "tables", "7")
    assert put_if_absent(store.fs, store.uri, path, b"first") is True
    assert put_if_absent(store.fs, store.uri, path, b"second") is False
    assert store.read_text(path) == "first"
