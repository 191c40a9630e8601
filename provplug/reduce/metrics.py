"""The three metrics of paper 001 (§5.4.2-5.4.4): a reduced run against a full one.

Definitions (per output table T of the full run):

* **prov(t)** of a result row t: the set of *source rows* (rows of the run's
  source tables) among the ancestors of t's cells — the union over its
  cells. A cell's prov is the same for one cell. Ancestors follow the run's
  triples, op by op in op order: each output cell's source rows are
  propagated forward (an output cell read by a later op passes its source
  rows on), so no lineage query per row is needed.
* **Matching result rows.** A row of the full run's T is matched with the row
  of the reduced run's T that has the same *key* values: the columns given
  (``keys``), else T's non-floating-point columns (group keys; an average is
  a float and changes when the input is reduced); when a key value repeats,
  the n-th such row (in row-number order) matches the n-th. A row without a
  match has prov'(t) = ∅ ("no provenance": in thesis mode, a result row the
  reduced input no longer produces). Cells match by row and column name.
* **prov'(t)**: the source rows among the ancestors of the matched row in
  the reduced run. Its size is compared with |prov(t)|, clipped to it: the
  reduced input is a subset of the full input (thesis mode) or the same
  rows (production mode), so for a monotonic pipeline prov'(t) ⊆ prov(t)
  with rows matched by content.
* **Metric 1**: triples and bytes of each run (the triples dataset, and the
  whole run directory), and the triples into T.
* **Metric 2**: result rows (and cells) with full provenance
  (|prov'(t)| = |prov(t)|), partial (0 < |prov'(t)| < |prov(t)|) and none
  (|prov'(t)| = 0 < |prov(t)|).
* **Metric 3**: PPM = 1 - Σ(|prov(t)| - |prov'(t)|) / Σ|prov(t)| over the
  full run's rows (1 when Σ|prov(t)| = 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from provplug import ids, schema
from provplug.errors import LineageQueryError
from provplug.plugin.protocols import Store
from provplug.store.runs import select_run
from provplug.store.triples import TripleFilter, triple_table

ROW_MASK = ids.MAX_ROWS - 1
COLUMN_BITS_MASK = (ids.MAX_COLUMNS - 1) << ids.COLUMN_SHIFT


@dataclass
class RunProvenance:
    """One run of a store: its tables, ops, sizes and per-cell source rows."""

    store: Store
    manifest: dict[str, Any]
    tables: dict[int, dict[str, Any]]
    ops: list[dict[str, Any]]
    files: list[str]

    @property
    def run_id(self) -> str:
        return str(self.manifest["run_id"])

    def table_named(self, name: str) -> dict[str, Any] | None:
        return next((t for t in self.tables.values() if t["name"] == name), None)

    def sizes(self) -> dict[str, Any]:
        """Metric 1 for the run: triples, bytes of triple files and of the whole run."""
        fs = self.store.fs
        triple_bytes = sum(fs.get_file_info(f).size or 0 for f in self.files)
        import pyarrow.fs as pafs

        run_dir = self.store.path("runs", self.run_id)
        infos = fs.get_file_info(pafs.FileSelector(run_dir, recursive=True))
        run_bytes = sum(i.size or 0 for i in infos if i.type == pafs.FileType.File)
        return {
            "store": self.store.uri,
            "run": self.run_id,
            "reduction": self.manifest.get("reduction"),
            "triples": int(self.manifest["counts"].get("triples", 0)),
            "triple_bytes": int(triple_bytes),
            "location_triples": int(self.manifest["counts"].get("location_triples", 0)),
            "run_bytes": int(run_bytes),
        }

    def triples_into(self, table_id: int) -> int:
        return sum(int(o["triples"] or 0) for o in self.ops if table_id in o["outputs"])

    def _op_triples(self, op_id: int) -> pa.Table:
        """The op's triples: stored, or stood for by its location edges."""
        where = TripleFilter.of(ops=[op_id], runs=[self.run_id])
        return triple_table(self.store, ["src", "dst", "src_table", "dst_table"], where)

    def cell_sources(self, wanted: set[int]) -> dict[int, pd.DataFrame]:
        """For each output table in ``wanted``: a frame of (cell, srow) pairs,
        ``srow`` a source row (its id with the column bits cleared), one per
        source row among the cell's ancestors."""
        from provplug.progress import Progress

        progress = Progress()  # a run's ops can hold millions of triples: say where it is
        sources = {t for t, info in self.tables.items() if info["origin"] == "source"}
        pairs: dict[int, pd.DataFrame] = {}
        for done, op in enumerate(sorted(self.ops, key=lambda o: o["op_id"])):
            progress.update(f"metrics: source rows of run {self.run_id}'s cells", done, f"of {len(self.ops)} ops")
            triples = self._op_triples(op["op_id"])
            if triples.num_rows == 0:
                continue
            src = triples.column("src").to_numpy()
            dst = triples.column("dst").to_numpy()
            src_table = triples.column("src_table").to_numpy()
            parts = []
            for table in np.unique(src_table).tolist():
                at = src_table == table
                if table in sources:
                    parts.append(pd.DataFrame({"cell": dst[at], "srow": src[at] & ~COLUMN_BITS_MASK}))
                elif table in pairs:
                    parts.append(_expand(dst[at], src[at], pairs[table]))
            if not parts:
                continue
            found = pd.concat(parts, ignore_index=True).drop_duplicates()
            dst_table = found["cell"].to_numpy() >> ids.TABLE_SHIFT
            for table in np.unique(dst_table).tolist():
                chunk = found[dst_table == table]
                pairs[table] = chunk if table not in pairs else pd.concat([pairs[table], chunk]).drop_duplicates()
        progress.done(f"metrics: source rows of run {self.run_id}'s cells", len(self.ops), "ops")
        return {t: p for t, p in pairs.items() if t in wanted}

    def rows(self, table_id: int) -> pd.DataFrame:
        rows = self.store.read_rows(self.run_id, table_id)
        if rows is None:
            name = self.tables[table_id]["name"]
            raise LineageQueryError(f"run {self.run_id} stored no rows of {name}: metrics match result rows by value")
        return rows.to_pandas()


