"""The command line's one output layer (provplug.cli.output): every answer
(:class:`provplug.plugin.protocols.Answer`) prints as text or in the one JSON
layout, and an answer that can be drawn as a picture."""

from __future__ import annotations

import json
from typing import Any

import pytest

from provplug.cli.output import Printed, answer_text, json_text, print_answer
from provplug.plugin.protocols import Answer, PicturedAnswer
from provplug.query.answer import LineageAnswer
from provplug.whatif.answer import WhatIfAnswer
from provplug.whatif.depends import DependsAnswer

NAN = float("nan")


class Drawn:
    def __init__(self) -> None:
        self.asked: list[tuple[str, int | None]] = []

    def to_dict(self) -> dict[str, Any]:
        return {"cells": [1, 2], "mean": NAN}

    def render(self) -> str:
        return "two cells"

    def picture(self, fmt: str, max_cells: int | None = None) -> str:
        self.asked.append((fmt, max_cells))
        return f"<{fmt}>"


def _lineage() -> LineageAnswer:
    cell = {"value_id": 7, "table": "T", "column": "c", "row_number": 0, "value": 1.5, "row": {"c": 1.5}}
    return LineageAnswer(
        query=[cell],
        method="rq",
        direction="up",
        lineage=[],
        edges=[],
        stats={"path": "driver", "sets_read": 1, "triples_scanned": 0, "seconds": 0.0},
    )


def test_the_answers_of_the_commands_are_answers() -> None:
    assert isinstance(_lineage(), Answer)
    assert isinstance(WhatIfAnswer(tables=[], stats={}), Answer)
    assert isinstance(DependsAnswer("no", [], [], [], [], "no path", {}), Answer)
    assert not isinstance(Printed({}, ""), PicturedAnswer)


def test_json_is_the_one_layout_and_text_is_the_rendering() -> None:
    answer = Drawn()
    assert answer_text(answer, "json") == json_text(answer.to_dict())
    assert json.loads(answer_text(answer, "json")) == {"cells": [1, 2], "mean": None}
    assert answer_text(answer, "text") == "two cells"


def test_a_picture_is_drawn_by_the_answer_with_the_cell_limit() -> None:
    answer = Drawn()
    assert answer_text(answer, "svg", 50) == "<svg>" and answer.asked == [("svg", 50)]


def test_an_answer_without_a_picture_is_not_drawn() -> None:
    with pytest.raises(TypeError, match="Printed cannot be drawn as svg"):
        answer_text(Printed({"a": 1}, "a"), "svg")


def test_a_lineage_answer_prints_as_its_own_json_and_text(capsys: pytest.CaptureFixture[str]) -> None:
    answer = _lineage()
    print_answer(answer, as_json=True)
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(answer.to_dict()))
    print_answer(answer, as_json=False)
    assert capsys.readouterr().out == answer.render() + "\n"


def test_a_printed_record_makes_its_text_only_when_printed_as_text(capsys: pytest.CaptureFixture[str]) -> None:
    made: list[int] = []

    def text() -> str:
        made.append(1)
        return "rows: 3"

    print_answer(Printed({"rows": 3}, text), as_json=True)
    assert capsys.readouterr().out == '{\n  "rows": 3\n}\n' and made == []
    print_answer(Printed({"rows": 3}, text), as_json=False)
    assert capsys.readouterr().out == "rows: 3\n" and made == [1]
