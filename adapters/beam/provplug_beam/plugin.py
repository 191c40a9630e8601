"""Registers the Apache Beam capture adapter. Beam is imported only when used."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from provplug import hookimpl

if TYPE_CHECKING:
    from provplug.plugin.protocols import AdapterSession, RunRecorder


class BeamAdapter:
    """Captures steps of Apache Beam pipelines (install ``provplug[beam]``)."""

    name = "beam"

    def accepts(self, engine: object) -> bool:
        """Any ``apache_beam.Pipeline``, subclasses included (``TestPipeline``).

        Beam is not imported to answer: an engine that is a Beam pipeline
        was built by an already imported Beam.
        """
        beam = sys.modules.get("apache_beam")
        pipeline = getattr(beam, "Pipeline", None)
        return isinstance(pipeline, type) and isinstance(engine, pipeline)

    def open(self, engine: object, run: RunRecorder) -> AdapterSession:
        from apache_beam import Pipeline

        from .session import BeamSession

        assert isinstance(engine, Pipeline)  # accepts() said so

        return BeamSession(engine, run)


@hookimpl
def provplug_register_adapters(register: Callable[[Any], None]) -> None:
    register(BeamAdapter())
