"""The Spark index engine on stores whose triples span several files (so
several input partitions, whose local components must be merged), against
the local engine: identical index files, on the in-task path and with every
component forced through the level-synchronous Spark path."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from test_index import read_index
from test_index_properties import random_provenance, write_import
from test_index_spark import comparable


def multi_run_store(tmp: Path, seed: int, runs: int) -> tuple[Any, list[tuple[int, int, str]]]:
    """One random provenance graph imported as ``runs`` runs, its triples dealt
    at random: every run holds pieces of most components."""
    import provplug
    from provplug.importer import import_provenance

    rng = random.Random(seed)
    triples, table_of = random_provenance(rng, 5, 20)
    store = provplug.open_store(tmp / f"multi{seed}.prov")
    dealt: list[list[tuple[int, int, str]]] = [[] for _ in range(runs)]
    for t in triples:
        dealt[rng.randrange(runs)].append(t)
    for k, part in enumerate(dealt):
        folder = tmp / f"run{k}"
        folder.mkdir()
        on_part = {x for s, d, _ in part for x in (s, d)}
        import_provenance(store, *write_import(folder, part, {v: t for v, t in table_of.items() if v in on_part}))
    return store, triples


@pytest.mark.parametrize("forced", [False, True], ids=["in-task", "level-synchronous"])
def test_spark_engine_on_many_input_partitions_matches_the_local_engine(
    spark: Any, tmp_path: Path, monkeypatch: Any, forced: bool
) -> None:
    import pyarrow.parquet as pq

    from provplug.index import build_index, current_dir, spark_engine, sparkwcc
    from provplug.progress import Progress

    store, triples = multi_run_store(tmp_path, seed=5, runs=4)
    files = [store.to_spark_path(p) for p in store.run_paths("triples")]
    assert spark.read.parquet(*files).rdd.getNumPartitions() > 1  # the merge has work to do
    build_index(store, theta=8, engine="local")
    local = comparable(read_index(store))
    assert local["meta"]["counts"]["triples"] == len(triples)
    assert any("." in (json.loads(r)["split"] or "") for r in local["sets"])  # sub-splits were used

    if forced:
        monkeypatch.setattr(spark_engine, "COMPONENT_TASK_LIMIT", 0)
        monkeypatch.setattr(sparkwcc, "TASK_EDGE_LIMIT", 0)
    lines: list[str] = []

    class Recorder(Progress):
        def done(self, stage: str, done: int | None = None, unit: str = "items") -> None:
            lines.append(stage)

    meta = build_index(store, theta=8, engine="spark", spark=spark, progress=Recorder(enabled=False))
    assert meta["engine"] == "spark"
    assert comparable(read_index(store)) == local
    assert any("star round" in line for line in lines) == forced
    for part in Path(current_dir(store), "value_sets").glob("bucket=*/*.parquet"):  # sorted, as the layout says
        ids = pq.read_table(part).column("value_id").to_pylist()
        assert ids == sorted(ids)
