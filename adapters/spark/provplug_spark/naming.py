"""Dataset identity (as OpenLineage names datasets) and readable table names.

A dataset's identity is OpenLineage's pair (namespace, name) — see its naming
spec (https://openlineage.io/docs/spec/naming):

=====================  ==========================  =======================
dataset                namespace                   name
=====================  ==========================  =======================
local file or folder   ``file``                    absolute path
S3 (s3, s3a, s3n)      ``s3://<bucket>``           object key
GCS                    ``gs://<bucket>``           object key
HDFS                   ``hdfs://<host>:<port>``    path
other URI              ``<scheme>://<authority>``  path
catalog table          the metastore               ``<db>.<table>``
                       (``hive://<host>:<port>``)
                       or the warehouse URI
JDBC table             ``postgres://<host>:<port>``  ``<db>.<schema>.<table>``
                       (``mysql://...``, ...)
=====================  ==========================  =======================

A table's name in the store is an *alias* of that identity, the same in every
run of a pipeline (the name links runs over time): the last component of the
path that says what the data is. Read from the end, components that do not
say it are skipped: glob components (``*``, ``?``, ``[...]``, ``{...}``: a
glob names its folder), generic words (``output``, ``out``, ``data``,
``tmp``, ...), ``part-*`` files, dates and numbers (``2024``, ``01``,
``2024-01-31``, ``20240131``) and partition folders (``k=v``). File
extensions are dropped. So ``/data/flights/2024/*/`` and
``/data/flights/2024/01`` + ``/data/flights/2024/02`` are ``flights``;
``/jobs/report/output`` is ``report``. A catalog table is its table name;
Kedro's transcoding suffix (``companies@spark``) is dropped.

Two *different* datasets with the same alias in one run are told apart by
the identity: first by the components skipped at the end
(``trips-2024-02``), then by their parent folders (``east-trips``); the
first claimed keeps the plain alias. The same dataset claimed twice in one
run (read, then overwritten) gets ``-2``, ``-3``, ... as before.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
import re
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

GENERIC_WORDS = frozenset({"output", "outputs", "out", "data", "tmp", "temp", "input", "inputs", "_temporary"})
KNOWN_EXTENSIONS = frozenset(
    {"parquet", "csv", "tsv", "json", "jsonl", "orc", "avro", "txt", "text", "xml", "delta"}
    | {"gz", "bz2", "zst", "snappy", "lz4", "zip", "xz", "pq", "pkl", "pickle", "xlsx"}
)
_DATE_OR_NUMBER = re.compile(r"^\d{1,8}$|^\d{4}[-_]\d{1,2}([-_]\d{1,2})?$|^\d{1,2}[-_]\d{1,2}[-_]\d{4}$")
_GLOB = re.compile(r"[*?\[\]{}]")
_S3_SCHEMES = ("s3", "s3a", "s3n")
# jdbc:<subprotocol> -> OpenLineage's namespace scheme, default port, whether names carry a schema
_JDBC = {
    "postgresql": ("postgres", 5432, True),
    "mysql": ("mysql", 3306, False),
    "mariadb": ("mysql", 3306, False),
    "sqlserver": ("sqlserver", 1433, True),
    "oracle": ("oracle", 1521, True),
    "db2": ("db2", 50000, True),
    "redshift": ("redshift", 5439, True),
}
KEDRO_TRANSCODING = "@"


@dataclasses.dataclass(frozen=True)
class DatasetId:
    """A dataset as OpenLineage identifies it."""

    namespace: str
    name: str
    is_path: bool = True  # a file path (components split at "/"), else a table's dotted name


# -- identity ----------------------------------------------------------------------
def path_identity(uri: str) -> DatasetId:
    """The identity of a file or folder at ``uri`` (a path or a URI; a
    relative local path is made absolute)."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme in ("", "file") or len(scheme) == 1:  # "C:" is a drive, not a scheme
        path = uri if scheme != "file" else parts.path
        return DatasetId("file", _clean_path(os.path.abspath(path) if scheme != "file" else path))
    if scheme in _S3_SCHEMES:
        return DatasetId(f"s3://{parts.netloc}", parts.path.strip("/"))
    if scheme == "gs":
        return DatasetId(f"gs://{parts.netloc}", parts.path.strip("/"))
    return DatasetId(f"{scheme}://{parts.netloc}", _clean_path(parts.path or "/"))


