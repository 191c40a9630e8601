"""The README's people pipeline captured under a given Spark master, as a
driver process of its own: ``python people_driver.py MASTER STORE [--shared]`` (``--shared``: the
store's local path is declared shared by every executor).
(The cluster tests run it so that the pytest process keeps its local[2] session.)"""

from __future__ import annotations

import sys

from provplug.cli.demo import capture_people
from provplug.sparksession import local_spark


def main(master: str, store: str, shared: bool) -> None:
    conf = {"spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "1"}
    if shared:
        conf["spark.provplug.sharedStore"] = "true"
    spark = local_spark("provplug-cluster-test", master, **conf)
    try:
        capture_people(spark, store)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], "--shared" in sys.argv[3:])
