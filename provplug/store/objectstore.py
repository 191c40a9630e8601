"""The few operations of the store's object-store commit protocol that
pyarrow's filesystems cannot do: a conditional write (put-if-absent).

On S3 it is one ``PutObject`` with ``If-None-Match: *`` (S3, MinIO and moto
honour it): of several writers creating the same key exactly one succeeds,
and the object appears whole. pyarrow has no conditional put, so it is made
with boto3, configured from the store URI's own query (``endpoint_override``,
``scheme``, ``region``, ``access_key``/``secret_key``) and the environment
(``AWS_*``), as pyarrow configures itself. Where boto3 is not installed, or
the filesystem is not S3, :func:`put_if_absent` says so (None) and the store
falls back to a check, then a write (one writer at a time).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlparse

import pyarrow.fs as pafs

from provplug.errors import StoreError
from provplug.plugin.connection import Connection
from provplug.store.cachedfs import Fetch, Put, base_filesystem, changed

logger = logging.getLogger(__name__)

# The answers of an S3 server to a put-if-absent whose key exists.
_TAKEN = ("PreconditionFailed", "ConditionalRequestConflict", "412", "409")


def put_if_absent(fs: pafs.FileSystem, uri: str, path: str, data: bytes) -> bool | None:
    """Create the object ``path`` (``bucket/key``) holding ``data`` unless it
    exists: True if this call created it, False if it existed; None when the
    filesystem offers no conditional write here (not S3, or no boto3)."""
    if not isinstance(base_filesystem(fs), pafs.S3FileSystem):
        return None
    client = _s3_client(uri)
    if client is None:
        return None
    changed(fs, path)
    bucket, _, key = path.partition("/")
    from botocore.exceptions import ClientError  # type: ignore[import-untyped]

    try:
        client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in _TAKEN:
            return False
        raise StoreError(f"cannot create s3://{path}: {code or exc}") from exc
    return True


@functools.lru_cache(maxsize=8)
def _s3_client(uri: str) -> Any | None:
    """A boto3 S3 client for the store at ``uri`` (None without boto3)."""
    try:
        import boto3  # type: ignore[import-untyped]
    except ImportError:
        logger.warning(
            "boto3 is not installed: the store %s cannot create files exclusively on S3 and assumes one "
            "writer at a time (pip install boto3)",
            uri,
        )
        return None
    connection = Connection.of_uri(uri)
    query = dict(parse_qsl(urlparse(uri).query))  # credentials, when the user put them in the URI
    options: dict[str, Any] = {"endpoint_url": connection.endpoint_url, "region_name": connection.region}
    if "access_key" in query:
        options |= {"aws_access_key_id": query["access_key"], "aws_secret_access_key": query.get("secret_key")}
        options["aws_session_token"] = query.get("session_token")
    return boto3.client("s3", **{k: v for k, v in options.items() if v is not None})


def s3_whole_object_io(fs: pafs.FileSystem, uri: str) -> tuple[Fetch, Put] | None:
    """Single-request reads and writes of whole objects for the store at
    ``uri`` (see :mod:`provplug.store.cachedfs`): a ranged ``GetObject`` that
    also tells the object's size, and a ``PutObject``. None when ``fs`` is
    not S3 or boto3 is missing (pyarrow's own calls are used then)."""
    if not isinstance(fs, pafs.S3FileSystem):
        return None
    client = _s3_client(uri)
    if client is None:
        return None

    def fetch(path: str, limit: int) -> tuple[bytes, int]:
        bucket, _, key = path.partition("/")
        with _as_os_errors(path):
            try:
                if limit < 0:
                    answer = client.get_object(Bucket=bucket, Key=key)
                else:
                    answer = client.get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{max(limit, 1) - 1}")
            except _client_error() as exc:
                if _code(exc) != "InvalidRange":  # an empty object has no byte 0
                    raise
                answer = client.get_object(Bucket=bucket, Key=key)
            data: bytes = answer["Body"].read()
        total = str(answer.get("ContentRange") or "").rpartition("/")[2]
        return data, int(total) if total.isdigit() else len(data)

    def put(path: str, data: bytes) -> None:
        bucket, _, key = path.partition("/")
        with _as_os_errors(path):
            client.put_object(Bucket=bucket, Key=key, Body=data)

    return fetch, put


def _client_error() -> type[Exception]:
    from botocore.exceptions import ClientError

    return ClientError  # type: ignore[no-any-return]


def _code(exc: Exception) -> str:
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))


@contextlib.contextmanager
def _as_os_errors(path: str) -> Iterator[None]:
    """boto3's errors as pyarrow's filesystems raise them: a missing object is
    FileNotFoundError, any other failure an OSError naming the object."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except ClientError as exc:
        if _code(exc) in ("NoSuchKey", "404", "NotFound"):
            raise FileNotFoundError(errno.ENOENT, f"no such object s3://{path}", path) from None
        raise OSError(f"s3://{path}: {_code(exc) or exc}") from exc
    except BotoCoreError as exc:
        raise OSError(f"s3://{path}: {exc}") from exc