def paths_identity(uris: Sequence[str]) -> DatasetId:
    """The identity of a read of several paths (a glob Spark expanded, a list
    of folders): their deepest common folder when they share a namespace,
    else the first path's."""
    ids = [path_identity(u) for u in uris]
    if len(ids) == 1 or len({i.namespace for i in ids}) != 1:
        return ids[0]
    common = posixpath.commonpath([i.name if i.name.startswith("/") else "/" + i.name for i in ids])
    if not ids[0].name.startswith("/"):
        common = common.lstrip("/")
    return DatasetId(ids[0].namespace, common)


def table_identity(qualified: str, metastore_uri: str | None, warehouse: str | None) -> DatasetId:
    """A catalog table ``db.table`` in the Hive metastore at
    ``metastore_uri`` (``thrift://host:port``), else in the warehouse folder."""
    if metastore_uri:
        first = metastore_uri.split(",", 1)[0]
        return DatasetId(f"hive://{urlsplit(first).netloc}", qualified, is_path=False)
    if warehouse:
        where = path_identity(warehouse)
        folder = where.name if where.name.startswith("/") else "/" + where.name
        return DatasetId(
            f"{where.namespace}:{folder}" if where.namespace == "file" else where.namespace + folder, qualified, False
        )
    return DatasetId("spark_catalog", qualified, is_path=False)


def jdbc_identity(url: str, table: str) -> DatasetId:
    """A table read or written over JDBC at ``url``
    (``jdbc:postgresql://host:5432/db``): ``postgres://host:5432`` and
    ``db.schema.table`` (``public`` when ``table`` names no schema)."""
    rest = url.removeprefix("jdbc:")
    sub = rest.split(":", 1)[0].lower()
    scheme, port, with_schema = _JDBC.get(sub, (sub, None, False))
    parts = urlsplit(rest.split(";", 1)[0])
    host = parts.hostname or "localhost"
    netloc = f"{host}:{parts.port or port}" if (parts.port or port) else host
    database = parts.path.strip("/").split("/", 1)[0]
    table = table.strip()
    if with_schema and "." not in table and sub == "postgresql":
        table = f"public.{table}"
    name = ".".join(p for p in (database, table) if p)
    return DatasetId(f"{scheme}://{netloc}", name, is_path=False)


def _clean_path(path: str) -> str:
    cleaned = posixpath.normpath(path.replace(os.sep, "/")) if path else "/"
    return "/" + cleaned.lstrip("/") if path.startswith("/") else cleaned


# -- aliases -------------------------------------------------------------------------
def is_generic(component: str) -> bool:
    """Whether a path component says nothing about what the data is."""
    lowered = component.lower()
    return (
        not component
        or _GLOB.search(component) is not None
        or lowered in GENERIC_WORDS
        or lowered.startswith("part-")
        or _DATE_OR_NUMBER.match(lowered) is not None
        or "=" in component
    )


def without_extension(component: str) -> str:
    """``sales.csv.gz`` -> ``sales``; a dot that starts no known extension stays."""
    stem = component
    while "." in stem.lstrip("."):
        head, ext = stem.rsplit(".", 1)
        if ext.lower() not in KNOWN_EXTENSIONS:
            break
        stem = head
    return stem


def _components(identity: DatasetId) -> list[str]:
    """The name's components (a table's ``db`` and ``table``), extensions dropped, globs left out."""
    raw = [c for c in identity.name.split("/" if identity.is_path else ".") if c]
    return [without_extension(c) for c in raw if not _GLOB.search(c)]


def _meaningful(components: Sequence[str]) -> int | None:
    """The index of the last component that says what the data is."""
    for i in range(len(components) - 1, -1, -1):
        if not is_generic(components[i]) and components[i]:
            return i
    return None


