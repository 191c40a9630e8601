"""``provplug run --reduce SPEC`` (issue 14): an unmodified script's run with
its provenance reduced in production mode (the script reads its own inputs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import EXAMPLES

from provplug.store.open import open_store

from .helpers import labelled_triples

SCRIPT = EXAMPLES / "sales_script" / "sales.py"
DATA = EXAMPLES / "sales_script" / "data"
KEYS = {
    "orders": ["order_id"],
    "customers": ["customer_id"],
    "enriched": ["order_id"],
    "by_region": ["region"],
    "big_regions": ["region"],
}


def test_run_reduce_keeps_only_the_kept_orders_paths(spark: Any, cli: Any, store_path: Path, tmp_path: Path) -> None:
    result = cli(
        "run",
        "--store",
        store_path,
        "--reduce",
        "orders=keep:where=order_id IN (10, 11)",
        SCRIPT,
        DATA,
        tmp_path / "out",
    )
    assert result.code == 0, result.err
    (manifest,) = open_store(store_path).runs()
    assert manifest["reduction"] == {
        "mode": "production",
        "tables": {"orders": {"technique": "keep", "params": {"where": "order_id IN (10, 11)"}, "seed": 0}},
    }
    triples = labelled_triples(store_path, KEYS)
    # orders 10..14 are all stored and computed; only 10 and 11 start triples. customers is not reduced.
    assert {t[0][2] for t in triples if t[0][0] == "orders"} == {10, 11}
    assert {t[0][2] for t in triples if t[0][0] == "customers"} == {1, 2, 3}
    assert {t[1][2] for t in triples if t[1][0] == "enriched" and t[0][0] == "orders"} == {10, 11}


def test_run_refuses_a_malformed_reduce_before_running(cli: Any, store_path: Path, tmp_path: Path) -> None:
    result = cli("run", "--store", store_path, "--reduce", "orders=shuffle:ratio=0.5", SCRIPT, DATA, tmp_path / "out")
    assert result.code == 2 and "unknown reduction 'shuffle'" in result.err
    assert not (tmp_path / "out").exists() and not store_path.exists()
