"""How a capture reaches object storage: the endpoint, region and scheme of
S3, gathered once on the driver and written into every S3 URI the run hands
to Spark's tasks.

Spark's executors are other processes, often on other machines: they do not
see the driver's environment or the engine's settings, only what a task
carries. A capture therefore completes each S3 URI it opens (the store's, a
source's) with the settings it knows, as pyarrow's own URI query
(``endpoint_override``, ``region``, ``scheme``); the pyarrow filesystems and
store URIs that tasks receive then say where S3 is. Credentials are never
written into a URI: each process takes them from its own environment (or
from the URI's ``access_key``/``secret_key`` when the user put them there).

Precedence, per setting: the URI's own query, then the engine's settings
(Spark's ``spark.provplug.fs.*``, through the ``provplug_filesystem_settings``
hook), then the driver's environment (``AWS_ENDPOINT_URL_S3`` or
``AWS_ENDPOINT_URL``; ``AWS_REGION`` or ``AWS_DEFAULT_REGION``).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode

import pyarrow.fs as pafs

from provplug.errors import ConnectionSettingsError

logger = logging.getLogger(__name__)

# Schemes that name S3 (Hadoop's s3a/s3n are S3 to pyarrow too).
S3_SCHEMES = ("s3", "s3a", "s3n")

# The settings a capture knows, by the name of pyarrow's S3 URI query parameter.
SETTING_QUERY = {"endpoint": "endpoint_override", "region": "region", "scheme": "scheme"}
SCHEMES = ("http", "https")


@dataclasses.dataclass(frozen=True)
class Connection:
    """Where S3 is: an endpoint (``host:port``), a region and the scheme
    (``http`` or ``https``); None where not said."""

    endpoint: str | None = None
    region: str | None = None
    scheme: str | None = None

    @classmethod
    def from_settings(cls, settings: Mapping[str, str], origin: str) -> Connection:
        """From ``{"endpoint": ..., "region": ..., "scheme": ...}`` as ``origin``
        (named in errors) says them. An endpoint may carry its scheme
        (``http://127.0.0.1:9000``)."""
        unknown = sorted(set(settings) - set(SETTING_QUERY))
        if unknown:
            raise ConnectionSettingsError(
                f"{origin}: unknown setting {unknown[0]!r} (known: {', '.join(SETTING_QUERY)})"
            )
        values = {k: str(v).strip() for k, v in settings.items() if v is not None and str(v).strip()}
        endpoint, scheme = _split_endpoint(values.get("endpoint"), origin)
        scheme = values.get("scheme", scheme)
        if scheme is not None and scheme.lower() not in SCHEMES:
            raise ConnectionSettingsError(f"{origin}: scheme must be http or https, not {scheme!r}")
        return cls(endpoint, values.get("region"), scheme.lower() if scheme else None)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Connection:
        """From the AWS variables of ``environ`` (default: this process's). A
        malformed one is left to the tools that read it (boto3, pyarrow): it
        says nothing about storage this process may never use, so it is
        logged, not raised."""
        env = os.environ if environ is None else environ
        endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        try:
            return cls.from_settings({"endpoint": endpoint or "", "region": region or ""}, "the environment")
        except ConnectionSettingsError as exc:
            logger.warning("%s; provplug does not pass it on to Spark's tasks", exc)
            return cls(region=region or None)

    @classmethod
    def of_uri(cls, uri: str) -> Connection:
        """What an S3 URI's own query says (pyarrow's parameter names)."""
        base, _, query = uri.partition("?")
        said = dict(parse_qsl(query))
        return cls.from_settings({s: said[k] for s, k in SETTING_QUERY.items() if k in said}, f"the URI {base}")

    @property
    def endpoint_url(self) -> str | None:
        """The endpoint as a URL, as boto3 takes it (https unless the scheme says otherwise)."""
        return None if self.endpoint is None else f"{self.scheme or 'https'}://{self.endpoint}"

    def over(self, fallback: Connection) -> Connection:
        """This connection, each unset setting taken from ``fallback``."""
        return Connection(
            self.endpoint or fallback.endpoint, self.region or fallback.region, self.scheme or fallback.scheme
        )

    def applied(self, uri: str) -> str:
        """``uri`` with the settings its query lacks, when it is an S3 URI
        (Hadoop's ``s3a://``/``s3n://`` become ``s3://``); any other URI or a
        path as it is."""
        scheme, sep, _ = uri.partition("://")
        if not sep or scheme.lower() not in S3_SCHEMES:
            return uri
        base, _, query = s3_uri(uri).partition("?")
        pairs = parse_qsl(query, keep_blank_values=True)
        present = {key for key, _ in pairs}
        for setting, key in SETTING_QUERY.items():
            value = getattr(self, setting)
            if value is not None and key not in present:
                pairs.append((key, value))
        return f"{base}?{urlencode(pairs, safe=':')}" if pairs else base


def s3_uri(uri: str) -> str:
    """``uri`` with Hadoop's S3 schemes (``s3a://``, ``s3n://``) as pyarrow's ``s3://``."""
    scheme, sep, rest = uri.partition("://")
    return f"s3://{rest}" if sep and scheme.lower() in S3_SCHEMES else uri


def _split_endpoint(endpoint: str | None, origin: str) -> tuple[str | None, str | None]:
    """(host:port, scheme) of an endpoint given as ``host:port`` or ``scheme://host:port``."""
    if not endpoint:
        return None, None
    scheme, sep, rest = endpoint.partition("://")
    if not sep:
        return endpoint.rstrip("/"), None
    host = rest.rstrip("/")
    if not host or "/" in host:
        raise ConnectionSettingsError(f"{origin}: endpoint must be host:port or scheme://host:port, not {endpoint!r}")
    return host, scheme


_current: contextvars.ContextVar[Connection | None] = contextvars.ContextVar("provplug_connection", default=None)


@contextlib.contextmanager
def connecting(connection: Connection) -> Iterator[Connection]:
    """Within the block, :func:`current` is ``connection`` (a capture run's)."""
    token = _current.set(connection)
    try:
        yield connection
    finally:
        _current.reset(token)


def current() -> Connection:
    """The connection of the capture run in progress; else the environment's."""
    return _current.get() or Connection.from_environment()


def completed(uri: str) -> str:
    """``uri`` completed with :func:`current`'s settings (see :meth:`Connection.applied`)."""
    return current().applied(uri)


def filesystem_of(uri: str) -> tuple[Any, str]:
    """(pyarrow filesystem, path) of a data URI as the current capture reaches it."""
    fs, path = pafs.FileSystem.from_uri(completed(uri))
    return fs, str(path)
