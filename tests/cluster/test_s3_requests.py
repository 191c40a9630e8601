"""Few requests on object storage (issue 27): requests are counted at an S3
server in this process (moto's, one werkzeug log record per request), so the
bounds below are counts, not timings.

A query reads each index file and stored-rows file it needs with one request,
and a second query in the same process reads none of them again (committed
runs and index generations never change); an index generation is a bounded
number of files, each written with one request. The answers themselves are
compared with local disk's in test_s3_store.py."""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pyarrow.fs as pafs
import pytest

from provplug.store import cachedfs
from provplug.store.open import open_store

from .test_s3_store import write_paper_run

REGION = "us-east-1"
QUERY = ("AvgAge.Age", "--where", "City = 'NY'", "--method", "csprov", "--json")
# The local engine's generation: sets.parquet, components.parquet, meta.json
# and one file per bucket (64 triples, 16 setdeps, 16 rsetdeps, 64 value_sets).
GENERATION_FILES = 3 + 64 + 16 + 16 + 64


class Requests(logging.Handler):
    """The S3 server's requests, as ``(method, key or listing)``."""

    LINE = re.compile(r'"(?:\x1b\[[\d;]*m)*([A-Z]+) (\S+) HTTP')

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        found = self.LINE.search(record.getMessage())
        if found:
            self.seen.append((found.group(1), found.group(2)))

    def during(self, action: Any) -> list[tuple[str, str]]:
        start = len(self.seen)
        action()
        return self.seen[start:]


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, Requests]]:
    """moto's S3 server in this process (its requests counted) and its endpoint."""
    import boto3  # type: ignore[import-untyped]
    from moto.server import ThreadedMotoServer

    with pytest.MonkeyPatch.context() as env:
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            env.setenv(key, "t")
        env.setenv("AWS_DEFAULT_REGION", REGION)
        env.delenv("AWS_ENDPOINT_URL", raising=False)
        requests = Requests()
        werkzeug = logging.getLogger("werkzeug")
        level, propagate = werkzeug.level, werkzeug.propagate
        werkzeug.addHandler(requests)
        werkzeug.setLevel(logging.INFO)
        # Counted here only: a root handler another test left (Kedro installs
        # Rich's) would print each request into the CLI output the tests parse.
        werkzeug.propagate = False
        moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        moto.start()
        try:
            host, port = moto.get_host_and_port()
            boto3.client("s3", endpoint_url=f"http://{host}:{port}", region_name=REGION).create_bucket(Bucket="req")
            yield f"{host}:{port}", requests
        finally:
            moto.stop()
            werkzeug.removeHandler(requests)
            werkzeug.setLevel(level)
            werkzeug.propagate = propagate


def _indexed_store(cli: Any, endpoint: str) -> str:
    uri = f"s3://req/{uuid.uuid4().hex[:8]}?endpoint_override={endpoint}&scheme=http&region={REGION}"
    store = open_store(uri)
    write_paper_run(store, older=True)
    write_paper_run(store)
    assert cli("index", uri, "--local", "--quiet").code == 0
    cachedfs.forget_sealed_files()  # the query below starts cold, as a new process would
    return uri


def _reads(requests: list[tuple[str, str]], pattern: str) -> Counter[str]:
    """GETs and HEADs of single objects whose key matches ``pattern``, by key."""
    return Counter(path for method, path in requests if method in ("GET", "HEAD") and re.search(pattern, path))


def _query(cli: Any, uri: str) -> Any:
    answer = cli("lineage", uri, *QUERY)
    assert answer.code == 0, answer
    parsed = json.loads(answer.out)
    parsed["stats"].pop("seconds")  # the one part that differs between two askings
    return parsed


def test_a_query_reads_each_index_and_row_file_once(cli: Any, server: tuple[str, Requests]) -> None:
    endpoint, requests = server
    uri = _indexed_store(cli, endpoint)
    seen = requests.during(lambda: _query(cli, uri))
    data = _reads(seen, r"/index/gen-[^/]+/.*\.parquet$|/runs/[^/]+/rows/.*\.parquet$")
    assert data, seen  # the query did read index buckets and stored rows
    assert max(data.values()) == 1, data  # one request per file: no HEAD before it, no second open
    assert not [p for m, p in seen if m == "HEAD" and "/index/gen-" in p], seen


def test_a_second_query_reads_no_immutable_file_again(cli: Any, server: tuple[str, Requests]) -> None:
    endpoint, requests = server
    uri = _indexed_store(cli, endpoint)
    first_answer = _query(cli, uri)
    second: list[Any] = []
    seen = requests.during(lambda: second.append(_query(cli, uri)))
    assert second[0] == first_answer
    # Only what can change is asked again: the runs' listing and manifests,
    # CURRENT, and the generation's meta.json (which names its files).
    again = _reads(seen, r"/index/gen-[^/]+/(?!meta\.json$)|/runs/[^/]+/(?!_manifest\.json$)")
    assert not again, again


