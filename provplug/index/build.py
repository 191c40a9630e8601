"""``build_index``: components, ``G_wf``, splits, connected sets, published layout.

A full build reads all committed triples, so it gives exactly what indexing
from scratch gives: every id is a smallest value id and every split choice
depends only on the tables and triples, never on run order. When a live
generation exists and only runs were added (or whole incremental layers'
runs deleted) since, the build is incremental by default
(:mod:`provplug.index.incremental`): it answers the same, in work that
grows with the new runs; ``full=True`` (``provplug index --full``) rebuilds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import pyarrow.fs as pafs

from provplug.errors import ProvplugError
from provplug.index import DEFAULT_THETA, budget, integrity, layout
from provplug.index.algorithm import IndexEngine, InputStats, OutputDir, SetPlan
from provplug.index.generation import (
    PREVIOUS,
    build_lock,
    current_generation,
    index_root,
    new_generation_name,
    publish,
    remove_stale_generations,
)
from provplug.index.splits import (
    Split,
    SplitsError,
    build_splits,
    check_names,
    compile_splits,
    load_splits_file,
    splits_to_spec,
)
from provplug.index.workflow import TableCatalogue, WorkflowGraph, infer_workflow
from provplug.model import utc_now
from provplug.plugin.manager import Plugins, get_plugins
from provplug.plugin.protocols import Store
from provplug.progress import SILENT, Progress
from provplug.store import files as storefiles
from provplug.store.open import open_store

logger = logging.getLogger(__name__)  # what a build did: its input, its engine, the generation published
# 2: meta.json records the generation's files (provplug.index.integrity).
META_FORMAT = 2
# The engines' intermediates, inside the new generation; removed before it is published
# (the local engine's go to a temporary folder when the store is not on local disk).
SCRATCH = "_scratch"
LOCAL_SCRATCH = "local"

Engine = Literal["auto", "local", "spark"]


def build_index(
    store: Store | str | os.PathLike[str],
    theta: int = DEFAULT_THETA,
    splits: Sequence[Any] | str | os.PathLike[str] | None = None,
    spark: Any = None,
    engine: Engine = "auto",
    progress: Progress = SILENT,
    plugins: Plugins | None = None,
    memory_budget: int | None = None,
    full: bool = False,
) -> dict[str, Any]:
    """Build and publish the lineage index of ``store``; return its ``meta.json``.

    ``splits``: a ``--splits`` document (list) or the path of a JSON file;
    ``None`` asks the ``provplug_choose_splits`` hook (built-in: automatic).
    ``engine``: ``"local"`` (NumPy, out of core), ``"spark"`` (``spark`` or a
    local session), or ``"auto"``: local unless its per-value arrays would
    not fit ``memory_budget`` (bytes; default: 3/4 of the memory available
    now), which it finds out while counting the values.
    ``full``: rebuild from all triples even when the live generation could
    be extended incrementally (see the module's description; the Spark
    engine and an explicit ``splits`` always build in full).
    """
    store = open_store(store) if isinstance(store, (str, os.PathLike)) else store
    store.check()
    if not isinstance(theta, int) or isinstance(theta, bool) or theta < 1:
        raise ProvplugError(f"theta must be a positive number of nodes, not {theta!r}")
    if engine not in ("auto", "local", "spark"):
        raise ProvplugError(f"unknown index engine {engine!r} (auto, local, spark)")
    if memory_budget is not None and (not isinstance(memory_budget, int) or memory_budget < 1):
        raise ProvplugError(f"the memory budget must be a positive number of bytes, not {memory_budget!r}")
    spec = load_splits_file(os.fspath(splits)) if isinstance(splits, (str, os.PathLike)) else splits
    catalogue = TableCatalogue.from_store(store)
    if spec is not None:
        check_names(spec, catalogue.names)  # fail before anything is written
    runs = [m["run_id"] for m in store.runs()]
    had_index = store.fs.get_file_info(index_root(store)).type == pafs.FileType.Directory
    t0 = time.monotonic()
    logger.info(
        "indexing %s: %d runs, %d tables, theta %d, engine %s",
        store.uri,
        len(runs),
        len(catalogue.names),
        theta,
        engine,
    )
    try:
        with build_lock(store):
            if not full:
                meta = _incremental(store, catalogue, theta, spec, engine, progress)
                if meta is not None:
                    return meta
            choice = _EngineChoice(engine, spark, memory_budget or budget.default_budget())
            return _build(store, catalogue, runs, theta, spec, choice, progress, plugins, t0)
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
    choice: _EngineChoice,
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
        with _local_scratch(store, gen_dir) as scratch:
            engine, stats = _load(store, catalogue, progress, choice, name, scratch)
            workflow = infer_workflow(store, catalogue, [(a, b) for a, b, _ in stats.pair_triples])
            tree, source = _choose(spec, workflow, catalogue, stats, theta, plugins or get_plugins())
            progress.done(f"splits ({source}): {json.dumps(splits_to_spec(tree))}")
            plan = SetPlan(theta, compile_splits(tree, catalogue.names))
            counts = engine.build(plan, OutputDir(gen_dir, store.to_spark_path(gen_dir)))
        _drop_scratch(store, gen_dir)
        meta = _meta(name, engine.name, theta, tree, source, workflow, runs, counts, time.monotonic() - t0)
        _write_mapped(store, gen_dir, meta["buckets"], progress)
        meta["seconds"] = round(time.monotonic() - t0, 3)  # the mapped files are part of the build
        meta[integrity.FILES] = integrity.listing(store.fs, gen_dir)  # checked when a query opens it
        store.write_text(f"{gen_dir}/{layout.META}", json.dumps(meta, indent=1))
        publish(store, name)
    except BaseException:
        store.fs.delete_dir(gen_dir)
        raise
    progress.done(f"index {name} published", counts["sets"], "sets")
    logger.info(
        "published index generation %s of %s (%s engine, splits from %s): %d triples, %d sets, %.1f s",
        name,
        store.uri,
        engine.name,
        source,
        counts.get("triples", 0),
        counts["sets"],
        meta["seconds"],
    )
    return meta


def _incremental(
    store: Store, catalogue: TableCatalogue, theta: int, spec: Any, engine: str, progress: Progress
) -> dict[str, Any] | None:
    """The live generation extended with the runs committed since, published;
    None when the build must be full."""
    from provplug.index import incremental

    change = incremental.plan(store, current_generation(store), theta, spec, engine)
    return None if change is None else incremental.update(store, change, catalogue, progress)


def _write_mapped(store: Store, gen_dir: str, buckets: dict[str, int], progress: Progress) -> None:
    """On local disk, the generation's buckets once more as memory-mapped files
    sorted by lookup key (``mapped/``): cold queries then read only the pages
    of their sets. Written before the file listing, so the listing has them."""
    if not isinstance(store.fs, pafs.LocalFileSystem):
        return
    from provplug.index.mapped import write_mapped

    progress.update("writing mapped index files", 0, "bytes", force=True)
    written = write_mapped(store.fs, gen_dir, buckets)
    progress.done("wrote mapped index files", sum(written.values()), "bytes")


def _previous(store: Store) -> str | None:
    path = f"{index_root(store)}/{PREVIOUS}"
    if store.fs.get_file_info(path).type != pafs.FileType.File:
        return None
    return storefiles.read_text(store.fs, path).strip() or None


@dataclasses.dataclass(frozen=True)
class _EngineChoice:
    """The engine asked for, the Spark session if any, the local memory budget."""

    name: str
    spark: Any
    memory_budget: int


def _load(
    store: Store, catalogue: TableCatalogue, progress: Progress, choice: _EngineChoice, gen: str, scratch: str
) -> tuple[IndexEngine, InputStats]:
    """The engine that reads the triples, and what it read. ``auto`` starts
    locally with a limit on the values (what the budget holds); past it, Spark."""
    if choice.name != "spark":
        from provplug.index.local_engine import LocalEngine
        from provplug.index.spill import TooManyValues

        limit = None if choice.name == "local" else budget.value_limit(choice.memory_budget)
        local = LocalEngine(store, catalogue, progress, scratch, choice.memory_budget, limit)
        try:
            return local, local.load()
        except TooManyValues as exc:
            logger.info(
                "more than %d values exceed the local memory budget (%d bytes): indexing on Spark",
                exc.args[0],
                choice.memory_budget,
            )
            progress.done(
                f"more than {exc.args[0]:,} values: beyond the local memory budget "
                f"({choice.memory_budget / 2**30:.1f} GiB), indexing on Spark"
            )
    engine = _spark_engine(store, catalogue, progress, choice.spark, gen)
    return engine, engine.load()


@contextlib.contextmanager
def _local_scratch(store: Store, gen_dir: str) -> Iterator[str]:
    """A local folder for the local engine's spills: inside the new generation
    when the store is on local disk (removed with ``_scratch``), else a
    temporary folder."""
    if store.local:
        yield f"{gen_dir}/{SCRATCH}/{LOCAL_SCRATCH}"
        return
    with tempfile.TemporaryDirectory(prefix="provplug-index-") as folder:
        yield folder


def _spark_engine(store: Store, catalogue: TableCatalogue, progress: Progress, spark: Any, gen: str) -> IndexEngine:
    from provplug.index.spark_engine import SparkEngine

    if spark is None:
        from provplug.sparksession import local_spark

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
