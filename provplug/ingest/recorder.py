""":class:`StagedRun`: the :class:`~provplug.plugin.protocols.RunRecorder` over a
store transaction.

It is the only code that knows where a run's files go: ``rows/<table>/``,
``triples/`` and a scratch directory in the run's staging area (see
:mod:`provplug.store.parquet`). It hands out :class:`~provplug.plugin.writers.Destination`
objects and writers on them, and when the run ends (:meth:`StagedRun.finish`)
removes the scratch files, drops rows the run does not keep, and records the
datasets it handed out.

:class:`provplug.ingest.capture.ActiveRun` is a ``StagedRun`` with the capture
hooks; an import stages through one directly.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from provplug.errors import CaptureError
from provplug.model import CoarseEdge, OpInfo, TableInfo, TableOrigin, UncapturedWrite, utc_now
from provplug.plugin.protocols import Store, Transaction
from provplug.rowrules import LINEAGE, RULES, OpRowRules, rules_text

if TYPE_CHECKING:
    from provplug.location import LocationEdge, RowRuns
    from provplug.plugin.writers import Destination, RowLineageWriter, RowsWriter, TripleWriter
    from provplug.store.versions import LinkedRead, WrittenVersion

# The writers (pyarrow) load when a run first writes, not when a pipeline
# module defines its @provplug.step functions.

ROWS = "rows"
TRIPLES = "triples"
SCRATCH = "_scratch"
# Names of the store's own files in a run's directory (see provplug.store.parquet).
# Location-based lineage edges (provplug.location.LOCATIONS, asserted equal by its tests).
LOCATIONS = "locations.json"
COARSE = "coarse.json"  # coarse edges (provplug.store.coarse.COARSE)
VERSIONS = "versions.json"  # dataset versions written and read (provplug.store.versions.VERSIONS)
UNCAPTURED = "uncaptured_writes"  # the manifest's list of writes the run could not capture
RESERVED = frozenset(
    {ROWS, TRIPLES, "tables.parquet", "ops.parquet", "values.parquet", LINEAGE, RULES, LOCATIONS, COARSE, VERSIONS}
)
logger = logging.getLogger(__name__)


class StagedRun:
    """A run being staged in ``store`` through ``txn`` (implements RunRecorder)."""

    def __init__(
        self,
        store: Store[Transaction],
        txn: Transaction,
        *,
        store_rows: bool = True,
        location_lineage: bool = True,
        strict: bool = False,
    ) -> None:
        self.store = store
        self.txn = txn
        self._store_rows = store_rows
        self._location_lineage = location_lineage
        self._strict = strict
        self._coarse_edges: list[CoarseEdge] = []  # written as coarse.json when the run finishes
        self._uncaptured: list[UncapturedWrite] = []
        self._names: set[str] = set()
        self._used: set[str] = set()  # top-level directories handed out
        self._sources: dict[str, TableInfo] = {}  # the source tables recorded, by name
        self._kept_rows: dict[int, Any] | None = None  # production-mode reduction: source table id -> kept rows
        self._row_rules: dict[int, OpRowRules] = {}  # output table id -> its op's row rules
        self._location_edges: list[LocationEdge] = []  # written as locations.json when the run finishes
        self._identities: dict[str, tuple[str, str]] = {}  # table name -> (namespace, dataset)
        self._written: dict[tuple[str, str], TableInfo] = {}  # identity -> the run's last output table of it
        self._linked: list[LinkedRead] = []  # sources that are versions earlier runs wrote

    # -- identity --------------------------------------------------------------
    @property
    def run_id(self) -> str:
        return self.txn.run_id

    @property
    def store_rows(self) -> bool:
        return self._store_rows

    @property
    def location_lineage(self) -> bool:
        return self._location_lineage

    @property
    def strict(self) -> bool:
        return self._strict

    @property
    def store_uri(self) -> str:
        return str(self.store.uri)

    # -- reserve ---------------------------------------------------------------
    def new_table(self, name: str, origin: TableOrigin, columns: Sequence[str]) -> TableInfo:
        """Reserve a table id for ``name``; the adapter records it once written."""
        if name in self._names:
            raise CaptureError(f"table {name!r} is produced twice in one run")
        self._names.add(name)
        return TableInfo(self.txn.reserve("tables"), name, self.run_id, origin, tuple(columns))

    def new_op_id(self) -> int:
        return self.txn.reserve("ops")

    # -- record ----------------------------------------------------------------
    def identify_table(self, name: str, namespace: str, dataset: str) -> None:
        self._identities[name] = (namespace, dataset)

    def record_table(self, table: TableInfo) -> None:
        if table.namespace is None and table.name in self._identities:
            namespace, dataset = self._identities[table.name]
            table = dataclasses.replace(table, namespace=namespace, dataset=dataset)
        if table.origin == "source":
            self._sources[table.name] = table
        elif table.origin == "output" and table.namespace is not None and table.dataset is not None:
            # The run's last write of a dataset is the version it leaves: tables are
            # reserved in write order (and may be recorded in another order).
            earlier = self._written.get((table.namespace, table.dataset))
            if earlier is None or earlier.table_id < table.table_id:
                self._written[(table.namespace, table.dataset)] = table
        self.txn.add_table(table)

    def identity_of(self, name: str) -> tuple[str, str] | None:
        """The dataset (namespace, name) the run's table ``name`` is, if recorded."""
        return self._identities.get(name)

    # -- versions (provplug.store.versions) ---------------------------------------
    def latest_version(self, name: str, identity: tuple[str, str] | None = None) -> tuple[str, WrittenVersion] | None:
        """(run id, version) of the latest committed write of the dataset the
        table ``name`` is (its recorded identity, else ``identity``); None
        when it has none, or no run wrote it."""
        from provplug.store.versions import latest_write

        identity = self._identities.get(name, identity)
        return None if identity is None else latest_write(self.store, *identity)

    def link_version(
        self, table: TableInfo, files: Sequence[str], identity: tuple[str, str] | None = None
    ) -> RowRuns | None:
        """Store the source ``table``, read from ``files``, as the version of
        its dataset an earlier run wrote, linked to it; its row numbers, or
        None: a new source version (:mod:`provplug.ingest.linking`)."""
        from provplug.ingest.linking import link_version

        return link_version(self, table, files, identity)

    def record_linked_read(self, read: LinkedRead) -> None:
        """The source ``read.table`` is the version run ``read.run_id`` wrote."""
        self._linked.append(read)

    @property
    def sources(self) -> Mapping[str, TableInfo]:
        """The source tables recorded so far, by name."""
        return dict(self._sources)

    # -- reduction (provplug.reduce) ---------------------------------------------
    def record_reduction(self, reduction: Mapping[str, Any]) -> None:
        """Record the run's reduction (mode and, per table, technique,
        parameters and seed) in its manifest."""
        annotations = getattr(self.txn, "annotations", None)
        if not isinstance(annotations, dict):
            raise CaptureError(f"the store {self.store.uri} cannot record a reduction on a run")
        annotations["reduction"] = dict(reduction)

    # -- context (provplug.ingest.runcontext) ----------------------------------------------
    def record_context(self, context: Mapping[str, Any]) -> None:
        """Record how the run was started (entry point, git commit, label,
        tags, ...: see :mod:`provplug.ingest.runcontext`) in its manifest."""
        annotations = getattr(self.txn, "annotations", None)
        if not isinstance(annotations, dict):
            raise CaptureError(f"the store {self.store.uri} cannot record a run's context")
        annotations.update(context)

    def keep_source_rows(self, kept: Mapping[int, Any]) -> None:
        """Production-mode reduction: when the run finishes, keep only the
        triples on paths from these rows (source table id -> sorted row
        numbers, an int64 array) and from every cell of the other sources."""
        self._kept_rows = dict(kept)

    def record_op(self, op: OpInfo) -> None:
        self.txn.add_op(op)

    def finish_op(self, op_id: int, *, triples: int, finished: dt.datetime | None = None) -> OpInfo:
        """Complete the staged op ``op_id`` (engines that write lazily learn
        an op's triple count and end time after the step)."""
        for i, staged in enumerate(self.txn.ops):
            if staged.op_id == op_id:
                done = dataclasses.replace(staged, triples=triples, finished=finished or utc_now())
                self.txn.ops[i] = done
                return done
        raise CaptureError(f"op {op_id} is not staged in this run")

    # -- write -----------------------------------------------------------------
    def _root(self) -> Destination:
        from provplug.plugin.writers import Destination

        return Destination(self.store.uri, self.txn.path(), self.txn.spark_path())

    def _destination(self, top: str, *parts: str) -> Destination:
        self._used.add(top)
        destination = self._root().child(top, *parts)
        destination.create()
        return destination

    def rows_destination(self, table_id: int) -> Destination:
        return self._destination(ROWS, str(table_id))

    def triples_destination(self) -> Destination:
        return self._destination(TRIPLES)

    def row_lineage_destination(self) -> Destination:
        """Where row-lineage records go (:mod:`provplug.ingest.rowlineage`); Spark
        tasks write into it with :class:`~provplug.plugin.writers.RowLineageWriter`."""
        return self._destination(LINEAGE)

    def row_lineage_writer(self, stem: str | None = None) -> RowLineageWriter:
        from provplug.plugin.writers import RowLineageWriter

        return RowLineageWriter(self.row_lineage_destination(), stem)

    def record_row_rules(self, rules: OpRowRules) -> None:
        """What the row lineage of ``rules.out_table`` means; written with the run."""
        if rules.out_table in self._row_rules:
            raise CaptureError(f"row rules for table {rules.out_table} recorded twice in one run")
        self._row_rules[rules.out_table] = rules

    def record_location_edge(self, edge: LocationEdge) -> None:
        """Store ``edge`` (:mod:`provplug.location`) in place of the triples it
        stands for; the run's edges are written once, as ``locations.json``."""
        if any(
            (e.op, e.src_table, e.dst_table) == (edge.op, edge.src_table, edge.dst_table) for e in self._location_edges
        ):
            raise CaptureError(f"op {edge.op}: a location edge {edge.src_table} -> {edge.dst_table} recorded twice")
        self._location_edges.append(edge)

    def record_coarse_edge(self, edge: CoarseEdge) -> None:
        """What an output of a coarse step may derive from (see :class:`CoarseEdge`)."""
        if any(
            (e.op, e.src_table, e.dst_table) == (edge.op, edge.src_table, edge.dst_table) for e in self._coarse_edges
        ):
            raise CaptureError(f"op {edge.op}: a coarse edge {edge.src_table} -> {edge.dst_table} recorded twice")
        logger.info(
            "op %d: output table %d is coarse on table %d: %s", edge.op, edge.dst_table, edge.src_table, edge.reason
        )
        self._coarse_edges.append(edge)

    @property
    def coarse_edges(self) -> Sequence[CoarseEdge]:
        """The coarse edges recorded so far in this run."""
        return tuple(self._coarse_edges)

    def forget_tables(self, table_ids: Collection[int]) -> None:
        """Drop what the run staged for tables whose capture was abandoned
        (fail open): the ops writing them, their row rules, their coarse edges."""
        gone = set(table_ids)
        self.txn.ops[:] = [o for o in self.txn.ops if not gone & set(o.outputs)]
        for table in gone:
            self._row_rules.pop(table, None)
        self._coarse_edges = [e for e in self._coarse_edges if e.dst_table not in gone]
        self._location_edges = [e for e in self._location_edges if e.dst_table not in gone]
        self._written = {k: t for k, t in self._written.items() if t.table_id not in gone}
        self._linked = [r for r in self._linked if r.table not in gone]

    def record_uncaptured_write(self, name: str, reason: str) -> None:
        """A write the run saw and could not capture (recorded in its manifest)."""
        logger.warning("provplug: the write of %s was not captured: %s", name, reason)
        self._uncaptured.append(UncapturedWrite(name, reason))
        annotations = getattr(self.txn, "annotations", None)
        if isinstance(annotations, dict):
            annotations[UNCAPTURED] = [{"name": w.name, "reason": w.reason} for w in self._uncaptured]

    @property
    def uncaptured_writes(self) -> Sequence[UncapturedWrite]:
        return tuple(self._uncaptured)

    @property
    def location_edges(self) -> Sequence[LocationEdge]:
        """The location edges recorded so far in this run."""
        return tuple(self._location_edges)

    def scratch_destination(self, *parts: str) -> Destination:
        return self._destination(SCRATCH, *parts)

    def rows_writer(self, table_id: int, stem: str | None = None) -> RowsWriter:
        from provplug.plugin.writers import RowsWriter

        return RowsWriter(self.rows_destination(table_id), stem)

    def triples_writer(self, stem: str | None = None) -> TripleWriter:
        from provplug.plugin.writers import TripleWriter

        return TripleWriter(self.triples_destination(), stem)

    def copy_positional_rows(self, table_id: int, files: Iterable[tuple[Any, str, int]]) -> int:
        from provplug.plugin.writers import copy_positional

        return copy_positional(self.rows_destination(table_id), files)

    def attach_text(self, name: str, text: str) -> None:
        if not name or "/" in name or name.startswith((".", "_")) or name in RESERVED:
            raise ValueError(f"{name!r} cannot name a file attached to a run")
        self._root().write_text(name, text)
        self.txn.mark_dataset(name)

    # -- end -------------------------------------------------------------------
    def finish(self) -> None:
        """The adapter is done and the run is about to commit: remove the
        scratch directory, drop the rows when the run keeps none, and record
        the ``rows`` and ``triples`` datasets handed out."""
        root = self._root()
        if self._kept_rows is not None and TRIPLES in self._used:
            self._reduce_triples()
        if SCRATCH in self._used:
            root.child(SCRATCH).delete()
        if ROWS in self._used:
            if self.store_rows:
                self.txn.mark_dataset(ROWS)
            else:  # written only for the adapter's own use while the run lasted
                root.child(ROWS).delete()
        if TRIPLES in self._used:
            self.txn.mark_dataset(TRIPLES)
        if LINEAGE in self._used:
            self.txn.mark_dataset(LINEAGE)
        if self._row_rules:
            root.write_text(RULES, rules_text(self._row_rules.values()))
            self.txn.mark_dataset(RULES)
        if self._location_edges:
            from provplug.store.locations import write_locations

            write_locations(root, self._location_edges)
            self.txn.mark_dataset(LOCATIONS)
        if self._coarse_edges:
            from provplug.store.coarse import write_coarse

            write_coarse(root, self._coarse_edges)
            self.txn.mark_dataset(COARSE)
        self._write_versions(root)

    def _write_versions(self, root: Destination) -> None:
        """Fingerprint the datasets the run wrote (their files as the run
        leaves them), with the reads linked to earlier runs' versions. Only a
        run that keeps its rows can be linked to: a later read reuses them."""
        from provplug.store.versions import RunVersions, WrittenVersion, fingerprint, write_versions

        writes = []
        # An uncaptured write may have replaced a captured one's files: no fingerprint is then trusted.
        linkable = self.store_rows and not self._uncaptured
        for (namespace, dataset), table in self._written.items() if linkable else ():
            stamps = fingerprint(namespace, dataset)
            if stamps:
                writes.append(WrittenVersion(table.table_id, namespace, dataset, stamps))
        if writes or self._linked:
            write_versions(root, RunVersions(self.run_id, tuple(writes), tuple(self._linked)))
            self.txn.mark_dataset(VERSIONS)

    def _reduce_triples(self) -> None:
        """Filter the staged triples to the kept paths; each op's count follows."""
        from provplug.reduce.production import filter_triples

        assert self._kept_rows is not None
        logger.info("run %s: keeping the triples on paths from the kept rows", self.run_id)
        kept = filter_triples(
            self.triples_destination(),
            list(self.txn.ops),
            self._kept_rows,
            {t.table_id for t in self._sources.values()},
        )
        for i, op in enumerate(self.txn.ops):
            if op.op_id in kept:
                self.txn.ops[i] = dataclasses.replace(op, triples=kept[op.op_id])
