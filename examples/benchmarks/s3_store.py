"""The store on S3 (issue 27): requests and wall time per store operation
and query class, on moto's S3 server in this process (127.0.0.1, no cloud),
against the same store on local disk.

    python examples/benchmarks/s3_store.py [OUT.md]

Requests are counted at the server (one werkzeug access-log record each).
The store holds two runs of the paper's people example (Tables 1-4, stored
rows); the index is built with the local engine.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # the tests' writer of the paper's run

ENV = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}


class RequestCounter(logging.Handler):
    """Counts the S3 server's requests (werkzeug logs one record per request)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


def _cli(*args: str) -> None:
    from provplug.cli.main import main

    code = main([*args, "--quiet"] if args[0] in ("index", "delete-run", "gc") else list(args))
    if code != 0:
        raise SystemExit(f"provplug {' '.join(args)} failed ({code})")


def operations(store: str) -> list[tuple[str, Callable[[], None]]]:
    from provplug.store.open import open_store
    from tests.cluster.test_s3_store import write_paper_run

    where = "City = 'NY'"
    lineage = [
        (
            f"lineage {m} {d}",
            lambda m=m, d=d: _cli(
                "lineage",
                store,
                "AvgAge.Age" if d == "up" else "Person1.Age",
                "--where",
                where,
                "--direction",
                d,
                "--method",
                m,
                "--json",
            ),
        )
        for m in ("csprov", "ccprov", "rq")
        for d in ("up", "down")
    ]
    return [
        ("commit run 1", lambda: write_paper_run(open_store(store), older=True)),
        ("commit run 2", lambda: write_paper_run(open_store(store))),
        ("runs", lambda: _cli("runs", store, "--json")),
        ("index (local engine)", lambda: _cli("index", store, "--local")),
        *lineage,
        ("whatif", lambda: _cli("whatif", store, "--delete", "Person1", "--where", "City = 'LA'", "--json")),
        ("export prov-json", lambda: _cli("export", store, "AvgAge.Age", "--where", where, "--format", "prov-json")),
        ("diff", lambda: _cli("diff", store, "1", "2", "Person1", "--json")),
        ("delete-run", lambda: _cli("delete-run", store, "1")),
        ("gc", lambda: _cli("gc", store, "--now")),
    ]


def measure(store: str, counter: RequestCounter | None) -> dict[str, tuple[int | None, float]]:
    out: dict[str, tuple[int | None, float]] = {}
    devnull = open(os.devnull, "w")  # noqa: SIM115  (the answers are not the point)
    for name, run in operations(store):
        before, start = counter.count if counter else 0, time.perf_counter()
        stdout, sys.stdout = sys.stdout, devnull
        try:
            run()
        finally:
            sys.stdout = stdout
        out[name] = (counter.count - before if counter else None, time.perf_counter() - start)
    return out


def main(argv: list[str]) -> int:
    import boto3  # type: ignore[import-untyped]
    from moto.server import ThreadedMotoServer

    os.environ.update(ENV)
    counter = RequestCounter()
    logging.getLogger("werkzeug").addHandler(counter)
    logging.getLogger("werkzeug").setLevel(logging.INFO)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    bucket = f"bench-{uuid.uuid4().hex[:8]}"
    boto3.client("s3", endpoint_url=f"http://{host}:{port}").create_bucket(Bucket=bucket)
    try:
        s3 = measure(f"s3://{bucket}/people?endpoint_override={host}:{port}&scheme=http&region=us-east-1", counter)
        with tempfile.TemporaryDirectory() as tmp:
            local = measure(str(Path(tmp) / "people.prov"), None)
    finally:
        server.stop()
    report = _report(s3, local)
    print(report)
    if argv:
        Path(argv[0]).write_text(report)
    print(json.dumps({k: {"requests": v[0], "s3_s": round(v[1], 3)} for k, v in s3.items()}), file=sys.stderr)
    return 0


def _report(s3: dict[str, tuple[int | None, float]], local: dict[str, tuple[int | None, float]]) -> str:
    lines = [
        "# The store on S3: requests and wall time (issue 27)",
        "",
        "`python examples/benchmarks/s3_store.py examples/benchmarks/s3_store.md`: moto's S3 server in the",
        "benchmark's process on 127.0.0.1 (requests counted at the server), against the same operations on",
        "local disk. Two runs of the paper's people example (Tables 1-4 with stored rows), local index engine.",
        "",
        "| operation | S3 requests | S3 wall (s) | local disk wall (s) |",
        "|---|---:|---:|---:|",
    ]
    for name, (requests, wall) in s3.items():
        lines.append(f"| {name} | {requests} | {wall:.2f} | {local[name][1]:.2f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
