"""The Spark index engine borrows the caller's session: the settings it needs
are in effect while it runs, and the caller's own are back afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA

from provplug.index import build_index
from provplug.index.sparkwcc import TUNED_CONF
from provplug.ingest.importer import import_provenance
from provplug.progress import Progress
from provplug.store.open import open_store

# The user's settings: each tuned key set otherwise, or (skew joins) not set at all.
USERS = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "777",
    "spark.sql.shuffle.partitions": "3",
}
UNSET = "spark.sql.adaptive.skewJoin.enabled"
WATCHED = [*TUNED_CONF, "spark.sql.shuffle.partitions"]


@pytest.fixture
def users_session(spark: Any) -> Iterator[Any]:
    """The shared session with the user's settings, put back as found afterwards."""
    found = {key: spark.conf.get(key, None) for key in [*USERS, UNSET]}
    for key, value in USERS.items():
        spark.conf.set(key, value)
    spark.conf.unset(UNSET)
    yield spark
    for key, value in found.items():
        spark.conf.unset(key) if value is None else spark.conf.set(key, value)


class Watcher(Progress):
    """Records the session's settings at each stage of the build; optionally fails at one."""

    def __init__(self, spark: Any, fail_at: str | None = None) -> None:
        super().__init__(enabled=False)
        self.spark, self.fail_at = spark, fail_at
        self.seen: dict[str, dict[str, str | None]] = {}

    def done(self, stage: str, done: int | None = None, unit: str = "items") -> None:
        self.seen[stage] = {key: self.spark.conf.get(key, None) for key in WATCHED}
        if self.fail_at is not None and stage.startswith(self.fail_at):
            raise RuntimeError(f"failed at {stage}")


def _store(tmp_path: Path) -> Path:
    path = tmp_path / "t7.prov"
    import_provenance(open_store(path), DATA / "paper_table7_triples.csv", DATA / "paper_table7_values.csv")
    return path


def _settings(spark: Any) -> dict[str, str | None]:
    return {key: spark.conf.get(key, None) for key in WATCHED}


def test_the_callers_settings_are_back_after_a_spark_build(users_session: Any, tmp_path: Path) -> None:
    before = _settings(users_session)
    assert before[UNSET] is None and before["spark.sql.adaptive.enabled"] == "false"
    watcher = Watcher(users_session)
    meta = build_index(_store(tmp_path), theta=4, engine="spark", spark=users_session, progress=watcher)
    assert meta["engine"] == "spark"
    during = watcher.seen["read triples (spark)"]
    assert {key: during[key] for key in TUNED_CONF} == TUNED_CONF  # the engine's settings while it ran
    assert during["spark.sql.shuffle.partitions"] == "3"  # never touched
    assert _settings(users_session) == before


def test_the_callers_settings_are_back_when_the_build_fails(users_session: Any, tmp_path: Path) -> None:
    before = _settings(users_session)
    watcher = Watcher(users_session, fail_at="indexed components")
    with pytest.raises(RuntimeError, match="failed at indexed components"):
        build_index(_store(tmp_path), theta=4, engine="spark", spark=users_session, progress=watcher)
    assert watcher.seen["read triples (spark)"]["spark.sql.adaptive.enabled"] == "true"
    assert _settings(users_session) == before
