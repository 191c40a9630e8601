"""The Spark index path: the paper's Tables 6-8 through the CLI, and exact
agreement with the local path on a generated graph that needs recursion."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_index import TABLE7, TABLE7_SPLITS, _check_table7, imported, read_index
from test_index_properties import make_store


def comparable(idx: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: sorted(json.dumps(r, sort_keys=True) for r in v) for k, v in idx.items() if k != "meta"}
    meta = idx["meta"]
    out["meta"] = {k: meta[k] for k in ("theta", "splits", "split_tree", "counts", "workflow", "runs")}
    return out


def test_table7_on_spark_via_cli(spark: Any, cli, store_path: Path, tmp_path: Path, monkeypatch: Any) -> None:
    import provplug
    from provplug.index import spark_engine, sparkwcc

    # Force every component through the level-synchronous Spark path (not
    # the in-task Algorithm 3), its link graphs through large-star/small-star.
    monkeypatch.setattr(spark_engine, "COMPONENT_TASK_LIMIT", 0)
    monkeypatch.setattr(sparkwcc, "TASK_EDGE_LIMIT", 0)

    imported(store_path, TABLE7)
    splits = tmp_path / "splits.json"
    splits.write_text(json.dumps(TABLE7_SPLITS))
    r = cli("index", store_path, "--theta", "4", "--splits", splits, "--spark")
    assert r.code == 0, r
    assert "(spark," in r.out
    assert "components: 1 components indexed on Spark" in r.err
    store = provplug.open_store(store_path)
    _check_table7(read_index(store))
    gen = Path(store_path, "index", read_index(store)["meta"]["generation"])
    assert not (gen / "_scratch").exists()


def test_spark_and_local_paths_give_identical_indexes(spark: Any, tmp_path: Path) -> None:
    from provplug.index import build_index

    # Seed 5, 5 tables, theta 8: Algorithm 3 recurses three split levels deep
    # (small on purpose: every split depth is another Spark WCC run).
    store, triples, _ = make_store(tmp_path, seed=5, n_tables=5, values_per_table=20)
    build_index(store, theta=8, engine="local")
    local = comparable(read_index(store))
    meta = build_index(store, theta=8, engine="spark", spark=spark)
    assert meta["engine"] == "spark"
    assert comparable(read_index(store)) == local
    assert local["meta"]["counts"]["triples"] == len(triples)
    assert "sp1.1.1" in {json.loads(r)["split"] for r in local["sets"]}  # the recursion was exercised
