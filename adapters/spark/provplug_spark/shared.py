"""Never lose captured data in silence on a cluster.

Spark's tasks write the run's files straight into the store, on the
executors' machines. A store that is a local path is only safe when every
executor sees the same directory as the driver (one machine, or a shared
mount): otherwise each task writes onto its own disk, the driver commits a run
whose files it never sees, and the pipeline itself succeeds -- data lost
without a word. Two checks stop that:

* before anything runs: under a master that is not ``local``, a store on a
  local path is refused unless ``spark.provplug.sharedStore=true`` declares
  that every executor shares it;
* after every writer job: each file a task reported must be in the store with
  the row count the task reported, or the run fails (:class:`LostFilesError`)
  and commits nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlparse

import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from provplug.errors import CaptureError, LostFilesError
from provplug.plugin.protocols import RunRecorder
from provplug.plugin.writers import filesystem_for

SHARED_STORE_CONF = "spark.provplug.sharedStore"
LOCAL_SCHEMES = ("", "file", "local")


def is_in_process_master(master: str) -> bool:
    """A ``local`` master: the executors are the driver's own process."""
    return master == "local" or master.startswith("local[")


def is_local_master(master: str) -> bool:
    return is_in_process_master(master) or master.startswith("local-cluster")


def is_local_path(uri: str) -> bool:
    """A store URI that names a directory on the machine's own filesystem."""
    scheme = urlparse(uri).scheme
    return scheme in LOCAL_SCHEMES or (len(scheme) == 1 and uri[1:3] in (":\\", ":/"))  # a Windows drive


def check_shared_store(spark: SparkSession, run: RunRecorder) -> None:
    """Refuse a local-path store under a cluster master unless declared shared."""
    master = spark.sparkContext.master or "local"
    uri = run.store_uri
    if is_local_master(master) or not is_local_path(uri):
        return
    shared = (spark.conf.get(SHARED_STORE_CONF, "false") or "false").strip().lower()
    if shared == "true":
        return
    if shared != "false":
        raise CaptureError(f"{SHARED_STORE_CONF} must be true or false, not {shared!r}")
    raise CaptureError(
        f"the store {uri} is a local path and Spark's master is {master}: executors on other machines would "
        f"write the run's files onto their own disks; put the store on storage every executor reaches "
        f"(s3://, hdfs://, ...) or, if {uri} is on a disk every executor shares, set {SHARED_STORE_CONF}=true"
    )


def check_reported(run: RunRecorder, reported: Mapping[str, int], found: set[str]) -> None:
    """Every file a writer job's tasks reported is in the store, with the rows they reported."""
    missing = sorted(set(reported) - found)
    if missing:
        raise LostFilesError(
            f"{len(missing)} file(s) Spark's tasks wrote for the run are not in the store {run.store_uri} "
            f"(first: {missing[0]}): the executors do not share the store's storage; nothing is committed"
        )
    fs = filesystem_for(run.store_uri)
    for path in sorted(found):
        rows = pq.read_metadata(path, filesystem=fs).num_rows
        if rows != reported[path]:
            raise LostFilesError(
                f"{path} holds {rows} rows where the task that wrote it reported {reported[path]}: "
                "another writer changed the run's files; nothing is committed"
            )
