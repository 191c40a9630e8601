"""``provplug export``: PROV-JSON, PROV-N and OpenLineage exports of the
paper's running example, each read back by its own library and checked
against hand-derived answers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

NY = ("AvgAge.Age", "--where", "City = 'NY'")
# The lineage of AvgAge.Age for NY (README): 35.0 <-R2- Person2.Age 30, 40 <-R1- Person1.Age 30, 40.
ANSWER_VALUES = {
    ("AvgAge", "Age", 35.0),
    ("Person2", "Age", 30),
    ("Person2", "Age", 40),
    ("Person1", "Age", 30),
    ("Person1", "Age", 40),
}
ANSWER_DERIVATIONS = {
    (("AvgAge", 35.0), ("Person2", 30), "R2"),
    (("AvgAge", 35.0), ("Person2", 40), "R2"),
    (("Person2", 30), ("Person1", 30), "R1"),
    (("Person2", 40), ("Person1", 40), "R1"),
}


@pytest.fixture
def people(demo_store: Path) -> Path:
    return demo_store


def _export(cli: Any, *args: Any) -> str:
    result = cli("export", *args)
    assert result.code == 0, result
    return str(result.out)


def _prov(text: str) -> Any:
    from prov.model import ProvDocument

    return ProvDocument.deserialize(content=text, format="json")


def _attr(record: Any, name: str) -> Any:
    values = [v for k, v in record.attributes if str(k) == name]
    return values[0] if values else None


def _values(doc: Any) -> dict[str, tuple[str, str, Any]]:
    """Value entities by id: (table, column, value)."""
    from prov.model import ProvEntity

    out = {}
    for record in doc.get_records(ProvEntity):
        if str(_attr(record, "prov:type")) == "pp:Value":
            out[str(record.identifier)] = (
                _attr(record, "pp:table"),
                _attr(record, "pp:column"),
                _attr(record, "pp:value"),
            )
    return out


def _labels(doc: Any, kind: Any) -> dict[str, str]:
    return {str(r.identifier): str(_attr(r, "prov:label")) for r in doc.get_records(kind)}


def _derivations(doc: Any) -> list[tuple[str, str, str]]:
    from prov.model import ProvDerivation

    out = []
    for record in doc.get_records(ProvDerivation):
        args = dict(record.formal_attributes)
        out.append(
            tuple(
                str(args[k])
                for k in sorted(args, key=str)
                if str(k) in ("prov:generatedEntity", "prov:usedEntity", "prov:activity")
            )
        )
    # formal attributes sorted by name: activity, generatedEntity, usedEntity
    return [(g, u, a) for a, g, u in out]


def test_prov_json_of_an_answer_reads_back_with_its_values_and_derivations(cli: Any, people: Path) -> None:
    from prov.model import ProvActivity

    doc = _prov(_export(cli, people, *NY, "--format", "prov-json"))
    values = _values(doc)
    assert set(values.values()) == ANSWER_VALUES
    activities = _labels(doc, ProvActivity)
    assert sorted(activities.values()) == ["R1", "R2"]
    named = {vid: (t, v) for vid, (t, _, v) in values.items()}
    derivations = {(named[g], named[u], activities[a]) for g, u, a in _derivations(doc)}
    assert derivations == ANSWER_DERIVATIONS
    assert len(_derivations(doc)) == 4


def test_prov_n_is_the_prov_document_of_the_json_export(cli: Any, people: Path) -> None:
    provn = _export(cli, people, *NY, "--format", "prov-n").rstrip("\n")
    from_json = _prov(_export(cli, people, *NY, "--format", "prov-json")).get_provn()
    # The same document through the prov package both ways (records grouped by kind in the JSON one).
    assert sorted(provn.splitlines()) == sorted(from_json.splitlines())
    assert provn.startswith("document") and provn.count("wasDerivedFrom(") == 4
    assert "pp:value=30" in provn and 'prov:label="R2"' in provn


def test_a_whole_run_lists_every_value_and_triple(cli: Any, people: Path) -> None:
    from prov.model import ProvActivity, ProvEntity, ProvMembership

    doc = _prov(_export(cli, people, "--format", "prov-json"))
    # Person1 4 rows x 3 columns, Person2 3 x 3, AvgAge 2 x 2; 9 R1 triples, 6 R2 triples.
    assert len(_values(doc)) == 12 + 9 + 4
    assert len(_derivations(doc)) == 15
    tables = {
        str(_attr(r, "prov:label"))
        for r in doc.get_records(ProvEntity)
        if str(_attr(r, "prov:type")) == "prov:Collection"
    }
    assert tables == {"Person1", "Person2", "AvgAge"}
    assert len(list(doc.get_records(ProvMembership))) == 25
    assert sorted(_labels(doc, ProvActivity).values()) == ["R1", "R2"]


def test_a_run_too_large_for_every_value_asks_for_a_target(
    cli: Any, people: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import provplug.export.selection as selection

    monkeypatch.setattr(selection, "MAX_WHOLE_VALUES", 10)
    result = cli("export", people, "--format", "prov-json")
    assert result.code == 2 and "25 values" in result.err and "--where" in result.err
    assert result.out == "" and result.err.count("\n") == 1
    # OpenLineage stays at op level: no value limit.
    assert cli("export", people, "--format", "openlineage").code == 0


def _parse_events(text: str) -> list[Any]:
    """Rebuild every event with openlineage-python's own classes (their
    validators run) and check that they serialise back to the same JSON."""
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import column_lineage_dataset as cl
    from openlineage.client.facet_v2 import job_type_job, parent_run, schema_dataset
    from openlineage.client.serde import Serde

    def schema(d: dict[str, Any]) -> Any:
        return schema_dataset.SchemaDatasetFacet(
            fields=[
                schema_dataset.SchemaDatasetFacetFields(
                    name=f["name"], type=f.get("type"), ordinal_position=f.get("ordinal_position")
                )
                for f in d["fields"]
            ],
            producer=d["_producer"],
        )

    def input_field(d: dict[str, Any]) -> Any:
        return cl.InputField(
            namespace=d["namespace"],
            name=d["name"],
            field=d["field"],
            transformations=[cl.Transformation(**t) for t in d["transformations"]],
        )

    def lineage(d: dict[str, Any]) -> Any:
        return cl.ColumnLineageDatasetFacet(
            fields={
                k: cl.Fields(inputFields=[input_field(f) for f in v["inputFields"]]) for k, v in d["fields"].items()
            },
            dataset=[input_field(f) for f in d["dataset"]],
            producer=d["_producer"],
        )

    events = []
    for d in json.loads(text):
        parent = d["run"]["facets"]["parent"]
        job_type = d["job"]["facets"]["jobType"]
        event = RunEvent(
            eventType=RunState(d["eventType"]),
            eventTime=d["eventTime"],
            producer=d["producer"],
            run=Run(
                runId=d["run"]["runId"],
                facets={
                    "parent": parent_run.ParentRunFacet(
                        run=parent_run.Run(runId=parent["run"]["runId"]),
                        job=parent_run.Job(namespace=parent["job"]["namespace"], name=parent["job"]["name"]),
                        producer=parent["_producer"],
                    )
                },
            ),
            job=Job(
                namespace=d["job"]["namespace"],
                name=d["job"]["name"],
                facets={
                    "jobType": job_type_job.JobTypeJobFacet(
                        processingType=job_type["processingType"],
                        integration=job_type["integration"],
                        jobType=job_type["jobType"],
                        producer=job_type["_producer"],
                    )
                },
            ),
            inputs=[
                InputDataset(namespace=i["namespace"], name=i["name"], facets={"schema": schema(i["facets"]["schema"])})
                for i in d["inputs"]
            ],
            outputs=[
                OutputDataset(
                    namespace=o["namespace"],
                    name=o["name"],
                    facets={
                        "schema": schema(o["facets"]["schema"]),
                        "columnLineage": lineage(o["facets"]["columnLineage"]),
                    },
                )
                for o in d["outputs"]
            ],
        )
        assert Serde.to_dict(event) == d
        events.append(event)
    return events


def _lineage_of(event: Any, dataset: str) -> dict[str, list[tuple[str, str, str, str | None]]]:
    (output,) = [o for o in event.outputs if o.name == dataset]
    facet = output.facets["columnLineage"]
    return {
        column: [(f.name, f.field, f.transformations[0].type, f.transformations[0].subtype) for f in fields.inputFields]
        for column, fields in facet.fields.items()
    }


def test_openlineage_events_read_back_with_hand_derived_column_lineage(cli: Any, people: Path) -> None:
    events = _parse_events(_export(cli, people, "--format", "openlineage"))
    assert [(e.job.name, e.eventType.value) for e in events] == [("R1", "COMPLETE"), ("R2", "COMPLETE")]
    r1, r2 = events
    assert [i.name for i in r2.inputs] == ["Person2"] and [o.name for o in r2.outputs] == ["AvgAge"]
    # R2 = groupBy(City).agg(avg(Age)): the average aggregates Person2.Age, City copies the group key.
    assert _lineage_of(r2, "AvgAge") == {
        "Age": [("Person2", "Age", "DIRECT", "AGGREGATION")],
        "City": [("Person2", "City", "DIRECT", "IDENTITY")],
    }
    group_keys = r2.outputs[0].facets["columnLineage"].dataset
    assert [(f.name, f.field, f.transformations[0].type, f.transformations[0].subtype) for f in group_keys] == [
        ("Person2", "City", "INDIRECT", "GROUP_BY")
    ]
    # R1 = filter(Age >= 25): every column is a copy of the same column (the predicate is not a parent).
    assert _lineage_of(r1, "Person2") == {c: [("Person1", c, "DIRECT", "IDENTITY")] for c in ("Name", "City", "Age")}
    schema = {f.name: f.type for f in r2.outputs[0].facets["schema"].fields}
    assert schema == {"City": "string", "Age": "double"}
    assert r1.run.runId != r2.run.runId and r1.job.namespace == f"provplug://{people}"


def test_openlineage_of_an_answer_keeps_its_edges_only(cli: Any, people: Path, tmp_path: Path) -> None:
    out = tmp_path / "events.json"
    assert cli("export", people, *NY, "--format", "openlineage", "-o", out, "--namespace", "people").code == 0
    events = _parse_events(out.read_text())
    assert [e.job.name for e in events] == ["R1", "R2"]
    # The answer traces Age only: the ops' column lineage is that of its edges.
    assert _lineage_of(events[1], "AvgAge") == {"Age": [("Person2", "Age", "DIRECT", "AGGREGATION")]}
    assert _lineage_of(events[0], "Person2") == {"Age": [("Person1", "Age", "DIRECT", "IDENTITY")]}
    assert {e.job.namespace for e in events} == {"people"}


def test_a_missing_export_package_is_one_line(cli: Any, people: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name.startswith("prov") else real(name, *a)
    )
    result = cli("export", people, "--format", "prov-n")
    assert result.code == 2 and "install provplug[export]" in result.err and result.err.count("\n") == 1


def test_export_and_diff_load_no_heavy_library_at_startup() -> None:
    code = (
        "import sys, provplug.cli.main, provplug.cli.export, provplug.cli.diff; provplug.cli.main.build_parser(); "
        "print(sorted(m for m in ('pandas', 'pyarrow', 'pyspark', 'duckdb', 'prov', 'openlineage') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_an_imported_store_exports_with_its_tables_read_from_the_triples(cli: Any, store_path: Path) -> None:
    from conftest import DATA

    assert (
        cli(
            "import",
            store_path,
            "--triples",
            DATA / "paper_table4_triples.csv",
            "--values",
            DATA / "paper_table4_values.csv",
            "--quiet",
        ).code
        == 0
    )
    doc = _prov(_export(cli, store_path, "--format", "prov-json"))
    # Table 4: 25 values (rows unknown: no pp:value), 15 triples.
    assert len(_values(doc)) == 25 and len(_derivations(doc)) == 15
    events = _parse_events(_export(cli, store_path, "--format", "openlineage"))
    # Imported ops record no tables: inputs and outputs come from their triples.
    # R1 copies each cell from one cell (13 <- 1, ...), R2 averages two Person2 cells into 23 and merges 14, 17 into 22.
    r1, r2 = events
    assert [i.name for i in r1.inputs] == ["Person1"] and [o.name for o in r1.outputs] == ["Person2"]
    assert _lineage_of(r1, "Person2") == {
        c: [("Person1", c, "DIRECT", "TRANSFORMATION")] for c in ("Name", "City", "Age")
    }
    assert _lineage_of(r2, "AvgAge") == {c: [("Person2", c, "DIRECT", "AGGREGATION")] for c in ("City", "Age")}
