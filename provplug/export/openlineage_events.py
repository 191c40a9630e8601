"""OpenLineage export: one ``RunEvent`` (eventType COMPLETE) per op, through
``openlineage-python`` (``openlineage.client.event_v2`` / ``facet_v2``).

* job: namespace = the store's namespace (``provplug://`` + the store's
  absolute path unless given), name = the op's name; a ``jobType`` facet
  (BATCH, integration PROVPLUG, type STEP);
* run: a UUID derived from the store, run and op ids (the same export gives
  the same ids), a ``parent`` facet naming the provplug run
  (job ``provplug-run``), eventTime = the op's end (else its start);
* inputs / outputs: the op's input and output tables as datasets named after
  the tables, each with a ``schema`` facet (the stored rows' column types);
* every output dataset has a ``columnLineage`` facet: for each output column
  the input fields its stored triples link it to, with the transformation
  chosen as :mod:`provplug.export.column_lineage` documents, and the
  dataset-level INDIRECT fields (group and join keys).

The export is one JSON array of events, oldest op first (what a consumer
posts one by one to an OpenLineage endpoint such as Marquez's
``/api/v1/lineage``).
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

from provplug.export.column_lineage import ColumnPair, coarse_pairs, column_pairs
from provplug.export.scope import Table

if TYPE_CHECKING:
    from provplug.plugin.protocols import ExportSelection, Store

PRODUCER = "https://w3id.org/provplug"
PARENT_JOB = "provplug-run"


def namespace_of(store: Store) -> str:
    return f"provplug://{store.root}" if store.root.startswith("/") else f"provplug://{store.uri}"


def events(
    store: Store,
    selection: ExportSelection,
    all_tables: dict[int, Table],
    namespace: str | None = None,
    triples: Any = None,
) -> list[dict[str, Any]]:
    """The events of the selection's ops, as JSON-ready dicts."""
    from openlineage.client.serde import Serde

    namespace = namespace or namespace_of(store)
    pairs = column_pairs(store, selection.ops, all_tables, triples)
    for pair in coarse_pairs(selection.coarse, selection.ops, all_tables):
        pairs.setdefault(pair.op_id, []).append(pair)
    return [
        Serde.to_dict(_event(store, namespace, op, all_tables, pairs.get(int(op["op_id"]), []))) for op in selection.ops
    ]


def events_json(
    store: Store,
    selection: ExportSelection,
    all_tables: dict[int, Table],
    namespace: str | None = None,
    triples: Any = None,
) -> str:
    return json.dumps(events(store, selection, all_tables, namespace, triples), indent=1, sort_keys=True)


def _event(store: Store, namespace: str, op: dict[str, Any], tables: dict[int, Table], pairs: list[ColumnPair]) -> Any:
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import job_type_job, parent_run

    parent = parent_run.ParentRunFacet(
        run=parent_run.Run(runId=_uuid(namespace, op["run_id"])),
        job=parent_run.Job(namespace=namespace, name=PARENT_JOB),
    )
    when = op["finished"] or op["started"]
    return RunEvent(
        eventType=RunState.COMPLETE,
        eventTime=when.isoformat() if when is not None else _committed(store, op["run_id"]),
        producer=PRODUCER,
        run=Run(runId=_uuid(namespace, op["run_id"], op["op_id"]), facets={"parent": parent}),
        job=Job(
            namespace=namespace,
            name=op["name"],
            facets={
                "jobType": job_type_job.JobTypeJobFacet(processingType="BATCH", integration="PROVPLUG", jobType="STEP")
            },
        ),
        inputs=[
            InputDataset(namespace=namespace, name=tables[t].name, facets={"schema": _schema(store, tables[t])})
            for t in _tables_read(op, pairs)
            if t in tables
        ],
        outputs=[
            OutputDataset(
                namespace=namespace,
                name=tables[t].name,
                facets={
                    "schema": _schema(store, tables[t]),
                    "columnLineage": _column_lineage(namespace, tables, [p for p in pairs if p.dst_table == t]),
                },
            )
            for t in _tables_written(op, pairs)
            if t in tables
        ],
    )


def _tables_read(op: dict[str, Any], pairs: list[ColumnPair]) -> list[int]:
    """The op's input tables: as recorded, and (for imported ops, which record
    none) as its triples show."""
    return list(dict.fromkeys([*op["inputs"], *sorted({p.src_table for p in pairs})]))


def _tables_written(op: dict[str, Any], pairs: list[ColumnPair]) -> list[int]:
    return list(dict.fromkeys([*op["outputs"], *sorted({p.dst_table for p in pairs})]))


def _column_lineage(namespace: str, tables: dict[int, Table], pairs: list[ColumnPair]) -> Any:
    from openlineage.client.facet_v2 import column_lineage_dataset as cl

    def field(pair: ColumnPair, how: Any) -> Any:
        return cl.InputField(
            namespace=namespace,
            name=tables[pair.src_table].name,
            field=pair.src_column,
            transformations=[cl.Transformation(type=how.type, subtype=how.subtype, description=how.description)],
        )

    fields: dict[str, Any] = {}
    for pair in pairs:
        entry = fields.setdefault(pair.dst_column, cl.Fields(inputFields=[]))
        entry.inputFields.append(field(pair, pair.field))
    dataset: list[Any] = []
    seen: set[tuple[int, str, str]] = set()
    for pair in pairs:
        key = (pair.src_table, pair.src_column, pair.dataset.subtype if pair.dataset else "")
        if pair.dataset is not None and key not in seen:
            seen.add(key)
            dataset.append(field(pair, pair.dataset))
    return cl.ColumnLineageDatasetFacet(fields=fields, dataset=dataset)


def _schema(store: Store, table: Table) -> Any:
    from openlineage.client.facet_v2 import schema_dataset

    types = _column_types(store, table)
    return schema_dataset.SchemaDatasetFacet(
        fields=[
            schema_dataset.SchemaDatasetFacetFields(name=c, type=types.get(c), ordinal_position=i + 1)
            for i, c in enumerate(table.columns)
        ]
    )


def _column_types(store: Store, table: Table) -> dict[str, str]:
    """The Arrow types of the table's stored columns, read from the files' schema only."""
    import pyarrow.dataset as pads

    from provplug import schema

    if not table.stored_rows:
        return {}
    folder = store.path("runs", table.run_id, "rows", str(table.table_id))
    try:
        stored = pads.dataset(folder, format="parquet", filesystem=store.fs).schema
    except (OSError, ValueError):
        return {}
    return {f.name: str(schema.plain_type(f.type)) for f in stored if f.name != schema.ROW_COLUMN}


def _committed(store: Store, run_id: str) -> str:
    for manifest in store.runs():
        if manifest["run_id"] == run_id:
            return str(manifest["committed"])
    return ""


def _uuid(namespace: str, run_id: str, op_id: int | None = None) -> str:
    name = f"{namespace}/runs/{run_id}" + (f"/ops/{op_id}" if op_id is not None else "")
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))
