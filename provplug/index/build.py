"""``build_index``: components, ``G_wf``, splits, connected sets, published layout.

The index is always rebuilt from all committed triples (no incremental
merge), so indexing after new runs or imports gives exactly what indexing
from scratch gives: every id is a smallest value id and every split choice
depends only on the tables and triples, never on run order.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from typing import Any, Literal

import pyarrow.fs as pafs

from .. import storefiles
from ..errors import ProvplugError
from ..model import utc_now
from ..plugins import Plugins, get_plugins, open_store
from ..progress import SILENT, Progress
from ..protocols import Store
from . import DEFAULT_THETA, integrity, layout
from .algorithm import IndexEngine, InputStats, OutputDir, SetPlan
from .generation import (
    PREVIOUS,
    build_lock,
    current_generation,
    index_root,
    new_generation_name,
    publish,
    remove_stale_generations,
)
from .splits import Split, SplitsError, build_splits, check_names, compile_splits, load_splits_file, splits_to_spec
from .workflow import TableCatalogue, WorkflowGraph, infer_workflow

# engine="auto" indexes on one machine up to this many triples (~1.5 GB of arrays).
LOCAL_MAX_TRIPLES = 30_000_000
# 2: meta.json records the generation's files (provplug.index.integrity).
META_FORMAT = 2
# The Spark engine's intermediates, inside the new generation; removed before it is published.
SCRATCH = "_scratch"

Engine = Literal["auto", "local", "spark"]


def build_index(
    store: Store | str | os.PathLike[str],
    theta: int = DEFAULT_THETA,
    splits: Sequence[Any] | str | os.PathLike[str] | None = None,
    spark: Any = None,
    engine: Engine = "auto",
    progress: Progress = SILENT,
    plugins: Plugins | None = None,
) -> dict[str, Any]:
    """Build and publish the lineage index of ``store``; return its ``meta.json``.

    ``splits``: a ``--splits`` document (list) or the path of a JSON file;
    ``None`` asks the ``provplug_choose_splits`` hook (built-in: automatic).
    ``engine``: ``"local"`` (NumPy), ``"spark"`` (``spark`` or a local
    session), or ``"auto"`` (local up to ``LOCAL_MAX_TRIPLES`` triples).
    """
    store = open_store(store) if isinstance(store, (str, os.PathLike)) else store
    store.check()
    if not isinstance(theta, int) or isinstance(theta, bool) or theta < 1:
        raise ProvplugError(f"theta must be a positive number of nodes, not {theta!r}")
    if engine not in ("auto", "local", "spark"):
        raise ProvplugError(f"unknown index engine {engine!r} (auto, local, spark)")
    spec = load_splits_file(os.fspath(splits)) if isinstance(splits, (str, os.PathLike)) else splits
    catalogue = TableCatalogue.from_store(store)
    if spec is not None:
        check_names(spec, catalogue.names)  # fail before anything is written
    runs = [m["run_id"] for m in store.runs()]
    if engine == "auto":
        engine = "local" if store.stats()["triples"] <= LOCAL_MAX_TRIPLES else "spark"
    had_index = store.fs.get_file_info(index_root(store)).type == pafs.FileType.Directory
    t0 = time.monotonic()
    try:
        with build_lock(store):
            return _build(store, catalogue, runs, theta, spec, spark, engine, progress, plugins, t0)
    except BaseException:
        if not had_index:
            store.fs.delete_dir(index_root(store))
        raise


def _build(
    store: Store,
    catalogue: TableCatalogue,
    runs: list[str],
    theta: int,
    spec: Any,
    spark: Any,
    engine_name: str,
    progress: Progress,
    plugins: Plugins | None,
    t0: float,
) -> dict[str, Any]:
    live = current_generation(store)
    remove_stale_generations(store, keep={live, _previous(store)})  # leftovers of crashed builds
    name = new_generation_name()
    gen_dir = store.path(layout.INDEX_DIR, name)
    store.fs.create_dir(gen_dir, recursive=True)
    try:
        engine = _make_engine(store, catalogue, progress, engine_name, spark, name)
        stats = engine.load()
        workflow = infer_workflow(store, catalogue, [(a, b) for a, b, _ in stats.pair_triples])
        tree, source = _choose(spec, workflow, catalogue, stats, theta, plugins or get_plugins())
        progress.done(f"splits ({source}): {json.dumps(splits_to_spec(tree))}")
        plan = SetPlan(theta, compile_splits(tree, catalogue.names))
        counts = engine.build(plan, OutputDir(gen_dir, store.to_spark_path(gen_dir)))
        _drop_scratch(store, gen_dir)
        meta = _meta(name, engine_name, theta, tree, source, workflow, runs, counts, time.monotonic() - t0)
        meta[integrity.FILES] = integrity.listing(store.fs, gen_dir)  # checked when a query opens it
        store.write_text(f"{gen_dir}/{layout.META}", json.dumps(meta, indent=1))
        publish(store, name)
    except BaseException:
        store.fs.delete_dir(gen_dir)
        raise
    progress.done(f"index {name} published", counts["sets"], "sets")
    return meta


def _previous(store: Store) -> str | None:
    path = f"{index_root(store)}/{PREVIOUS}"
    if store.fs.get_file_info(path).type != pafs.FileType.File:
        return None
    return storefiles.read_text(store.fs, path).strip() or None


def _make_engine(
    store: Store, catalogue: TableCatalogue, progress: Progress, engine: str, spark: Any, gen: str
) -> IndexEngine:
    if engine == "local":
        from .local_engine import LocalEngine

        return LocalEngine(store, catalogue, progress)
    from .spark_engine import SparkEngine

    if spark is None:
        from ..sparksession import local_spark

        spark = local_spark("provplug-index")
    scratch = store.path(layout.INDEX_DIR, gen, SCRATCH)
    return SparkEngine(store, catalogue, progress, spark, OutputDir(scratch, store.to_spark_path(scratch)))


def _drop_scratch(store: Store, gen_dir: str) -> None:
    scratch = f"{gen_dir}/{SCRATCH}"
    if store.fs.get_file_info(scratch).type == pafs.FileType.Directory:
        store.fs.delete_dir(scratch)


def chooser_stats(stats: InputStats, catalogue: TableCatalogue, theta: int) -> dict[str, Any]:
    """What the ``provplug_choose_splits`` hook receives as ``stats``."""
    names = catalogue.names
    return {
        "theta": theta,
        "triples": stats.triples,
        "values": stats.values,
        "table_values": {names[c]: n for c, n in sorted(stats.table_values.items())},
        "pair_triples": [(names[a], names[b], n) for a, b, n in stats.pair_triples],
    }


def _choose(
    spec: Any, workflow: WorkflowGraph, catalogue: TableCatalogue, stats: InputStats, theta: int, plugins: Plugins
) -> tuple[list[Split], str]:
    if spec is not None:
        return build_splits(spec, workflow), "user"
    answer = plugins.choose_splits(workflow, chooser_stats(stats, catalogue, theta))
    if answer is None:
        raise SplitsError("no split chooser answered (is the built-in provplug.index.autosplit blocked?)")
    try:
        return build_splits(answer, workflow), "auto"
    except SplitsError as exc:
        raise SplitsError(f"the split chooser plugin gave unusable splits: {exc}") from exc


def _split_tree(splits: Sequence[Split]) -> list[dict[str, Any]]:
    return [{"name": s.name, "tables": list(s.tables), "children": _split_tree(s.children)} for s in splits]


def _meta(
    name: str,
    engine: str,
    theta: int,
    tree: list[Split],
    source: str,
    workflow: WorkflowGraph,
    runs: list[str],
    counts: dict[str, int],
    seconds: float,
) -> dict[str, Any]:
    return {
        "format": META_FORMAT,
        "generation": name,
        "created": utc_now().isoformat(),
        "engine": engine,
        "theta": theta,
        "splits": splits_to_spec(tree),
        "split_tree": _split_tree(tree),
        "splits_source": source,
        "workflow": {"tables": list(workflow.tables), "edges": [list(e) for e in workflow.edges]},
        "runs": runs,
        "counts": counts,
        "buckets": {
            "triples": layout.TRIPLE_BUCKETS,
            "setdeps": layout.SETDEP_BUCKETS,
            "rsetdeps": layout.SETDEP_BUCKETS,
            "value_sets": layout.VALUE_BUCKETS,
        },
        "seconds": round(seconds, 3),
    }
