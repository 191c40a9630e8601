"""What a store holds: its runs, its tables, one table in detail, its stats.

Plain JSON-ready records (``TypedDict``\\ s) shared by the ``provplug runs``,
``tables``, ``show`` and ``stats`` commands and by
:class:`provplug.api.ProvenanceStore`. A table's rows are read with a
limit, never whole.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, TypedDict

import pyarrow.compute as pc

from provplug import schema
from provplug.ingest.recorder import UNCAPTURED
from provplug.plugin.protocols import Store
from provplug.query.catalog import Catalog, catalog_for, jsonable
from provplug.store.catalogue import TableEntry
from provplug.store.runs import run_line, select_run
from provplug.store.triples import TripleFilter, triple_table
from provplug.texttable import aligned, cell_text


class _RunCounts(TypedDict):
    run_id: str
    number: int
    label: str | None
    tags: list[str]
    kind: str
    status: str
    started: str | None
    ended: str
    committed: str
    engine: str | None
    entry_point: dict[str, Any] | None  # see provplug.ingest.runcontext
    git: dict[str, Any] | None  # {commit, dirty} of the code that ran, when in a git repository
    spark_app_id: str | None
    tables: int
    ops: int
    values: int
    triples: int  # stored
    location_triples: int  # stood for by the run's location edges (provplug.location), read as if stored


class RunRecord(_RunCounts, total=False):
    reduction: dict[str, Any]  # a reduced capture's reduction (see provplug.reduce); absent otherwise
    uncaptured_writes: list[dict[str, str]]  # writes the run saw and could not capture ({name, reason}); or absent


class TableRecord(TypedDict):
    name: str
    run_id: str
    table_id: int
    origin: str
    columns: list[str]
    rows: int | None
    stored_rows: bool
    namespace: str | None  # the dataset the table is, as OpenLineage names it (None: none known)
    dataset: str | None


class OpRecord(TypedDict):
    op_id: int
    name: str
    kind: str
    operations: list[str]
    inputs: list[str]
    triples: int | None
    started: str | None
    finished: str | None


class SampleRow(TypedDict):
    row: int
    values: dict[str, Any]


class TableDetail(TableRecord):
    run_kind: str
    run_committed: str
    run: dict[str, Any]  # the run shown and how many runs wrote the table (provplug.store.runs.run_used)
    written_by: list[OpRecord]
    sample: list[SampleRow]


# A run's counts, from its manifest: triples stored, and those its location edges stand for.
RUN_COUNTS = ("tables", "ops", "values", "triples", "location_triples")


def run_records(store: Store) -> list[RunRecord]:
    """Every committed run, oldest first."""
    return [_run_record(m) for m in store.runs()]


def _run_record(manifest: dict[str, Any]) -> RunRecord:
    counts = manifest["counts"]
    record: RunRecord = RunRecord(
        run_id=manifest["run_id"],
        number=int(manifest["number"]),
        label=manifest.get("label"),
        tags=list(manifest.get("tags") or []),
        kind=str(manifest.get("kind", "?")),
        status=str(manifest.get("status", "committed")),  # only committed runs are ever listed
        started=manifest.get("started"),
        ended=manifest.get("ended", manifest["committed"]),
        committed=manifest["committed"],
        engine=manifest.get("engine"),
        entry_point=manifest.get("entry_point"),
        git=manifest.get("git"),
        spark_app_id=manifest.get("spark_app_id"),
        **{k: int(counts.get(k, 0)) for k in RUN_COUNTS},  # type: ignore[typeddict-item]
    )
    if manifest.get("reduction"):
        record["reduction"] = dict(manifest["reduction"])
    if manifest.get(UNCAPTURED):
        record["uncaptured_writes"] = [{"name": w["name"], "reason": w["reason"]} for w in manifest[UNCAPTURED]]
    return record


def table_records(store: Store, run: str | None = None) -> list[TableRecord]:
    """The tables of every run (of run ``run``: an id or a unique prefix),
    by name, then in run order."""
    catalog = catalog_for(store)
    order = {r: i for i, r in enumerate(catalog.run_ids)}
    entries = list(catalog.tables.values())
    if run is not None:
        chosen = select_run(catalog.manifests, run)["run_id"]
        entries = [t for t in entries if t.run_id == chosen]
    entries.sort(key=lambda t: (t.name, order.get(t.run_id, -1), t.table_id))
    return [_table_record(t) for t in entries]


def _table_record(entry: TableEntry) -> TableRecord:
    return TableRecord(
        name=entry.name,
        run_id=entry.run_id,
        table_id=entry.table_id,
        origin=entry.origin,
        columns=list(entry.columns),
        rows=entry.rows,
        stored_rows=entry.stored_rows,
        namespace=entry.namespace,
        dataset=entry.dataset,
    )


def table_detail(store: Store, name: str, run: str | None = None, limit: int = 10) -> TableDetail:
    """Table ``name`` (of run ``run`` when several runs wrote one): its
    columns, row count, run, the ops that wrote it with their inputs, and its
    first ``limit`` stored rows."""
    catalog = catalog_for(store)
    entry, used = catalog.table_choice(name, run)
    manifest = select_run(catalog.manifests, entry.run_id)
    return TableDetail(
        **_table_record(entry),
        run_kind=str(manifest.get("kind", "?")),
        run_committed=manifest["committed"],
        run=used,
        written_by=_writers(store, catalog, entry),
        sample=_sample(store, entry, limit),
    )


def _writers(store: Store, catalog: Catalog, entry: TableEntry) -> list[OpRecord]:
    """The ops of the table's run that wrote it. Captured ops list their
    tables; an import's ops do not, so its triples say (scanned for this table only)."""
    ops = store.ops().filter(pc.equal(pc.field("run_id"), entry.run_id)).to_pylist()
    if entry.origin != "imported":
        return [
            _op_record(o, [catalog.tables[i].name for i in o["inputs"] if i in catalog.tables])
            for o in ops
            if entry.table_id in o["outputs"]
        ]
    inputs = _imported_inputs(store, entry)
    return [
        _op_record(o, sorted({catalog.tables[t].name for t in inputs[o["op_id"]] if t in catalog.tables}))
        for o in ops
        if o["op_id"] in inputs
    ]