def _expand(dst: np.ndarray, src: np.ndarray, upstream: pd.DataFrame) -> pd.DataFrame:
    """(dst, srow) for every source row of each ``src`` cell (an output
    cell of an earlier op, whose pairs are ``upstream``)."""
    ordered = upstream.sort_values("cell")
    cells = ordered["cell"].to_numpy()
    srows = ordered["srow"].to_numpy()
    lo = np.searchsorted(cells, src, "left")
    n = np.searchsorted(cells, src, "right") - lo
    total = int(n.sum())
    offsets = np.arange(total) - np.repeat(np.cumsum(n) - n, n)
    return pd.DataFrame({"cell": np.repeat(dst, n), "srow": srows[np.repeat(lo, n) + offsets]})


def open_run(store: Store, run: str | None) -> RunProvenance:
    """Run ``run`` of ``store`` (an id or unique prefix; default: its last capture run)."""
    manifests = store.runs()
    if run is not None:
        manifest = dict(select_run(manifests, run))
    else:
        captures = [m for m in manifests if m.get("kind") == "capture"]
        if not captures:
            raise LineageQueryError(f"store {store.uri} holds no capture run")
        manifest = captures[-1]
    run_id = manifest["run_id"]
    tables = {t["table_id"]: t for t in store.tables().to_pylist() if t["run_id"] == run_id}
    ops = [o for o in store.ops().to_pylist() if o["run_id"] == run_id]
    folder = store.path("runs", run_id) + "/"
    files = [f for f in store.triple_files() if f.startswith(folder)]
    return RunProvenance(store, manifest, tables, ops, files)


def _counts(pairs: pd.DataFrame | None, by: str) -> pd.Series:
    """|prov| per row number (``by="row"``) or per cell id (``by="cell"``)."""
    if pairs is None or pairs.empty:
        return pd.Series(dtype="int64")
    keyed = pd.DataFrame(
        {
            by: pairs["cell"].to_numpy() & ROW_MASK if by == "row" else pairs["cell"].to_numpy(),
            "srow": pairs["srow"].to_numpy(),
        }
    )
    return keyed.drop_duplicates().groupby(by).size()


