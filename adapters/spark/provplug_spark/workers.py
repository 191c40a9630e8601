"""Spark's Python workers: check once per SparkContext that they can run provplug.

Rows and triples are written inside Spark tasks (:mod:`.writer`), so the
interpreter Spark starts for its Python workers must import
``provplug_spark``, pyarrow and NumPy. That interpreter is
``SparkContext.pythonExec``: the ``PYSPARK_PYTHON`` the driver had when the
context started (``spark-submit`` sets it from ``spark.pyspark.python``),
else the first ``python3`` on the PATH — often not the driver's interpreter
when a script is run as ``.venv/bin/python script.py`` without activating
the virtualenv.

Without a check, such a run fails deep inside its first task with a
``ModuleNotFoundError`` wrapped in a Java stack trace. :func:`check_workers`
runs one tiny job instead when the capture session opens, and turns a worker
that lacks them into a one-line :class:`~provplug.errors.CaptureError` that
says what to set. A context whose workers passed is not checked again, and
a local one whose workers run the driver's own interpreter (``pythonExec``
is ``sys.executable``, as :func:`provplug.sparksession.local_spark` sets
it) is not checked at all: they import what the driver imports.

Keeping the probe cheap (it runs before the first capture on a context
whose workers run another interpreter than the driver):

* the probe is a plain (not Arrow) Python UDF, so a worker without pyarrow
  still runs it, and so that it starts the same worker daemon as the
  writers' ``mapInArrow`` jobs (an RDD job starts a second daemon: about
  1.5 s more on a loaded ``local[2]``);
* it is built inside a function, so cloudpickle ships its code by value: a
  worker that cannot import ``provplug_spark`` can still load it and say so;
* it imports ``provplug_spark`` (only the package, a docstring) and locates
  pyarrow and NumPy without importing them (``find_spec``): the writer jobs'
  tasks get freshly forked workers (Spark 4.3, local mode), so nothing the
  probe imported would be reused.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import threading
import weakref
from typing import Any

from pyspark import SparkContext
from pyspark.sql import SparkSession

from provplug.errors import CaptureError

# What a worker imports to write a step's rows and triples (imported: the
# first; located only: the others).
WORKER_MODULES = ("provplug_spark", "pyarrow", "numpy")
PROBE_SCHEMA = "struct<python:string,missing:string,error:string>"
JOB_DESCRIPTION = "provplug: can Spark's Python workers import provplug_spark?"

_lock = threading.Lock()
# SparkContext -> the worker interpreters (its pythonExec values) that passed.
_passed: weakref.WeakKeyDictionary[SparkContext, set[str]] = weakref.WeakKeyDictionary()


def _probe_function(modules: tuple[str, ...]) -> Any:
    """The probe: nested, so that cloudpickle ships its code, not its name."""

    def probe(_: Any) -> tuple[str, str | None, str | None]:
        import importlib
        import importlib.util
        import sys

        for i, module in enumerate(modules):
            try:
                found = importlib.import_module(module) if i == 0 else importlib.util.find_spec(module)
            except ImportError as exc:
                return sys.executable, getattr(exc, "name", None) or module, f"{type(exc).__name__}: {exc}"
            if found is None:
                return sys.executable, module, f"ModuleNotFoundError: No module named {module!r}"
        return sys.executable, None, None

    return probe


def check_workers(spark: SparkSession) -> None:
    """Raise :class:`CaptureError` unless the Python workers of ``spark``'s
    context can import provplug's Spark adapter (one one-task job per context
    and worker interpreter; passes are remembered)."""
    sc = spark.sparkContext
    python = sc.pythonExec
    if _driver_interpreter(sc, python):
        return
    with _lock:
        if python in _passed.get(sc, ()):
            return
    worker, missing, error = _run_probe(spark)
    if error is not None:
        raise CaptureError(
            f"Spark's Python workers run {_shown(python, worker)} (PYSPARK_PYTHON / spark.pyspark.python), "
            f"which {_trouble(missing, error)}: set PYSPARK_PYTHON={sys.executable} before the SparkSession "
            "starts, or install provplug where the workers run"
        )
    with _lock:
        _passed.setdefault(sc, set()).add(python)


def _driver_interpreter(sc: SparkContext, python: str) -> bool:
    """True when the workers run on this machine as this very interpreter
    file (compared as paths, not resolved: a virtualenv's ``python`` links to
    an interpreter that lacks the virtualenv's packages)."""
    if not (sc.master or "").startswith("local"):
        return False
    found = shutil.which(python)
    return found is not None and os.path.abspath(found) == os.path.abspath(sys.executable)


def _run_probe(spark: SparkSession) -> tuple[str | None, str | None, str | None]:
    """(the worker's ``sys.executable``, a module it lacks, the error), from
    one one-task job; the error is None when the worker has every module."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors.exceptions.captured import CapturedException
    from pyspark.sql import functions as F

    sc = spark.sparkContext
    probe = F.udf(_probe_function(WORKER_MODULES), PROBE_SCHEMA, useArrow=False)
    description = sc.getLocalProperty("spark.job.description")
    sc.setJobDescription(JOB_DESCRIPTION)
    try:
        [(found,)] = spark.range(1, numPartitions=1).select(probe("id")).collect()
    except (Py4JJavaError, CapturedException) as exc:  # no worker ran the probe: why, in one line
        line = _worker_error(str(exc))
        lacked = re.search(r"No module named '([\w.]+)'", line)
        return None, lacked.group(1) if lacked else None, line
    finally:
        sc.setLocalProperty("spark.job.description", description)  # type: ignore[arg-type]  # None clears it; the stub wants str
    return found["python"], found["missing"], found["error"]


def _shown(python: str, worker: str | None) -> str:
    """``python`` (what Spark starts) and, when it differs, the interpreter it is."""
    return python if worker is None or worker == python else f"{python}, i.e. {worker}"


def _trouble(missing: str | None, error: str) -> str:
    if missing is None:
        return f"fail ({error})"
    if error.startswith("ModuleNotFoundError"):
        return f"cannot import {missing}"
    return f"cannot import {missing} ({error})"


def _worker_error(text: str) -> str:
    """One line saying why no worker ran the probe, from Spark's (Java and
    Python) error text: a module a worker lacks, else what the worker
    printed, else the last Python exception, else the task's Java exception."""
    lines = [line.strip() for line in text.splitlines()]
    for line in lines:
        if "No module named" in line:
            return _unqualified(line)
    if "Error from python worker:" in lines:
        printed = [line for line in lines[lines.index("Error from python worker:") + 1 :] if line]
        if printed:
            return printed[0]
    python = [line for line in lines if re.match(r"\w+(?:Error|Exception): ", line)]
    if python:
        return python[-1]
    task = re.search(r"most recent failure: .*?\): (.+)", text)
    if task:
        return _unqualified(task.group(1).strip())
    return next((line for line in lines if line), "unknown error")


def _unqualified(line: str) -> str:
    """``line`` without the package of a leading Java class name."""
    return re.sub(r"^(?:[a-z_$][\w$]*\.)+(?=[A-Z])", "", line)
