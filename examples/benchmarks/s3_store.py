"""The store on S3 (issue 27): requests and wall time per store operation
and query class, on moto's S3 server in this process (127.0.0.1, no cloud),
against the same store on local disk; and a CSProv query of the LC-SL class
on the paper-shaped trace (``paper_trace.py``, small scale) stored on S3.

    python examples/benchmarks/s3_store.py measure OUT.json [--repeat 3] [--scale 0.01]
    python examples/benchmarks/s3_store.py report BEFORE.json AFTER.json OUT.md

Requests are counted at the server (one werkzeug access-log record each).
The people store holds two runs of the paper's example (Tables 1-4, stored
rows); indexes are built with the local engine. Each operation starts with
nothing remembered, as a new ``provplug`` process would; a query's "again"
figure is the same query once more in the same process. ``measure`` runs
against whatever provplug is importable from this file's checkout, so the
same script measures the code before and after a change (run it from the
older checkout for the "before" figures).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(Path(__file__).resolve().parent)]

ENV = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}
QUERIES = ("lineage", "whatif", "export", "diff")  # operations that are asked twice ("again")
WHERE = "City = 'NY'"


class RequestCounter(logging.Handler):
    """Counts the S3 server's requests (werkzeug logs one record per request)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1
        self.lines.append(record.getMessage())


def _cli(*args: str) -> None:
    from provplug.cli.main import main

    code = main([*args, "--quiet"] if args[0] in ("index", "delete-run", "gc") else list(args))
    if code != 0:
        raise SystemExit(f"provplug {' '.join(args)} failed ({code})")


def _cold() -> None:
    """Forget what this process read (the code before the change remembered nothing)."""
    with contextlib.suppress(ImportError):
        from provplug.store.cachedfs import forget_sealed_files

        forget_sealed_files()


def operations(store: str) -> list[tuple[str, Callable[[], None]]]:
    from provplug.store.open import open_store
    from tests.cluster.test_s3_store import write_paper_run

    lineage = [
        (
            f"lineage {m} {d}",
            lambda m=m, d=d: _cli(
                "lineage",
                store,
                "AvgAge.Age" if d == "up" else "Person1.Age",
                "--where",
                WHERE,
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
        ("export prov-json", lambda: _cli("export", store, "AvgAge.Age", "--where", WHERE, "--format", "prov-json")),
        ("diff", lambda: _cli("diff", store, "1", "2", "Person1", "--json")),
        ("delete-run", lambda: _cli("delete-run", store, "1")),
        ("gc", lambda: _cli("gc", store, "--now")),
    ]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with open(os.devnull, "w") as devnull:
        stdout, sys.stdout = sys.stdout, devnull
        try:
            yield
        finally:
            sys.stdout = stdout


def _timed(run: Callable[[], object], counter: RequestCounter | None) -> dict[str, float]:
    before, start = counter.count if counter else 0, time.perf_counter()
    with _quiet():
        run()
    return {"requests": (counter.count - before) if counter else 0, "wall_s": time.perf_counter() - start}


def measure_people(store: str, counter: RequestCounter | None) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for name, run in operations(store):
        _cold()
        out[name] = _timed(run, counter)
        if name.startswith(QUERIES):
            again = _timed(run, counter)
            out[name] |= {"again_requests": again["requests"], "again_wall_s": again["wall_s"]}
    return out


def measure_trace(uri: str, scale: float, counter: RequestCounter) -> dict[str, Any]:
    """The paper-shaped trace on S3: import, index, and LC-SL CSProv queries
    (values picked on a local copy of the same trace, ids being equal)."""
    import paper_trace
    import query_bench

    with tempfile.TemporaryDirectory() as tmp:
        local = Path(tmp) / "trace.prov"
        paper_trace.generate(local, scale, 0)
        query_bench.prepare(local, scale, 0, theta=1000)
        values = query_bench.pick_queries(local, 3, 0)["LC-SL"]
    out: dict[str, Any] = {"scale": scale}
    with _quiet():
        out["import"] = _timed(lambda: paper_trace.generate(uri, scale, 0), counter)
    out["index (local engine)"] = _timed(lambda: _cli("index", uri, "--local", "--theta", "1000"), counter)
    queries = []
    for value in values:
        query = _lcsl_query(uri, value)
        _cold()
        start = len(counter.lines)
        cold = _timed(query, counter)
        index_files = [path for path in _paths(counter.lines[start:]) if "/index/gen-" in path and ".parquet" in path]
        again = _timed(query, counter)
        queries.append(
            {
                "value": value,
                **cold,
                "index_file_requests": len(index_files),
                "index_files": len(set(index_files)),
                "again_requests": again["requests"],
                "again_wall_s": again["wall_s"],
            }
        )
    out["LC-SL"] = queries
    return out


def _paths(lines: list[str]) -> list[str]:
    """The object or listing each logged request asked for."""
    found = (re.search(r"[A-Z]+ (/\S*) HTTP", line) for line in lines)
    return [match.group(1) for match in found if match]


def _lcsl_query(uri: str, value: int) -> Callable[[], None]:
    return lambda: _cli("lineage", uri, "--value-id", str(value), "--method", "csprov", "--json")


@contextlib.contextmanager
def s3_server() -> Iterator[tuple[str, RequestCounter]]:
    """moto's S3 server on 127.0.0.1 with a fresh bucket: ``(bucket URI prefix, counter)``."""
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
        yield f"s3://{bucket}/{{}}?endpoint_override={host}:{port}&scheme=http&region=us-east-1", counter
    finally:
        server.stop()


def measure(out: Path, repeat: int, scale: float) -> None:
    people: list[dict[str, Any]] = []
    local: list[dict[str, Any]] = []
    with s3_server() as (uri, counter):
        for i in range(repeat):
            people.append(measure_people(uri.format(f"people-{i}"), counter))
            with tempfile.TemporaryDirectory() as tmp:
                local.append(measure_people(str(Path(tmp) / "people.prov"), None))
        trace = measure_trace(uri.format("trace"), scale, counter)
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "repeat": repeat,
        "people": _medians(people),
        "local": _medians(local),
        "trace": trace,
    }
    out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result["people"]))


