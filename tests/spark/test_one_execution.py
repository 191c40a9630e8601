"""One execution (issue 25): what the store holds for a written dataset is
what was written. Under ``provplug run`` / ``capture_writes`` the user's files
are written from the rows the capture stored, with the user's own writer
(format, mode, options, partitioning), so a nondeterministic plan
(``monotonically_increasing_id`` after a join, unseeded ``rand()``,
``uuid()``) cannot give the store other rows than the files. A write whose
capture fails is still done, as in a plain run, and recorded as an
uncaptured write; ``strict`` fails instead."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

import provplug
from provplug.store.open import open_store

from .helpers import F, labelled_triples, ops, table_rows

# events (event_id, user, song); songs (song, title). By hand: every event's song is in songs.
EVENTS = [(1, "u20", "s1"), (2, "u02", "s2"), (3, "u07", "s1"), (4, "u11", "s3"), (5, "u05", "s2"), (6, "u13", "s3")]
SONGS = [("s1", "Alpha"), ("s2", "Beta"), ("s3", "Gamma")]


def _inputs(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    (data / "events.csv").write_text("event_id,user,song\n" + "".join(f"{e},{u},{s}\n" for e, u, s in EVENTS))
    (data / "songs.csv").write_text("song,title\n" + "".join(f"{s},{t}\n" for s, t in SONGS))
    return data


def _script(tmp_path: Path, body: str) -> Path:
    """A plain PySpark script over DATA (argv[1]) writing into OUT (argv[2])."""
    script = tmp_path / "job.py"
    head = """
        import sys
        from pyspark.sql import SparkSession, functions as F
        spark = SparkSession.builder.getOrCreate()
        data, out = sys.argv[1], sys.argv[2]
        events = spark.read.option("header", True).option("inferSchema", True).csv(f"{data}/events.csv")
        songs = spark.read.option("header", True).csv(f"{data}/songs.csv")
    """
    script.write_text(textwrap.dedent(head) + textwrap.dedent(body))
    return script


def _rows(frame: Any, columns: list[str]) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in columns) for r in frame.collect())


def _stored(store: Path, table: str, columns: list[str]) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in columns) for r in table_rows(store, table))


def _ran(cli: Any, store: Path, script: Path, *args: Any) -> None:
    result = cli("run", "--store", store, script, *args)
    assert result.code == 0, result.err


PLAYS = ["event_id", "user", "song", "title", "play_id"]


def test_a_surrogate_key_after_a_join_is_the_one_written(
    spark: Any, cli: Any, store_path: Path, tmp_path: Path
) -> None:
    script = _script(
        tmp_path,
        """
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")  # a shuffle join, as on big data
        plays = events.join(songs, "song").withColumn("play_id", F.monotonically_increasing_id())
        plays.write.parquet(f"{out}/plays")
        """,
    )
    try:
        _ran(cli, store_path, script, _inputs(tmp_path), tmp_path / "out")
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")
    written = spark.read.parquet(str(tmp_path / "out" / "plays"))
    assert _rows(written, PLAYS) == _stored(store_path, "plays", PLAYS)
    # By hand: the user cell of the written row whose play_id is 0 comes from the
    # user cell of that row's event, and from nothing else.
    first = written.filter(F.col("play_id") == 0).collect()[0]
    triples = labelled_triples(store_path, {"plays": ["play_id"], "events": ["event_id"]})
    parents = {src for src, dst, _op in triples if dst == ("plays", "user", 0)}
    assert parents == {("events", "user", first["event_id"])}
    assert {e: u for e, u, _ in EVENTS}[first["event_id"]] == first["user"]
    answer = provplug.open(store_path).lineage(table="plays", column="user", where="play_id = 0", method="rq")
    assert [(c["table"], c["column"], c["value"]) for c in answer.lineage] == [("events", "user", first["user"])]


def test_rand_and_uuid_are_written_as_stored_with_the_users_layout(
    spark: Any, cli: Any, store_path: Path, tmp_path: Path
) -> None:
    script = _script(
        tmp_path,
        """
        noisy = events.withColumn("r", F.rand()).withColumn("u", F.expr("uuid()"))
        w = noisy.write.mode("overwrite").option("header", True).partitionBy("song")
        w.csv(f"{out}/noisy", sep=";")
        """,
    )
    data = _inputs(tmp_path)
    _ran(cli, store_path, script, data, tmp_path / "out")
    columns = ["event_id", "user", "song", "r", "u"]
    written = spark.read.option("header", True).option("sep", ";").option("inferSchema", True)
    assert _rows(written.csv(str(tmp_path / "out" / "noisy")), columns) == _stored(store_path, "noisy", columns)
    # laid out as the plain run lays it out: the same partition directories of CSV files
    import runpy
    import sys

    argv = sys.argv
    sys.argv = [str(script), str(data), str(tmp_path / "plain")]
    try:
        runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv = argv

    def layout(root: Path) -> set[tuple[str, str]]:
        return {(p.parent.name, p.suffix) for p in root.rglob("part-*")}

    assert layout(tmp_path / "out" / "noisy") == layout(tmp_path / "plain" / "noisy")
    assert {d for d, _ in layout(tmp_path / "plain" / "noisy")} == {"song=s1", "song=s2", "song=s3"}
    assert {s for _, s in layout(tmp_path / "plain" / "noisy")} == {".csv"}


def test_save_as_table_and_write_to_create(spark: Any, store_path: Path, tmp_path: Path) -> None:
    events = spark.read.option("header", True).option("inferSchema", True).csv(str(_inputs(tmp_path) / "events.csv"))
    try:
        with provplug.capture_writes(spark, store=store_path):
            events.withColumn("r", F.rand()).write.format("parquet").mode("overwrite").saveAsTable("provplug_oe_t")
            events.withColumn("u", F.expr("uuid()")).writeTo("provplug_oe_v2").using("parquet").create()
            # insertInto fills the table by position: the stored cells are named as the table names them
            late = events.filter(F.col("event_id") > 4).select("event_id", "user", "song", F.rand().alias("noise"))
            late.write.insertInto("provplug_oe_t")
        t_rows = _rows(spark.table("provplug_oe_t"), ["event_id", "r"])
        v2_rows = _rows(spark.table("provplug_oe_v2"), ["event_id", "u"])
    finally:
        spark.sql("DROP TABLE IF EXISTS provplug_oe_t")
        spark.sql("DROP TABLE IF EXISTS provplug_oe_v2")
    stored = _stored(store_path, "provplug_oe_t", ["event_id", "r"]) + _stored(
        store_path, "provplug_oe_t-2", ["event_id", "r"]
    )
    assert t_rows == sorted(stored) and len(t_rows) == len(EVENTS) + 2
    assert v2_rows == _stored(store_path, "provplug_oe_v2", ["event_id", "u"]) and len(v2_rows) == len(EVENTS)


@provplug.step("R", output="Noisy")
def _noisy(df: Any) -> Any:
    return df.withColumn("r", F.rand())


@provplug.step("G", output="Grown")
def _grown(df: Any) -> Any:
    return df.withColumn("r2", F.col("r") * 2)


@pytest.mark.parametrize("store_rows", [True, False])
def test_a_nondeterministic_step_output_used_after_the_block_is_what_was_stored(
    spark: Any, store_path: Path, store_rows: bool
) -> None:
    with provplug.capture(spark, store=store_path, store_rows=store_rows) as run:
        noisy = _noisy(run.source(spark.createDataFrame(EVENTS, "event_id int, user string, song string"), "E"))
        grown = _grown(noisy)
        inside = _rows(noisy, ["event_id", "r"])
    assert _rows(noisy, ["event_id", "r"]) == inside  # after the block: the stored rows, not a new rand()
    assert _rows(grown, ["event_id", "r", "r2"]) == sorted((e, r, r * 2) for e, r in inside)
    if store_rows:
        assert _stored(store_path, "Noisy", ["event_id", "r"]) == inside


def test_a_nondeterministic_output_of_a_failed_run_keeps_its_rows(spark: Any, store_path: Path) -> None:
    kept: dict[str, Any] = {}
    with pytest.raises(ValueError, match="the user's own"), provplug.capture(spark, store=store_path) as run:
        kept["noisy"] = _noisy(run.source(spark.createDataFrame(EVENTS, "event_id int, user string, song string"), "E"))
        kept["inside"] = _rows(kept["noisy"], ["event_id", "r"])
        raise ValueError("the user's own error")
    assert _rows(kept["noisy"], ["event_id", "r"]) == kept["inside"]


def _manifest(store: Path) -> dict[str, Any]:
    [run] = open_store(store).runs()
    return run


def test_a_failed_capture_still_writes_and_records_an_uncaptured_write(
    spark: Any, cli: Any, mocker: Any, store_path: Path, tmp_path: Path
) -> None:
    from provplug_spark.session import SparkCaptureSession

    script = _script(
        tmp_path,
        """
        events.write.parquet(f"{out}/copy")
        events.filter(F.col("event_id") > 3).write.mode("overwrite").json(f"{out}/late")
        """,
    )
    original = SparkCaptureSession._materialise

    def failing(self: Any, table: Any, *args: Any, **kwargs: Any) -> Any:
        if table.name == "late":
            raise RuntimeError("a type pyarrow cannot hold")
        return original(self, table, *args, **kwargs)

    mocker.patch.object(SparkCaptureSession, "_materialise", failing)
    _ran(cli, store_path, script, _inputs(tmp_path), tmp_path / "out")
    late = spark.read.json(str(tmp_path / "out" / "late"))
    assert _rows(late, ["event_id", "user"]) == [(e, u) for e, u, _ in EVENTS if e > 3]  # the user's write, done
    manifest = _manifest(store_path)
    assert [w["name"] for w in manifest["uncaptured_writes"]] == [str(tmp_path / "out" / "late")]
    assert "a type pyarrow cannot hold" in manifest["uncaptured_writes"][0]["reason"]
    assert set(ops(store_path)) == {"write:copy"}  # the failed step left nothing behind
    assert {t.name for t in (tmp_path / "out").iterdir()} == {"copy", "late"}
    assert open_store(store_path).verify()["runs"] == 1  # every file of the run is whole
    shown = cli("runs", store_path)
    assert "late" in shown.out and "a type pyarrow cannot hold" in shown.out
    stats = json.loads(cli("stats", store_path, "--json").out)
    assert [w["name"] for w in stats["uncaptured_writes"]] == [str(tmp_path / "out" / "late")]


def test_a_strict_run_fails_where_the_capture_fails(spark: Any, mocker: Any, store_path: Path, tmp_path: Path) -> None:
    from provplug_spark.session import SparkCaptureSession

    mocker.patch.object(SparkCaptureSession, "_materialise", side_effect=RuntimeError("writer job failed"))
    events = spark.createDataFrame(EVENTS, "event_id int, user string, song string")
    with (
        pytest.raises(RuntimeError, match="writer job failed"),
        provplug.capture_writes(spark, store=store_path, strict=True),
    ):
        events.write.parquet(str(tmp_path / "copy"))
    assert not store_path.exists()


def test_a_step_the_session_leaves_uncaptured_is_written_as_the_users_own(
    spark: Any, mocker: Any, store_path: Path, tmp_path: Path
) -> None:
    from provplug_spark.session import SparkCaptureSession

    mocker.patch.object(SparkCaptureSession, "_captured_step", side_effect=RuntimeError("an internal error"))
    events = spark.createDataFrame(EVENTS, "event_id int, user string, song string")
    with provplug.capture_writes(spark, store=store_path):
        events.write.parquet(str(tmp_path / "copy"))
    assert _rows(spark.read.parquet(str(tmp_path / "copy")), ["event_id", "user"]) == [(e, u) for e, u, _ in EVENTS]
    [write] = _manifest(store_path)["uncaptured_writes"]
    assert write["name"] == "copy" and "an internal error" in write["reason"]
