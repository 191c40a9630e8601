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

Ids: ``ccid`` is the smallest value id of the component; ``csid`` the smallest
value id of the set (both deterministic). A component below theta is one set
with ``csid == ccid``. A generation is written aside and published by
rewriting ``CURRENT``; readers resolve ``CURRENT`` once per query.
"""

from __future__ import annotations

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


def bucket(key: int, buckets: int) -> int:
    """Bucket of a non-negative id: the same rule Spark applies with ``pmod``."""
    return key % buckets