def default_keys(rows: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """T's columns that are not floating point (its group keys), else all."""
    keys = [c for c in columns if not pd.api.types.is_float_dtype(rows[c])]
    return keys or list(columns)


def _matched(full: pd.DataFrame, reduced: pd.DataFrame, keys: list[str]) -> pd.Series:
    """For each full row number, the matched reduced row number (NaN: none)."""

    def numbered(rows: pd.DataFrame) -> pd.DataFrame:
        rows = rows.sort_values(schema.ROW_COLUMN)
        out = rows[[*keys, schema.ROW_COLUMN]].copy()
        out["_occurrence"] = rows.groupby(keys, dropna=False).cumcount()
        return out

    merged = numbered(full).merge(numbered(reduced), on=[*keys, "_occurrence"], how="left", suffixes=("", "_r"))
    return pd.Series(merged[schema.ROW_COLUMN + "_r"].to_numpy(), index=merged[schema.ROW_COLUMN].to_numpy())


def _classify(p: np.ndarray, q: np.ndarray) -> dict[str, int]:
    q = np.minimum(q, p)
    return {
        "full": int((q == p).sum()),
        "partial": int(((q > 0) & (q < p)).sum()),
        "none": int(((q == 0) & (p > 0)).sum()),
    }


def _ppm(p: np.ndarray, q: np.ndarray) -> float:
    total = int(p.sum())
    return 1.0 if total == 0 else 1.0 - float((p - np.minimum(q, p)).sum()) / total


def table_metrics(
    full: RunProvenance,
    reduced: RunProvenance,
    name: str,
    full_pairs: pd.DataFrame | None,
    reduced_pairs: pd.DataFrame | None,
    keys: Sequence[str] | None,
) -> dict[str, Any]:
    """Metrics 1-3 for output table ``name``."""
    f_info = full.table_named(name)
    r_info = reduced.table_named(name)
    assert f_info is not None
    columns = list(f_info["columns"])
    f_rows = full.rows(f_info["table_id"])
    r_rows = reduced.rows(r_info["table_id"]) if r_info is not None else f_rows.iloc[0:0]
    key = list(keys) if keys else default_keys(f_rows, columns)
    unknown = [k for k in key if k not in columns]
    if unknown:
        raise LineageQueryError(f"table {name} has no column {unknown[0]!r} to match rows by")
    match = _matched(f_rows, r_rows, key)
    # Rows: |prov(t)| and |prov'(matched t)|.
    f_count = _counts(full_pairs, "row")
    r_count = _counts(reduced_pairs, "row")
    row_numbers = match.index.to_numpy()
    p = f_count.reindex(row_numbers, fill_value=0).to_numpy()
    matched = match.to_numpy()
    q = np.where(
        pd.isna(matched), 0, r_count.reindex(pd.Series(matched).fillna(-1).astype("int64"), fill_value=0).to_numpy()
    )
    # Cells: the same per (row, column).
    f_cells = _counts(full_pairs, "cell")
    r_cells = _counts(reduced_pairs, "cell")
    cp, cq = [], []
    for i, column in enumerate(columns):
        f_ids = ids.value_id(f_info["table_id"], i, 0) + row_numbers
        cp.append(f_cells.reindex(f_ids, fill_value=0).to_numpy())
        if r_info is None or column not in r_info["columns"]:
            cq.append(np.zeros(len(row_numbers), dtype=np.int64))
            continue
        r_base = ids.value_id(r_info["table_id"], list(r_info["columns"]).index(column), 0)
        r_ids = pd.Series(matched).fillna(-1).astype("int64").to_numpy()
        got = r_cells.reindex(r_base + np.maximum(r_ids, 0), fill_value=0).to_numpy()
        cq.append(np.where(r_ids < 0, 0, got))
    cells_p = np.concatenate(cp) if cp else np.empty(0, np.int64)
    cells_q = np.concatenate(cq) if cq else np.empty(0, np.int64)
    rows = _classify(p, q)
    cells = _classify(cells_p, cells_q)
    return {
        "table": name,
        "key": key,
        "rows": len(f_rows),
        "reduced_rows": len(r_rows),
        "rows_full": rows["full"],
        "rows_partial": rows["partial"],
        "rows_none": rows["none"],
        "cells_full": cells["full"],
        "cells_partial": cells["partial"],
        "cells_none": cells["none"],
        "prov": int(p.sum()),
        "prov_reduced": int(np.minimum(q, p).sum()),
        "ppm": round(_ppm(p, q), 6),
        "triples": full.triples_into(f_info["table_id"]),
        "triples_reduced": reduced.triples_into(r_info["table_id"]) if r_info is not None else 0,
    }


def compare(
    full_store: Store,
    reduced_store: Store,
    tables: Sequence[str] = (),
    *,
    run_full: str | None = None,
    run_reduced: str | None = None,
    keys: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The three metrics of a reduced run against a full run, per output table
    (``tables``: these, default every output table of the full run)."""
    full = open_run(full_store, run_full)
    reduced = open_run(reduced_store, run_reduced)
    outputs = [t["name"] for t in sorted(full.tables.values(), key=lambda t: t["table_id"]) if t["origin"] == "output"]
    chosen = list(tables) or outputs
    for name in chosen:
        if name not in outputs:
            raise LineageQueryError(
                f"run {full.run_id} has no output table {name!r} (outputs: {', '.join(outputs) or 'none'})"
            )
    f_ids = {full.table_named(n)["table_id"] for n in chosen}  # type: ignore[index]
    r_ids = {t["table_id"] for n in chosen if (t := reduced.table_named(n)) is not None}
    f_pairs = full.cell_sources(f_ids)
    r_pairs = reduced.cell_sources(r_ids)
    per_table = []
    for name in chosen:
        f_id = full.table_named(name)["table_id"]  # type: ignore[index]
        r_info = reduced.table_named(name)
        per_table.append(
            table_metrics(
                full, reduced, name, f_pairs.get(f_id), r_pairs.get(r_info["table_id"]) if r_info else None, keys
            )
        )
    f_size, r_size = full.sizes(), reduced.sizes()
    return {
        "full": f_size,
        "reduced": r_size,
        "size_ratio": {
            k: round(r_size[k] / f_size[k], 6) if f_size[k] else None for k in ("triples", "triple_bytes", "run_bytes")
        },
        "tables": per_table,
    }


def render(result: dict[str, Any]) -> str:
    """The metrics as text: the two runs' sizes, then a line per table."""
    from provplug.plugin.reductions import describe_run_reduction
    from provplug.texttable import aligned

    lines = []
    for side in ("full", "reduced"):
        s = result[side]
        how = describe_run_reduction(s["reduction"]) if s.get("reduction") else "no reduction"
        lines.append(
            f"{side:<8} {s['run']} in {s['store']} ({how}): {s['triples']:,} triples, "
            f"{s['triple_bytes']:,} bytes of triples, {s['run_bytes']:,} bytes in all"
        )
    ratio = result["size_ratio"]
    lines.append(
        "size     reduced/full: " + ", ".join(f"{k} {v:.2%}" if v is not None else f"{k} -" for k, v in ratio.items())
    )
    lines.append("")
    headers = ("TABLE", "ROWS", "FULL", "PARTIAL", "NONE", "CELLS F/P/N", "PPM", "PROV", "PROV'", "TRIPLES", "TRIPLES'")
    body = [
        (
            t["table"],
            t["rows"],
            t["rows_full"],
            t["rows_partial"],
            t["rows_none"],
            f"{t['cells_full']}/{t['cells_partial']}/{t['cells_none']}",
            f"{t['ppm']:.4f}",
            t["prov"],
            t["prov_reduced"],
            t["triples"],
            t["triples_reduced"],
        )
        for t in result["tables"]
    ]
    lines.append(aligned(headers, body, (False, *(True,) * (len(headers) - 1))))
    return "\n".join(lines)
