"""The interfaces between provplug and its plugins. Structural
(``typing.Protocol``): a plugin needs no provplug base class, only these
attributes and methods.

* :class:`CaptureAdapter` — an adapter plugin (Spark, Beam, ...);
  ``provplug.capture`` picks it and opens one :class:`AdapterSession` per run.
* :class:`RunRecorder` — the capture run, as the adapter's session sees it:
  implemented by provplug (:class:`provplug.ingest.capture.ActiveRun`).
* :class:`WriteInterceptor` — an adapter's capture of an engine's writes
  made by code that does not know provplug, driving a :class:`CaptureRun`.
* :class:`Store` and its :class:`Transaction` — a store-backend plugin
  (built-in: the Parquet directory store); used by capture, import, the
  index and queries.
* :class:`WorkflowGraph` — built by the index
  (:class:`provplug.index.workflow.WorkflowGraph`), read by a split-chooser
  plugin.
* :class:`QueryMethod` and the :class:`MethodContext` it is given — a
  query-method plugin (built-in: rq, ccprov, csprov, auto); it returns the
  records of :mod:`provplug.plugin.query_results`.
* :class:`ExportFormat` and the :class:`ExportSelection` it renders — an
  export-format plugin (built-in: prov-json, prov-n, openlineage).
* :class:`Answer` (and :class:`PicturedAnswer`) — what every command's
  answer offers the command line: a JSON document, a text rendering and,
  for some, a picture.

This module sits at the bottom of the package: it imports no provplug
module at run time, and for type checkers only the plain records of
:mod:`provplug.model`, :mod:`provplug.rowrules` and the rest of
:mod:`provplug.plugin`, so that every layer (the store, the index, queries,
adapters) can name these types without an import cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from provplug.model import OpInfo, StepInfo, TableInfo, TableOrigin
    from provplug.plugin.query_results import Direction, MethodResult
    from provplug.plugin.writers import Destination, RowLineageWriter, RowsWriter, TripleWriter
    from provplug.rowrules import OpRowRules


# -- capture -----------------------------------------------------------------------


@runtime_checkable
class CaptureAdapter(Protocol):
    """Captures the steps of one engine's pipelines. An adapter that can apply
    provenance reductions to its sources (``capture(..., reduce=...)``) says
    so with a class attribute ``reduces = True`` (absent: it cannot)."""

    name: str

    def accepts(self, engine: object) -> bool:
        """True if ``engine`` (e.g. a SparkSession) is this adapter's."""
        ...

    def open(self, engine: object, run: RunRecorder) -> AdapterSession:
        """Start capturing one run: ``run`` stages its tables, ops, rows and triples."""
        ...


