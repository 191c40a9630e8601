"""``spark.provplug.fs.*``: how a capture on this session reaches object
storage (endpoint, region, scheme). The capture writes them into the S3 URIs
its tasks receive (:mod:`provplug.plugin.connection`), so they reach executors
that have neither the driver's environment nor these settings."""

from __future__ import annotations

from typing import Any

from provplug.plugin.connection import Connection

# The settings, named in full (docs/configuration.md lists them); each names the connection setting after the prefix.
FS_SETTINGS = ("spark.provplug.fs.endpoint", "spark.provplug.fs.region", "spark.provplug.fs.scheme")
FS_PREFIX = FS_SETTINGS[0].rpartition(".")[0] + "."


def filesystem_settings(spark: Any) -> Connection:
    """The session's ``spark.provplug.fs.*`` settings; an unknown one (a
    typo would send requests to another endpoint) or a malformed one is a
    one-line ConnectionSettingsError."""
    chosen = {k.removeprefix(FS_PREFIX): v for k, v in spark.conf.getAll.items() if k.startswith(FS_PREFIX)}
    return Connection.from_settings(chosen, f"{FS_PREFIX}*")