def _medians(runs: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    return {op: {k: statistics.median(r[op][k] for r in runs) for k in runs[0][op]} for op in runs[0]}


# -- the report ---------------------------------------------------------------------------


def report(before: dict[str, Any], after: dict[str, Any]) -> str:
    lines = [
        "# The store on S3: requests and wall time (issue 27)",
        "",
        "`python examples/benchmarks/s3_store.py measure OUT.json --repeat 3` on each checkout (before: the",
        "commit this change started from, with this script copied in), then",
        "`python examples/benchmarks/s3_store.py report BEFORE.json AFTER.json examples/benchmarks/s3_store.md`.",
        "moto's S3 server runs in the benchmark's process on 127.0.0.1; requests are counted at the server.",
        f"Before: {before['date']}; after: {after['date']} (a 2-core machine shared with other jobs:",
        "wall times are medians of the runs and move with the load; request counts do not).",
        "",
        "## The paper's people example (two runs, Tables 1-4 with stored rows, local index engine)",
        "",
        "Each operation starts with nothing remembered, as a new `provplug` process does; *again* is the",
        "same query once more in the same process.",
        "",
        "| operation | requests before | requests after | again after | S3 wall before (s) | S3 wall after (s)"
        " | local disk wall after (s) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for op, now in after["people"].items():
        old = before["people"][op]
        again = f"{now['again_requests']:.0f}" if "again_requests" in now else ""
        lines.append(
            f"| {op} | {old['requests']:.0f} | {now['requests']:.0f} | {again} | {old['wall_s']:.2f}"
            f" | {now['wall_s']:.2f} | {after['local'][op]['wall_s']:.2f} |"
        )
    lines += _trace_section(before["trace"], after["trace"])
    return "\n".join(lines) + "\n"


def _trace_section(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    lines = [
        "",
        f"## LC-SL on the paper-shaped trace (scale {after['scale']}, seed 0, on S3)",
        "",
        "`paper_trace.py`'s trace imported into the S3 store and indexed there (local engine, theta 1000);",
        "three LC-SL values (100-200 ancestors in the largest component, picked by `query_bench.py` on a",
        "local copy of the same trace) asked with `provplug lineage STORE --value-id V --method csprov`.",
        "*Index files* are the distinct Parquet files of the generation the query read, and *requests on",
        "them* how many requests that took. One run per value (no median): its wall times are indicative.",
        "",
        "| step | requests before | requests after | S3 wall before (s) | S3 wall after (s) |",
        "|---|---:|---:|---:|---:|",
    ]
    for step in ("import", "index (local engine)"):
        lines.append(
            f"| {step} | {before[step]['requests']:.0f} | {after[step]['requests']:.0f}"
            f" | {before[step]['wall_s']:.2f} | {after[step]['wall_s']:.2f} |"
        )
    lines += [
        "",
        "| LC-SL value | requests before | requests after | index files read | requests on them before"
        " | after | again after | S3 wall before (s) | after (s) | again after (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for old, new in zip(before["LC-SL"], after["LC-SL"], strict=True):
        lines.append(
            f"| {new['value']} | {old['requests']:.0f} | {new['requests']:.0f} | {new['index_files']}"
            f" | {old['index_file_requests']} | {new['index_file_requests']} | {new['again_requests']:.0f}"
            f" | {old['wall_s']:.2f} | {new['wall_s']:.2f} | {new['again_wall_s']:.2f} |"
        )
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("measure")
    run.add_argument("out", type=Path)
    run.add_argument("--repeat", type=int, default=3)
    run.add_argument("--scale", type=float, default=0.01)
    rep = sub.add_parser("report")
    rep.add_argument("before", type=Path)
    rep.add_argument("after", type=Path)
    rep.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "measure":
        measure(args.out, args.repeat, args.scale)
    else:
        text = report(json.loads(args.before.read_text()), json.loads(args.after.read_text()))
        args.out.write_text(text)
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