class AdapterSession(Protocol):
    """One adapter's state for one capture run."""

    def source(self, data: Any, name: str) -> Any:
        """Register ``data`` as source table ``name``; return the data to use
        downstream (possibly wrapped so later steps can trace it)."""
        ...

    def run_step(self, step: StepInfo, func: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        """Run ``func(*args, **kwargs)`` as ``step``, stage its outputs' rows,
        its op and its triples, and return its result as ``func`` would."""
        ...

    def close(self, error: BaseException | None) -> None:
        """The run ends (``error`` is set when it failed): wait for any
        writing still under way; on success record what is still pending."""
        ...


@runtime_checkable
class RunRecorder(Protocol):
    """What a capture adapter may do with the run it captures.

    Everything is staged: nothing is visible in the store until the run
    commits, and a failed run leaves no trace (its ids are released, its
    files removed). The recorder owns the run's layout: adapters never name
    a path of the store, they ask for a :class:`~provplug.plugin.writers.Destination`
    (or a writer on one), and the recorder records the ``rows`` and
    ``triples`` datasets of the destinations it handed out when the run
    ends. A run that keeps no rows (``store_rows`` false) drops the rows
    written then, so an adapter may write rows it needs while the run lasts.

    Typical use by an adapter's session::

        table = run.new_table("Orders", "output", columns)       # reserve
        op_id = run.new_op_id()
        with run.rows_writer(table.table_id) as rows:            # write
            rows.write(arrow_table, row_numbers)
        with run.triples_writer() as triples:
            triples.write(src_ids, dst_ids, op_id, dst_table=table.table_id)
        run.record_table(dataclasses.replace(table, rows=n, stored_rows=run.store_rows))
        run.record_op(OpInfo(op_id, ..., triples=triples.rows))  # record

    An engine that writes later (in its own workers, or when the pipeline
    finally runs) records its op with ``triples=None``, ships the
    destinations to its workers, and calls :meth:`finish_op` once it knows.
    """

    @property
    def run_id(self) -> str:
        """The run's id (every :class:`~provplug.model.TableInfo` and
        :class:`~provplug.model.OpInfo` of the run carries it)."""
        ...

    @property
    def store_rows(self) -> bool:
        """Whether the run keeps the tables' rows (``capture(store_rows=...)``)."""
        ...

    @property
    def location_lineage(self) -> bool:
        """Whether steps with static rates may be stored as location edges
        (:meth:`record_location_edge`) instead of their triples
        (``capture(location_lineage=...)``)."""
        ...

    # -- reserve ---------------------------------------------------------------
    def new_table(self, name: str, origin: TableOrigin, columns: Sequence[str]) -> TableInfo:
        """Reserve a table id for ``name`` (unique in the run); record the
        table with :meth:`record_table` once its rows are counted."""
        ...

    def new_op_id(self) -> int:
        """Reserve an op id."""
        ...

    # -- record ----------------------------------------------------------------
    def record_table(self, table: TableInfo) -> None:
        """Stage ``table`` in the run's catalogue."""
        ...

    def identify_table(self, name: str, namespace: str, dataset: str) -> None:
        """Record which dataset the run's table ``name`` is (OpenLineage's
        namespace and name; :attr:`TableInfo.namespace`), before or after it is reserved."""
        ...

    def record_op(self, op: OpInfo) -> None:
        """Stage ``op`` (``triples`` and ``finished`` may still be None)."""
        ...

    def finish_op(self, op_id: int, *, triples: int, finished: datetime | None = None) -> OpInfo:
        """Complete a staged op with its triple count and end time (default:
        now) once its triples are written; return the op as staged."""
        ...

    # -- write -----------------------------------------------------------------
    def rows_destination(self, table_id: int) -> Destination:
        """Where the rows of ``table_id`` go (created; picklable for workers)."""
        ...

    def triples_destination(self) -> Destination:
        """Where the run's triples go (created; picklable for workers)."""
        ...

    def scratch_destination(self, *parts: str) -> Destination:
        """A directory for the adapter's own intermediate files, removed
        before the run commits (created; picklable for workers)."""
        ...

    def rows_writer(self, table_id: int, stem: str | None = None) -> RowsWriter:
        """A writer of the rows of ``table_id`` (parts named ``stem-*``)."""
        ...

    def triples_writer(self, stem: str | None = None) -> TripleWriter:
        """A writer of triples (parts named ``stem-*``)."""
        ...

    def row_lineage_destination(self) -> Destination:
        """Where the run's row-lineage records go (created; picklable for
        workers); see :mod:`provplug.ingest.rowlineage`."""
        ...

    def row_lineage_writer(self, stem: str | None = None) -> RowLineageWriter:
        """A writer of row-lineage records (parts named ``stem-*``)."""
        ...

    def record_row_rules(self, rules: OpRowRules) -> None:
        """Record what the row lineage of ``rules.out_table`` means (once per table)."""
        ...

    def record_location_edge(self, edge: Any) -> None:
        """Store ``edge``, a :class:`provplug.location.LocationEdge` (typed
        ``Any``: provplug.location reads stores through this module), in
        place of the triples it stands for (once per op, input and output table)."""
        ...

    @property
    def store_uri(self) -> str:
        """The URI (or path) of the store the run commits into."""
        ...

    @property
    def strict(self) -> bool:
        """Whether a step provplug cannot capture exactly fails the run
        (``capture(strict=True)``, ``provplug run --strict``) instead of
        becoming a coarse step (:meth:`record_coarse_edge`)."""
        ...

    def record_coarse_edge(self, edge: Any) -> None:
        """Record a :class:`provplug.model.CoarseEdge`: what an output of a
        coarse step (op kind ``"coarse"``, rows stored, no triples) may
        derive from. Written with the run as ``coarse.json``."""
        ...

    def forget_tables(self, table_ids: Collection[int]) -> None:
        """Drop what the run staged for these tables (their ops, row rules and
        edges): their capture failed and the pipeline went on without it."""
        ...

    def record_uncaptured_write(self, name: str, reason: str) -> None:
        """Record that the pipeline wrote ``name`` and the run could not
        capture it at all (``provplug runs`` and ``stats`` show it)."""
        ...

    def copy_positional_rows(self, table_id: int, files: Iterable[tuple[Any, str, int]]) -> int:
        """Store a source read from Parquet files as copies of those files
        (row number = the file's first row + position); return its rows.
        ``files`` holds ``(pyarrow filesystem, path, rows)`` per file
        (:class:`provplug.plugin.writers.SourceFile`)."""
        ...

    def attach_text(self, name: str, text: str) -> None:
        """Keep a small text file ``name`` with the run (e.g. an engine's
        own lineage report); it is listed among the run's datasets."""
        ...


class CaptureRun(RunRecorder, Protocol):
    """A capture run as a write interceptor drives it (provplug's
    :class:`provplug.ingest.capture.ActiveRun`): the recorder, the adapter
    session bound to it, and a step called through the capture."""

    session: AdapterSession | None

    def call_step(
        self, step: StepInfo, func: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> Any: ...


class WriteInterceptor(Protocol):
    """Captures the writes of code that does not know provplug
    (``provplug.capture_writes``, ``provplug run``): while the context
    manager ``intercept(start_run)`` returns is entered, each write of the
    engine becomes a step of the run ``start_run(engine)`` returns (the first
    write starts it). ``name`` names the interceptor in messages."""

    name: str

    def intercept(self, start_run: Callable[[Any], CaptureRun]) -> AbstractContextManager[None]: ...


# -- store -------------------------------------------------------------------------

if TYPE_CHECKING:
    # A default (PEP 696, in typing from Python 3.13): a bare ``Store`` is any store, ``Store[Transaction]``.
    from typing_extensions import TypeVar as DefaultedTypeVar

    TransactionT_co = DefaultedTypeVar("TransactionT_co", bound="Transaction", covariant=True, default="Transaction")
else:
    TransactionT_co = TypeVar("TransactionT_co", bound="Transaction", covariant=True)


class Transaction(Protocol):
    """One run being staged in a store (:meth:`Store.transaction`)."""

    values_count: int
    """Values an import adds (its ``values.parquet``); 0 for a capture,
    whose values are counted from its tables' rows and columns."""

    @property
    def run_id(self) -> str: ...

    @property
    def started(self) -> datetime: ...

    @property
    def ops(self) -> list[OpInfo]:
        """The ops staged so far, in order (a staged op may be replaced in place)."""
        ...

    def reserve(self, kind: str) -> int:
        """Reserve the next id of ``kind`` (``"tables"`` or ``"ops"``) store-wide."""
        ...

    def add_table(self, table: TableInfo) -> None: ...

    def add_op(self, op: OpInfo) -> None: ...

    def mark_dataset(self, name: str) -> None:
        """Record that dataset ``name`` was written into the staging directory."""
        ...

    def path(self, *parts: str) -> str:
        """A path in the run's staging directory, on the store's filesystem."""
        ...

    def spark_path(self, *parts: str) -> str:
        """The same location as a URI Spark can read and write."""
        ...


class StoreLocationPart(Protocol):
    """Where a store lives: its URI, the pyarrow filesystem its bytes move
    through, its directory on it, and the paths below it (also as Spark
    addresses them)."""

    @property
    def uri(self) -> str: ...

    @property
    def fs(self) -> Any:
        """The ``pyarrow.fs.FileSystem`` the store is on."""
        ...

    @property
    def root(self) -> str:
        """The store's directory on ``fs``."""
        ...

    @property
    def local(self) -> bool:
        """True when ``fs`` is the local filesystem (renames are atomic)."""
        ...

    def path(self, *parts: str) -> str:
        """A path below the store's directory, on ``fs``."""
        ...

    def spark_path(self, *parts: str) -> str:
        """The same location as a URI Spark can read and write."""
        ...

    def to_spark_path(self, path: str) -> str:
        """A path on ``fs`` (e.g. one of :meth:`triple_files`) as Spark addresses it."""
        ...


class StoreFilesPart(Protocol):
    """How a store's small files move: read, replace, and create-if-absent
    (the store's lock and id-reservation primitive)."""

    def read_text(self, path: str) -> str:
        """A small text file on ``fs`` (:class:`provplug.errors.DamagedStoreError`
        if it cannot be decoded)."""
        ...

    def write_text(self, path: str, text: str) -> None:
        """Write (or replace) a small text file on ``fs``."""
        ...

    def create_exclusive(self, path: str, text: str = "") -> bool:
        """Create the file ``path`` holding ``text`` unless it exists; True if
        this call created it (the store's lock primitive: atomic wherever
        the store supports concurrent writers)."""
        ...


class StoreContentsPart(Protocol):
    """What a store holds, in provplug's format (:mod:`provplug.schema`):
    committed runs, their tables, ops, imported values, triples (every one,
    whatever it is stored as), stored rows; counts and a check of the files."""

    def exists(self) -> bool: ...

    def check(self) -> None:
        """Raise :class:`provplug.errors.StoreError` unless the store exists
        in a format this code reads."""
        ...

    def runs(self) -> list[dict[str, Any]]:
        """The manifests of the committed runs, oldest first."""
        ...

    def run_paths(self, dataset: str) -> list[str]:
        """The paths of ``dataset`` in every committed run that has it."""
        ...

    def tables(self) -> Any:
        """Every table of the store (``pyarrow.Table``, schema ``schema.TABLES``)."""
        ...

    def ops(self) -> Any:
        """Every op of the store (``pyarrow.Table``, schema ``schema.OPS``)."""
        ...

    def values(self) -> Any:
        """Imported values' tables (``pyarrow.Table``, schema ``schema.VALUES``)."""
        ...

    def triple_files(self) -> list[str]:
        """Every Parquet file of committed triples (paths on ``fs``, sorted)."""
        ...

    def triples(self) -> Any:
        """Every committed triple, whatever it is stored as (triple files or
        location edges): a :class:`provplug.store.triples.TripleScan`, with
        ``to_batches(columns)``, ``to_table(columns)`` and ``count_rows()``."""
        ...

    def stored_triples(self) -> Any:
        """The committed triple files alone, as one lazily read
        ``pyarrow.dataset.Dataset`` (no location edge expanded)."""
        ...

    def read_rows(self, run_id: str, table_id: int, where: Any = None, limit: int | None = None) -> Any:
        """The stored rows of a table with their row numbers (a
        ``pyarrow.Table``), filtered by the ``pyarrow.compute.Expression``
        ``where``, at most ``limit`` of them; None when none are stored."""
        ...

    def stats(self) -> dict[str, int]:
        """Counts of ``runs``, ``tables``, ``ops``, ``values`` and ``triples``."""
        ...

    def verify(self) -> dict[str, int]:
        """Check every committed run's files without reading bulk data and
        return :meth:`stats`; :class:`provplug.errors.DamagedStoreError`
        names the first damage."""
        ...


class StoreGarbagePart(Protocol):
    """Removing what readers no longer use: a whole run (atomically), dead
    writers' staging, leftovers of interrupted deletions."""

    def delete_run(self, run_id: str, before_removal: Any = None) -> dict[str, Any]:
        """Delete the committed run ``run_id`` atomically (readers see it
        whole or not at all) and return its manifest with ``bytes`` freed;
        ``before_removal()`` runs after it has vanished, before its files go."""
        ...

    def garbage(self) -> list[Any]:
        """What the store no longer uses (``provplug.store.parquet.Garbage`` records:
        dead writers' staging, leftovers of interrupted deletions)."""
        ...

    def remove_garbage(self, item: Any) -> bool:
        """Remove one item of :meth:`garbage`; False if it was already gone."""
        ...


@runtime_checkable
class Store(StoreLocationPart, StoreFilesPart, StoreContentsPart, StoreGarbagePart, Protocol[TransactionT_co]):
    """A provenance store: what capture, import, the index and queries use.

    A store is a directory of Parquet datasets in the layout of
    :mod:`provplug.store.parquet`, on a filesystem pyarrow can reach (``fs``). A
    store-backend plugin decides *where* a URI's store lives and *how* it is
    reached (an alias, a filesystem with its own credentials); the layout,
    and so what the index and queries read, is fixed.

    Its members fall in four parts by concern — :class:`StoreLocationPart`
    (where it lives), :class:`StoreFilesPart` (how bytes move),
    :class:`StoreContentsPart` (the format's datasets) and
    :class:`StoreGarbagePart` (removal) — plus :meth:`transaction`, the
    run being written. A reader that needs one part can ask for that part.

    Generic in the type of its transactions, so that the built-in
    ``ParquetStore`` is a ``Store[RunTransaction]``; ``Store`` alone is any store.
    """

    def transaction(self, kind: str) -> AbstractContextManager[TransactionT_co]:
        """Stage a run of ``kind`` (``"capture"`` or ``"import"``): committed
        when the block succeeds, without a trace when it fails."""
        ...


# -- the index ---------------------------------------------------------------------


class WorkflowGraph(Protocol):
    """``G_wf``: the table-level dependency graph inferred from the ops and
    triples (implemented by :class:`provplug.index.workflow.WorkflowGraph`)."""

    @property
    def tables(self) -> Sequence[str]:
        """Table names, sorted."""
        ...

    @property
    def edges(self) -> Sequence[tuple[str, str]]:
        """Directed edges ``(T1, T2)``: some op reads ``T1`` and writes ``T2``; no self-loops."""
        ...

    def neighbours(self) -> Mapping[str, set[str]]:
        """Undirected adjacency of every table (for weak connectivity)."""
        ...

    def is_weakly_connected(self, tables: Iterable[str]) -> bool:
        """True if ``tables`` (non-empty) form one weakly connected piece."""
        ...


# -- query methods -------------------------------------------------------------------


class MethodContext(Protocol):
    """What a query method may use (provplug builds it:
    :class:`provplug.query.methods.QueryContext`): the store, whether a
    recursion over a number of triples belongs on the driver, the current
    lineage index (a :class:`provplug.query.index_reader.IndexReader`, opened
    on first use and checked to cover the store's runs) and a SparkSession
    (started on first use)."""

    store: Store

    def on_driver(self, triples: int) -> bool: ...

    def index(self) -> Any: ...

    def session(self) -> Any: ...


class QueryMethod(Protocol):
    """A lineage query method as plugins register it
    (``provplug_register_query_methods``): ``name`` is what ``--method``
    selects; ``run`` answers one query over ``seeds`` (value ids) in
    ``direction`` ("up": ancestors, "down": descendants) and returns the
    lineage and the triples among it, with how they were found."""

    name: str
    description: str

    def run(self, context: MethodContext, seeds: NDArray[np.int64], direction: Direction) -> MethodResult: ...


# -- exports -------------------------------------------------------------------------


class ExportSelection(Protocol):
    """What an export renders (implemented by
    :class:`provplug.export.selection.Selection`): either a lineage answer
    (``targeted``: its values, the edges among them and the ops on those
    edges) or a whole run or store (its tables and ops, and every value and
    triple when the format asked for them and the run is small enough)."""

    store_uri: str
    runs: list[str]
    tables: list[Any]
    """The tables involved (:class:`provplug.query.catalog.TableEntry`)."""
    ops: list[dict[str, Any]]
    """Op records as ``store.ops()`` gives them."""
    values: list[dict[str, Any]]
    """Value records as lineage answers give them, plus ``table_id`` and ``row_number``."""
    edges: list[tuple[int, int, int]]
    """Triples ``(src, dst, op_id)`` among the values."""
    query: list[int]
    """The queried value ids (a lineage answer's seeds)."""
    targeted: bool
    """True for a lineage answer, False for a whole run or store."""
    coarse: list[Any]
    """The coarse edges (:class:`provplug.model.CoarseEdge`) of the coarse
    ops among ``ops``: what their outputs may derive from, with no triple."""


class ExportFormat(Protocol):
    """An export format as plugins register it
    (``provplug_register_export_formats``): ``name`` is what
    ``provplug export --format`` selects, and ``description`` follows it in
    ``provplug export --help``. Loading the registry must stay cheap: a
    format imports its libraries inside :meth:`render`, not at module level,
    and names them in ``requires`` so that a missing one is reported before
    the store is read."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def media_type(self) -> str:
        """The document's media type, e.g. ``application/json``."""
        ...

    @property
    def extension(self) -> str:
        """The usual file-name extension, without the dot (``json``, ``provn``)."""
        ...

    @property
    def requires(self) -> tuple[str, ...]:
        """Modules :meth:`render` imports (``openlineage.client``): each must be installed."""
        ...

    @property
    def lists_values(self) -> bool:
        """Whether a whole-run export lists every value and triple (bounded
        in size), or only the tables and ops."""
        ...

    def render(self, store: Store, selection: ExportSelection, namespace: str | None) -> str | bytes:
        """The document of ``selection``, read from ``store``: text, or bytes
        for a binary format. ``namespace`` is ``--namespace`` (None: the
        format's default)."""
        ...


# -- answers -------------------------------------------------------------------------


@runtime_checkable
class Answer(Protocol):
    """What a command's answer offers the command line's one output layer
    (:func:`provplug.cli.output.answer_text`): ``--json`` prints
    :meth:`to_dict` in the command line's JSON layout, the default prints
    :meth:`render`. Implemented by the lineage, what-if and depends answers
    (and, on the command line, by the plain records other commands print).
    The command line draws a lineage answer (:class:`PicturedAnswer`) through
    :mod:`provplug.query.picture`."""

    def to_dict(self) -> Any:
        """The answer as a JSON-ready document (``--json``)."""
        ...

    def render(self) -> str:
        """The answer as people read it (the default output)."""
        ...


@runtime_checkable
class PicturedAnswer(Answer, Protocol):
    """An answer that can also be drawn (``--format svg`` / ``html``)."""

    def picture(self, fmt: str, max_cells: int | None = None) -> str:
        """The answer drawn as ``fmt`` (``svg``, ``html`` or ``dot``),
        summarised when it has more than ``max_cells`` cells (None: the
        default limit)."""
        ...