def _imported_inputs(store: Store, entry: TableEntry) -> dict[int, set[int]]:
    """Op id -> the table ids its triples into ``entry`` read from."""
    found = triple_table(store, ["op", "src_table"], TripleFilter.of(runs=[entry.run_id], dst_tables=[entry.table_id]))
    pairs: dict[int, set[int]] = {}
    for op, src in zip(found.column("op").to_pylist(), found.column("src_table").to_pylist(), strict=True):
        pairs.setdefault(int(op), set()).add(int(src))
    return pairs


def _op_record(op: dict[str, Any], inputs: list[str]) -> OpRecord:
    return OpRecord(
        op_id=op["op_id"],
        name=op["name"],
        kind=op["kind"],
        operations=list(op["operations"]),
        inputs=inputs,
        triples=op["triples"],
        started=jsonable(op["started"]),
        finished=jsonable(op["finished"]),
    )


def _sample(store: Store, entry: TableEntry, limit: int) -> list[SampleRow]:
    if limit <= 0 or not entry.stored_rows:
        return []
    rows = store.read_rows(entry.run_id, entry.table_id, limit=limit)
    if rows is None:
        return []
    numbers = rows.column(schema.ROW_COLUMN).to_pylist()
    cells = rows.drop_columns([schema.ROW_COLUMN]).to_pylist()
    sample = [
        SampleRow(row=int(n), values={k: jsonable(v) for k, v in c.items()})
        for n, c in zip(numbers, cells, strict=True)
    ]
    return sorted(sample, key=lambda r: r["row"])


def store_stats(store: Store) -> dict[str, Any]:
    """What ``provplug stats`` reports, section after section, each a dict of
    keys: the store's counts (every file checked), then its index's
    (``index_intact``: its files are as built; ``index_current``: it covers
    exactly the store's runs)."""
    from provplug.index.stats import index_stats

    sections: tuple[dict[str, Any], ...] = (
        store.verify(),
        _reduced_runs(store),
        _uncaptured_writes(store),
        index_stats(store),
    )
    return {key: value for section in sections for key, value in section.items()}


def _reduced_runs(store: Store) -> dict[str, Any]:
    """``reduced_runs``: each run captured with a reduction (none: no key)."""
    reduced = [{"run_id": m["run_id"], **m["reduction"]} for m in store.runs() if m.get("reduction")]
    return {"reduced_runs": reduced} if reduced else {}


def _uncaptured_writes(store: Store) -> dict[str, Any]:
    """``uncaptured_writes``: every write a run saw and could not capture (none: no key)."""
    writes = [
        {"run_id": m["run_id"], "name": w["name"], "reason": w["reason"]}
        for m in store.runs()
        for w in m.get(UNCAPTURED) or ()
    ]
    return {"uncaptured_writes": writes} if writes else {}


# -- text ----------------------------------------------------------------------------


