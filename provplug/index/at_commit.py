"""Index a run as it commits: ``provplug.capture(..., index="auto")``.

A built-in plugin on ``provplug_run_finished``. With ``index="always"`` every
committed run is indexed at once; with ``index="auto"`` only a small one
(at most ``PROVPLUG_AUTO_INDEX_TRIPLES`` triples, default 1,000,000) into a
store whose index can take it incrementally (or a small store without one) --
a big first build is left to ``provplug index``, off the pipeline's path. The
default (no ``index``) indexes nothing at commit.

The run is committed before this runs: a failure to index is a warning that
says to run ``provplug index``, never a failed capture.
"""

from __future__ import annotations

import logging
import os

import pyarrow.compute as pc
import pyarrow.fs as pafs

from provplug.errors import ProvplugError
from provplug.model import RunInfo
from provplug.plugin.markers import hookimpl

AUTO_TRIPLES_ENV = "PROVPLUG_AUTO_INDEX_TRIPLES"
DEFAULT_AUTO_TRIPLES = 1_000_000
MODES = ("auto", "always")
logger = logging.getLogger(__name__)


def auto_limit() -> int:
    text = os.environ.get(AUTO_TRIPLES_ENV, "")
    if not text:
        return DEFAULT_AUTO_TRIPLES
    if not text.isdigit():
        raise ProvplugError(f"{AUTO_TRIPLES_ENV} must be a non-negative number of triples, not {text!r}")
    return int(text)


@hookimpl
def provplug_run_finished(run: RunInfo, error: BaseException | None) -> None:
    if error is not None or run.index is None or run.kind != "capture":
        return
    try:
        index_committed(run)
    except Exception as failed:  # the run is committed: say so, and how to index it
        logger.warning(
            "provplug: run %s is committed but was not indexed (%s): run `provplug index %s`",
            run.number or run.run_id,
            failed,
            run.store,
        )


def index_committed(run: RunInfo) -> None:
    """Index ``run`` (just committed) as its ``index`` mode says."""
    from provplug.index.build import build_index
    from provplug.index.generation import index_root
    from provplug.store.open import open_store

    store = open_store(run.store)
    if run.index == "auto":
        limit = auto_limit()
        triples = store.ops().select(["run_id", "triples"])
        mine = triples.filter(pc.equal(triples.column("run_id"), run.run_id))
        own = int(pc.sum(mine.column("triples")).as_py() or 0)
        indexed = store.fs.get_file_info(index_root(store)).type == pafs.FileType.Directory
        whole = own if indexed else int(pc.sum(triples.column("triples")).as_py() or 0)
        if max(own, whole) > limit:
            logger.info(
                "run %s not indexed at commit: %s triples to index, more than %s (%s); run `provplug index %s`",
                run.number or run.run_id,
                f"{max(own, whole):,}",
                f"{limit:,}",
                AUTO_TRIPLES_ENV,
                run.store,
            )
            return
    meta = build_index(store, engine="local")
    logger.info("run %s indexed at commit (generation %s)", run.number or run.run_id, meta.get("generation"))
