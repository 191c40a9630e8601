"""The Beam adapter passes provplug.testing's contract on a small pipeline:
a Map and a Filter over dict elements. What the pipeline produced is read by
running the same steps in a plain Beam pipeline (no capture) that writes its
outputs as JSON lines."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

import provplug
from provplug.testing import AdapterContract

from .helpers import PEOPLE, beam


@provplug.step("Decades", output="Decade")
def decades(people: Any) -> Any:
    return people | beam.Map(lambda p: {"Name": p["Name"], "Decade": p["Age"] // 10})


@provplug.step("Olds", output="Old")
def olds(people: Any) -> Any:
    return people | beam.Filter(lambda p: p["Age"] >= 40)


def explode(person: dict[str, Any]) -> dict[str, Any]:
    raise RuntimeError(f"broken on {person['Name']}")


@provplug.step("Broken", output="Never")
def broken(people: Any) -> Any:
    return people | beam.Map(explode)  # fails when the pipeline runs, at the capture block's end


def build(people: Any) -> dict[str, Any]:
    return {"Decade": decades(people), "Old": olds(people)}


def run_uncaptured() -> dict[str, list[dict[str, Any]]]:
    """The same steps outside any capture (they run unchanged), outputs read back from files."""
    with tempfile.TemporaryDirectory() as folder:
        with beam.Pipeline() as pipeline:
            for name, pcoll in build(pipeline | beam.Create(PEOPLE)).items():
                _ = (
                    pcoll
                    | f"Json{name}" >> beam.Map(json.dumps)
                    | f"Write{name}" >> beam.io.WriteToText(str(Path(folder) / name))
                )
        return {
            name: [json.loads(line) for f in Path(folder).glob(f"{name}-*") for line in f.read_text().splitlines()]
            for name in ("Decade", "Old")
        }


class TestBeamContract(AdapterContract):
    adapter_name = "beam"
    dense_rows = True  # rows are numbered 0..n-1 (by content, deterministically)
    failure = RuntimeError

    @pytest.fixture(scope="class")
    @classmethod
    def new_engine(cls) -> Callable[[], object]:
        return beam.Pipeline

    def pipeline(self, run: Any) -> Mapping[str, Any]:
        return build(run.source(PEOPLE, "People"))

    def produced(self, outputs: Mapping[str, Any]) -> Mapping[str, list[dict[str, Any]]]:
        assert set(outputs) == {"Decade", "Old"}
        return run_uncaptured()

    def failing_pipeline(self, run: Any) -> None:
        broken(olds(run.source(PEOPLE, "People")))
