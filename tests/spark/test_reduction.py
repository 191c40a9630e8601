"""Capture-time provenance reduction (issue 14) on the thesis's running
example: Table 4.1 (paper 001), the average temperature per country.

Expected answers are derived by hand from the thesis (papers-digest §3, with
its errata: t_a = 307/6 = 51.17, partial means 0 < |prov'(t)| < |prov(t)|).
Where the thesis shows one particular random draw (Tables 4.7, 4.10), the
draw is injected with ``keep(where=...)``; the seeded samplers' properties
are tested separately.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

import provplug
from provplug import reduce
from provplug.errors import CaptureError, ReductionError
from provplug.reduce.metrics import compare
from provplug.store.open import open_store

from .helpers import F, table_rows

WEATHER = (
    [
        ("t0", "26-04-2016", 66, -153, 51, "Alaska USA"),
        ("t1", "26-04-2016", 68, -151, 39, "Alaska USA"),
        ("t2", "26-04-2016", 65, -152, 60, "Alaska USA"),
        ("t3", "26-04-2016", -16, 145, 18, "Australia"),
        ("t4", "26-04-2016", -16, 140, 20, "Australia"),
        ("t5", "26-04-2016", 66, -153, 54, "Alaska USA"),
        ("t6", "26-04-2016", 65, -151, 49, "Alaska USA"),
        ("t7", "26-04-2016", 65, -152, 54, "Alaska USA"),
        ("t8", "26-04-2016", -33, 151, 23, "Australia"),
        ("t9", "26-04-2016", -33, 158, 17, "Australia"),
        ("t10", "26-04-2016", -31, 115, 18, "Australia"),
        ("t11", "26-04-2016", -31, 118, 23, "Australia"),
    ],
    "Tuple string, Date string, Latitude int, Longitude int, Temperature int, Country string",
)
ALASKA = {"t0", "t1", "t2", "t5", "t6", "t7"}
AUSTRALIA = {"t3", "t4", "t8", "t9", "t10", "t11"}
# Table 4.5's clusters, injected (they are not a k-means optimum, see the digest's errata).
TABLE_4_5 = "CASE WHEN Latitude > 0 THEN 1 WHEN Latitude > -20 THEN 2 ELSE 3 END"


@provplug.step("P", output="AvgTemp")
def average_per_country(weather: Any) -> Any:
    return weather.groupBy("Country").agg(F.avg("Temperature").alias("AvgTemperature"))


def run_p(spark: Any, store: Path, **options: Any) -> dict[str, float]:
    """Program P on Table 4.1, captured; returns its result per country."""
    with provplug.capture(spark, store=store, **options) as run:
        weather = run.source(spark.createDataFrame(*WEATHER).coalesce(1), "Weather")
        result = average_per_country(weather)
        return {r["Country"]: r["AvgTemperature"] for r in result.collect()}


def prov(store: Path, country: str) -> set[str]:
    """prov'(t) of the result tuple of ``country``: the Weather tuples among its ancestors."""
    answer = provplug.open(store).lineage(
        table="AvgTemp", column="AvgTemperature", where=f"Country = '{country}'", method="rq"
    )
    return {r["row"]["Tuple"] for r in answer.sources_only().lineage if r["table"] == "Weather"}


def kept_tuples(store: Path) -> set[str]:
    return {r["Tuple"] for r in table_rows(store, "Weather")}


