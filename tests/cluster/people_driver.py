"""The README's people pipeline captured under a given Spark master, as a
driver process of its own: ``python people_driver.py MASTER STORE [--shared] [--conf KEY=VALUE ...]``
(``--shared``: the store's local path is declared shared by every executor; ``--conf``: a Spark
setting of the session).
(The cluster tests run it so that the pytest process keeps its local[2] session.)"""

from __future__ import annotations

import itertools
import sys

from provplug.cli.demo import capture_people
from provplug.sparksession import local_spark


def main(master: str, store: str, shared: bool, settings: list[str]) -> None:
    conf = {"spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "2"}
    conf |= dict(setting.split("=", 1) for setting in settings)
    if shared:
        conf["spark.provplug.sharedStore"] = "true"
    spark = local_spark("provplug-cluster-test", master, **conf)
    try:
        capture_people(spark, store)
    finally:
        spark.stop()


if __name__ == "__main__":
    options = sys.argv[3:]
    main(sys.argv[1], sys.argv[2], "--shared" in options, [v for o, v in itertools.pairwise(options) if o == "--conf"])
