"""The Spark index engine writes ONE file per bucket, as the local engine
does, however many tasks wrote rows for the bucket (issue 27: on object
storage every file costs requests; it used to write one per task and bucket)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_index import read_index
from test_index_properties import write_import
from test_index_spark import comparable

# One-triple components A -> B: they hash to every index task, and their sets to every bucket.
COMPONENTS = 600


def _many_small_components(tmp: Path) -> Any:
    import provplug
    from provplug.ingest.importer import import_provenance

    store = provplug.open_store(tmp / "many.prov")
    triples = [(2 * i + 1, 2 * i + 2, "f") for i in range(COMPONENTS)]
    tables = {v: "A" if v % 2 else "B" for s, d, _ in triples for v in (s, d)}
    import_provenance(store, *write_import(tmp, triples, tables))
    return store


def _data_files(generation: Path) -> dict[str, int]:
    """Parquet files per dataset folder of a generation (``mapped/`` aside: local disk only)."""
    counts: dict[str, int] = {}
    for path in generation.rglob("*.parquet"):
        relative = path.relative_to(generation).parts
        if relative[0] != "mapped":
            counts[relative[0]] = counts.get(relative[0], 0) + 1
    return counts


def test_spark_engine_writes_one_file_per_bucket_like_the_local_engine(spark: Any, tmp_path: Path) -> None:
    from provplug.index import build_index, current_dir
    from provplug.index.spark_output import BUCKETED
    from provplug.progress import Progress

    store = _many_small_components(tmp_path)
    build_index(store, engine="local")
    local, local_files = comparable(read_index(store)), _data_files(Path(current_dir(store)))
    stages: list[str] = []

    class Recorder(Progress):
        def done(self, stage: str, done: int | None = None, unit: str = "items") -> None:
            stages.append(stage)

    build_index(store, engine="spark", spark=spark, full=True, progress=Recorder(enabled=False))
    generation = Path(current_dir(store))
    assert any(s.startswith("merged buckets several tasks wrote") for s in stages), stages  # there was work
    for name, spec in BUCKETED.items():
        for k in range(spec.buckets):
            assert len(list((generation / name / f"bucket={k}").glob("*.parquet"))) == 1, (name, k)
    assert _data_files(generation) == local_files
    assert comparable(read_index(store)) == local
