"""The official kedro-starters ``spaceflights-pyspark`` project (rendered from
its template, its shipped data, its code unchanged: spaceflights_pyspark/)
under ``PROVPLUG_STORE=... kedro run``, as a user runs it, against a plain
``kedro run``. The project is kedro-org/kedro-starters at commit 7350687
(Apache-2.0; its LICENSE kept beside it), rendered by cookiecutter with
``kedro new``'s starter defaults (kedro_version=1.7.0, tools=['None'],
example_pipeline=False); nothing was changed or added but the LICENSE.

The starter mixes pandas and Spark nodes: companies, shuttles and reviews are
read by pandas, preprocessed by pandas nodes and saved through Spark datasets
(CSV); ``create_model_input_table_node`` joins them in Spark; the data-science
nodes split and fit with pandas and scikit-learn. provplug captures the Spark
node cell by cell and the pandas nodes as coarse steps; the run's outputs are
those of the plain run.
"""

from __future__ import annotations

import os
import pickle
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import provplug

pytest.importorskip("kedro_datasets.spark")
pytest.importorskip("sklearn")

PROJECT = Path(__file__).parent / "spaceflights_pyspark"
RAW = PROJECT / "data" / "01_raw"
NO_TELEMETRY = {"DO_NOT_TRACK": "1", "KEDRO_DISABLE_TELEMETRY": "true"}
PREPROCESSED = ("preprocessed_companies", "preprocessed_shuttles", "preprocessed_reviews")