@pytest.fixture(scope="module")
def full_store(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("full") / "full.prov"
    result = run_p(spark, store)
    assert result["Alaska USA"] == pytest.approx(307 / 6)  # 51.17 (the thesis's 51.66 is an erratum)
    assert result["Australia"] == pytest.approx(119 / 6)  # 19.83
    return store


def metrics_of(full: Path, reduced: Path) -> dict[str, Any]:
    (table,) = compare(open_store(full), open_store(reduced))["tables"]
    return table


# -- the full run and Table 5.11 -------------------------------------------------------------
def test_the_full_run_has_full_provenance_for_both_result_tuples(full_store: Path) -> None:
    m = metrics_of(full_store, full_store)
    assert (m["rows_full"], m["rows_partial"], m["rows_none"], m["ppm"]) == (2, 0, 0, 1.0)
    assert m["prov"] == 12 and m["key"] == ["Country"]
    assert prov(full_store, "Alaska USA") == ALASKA


def test_thesis_mode_kept_t0_t1_t2_gives_one_partial_one_none_and_ppm_a_quarter(
    spark: Any, full_store: Path, tmp_path: Path
) -> None:
    reduced = tmp_path / "reduced.prov"
    result = run_p(spark, reduced, reduce={"Weather": reduce.keep("Tuple IN ('t0', 't1', 't2')")}, reduce_mode="thesis")
    assert result == {"Alaska USA": pytest.approx(50.0)}  # t_a' = (51 + 39 + 60) / 3; t_b is gone
    m = metrics_of(full_store, reduced)
    # t_a: |prov| 6, |prov'| 3 -> partial; t_b: not in Res' -> none; PPM = 1 - (3 + 6) / 12.
    assert (m["rows_full"], m["rows_partial"], m["rows_none"]) == (0, 1, 1)
    assert m["ppm"] == pytest.approx(0.25)
    assert (m["rows"], m["reduced_rows"], m["prov"], m["prov_reduced"]) == (2, 1, 12, 3)
    assert prov(reduced, "Alaska USA") == {"t0", "t1", "t2"}


# -- the techniques on Table 4.1 -----------------------------------------------------------
@pytest.mark.parametrize("width", [5, 6])  # the thesis says 5 but lists buckets 6 wide: same largest bucket
def test_the_histogram_keeps_the_largest_temperature_bucket(spark: Any, tmp_path: Path, width: int) -> None:
    store = tmp_path / "hist.prov"
    run_p(spark, store, reduce={"Weather": reduce.histogram("Temperature", width)}, reduce_mode="thesis")
    assert kept_tuples(store) == {"t3", "t4", "t9", "t10"}
    assert prov(store, "Australia") == {"t3", "t4", "t9", "t10"}


def test_table_4_7_sampling_within_clusters_leaves_t1_t2_t6_t7_for_t_a(spark: Any, tmp_path: Path) -> None:
    store = tmp_path / "t47.prov"
    draw = "Tuple IN ('t1', 't2', 't3', 't6', 't7', 't8', 't9')"  # Table 4.7
    run_p(spark, store, reduce={"Weather": reduce.keep(draw)}, reduce_mode="thesis")
    assert prov(store, "Alaska USA") == {"t1", "t2", "t6", "t7"}


def test_table_4_10_sampling_within_classes_leaves_t0_t1_t5_t6_for_t_a(spark: Any, tmp_path: Path) -> None:
    store = tmp_path / "t410.prov"
    draw = "Tuple IN ('t0', 't1', 't5', 't6', 't3', 't4', 't10', 't11')"  # Table 4.10
    run_p(spark, store, reduce={"Weather": reduce.keep(draw)}, reduce_mode="thesis")
    assert prov(store, "Alaska USA") == {"t0", "t1", "t5", "t6"}


def test_table_4_9_eliminating_classes_keeps_australia_only(spark: Any, full_store: Path, tmp_path: Path) -> None:
    store = tmp_path / "t49.prov"
    run_p(
        spark,
        store,
        reduce={"Weather": reduce.equivalence("Country", variant="eliminate", classes=["Australia"])},
        reduce_mode="thesis",
    )
    assert prov(store, "Australia") == AUSTRALIA
    m = metrics_of(full_store, store)
    assert (m["rows_full"], m["rows_partial"], m["rows_none"], m["ppm"]) == (1, 0, 1, 0.5)


def test_injected_clusters_of_table_4_5_eliminated_and_sampled(spark: Any) -> None:
    weather = spark.createDataFrame(*WEATHER)
    only_2 = reduce.kmeans(["Latitude", "Longitude"], 3, variant="eliminate", clusters=[2], assignment=TABLE_4_5)
    assert {r["Tuple"] for r in only_2.select(weather).collect()} == {"t3", "t4"}  # Table 4.6
    within = reduce.kmeans(["Latitude", "Longitude"], 3, variant="sample", ratio=0.66, assignment=TABLE_4_5, seed=3)
    kept = {r["Tuple"] for r in within.select(weather).collect()}
    # round(0.66 * n) of each cluster: 4 of 6 (cluster 1), 1 of 2 (cluster 2), 3 of 4 (cluster 3).
    assert (len(kept & ALASKA), len(kept & {"t3", "t4"}), len(kept & {"t8", "t9", "t10", "t11"})) == (4, 1, 3)


def test_real_kmeans_is_seeded_and_separates_the_two_continents(spark: Any) -> None:
    weather = spark.createDataFrame(*WEATHER)
    keep_half = reduce.kmeans(["Latitude", "Longitude"], 2, variant="eliminate", ratio=0.5, seed=11)
    first = {r["Tuple"] for r in keep_half.select(weather).collect()}
    assert first in (ALASKA, AUSTRALIA)  # k = 2: one cluster per continent; ratio 0.5 takes one
    assert {r["Tuple"] for r in keep_half.select(weather.repartition(3)).collect()} == first


# -- the seeded samplers -----------------------------------------------------------------------
def test_random_sampling_keeps_about_the_ratio_and_the_same_rows_for_a_seed(spark: Any) -> None:
    rows = spark.range(4000).select(F.col("id"), (F.col("id") % 7).alias("g"))
    draw = {r["id"] for r in reduce.sample(0.33, seed=1).select(rows).collect()}
    assert abs(len(draw) / 4000 - 0.33) < 0.03  # binomial sd ~0.0074
    again = {r["id"] for r in reduce.sample(0.33, seed=1).select(rows.repartition(5).orderBy(F.desc("id"))).collect()}
    assert again == draw  # the rows' content decides, not their order or partitioning
    other = {r["id"] for r in reduce.sample(0.33, seed=2).select(rows).collect()}
    assert other != draw and abs(len(other) / 4000 - 0.33) < 0.03


def test_stratified_sampling_keeps_the_ratio_of_every_stratum(spark: Any) -> None:
    rows = spark.createDataFrame(
        [(i, "a" if i < 30 else "b" if i < 40 else "c") for i in range(43)], "id int, s string"
    )
    kept = reduce.stratified("s", 0.66, seed=5).select(rows).collect()
    per = {s: sum(1 for r in kept if r["s"] == s) for s in "abc"}
    assert per == {"a": 20, "b": 7, "c": 2}  # round(0.66 * 30) = 20, round(6.6) = 7, round(1.98) = 2
    again = reduce.stratified("s", 0.66, seed=5).select(rows.repartition(4)).collect()
    assert {r["id"] for r in again} == {r["id"] for r in kept}


def test_histogram_with_a_ratio_takes_the_most_frequent_buckets_until_the_ratio(spark: Any) -> None:
    weather = spark.createDataFrame(*WEATHER)
    # Width 6 from 17: [17,23) t3 t4 t9 t10 (4), [47,53) t0 t6 (2), [53,59) t5 t7 (2), [23,29) t8 t11 (2), ...
    kept = {r["Tuple"] for r in reduce.histogram("Temperature", 6, ratio=0.5).select(weather).collect()}
    assert kept == {"t3", "t4", "t9", "t10", "t8", "t11"}  # 4 < 6, then the lowest bucket of size 2: [23,29)


# -- production mode ---------------------------------------------------------------------------
def test_production_mode_is_the_default_keeps_the_results_and_only_the_kept_rows_triples(
    spark: Any, full_store: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No reduce_mode named: production; the results are the full run's, and nothing warns."""
    store = tmp_path / "prod.prov"
    with caplog.at_level(logging.WARNING, logger="provplug.reduce"):
        result = run_p(spark, store, reduce={"Weather": reduce.keep("Tuple IN ('t0', 't1', 't2')")})
    assert not [r for r in caplog.records if r.name == "provplug.reduce"]
    assert result == {"Alaska USA": pytest.approx(307 / 6), "Australia": pytest.approx(119 / 6)}
    assert open_store(store).runs()[0]["reduction"]["mode"] == "production"
    # Every table's stored rows are those of the unreduced run, byte for byte in value.
    for name in ("Weather", "AvgTemp"):
        assert sorted(map(json.dumps, table_rows(store, name))) == sorted(map(json.dumps, table_rows(full_store, name)))
    m = metrics_of(full_store, store)
    assert (m["rows_full"], m["rows_partial"], m["rows_none"], m["ppm"]) == (0, 1, 1, 0.25)
    assert prov(store, "Alaska USA") == {"t0", "t1", "t2"} and prov(store, "Australia") == set()
    # The triples kept are exactly the full run's triples from t0, t1, t2 (rows 0-2: one partition).
    full_triples = open_store(full_store).triples().to_table().to_pylist()
    kept = [t for t in full_triples if t["src"] & 0xFFFFFFFFF in (0, 1, 2)]
    stored = open_store(store).triples().to_table().to_pylist()
    assert len(stored) == len(kept) > 0
    assert sorted((t["src"] & ~(0x1FFFF << 46), t["dst"] & ~(0x1FFFF << 46)) for t in stored) == sorted(
        (t["src"] & ~(0x1FFFF << 46), t["dst"] & ~(0x1FFFF << 46)) for t in kept
    )
    assert open_store(store).stats()["triples"] == len(kept)  # the manifest counts what is kept


def test_production_mode_follows_paths_through_two_steps(spark: Any, tmp_path: Path) -> None:
    @provplug.step("Warm", output="Warm")
    def warm(weather: Any) -> Any:
        return weather.filter(F.col("Temperature") >= 20).select("Tuple", "Country", "Temperature")

    store = tmp_path / "two.prov"
    with provplug.capture(
        spark, store=store, reduce={"Weather": "keep:where=Tuple IN ('t0', 't3', 't4', 't8')"}, reduce_mode="production"
    ) as run:
        weather = run.source(spark.createDataFrame(*WEATHER).coalesce(1), "Weather")
        average_per_country(warm(weather)).collect()
    # Warm drops t3 (18), t9 (17) and t10 (18): of the kept rows t0, t4 and t8 reach AvgTemp.
    assert prov(store, "Alaska USA") == {"t0"}
    assert prov(store, "Australia") == {"t4", "t8"}
    answer = provplug.open(store).lineage(table="Warm", column="Temperature", where="Tuple = 't5'", method="rq")
    assert answer.lineage == []  # t5 was not kept: its Warm row has no triple


def test_thesis_mode_only_when_named_changes_the_results_and_warns(
    spark: Any, full_store: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The same reduction, thesis mode named: the result is computed from the
    kept rows (Australia is gone, Alaska's average is of t0-t2), and the
    capture says so on the provplug.reduce logger before the run starts."""
    plain = run_p(spark, tmp_path / "plain.prov")  # the pipeline with nothing reduced
    with caplog.at_level(logging.WARNING, logger="provplug.reduce"):
        thesis = run_p(
            spark,
            tmp_path / "thesis.prov",
            reduce={"Weather": reduce.keep("Tuple IN ('t0', 't1', 't2')")},
            reduce_mode="thesis",
        )
    assert thesis != plain and thesis == {"Alaska USA": pytest.approx(50.0)}
    (warning,) = [r for r in caplog.records if r.name == "provplug.reduce"]
    assert warning.levelno == logging.WARNING
    assert "reduce_mode='thesis'" in warning.getMessage() and "computed from the kept rows only" in warning.getMessage()
    assert "Weather" in warning.getMessage()


# -- recorded on the run, shown to users -------------------------------------------------------
def test_the_reduction_is_recorded_and_shown(spark: Any, tmp_path: Path, cli: Any) -> None:
    store = tmp_path / "shown.prov"
    run_p(spark, store, reduce={"Weather": reduce.sample(0.5, seed=4)}, reduce_mode="production")
    (manifest,) = open_store(store).runs()
    assert manifest["reduction"] == {
        "mode": "production",
        "tables": {"Weather": {"technique": "sample", "params": {"ratio": 0.5}, "seed": 4}},
    }
    runs = cli("runs", store)
    assert "production: Weather=sample(ratio=0.5, seed=4)" in runs.out
    stats = cli("stats", store, "--json")
    assert json.loads(stats.out)["reduced_runs"] == [{"run_id": manifest["run_id"], **manifest["reduction"]}]
    answer = provplug.open(store).lineage(
        table="AvgTemp", column="AvgTemperature", where="Country = 'Australia'", method="rq"
    )
    assert answer.stats["reduction"] == {manifest["run_id"]: manifest["reduction"]}
    text = cli("lineage", store, "AvgTemp.AvgTemperature", "--where", "Country = 'Australia'", "--method", "rq")
    assert "reduced provenance: run" in text.out and "sample(ratio=0.5, seed=4)" in text.out


def test_metrics_command_prints_and_writes_json(full_store: Path, spark: Any, tmp_path: Path, cli: Any) -> None:
    store = tmp_path / "m.prov"
    run_p(spark, store, reduce={"Weather": reduce.keep("Tuple IN ('t0', 't1', 't2')")}, reduce_mode="thesis")
    out = cli("metrics", full_store, store, "AvgTemp", "--json")
    assert out.code == 0, out.err
    data = json.loads(out.out)
    assert data["tables"][0]["ppm"] == 0.25 and data["reduced"]["reduction"]["mode"] == "thesis"
    assert data["reduced"]["triples"] < data["full"]["triples"]
    text = cli("metrics", full_store, store)
    assert text.code == 0 and "AvgTemp" in text.out and "0.2500" in text.out
    bad = cli("metrics", full_store, store, "Nope")
    assert bad.code == 2 and "no output table 'Nope'" in bad.err


# -- refusals ---------------------------------------------------------------------------------
def test_a_reduction_of_a_table_never_registered_fails_the_run(spark: Any, tmp_path: Path) -> None:
    store = tmp_path / "typo.prov"
    with pytest.raises(CaptureError, match="'Wether', which the run never registered"):
        run_p(spark, store, reduce={"Wether": reduce.sample(0.5)})
    assert not open_store(store).exists() or open_store(store).runs() == []


def test_reduction_is_refused_for_beam_and_unknown_modes(spark: Any, tmp_path: Path) -> None:
    beam = pytest.importorskip("apache_beam")
    with (
        pytest.raises(CaptureError, match="the beam adapter cannot reduce"),
        provplug.capture(beam.Pipeline(), store=tmp_path / "b.prov", reduce={"T": reduce.sample(0.5)}),
    ):
        pass
    with (
        pytest.raises(CaptureError, match="reduce_mode"),
        provplug.capture(spark, store=tmp_path / "m.prov", reduce={"T": reduce.sample(0.5)}, reduce_mode="lazy"),
    ):
        pass
    assert not (tmp_path / "b.prov").exists() and not (tmp_path / "m.prov").exists()
    with pytest.raises(ReductionError, match="ratio"):
        reduce.sample(1.5)
