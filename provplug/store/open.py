"""Opening a store: the store-location hook says where it lives, provplug's
own Parquet layout is its format (``provplug.open_store``)."""

from __future__ import annotations

import os

from provplug.model import StoreLocation
from provplug.plugin.connection import s3_uri
from provplug.plugin.manager import Plugins, get_plugins
from provplug.store.cachedfs import cached_filesystem
from provplug.store.objectstore import s3_whole_object_io
from provplug.store.parquet import ParquetStore


def open_store(uri: str | os.PathLike[str], plugins: Plugins | None = None) -> ParquetStore:
    """The store at ``uri``, where the first store backend to answer
    ``provplug_store_location`` puts it (the built-in one: a local path or a
    pyarrow filesystem URI; Hadoop's ``s3a://`` and ``s3n://`` are ``s3://``).
    Off local disk its filesystem remembers what it read of the store's
    immutable files (:mod:`provplug.store.cachedfs`)."""
    text = s3_uri(os.fspath(uri))
    return ParquetStore(text, remembering(text, (plugins or get_plugins()).store_location(text)))


def remembering(uri: str, location: StoreLocation) -> StoreLocation:
    """``location`` with its filesystem wrapped by :func:`cached_filesystem` (local disk: as it is)."""
    io = s3_whole_object_io(location.filesystem, uri)
    fs = cached_filesystem(location.filesystem, location.root, uri, *(io or (None, None)))
    return location if fs is location.filesystem else StoreLocation(location.uri, fs, location.root)
