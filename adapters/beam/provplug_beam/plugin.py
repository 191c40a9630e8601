"""Registers the Apache Beam capture adapter. Beam is imported only when used."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from provplug import hookimpl

if TYPE_CHECKING:
    from provplug.protocols import AdapterSession, RunRecorder


class BeamAdapter:
    """Captures steps of Apache Beam pipelines (install ``provplug[beam]``)."""

    name = "beam"

    def accepts(self, engine: object) -> bool:
        if type(engine).__name__ != "Pipeline":
            return False
        try:
            from apache_beam import Pipeline
        except ImportError:
            return False
        return isinstance(engine, Pipeline)

    def open(self, engine: object, run: RunRecorder) -> AdapterSession:
        from apache_beam import Pipeline

        from .session import BeamSession

        assert isinstance(engine, Pipeline)  # accepts() said so

        return BeamSession(engine, run)


@hookimpl
def provplug_register_adapters(register: Callable[[Any], None]) -> None:
    register(BeamAdapter())