def alias_candidates(identity: DatasetId) -> Iterator[str]:
    """Readable names for ``identity``, the preferred first, each later one
    carrying more of the identity (to tell two datasets apart)."""
    components = _components(identity)
    if not components:
        yield "dataset"
        return
    at = _meaningful(components)
    if at is None:  # nothing but generic components: the last one
        at = len(components) - 1
    trailing = components[at + 1 :]
    for start in range(at, -1, -1):
        stem = components[start : at + 1]
        yield "-".join(stem)
        if trailing:
            yield "-".join(stem + trailing)


def alias(identity: DatasetId) -> str:
    """The preferred readable name of ``identity``."""
    return next(alias_candidates(identity))


def kedro_name(dataset: str) -> str:
    """A Kedro catalog entry's name without its transcoding suffix (``companies@spark`` -> ``companies``)."""
    return dataset.split(KEDRO_TRANSCODING, 1)[0] or dataset


class Aliases:
    """The table names of one run: the same identity keeps its alias; a
    different identity that would take a name already given gets a longer
    candidate (:func:`alias_candidates`); ``-2``, ``-3``, ... only when
    nothing else tells them apart (or one dataset is claimed twice)."""

    def __init__(self) -> None:
        self._owner: dict[str, DatasetId | None] = {}

    def claim(self, preferred: str, identity: DatasetId | None = None) -> str:
        """A name not yet given in the run: ``preferred``, or one derived from
        ``identity`` that the dataset holding ``preferred`` would not derive
        (so that the name shows what differs: ``trips-2024-02``, ``west-report``)."""
        owner = self._owner.get(preferred, ...)
        if owner is ...:
            return self._give(preferred, identity)
        if identity is not None and owner != identity:
            theirs = set() if owner is None else set(alias_candidates(owner))
            for candidate in alias_candidates(identity):
                if candidate not in theirs and candidate not in self._owner:
                    return self._give(candidate, identity)
        n = 2
        while f"{preferred}-{n}" in self._owner:
            n += 1
        return self._give(f"{preferred}-{n}", identity)

    def _give(self, name: str, identity: DatasetId | None) -> str:
        self._owner[name] = identity
        return name


# -- from Spark ----------------------------------------------------------------------------
def catalog_identity(spark: Any, database: str | None, table: str) -> DatasetId:
    """A table of the session catalog (``database`` None: the current one)."""
    conf = spark._jsc.hadoopConfiguration()
    metastore = spark.conf.get("spark.hadoop.hive.metastore.uris", None) or conf.get("hive.metastore.uris")
    warehouse = spark.conf.get("spark.sql.warehouse.dir", None)
    db = database or spark.catalog.currentDatabase()
    return table_identity(f"{db}.{table}", metastore, warehouse)


def relation_identity(spark: Any, leaf: Any) -> DatasetId | None:
    """The dataset a LogicalRelation reads: its catalog table, else its root paths."""
    if leaf.nodeName() != "LogicalRelation":
        return None
    catalog = leaf.catalogTable()
    if catalog.isDefined():
        identifier = catalog.get().identifier()
        database = identifier.database()
        return catalog_identity(spark, str(database.get()) if database.isDefined() else None, str(identifier.table()))
    try:
        paths = [str(p.toString()) for p in _items(leaf.relation().location().rootPaths())]
    except Exception:  # py4j: not a file relation (JDBC, in-memory, ...)
        return None
    return paths_identity(paths) if paths else None


def written_identity(spark: Any, target: str, is_table: bool, qualified_path: str | None) -> DatasetId:
    """The dataset a write writes: the catalog table ``target``, or the path (qualified by Spark)."""
    if is_table:
        parts = [p.strip("`") for p in target.split(".")]
        return catalog_identity(spark, parts[-2] if len(parts) > 1 else None, parts[-1])
    return path_identity(qualified_path or target)


def _items(jseq: Any) -> list[Any]:
    return [jseq.apply(i) for i in range(jseq.size())]
