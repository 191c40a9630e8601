"""The Kedro hooks in-process: Kedro's own runner and catalog, driven as
``KedroSession.run`` drives them (before_pipeline_run, the runner, then
after_pipeline_run or on_pipeline_error), on the tests' SparkSession."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import provplug
from provplug.errors import CaptureError

kedro_io = pytest.importorskip("kedro.io")
from kedro.framework.hooks.manager import _create_hook_manager  # noqa: E402
from kedro.pipeline import Pipeline, node, pipeline  # noqa: E402
from kedro.runner import SequentialRunner  # noqa: E402
from provplug_kedro.hooks import STORE_ENV, ProvplugHooks  # noqa: E402


def run_like_a_session(hooks: ProvplugHooks, flow: Pipeline, catalog: Any, project: Path) -> None:
    """What ``KedroSession.run`` does around the runner, with only ``hooks`` registered."""
    manager = _create_hook_manager()
    manager.register(hooks)
    run_params = {"project_path": str(project), "runner": "SequentialRunner"}
    manager.hook.before_pipeline_run(run_params=run_params, pipeline=flow, catalog=catalog)
    try:
        result = SequentialRunner().run(flow, catalog, manager)
    except Exception as error:
        manager.hook.on_pipeline_error(error=error, run_params=run_params, pipeline=flow, catalog=catalog)
        raise
    manager.hook.after_pipeline_run(run_params=run_params, run_result=result, pipeline=flow, catalog=catalog)


def _doubled(df: Any) -> Any:
    return df.withColumn("x", df["x"] * 2)


def _plus_one(df: Any) -> Any:
    return df.withColumn("x", df["x"] + 1)


def test_memory_datasets_of_spark_frames_link_two_nodes(spark: Any, tmp_path: Path) -> None:
    """numbers (x = 1, 2) -> doubled (in memory) -> result: result.x = 5 derives
    from doubled.x = 4, from numbers.x = 2; the namespace is the op's module."""
    from kedro.io import DataCatalog, MemoryDataset

    numbers = spark.createDataFrame([(1,), (2,)], "x int")
    (tmp_path / "numbers").mkdir()
    numbers.write.parquet(str(tmp_path / "numbers" / "n.parquet"))
    catalog = DataCatalog({"numbers": MemoryDataset(spark.read.parquet(str(tmp_path / "numbers" / "n.parquet")))})
    flow = pipeline(
        [node(_doubled, "numbers", "doubled", name="double"), node(_plus_one, "doubled", "result", name="inc")],
        namespace="maths",
        inputs={"numbers"},
        outputs={"result"},
    )
    store = tmp_path / "store.prov"
    run_like_a_session(ProvplugHooks(store=store), flow, catalog, tmp_path)

    target = provplug.open_store(store)
    assert sorted((o["name"], o["params"]) for o in target.ops().to_pylist()) == [
        ("maths.double", '{"module": "maths"}'),
        ("maths.inc", '{"module": "maths"}'),
    ]
    from provplug.cli.main import main

    assert main(["index", str(store)]) == 0
    answer = provplug.open(store).lineage(table="result", column="x", where="x = 5").to_dict()
    assert sorted((v["table"], v["column"], v["value"]) for v in answer["lineage"]) == [
        ("maths.doubled", "x", 4),
        ("numbers", "x", 2),
    ]


def _count(trips: pd.DataFrame) -> pd.DataFrame:
    return trips.groupby("city", as_index=False).size()


STRICT = {"params:provplug": {"strict": True}}  # provplug: {strict: true} in the parameters


def test_in_strict_mode_a_node_over_pandas_data_is_refused_by_name_and_commits_nothing(
    spark: Any, tmp_path: Path
) -> None:
    from kedro.io import DataCatalog, MemoryDataset

    catalog = DataCatalog({"trips": MemoryDataset(pd.DataFrame({"city": ["NY", "NY", "LA"]})), **_memory(STRICT)})
    flow = pipeline([node(_count, "trips", "trip_counts", name="count_trips")])
    store = tmp_path / "store.prov"
    with pytest.raises(CaptureError, match=r"node 'count_trips': input 'trips' is a pandas\..*DataFrame, not a Spark"):
        run_like_a_session(ProvplugHooks(store=store), flow, catalog, tmp_path)
    assert not store.exists() or provplug.open_store(store).runs() == []


