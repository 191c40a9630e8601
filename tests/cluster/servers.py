"""Real parts on 127.0.0.1 for the cluster tests (issue 27), started by the
tests themselves and stopped after them: an S3 API server (moto's, from
PyPI) and a Spark standalone cluster from the pyspark wheel's own jars.

Nothing here reaches a real cloud: every S3 client is given the local
server's endpoint explicitly, with made-up credentials."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

HOST = "127.0.0.1"
# Generous: the machine is shared; the wait ends as soon as the server answers.
START_TIMEOUT_S = 120.0
# The test cluster: a master and two workers, so that tasks run in two executors (two
# processes, on separate disks in the isolated cluster) as on two machines.
WORKERS = 2
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "provplug-test", "AWS_SECRET_ACCESS_KEY": "provplug-test"}
REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def java_missing() -> str | None:
    """Why a Spark cluster cannot run here, or None."""
    return None if shutil.which("java") else "java is not installed: no Spark standalone cluster can start"


@dataclasses.dataclass(frozen=True)
class S3Server:
    """A running S3 API server and the bucket the tests use."""

    endpoint: str  # host:port
    bucket: str

    @property
    def url(self) -> str:
        return f"http://{self.endpoint}"

    def env(self) -> dict[str, str]:
        """Environment a process needs to reach the server (and nothing else)."""
        return {**CREDENTIALS, "AWS_DEFAULT_REGION": REGION, "AWS_ENDPOINT_URL": self.url}

    def uri(self, prefix: str) -> str:
        """A store URI on the server: pyarrow's S3 filesystem with the endpoint given."""
        return f"s3://{self.bucket}/{prefix}?endpoint_override={self.endpoint}&scheme=http&region={REGION}"

    def client(self) -> object:
        import boto3  # type: ignore[import-untyped]

        return boto3.client("s3", endpoint_url=self.url, region_name=REGION, **_boto_credentials())


def _boto_credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    }


@contextlib.contextmanager
def s3_server(log_dir: Path) -> Iterator[S3Server]:
    """moto's S3 server on a free port of 127.0.0.1 with a fresh bucket; stopped after."""
    port = free_port()
    log = (log_dir / f"moto-{port}.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, **CREDENTIALS},
        start_new_session=True,
    )
    try:
        _wait_for_http(f"http://{HOST}:{port}/moto-api/", process)
        server = S3Server(f"{HOST}:{port}", f"provplug-{uuid.uuid4().hex[:8]}")
        server.client().create_bucket(Bucket=server.bucket)  # type: ignore[attr-defined]
        yield server
    finally:
        _stop(process)
        log.close()


