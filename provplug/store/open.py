"""Opening a store: the store-location hook says where it lives, provplug's
own Parquet layout is its format (``provplug.open_store``)."""

from __future__ import annotations

import os

from provplug.plugin.manager import Plugins, get_plugins
from provplug.store.objectstore import s3_uri
from provplug.store.parquet import ParquetStore


def open_store(uri: str | os.PathLike[str], plugins: Plugins | None = None) -> ParquetStore:
    """The store at ``uri``, where the first store backend to answer
    ``provplug_store_location`` puts it (the built-in one: a local path or a
    pyarrow filesystem URI; Hadoop's ``s3a://`` and ``s3n://`` are ``s3://``)."""
    text = s3_uri(os.fspath(uri))
    return ParquetStore(text, (plugins or get_plugins()).store_location(text))
