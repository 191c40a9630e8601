"""Index Parquet files are written compactly (provplug.index.layout.parquet_options):
zstd, dictionaries only for the columns of few distinct values, delta for sorted keys."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from provplug.index import generation
from provplug.store.open import open_store


def _largest(folder: Path) -> Path:
    return max(folder.glob("bucket=*/*.parquet"), key=lambda p: p.stat().st_size)  # one with rows


def _encodings(path: Path) -> dict[str, tuple[str, set[str]]]:
    group = pq.ParquetFile(path).metadata.row_group(0)
    return {
        group.column(i).path_in_schema: (group.column(i).compression, set(group.column(i).encodings))
        for i in range(group.num_columns)
    }


def test_index_files_are_zstd_with_dictionaries_only_for_few_distinct_values(
    paper_rows_store: tuple[Path, dict[int, int]],
) -> None:
    path, _ = paper_rows_store
    gen = Path(generation.current_dir(open_store(path)))
    triples = _encodings(_largest(gen / "triples"))
    assert {compression for compression, _ in triples.values()} == {"ZSTD"}
    dictionary = {c for c, (_, encodings) in triples.items() if "RLE_DICTIONARY" in encodings}
    assert dictionary == {"op", "src_table", "dst_table"}
    values = _encodings(_largest(gen / "value_sets"))
    assert "DELTA_BINARY_PACKED" in values["value_id"][1]
    sets = _encodings(gen / "sets.parquet")
    assert "DELTA_BINARY_PACKED" in sets["csid"][1] and "RLE_DICTIONARY" in sets["split"][1]
