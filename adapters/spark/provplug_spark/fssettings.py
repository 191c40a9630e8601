"""``spark.provplug.fs.*``: how a capture on this session reaches object
storage (endpoint, region, scheme). The capture writes them into the S3 URIs
its tasks receive (:mod:`provplug.plugin.connection`), so they reach executors
that have neither the driver's environment nor these settings."""

from __future__ import annotations

from typing import Any

from provplug.plugin.connection import Connection

# Spark setting -> connection setting (docs/configuration.md lists them).
FS_SETTINGS = {
    "spark.provplug.fs.endpoint": "endpoint",
    "spark.provplug.fs.region": "region",
    "spark.provplug.fs.scheme": "scheme",
}
FS_PREFIX = next(iter(FS_SETTINGS)).rpartition(".")[0] + "."  # their common prefix, with its dot


def filesystem_settings(spark: Any) -> Connection:
    """The session's ``spark.provplug.fs.*`` settings; an unknown one (a
    typo would send requests to another endpoint) or a malformed one is a
    one-line ConnectionSettingsError."""
    chosen = {key: value for key, value in spark.conf.getAll.items() if key.startswith(FS_PREFIX)}
    return Connection.from_settings(
        {FS_SETTINGS.get(key, key.removeprefix(FS_PREFIX)): value for key, value in chosen.items()},
        f"{FS_PREFIX}*",
    )