def _wait_for_http(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the server for {url} exited with {process.returncode} before answering")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing answered at {url} within {START_TIMEOUT_S:.0f} s") from None
            time.sleep(0.2)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a server we started (its own process group: the JVM's children too)."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def spark_home() -> Path:
    """The pyspark package: its jars/ are a whole Spark distribution's."""
    import pyspark

    return Path(pyspark.__file__).parent


@dataclasses.dataclass(frozen=True)
class SparkCluster:
    """A running standalone master and its workers."""

    master: str  # spark://127.0.0.1:PORT
    work_dir: Path
    # A directory of the driver's disk the workers cannot see (None: they see the whole disk).
    hidden: Path | None = None


def _daemon(
    cls: str, args: list[str], log: Path, env: dict[str, str], prefix: list[str] | None = None
) -> subprocess.Popen[bytes]:
    """A Spark daemon (Master or Worker) started as the wheel's sbin/ scripts do, in the foreground
    (``prefix``: a command that execs the JVM, e.g. in a mount namespace of its own)."""
    java = [
        *(prefix or []),
        "java",
        "-Xmx256m",
        "-cp",
        f"{spark_home() / 'jars'}/*",
        # As bin/spark-class does on Java 17: Spark's own jars open these modules.
        "--add-opens=java.base/java.nio=ALL-UNNAMED",
        "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
        "--add-opens=java.base/java.lang=ALL-UNNAMED",
        "--add-opens=java.base/java.util=ALL-UNNAMED",
        cls,
        *args,
    ]
    with log.open("wb") as out:
        return subprocess.Popen(java, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def unshare_missing() -> str | None:
    """Why a worker cannot be given a mount namespace of its own here, or None."""
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed: no worker with a disk of its own"
    tried = subprocess.run(["unshare", "-m", "true"], capture_output=True, text=True)
    if tried.returncode != 0:
        return f"unshare -m is not permitted here (needs root or CAP_SYS_ADMIN): {tried.stderr.strip()}"
    return None


def _hiding(directory: Path) -> list[str]:
    """A command prefix that runs its command in a mount namespace of its own
    where ``directory`` is an empty tmpfs: what the driver writes there, the
    command does not see, and the other way round (as on another machine)."""
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        'mount -t tmpfs provplug-worker-disk "$0" && exec "$@"',
        str(directory),
    ]


@contextlib.contextmanager
def spark_cluster(
    work: Path, worker_env: dict[str, str], hidden: Path | None = None, workers: int = WORKERS
) -> Iterator[SparkCluster]:
    """A standalone master and ``workers`` workers (1 core, 1 GiB each) on 127.0.0.1; stopped after.

    The workers' executors run the current venv's Python (``PYSPARK_PYTHON``)
    with ``worker_env`` (the S3 server's endpoint and credentials). With
    ``hidden``, each worker (and its executors) runs in a mount namespace of
    its own over an empty tmpfs on that directory (:func:`unshare_missing`
    says whether this machine allows it)."""
    home = spark_home()
    env = {
        **os.environ,
        **worker_env,
        "SPARK_HOME": str(home),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": HOST,
        "SPARK_NO_DAEMONIZE": "1",
        # What bin/load-spark-env.sh sets: without it the worker's launcher looks for a source build.
        "SPARK_SCALA_VERSION": "2.13",
    }
    port, ui = free_port(), free_port()
    master_url = f"spark://{HOST}:{port}"
    master = _daemon(
        "org.apache.spark.deploy.master.Master",
        ["--host", HOST, "--port", str(port), "--webui-port", str(ui)],
        work / "master.log",
        env,
    )
    started: list[subprocess.Popen[bytes]] = []
    try:
        _wait_for_http(f"http://{HOST}:{ui}/json/", master)
        for n in range(workers):
            started.append(_worker(work, n, master_url, env, hidden))
        _wait_for_workers(f"http://{HOST}:{ui}/json/", started)
        yield SparkCluster(master_url, work, hidden)
    finally:
        for worker in started:
            _stop(worker)
        _stop(master)


def _worker(work: Path, n: int, master_url: str, env: dict[str, str], hidden: Path | None) -> subprocess.Popen[bytes]:
    """Worker ``n`` (1 core, 1 GiB), with a work directory and a log of its own."""
    worker_dir = work / f"worker-{n}"
    worker_dir.mkdir()
    args = ["--host", HOST, "--cores", "1", "--memory", "1g", "--webui-port", "0", "--work-dir", str(worker_dir)]
    return _daemon(
        "org.apache.spark.deploy.worker.Worker",
        [*args, master_url],
        work / f"worker-{n}.log",
        env,
        _hiding(hidden) if hidden is not None else None,
    )


def _wait_for_workers(status_url: str, workers: list[subprocess.Popen[bytes]]) -> None:
    """Until the master lists every worker ALIVE."""
    import json

    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        for worker in workers:
            if worker.poll() is not None:
                raise RuntimeError(f"a Spark worker exited with {worker.returncode} before registering")
        with urllib.request.urlopen(status_url, timeout=5) as answer:
            status = json.load(answer)
        if sum(w.get("state") == "ALIVE" for w in status.get("workers", [])) >= len(workers):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"not every Spark worker registered with the master within {START_TIMEOUT_S:.0f} s")
        time.sleep(0.5)
