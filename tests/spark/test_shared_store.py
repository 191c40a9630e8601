"""No silent loss on a cluster (issue 27): a local-path store under a master
that is not local is refused before anything runs unless declared shared,
and a run whose tasks' files are not in the store fails and commits nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from provplug.errors import CaptureError, LostFilesError
from provplug.store.open import open_store

from .helpers import capture, count_per_key

ROWS = ([(1, "a"), (2, "b"), (1, "c")], "k int, v string")


class _Spark:
    """What the check reads of a SparkSession: its master and one setting."""

    def __init__(self, master: str, shared: str | None = None) -> None:
        self.sparkContext = type("Context", (), {"master": master})()
        self.conf = {} if shared is None else {"spark.provplug.sharedStore": shared}
        self.conf = type("Conf", (), {"get": lambda _, key, default=None, c=self.conf: c.get(key, default)})()


class _Run:
    def __init__(self, uri: str) -> None:
        self.store_uri = uri


@pytest.mark.parametrize(
    ("master", "uri", "shared", "refused"),
    [
        ("spark://127.0.0.1:7077", "/data/store.prov", None, True),
        ("spark://127.0.0.1:7077", "file:///data/store.prov", None, True),
        ("yarn", "relative/store.prov", "false", True),
        ("spark://127.0.0.1:7077", "/data/store.prov", "true", False),  # declared shared
        ("spark://127.0.0.1:7077", "s3://bucket/store.prov", None, False),  # reached by every executor
        ("local[2]", "/data/store.prov", None, False),  # one machine
        ("local-cluster[2,1,1024]", "/data/store.prov", None, False),
    ],
)
def test_a_local_path_store_under_a_cluster_master_is_refused_unless_shared(
    master: str, uri: str, shared: str | None, refused: bool
) -> None:
    from provplug_spark.shared import check_shared_store

    if refused:
        with pytest.raises(CaptureError, match=r"spark\.provplug\.sharedStore=true") as error:
            check_shared_store(_Spark(master, shared), _Run(uri))  # type: ignore[arg-type]
        assert master in str(error.value) and "\n" not in str(error.value)
    else:
        check_shared_store(_Spark(master, shared), _Run(uri))  # type: ignore[arg-type]


def test_a_bad_shared_store_setting_is_named() -> None:
    from provplug_spark.shared import check_shared_store

    with pytest.raises(CaptureError, match="must be true or false, not 'yes'"):
        check_shared_store(_Spark("spark://h:7077", "yes"), _Run("/s"))  # type: ignore[arg-type]


def _losing(mocker: Any, lose: str) -> None:
    """Make the store lose the first reported ``lose`` file of each writer job, as
    an executor writing to its own disk would."""
    from provplug.plugin.writers import Destination

    real = Destination.discard_files

    def discard(self: Destination, prefix: str, keep: Any) -> set[str]:
        for path in sorted(keep):
            if f"/{lose}/" in path and path.startswith(self.path):
                self.filesystem().delete_file(path)
                break
        return real(self, prefix, keep)

    mocker.patch.object(Destination, "discard_files", discard)


@pytest.mark.parametrize("lose", ["rows", "triples"])
def test_a_run_whose_reported_files_are_missing_fails_and_commits_nothing(
    spark: Any, store_path: Path, mocker: Any, lose: str
) -> None:
    _losing(mocker, lose)
    with pytest.raises(LostFilesError, match="not in the store"):
        capture(spark, store_path, {"T": ROWS}, lambda f: count_per_key(f["T"]).collect())
    assert not store_path.exists() or open_store(store_path).runs() == []


def test_a_file_with_other_counts_than_reported_fails_the_run(spark: Any, store_path: Path, mocker: Any) -> None:
    import provplug_spark.session  # noqa: F401  # imported before the patch, so that its own name is restored after
    import provplug_spark.shared as shared

    real = shared.check_reported

    def miscounted(run: Any, reported: Any, found: set[str]) -> None:
        real(run, {path: rows + 1 for path, rows in reported.items()}, found)

    mocker.patch.object(shared, "check_reported", miscounted)
    mocker.patch("provplug_spark.session.check_reported", miscounted)
    with pytest.raises(LostFilesError, match="where the task that wrote it reported"):
        capture(spark, store_path, {"T": ROWS}, lambda f: count_per_key(f["T"]).collect())
    assert not store_path.exists() or open_store(store_path).runs() == []


def test_under_capture_writes_the_user_s_write_is_done_and_the_run_fails(
    spark: Any, store_path: Path, tmp_path: Path, mocker: Any
) -> None:
    import provplug

    data = tmp_path / "in"
    spark.createDataFrame(*ROWS).coalesce(1).write.parquet(str(data))
    _losing(mocker, "rows")
    with pytest.raises(LostFilesError, match="not in the store"), provplug.capture_writes(spark, store=store_path):
        spark.read.parquet(str(data)).groupBy("k").count().write.parquet(str(tmp_path / "out"))
    assert sorted(tuple(r) for r in spark.read.parquet(str(tmp_path / "out")).collect()) == [(1, 2), (2, 1)]
    assert not store_path.exists() or open_store(store_path).runs() == []
