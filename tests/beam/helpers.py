"""The Beam tests' use of the triple oracle (:mod:`provplug.testing`) and
their shared inputs, steps and pipelines.

A committed store is read back as a :class:`provplug.testing.StoreContents`; its
``lineage(op)`` gives, per output value, (table, column, its row's content)
and the set of its parents labelled the same way, counted, since Beam defines
no order for step outputs. Expectations are derived by hand (or from the
paper's Table 4) with ``expect_lineage`` and compared by row *content*.
"""

from __future__ import annotations

import collections
import importlib.util
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES

import provplug
from provplug.plugin.manager import Plugins
from provplug.testing import StoreContents, expect_lineage

beam = pytest.importorskip("apache_beam")

PEOPLE = [
    {"Name": "Steve", "City": "NY", "Age": 30},
    {"Name": "Mark", "City": "NY", "Age": 40},
    {"Name": "Shane", "City": "LA", "Age": 40},
    {"Name": "Mary", "City": "NY", "Age": 20},
]
VISITS = [("NY", 30), ("NY", 40), ("LA", 40), ("NY", 20)]
EMAILS = [("Steve", "s@x"), ("Mark", "m@x"), ("Mark", "m2@x")]
PHONES = [("Mark", "555"), ("Mary", "777")]
CITIES = [{"City": "NY"}, {"City": "LA"}, {"City": "NY"}]
MORE = [{"Name": "Zoe", "City": "SF", "Age": 50}]
WORDS = ["a", "b", "a", "c"]


def load_example(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def captured(path: Path) -> StoreContents:
    """The store of one committed run, read back."""
    got = StoreContents(path)
    (_run,) = got.store.runs()
    return got


# -- rows and parents, by content -----------------------------------------------------------
def every_cell(table: str, row: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(table, c, row) for c in row]


def person(name: str) -> dict[str, Any]:
    return next(p for p in PEOPLE if p["Name"] == name)


def kv(key: str, value: Any) -> dict[str, Any]:
    return {"key": key, "value": value}


def word(w: str) -> dict[str, Any]:
    return {"value": w}


# -- one step per transform kind (the ``kinds`` fixture runs them all in one pipeline) -----
class Adults(beam.DoFn):  # type: ignore[misc]
    def process(self, person):  # type: ignore[no-untyped-def]
        if person["City"] == "NY":
            yield {"Who": person["Name"], "Old": person["Age"] > 25}


@provplug.step("S_map", output="Upper")
def s_map(people: Any) -> Any:
    return people | beam.Map(lambda p: {"Name": p["Name"].upper(), "Decade": p["Age"] // 10})


@provplug.step("S_flatmap", output="Parts")
def s_flatmap(people: Any) -> Any:
    return people | beam.FlatMap(lambda p: [{"Part": p["Name"][:2]}, {"Part": p["City"]}] if p["Age"] > 35 else [])


@provplug.step("S_pardo", output="NYers")
def s_pardo(people: Any) -> Any:
    return people | beam.ParDo(Adults())


@provplug.step("S_filter", output="Old")
def s_filter(people: Any) -> Any:
    return people | beam.Filter(lambda p: p["Age"] >= 40)


@provplug.step("S_gbk", output="AgesByCity")
def s_gbk(visits: Any) -> Any:
    return visits | beam.GroupByKey() | beam.MapTuple(lambda k, vs: (k, sorted(vs))) | beam.Filter(lambda kv: True)


@provplug.step("S_gbk_only", output="Grouped")
def s_gbk_only(visits: Any) -> Any:
    return visits | beam.GroupByKey()


@provplug.step("S_cpk", output="SumByCity")
def s_cpk(visits: Any) -> Any:
    return visits | beam.CombinePerKey(sum)


@provplug.step("S_cg", output="Total")
def s_cg(ages: Any) -> Any:
    return ages | beam.CombineGlobally(sum)


@provplug.step("S_cogbk", output="Contacts")
def s_cogbk(emails: Any, phones: Any) -> Any:
    return {"emails": emails, "phones": phones} | beam.CoGroupByKey()


@provplug.step("S_flatten", output="Everyone")
def s_flatten(people: Any, more: Any) -> Any:
    return (people, more) | beam.Flatten()


@provplug.step("S_distinct", output="UniqueCities")
def s_distinct(cities: Any) -> Any:
    return cities | beam.Distinct()


def capture_kinds(store: Path) -> StoreContents:
    """One step per transform kind, all in one pipeline run."""
    pipeline = beam.Pipeline()
    with provplug.capture(pipeline, store=store) as run:
        people = run.source(PEOPLE, "People")
        visits = run.source(VISITS, "Visits")
        s_map(people), s_flatmap(people), s_pardo(people), s_filter(people)
        s_gbk(visits), s_gbk_only(visits), s_cpk(visits)
        s_cg(run.source([30, 40, 40, 20], "Ages"))
        s_cogbk(run.source(EMAILS, "Emails"), run.source(PHONES, "Phones"))
        s_flatten(people, run.source(MORE, "More"))
        s_distinct(run.source(CITIES, "Cities"))
    return captured(store)


def capture_filter(store: Path, rows: list[dict[str, Any]], plugins: Plugins | None = None) -> None:
    pipeline = beam.Pipeline()
    with provplug.capture(pipeline, store=store, plugins=plugins) as run:
        s_pardo(s_filter(run.source(rows, "People")))


# -- Beam's own patterns, with type checks on (issue 11) ------------------------------------
def typed_pipeline() -> Any:
    """Beam checks types while building (its default) and while running."""
    from apache_beam.options.pipeline_options import PipelineOptions

    return beam.Pipeline(options=PipelineOptions(pipeline_type_check=True, runtime_type_check=True))


def capture(store: Path, build: Any, pipeline: Any = None) -> StoreContents:
    with provplug.capture(pipeline or typed_pipeline(), store=store) as run:
        build(run)
    return captured(store)


@provplug.step("CountWords", output="WordCounts")
def count_words(words: Any) -> Any:
    return words | beam.combiners.Count.PerElement()


def per_element_expected(table: str, source: str, words: list[str]) -> collections.Counter:
    # Count.PerElement = Map(w -> (w, None)) (black box) + CombinePerKey(count):
    # key and count of each word <- the word's cells.
    entries = []
    for w in sorted(set(words)):
        row, parents = {"key": w, "value": words.count(w)}, [(source, "value", word(w))] * words.count(w)
        entries += [(table, "key", row, parents), (table, "value", row, parents)]
    return expect_lineage(*entries)