def _to_pandas(df: Any) -> pd.DataFrame:
    return df.toPandas()


def _memory(data: dict[str, Any]) -> dict[str, Any]:
    from kedro.io import MemoryDataset

    return {name: MemoryDataset(value) for name, value in data.items()}


def test_in_strict_mode_a_node_that_returns_pandas_is_refused_by_name(spark: Any, tmp_path: Path) -> None:
    """A Spark input but a pandas output: no rule could say which cells it came from."""
    from kedro.io import DataCatalog, MemoryDataset

    source = tmp_path / "people.parquet"
    spark.createDataFrame([("NY",)], "city string").write.parquet(str(source))
    catalog = DataCatalog({"people": MemoryDataset(spark.read.parquet(str(source))), **_memory(STRICT)})
    flow = pipeline([node(_to_pandas, "people", "people_pd", name="collect_people")])
    store = tmp_path / "store.prov"
    with pytest.raises(CaptureError, match=r"node 'collect_people': output 'people_pd' is a pandas\..*DataFrame"):
        run_like_a_session(ProvplugHooks(store=store), flow, catalog, tmp_path)
    assert not store.exists() or provplug.open_store(store).runs() == []


def test_without_a_store_the_hooks_leave_the_run_alone(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No store: pandas nodes run as usual and nothing is written."""
    from kedro.io import DataCatalog, MemoryDataset

    monkeypatch.delenv(STORE_ENV, raising=False)
    catalog = DataCatalog({"trips": MemoryDataset(pd.DataFrame({"city": ["NY", "NY", "LA"]}))})
    flow = pipeline([node(_count, "trips", "trip_counts", name="count_trips")])
    hooks = ProvplugHooks()
    run_like_a_session(hooks, flow, catalog, tmp_path)
    assert catalog.load("trip_counts").to_dict("records") == [{"city": "LA", "size": 1}, {"city": "NY", "size": 2}]
    assert hooks.current is None and list(tmp_path.iterdir()) == []


def test_the_store_comes_from_the_argument_the_environment_or_the_parameters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kedro.io import DataCatalog, MemoryDataset

    run_params = {"project_path": str(tmp_path / "project")}
    with_parameter = DataCatalog({"params:provplug": MemoryDataset({"store": "data/run.prov"})})
    monkeypatch.delenv(STORE_ENV, raising=False)
    assert ProvplugHooks().configured_store(run_params, DataCatalog()) is None
    # provplug: {store: ...} in the parameters, relative to the project
    assert ProvplugHooks().configured_store(run_params, with_parameter) == str(tmp_path / "project" / "data/run.prov")
    monkeypatch.setenv(STORE_ENV, str(tmp_path / "env.prov"))  # the environment wins over the parameters
    assert ProvplugHooks().configured_store(run_params, with_parameter) == str(tmp_path / "env.prov")
    assert (
        ProvplugHooks(store="s3a://bucket/x.prov").configured_store(run_params, with_parameter) == "s3a://bucket/x.prov"
    )


def test_a_parallel_runner_run_is_refused_before_anything_is_staged(tmp_path: Path) -> None:
    """ParallelRunner runs nodes in other processes, out of the capture's reach."""
    from kedro.io import DataCatalog

    store = tmp_path / "store.prov"
    hooks = ProvplugHooks(store=store)
    with pytest.raises(CaptureError, match="ParallelRunner"):
        hooks.before_pipeline_run(
            {"project_path": str(tmp_path), "runner": "ParallelRunner"}, Pipeline([]), DataCatalog()
        )
    assert hooks.current is None and not store.exists()


def test_the_index_parameter_indexes_the_run_as_it_commits(spark: Any, tmp_path: Path) -> None:
    """provplug: {index: always}: lineage answers from the index with no `provplug index`."""
    from kedro.io import DataCatalog, MemoryDataset

    numbers = spark.createDataFrame([(1,), (2,)], "x int")
    (tmp_path / "numbers").mkdir()
    numbers.write.parquet(str(tmp_path / "numbers" / "n.parquet"))
    catalog = DataCatalog(
        {
            "numbers": MemoryDataset(spark.read.parquet(str(tmp_path / "numbers" / "n.parquet"))),
            "params:provplug": MemoryDataset({"index": "always"}),
        }
    )
    flow = pipeline([node(_doubled, "numbers", "doubled", name="double")])
    store = tmp_path / "store.prov"
    run_like_a_session(ProvplugHooks(store=store), flow, catalog, tmp_path)
    answer = provplug.open(store).lineage(table="doubled", column="x", where="x = 4", method="csprov")
    assert [(v["table"], v["column"], v["value"]) for v in answer.lineage] == [("numbers", "x", 2)]
    assert "index" not in answer.stats  # answered from an index that covers the run


def test_a_spark_connect_run_is_refused_in_one_line_before_anything_is_staged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under SPARK_REMOTE the project's session would be a Spark Connect one (issue 27)."""
    from kedro.io import DataCatalog

    monkeypatch.setenv("SPARK_REMOTE", "sc://127.0.0.1:1")
    store = tmp_path / "store.prov"
    hooks = ProvplugHooks(store=store)
    with pytest.raises(CaptureError) as refused:
        hooks.before_pipeline_run({"project_path": str(tmp_path)}, Pipeline([]), DataCatalog())
    assert "Spark Connect" in str(refused.value) and "\n" not in str(refused.value)
    assert hooks.current is None and not store.exists()


def test_the_parameters_reduce_a_source_in_production_mode(spark: Any, tmp_path: Path) -> None:
    """provplug: {reduce: {numbers: keep x <= 2}, reduce_mode: production}: every
    row is computed, only the kept rows' results have lineage (issue 14)."""
    from kedro.io import DataCatalog, MemoryDataset

    (tmp_path / "numbers").mkdir()
    spark.createDataFrame([(1,), (2,), (3,), (4,)], "x int").coalesce(1).write.parquet(str(tmp_path / "numbers" / "n"))
    settings = {"reduce": {"numbers": "keep:where=x <= 2"}, "reduce_mode": "production"}
    catalog = DataCatalog(
        {
            "numbers": MemoryDataset(spark.read.parquet(str(tmp_path / "numbers" / "n"))),
            "params:provplug": MemoryDataset(settings),
        }
    )
    flow = pipeline([node(_doubled, "numbers", "result", name="double")])
    store = tmp_path / "store.prov"
    run_like_a_session(ProvplugHooks(store=store), flow, catalog, tmp_path)

    (manifest,) = provplug.open_store(store).runs()
    assert manifest["reduction"]["mode"] == "production"
    assert manifest["reduction"]["tables"]["numbers"]["params"] == {"where": "x <= 2"}
    opened = provplug.open(store)
    assert [v["value"] for v in opened.lineage(table="result", column="x", where="x = 4", method="rq").lineage] == [2]
    assert opened.lineage(table="result", column="x", where="x = 8", method="rq").lineage == []  # 4 was not kept


def _ops(store: Path) -> dict[str, dict[str, Any]]:
    return {o["name"]: o for o in provplug.open_store(store).ops().to_pylist()}


def test_a_node_over_pandas_fails_open_as_a_coarse_step_over_its_source(spark: Any, tmp_path: Path) -> None:
    """Default mode: the pandas node runs and its output is saved as without
    provplug; the free pandas input is a source table, the output a coarse
    step's table, each of its columns derived from every column of trips."""
    from kedro.io import DataCatalog, MemoryDataset

    trips = pd.DataFrame({"city": ["NY", "NY", "LA"], "km": [3, 4, 5]})
    catalog = DataCatalog({"trips": MemoryDataset(trips)})
    flow = pipeline([node(_count, "trips", "trip_counts", name="count_trips")])
    store = tmp_path / "store.prov"
    run_like_a_session(ProvplugHooks(store=store), flow, catalog, tmp_path)

    assert catalog.load("trip_counts").to_dict("records") == [{"city": "LA", "size": 1}, {"city": "NY", "size": 2}]
    op = _ops(store)["count_trips"]
    assert op["kind"] == "coarse" and op["triples"] == 0
    tables = {t["name"]: t for t in provplug.open_store(store).tables().to_pylist()}
    assert (tables["trips"]["origin"], tables["trips"]["rows"]) == ("source", 3)
    assert (tables["trip_counts"]["origin"], tables["trip_counts"]["rows"]) == ("output", 2)
    answer = provplug.open(store).lineage(table="trip_counts", column="size", where="city = 'NY'", method="rq")
    assert answer.lineage == []  # no cell-level triple: the node is pandas code
    (crossing,) = answer.coarse
    assert crossing["op"] == "count_trips" and crossing["rows"] == "all"
    assert "trips (pandas.core.frame.DataFrame)" in crossing["reason"]
    assert [(t["table"], t["columns"]) for t in crossing["continues_from"]] == [("trips", ["city", "km"])]


def _fit(numbers: Any) -> dict[str, float]:
    """A model: not a table."""
    return {"mean": float(numbers.toPandas()["x"].mean())}


def _score(model: dict[str, float], labels: pd.DataFrame) -> pd.DataFrame:
    return labels.assign(score=labels["w"] * model["mean"])


def test_a_dataset_that_is_not_a_table_stands_for_the_tables_behind_it(spark: Any, tmp_path: Path) -> None:
    """numbers (Spark) -> fit -> model (a dict) -> score (with labels) -> scores:
    scores derive from labels AND numbers, through the model."""
    from kedro.io import DataCatalog, MemoryDataset

    (tmp_path / "numbers").mkdir()
    spark.createDataFrame([(1,), (3,)], "x int").coalesce(1).write.parquet(str(tmp_path / "numbers" / "n"))
    catalog = DataCatalog(
        {
            "numbers": MemoryDataset(spark.read.parquet(str(tmp_path / "numbers" / "n"))),
            "labels": MemoryDataset(pd.DataFrame({"w": [10.0]})),
        }
    )
    flow = pipeline(
        [node(_fit, "numbers", "model", name="fit"), node(_score, ["model", "labels"], "scores", name="score")]
    )
    store = tmp_path / "store.prov"
    run_like_a_session(ProvplugHooks(store=store), flow, catalog, tmp_path)

    assert catalog.load("scores").to_dict("records") == [{"w": 10.0, "score": 20.0}]  # mean 2.0: the model as fit
    assert "fit" not in _ops(store)  # it wrote no table
    (crossing,) = provplug.open(store).lineage(table="scores", column="score", where="w = 10", method="rq").coarse
    assert crossing["op"] == "score"
    assert sorted((t["table"], t["columns"]) for t in crossing["continues_from"]) == [
        ("labels", ["w"]),
        ("numbers", ["x"]),
    ]


def _pandas_to_spark(rows: pd.DataFrame) -> pd.DataFrame:
    return rows.assign(y=rows["x"] * 10)


def _sparkly(frame: Any) -> Any:
    return frame.withColumn("z", frame["y"] + 1)


def test_a_spark_node_after_a_pandas_node_is_traced_cell_by_cell(spark: Any, tmp_path: Path) -> None:
    """A pandas output saved through a Spark dataset is stored as the catalog
    loads it, so the Spark node reading it is traced cell by cell."""
    from kedro.io import DataCatalog, MemoryDataset
    from kedro_datasets.spark import SparkDatasetV2  # saves pandas too, as the starters use it

    catalog = DataCatalog(
        {
            "rows": MemoryDataset(pd.DataFrame({"x": [1, 2]})),
            "tens": SparkDatasetV2(
                filepath=str(tmp_path / "tens"), file_format="parquet", save_args={"mode": "overwrite"}
            ),
        }
    )
    flow = pipeline([node(_pandas_to_spark, "rows", "tens", name="tens"), node(_sparkly, "tens", "plus", name="plus")])
    store = tmp_path / "store.prov"
    run_like_a_session(ProvplugHooks(store=store), flow, catalog, tmp_path)

    ops = _ops(store)
    assert (ops["tens"]["kind"], ops["plus"]["kind"]) == ("coarse", "builtin")
    opened = provplug.open(store)
    answer = opened.lineage(table="plus", column="z", where="z = 21", method="rq")
    assert sorted((v["table"], v["column"], v["value"]) for v in answer.lineage) == [("tens", "y", 20)]
    (crossing,) = answer.coarse
    assert crossing["op"] == "tens" and [(t["table"], t["columns"]) for t in crossing["continues_from"]] == [
        ("rows", ["x"])
    ]


def test_an_output_provplug_cannot_store_is_an_uncaptured_write_and_the_run_goes_on(spark: Any, tmp_path: Path) -> None:
    """Duplicate column names cannot be a table: the dataset is recorded as an
    uncaptured write; Kedro saves the node's output as without provplug."""
    from kedro.io import DataCatalog, MemoryDataset

    doubled = pd.DataFrame([[1, 2]], columns=["a", "a"])
    catalog = DataCatalog({"rows": MemoryDataset(pd.DataFrame({"a": [1]}))})
    flow = pipeline([node(lambda rows: doubled, "rows", "twice", name="twice")])
    store = tmp_path / "store.prov"
    run_like_a_session(ProvplugHooks(store=store), flow, catalog, tmp_path)

    assert catalog.load("twice").values.tolist() == [[1, 2]]
    (manifest,) = provplug.open_store(store).runs()
    (write,) = manifest["uncaptured_writes"]
    assert write["name"] == "twice" and "duplicate column names" in write["reason"]


def test_strict_is_read_from_the_parameters_and_must_be_a_boolean() -> None:
    from kedro.io import DataCatalog, MemoryDataset

    def strict(settings: Any) -> bool:
        return ProvplugHooks.configured_strict(DataCatalog({"params:provplug": MemoryDataset(settings)}))

    assert ProvplugHooks.configured_strict(DataCatalog()) is False
    assert strict({"store": "x.prov"}) is False
    assert strict({"strict": True}) is True
    with pytest.raises(CaptureError, match="provplug: strict must be true or false, not 'yes'"):
        strict({"strict": "yes"})


def _same_column_twice(numbers: Any) -> Any:
    return numbers.select("x", numbers["x"].alias("x"))


def _row_count(frame: Any) -> pd.DataFrame:
    return pd.DataFrame({"n": [frame.count()]})


def test_a_spark_output_provplug_cannot_store_still_links_what_reads_it(spark: Any, tmp_path: Path) -> None:
    """A Spark node whose output cannot be a table (a column name twice) is an
    uncaptured write; the node reading it depends on the tables behind it."""
    from kedro.io import DataCatalog, MemoryDataset

    (tmp_path / "numbers").mkdir()
    spark.createDataFrame([(1,), (3,)], "x int").coalesce(1).write.parquet(str(tmp_path / "numbers" / "n"))
    catalog = DataCatalog({"numbers": MemoryDataset(spark.read.parquet(str(tmp_path / "numbers" / "n")))})
    flow = pipeline(
        [node(_same_column_twice, "numbers", "twice", name="twice"), node(_row_count, "twice", "counted", name="count")]
    )
    store = tmp_path / "store.prov"
    run_like_a_session(ProvplugHooks(store=store), flow, catalog, tmp_path)

    assert catalog.load("counted").to_dict("records") == [{"n": 2}]
    (manifest,) = provplug.open_store(store).runs()
    assert [w["name"] for w in manifest["uncaptured_writes"]] == ["twice"]
    (crossing,) = provplug.open(store).lineage(table="counted", column="n", where="n = 2", method="rq").coarse
    assert crossing["op"] == "count"
    assert [(t["table"], t["columns"]) for t in crossing["continues_from"]] == [("numbers", ["x"])]