def _start_kedro_run(project: Path, store: Path | None) -> subprocess.Popen[str]:
    """``kedro run`` in ``project`` (with ``PROVPLUG_STORE=store`` when given), as a user starts it."""
    env = {k: v for k, v in os.environ.items() if k != "PROVPLUG_STORE"}
    env.update(NO_TELEMETRY)
    env.setdefault("PYSPARK_PYTHON", sys.executable)  # Spark's Python workers: this venv's, as when it is activated
    if store is not None:
        env["PROVPLUG_STORE"] = str(store)
    log = (project / "kedro-run.log").open("w")
    return subprocess.Popen(
        [sys.executable, "-m", "kedro", "run"], cwd=project, env=env, stdout=log, stderr=subprocess.STDOUT, text=True
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Path]]:
    """The plain run's project, the captured run's project and its store (both runs at once)."""
    root = tmp_path_factory.mktemp("spaceflights_pyspark")
    caches = shutil.ignore_patterns("__pycache__", ".ruff_cache")
    plain = Path(shutil.copytree(PROJECT, root / "plain", ignore=caches))
    captured = Path(shutil.copytree(PROJECT, root / "captured", ignore=caches))
    store = root / "run.prov"
    processes = [_start_kedro_run(plain, None), _start_kedro_run(captured, store)]
    try:
        codes = [p.wait(timeout=1200) for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
    for project, code in zip((plain, captured), codes, strict=True):
        assert code == 0, (project / "kedro-run.log").read_text()[-4000:]
    yield plain, captured, store


def _spark_csv(folder: Path) -> pd.DataFrame:
    """A Spark CSV output folder's rows, in Spark's order (part files by name)."""
    parts = sorted(folder.glob("part-*.csv"))
    return pd.concat([pd.read_csv(p) for p in parts], ignore_index=True)


def _regressor(project: Path) -> Any:
    (path,) = (project / "data" / "06_models" / "regressor.pickle").glob("*/regressor.pickle")  # versioned
    with path.open("rb") as f:
        return pickle.load(f)


def _r2(project: Path) -> str:
    """The R^2 evaluate_model_node logs (its metrics dataset is in memory only)."""
    (score,) = re.findall(r"coefficient R\^2 of ([0-9.]+)", (project / "kedro-run.log").read_text())
    return str(score)


def test_the_captured_run_writes_what_the_plain_run_writes(runs: tuple[Path, Path, Path]) -> None:
    plain, captured, store = runs
    primary = Path("data") / "03_primary" / "model_input_table.parquet"
    # pandas reads the parquet folder as split_data_node does: same rows, same order, same types.
    pd.testing.assert_frame_equal(pd.read_parquet(plain / primary), pd.read_parquet(captured / primary))
    for name in PREPROCESSED:
        folder = Path("data") / "02_intermediate" / f"{name}.csv"
        pd.testing.assert_frame_equal(_spark_csv(plain / folder), _spark_csv(captured / folder))
    # The model: LinearRegression (deterministic) on train_test_split(random_state=3) of those rows.
    model, model_captured = _regressor(plain), _regressor(captured)
    assert model.coef_.tolist() == model_captured.coef_.tolist()
    assert model.intercept_ == model_captured.intercept_
    assert _r2(plain) == _r2(captured) == "0.413"
    assert not (plain / "run.prov").exists() and store.exists()


def _names(store: Path) -> dict[str, str]:
    """Dataset (without Kedro's transcoding suffix) -> the table's name in the store."""
    return {t["name"].partition("@")[0]: t["name"] for t in provplug.open_store(store).tables().to_pylist()}


def test_the_spark_node_is_traced_and_the_pandas_nodes_are_coarse_steps(runs: tuple[Path, Path, Path]) -> None:
    _, _, store = runs
    ops = {o["name"]: o for o in provplug.open_store(store).ops().to_pylist()}
    assert ops["create_model_input_table_node"]["kind"] == "builtin"
    assert ops["create_model_input_table_node"]["triples"] > 0
    coarse = {name for name, op in ops.items() if op["kind"] == "coarse"}
    # The reporting node that aggregates in Spark returns pandas (toPandas): coarse too. Nodes that
    # write no table (train_model: a model; evaluate_model: a dict; the figures) are not steps.
    assert {
        "preprocess_companies_node",
        "preprocess_shuttles_node",
        "preprocess_reviews_node",
        "split_data_node",
    } < coarse
    assert len(coarse) == 5 and set(ops) == coarse | {"create_model_input_table_node"}
    tables = {t["name"].partition("@")[0]: t for t in provplug.open_store(store).tables().to_pylist()}
    assert {n: tables[n]["origin"] for n in ("companies", "shuttles", "reviews")} == dict.fromkeys(
        ("companies", "shuttles", "reviews"), "source"
    )
    assert tables["model_input_table"]["rows"] == 6038
    (manifest,) = provplug.open_store(store).runs()
    assert not manifest.get("uncaptured_writes")


def _entries(answer: Any) -> list[tuple[str, str, Any, str]]:
    return sorted((v["table"], v["column"], v["value"], v["row"]) for v in answer.to_dict()["lineage"])


def test_the_lineage_of_a_model_input_table_cell_by_hand(runs: tuple[Path, Path, Path]) -> None:
    """The first row of model_input_table (shuttle S, company C), derived by hand
    from the node code and the raw data. The Spark node: ``shuttles`` renames
    id to shuttle_id, ``companies`` id to company_id; ``shuttles JOIN reviews
    USING (shuttle_id)`` then ``JOIN companies USING (company_id)``, dropna. A
    merged USING key derives from the key cells of both matched rows; any other
    column from its side's matched row. The pandas preprocessing nodes keep
    row order (CSV written and read back in order), so the preprocessed row of
    a shuttle is its position in shuttles.xlsx (likewise companies.csv,
    reviews.csv). Beyond them, each pandas node is a coarse step: every row of
    every column of its raw input."""
    plain, _, store = runs
    first = pd.read_parquet(plain / "data" / "03_primary" / "model_input_table.parquet").iloc[0]
    shuttle, company = int(first["shuttle_id"]), int(first["company_id"])
    companies = pd.read_csv(RAW / "companies.csv")
    reviews = pd.read_csv(RAW / "reviews.csv")
    shuttles = pd.read_excel(RAW / "shuttles.xlsx")
    (s_row,) = shuttles.index[shuttles["id"] == shuttle]
    (c_row,) = companies.index[companies["id"] == company]
    (r_row,) = reviews.index[reviews["shuttle_id"] == shuttle]
    assert shuttles.loc[s_row, "company_id"] == company
    ids = {t["name"].partition("@")[0]: t["table_id"] for t in provplug.open_store(store).tables().to_pylist()}

    def at(table: str, row: int) -> str:
        return f"{ids[table]}:{row}"

    opened = provplug.open(store)
    table = _names(store)["model_input_table"]
    where = f"shuttle_id = {shuttle}"

    answer = opened.lineage(table=table, column="company_id", where=where, method="rq")
    assert _entries(answer) == sorted(
        [
            ("preprocessed_shuttles", "company_id", company, at("preprocessed_shuttles", s_row)),
            ("preprocessed_companies", "id", company, at("preprocessed_companies", c_row)),
        ]
    )
    crossings = {c["op"]: c for c in answer.coarse}
    assert set(crossings) == {"preprocess_shuttles_node", "preprocess_companies_node"}
    companies_step = crossings["preprocess_companies_node"]
    assert "companies (pandas.core.frame.DataFrame)" in companies_step["reason"]
    assert companies_step["rows"] == "all"
    assert [(t["table"], t["columns"]) for t in companies_step["from"]] == [("preprocessed_companies", ["id"])]
    assert [(t["table"], t["columns"]) for t in companies_step["continues_from"]] == [
        ("companies", companies.columns.tolist())
    ]
    assert [(t["table"], t["columns"]) for t in crossings["preprocess_shuttles_node"]["continues_from"]] == [
        ("shuttles", shuttles.columns.tolist())
    ]

    answer = opened.lineage(table=table, column="review_scores_rating", where=where, method="rq")
    assert _entries(answer) == [
        (
            "preprocessed_reviews",
            "review_scores_rating",
            reviews.loc[r_row, "review_scores_rating"],
            at("preprocessed_reviews", r_row),
        )
    ]
    (reviews_step,) = answer.coarse
    assert reviews_step["op"] == "preprocess_reviews_node" and "reviews (pandas" in reviews_step["reason"]
    assert [(t["table"], t["columns"]) for t in reviews_step["continues_from"]] == [
        ("reviews", reviews.columns.tolist())
    ]