def test_what_can_change_is_read_afresh(cli: Any, server: tuple[str, Requests]) -> None:
    """A run deleted by another store object is gone for a store opened
    before the deletion, though it had read (and remembered) the run's files."""
    endpoint, _ = server
    uri = _indexed_store(cli, endpoint)
    before = open_store(uri)
    assert len(before.runs()) == 2 and before.tables().num_rows == 6
    assert cli("delete-run", uri, "1", "--quiet").code == 0
    assert [m["number"] for m in before.runs()] == [2]
    assert before.tables().num_rows == 3


def test_an_index_generation_is_a_bounded_number_of_files_written_once_each(
    cli: Any, server: tuple[str, Requests]
) -> None:
    endpoint, requests = server
    uri = f"s3://req/{uuid.uuid4().hex[:8]}?endpoint_override={endpoint}&scheme=http&region={REGION}"
    store = open_store(uri)
    write_paper_run(store)
    seen = requests.during(lambda: cli("index", uri, "--local", "--quiet"))
    keys = _keys(endpoint, uri.split("?")[0].split("/", 3)[3] + "/index/")
    generation = {k for k in keys if "/gen-" in k and not k.endswith("/")}  # not the folder's marker
    assert len(generation) == GENERATION_FILES, sorted(generation)
    writes = [p for m, p in seen if m in ("PUT", "POST") and "/gen-" in p]
    files, folders = [p for p in writes if not p.endswith("/")], [p for p in writes if p.endswith("/")]
    assert len(files) == GENERATION_FILES, Counter(files)  # one PUT a file: no multipart upload
    assert len(folders) <= 1, folders  # the generation's own folder at most: no marker per bucket


def _keys(endpoint: str, prefix: str) -> list[str]:
    import boto3

    client = boto3.client("s3", endpoint_url=f"http://{endpoint}", region_name=REGION)
    listed = client.list_objects_v2(Bucket="req", Prefix=prefix)
    return sorted(o["Key"] for o in listed.get("Contents", []))


# -- the wrapper's memory, over a filesystem that counts its opens (no server) -------------------


class CountingHandler(pafs.FileSystemHandler):  # type: ignore[misc]
    """A local folder as a filesystem that counts the files it opens for reading."""

    def __init__(self) -> None:
        self.fs = pafs.LocalFileSystem()
        self.opened: Counter[str] = Counter()

    def get_type_name(self) -> str:
        return "counting"

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return list(self.fs.get_file_info(paths))

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        return list(self.fs.get_file_info(selector))

    def create_dir(self, path: str, recursive: bool) -> None:
        self.fs.create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        self.fs.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self.fs.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        raise NotImplementedError

    def delete_file(self, path: str) -> None:
        self.fs.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        self.fs.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        self.fs.copy_file(src, dest)

    def open_input_stream(self, path: str) -> Any:
        self.opened[path] += 1
        return self.fs.open_input_stream(path)

    def open_input_file(self, path: str) -> Any:
        self.opened[path] += 1
        return self.fs.open_input_file(path)

    def open_output_stream(self, path: str, metadata: Any) -> Any:
        return self.fs.open_output_stream(path)

    def open_append_stream(self, path: str, metadata: Any) -> Any:
        return self.fs.open_append_stream(path)


def _write(fs: pafs.FileSystem, path: str, data: bytes) -> None:
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with fs.open_output_stream(path) as out:
        out.write(data)


def _read(fs: pafs.FileSystem, path: str) -> bytes:
    with fs.open_input_file(path) as f:
        return bytes(f.read())


def test_only_files_of_a_folder_whose_commit_record_was_read_are_remembered(tmp_path: Any) -> None:
    counting = CountingHandler()
    root = str(tmp_path / "store")
    fs = cachedfs.cached_filesystem(pafs.PyFileSystem(counting), root, f"test:{uuid.uuid4().hex}")
    gen, run = f"{root}/index/gen-1", f"{root}/runs/r1"
    for path in (f"{gen}/meta.json", f"{gen}/sets.parquet", f"{run}/_manifest.json", f"{run}/t.parquet"):
        _write(fs, path, b"v1")
    for _ in range(2):
        assert _read(fs, f"{gen}/sets.parquet") == b"v1"  # not sealed yet: read each time
    assert counting.opened[f"{gen}/sets.parquet"] == 2
    for path in (f"{gen}/meta.json", f"{run}/_manifest.json"):  # the commit records seal their folders
        with fs.open_input_stream(path) as stream:
            stream.read()
    for _ in range(3):
        assert _read(fs, f"{gen}/sets.parquet") == b"v1" and _read(fs, f"{run}/t.parquet") == b"v1"
        assert _read(fs, f"{run}/_manifest.json") == b"v1"
    assert counting.opened[f"{gen}/sets.parquet"] == 3 and counting.opened[f"{run}/t.parquet"] == 1
    assert counting.opened[f"{run}/_manifest.json"] == 4  # a run's manifest is always read afresh
    _write(fs, f"{run}/t.parquet", b"v2")  # what this process writes unseals what it touches
    assert _read(fs, f"{run}/t.parquet") == b"v2"
    fs.delete_dir(gen)
    with pytest.raises(FileNotFoundError):
        _read(fs, f"{gen}/sets.parquet")
