"""The session (provplug_beam.session): the paper's running example end to
end, hooks and failures, plain code around steps, and pipelines, steps and
transforms outside steps as the session meets them."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA, EXAMPLES

import provplug
from provplug.plugin.manager import Plugins, make_plugin_manager
from provplug.testing import expect_lineage, freeze

from .helpers import (
    PEOPLE,
    WORDS,
    beam,
    capture,
    capture_filter,
    captured,
    count_words,
    kv,
    load_example,
    per_element_expected,
    s_filter,
    typed_pipeline,
    word,
)


# -- the running example ----------------------------------------------------------
@pytest.fixture(scope="module")
def people_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("beam") / "people.prov"
    load_example("people_beam").capture_people(str(store))
    return store


def test_running_example_matches_paper_table4(people_store: Path) -> None:
    got = captured(people_store)
    assert len(got.triples) == 15
    # Paper value ids -> (table, column, row content): Person1 in the paper's
    # order, Person2 = Steve, Mark, Shane, AvgAge = NY, LA (Table 4).
    person = {p["Name"]: p for p in PEOPLE}
    rows = {
        "Person1": [person[n] for n in ("Steve", "Mark", "Shane", "Mary")],
        "Person2": [person[n] for n in ("Steve", "Mark", "Shane")],
        "AvgAge": [{"City": "NY", "Age": 35.0}, {"City": "LA", "Age": 40.0}],
    }
    values = {}
    for line in (DATA / "paper_table4_values.csv").read_text().splitlines()[1:]:
        vid, table, column = line.split(",")
        seen = sum(1 for v in values.values() if v[0] == table and v[1] == column)
        values[int(vid)] = (table, column, freeze(rows[table][seen]))
    parents: dict[tuple[Any, ...], set[tuple[Any, ...]]] = collections.defaultdict(set)
    for line in (DATA / "paper_table4_triples.csv").read_text().splitlines()[1:]:
        src, dst, _ = line.split(",")
        parents[values[int(dst)]].add(values[int(src)])
    expected = collections.Counter((*dst, frozenset(ps)) for dst, ps in parents.items())
    assert got.lineage() == expected
    # Person1 keeps its given order; Mary's cells have no triple at all.
    assert [got.rows["Person1"][i]["Name"] for i in range(4)] == ["Steve", "Mark", "Shane", "Mary"]
    assert all(got.cell(t["src"])[2] != 3 or got.cell(t["src"])[0] != "Person1" for t in got.triples)


def test_running_example_catalogue(people_store: Path) -> None:
    got = captured(people_store)
    t = got.tables
    assert [t[n]["columns"] for n in ("Person1", "Person2", "AvgAge")] == [["Name", "City", "Age"]] * 2 + [
        ["City", "Age"]
    ]
    assert [t[n]["rows"] for n in ("Person1", "Person2", "AvgAge")] == [4, 3, 2]
    assert [t[n]["origin"] for n in ("Person1", "Person2", "AvgAge")] == ["source", "output", "output"]
    r1, r2 = got.ops["R1"], got.ops["R2"]
    assert (r1["inputs"], r1["outputs"], r1["triples"], r1["kind"]) == (
        [t["Person1"]["table_id"]],
        [t["Person2"]["table_id"]],
        9,
        "builtin",
    )
    assert (r2["inputs"], r2["outputs"], r2["triples"]) == ([t["Person2"]["table_id"]], [t["AvgAge"]["table_id"]], 6)
    assert r1["operations"] == ["Filter"] and r2["operations"] == ["GroupBy.aggregate_field"]
    assert sorted(got.rows["AvgAge"].values(), key=lambda r: r["City"]) == [
        {"City": "LA", "Age": 40.0},
        {"City": "NY", "Age": 35.0},
    ]


def test_lineage_answers_the_same_on_beam_and_spark(
    people_store: Path, tmp_path: Path, cli: Any, request: pytest.FixtureRequest
) -> None:
    probe = cli("lineage", people_store, "AvgAge.Age", "--where", "City = 'NY'", "--json")
    if probe.code != 0 and "not available" in probe.err:
        pytest.skip("`provplug lineage` is not implemented yet")
    if not (EXAMPLES / "people_spark.py").exists():
        pytest.skip("examples/people_spark.py (Spark capture) is not available yet")
    spark_store = tmp_path / "spark.prov"
    load_example("people_spark").capture_people(request.getfixturevalue("spark"), str(spark_store))
    answers = []
    for store in (people_store, spark_store):
        result = cli("lineage", store, "AvgAge.Age", "--where", "City = 'NY'", "--json")
        if result.code != 0 and "index" in result.err:
            assert cli("index", store, "--quiet").code == 0
            result = cli("lineage", store, "AvgAge.Age", "--where", "City = 'NY'", "--json")
        assert result.code == 0, result
        answer = json.loads(result.out)
        answers.append(
            sorted(
                (
                    r["table"],
                    r["column"],
                    r["value"],
                    freeze({k: v for k, v in answer["rows"].get(r["row"], {}).items() if not k.startswith("_")}),
                )
                for r in answer["lineage"]
            )
        )
    assert answers[0] == answers[1]
    assert {(a[0], a[2]) for a in answers[0]} == {("Person2", 30), ("Person2", 40), ("Person1", 30), ("Person1", 40)}


# -- hooks and failures ------------------------------------------------------------
class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    @provplug.hookimpl
    def provplug_run_started(self, run: Any) -> None:
        self.events.append(("run_started", run.engine))

    @provplug.hookimpl
    def provplug_step_started(self, run: Any, step: Any) -> None:
        self.events.append(("step_started", step.name))

    @provplug.hookimpl
    def provplug_step_finished(self, run: Any, step: Any, op: Any) -> None:
        self.events.append(("step_finished", f"{step.name}:{op.name}"))

    @provplug.hookimpl
    def provplug_step_failed(self, run: Any, step: Any, error: BaseException) -> None:
        self.events.append(("step_failed", step.name))

    @provplug.hookimpl
    def provplug_run_finished(self, run: Any, error: BaseException | None) -> None:
        self.events.append(("run_finished", run.status))


def _plugins(recorder: Recorder) -> Plugins:
    pm = make_plugin_manager()
    pm.register(recorder, name="recorder")
    return Plugins(pm)


def test_hooks_fire_as_for_spark(tmp_path: Path) -> None:
    recorder = Recorder()
    capture_filter(tmp_path / "s.prov", PEOPLE, _plugins(recorder))
    assert recorder.events == [
        ("run_started", "beam"),
        ("step_started", "S_filter"),
        ("step_finished", "S_filter:S_filter"),
        ("step_started", "S_pardo"),
        ("step_finished", "S_pardo:S_pardo"),
        ("run_finished", "committed"),
    ]


@provplug.step("Broken", output="Never")
def broken(people: Any) -> Any:
    raise ValueError("bad step")


def test_a_step_failing_while_building_commits_nothing(tmp_path: Path) -> None:
    store, recorder = tmp_path / "s.prov", Recorder()
    pipeline = beam.Pipeline()
    with (
        pytest.raises(ValueError, match="bad step"),
        provplug.capture(pipeline, store=store, plugins=_plugins(recorder)) as run,
    ):
        broken(s_filter(run.source(PEOPLE, "People")))
    assert not store.exists()  # the store was created by this run: removed again
    assert recorder.events[-2:] == [("step_failed", "Broken"), ("run_finished", "failed")]
    with pytest.raises(provplug.CaptureError):
        pipeline.run()


def _explode(p: dict[str, Any]) -> dict[str, Any]:
    raise RuntimeError(f"cannot handle {p['Name']}")


@provplug.step("Explodes", output="Never")
def explodes(people: Any) -> Any:
    return people | beam.Map(_explode)


def test_a_step_failing_while_running_commits_nothing(tmp_path: Path) -> None:
    store = tmp_path / "s.prov"
    capture_filter(store, PEOPLE)
    before = provplug.open_store(store).runs()
    recorder = Recorder()
    with (
        pytest.raises(Exception, match="cannot handle"),
        provplug.capture(beam.Pipeline(), store=store, plugins=_plugins(recorder)) as run,
    ):
        explodes(run.source(PEOPLE, "People"))
    assert provplug.open_store(store).runs() == before
    assert not any((store / "_staging").iterdir())
    assert recorder.events[-1] == ("run_finished", "failed")


def test_plain_beam_code_after_a_step_sees_plain_values(tmp_path: Path) -> None:
    out = tmp_path / "names"
    pipeline = beam.Pipeline()
    with provplug.capture(pipeline, store=tmp_path / "s.prov") as run:
        old = s_filter(run.source(PEOPLE, "People"))
        old | beam.Map(lambda p: p["Name"]) | beam.io.WriteToText(str(out), shard_name_template="")
    assert sorted(out.read_text().split()) == ["Mark", "Shane"]
    assert captured(tmp_path / "s.prov").tables["Old"]["rows"] == 2


# -- pipelines, repeated steps and transforms outside steps (type checks on, issue 11) --
def test_a_test_pipeline_is_captured(tmp_path: Path) -> None:
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.testing.test_pipeline import TestPipeline
    from apache_beam.testing.util import assert_that, equal_to

    def build(run: Any) -> None:
        counted = count_words(run.source(WORDS, "Words"))
        assert_that(counted, equal_to([("a", 2), ("b", 1), ("c", 1)]))  # plain values outside the step

    pipeline = TestPipeline(options=PipelineOptions(runtime_type_check=True))
    got = capture(tmp_path / "s.prov", build, pipeline)
    assert got.lineage() == per_element_expected("WordCounts", "Words", WORDS)


def test_a_step_called_twice(tmp_path: Path) -> None:
    def build(run: Any) -> None:
        count_words(run.source(WORDS, "Words"))
        count_words(run.source(["x", "x"], "More"))

    got = capture(tmp_path / "s.prov", build)
    # The second call is labelled, and names its table, "<name>#2".
    assert got.lineage() == per_element_expected("WordCounts", "Words", WORDS) + per_element_expected(
        "WordCounts#2", "More", ["x", "x"]
    )
    ops = got.store.ops().to_pylist()
    assert [o["name"] for o in ops] == ["CountWords", "CountWords"]
    assert [o["outputs"] for o in ops] == [
        [got.tables["WordCounts"]["table_id"]],
        [got.tables["WordCounts#2"]["table_id"]],
    ]


@provplug.step("SumWords", output="WordSums")
def sum_words(pairs: Any) -> Any:
    return pairs | beam.CombinePerKey(sum)


def test_a_transform_outside_any_step_is_part_of_the_lineage(tmp_path: Path) -> None:
    lines = ["a b", "b"]

    def build(run: Any) -> None:
        pairs = run.source(lines, "Lines") | "Split" >> beam.FlatMap(str.split) | "Pair" >> beam.Map(lambda w: (w, 1))
        sum_words(pairs)

    got = capture(tmp_path / "s.prov", build)
    # Split and Pair are black boxes; the step's CombinePerKey groups them.
    ab, b = {"value": "a b"}, {"value": "b"}
    assert got.lineage() == expect_lineage(
        ("WordSums", "key", kv("a", 1), [("Lines", "value", ab)]),
        ("WordSums", "value", kv("a", 1), [("Lines", "value", ab)]),
        ("WordSums", "key", kv("b", 2), [("Lines", "value", ab), ("Lines", "value", b)]),
        ("WordSums", "value", kv("b", 2), [("Lines", "value", ab), ("Lines", "value", b)]),
    )
    op = got.ops["SumWords"]
    assert op["operations"] == ["FlatMap", "Map", "CombinePerKey"] and op["kind"] == "udf"
    assert op["inputs"] == [got.tables["Lines"]["table_id"]]


def test_an_untraceable_transform_outside_any_step_fails_instead_of_cutting(tmp_path: Path) -> None:
    with (
        pytest.raises(provplug.CaptureError, match="Shuffle"),
        provplug.capture(typed_pipeline(), store=tmp_path / "s.prov") as run,
    ):
        sum_words(run.source([("a", 1)], "Pairs") | "Shuffle" >> beam.Reshuffle())


@provplug.step("Frequent", output="FrequentWords")
def frequent(counts: Any) -> Any:
    return counts | beam.Filter(lambda kv: kv[1] >= 2)


def test_a_composite_outside_any_step_is_part_of_the_lineage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Beam parses sys.argv for pipeline options and says so on stdout when it
    # meets pytest's own flags (-q, -x): keep this test's stdout to the pipeline's.
    monkeypatch.setattr("sys.argv", ["pytest"])

    def build(run: Any) -> None:
        counts = run.source(WORDS, "Words") | "Count" >> beam.combiners.Count.PerElement()
        counts | "Show" >> beam.Map(print)  # plain code sees plain values
        frequent(counts)

    got = capture(tmp_path / "s.prov", build)
    # Count.PerElement (black box, then a combine per word), then a Filter (copy).
    a = [("Words", "value", word("a"))] * 2
    assert got.lineage() == expect_lineage(
        ("FrequentWords", "key", kv("a", 2), a), ("FrequentWords", "value", kv("a", 2), a)
    )
    assert got.ops["Frequent"]["operations"] == ["Map", "CombinePerKey", "Filter"]
    assert sorted(capsys.readouterr().out.split()) == sorted(["('a',", "2)", "('b',", "1)", "('c',", "1)"])
