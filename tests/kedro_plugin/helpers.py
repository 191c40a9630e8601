"""Running the example Kedro project as a user would: ``kedro run`` in a copy of it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import EXAMPLES

PROJECT = EXAMPLES / "kedro_spaceflights"
# Kedro's telemetry plugin is installed with Kedro: it must never reach the network.
NO_TELEMETRY = {"DO_NOT_TRACK": "1", "KEDRO_DISABLE_TELEMETRY": "true"}


def copy_project(destination: Path) -> Path:
    """A fresh copy of the example project (its shipped inputs only)."""
    return Path(
        shutil.copytree(
            PROJECT,
            destination,
            ignore=shutil.ignore_patterns("__pycache__", "03_primary", "08_reporting", "09_provenance", "*.prov"),
        )
    )


def kedro_run(project: Path, *args: str, store: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``kedro run ARGS`` in ``project``, with ``PROVPLUG_STORE`` set to ``store`` (or unset)."""
    env = {k: v for k, v in os.environ.items() if k != "PROVPLUG_STORE"}
    env.update(NO_TELEMETRY)
    if store is not None:
        env["PROVPLUG_STORE"] = str(store)
    return subprocess.run(
        [sys.executable, "-m", "kedro", "run", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def outputs(project: Path) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of the project's output datasets, sorted."""
    import pyarrow.csv as pcsv
    import pyarrow.dataset as ds

    data = project / "data"
    tables = {
        "model_input_table": ds.dataset(data / "03_primary" / "model_input_table.parquet").to_table(),
        "price_by_location": ds.dataset(data / "08_reporting" / "price_by_location.parquet").to_table(),
        "top_shuttles": pcsv.read_csv(next((data / "08_reporting" / "top_shuttles.csv").glob("part-*.csv"))),
    }
    return {name: sorted(tuple(row.values()) for row in t.to_pylist()) for name, t in tables.items()}
