"""On-disk layout of the lineage index: the contract between the index builder
(:mod:`provplug.index`) and the query methods (:mod:`provplug.query`).

Everything is plain Parquet, readable by Spark and by pyarrow without Spark::

    STORE/index/CURRENT                  name of the live generation (one line)
    STORE/index/GEN/
      meta.json                          theta, splits used, run ids indexed, counts, buckets
      triples/bucket=K/*.parquet         every triple + ccid, src_csid, dst_csid;
                                         K = dst_csid mod TRIPLE_BUCKETS
      setdeps/bucket=K/*.parquet         distinct (src_csid, dst_csid), src != dst;
                                         K = dst_csid mod SETDEP_BUCKETS
      rsetdeps/bucket=K/*.parquet        the same pairs, K = src_csid mod SETDEP_BUCKETS
                                         (downstream queries walk them forward)
      value_sets/bucket=K/*.parquet      value_id -> ccid, csid for every value on a
                                         triple; K = value_id mod VALUE_BUCKETS,
                                         sorted by value_id inside each file
      sets.parquet                       csid, ccid, split, nodes, triples
      components.parquet                 ccid, nodes, triples
      mapped/                            (store on local disk) each bucket once more as
                                         an Arrow IPC file sorted by its lookup key,
                                         memory-mapped by queries:
                                         DATASET/bucket=K.arrow, DATASET/fences.arrow,
                                         sets_by_ccid.arrow, manifest.json (written last)

Ids: ``ccid`` is the smallest value id of the component; ``csid`` the smallest
value id of the set (both deterministic). A component below theta is one set
with ``csid == ccid``. A generation is written aside and published by
rewriting ``CURRENT``; readers resolve ``CURRENT`` once per query.

Details the builder guarantees (additions to the contract above):

* Every ``bucket=K`` directory exists for ``K`` in ``0..BUCKETS-1`` (an empty
  bucket holds an empty Parquet file); the ``bucket`` column lives only in the
  directory name (hive partitioning), not in the files. Buckets written by the
  Spark engine hold one ``part-<uuid>.parquet`` (a bucket several index tasks
  wrote is merged into one by a task; ``part-empty.parquet`` when no task had
  rows for it); the local engine's
  hold ``part-0.parquet``. Files whose name starts with ``_`` or ``.`` are not data.
* ``triples/`` ``ccid`` is the component of the triple (of ``dst``, equally
  of ``src``).
* ``sets.parquet``: ``split`` is the name of the split whose WCC produced the
  set (``sp2``, sub-split ``sp3.1``, ...; see ``meta.json`` ``split_tree``),
  null for a component below theta; ``triples`` counts the triples whose
  ``dst`` is in the set (what CSProv reads for it). ``components.parquet``:
  ``triples`` counts the component's triples. Both are single files.
* ``meta.json`` keys: ``format`` (2; 1 had no ``files``), ``generation``, ``created``, ``engine``
  (``local``/``spark``), ``theta``, ``splits`` (the completed ``--splits``
  document used), ``split_tree`` (``[{name, tables, children}]``),
  ``splits_source`` (``user``/``auto``), ``workflow`` (``{tables, edges}`` of
  ``G_wf``, by table name), ``runs`` (run ids indexed: the index is stale when
  the store has other committed runs), ``counts`` (``triples``, ``values``,
  ``components``, ``sets``, ``set_dependencies``), ``buckets``
  (``{triples, setdeps, rsetdeps, value_sets}``), ``seconds``, ``files``
  (``{relative path: size}`` of every file of the generation but
  ``meta.json``; queries check them when they open it, see
  :mod:`provplug.index.integrity`, and read bucket files from this list).
* ``mapped/`` (written by :func:`provplug.index.mapped.write_mapped`
  after the Parquet files, before ``meta.json``, so ``files`` lists them):
  ``triples``, ``setdeps``, ``rsetdeps`` and ``value_sets`` buckets sorted by
  the key their queries look up (``dst_csid``, ``dst_csid``, ``src_csid``,
  ``value_id``) and ``sets`` sorted by ``ccid``. A query reads a set's rows as
  one range of the mapped key column, so a cold query touches only the pages
  of its sets. ``DATASET/fences.arrow`` holds every
  :data:`~provplug.index.mapped.FENCE_ROWS`-th key of each bucket (the
  buckets' fences one after the other; ``manifest.json`` ``fences`` gives
  each dataset's first fence per bucket, then the end), so a lookup knows
  the page of each key before reading it. A generation without ``mapped/``
  (built on a remote filesystem, or by an older provplug) is read from its
  Parquet buckets; one without fences searches the mapped keys directly.
* Helpers: :func:`provplug.index.current_dir` (path of the live generation,
  ``NotIndexedError`` if none) and :func:`provplug.index.read_meta`.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

INDEX_DIR = "index"
CURRENT = "CURRENT"
META = "meta.json"

TRIPLE_BUCKETS = 64
SETDEP_BUCKETS = 16
VALUE_BUCKETS = 64

INDEXED_TRIPLES = pa.schema(
    [
        pa.field("src", pa.int64(), nullable=False),
        pa.field("dst", pa.int64(), nullable=False),
        pa.field("op", pa.int64(), nullable=False),
        pa.field("src_table", pa.int32(), nullable=False),
        pa.field("dst_table", pa.int32(), nullable=False),
        pa.field("ccid", pa.int64(), nullable=False),
        pa.field("src_csid", pa.int64(), nullable=False),
        pa.field("dst_csid", pa.int64(), nullable=False),
    ]
)

SETDEPS = pa.schema(
    [
        pa.field("src_csid", pa.int64(), nullable=False),
        pa.field("dst_csid", pa.int64(), nullable=False),
    ]
)

VALUE_SETS = pa.schema(
    [
        pa.field("value_id", pa.int64(), nullable=False),
        pa.field("ccid", pa.int64(), nullable=False),
        pa.field("csid", pa.int64(), nullable=False),
    ]
)

SETS = pa.schema(
    [
        pa.field("csid", pa.int64(), nullable=False),
        pa.field("ccid", pa.int64(), nullable=False),
        pa.field("split", pa.string(), nullable=True),
        pa.field("nodes", pa.int64(), nullable=False),
        pa.field("triples", pa.int64(), nullable=False),
    ]
)

COMPONENTS = pa.schema(
    [
        pa.field("ccid", pa.int64(), nullable=False),
        pa.field("nodes", pa.int64(), nullable=False),
        pa.field("triples", pa.int64(), nullable=False),
    ]
)


# How every index Parquet file is encoded (sizes per file kind before and after
# in examples/benchmarks/index.md): zstd; a dictionary only for the columns of
# few distinct values (for ids it outgrows its page, falls back to plain and
# costs both); delta encoding for the columns a file is sorted by.
_DICTIONARY_COLUMNS = ("op", "src_table", "dst_table", "split")
_DELTA_COLUMNS = {
    tuple(VALUE_SETS.names): ("value_id",),
    tuple(SETS.names): ("csid", "ccid"),
    tuple(COMPONENTS.names): ("ccid",),
}


def parquet_options(schema: pa.Schema) -> dict[str, Any]:
    """``pq.write_table`` / ``pq.ParquetWriter`` options for an index file of ``schema``."""
    names = schema.names
    return {
        "compression": "zstd",
        "use_dictionary": [c for c in names if c in _DICTIONARY_COLUMNS],
        "column_encoding": dict.fromkeys(_DELTA_COLUMNS.get(tuple(names), ()), "DELTA_BINARY_PACKED"),
    }


def bucket(key: int, buckets: int) -> int:
    """Bucket of a non-negative id: the same rule Spark applies with ``pmod``."""
    return key % buckets