def render_runs(runs: Sequence[RunRecord]) -> str:
    if not runs:
        return "no runs"
    keys = RUN_COUNTS
    table = aligned(
        ("#", "LABEL", "ENTRY POINT", "GIT", "STATUS", "STARTED", "ID", *(k.upper() for k in keys)),
        [
            (
                r["number"],
                r["label"],
                entry_point_text(r),
                _git_text(r["git"]),
                r["status"],
                r["started"],
                r["run_id"],
                *(r[k] for k in keys),  # type: ignore[literal-required]
            )
            for r in runs
        ],
        (True, *(False,) * 6, *(True,) * len(keys)),
    )
    return "\n".join([table, *_reduction_lines(runs), *_uncaptured_lines(runs)])


def entry_point_text(run: RunRecord) -> str:
    """How a run was started, in a few words: ``script etl.py --day 3``,
    ``kedro people (__default__, local)``, ``python pipeline.daily``, ``import``."""
    entry = run["entry_point"] or {}
    kind = entry.get("type")
    if kind == "script":
        return " ".join([f"script {os.path.basename(str(entry.get('path')))}", *map(str, entry.get("args") or ())])
    if kind == "kedro":
        project = os.path.basename(str(entry.get("project") or "")) or "?"
        return f"kedro {project} ({entry.get('pipeline')}, {entry.get('env') or 'local'})"
    if kind == "python":
        return f"python {entry.get('module')}"
    return run["kind"] if run["kind"] == "import" else "-"


def _git_text(git: dict[str, Any] | None) -> str | None:
    """``1a2b3c4d`` (``+dirty`` when the work tree had changes)."""
    if not git:
        return None
    return f"{str(git['commit'])[:8]}{'+dirty' if git.get('dirty') else ''}"


def _reduction_lines(runs: Sequence[RunRecord]) -> list[str]:
    """A line per reduced run: its provenance is partial by design."""
    from provplug.plugin.reductions import describe_run_reduction

    return [f"run {r['run_id']} reduced ({describe_run_reduction(r['reduction'])})" for r in runs if "reduction" in r]


def _uncaptured_lines(runs: Sequence[RunRecord]) -> list[str]:
    """A line per write a run could not capture: its dataset has no lineage from that run."""
    return [
        f"run {r['run_id']} did not capture the write of {w['name']}: {w['reason']}"
        for r in runs
        for w in r.get("uncaptured_writes", ())
    ]


def render_tables(tables: Sequence[TableRecord]) -> str:
    if not tables:
        return "no tables"
    return aligned(
        ("TABLE", "RUN", "ORIGIN", "ROWS", "COLUMNS"),
        [(t["name"], t["run_id"], t["origin"], t["rows"], ", ".join(t["columns"])) for t in tables],
        (False, False, False, True, False),
    )


def render_detail(detail: TableDetail) -> str:
    head = [
        ("table", detail["name"]),
        ("run", f"{run_line(detail['run'])} [{detail['run_id']}, {detail['run_kind']}, {detail['run_committed']}]"),
        ("origin", detail["origin"]),
        ("rows", cell_text(detail["rows"])),
        ("columns", ", ".join(detail["columns"]) or "-"),
        ("written by", "; ".join(_describe_op(o) for o in detail["written_by"]) or _no_writer(detail)),
    ]
    lines = [f"{k:<11} {v}" for k, v in head]
    lines.append("")
    lines.append(_render_sample(detail))
    return "\n".join(lines)


def _no_writer(detail: TableDetail) -> str:
    if detail["origin"] == "imported":
        return "- (no triple of its run leads into it)"
    return "- (a source of its run)"


def _value_text(value: object) -> str:
    """A stored value as written (no thousands separators: it is data, not a count)."""
    return "null" if value is None else str(value)


def _describe_op(op: OpRecord) -> str:
    how = f"{op['kind']}: {', '.join(op['operations'])}" if op["operations"] else op["kind"]
    source = f" from {', '.join(op['inputs'])}" if op["inputs"] else ""
    triples = f", {op['triples']:,} triples" if op["triples"] is not None else ""
    return f"{op['name']} ({how}){source} [op {op['op_id']}{triples}]"


def _render_sample(detail: TableDetail) -> str:
    sample = detail["sample"]
    if not sample:
        return "no stored rows" if not detail["stored_rows"] else "no rows"
    of = f" of {detail['rows']:,}" if detail["rows"] is not None else ""
    columns = detail["columns"] or list(sample[0]["values"])
    body = aligned(
        ("ROW", *columns),
        [(r["row"], *(_value_text(r["values"].get(c)) for c in columns)) for r in sample],
        (True, *(isinstance(sample[0]["values"].get(c), (int, float)) for c in columns)),
    )
    return f"{len(sample)}{of} rows:\n{body}"
